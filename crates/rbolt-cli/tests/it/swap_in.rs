//! Files the commands make are safe to swap in: each is synced, then put at its name (the
//! directory synced too) before the command reports success, whatever `--no-sync` says; no
//! command replaces an existing file; `compact` reports the size it wrote; `import` writes no
//! more than `compact`; every sequence survives `compact`, `export` and `import`.
//!
//! The sync order is read from the system calls the real process makes, under `strace`. A
//! machine without a working `strace` skips that test loudly, unless `RBOLT_STRACE=require`
//! (what `.ci/run` sets after installing it) makes that a failure.

use crate::support::{Dir, Run, arg, contents, finish, rbolt, rbolt_with_input, unchanged};
use rbolt_fixtures::{NAMES, manifest_text};
use std::path::Path;
use std::process::Command;

/// One system call of a trace.
#[derive(Debug)]
struct Call {
    name: String,
    /// The arguments as strace prints them, with `-y`'s paths after file descriptors.
    args: String,
    ok: bool,
}

/// The system calls that change a file, sync one, or put one at a name.
const TRACED: &str = "write,writev,pwrite64,pwritev,pwritev2,ftruncate,fallocate,fsync,fdatasync,\
                      link,linkat,rename,renameat,renameat2,unlink,unlinkat";
const WRITES: &[&str] = &[
    "write",
    "writev",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "ftruncate",
    "fallocate",
];
const SYNCS: &[&str] = &["fsync", "fdatasync"];
const PUBLISHES: &[&str] = &["link", "linkat", "rename", "renameat", "renameat2"];

/// Whether strace can trace a process here; a missing or refused strace is a skip, printed,
/// or a failure under `RBOLT_STRACE=require`.
fn strace_works() -> bool {
    let works = Command::new("strace")
        .args(["-qq", "-o", "/dev/null", "true"])
        .status()
        .is_ok_and(|status| status.success());
    let require = std::env::var("RBOLT_STRACE").is_ok_and(|v| v == "require");
    if !works {
        assert!(
            !require,
            "RBOLT_STRACE=require, but strace cannot trace here"
        );
        eprintln!(
            "\n*** swap_in: SKIPPED the sync-order test: strace is missing or cannot trace \
             here. Install strace (Debian's package), or set RBOLT_STRACE=require to make \
             this a failure.\n"
        );
    }
    works
}

/// Runs `rbolt ARGS` under strace; returns the run and its calls in order.
fn traced(dir: &Dir, args: &[&str]) -> (Run, Vec<Call>) {
    let trace = dir.path("trace.txt");
    let output = Command::new("strace")
        .args(["-f", "-qq", "-y", "-e", &format!("trace={TRACED}"), "-o"])
        .arg(&trace)
        .arg(env!("CARGO_BIN_EXE_rbolt"))
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
        .expect("run strace");
    let text = std::fs::read_to_string(&trace).expect("read the trace");
    std::fs::remove_file(&trace).expect("remove the trace");
    (
        finish(output),
        text.lines().filter_map(parse_call).collect(),
    )
}

/// `PID name(args) = result`, from strace's `-o` file (`-f` puts the process id first).
fn parse_call(line: &str) -> Option<Call> {
    let line = line
        .trim_start_matches(|c: char| c.is_ascii_digit())
        .trim_start();
    let open = line.find('(')?;
    let name = &line[..open];
    if !name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_') {
        return None;
    }
    // `args) = result`, the result padded to a column; an `<unfinished ...>` call has its
    // result on a later line, and counts as made.
    let (args, ok) = match line.rfind(" = ") {
        Some(equals) => (
            line[open + 1..equals].trim_end().strip_suffix(')')?,
            !line[equals + 3..].starts_with('-'),
        ),
        None => (&line[open + 1..], true),
    };
    Some(Call {
        name: name.to_owned(),
        args: args.to_owned(),
        ok,
    })
}

/// Whether `call` is on the file descriptor of `path` (`-y` prints `3</path>`).
fn on_file(call: &Call, path: &str) -> bool {
    call.args
        .split_once(", ")
        .map_or(call.args.as_str(), |(first, _)| first)
        .ends_with(&format!("<{path}>"))
}

