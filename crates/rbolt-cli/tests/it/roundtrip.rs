//! Commands that write: `import` (round trips with `export`), `compact`, `vacuum`, `put`, `delete`.

use crate::support::{Dir, arg, rbolt, rbolt_with_input, unchanged};
use rbolt_fixtures::{NAMES, manifest_text};

#[test]
fn import_of_every_manifest_exports_the_same() {
    let dir = Dir::new();
    for name in NAMES {
        let manifest = manifest_text(name);
        let input = dir.path(&format!("{name}.jsonl"));
        std::fs::write(&input, &manifest).unwrap();
        let db = dir.path(&format!("{name}.imported.db"));
        // Small batches so that imports span several transactions.
        rbolt([
            "import",
            arg(&db),
            "--input",
            arg(&input),
            "--batch-size",
            "5000",
        ])
        .ok();
        let exported = rbolt(["export", arg(&db)]).ok();
        assert!(
            exported == manifest,
            "{name}: the round trip changed the content"
        );
        assert_eq!(rbolt(["check", arg(&db)]).ok(), "OK\n", "{name}");
    }
}

#[test]
fn import_reads_standard_input_and_merges_into_an_existing_file() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    let input = concat!(
        "{\"bucket\":[\"alpha\"],\"key\":\"6e6577\",\"value\":\"76\"}\n",
        "{\"bucket\":[\"fresh\",{\"hex\":\"00ff\"}],\"sequence\":7}\n",
        "{\"bucket\":[\"fresh\",{\"hex\":\"00ff\"}],\"key\":\"6b\",\"value\":\"\"}\n",
    );
    let run = rbolt_with_input(["import", arg(&db), "--no-sync"], input.as_bytes());
    run.ok();
    assert_eq!(rbolt(["get", arg(&db), "alpha", "new"]).ok(), "v\n");
    let exported = rbolt(["export", arg(&db)]).ok();
    assert!(exported.contains("{\"bucket\":[\"fresh\",{\"hex\":\"00ff\"}],\"sequence\":7}\n"));
    assert!(
        exported.contains(
            "{\"bucket\":[\"fresh\",{\"hex\":\"00ff\"}],\"key\":\"6b\",\"value\":\"\"}\n"
        )
    );
    // Everything that was there is still there.
    assert_eq!(
        exported.lines().count(),
        manifest_text("small").lines().count() + 4
    );
    assert_eq!(rbolt(["check", arg(&db)]).ok(), "OK\n");
}

#[test]
fn import_rejects_bad_lines_by_number() {
    let dir = Dir::new();
    let db = dir.path("new.db");
    let cases: [(&str, &str); 4] = [
        ("{\"bucket\":[\"a\"],\"sequence\":1}\nnot json\n", "line 2"),
        (
            "{\"bucket\":[\"a\"],\"key\":\"zz\",\"value\":\"00\"}\n",
            "line 1",
        ),
        (
            "{\"bucket\":[\"a\"],\"key\":\"00\"}\n",
            "either \"sequence\" or both",
        ),
        (
            "{\"bucket\":[\"a\"],\"sequence\":1,\"extra\":2}\n",
            "unknown field",
        ),
    ];
    for (input, needle) in cases {
        rbolt_with_input(["import", arg(&db)], input.as_bytes()).fails_with(needle);
    }
    // A line that puts a value where a bucket is.
    let input =
        "{\"bucket\":[\"a\"],\"sequence\":0}\n{\"bucket\":[],\"key\":\"61\",\"value\":\"00\"}\n";
    rbolt_with_input(["import", arg(&db)], input.as_bytes()).fails_with("line 2");
    // A file the failed import created is not left behind; an existing one is kept.
    assert!(!db.exists());
    let existing = dir.fixture("small");
    rbolt_with_input(["import", arg(&existing)], b"oops\n").fails_with("line 1");
    assert!(rbolt(["export", arg(&existing)]).ok() == manifest_text("small"));
}

#[test]
fn export_never_overwrites_the_database() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    unchanged(&db, || {
        rbolt(["export", arg(&db), "-o", arg(&db)]).fails_with("names the database itself");
    });
}

#[test]
fn compact_copies_every_fixture() {
    let dir = Dir::new();
    for name in NAMES {
        let db = dir.fixture(name);
        let out = dir.path(&format!("{name}.compact.db"));
        let run = unchanged(&db, || rbolt(["compact", "-o", arg(&out), arg(&db)]));
        let line = run.ok();
        // bbolt's line: "X -> Y bytes (gain=Z.ZZx)".
        let source_len = std::fs::metadata(&db).unwrap().len();
        let out_len = std::fs::metadata(&out).unwrap().len();
        let expected = format!(
            "{source_len} -> {out_len} bytes (gain={:.2}x)\n",
            source_len as f64 / out_len as f64
        );
        assert_eq!(line, expected, "{name}");
        assert!(
            rbolt(["export", arg(&out)]).ok() == manifest_text(name),
            "{name}"
        );
        assert_eq!(rbolt(["check", arg(&out)]).ok(), "OK\n", "{name}");
        let source_info = rbolt(["info", arg(&db)]).ok();
        let out_info = rbolt(["info", arg(&out)]).ok();
        assert_eq!(
            source_info.lines().next(),
            out_info.lines().next(),
            "{name}: page size kept"
        );
    }
}

