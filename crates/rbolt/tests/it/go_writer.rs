//! What Go bbolt's writer assumes of the pages it loads (each separator its child's first key,
//! no empty leaf below a root, no branch with one child, inline pages naming page 0): rbolt's
//! writes keep it, `check` reports each place a file breaks it, and `fix_separators`, any
//! write that touches the page, and `compact` repair it.

use crate::support::{assert_clean, read_db};
use rbolt::{CheckError, Db, GoHazard, Options};
use rbolt_page::{BranchPage, BucketValue, LeafPage, Meta, PageRef, Pgid, read_meta};
use std::path::{Path, PathBuf};

const PAGE: usize = 512;

fn options() -> Options {
    Options::default().page_size(PAGE)
}

/// The newest valid meta of a file image.
fn meta_of(bytes: &[u8]) -> Meta {
    (0..2)
        .filter_map(|i| read_meta(&bytes[i * PAGE..], Pgid(i as u64)).ok())
        .max_by_key(|meta| meta.txid)
        .expect("a valid meta")
}

fn page_of(bytes: &[u8], pgid: Pgid) -> PageRef<'_> {
    let start = pgid.0 as usize * PAGE;
    PageRef::new(&bytes[start..], pgid).expect("a page")
}

/// The root page of top-level bucket `name` in a file image.
fn bucket_root(bytes: &[u8], name: &[u8]) -> Pgid {
    let root = page_of(bytes, meta_of(bytes).root_pgid()).leaf().unwrap();
    let index = root.search(name).unwrap().expect("the bucket exists");
    let value = BucketValue::parse(root.value(index).unwrap(), root.pgid()).unwrap();
    assert!(value.inline.is_none(), "bucket {name:?} is inline");
    value.header.root_pgid()
}

fn branch_of(bytes: &[u8], pgid: Pgid) -> BranchPage<'_> {
    let start = pgid.0 as usize * PAGE;
    BranchPage::new(&bytes[start..start + PAGE], pgid).expect("a branch page")
}

/// The first key of a leaf or branch page of a file image.
fn first_key(bytes: &[u8], pgid: Pgid) -> Vec<u8> {
    let page = page_of(bytes, pgid);
    match page.branch() {
        Ok(branch) => branch.key(0).unwrap().to_vec(),
        Err(_) => page.leaf().unwrap().key(0).unwrap().to_vec(),
    }
}

/// Walks the tree at `root` of a file image, read with the page views alone (not `check`),
/// and returns every branch element whose key is not its child's first key.
fn stale_separators(bytes: &[u8], root: Pgid) -> Vec<(Pgid, usize)> {
    let mut stale = Vec::new();
    let mut stack = vec![root];
    while let Some(pgid) = stack.pop() {
        let Ok(branch) = page_of(bytes, pgid).branch() else {
            continue;
        };
        for index in 0..branch.len() {
            let child = branch.child(index).unwrap();
            if branch.key(index).unwrap() != &first_key(bytes, child)[..] {
                stale.push((pgid, index));
            }
            stack.push(child);
        }
    }
    stale
}

fn key_u32(key: &[u8]) -> u32 {
    u32::from_be_bytes(key.try_into().expect("a 4-byte key"))
}

