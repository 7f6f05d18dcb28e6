//! Damaged, foreign, missing and locked files: one clear error line naming the file, a
//! non-zero exit, never a panic; `check` lists what is wrong.

use crate::support::{Dir, arg, assert_one_error_line, contents, rbolt, unchanged};
use std::path::Path;

/// Every read command, with the arguments it needs after the path.
const READ_COMMANDS: &[(&str, &[&str])] = &[
    ("info", &[]),
    ("buckets", &[]),
    ("keys", &["alpha"]),
    ("get", &["alpha", "alpha-00"]),
    ("stats", &[]),
    ("pages", &[]),
    ("inspect", &[]),
    ("export", &[]),
];

/// Runs every read command on `path`; each must fail with one line naming the file.
#[track_caller]
fn every_read_command_fails(path: &Path) {
    for (command, extra) in READ_COMMANDS {
        let mut args = vec![*command, arg(path)];
        args.extend_from_slice(extra);
        let run = unchanged(path, || rbolt(&args));
        assert_eq!(
            run.code,
            1,
            "{command} on {}: {}",
            path.display(),
            run.stderr
        );
        assert_one_error_line(&run.stderr);
        let name = path.file_name().unwrap().to_str().unwrap();
        assert!(run.stderr.contains(name), "{command}: {}", run.stderr);
    }
}

/// Runs `check` on `path`; it must exit 1 after listing errors and `N errors found`.
#[track_caller]
fn check_finds_errors(path: &Path) -> String {
    let run = unchanged(path, || rbolt(["check", arg(path)]));
    assert_eq!(run.code, 1, "{}", run.out());
    assert_one_error_line(&run.stderr);
    let out = run.out();
    let lines: Vec<&str> = out.lines().collect();
    let last = lines.last().expect("check prints a summary");
    let count: usize = last
        .strip_suffix(" errors found")
        .unwrap_or_else(|| panic!("no summary in {out}"))
        .parse()
        .unwrap();
    assert!(count > 0);
    assert_eq!(count, lines.len() - 1, "one line per error: {out}");
    out
}

#[test]
fn a_missing_file() {
    let dir = Dir::new();
    let path = dir.path("missing.db");
    for (command, extra) in READ_COMMANDS {
        let mut args = vec![*command, arg(&path)];
        args.extend_from_slice(extra);
        rbolt(&args).fails_with("missing.db does not exist");
    }
    for command in ["check", "dump", "page", "page-item"] {
        let mut args = vec![command, arg(&path)];
        if command != "check" {
            args.extend(["2", "0"]);
        }
        rbolt(&args).fails_with("does not exist");
    }
    assert!(!path.exists(), "no command creates the file");
}

#[test]
fn not_a_database() {
    let dir = Dir::new();
    let path = dir.path("notes.db");
    std::fs::write(&path, "these are my notes, not a database\n".repeat(300)).unwrap();
    every_read_command_fails(&path);
    check_finds_errors(&path);
    rbolt(["dump", arg(&path), "0"]).fails_with("cannot find the page size");
}

#[test]
fn an_empty_file() {
    let dir = Dir::new();
    let path = dir.path("empty.db");
    std::fs::write(&path, b"").unwrap();
    every_read_command_fails(&path);
    let out = check_finds_errors(&path);
    assert!(out.contains("too short"), "{out}");
}

#[test]
fn a_truncated_file() {
    let dir = Dir::new();
    for name in ["small", "deep"] {
        let path = dir.damaged(name, &format!("{name}-truncated.db"), |bytes| {
            bytes.truncate(bytes.len() / 3);
        });
        every_read_command_fails(&path);
        let out = check_finds_errors(&path);
        assert!(out.contains("lies past the end"), "{out}");
    }
    // Shorter than one meta page.
    let path = dir.damaged("small", "stub.db", |bytes| bytes.truncate(40));
    every_read_command_fails(&path);
    check_finds_errors(&path);
}

#[test]
fn a_zeroed_meta_page() {
    let dir = Dir::new();
    // The current meta of `small` is page 0 (small.json: active_meta 0).
    let path = dir.damaged("small", "zeroed.db", |bytes| bytes[..4096].fill(0));
    // The file still opens from the other meta, one transaction back...
    let info = unchanged(&path, || rbolt(["info", arg(&path)]).ok());
    assert!(info.contains("Txn ID: 9\n"), "{info}");
    // ...but check says the meta is gone.
    let out = check_finds_errors(&path);
    assert!(out.starts_with("meta page 0: "), "{out}");
    let validate = rbolt(["surgery", "meta", "validate", arg(&path)]).ok();
    assert!(
        validate.starts_with("WARNING: The meta page 0 isn't valid: "),
        "{validate}"
    );
    assert!(
        validate.ends_with("The meta page 1 is valid!\n"),
        "{validate}"
    );
    // Both metas zeroed: nothing opens.
    let both = dir.damaged("small", "zeroed-both.db", |bytes| bytes[..8192].fill(0));
    every_read_command_fails(&both);
    check_finds_errors(&both);
}