#[test]
fn compact_refuses_to_overwrite_and_honours_its_flags() {
    let dir = Dir::new();
    let db = dir.fixture("deep");
    let out = dir.path("out.db");
    rbolt([
        "compact",
        "--no-sync",
        "--tx-max-size",
        "0",
        "-o",
        arg(&out),
        arg(&db),
    ])
    .ok();
    assert!(rbolt(["export", arg(&out)]).ok() == manifest_text("deep"));
    rbolt(["compact", "-o", arg(&out), arg(&db)]).fails_with("already exists");
    rbolt(["compact", "-o", arg(&db), arg(&db)]).fails_with("names the source file");
    // -o is required: a usage error.
    assert_eq!(rbolt(["compact", arg(&db)]).code, 2);
}

#[test]
fn put_get_delete() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    rbolt(["put", arg(&db), "alpha", "k1", "v1"]).ok();
    assert_eq!(rbolt(["get", arg(&db), "alpha", "k1"]).ok(), "v1\n");
    // Hex keys and values; nested buckets created on request only.
    let put_hex = |flags: &[&str]| {
        let path = [
            arg(&db),
            "new",
            "sub",
            "00ff",
            "0102",
            "--parse-format",
            "hex",
        ];
        rbolt(["put"].iter().chain(flags).chain(&path))
    };
    put_hex(&[]).fails_with("bucket not found: new/sub");
    put_hex(&["-p"]).ok();
    let value = rbolt([
        "get",
        arg(&db),
        "new",
        "sub",
        "00ff",
        "--parse-format",
        "hex",
    ])
    .ok();
    assert_eq!(value, "0102\n");
    rbolt(["delete", arg(&db), "alpha", "k1"]).ok();
    rbolt(["get", arg(&db), "alpha", "k1"]).fails_with("not found in bucket alpha");
    rbolt(["delete", arg(&db), "alpha", "k1"]).fails_with("not found in bucket alpha");
    rbolt(["delete", arg(&db), "beta", "one"]).fails_with("--bucket");
    rbolt(["delete", "--bucket", arg(&db), "beta", "one"]).ok();
    assert_eq!(rbolt(["keys", arg(&db), "beta"]).ok(), "aaa\ntwo\nzzz\n");
    rbolt(["delete", "--bucket", arg(&db), "new"]).ok();
    rbolt(["delete", "--bucket", arg(&db), "new"]).fails_with("bucket not found: new");
    // A value where a bucket is expected, and the other way round.
    rbolt(["put", arg(&db), "beta", "two", "x"]).fails_with("incompatible value");
    rbolt(["put", arg(&db), "beta", "aaa", "k", "v"]).fails_with("beta/aaa");
    assert_eq!(rbolt(["check", arg(&db)]).ok(), "OK\n");
    // put never creates a database file.
    rbolt(["put", arg(&dir.path("missing.db")), "b", "k", "v"]).fails_with("does not exist");
    assert!(!dir.path("missing.db").exists());
}

#[test]
fn vacuum_shrinks_in_place_and_keeps_every_key() {
    let dir = Dir::new();
    let db_path = dir.path("thinned.db");
    {
        let db = rbolt::Db::open(&db_path).unwrap();
        db.update(|tx| {
            let mut b = tx.create_bucket(b"b")?;
            for i in 0..30_000u32 {
                b.put(i.to_be_bytes(), [7; 100])?;
            }
            b.create_bucket(b"nested")?.put(b"k", b"v")
        })
        .unwrap();
        db.update(|tx| {
            let mut b = tx.bucket_mut(b"b")?.unwrap();
            for i in (0..30_000u32).filter(|i| i % 10 != 0) {
                b.delete(i.to_be_bytes())?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
    }
    let before_export = rbolt(["export", arg(&db_path)]).ok();
    let before = std::fs::metadata(&db_path).unwrap().len();
    let line = rbolt(["vacuum", arg(&db_path)]).ok();
    let after = std::fs::metadata(&db_path).unwrap().len();
    assert!(after < before / 3, "{before} -> {after}");
    // "X -> Y bytes (gain=Z.ZZx), N pages moved in S steps, T", as compact's line begins.
    let expected_start = format!(
        "{before} -> {after} bytes (gain={:.2}x), ",
        before as f64 / after as f64
    );
    assert!(line.starts_with(&expected_start), "{line}");
    assert!(
        line.contains(" pages moved in ") && line.ends_with('\n'),
        "{line}"
    );
    assert_eq!(rbolt(["check", arg(&db_path)]).ok(), "OK\n");
    assert!(rbolt(["export", arg(&db_path)]).ok() == before_export);
    // Again: nothing left to move, and the file does not grow.
    let again = rbolt(["vacuum", "--step-pages", "16", arg(&db_path)]).ok();
    assert!(again.starts_with(&format!("{after} -> ")), "{again}");
    assert!(std::fs::metadata(&db_path).unwrap().len() <= after);
}

#[test]
fn vacuum_keeps_every_fixture_and_refuses_a_missing_file() {
    let dir = Dir::new();
    for name in NAMES {
        let db = dir.fixture(name);
        let manifest = rbolt(["export", arg(&db)]).ok();
        rbolt(["vacuum", arg(&db)]).ok();
        assert_eq!(rbolt(["check", arg(&db)]).ok(), "OK\n", "{name}");
        assert!(rbolt(["export", arg(&db)]).ok() == manifest, "{name}");
    }
    rbolt(["vacuum", arg(&dir.path("missing.db"))]).fails_with("does not exist");
}