/// Asserts that `dest` came into being from a temporary file beside it all of whose writes
/// were synced before it was put at `dest`, that the directory was synced after, and that
/// nothing wrote to it afterwards.
#[track_caller]
fn assert_synced_then_published(calls: &[Call], dest: &Path, what: &str) {
    let dest = arg(dest);
    let dir = arg(Path::new(dest).parent().unwrap());
    let published = calls
        .iter()
        .position(|c| {
            PUBLISHES.contains(&c.name.as_str()) && c.ok && c.args.contains(&format!("\"{dest}\""))
        })
        .unwrap_or_else(|| panic!("{what}: {dest} was never linked or renamed into place"));
    let temp = calls[published]
        .args
        .split('"')
        .nth(1)
        .expect("the source path")
        .to_owned();
    assert!(temp.contains(".rbolt-tmp-"), "{what}: made as {temp}");
    let last_write = calls[..published]
        .iter()
        .rposition(|c| WRITES.contains(&c.name.as_str()) && on_file(c, &temp))
        .unwrap_or_else(|| panic!("{what}: nothing was written to {temp}"));
    assert!(
        calls[last_write..published]
            .iter()
            .any(|c| SYNCS.contains(&c.name.as_str()) && c.ok && on_file(c, &temp)),
        "{what}: the last write to {temp} was not synced before it was put at {dest}"
    );
    let after = &calls[published..];
    assert!(
        !after
            .iter()
            .any(|c| WRITES.contains(&c.name.as_str()) && (on_file(c, &temp) || on_file(c, dest))),
        "{what}: written after it was put in place"
    );
    assert!(
        after
            .iter()
            .any(|c| SYNCS.contains(&c.name.as_str()) && c.ok && on_file(c, dir)),
        "{what}: the directory {dir} was not synced after {dest} came into it"
    );
}

/// Issue 46, finding 7: a database file the library creates has its directory entry synced
/// before its first commit is acknowledged as durable, so a power loss cannot lose the whole
/// file after durable commits. Read from the system calls of a real process (`bench`, which
/// creates its database with `Db::open`): the directory's fsync comes before the file's first
/// sync, which makes the empty database durable.
#[test]
fn a_new_database_file_has_its_directory_synced_before_its_first_sync() {
    if !strace_works() {
        return;
    }
    let dir = Dir::new();
    let db = dir.path("new.db");
    let (run, calls) = traced(
        &dir,
        &["bench", "--count", "100", "--work", "--path", arg(&db)],
    );
    assert_eq!(run.code, 0, "{}", run.stderr);
    let db = arg(&db);
    let parent = arg(Path::new(db).parent().unwrap());
    let first_sync = calls
        .iter()
        .position(|c| SYNCS.contains(&c.name.as_str()) && c.ok && on_file(c, db))
        .unwrap_or_else(|| panic!("{db} was never synced"));
    assert!(
        calls[..first_sync]
            .iter()
            .any(|c| SYNCS.contains(&c.name.as_str()) && c.ok && on_file(c, parent)),
        "the directory {parent} was not synced before {db}'s first sync"
    );
}

