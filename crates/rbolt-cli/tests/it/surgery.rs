//! `surgery`: each writes a repaired copy to --output and leaves the source as it was.

use crate::support::{Dir, Run, arg, contents, rbolt, unchanged};
use rbolt_fixtures::manifest_text;
use std::path::Path;

/// Runs `rbolt surgery COMMAND... DB --output OUT FLAGS...`.
fn surgery(command: &[&str], db: &Path, out: &Path, flags: &[&str]) -> Run {
    let files = [arg(db), "--output", arg(out)];
    rbolt(["surgery"].iter().chain(command).chain(&files).chain(flags))
}

#[test]
fn revert_meta_page_goes_back_one_transaction() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    let out = dir.path("reverted.db");
    let run = unchanged(&db, || surgery(&["revert-meta-page"], &db, &out, &[]));
    assert_eq!(run.ok(), "The meta page is reverted.\n");
    let info = rbolt(["info", arg(&out)]).ok();
    assert!(info.contains("Txn ID: 9\n"), "{info}");
    assert_eq!(
        rbolt(["surgery", "meta", "validate", arg(&out)]).ok(),
        "The meta page 0 is valid!\nThe meta page 1 is valid!\n"
    );
    // Only the meta page changed.
    let (source, copy) = (contents(&db), contents(&out));
    assert_eq!(source.len(), copy.len());
    assert!(source[4096..] == copy[4096..]);
    // The copy's pages are whole again at transaction 9 (its freed pages were not reused).
    assert_eq!(rbolt(["check", arg(&out)]).ok(), "OK\n");
}

#[test]
fn revert_refuses_an_invalid_older_meta() {
    let dir = Dir::new();
    let db = dir.damaged("small", "bad1.db", |bytes| bytes[4096 + 20] ^= 0xff);
    let out = dir.path("out.db");
    unchanged(&db, || {
        surgery(&["revert-meta-page"], &db, &out, &[])
            .fails_with("meta page 1, which would become the current one, is invalid");
    });
    assert!(!out.exists(), "a failed surgery leaves no output");
}

#[test]
fn copy_page_copies_with_a_new_id() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    let out = dir.path("copied.db");
    // Page 5 is free in the fixture (small.json); page 3 is the leaf of bucket alpha.
    let run = unchanged(&db, || {
        surgery(
            &["copy-page"],
            &db,
            &out,
            &["--from-page", "3", "--to-page", "5"],
        )
    });
    assert_eq!(
        run.ok(),
        "WARNING: the free list might have changed.\nPlease consider executing `rbolt surgery freelist abandon ...`\nThe page 3 was successfully copied to page 5\n"
    );
    let (source, copy) = (contents(&db), contents(&out));
    assert_eq!(copy[5 * 4096..5 * 4096 + 8], 5u64.to_le_bytes());
    assert!(source[3 * 4096 + 8..4 * 4096] == copy[5 * 4096 + 8..6 * 4096]);
    surgery(
        &["copy-page"],
        &db,
        &out,
        &["--from-page", "3", "--to-page", "3"],
    )
    .fails_with("the same value: 3");
    surgery(
        &["copy-page"],
        &db,
        &out,
        &["--from-page", "3", "--to-page", "999"],
    )
    .fails_with("does not fit");
}

#[test]
fn clear_page_empties_a_leaf() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    let out = dir.path("cleared.db");
    let run = unchanged(&db, || {
        surgery(&["clear-page"], &db, &out, &["--pageId", "3"])
    });
    assert_eq!(run.ok(), "The page (3) was cleared\n");
    assert_eq!(rbolt(["keys", arg(&out), "alpha"]).ok(), "");
    assert_eq!(rbolt(["check", arg(&out)]).ok(), "OK\n");
    surgery(&["clear-page"], &db, &out, &["--pageId", "1"]).fails_with("at least 2");
    surgery(&["clear-page"], &db, &out, &["--pageId", "30"]).fails_with("\"freelist\" page");
}

#[test]
fn clear_page_elements_removes_a_range() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    let out = dir.path("elements.db");
    let before = rbolt(["keys", arg(&db), "alpha"]).ok();
    let run = unchanged(&db, || {
        surgery(
            &["clear-page-elements"],
            &db,
            &out,
            &["--pageId", "3", "--from-index", "2", "--to-index", "5"],
        )
    });
    assert_eq!(run.ok(), "All elements in [2, 5) in page 3 were cleared\n");
    let after = rbolt(["keys", arg(&out), "alpha"]).ok();
    let expected: Vec<&str> = before
        .lines()
        .enumerate()
        .filter(|(i, _)| !(2..5).contains(i))
        .map(|(_, l)| l)
        .collect();
    assert_eq!(after.lines().collect::<Vec<_>>(), expected);
    assert_eq!(rbolt(["check", arg(&out)]).ok(), "OK\n");
    // -1: to the end of the page. (Each run needs an output of its own: none is replaced.)
    let out = dir.path("to-end.db");
    surgery(
        &["clear-page-elements"],
        &db,
        &out,
        &["--pageId", "3", "--from-index", "1", "--to-index", "-1"],
    )
    .ok();
    assert_eq!(rbolt(["keys", arg(&out), "alpha"]).ok().lines().count(), 1);
    // Removing children of a branch leaves their pages unreachable: a warning, and check says so.
    let out = dir.path("branch.db");
    let run = surgery(
        &["clear-page-elements"],
        &db,
        &out,
        &["--pageId", "18", "--from-index", "0", "--to-index", "1"],
    );
    assert!(
        run.ok()
            .starts_with("WARNING: The clearing has abandoned some pages")
    );
    assert!(
        rbolt(["check", arg(&out)])
            .out()
            .contains("unreachable unfreed")
    );
    let out = dir.path("never.db");
    for (from, to, needle) in [
        ("20", "-1", "out of range"),
        ("0", "99", "out of range"),
        ("3", "2", "bigger than"),
        ("2", "2", "equal to"),
    ] {
        surgery(
            &["clear-page-elements"],
            &db,
            &out,
            &["--pageId", "3", "--from-index", from, "--to-index", to],
        )
        .fails_with(needle);
        assert!(!out.exists(), "a failed surgery leaves no output");
    }
}

