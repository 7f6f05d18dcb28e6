//! Files Go bbolt's writer cannot continue (a separator that is not its child's first key,
//! as older rbolt versions wrote): `check` reports each place and what it means, and
//! `surgery fix-separators` and `compact` write a copy Go can go on writing.

use crate::support::{Dir, arg, rbolt, unchanged};
use rbolt_page::{BranchPage, Pgid};
use std::path::PathBuf;

/// A copy of the `deep` fixture (a three-level tree of 16-byte random keys, by Go bbolt) in
/// which the bucket's root branch has a stale separator: its element 1's key one below its
/// child's first key, which still routes every key of the child to it. Returns the copy, the
/// root page and the child page.
fn stale(dir: &Dir) -> (PathBuf, Pgid, Pgid) {
    let clean = dir.fixture("deep");
    let root = {
        let db = rbolt::Db::open_with(&clean, rbolt::Options::default().read_only(true)).unwrap();
        db.view(|tx| {
            Ok::<_, rbolt::Error>(tx.bucket(b"data")?.expect("the fixture's bucket").root())
        })
        .unwrap()
    };
    let mut child = Pgid(0);
    let damaged = dir.damaged("deep", "stale.db", |bytes| {
        let start = root.0 as usize * 4096;
        let branch = BranchPage::new(&bytes[start..start + 4096], root).unwrap();
        assert!(branch.len() > 2);
        child = branch.child(1).unwrap();
        let key = branch.key(1).unwrap();
        assert!(key[15] > 0 && key[..15] > branch.key(0).unwrap()[..15]);
        let at = key.as_ptr() as usize - bytes.as_ptr() as usize + 15;
        bytes[at] -= 1;
    });
    (damaged, root, child)
}

#[test]
fn check_reports_a_stale_separator_with_its_page_element_keys_and_meaning() {
    let dir = Dir::new();
    let (db, root, child) = stale(&dir);
    let run = rbolt(["check", arg(&db)]);
    assert_eq!(run.code, 1, "{}", run.stderr);
    let out = run.out();
    assert_eq!(out.lines().count(), 2, "{out}");
    for part in [
        &format!("page {root}: element 1 has the key ")[..],
        &format!("but its child page {child} starts with "),
        "Go bbolt will corrupt this file on its next write here; run `rbolt compact` or \
         `rbolt surgery fix-separators`",
        "1 errors found",
    ] {
        assert!(out.contains(part), "{out:?} lacks {part:?}");
    }
}

#[test]
fn surgery_fix_separators_writes_a_copy_go_can_continue_and_keeps_the_content() {
    let dir = Dir::new();
    let (db, _, _) = stale(&dir);
    let out = dir.path("fixed.db");
    let run = unchanged(&db, || {
        rbolt(["surgery", "fix-separators", arg(&db), "--output", arg(&out)])
    });
    assert_eq!(run.ok(), "1 places repaired.\n");
    assert_eq!(rbolt(["check", arg(&out)]).ok(), "OK\n");
    assert_eq!(
        rbolt(["export", arg(&out)]).ok(),
        rbolt(["export", arg(&db)]).ok()
    );
    // Nothing left to repair.
    let again = dir.path("again.db");
    let run = rbolt([
        "surgery",
        "fix-separators",
        arg(&out),
        "--output",
        arg(&again),
    ]);
    assert_eq!(run.ok(), "0 places repaired.\n");
}

#[test]
fn compact_writes_a_copy_go_can_continue() {
    let dir = Dir::new();
    let (db, _, _) = stale(&dir);
    let out = dir.path("compacted.db");
    unchanged(&db, || rbolt(["compact", "-o", arg(&out), arg(&db)]).ok());
    assert_eq!(rbolt(["check", arg(&out)]).ok(), "OK\n");
    assert_eq!(
        rbolt(["export", arg(&out)]).ok(),
        rbolt(["export", arg(&db)]).ok()
    );
}