#[test]
fn every_file_a_command_makes_is_synced_before_it_is_put_in_place() {
    if !strace_works() {
        return;
    }
    let dir = Dir::new();
    let db = dir.fixture("small");
    let manifest = dir.path("small.jsonl");
    std::fs::write(&manifest, manifest_text("small")).unwrap();
    let out = |name: &str| dir.path(name);
    let cases: Vec<(&str, Vec<String>, std::path::PathBuf)> = vec![
        (
            "compact --no-sync",
            vec!["compact".into(), "--no-sync".into(), "-o".into()],
            out("compact-nosync.db"),
        ),
        (
            "compact",
            vec!["compact".into(), "-o".into()],
            out("compact.db"),
        ),
        (
            "import --no-sync",
            vec![
                "import".into(),
                "--no-sync".into(),
                "-i".into(),
                arg(&manifest).into(),
            ],
            out("imported.db"),
        ),
        (
            "export -o",
            vec!["export".into(), arg(&db).into(), "-o".into()],
            out("export.jsonl"),
        ),
        (
            "surgery revert-meta-page",
            vec![
                "surgery".into(),
                "revert-meta-page".into(),
                arg(&db).into(),
                "--output".into(),
            ],
            out("reverted.db"),
        ),
        (
            "surgery freelist abandon",
            vec![
                "surgery".into(),
                "freelist".into(),
                "abandon".into(),
                arg(&db).into(),
                "--output".into(),
            ],
            out("abandoned.db"),
        ),
    ];
    for (what, mut args, dest) in cases {
        args.push(arg(&dest).into());
        if what.starts_with("compact") {
            args.push(arg(&db).into());
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (run, calls) = traced(&dir, &args);
        run.ok();
        assert_synced_then_published(&calls, &dest, what);
        assert!(dest.exists(), "{what}");
    }
    // A surgery that opens its copy as a database (freelist rebuild) too.
    let rebuilt = out("rebuilt.db");
    let abandoned = out("abandoned.db");
    let args = [
        "surgery",
        "freelist",
        "rebuild",
        arg(&abandoned),
        "--output",
        arg(&rebuilt),
    ];
    let (run, calls) = traced(&dir, &args);
    run.ok();
    assert_synced_then_published(&calls, &rebuilt, "surgery freelist rebuild");
    // Nothing of the temporary files is left.
    let left: Vec<String> = std::fs::read_dir(dir.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.contains(".rbolt-tmp-"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

/// Each command that makes a file, run with `dest` as its output.
fn makers<'a>(db: &'a str, manifest: &'a str, dest: &'a str) -> Vec<(&'static str, Vec<&'a str>)> {
    vec![
        ("compact", vec!["compact", "-o", dest, db]),
        ("export", vec!["export", db, "-o", dest]),
        ("import", vec!["import", dest, "-i", manifest]),
        (
            "surgery",
            vec!["surgery", "revert-meta-page", db, "--output", dest],
        ),
        (
            "surgery",
            vec!["surgery", "freelist", "abandon", db, "--output", dest],
        ),
        (
            "surgery",
            vec![
                "surgery", "meta", "update", db, "--output", dest, "--fields", "pgid:21",
            ],
        ),
        (
            "surgery",
            vec![
                "surgery",
                "clear-page",
                db,
                "--output",
                dest,
                "--pageId",
                "3",
            ],
        ),
    ]
}

#[test]
fn no_command_replaces_an_existing_file_but_an_empty_one_is_filled() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    let manifest = dir.path("small.jsonl");
    std::fs::write(&manifest, manifest_text("small")).unwrap();
    // An existing file, a database another process could have open among them: refused, by
    // name, and left as it was. (`import` into an existing database merges, by design; its
    // refusal is for a file that is not one.)
    let existing = dir.fixture("deep");
    let not_a_db = dir.path("notes.txt");
    std::fs::write(&not_a_db, b"keep me\n").unwrap();
    for target in [&existing, &not_a_db] {
        for (what, args) in makers(arg(&db), arg(&manifest), arg(target)) {
            if what == "import" && target == &existing {
                continue;
            }
            let run = unchanged(target, || rbolt(&args));
            let needle = if what == "import" {
                "invalid database"
            } else {
                "already exists"
            };
            run.fails_with(needle);
            assert!(run.stderr.contains(arg(target)), "{what}: {}", run.stderr);
        }
    }
    // An empty file (as `mktemp` makes) holds nothing to lose: each command fills it.
    for (i, (what, _)) in makers("", "", "").into_iter().enumerate() {
        let dest = dir.path(&format!("empty-{i}"));
        std::fs::write(&dest, b"").unwrap();
        let args = &makers(arg(&db), arg(&manifest), arg(&dest))[i].1;
        let run = rbolt(args);
        assert_eq!(run.code, 0, "{what}: {}", run.stderr);
        assert!(!contents(&dest).is_empty(), "{what}");
    }
    assert_eq!(rbolt(["check", arg(&dir.path("empty-0"))]).ok(), "OK\n");
    assert!(contents(&dir.path("empty-1")) == manifest_text("small").as_bytes());
}

/// `info`'s high-water mark: the pages the file's meta uses.
fn high_water(db: &Path) -> u64 {
    let info = rbolt(["info", arg(db)]).ok();
    let line = info.lines().find(|l| l.starts_with("HWM: <pgid=")).unwrap();
    line["HWM: <pgid=".len()..line.len() - 1].parse().unwrap()
}

/// A file of random keys written in many transactions: pages about 69% full and free pages
/// between them, as a live database has.
fn random_db(dir: &Dir, name: &str) -> std::path::PathBuf {
    let path = dir.path(name);
    let db = rbolt::Db::open(&path).unwrap();
    let mut rng = rbolt_fixtures::rng::Rng::new(25);
    for batch in 0..20u32 {
        db.update(|tx| {
            let mut b = tx.create_bucket_if_not_exists(b"random")?;
            for _ in 0..500 {
                b.put(rng.next_u64().to_be_bytes(), [batch as u8; 60])?;
            }
            b.set_sequence(u64::from(batch))?;
            let mut nested = b.create_bucket_if_not_exists(b"nested")?;
            nested.put(batch.to_be_bytes(), "text value")?;
            nested.set_sequence(1000 + u64::from(batch))
        })
        .unwrap();
    }
    path
}

#[test]
fn compact_reports_the_size_it_wrote_and_import_writes_no_more() {
    let dir = Dir::new();
    let mut files: Vec<(String, std::path::PathBuf)> = NAMES
        .iter()
        .map(|name| (name.to_string(), dir.fixture(name)))
        .collect();
    files.push(("random".into(), random_db(&dir, "random.db")));
    for (name, db) in files {
        let page_size = rbolt(["info", arg(&db)]).ok().lines().next().unwrap()
            ["Page Size: ".len()..]
            .to_owned();
        let compacted = dir.path(&format!("{name}.compact.db"));
        let line = rbolt(["compact", "-o", arg(&compacted), arg(&db)]).ok();
        let size = std::fs::metadata(&compacted).unwrap().len();
        // The copy is as long as its pages (Go bbolt opens nothing under 4 KiB), not as the
        // growth step it was allocated in...
        let pages_len = high_water(&compacted) * page_size.parse::<u64>().unwrap();
        assert_eq!(size, pages_len.max(4096), "{name}");
        let source = std::fs::metadata(&db).unwrap().len();
        assert!(
            line.starts_with(&format!("{source} -> {size} bytes")),
            "{name}: {line}"
        );
        // ...and a vacuum right after finds nothing to give back.
        let vacuum = rbolt(["vacuum", arg(&compacted)]).ok();
        assert!(
            vacuum.starts_with(&format!("{size} -> {size} bytes (gain=1.00x)")),
            "{name}: {vacuum}"
        );
        assert_eq!(rbolt(["check", arg(&compacted)]).ok(), "OK\n", "{name}");
        // Export, import: the same content, in no more bytes than compact's.
        let exported = dir.path(&format!("{name}.jsonl"));
        rbolt(["export", arg(&db), "-o", arg(&exported)]).ok();
        let imported = dir.path(&format!("{name}.imported.db"));
        rbolt([
            "import",
            arg(&imported),
            "-i",
            arg(&exported),
            "--page-size",
            &page_size,
        ])
        .ok();
        let imported_len = std::fs::metadata(&imported).unwrap().len();
        assert!(
            imported_len <= size,
            "{name}: import wrote {imported_len} bytes, compact {size}"
        );
        assert_eq!(rbolt(["check", arg(&imported)]).ok(), "OK\n", "{name}");
        assert!(rbolt(["export", arg(&imported)]).ok().as_bytes() == contents(&exported));
    }
}

/// The root bucket's sequence, read by the library itself.
fn root_sequence(db: &Path) -> u64 {
    let options = rbolt::Options::default().read_only(true);
    let db = rbolt::Db::open_with(db, options).unwrap();
    db.begin_read().unwrap().root().sequence()
}

#[test]
fn every_sequence_survives_compact_export_and_import_the_roots_too() {
    let dir = Dir::new();
    // A file whose root bucket has a sequence (only other tools set one), made by import.
    let lines = concat!(
        "{\"bucket\":[],\"sequence\":77}\n",
        "{\"bucket\":[\"a\"],\"sequence\":5}\n",
        "{\"bucket\":[\"a\",\"inner\"],\"sequence\":18446744073709551615}\n",
        "{\"bucket\":[\"a\"],\"key\":\"6b\",\"value\":\"76\"}\n",
    );
    let db = dir.path("rooted.db");
    rbolt_with_input(["import", arg(&db)], lines.as_bytes()).ok();
    assert_eq!(root_sequence(&db), 77);
    assert_eq!(rbolt(["check", arg(&db)]).ok(), "OK\n");
    // Export writes it first, and every other sequence where it was.
    let exported = rbolt(["export", arg(&db)]).ok();
    assert_eq!(exported, lines);
    // Compact keeps it, with or without syncs, in one transaction or many.
    for flags in [&[][..], &["--no-sync", "--tx-max-size", "1"][..]] {
        let compacted = dir.path(&format!("rooted-{}.db", flags.len()));
        let mut args = vec!["compact", "-o", arg(&compacted)];
        args.extend(flags);
        args.push(arg(&db));
        rbolt(&args).ok();
        assert_eq!(root_sequence(&compacted), 77, "{flags:?}");
        assert_eq!(rbolt(["export", arg(&compacted)]).ok(), lines, "{flags:?}");
        assert_eq!(rbolt(["check", arg(&compacted)]).ok(), "OK\n");
    }
    // A file without one exports no root line (so the fixtures' manifests are unchanged).
    let plain = dir.fixture("small");
    assert!(
        !rbolt(["export", arg(&plain)])
            .ok()
            .contains("\"bucket\":[],")
    );
    // An existing database takes the line when it changes nothing, and refuses it, by line
    // number and before anything is written, when it would: only a new file can get it.
    rbolt_with_input(["import", arg(&db)], lines.as_bytes()).ok();
    let changed = "{\"bucket\":[],\"sequence\":78}\n{\"bucket\":[\"z\"],\"sequence\":0}\n";
    unchanged(&db, || {
        rbolt_with_input(["import", arg(&db)], changed.as_bytes())
            .fails_with("line 1")
            .fails_with("root bucket's sequence is 77");
    });
}

#[test]
fn export_formats_spell_text_and_round_trip_every_byte() {
    let dir = Dir::new();
    let db = dir.path("mixed.db");
    {
        let db = rbolt::Db::open(&db).unwrap();
        db.update(|tx| {
            let mut b = tx.create_bucket(b"b")?;
            b.put("plain", "hello world")?;
            b.put("tab", "a\tb \"quoted\" back\\slash")?;
            b.put("unicode", "ünïcödé ☃ 𝄞")?;
            b.put(b"\xff\x00binary", b"\xc3\x28 not UTF-8")?;
            b.put("empty", "")?;
            b.put("nul", "\0")?;
            let mut big = b.create_bucket(b"big")?;
            big.put("large", "x\n".repeat(50_000))
        })
        .unwrap();
    }
    let hex = rbolt(["export", arg(&db)]).ok();
    assert_eq!(hex, rbolt(["export", arg(&db), "--format", "hex"]).ok());
    assert!(!hex.contains("\"text\""), "hex is the default: {hex}");
    let auto = rbolt(["export", arg(&db), "--format", "auto"]).ok();
    let text = rbolt(["export", "-format=text", arg(&db)]).ok();
    let line = |export: &str, key: &str| {
        export
            .lines()
            .find(|l| l.contains(key))
            .unwrap_or_else(|| panic!("no line for {key} in {export}"))
            .to_owned()
    };
    // Printable text is text in both; text with control characters only in `text`;
    // bytes that are not UTF-8 hex in both.
    let plain =
        "{\"bucket\":[\"b\"],\"key\":{\"text\":\"plain\"},\"value\":{\"text\":\"hello world\"}}";
    assert_eq!(line(&auto, "\"plain\""), plain);
    assert_eq!(line(&text, "\"plain\""), plain);
    assert_eq!(
        line(&text, "\"tab\""),
        "{\"bucket\":[\"b\"],\"key\":{\"text\":\"tab\"},\
         \"value\":{\"text\":\"a\\tb \\\"quoted\\\" back\\\\slash\"}}"
    );
    let tab_hex = rbolt_fixtures::hex(b"a\tb \"quoted\" back\\slash");
    assert!(line(&auto, "\"tab\"").ends_with(&format!(",\"value\":\"{tab_hex}\"}}")));
    assert!(line(&text, "ünïcödé").contains("☃ 𝄞"));
    let binary = "\"key\":\"ff0062696e617279\",\"value\":\"c328206e6f74205554462d38\"";
    assert!(line(&auto, "ff0062696e617279").contains(binary));
    assert!(line(&text, "ff0062696e617279").contains(binary));
    assert!(line(&text, "\"nul\"").contains("{\"text\":\"\\u0000\"}"));
    // Every spelling imports back to the same bytes.
    for (name, export) in [("hex", &hex), ("auto", &auto), ("text", &text)] {
        let copy = dir.path(&format!("{name}.db"));
        rbolt_with_input(["import", arg(&copy)], export.as_bytes()).ok();
        assert!(rbolt(["export", arg(&copy)]).ok() == hex, "{name}");
        assert_eq!(rbolt(["check", arg(&copy)]).ok(), "OK\n");
    }
    assert_eq!(rbolt(["export", arg(&db), "--format", "utf8"]).code, 2);
}

#[test]
fn bad_import_lines_are_errors_that_name_them() {
    let dir = Dir::new();
    let db = dir.path("new.db");
    let cases: [(&str, &str); 4] = [
        (
            "{\"bucket\":[\"a\"],\"key\":{\"text\":5},\"value\":\"00\"}\n",
            "a hex string, {\"text\": \"...\"} or {\"hex\": \"...\"}",
        ),
        (
            "{\"bucket\":[\"a\"],\"key\":\"00\",\"value\":{\"hex\":\"0g\"}}\n",
            "value: invalid hex digit",
        ),
        (
            "{\"bucket\":[],\"key\":{\"text\":\"k\"},\"value\":\"00\"}\n",
            "a value in the root bucket",
        ),
        ("{\"bucket\":[],\"sequence\":-1}\n", "line 1"),
    ];
    for (input, needle) in cases {
        rbolt_with_input(["import", arg(&db)], input.as_bytes())
            .fails_with(needle)
            .fails_with("line 1");
        assert!(!db.exists(), "a failed import makes no file");
    }
}
