//! `check` finds every kind of inconsistency it names, in files damaged on purpose.

use rbolt::{CheckError, Db, Options};
use rbolt_page::{BranchPage, FLAG_FREELIST, Meta, PageHeader, Pgid, read_meta};
use std::path::{Path, PathBuf};

const PAGE: usize = 4096;

/// A file with one bucket whose tree is a branch over several leaves, and a non-empty
/// freelist. Returns its path, the bucket's root (a branch), and the freelist page.
fn damaged_copy_base(dir: &Path) -> (PathBuf, Pgid, Pgid) {
    let path = dir.join("base.db");
    let db = Db::open(&path).unwrap();
    db.update(|tx| {
        let mut b = tx.create_bucket(b"b")?;
        for i in 0..400u32 {
            b.put(i.to_be_bytes(), [7; 100])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"x", b"y"))
        .unwrap();
    let (root, freelist) = db
        .view(|tx| {
            Ok::<_, rbolt::Error>((tx.bucket(b"b")?.unwrap().root(), tx.meta().freelist_pgid()))
        })
        .unwrap();
    assert!(
        db.view(|tx| Ok::<_, rbolt::Error>(tx.check()))
            .unwrap()
            .is_empty()
    );
    (path, root, freelist)
}

fn errors_of(path: &Path) -> Vec<CheckError> {
    let db = Db::open_with(path, Options::default().read_only(true)).unwrap();
    db.view(|tx| Ok::<_, rbolt::Error>(tx.check())).unwrap()
}

fn newest_meta(bytes: &[u8]) -> (usize, Meta) {
    (0..2)
        .filter_map(|i| {
            read_meta(&bytes[i * PAGE..], Pgid(i as u64))
                .ok()
                .map(|m| (i, m))
        })
        .max_by_key(|(_, m)| m.txid)
        .unwrap()
}

fn branch_child_offset(bytes: &[u8], branch: Pgid, index: usize) -> usize {
    let page = BranchPage::new(
        &bytes[branch.0 as usize * PAGE..(branch.0 as usize + 1) * PAGE],
        branch,
    )
    .unwrap();
    assert!(index < page.len());
    branch.0 as usize * PAGE + 16 + index * 16 + 8
}

fn edit(path: &Path, name: &str, f: impl FnOnce(&mut Vec<u8>)) -> PathBuf {
    let mut bytes = std::fs::read(path).unwrap();
    f(&mut bytes);
    let out = path.with_file_name(name);
    std::fs::write(&out, bytes).unwrap();
    out
}

#[test]
fn check_reports_each_kind_of_damage() {
    let dir = tempfile::tempdir().unwrap();
    let (base, root, freelist) = damaged_copy_base(dir.path());
    let bytes = std::fs::read(&base).unwrap();
    let (_, meta) = newest_meta(&bytes);
    let child = |index| {
        let page = BranchPage::new(&bytes[root.0 as usize * PAGE..][..PAGE], root).unwrap();
        page.child(index).unwrap()
    };

    // Page referenced twice: child 1 points where child 0 does.
    let path = edit(&base, "twice.db", |b| {
        let at = branch_child_offset(b, root, 1);
        b[at..at + 8].copy_from_slice(&child(0).0.to_le_bytes());
    });
    let errors = errors_of(&path);
    assert!(
        errors.contains(&CheckError::MultipleReferences {
            pgid: child(0),
            parent: root
        }),
        "{errors:?}"
    );
    // ...and the page it used to point at is now a leak.
    assert!(
        errors.contains(&CheckError::UnreachableUnfreed { pgid: child(1) }),
        "{errors:?}"
    );

    // Page id out of bounds.
    let path = edit(&base, "bounds.db", |b| {
        let at = branch_child_offset(b, root, 0);
        b[at..at + 8].copy_from_slice(&(meta.pgid + 5).to_le_bytes());
    });
    let errors = errors_of(&path);
    assert!(
        errors.contains(&CheckError::OutOfBounds {
            pgid: Pgid(meta.pgid + 5),
            parent: root
        }),
        "{errors:?}"
    );

    // Wrong page kind: a child whose header says freelist.
    let path = edit(&base, "kind.db", |b| {
        let target = child(0);
        let start = target.0 as usize * PAGE;
        let mut header = PageHeader::read(&b[start..]).unwrap();
        header.flags = FLAG_FREELIST;
        header.write(&mut b[start..]);
    });
    let errors = errors_of(&path);
    assert!(
        errors.contains(&CheckError::InvalidType {
            pgid: child(0),
            flags: FLAG_FREELIST
        }),
        "{errors:?}"
    );

    // Key order across pages: swap the separators of children 0 and 1.
    let path = edit(&base, "order.db", |b| {
        let at0 = branch_child_offset(b, root, 0);
        let at1 = branch_child_offset(b, root, 1);
        let c0: [u8; 8] = b[at0..at0 + 8].try_into().unwrap();
        let c1: [u8; 8] = b[at1..at1 + 8].try_into().unwrap();
        b[at0..at0 + 8].copy_from_slice(&c1);
        b[at1..at1 + 8].copy_from_slice(&c0);
    });
    let errors = errors_of(&path);
    assert!(
        errors
            .iter()
            .any(|e| matches!(e, CheckError::KeyOrder { .. })),
        "{errors:?}"
    );

    // Reachable freed, and unreachable unfreed: the freelist's first id replaced by a
    // reachable page.
    let path = edit(&base, "freed.db", |b| {
        let start = freelist.0 as usize * PAGE;
        let header = PageHeader::read(&b[start..]).unwrap();
        assert!(header.count > 0, "the base file has free pages");
        b[start + 16..start + 24].copy_from_slice(&child(0).0.to_le_bytes());
    });
    let errors = errors_of(&path);
    assert!(
        errors.contains(&CheckError::ReachableFreed { pgid: child(0) }),
        "{errors:?}"
    );
    assert!(
        errors
            .iter()
            .any(|e| matches!(e, CheckError::UnreachableUnfreed { .. })),
        "{errors:?}"
    );

    // Every report reads as one line.
    for error in errors {
        assert!(!error.to_string().contains('\n'));
    }
}