/// Bucket `b` with the even keys of `0..2 * n` (4-byte big-endian) and 8-byte values, at
/// 512-byte pages: an odd key sorts between two keys.
fn filled(path: &Path, n: u32) -> Db {
    let db = Db::open_with(path, options()).unwrap();
    db.update(|tx| {
        let mut b = tx.create_bucket(b"b")?;
        for i in 0..n {
            b.put((2 * i).to_be_bytes(), [7; 8])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db
}

fn hazards(db: &Db) -> Vec<CheckError> {
    let errors = db.view(|tx| Ok::<_, rbolt::Error>(tx.check())).unwrap();
    errors
        .into_iter()
        .filter(|e| e.breaks_go_writer())
        .collect()
}

/// The bug of issue 22: a branch that lost its first child and was then merged into its left
/// sibling kept the parent's old separator for its new first child, a key that child no
/// longer starts with. rbolt read it correctly, Go bbolt's next write there corrupted the
/// file. Here: a three-level tree; the second branch under the root loses its first leaf
/// (every key deleted) and all its leaves after the third, so that it is small enough to be
/// merged into the first, while its second and third leaves are not written at all.
#[test]
fn a_branch_merged_after_losing_its_first_child_keeps_every_separator_its_childs_first_key() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    filled(&path, 6000).close().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let root = branch_of(&bytes, bucket_root(&bytes, b"b"));
    assert!(root.len() >= 3, "a root of {} children", root.len());
    let second = branch_of(&bytes, root.child(1).unwrap());
    assert!(second.len() >= 6, "a branch of {} children", second.len());
    let first_leaf = key_u32(second.key(0).unwrap())..key_u32(second.key(1).unwrap());
    let after_third = key_u32(second.key(3).unwrap())..key_u32(root.key(2).unwrap());
    let kept_leaf = second.child(1).unwrap();
    let kept_first_key = second.key(1).unwrap().to_vec();

    let db = Db::open_with(&path, options()).unwrap();
    db.update(|tx| {
        let mut b = tx.bucket_mut(b"b")?.unwrap();
        for i in first_leaf.chain(after_third) {
            b.delete(i.to_be_bytes())?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    // The leaf that became the branch's first child was not rewritten: its separator is
    // the only thing that says where it starts.
    let still_there = db
        .view(|tx| {
            Ok::<_, rbolt::Error>(
                tx.bucket(b"b")?
                    .unwrap()
                    .get(&kept_first_key[..])?
                    .is_some(),
            )
        })
        .unwrap();
    assert!(still_there);
    let errors = db.view(|tx| Ok::<_, rbolt::Error>(tx.check())).unwrap();
    assert!(errors.is_empty(), "check found: {errors:?}");
    db.close().unwrap();
    let bytes = std::fs::read(&path).unwrap();
    let root = bucket_root(&bytes, b"b");
    assert_eq!(stale_separators(&bytes, root), []);
    assert_eq!(
        page_of(&bytes, kept_leaf).leaf().unwrap().key(0).unwrap(),
        &kept_first_key[..],
        "the kept leaf was moved, so the test no longer tests what it says"
    );
}

/// A copy of the file at `path`, changed by `f`, named `name`.
fn damaged(path: &Path, name: &str, f: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = std::fs::read(path).unwrap();
    f(&mut bytes);
    let out = path.with_file_name(name);
    std::fs::write(&out, &bytes).unwrap();
    out
}

/// The byte offset of element `index`'s key in the page `pgid` of a file image.
fn key_offset(bytes: &[u8], pgid: Pgid, index: usize, leaf: bool) -> usize {
    let start = pgid.0 as usize * PAGE;
    let elem = start + 16 + 16 * index;
    let pos_at = if leaf { elem + 4 } else { elem };
    let pos = u32::from_le_bytes(bytes[pos_at..pos_at + 4].try_into().unwrap()) as usize;
    elem + pos
}

/// Opens `path` read-write, repairs with `fix_separators` (expecting `found` places or
/// more), and checks the hazards are gone and the content is what it was.
fn repair(path: &Path, found_min: usize) {
    let db = Db::open_with(path, options()).unwrap();
    let before = read_db(&db).unwrap();
    let mut tx = db.begin_write().unwrap();
    let found = tx.fix_separators().unwrap();
    tx.commit().unwrap();
    assert!(
        found >= found_min,
        "found {found} places, expected {found_min}"
    );
    assert_eq!(hazards(&db), [], "after the repair");
    assert_eq!(
        read_db(&db).unwrap(),
        before,
        "the repair changed the content"
    );
    let mut tx = db.begin_write().unwrap();
    assert_eq!(
        tx.fix_separators().unwrap(),
        0,
        "a second repair found more"
    );
    tx.rollback();
}

#[test]
fn a_separator_that_is_not_its_childs_first_key_is_reported_with_both_keys_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    filled(&base, 300).close().unwrap();
    let bytes = std::fs::read(&base).unwrap();
    let root = bucket_root(&bytes, b"b");
    let branch = branch_of(&bytes, root);
    let child = branch.child(2).unwrap();
    let first = key_u32(branch.key(2).unwrap());
    assert!(first - 1 > key_u32(branch.key(1).unwrap()));
    // The separator one below the child's first key: still ordered, still routes every key
    // of the child to it, but not its first key.
    let path = damaged(&base, "stale", |bytes| {
        let at = key_offset(bytes, root, 2, false);
        bytes[at..at + 4].copy_from_slice(&(first - 1).to_be_bytes());
    });
    let db = Db::open_with(&path, options()).unwrap();
    let errors = db.view(|tx| Ok::<_, rbolt::Error>(tx.check())).unwrap();
    let expected = CheckError::BreaksGoWriter(GoHazard::Separator {
        pgid: root,
        index: 2,
        child,
        separator: (first - 1).to_be_bytes().to_vec(),
        first_key: first.to_be_bytes().to_vec(),
    });
    assert_eq!(errors, std::slice::from_ref(&expected));
    assert!(expected.breaks_go_writer());
    let message = expected.to_string();
    for part in [
        &format!("page {root}: element 2 has the key {:08x}", first - 1)[..],
        &format!("child page {child} starts with {first:08x}"),
        "Go bbolt will corrupt this file on its next write here",
        "rbolt compact",
        &format!("any rbolt write that touches page {child}"),
    ] {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
    drop(db);
    repair(&path, 1);

    // Any write that touches the child page repairs it too: a put of one of its keys.
    let path = damaged(&base, "stale-put", |bytes| {
        let at = key_offset(bytes, root, 2, false);
        bytes[at..at + 4].copy_from_slice(&(first - 1).to_be_bytes());
    });
    let db = Db::open_with(&path, options()).unwrap();
    assert_eq!(hazards(&db).len(), 1);
    db.update(|tx| {
        tx.bucket_mut(b"b")?
            .unwrap()
            .put(first.to_be_bytes(), [8; 8])
    })
    .unwrap();
    assert_clean(&db);
    drop(db);

    // And so does compaction, for the whole file.
    let path = damaged(&base, "stale-compact", |bytes| {
        let at = key_offset(bytes, root, 2, false);
        bytes[at..at + 4].copy_from_slice(&(first - 1).to_be_bytes());
    });
    let src = Db::open_with(&path, options().read_only(true)).unwrap();
    let dst = Db::open_with(dir.path().join("compacted"), options()).unwrap();
    rbolt::compact(&dst, &src, 0).unwrap();
    assert_clean(&dst);
    assert_eq!(read_db(&dst).unwrap(), read_db(&src).unwrap());
}

#[test]
fn an_empty_leaf_below_the_root_is_reported_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    filled(&base, 300).close().unwrap();
    let bytes = std::fs::read(&base).unwrap();
    let root = bucket_root(&bytes, b"b");
    let leaf = branch_of(&bytes, root).child(3).unwrap();
    // The leaf's element count set to 0 (its keys are lost; the page stays reachable).
    let path = damaged(&base, "empty", |bytes| {
        let at = leaf.0 as usize * PAGE + 10;
        bytes[at..at + 2].copy_from_slice(&0u16.to_le_bytes());
    });
    let db = Db::open_with(&path, options()).unwrap();
    let errors = db.view(|tx| Ok::<_, rbolt::Error>(tx.check())).unwrap();
    let expected = CheckError::BreaksGoWriter(GoHazard::EmptyPage {
        pgid: leaf,
        parent: root,
        index: 3,
    });
    assert_eq!(errors, std::slice::from_ref(&expected));
    assert!(
        expected
            .to_string()
            .contains("Go bbolt will corrupt this file")
    );
    drop(db);
    repair(&path, 1);
}

#[test]
fn a_branch_with_one_child_is_reported_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    // Three levels: the bucket's root and the branches below it.
    filled(&base, 6000).close().unwrap();
    let bytes = std::fs::read(&base).unwrap();
    let root = bucket_root(&bytes, b"b");
    let branch = branch_of(&bytes, root).child(1).unwrap();
    let only = branch_of(&bytes, branch).child(0).unwrap();
    // The branch's count set to 1: its other children are lost (and leak).
    let path = damaged(&base, "lone", |bytes| {
        let at = branch.0 as usize * PAGE + 10;
        bytes[at..at + 2].copy_from_slice(&1u16.to_le_bytes());
    });
    let db = Db::open_with(&path, options()).unwrap();
    let errors = db.view(|tx| Ok::<_, rbolt::Error>(tx.check())).unwrap();
    let expected = CheckError::BreaksGoWriter(GoHazard::LoneChild {
        pgid: branch,
        child: only,
    });
    assert!(errors.contains(&expected), "{errors:?}");
    assert_eq!(hazards(&db), [expected]);
    drop(db);
    repair(&path, 1);
}

#[test]
fn an_inline_page_that_names_a_page_is_reported_and_repaired() {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().join("base");
    let db = Db::open_with(&base, options()).unwrap();
    db.update(|tx| tx.create_bucket(b"small")?.put(b"k", b"v"))
        .unwrap();
    db.close().unwrap();
    let bytes = std::fs::read(&base).unwrap();
    let root = meta_of(&bytes).root_pgid();
    let leaf: LeafPage<'_> = page_of(&bytes, root).leaf().unwrap();
    let value = leaf.value(0).unwrap();
    assert!(BucketValue::parse(value, root).unwrap().inline.is_some());
    // The inline page's header id: 16 bytes into the bucket value.
    let at = value.as_ptr() as usize - bytes.as_ptr() as usize + 16;
    let path = damaged(&base, "inline", |bytes| {
        bytes[at..at + 8].copy_from_slice(&5u64.to_le_bytes());
    });
    let db = Db::open_with(&path, options()).unwrap();
    let errors = db.view(|tx| Ok::<_, rbolt::Error>(tx.check())).unwrap();
    assert_eq!(
        errors,
        [CheckError::BreaksGoWriter(GoHazard::InlinePageId {
            pgid: root,
            index: 0,
            id: 5
        })]
    );
    drop(db);
    repair(&path, 1);
}

/// Go bbolt's `Open` reads the first 4 KiB of a file to learn its page size and refuses a
/// shorter file: a vacuum never cuts a file below that, whatever its page size.
#[test]
fn a_vacuum_never_cuts_a_file_below_the_4_kib_go_bbolt_needs_to_open_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = filled(&dir.path().join("db"), 300);
    db.update(|tx| tx.delete_bucket(b"b")).unwrap();
    db.vacuum(rbolt::VacuumOptions::default(), |_| {
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    let high_water = db.begin_read().unwrap().meta().pgid;
    assert!(
        high_water * (PAGE as u64) < 4096,
        "the mark ({high_water} pages) is too high for the test to test anything"
    );
    assert_eq!(db.file_len().unwrap(), 4096);
    assert_clean(&db);
}