#[test]
fn flipped_bytes_in_a_tree_page() {
    let dir = Dir::new();
    // Page 19 is the root bucket's leaf; its first element's position goes wild.
    let path = dir.damaged("small", "flipped.db", |bytes| {
        bytes[19 * 4096 + 20..19 * 4096 + 24].fill(0xff);
    });
    let out = check_finds_errors(&path);
    assert!(out.starts_with("page 19: element 0 ends at byte"), "{out}");
    for command in ["buckets", "export", "inspect", "stats"] {
        rbolt([command, arg(&path)]).fails_with("page 19");
    }
    // The raw page commands still show the page.
    let page = rbolt(["page", arg(&path), "19"]);
    assert_eq!(page.code, 1);
    assert!(
        page.out().contains("Printing page 19 failed: "),
        "{}",
        page.out()
    );
    let dump = rbolt(["dump", arg(&path), "19"]).ok();
    assert!(dump.contains("ffff ffff"), "{dump}");
}

#[test]
fn flipped_bytes_in_a_leaf_of_a_big_tree() {
    let dir = Dir::new();
    // Scribble over the middle of every page of `deep` from page 100 on: keys fall out of
    // order or out of bounds; nothing may panic.
    let path = dir.damaged("deep", "scribbled.db", |bytes| {
        for page in 100..bytes.len() / 4096 {
            let at = page * 4096 + 2000;
            bytes[at..at + 8].copy_from_slice(&[0xa5; 8]);
        }
    });
    check_finds_errors(&path);
    let run = rbolt(["export", arg(&path)]);
    assert!(run.code == 0 || run.code == 1);
    if run.code == 1 {
        assert_one_error_line(&run.stderr);
    }
}

#[test]
fn a_locked_file() {
    let dir = Dir::new();
    let path = dir.fixture("small");
    // A writer in this process holds the exclusive lock, as a running server would, and
    // keeps no reader table, as Go bbolt's writer does not.
    let options = rbolt::Options::default().readers_beside_writer(false);
    let db = rbolt::Db::open_with(&path, options).unwrap();
    for (command, extra) in READ_COMMANDS {
        let mut args = vec![*command, arg(&path)];
        args.extend_from_slice(extra);
        rbolt(&args)
            .fails_with("small.db is locked by another process")
            .fails_with("cannot read beside it (cannot open the lock file");
    }
    rbolt(["check", arg(&path)]).fails_with("locked");
    rbolt(["put", arg(&path), "alpha", "k", "v"]).fails_with("locked");
    let out = dir.path("out.db");
    rbolt([
        "surgery",
        "revert-meta-page",
        arg(&path),
        "--output",
        arg(&out),
    ])
    .fails_with("locked");
    assert!(!out.exists());
    // A bounded wait gives up after about that long.
    let started = std::time::Instant::now();
    rbolt(["info", "--timeout", "300ms", arg(&path)]).fails_with("after waiting 300ms");
    assert!(started.elapsed() >= std::time::Duration::from_millis(300));
    // Raw page commands read through the facade's storage and take its shared lock too (bbolt's
    // take none): a page read mid-commit could be half written.
    rbolt(["page", arg(&path), "0"]).fails_with("locked");
    rbolt(["dump", arg(&path), "0"]).fails_with("locked");
    drop(db);
    rbolt(["info", arg(&path)]).ok();
    // An rbolt writer with its reader table: the read commands read beside it, the raw page
    // commands (which read free pages the writer rewrites) and writers are still refused.
    let db = rbolt::Db::open(&path).unwrap();
    for (command, extra) in READ_COMMANDS {
        let mut args = vec![*command, arg(&path)];
        args.extend_from_slice(extra);
        let run = rbolt(&args);
        if *command == "pages" {
            run.fails_with("raw page access needs a database opened read-only with no writer");
        } else {
            assert_eq!(run.code, 0, "{command} beside a writer: {}", run.stderr);
        }
    }
    assert_eq!(rbolt(["check", arg(&path), "--no-progress"]).ok(), "OK\n");
    rbolt(["page", arg(&path), "0"]).fails_with("locked");
    rbolt(["put", arg(&path), "alpha", "k", "v"]).fails_with("locked");
    drop(db);
}