#[test]
fn freelist_abandon_then_rebuild() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    let abandoned = dir.path("abandoned.db");
    let run = unchanged(&db, || {
        surgery(&["freelist", "abandon"], &db, &abandoned, &[])
    });
    assert!(
        run.ok()
            .starts_with("The freelist was abandoned in both meta pages.\n")
    );
    assert!(
        rbolt(["info", arg(&abandoned)])
            .ok()
            .contains("Freelist: <none>")
    );
    assert_eq!(rbolt(["check", arg(&abandoned)]).ok(), "OK\n");
    assert!(rbolt(["export", arg(&abandoned)]).ok() == manifest_text("small"));

    let rebuilt = dir.path("rebuilt.db");
    let run = unchanged(&abandoned, || {
        surgery(&["freelist", "rebuild"], &abandoned, &rebuilt, &[])
    });
    assert_eq!(run.ok(), "The freelist was successfully rebuilt.\n");
    assert!(
        rbolt(["info", arg(&rebuilt)])
            .ok()
            .contains("Freelist: <pgid=")
    );
    assert_eq!(rbolt(["check", arg(&rebuilt)]).ok(), "OK\n");
    assert!(rbolt(["export", arg(&rebuilt)]).ok() == manifest_text("small"));
    // A file that has a freelist needs none rebuilt.
    rbolt([
        "surgery",
        "freelist",
        "rebuild",
        arg(&db),
        "--output",
        arg(&dir.path("x.db")),
    ])
    .fails_with("already has freelist");
    // The fixture written without a freelist.
    let nofreelist = dir.fixture("nofreelistsync");
    rbolt([
        "surgery",
        "freelist",
        "rebuild",
        arg(&nofreelist),
        "--output",
        arg(&dir.path("nfl.db")),
    ])
    .ok();
    assert_eq!(rbolt(["check", arg(&dir.path("nfl.db"))]).ok(), "OK\n");
}

#[test]
fn meta_update_repairs_a_zeroed_meta() {
    let dir = Dir::new();
    let db = dir.damaged("small", "zeroed.db", |bytes| bytes[..4096].fill(0));
    let out = dir.path("repaired.db");
    // Meta 0 of small.json: page size 4096, root 19, freelist 30, hwm 37 (txid stays 0).
    let run = unchanged(&db, || {
        surgery(
            &["meta", "update"],
            &db,
            &out,
            &[
                "--fields",
                "pageSize:4096,root:19",
                "--fields",
                "freelist:30,pgid:37",
            ],
        )
    });
    assert_eq!(run.ok(), "The meta page 0 has been updated!\n");
    assert_eq!(
        rbolt(["surgery", "meta", "validate", arg(&out)]).ok(),
        "The meta page 0 is valid!\nThe meta page 1 is valid!\n"
    );
    // Meta 1 (txid 9) is newer than the repaired meta 0 (txid 0), so the file reads as of 9.
    assert!(rbolt(["info", arg(&out)]).ok().contains("Txn ID: 9\n"));
    // Updating a valid meta with nothing to change changes nothing.
    let again = dir.path("again.db");
    let run = surgery(&["meta", "update"], &out, &again, &["--meta-page", "1"]);
    assert_eq!(run.ok(), "Nothing changed!\n");
    assert!(contents(&again) == contents(&out));
    for (field, needle) in [
        ("bogus:1", "isn't allowed"),
        ("root", "invalid key-value"),
        ("root:x", "invalid value"),
    ] {
        surgery(&["meta", "update"], &db, &again, &["--fields", field]).fails_with(needle);
    }
    assert_eq!(
        surgery(&["meta", "update"], &db, &again, &["--meta-page", "2"]).code,
        2
    );
}

#[test]
fn surgery_never_writes_the_source() {
    let dir = Dir::new();
    let db = dir.fixture("small");
    for args in [
        vec!["surgery", "revert-meta-page"],
        vec!["surgery", "freelist", "abandon"],
        vec!["surgery", "clear-page", "--pageId", "3"],
    ] {
        let mut args = args;
        args.extend([arg(&db), "--output", arg(&db)]);
        unchanged(&db, || {
            rbolt(&args).fails_with("names the source file");
        });
    }
    // --output is required.
    assert_eq!(rbolt(["surgery", "revert-meta-page", arg(&db)]).code, 2);
    // No temporary files are left behind.
    let names: Vec<String> = std::fs::read_dir(dir.dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["small.db"]);
}