#[test]
fn readers_share_the_lock() {
    let dir = Dir::new();
    let path = dir.fixture("small");
    let reader = rbolt::Db::open_with(&path, rbolt::Options::default().read_only(true)).unwrap();
    rbolt(["info", arg(&path)]).ok();
    rbolt(["put", arg(&path), "alpha", "k", "v"]).fails_with("locked");
    drop(reader);
    rbolt(["put", arg(&path), "alpha", "k", "v"]).ok();
}

/// Rewrites meta page `slot` (4 KiB pages) of `bytes` with `edit` applied to its record, with
/// a correct checksum: durable, or non-durable with a boot id when `boot_id` is given.
fn rewrite_meta(
    bytes: &mut [u8],
    slot: usize,
    boot_id: Option<[u8; 16]>,
    edit: impl FnOnce(&mut rbolt_page::Meta),
) {
    let page = &mut bytes[slot * 4096..(slot + 1) * 4096];
    let (mut meta, _) = rbolt_page::read_meta_page(page, rbolt_page::Pgid(slot as u64)).unwrap();
    edit(&mut meta);
    match boot_id {
        None => rbolt_page::write_meta(page, &meta),
        Some(boot) => rbolt_page::write_meta_non_durable(page, &meta, &boot, &[0; 16]),
    };
}

/// The older meta is the previous commit: one written without syncs is sound, and one whose
/// high-water mark a later shrink cut off is what a truncation leaves until the next commit,
/// not damage. The same fault in the newer meta, which the database falls back from, is.
#[test]
fn check_judges_the_older_meta_as_the_database_does() {
    let dir = Dir::new();
    // `small`: meta 0 is the newer (txid 10), meta 1 the older (txid 9); 64 pages.
    let past_end = |meta: &mut rbolt_page::Meta| meta.pgid = 100;
    let older = dir.damaged("small", "older-past-end.db", |b| {
        rewrite_meta(b, 1, None, past_end)
    });
    assert_eq!(rbolt(["check", arg(&older)]).ok(), "OK\n");
    let unsynced = dir.damaged("small", "older-unsynced.db", |b| {
        rewrite_meta(b, 1, Some([7; 16]), |_| {})
    });
    assert_eq!(rbolt(["check", arg(&unsynced)]).ok(), "OK\n");
    let newer = dir.damaged("small", "newer-past-end.db", |b| {
        rewrite_meta(b, 0, None, past_end)
    });
    let out = check_finds_errors(&newer);
    assert!(
        out.starts_with("meta page 0: high-water mark 100 lies past the end"),
        "{out}"
    );
    // Both past the end: the older one is no fallback, and says so.
    let both = dir.damaged("small", "both-past-end.db", |b| {
        rewrite_meta(b, 0, None, past_end);
        rewrite_meta(b, 1, None, past_end);
    });
    let out = check_finds_errors(&both);
    assert!(out.contains("meta page 1: high-water mark 100"), "{out}");
}

/// Issue 51: a file a crash left with one-sync metas (the newest commit's and the one
/// before) is no damaged file: `check` passes, `info` reads it, and `surgery freelist
/// abandon` leaves rbolt's own meta forms alone instead of calling them invalid.
#[test]
fn one_sync_metas_read_as_sound() {
    let dir = Dir::new();
    let path = dir.path("live.db");
    let db = rbolt::Db::open_with(&path, rbolt::Options::default().one_sync(true)).unwrap();
    for i in 0..3u32 {
        db.update(|tx| {
            tx.create_bucket_if_not_exists("b")?
                .put(i.to_be_bytes(), "v")
        })
        .unwrap();
    }
    // What a crash leaves: the file as the page cache holds it, no close.
    let crashed = dir.path("crashed.db");
    std::fs::copy(&path, &crashed).unwrap();
    drop(db);
    let bytes = contents(&crashed);
    for slot in 0..2 {
        let page = &bytes[slot * 4096..(slot + 1) * 4096];
        let (_, kind) = rbolt_page::read_meta_page(page, rbolt_page::Pgid(slot as u64)).unwrap();
        assert_eq!(kind, rbolt_page::MetaDurability::OneSync, "meta {slot}");
    }
    assert_eq!(rbolt(["check", arg(&crashed)]).ok(), "OK\n");
    rbolt(["info", arg(&crashed)]).ok();
    let output = dir.path("abandoned.db");
    rbolt([
        "surgery",
        "freelist",
        "abandon",
        "--output",
        arg(&output),
        arg(&crashed),
    ])
    .fails_with("one-sync commit");
    assert_eq!(contents(&crashed), bytes, "surgery wrote the file");
}

/// Issue 51, attack 5: a crash during a one-sync commit's sync can keep its meta and drop one
/// of its pages. The database opens at the meta before it (the digest fails), so the newest
/// commit is lost, as with a torn meta: `check` opened the file right and said `OK`, as its
/// raw reading of the metas took any one-sync meta for sound. Now it names the meta, like a
/// torn one, and writes nothing; the read commands read the file at the meta it opens at.
#[test]
fn a_one_sync_meta_whose_pages_do_not_give_its_digest_is_reported() {
    let dir = Dir::new();
    let path = dir.path("live.db");
    let db = rbolt::Db::open_with(&path, rbolt::Options::default().one_sync(true)).unwrap();
    for i in 0..40u32 {
        db.update(|tx| {
            tx.create_bucket_if_not_exists("b")?
                .put(i.to_be_bytes(), [i as u8; 100])
        })
        .unwrap();
    }
    let crashed = dir.path("crashed.db");
    std::fs::copy(&path, &crashed).unwrap();
    drop(db);
    let mut bytes = contents(&crashed);
    let (slot, meta) = (0..2usize)
        .map(|slot| {
            let page = &bytes[slot * 4096..(slot + 1) * 4096];
            let (meta, kind) =
                rbolt_page::read_meta_page(page, rbolt_page::Pgid(slot as u64)).unwrap();
            assert_eq!(kind, rbolt_page::MetaDurability::OneSync, "meta {slot}");
            (slot, meta)
        })
        .max_by_key(|(_, meta)| meta.txid)
        .unwrap();
    let page = &bytes[slot * 4096..(slot + 1) * 4096];
    let record = rbolt_page::OneSyncRecord::read(page, &meta).unwrap();
    let first = record.runs().next().unwrap().start.0 as usize;
    // The first page of its first run, as a power loss can leave it: one sector garbled.
    bytes[first * 4096 + 1000] ^= 0x5a;
    std::fs::write(&crashed, &bytes).unwrap();
    let out = check_finds_errors(&crashed);
    assert!(out.contains(&format!("meta page {slot}")), "{out}");
    assert!(out.contains("digest"), "{out}");
    assert_eq!(contents(&crashed), bytes, "check wrote the file");
}

/// Issue 51, the second landing: a one-sync commit writes no freelist page (its meta says
/// "none"). On a crashed file whose newest meta is such a one and whose free pages are hundreds
/// (most of a tree deleted), `check` says OK, `info` shows no freelist, and `pages` marks as
/// free exactly the pages nothing reaches, as the database's read-only open walks them; the
/// commands write nothing.
#[test]
fn a_one_sync_meta_naming_no_freelist_reads_with_its_free_pages() {
    let dir = Dir::new();
    let path = dir.path("live.db");
    let db = rbolt::Db::open_with(&path, rbolt::Options::default().one_sync(true)).unwrap();
    db.update(|tx| {
        let mut b = tx.create_bucket("b")?;
        for i in 0..4000u32 {
            b.put(i.to_be_bytes(), [7u8; 100])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    for round in 0..4u32 {
        db.update(|tx| {
            let mut b = tx.bucket_mut("b")?.unwrap();
            for i in (round * 900..(round + 1) * 900).filter(|i| i % 7 != 0) {
                b.delete(i.to_be_bytes())?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
    }
    let crashed = dir.path("crashed.db");
    std::fs::copy(&path, &crashed).unwrap();
    drop(db);
    let bytes = contents(&crashed);
    let (meta, kind) = (0..2u64)
        .map(|slot| {
            let page = &bytes[slot as usize * 4096..(slot as usize + 1) * 4096];
            rbolt_page::read_meta_page(page, rbolt_page::Pgid(slot)).unwrap()
        })
        .max_by_key(|(meta, _)| meta.txid)
        .unwrap();
    assert_eq!(kind, rbolt_page::MetaDurability::OneSync);
    assert!(!meta.has_freelist());
    assert_eq!(rbolt(["check", arg(&crashed)]).ok(), "OK\n");
    let info = rbolt(["info", arg(&crashed)]).ok();
    assert!(info.contains("Freelist: <none>"), "{info}");
    let listed = rbolt(["pages", arg(&crashed)]).ok();
    let free: Vec<u64> = listed
        .lines()
        .skip(2)
        .filter(|line| line.split_whitespace().nth(1) == Some("free"))
        .map(|line| line.split_whitespace().next().unwrap().parse().unwrap())
        .collect();
    let db = rbolt::Db::open_with(&crashed, rbolt::Options::default().read_only(true)).unwrap();
    let expected: Vec<u64> = db
        .begin_read()
        .unwrap()
        .free_page_ids()
        .unwrap()
        .iter()
        .map(|pgid| pgid.0)
        .collect();
    drop(db);
    assert!(expected.len() > 50, "{} free pages", expected.len());
    assert_eq!(free, expected);
    assert_eq!(contents(&crashed), bytes, "a read command wrote the file");
}
