//! One test per defect that issue 12 (trust) listed, each written to fail on the code before
//! its fix: failed operations that changed the transaction, files that opened when they must
//! not (or did not when they must), walks that overflowed the stack, syncs that failed without
//! consequence, and hangs.

use crate::support::{assert_clean, read_db, within};
use rbolt::storage::{FaultError, FaultPlan, OpKind, SimFile};
use rbolt::{Db, Error, KEY_SIZE_MAX, Options};
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

/// A value of `bucket`/`key`, read in a fresh read transaction.
fn value_of(db: &Db, path: &[&[u8]], key: &[u8]) -> Option<Vec<u8>> {
    db.view(|tx| {
        let (first, rest) = path.split_first().expect("a path");
        let mut bucket = tx.bucket(first)?.expect("bucket exists");
        for name in rest {
            bucket = bucket.bucket(name)?.expect("nested bucket exists");
        }
        Ok::<_, rbolt::Error>(bucket.get(key)?.map(<[u8]>::to_vec))
    })
    .unwrap()
}

// ---- Defect 1 and 7a: a failed move_bucket changes nothing ----

fn two_buckets(dir: &Path) -> Db {
    let db = Db::open(dir.join("db")).unwrap();
    db.update(|tx| {
        tx.create_bucket(b"A")?.put(b"k", b"v0")?;
        tx.create_bucket(b"B")?;
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db
}

#[test]
fn a_failed_move_onto_an_existing_bucket_keeps_the_moved_buckets_edits() {
    let dir = tempfile::tempdir().unwrap();
    let db = two_buckets(dir.path());
    db.update(|tx| {
        tx.bucket_mut(b"A")?.unwrap().put(b"k", b"v1")?;
        assert!(matches!(
            tx.move_bucket(&[b"A"], &[b"B"]),
            Err(Error::BucketExists)
        ));
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_eq!(value_of(&db, &[b"A"], b"k").as_deref(), Some(&b"v1"[..]));
    assert_clean(&db);
}

#[test]
fn a_failed_move_to_a_missing_parent_keeps_the_moved_buckets_edits() {
    let dir = tempfile::tempdir().unwrap();
    let db = two_buckets(dir.path());
    db.update(|tx| {
        tx.bucket_mut(b"A")?.unwrap().put(b"k", b"v1")?;
        assert!(matches!(
            tx.move_bucket(&["A"], &["missing", "A"]),
            Err(Error::BucketNotFound)
        ));
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_eq!(value_of(&db, &[b"A"], b"k").as_deref(), Some(&b"v1"[..]));
    assert_clean(&db);
}

#[test]
fn a_failed_move_keeps_nested_edits_and_buckets_created_in_the_transaction() {
    let dir = tempfile::tempdir().unwrap();
    let db = two_buckets(dir.path());
    db.update(|tx| {
        let mut a = tx.bucket_mut(b"A")?.unwrap();
        a.create_bucket(b"child")?.put(b"x", b"1")?;
        // While `a` holds A, moving it is refused; dropped, the move is checked as usual.
        assert!(matches!(
            tx.move_bucket(&[b"A"], &[b"B"]),
            Err(Error::BucketInUse)
        ));
        drop(a);
        tx.create_bucket(b"fresh")?.put(b"y", b"2")?;
        assert!(matches!(
            tx.move_bucket(&[b"A"], &[b"B"]),
            Err(Error::BucketExists)
        ));
        assert!(matches!(
            tx.move_bucket(&[b"fresh"], &[b"B"]),
            Err(Error::BucketExists)
        ));
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_eq!(
        value_of(&db, &[b"A", b"child"], b"x").as_deref(),
        Some(&b"1"[..])
    );
    assert_eq!(value_of(&db, &[b"fresh"], b"y").as_deref(), Some(&b"2"[..]));
    assert_clean(&db);
}

#[test]
fn a_failed_move_of_a_bucket_whose_child_was_deleted_leaves_no_freed_page_reachable() {
    let dir = tempfile::tempdir().unwrap();
    let db = two_buckets(dir.path());
    // A nested bucket big enough to have pages of its own.
    db.update(|tx| {
        let mut a = tx.bucket_mut(b"A")?.unwrap();
        let mut child = a.create_bucket(b"child")?;
        for i in 0..2000u32 {
            child.put(i.to_be_bytes(), [7; 100])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db.update(|tx| {
        tx.bucket_mut(b"A")?.unwrap().delete_bucket(b"child")?;
        assert!(tx.move_bucket(&[b"A"], &[b"B"]).is_err());
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_clean(&db);
    // The next transactions reuse freed pages: nothing reachable may be among them.
    for round in 0..3u32 {
        db.update(|tx| {
            let mut b = tx.bucket_mut(b"B")?.unwrap();
            for i in 0..500u32 {
                b.put((round * 1000 + i).to_be_bytes(), [1; 100])?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
        assert_clean(&db);
    }
    db.view(|tx| {
        assert!(tx.bucket(b"A")?.unwrap().bucket(b"child")?.is_none());
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
}

// ---- Defect 8: the root is not writable; move_bucket checks the new name ----

#[test]
fn a_failed_create_bucket_path_creates_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let db = two_buckets(dir.path());
    let before = read_db(&db).unwrap();
    let long = vec![b'n'; KEY_SIZE_MAX + 1];
    db.update(|tx| {
        // Each fails past a part of the path that it would have had to create.
        let empty_last: &[&[u8]] = &[b"new1", b"new2", b""];
        let too_long_last: &[&[u8]] = &[b"A", b"new", &long];
        for path in [empty_last, too_long_last] {
            let error = tx.create_bucket_path(path).map(drop).unwrap_err();
            let expected = if path == empty_last {
                matches!(error, Error::BucketNameRequired)
            } else {
                matches!(error, Error::KeyTooLarge { .. })
            };
            assert!(expected, "{path:?}: {error:?}");
            assert!(tx.bucket_path_mut(&[b"new1"]).unwrap().is_none());
            assert!(tx.bucket_path_mut(&[&b"A"[..], b"new"]).unwrap().is_none());
            assert!(tx.bucket_path_mut(&[&b"B"[..], b"new"]).unwrap().is_none());
        }
        // A value on the path: nothing below A is created.
        let error = tx
            .create_bucket_path(&[&b"A"[..], b"k", b"deeper"])
            .map(drop)
            .unwrap_err();
        assert!(matches!(error, Error::IncompatibleValue), "{error:?}");
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_eq!(
        read_db(&db).unwrap(),
        before,
        "the failed calls created buckets"
    );
    assert_clean(&db);
}

#[test]
fn the_root_bucket_is_not_writable() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    db.update(|tx| {
        assert!(matches!(
            tx.bucket_path_mut(&[] as &[&[u8]]),
            Err(Error::BucketNameRequired)
        ));
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
}

#[test]
fn move_bucket_refuses_a_new_name_longer_than_the_key_limit() {
    let dir = tempfile::tempdir().unwrap();
    let db = two_buckets(dir.path());
    let long = vec![b'n'; KEY_SIZE_MAX + 1];
    db.update(|tx| {
        let error = tx.move_bucket(&[b"A"], &[&long]).unwrap_err();
        assert!(
            matches!(error, Error::KeyTooLarge { len } if len == KEY_SIZE_MAX + 1),
            "{error}"
        );
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_eq!(value_of(&db, &[b"A"], b"k").as_deref(), Some(&b"v0"[..]));
    let copy = Db::open(dir.path().join("copy")).unwrap();
    rbolt::compact(&copy, &db, 0).unwrap();
    assert!(read_db(&copy).unwrap() == read_db(&db).unwrap());
}

// ---- Defect 2: a file truncated from outside ----

/// A database of two commits: 40,000 keys, then 40,000 more. Returns the path, the file
/// length after the first commit and the high-water mark (in bytes) of the second.
fn truncation_case(dir: &Path) -> (std::path::PathBuf, u64, u64) {
    let path = dir.join("db");
    let db = Db::open(&path).unwrap();
    let load = |range: std::ops::Range<u32>| {
        db.update(|tx| {
            let mut b = tx.create_bucket_if_not_exists(b"data")?;
            for i in range {
                b.put(i.to_be_bytes(), [3; 64])?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
    };
    load(0..40_000);
    let first_len = db.view(|tx| Ok::<_, rbolt::Error>(tx.size())).unwrap();
    load(40_000..80_000);
    let high_water = db.view(|tx| Ok::<_, rbolt::Error>(tx.size())).unwrap();
    drop(db);
    (path, first_len, high_water)
}

#[test]
fn a_truncated_file_is_refused_and_left_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, high_water) = truncation_case(dir.path());
    let cut = high_water / 2;
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(cut)
        .unwrap();
    let before = std::fs::read(&path).unwrap();
    for read_only in [false, true] {
        let error = Db::open_with(&path, Options::default().read_only(read_only)).unwrap_err();
        match &error {
            Error::Truncated {
                expected, actual, ..
            } => {
                assert_eq!(*actual, cut);
                assert!(*expected > cut, "{error}");
            }
            other => panic!("read_only={read_only}: expected Truncated, got {other}"),
        }
        let message = error.to_string();
        assert!(message.contains(&cut.to_string()), "{message}");
    }
    assert!(
        std::fs::read(&path).unwrap() == before,
        "a refused open wrote"
    );
}

#[test]
fn a_file_truncated_after_its_first_commit_is_refused_not_opened_empty() {
    // The case: one commit, so the older meta is the new file's, which is valid and
    // within the cut file; falling back to it would open an empty database whose next commit
    // overwrites the only pointer to the 40,000 keys.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path).unwrap();
    db.update(|tx| {
        let mut b = tx.create_bucket(b"data")?;
        for i in 0..40_000u32 {
            b.put(i.to_be_bytes(), [3; 64])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    let high_water = db.view(|tx| Ok::<_, rbolt::Error>(tx.size())).unwrap();
    drop(db);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(high_water / 2)
        .unwrap();
    for read_only in [false, true] {
        let opened = Db::open_with(&path, Options::default().read_only(read_only));
        assert!(
            matches!(opened, Err(Error::Truncated { .. })),
            "read_only={read_only}: {:?}",
            opened.map(|db| read_db(&db).map(|m| m.entries.len()))
        );
    }
}

#[test]
fn a_truncated_file_opens_at_the_older_commit_only_when_asked() {
    let dir = tempfile::tempdir().unwrap();
    let (path, first_len, high_water) = truncation_case(dir.path());
    assert!(first_len < high_water);
    std::fs::OpenOptions::new()
        .write(true)
        .open(&path)
        .unwrap()
        .set_len(first_len)
        .unwrap();
    assert!(matches!(Db::open(&path), Err(Error::Truncated { .. })));
    let db = Db::open_with(&path, Options::default().fallback_on_truncation(true)).unwrap();
    let keys = db
        .view(|tx| Ok::<_, rbolt::Error>(tx.bucket(b"data")?.unwrap().iter().count()))
        .unwrap();
    assert_eq!(keys, 40_000);
    assert_clean(&db);
}

// ---- Defect 3: a process killed while creating a file ----

#[test]
fn a_file_killed_during_creation_is_initialised_again() {
    let page = 4096usize;
    let image = |f: &dyn Fn(&mut [u8])| {
        let mut bytes = vec![0u8; 4 * page];
        f(&mut bytes);
        bytes
    };
    // What a complete creation writes, to take torn subsets of.
    let dir = tempfile::tempdir().unwrap();
    let fresh = dir.path().join("fresh");
    drop(Db::open(&fresh).unwrap());
    let complete = std::fs::read(&fresh).unwrap();
    assert_eq!(complete.len(), 4 * page);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("one page of zeros", vec![0; page]),
        ("four pages of zeros", image(&|_| {})),
        (
            "data pages without metas",
            image(&|b| b[2 * page..].copy_from_slice(&complete[2 * page..])),
        ),
        (
            "metas without data pages",
            image(&|b| b[..2 * page].copy_from_slice(&complete[..2 * page])),
        ),
        (
            "meta 0 only",
            image(&|b| b[..page].copy_from_slice(&complete[..page])),
        ),
        (
            "meta 1 and the freelist",
            image(&|b| b[page..3 * page].copy_from_slice(&complete[page..3 * page])),
        ),
    ];
    for (name, bytes) in cases {
        let path = dir.path().join(name);
        std::fs::write(&path, &bytes).unwrap();
        let db = Db::open(&path).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_clean(&db);
        db.update(|tx| tx.create_bucket(b"b")?.put(b"k", b"v"))
            .unwrap_or_else(|e| panic!("{name}: {e}"));
        drop(db);
        let db = Db::open(&path).unwrap();
        assert_eq!(value_of(&db, &[b"b"], b"k").as_deref(), Some(&b"v"[..]));
    }
}

#[test]
fn a_committed_file_is_never_initialised_again() {
    // A committed file whose metas are both damaged stays an error: it holds data.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path).unwrap();
    db.update(|tx| tx.create_bucket(b"b")?.put(b"k", b"v"))
        .unwrap();
    drop(db);
    let mut bytes = std::fs::read(&path).unwrap();
    bytes[..2 * 4096].fill(0);
    std::fs::write(&path, &bytes).unwrap();
    assert!(Db::open(&path).is_err());
    assert!(
        std::fs::read(&path).unwrap() == bytes,
        "the file was rewritten"
    );
}

#[test]
fn a_new_file_is_written_with_one_write_and_one_sync() {
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default()).unwrap();
    let ops = sim.counts();
    assert_eq!(ops.writes(), 1, "{ops:?}");
    assert_eq!(ops.syncs(), 1, "{ops:?}");
    drop(db);
}

// ---- Defect 6c: a refused creation leaves nothing ----

#[test]
fn a_refused_creation_leaves_no_file() {
    let dir = tempfile::tempdir().unwrap();
    for page_size in [1, 64, 1 << 31] {
        let path = dir.path().join(format!("db-{page_size}"));
        let error = Db::open_with(&path, Options::default().page_size(page_size)).unwrap_err();
        assert!(matches!(error, Error::InvalidOptions { .. }), "{error}");
        assert!(!path.exists(), "page size {page_size} left a file");
    }
    let path = dir.path().join("huge-map");
    let error = Db::open_with(&path, Options::default().initial_mmap_size(usize::MAX)).unwrap_err();
    assert!(matches!(error, Error::InvalidOptions { .. }), "{error}");
    assert!(!path.exists());
}

// ---- Defect 6b: page sizes Go bbolt accepts that are not powers of two ----

#[test]
fn page_sizes_that_are_not_powers_of_two_are_written_and_read() {
    for page_size in [256usize, 3000, 5000, 12345] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Db::open_with(&path, Options::default().page_size(page_size)).unwrap();
        assert_eq!(db.page_size(), page_size);
        db.update(|tx| {
            let mut b = tx.create_bucket(b"b")?;
            for i in 0..3000u32 {
                b.put(i.to_be_bytes(), vec![i as u8; (i % 300) as usize])?;
            }
            b.create_bucket(b"nested")?.put(b"k", [9; 10_000])?;
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
        let model = read_db(&db).unwrap();
        assert_clean(&db);
        drop(db);
        // Reopened with other options: the page size comes from the file.
        let db = Db::open(&path).unwrap();
        assert_eq!(db.page_size(), page_size);
        assert!(read_db(&db).unwrap() == model, "page size {page_size}");
        assert_clean(&db);
        drop(db);
        // With meta 0 damaged, meta 1 is found by scanning for it.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[16..24].fill(0xFF);
        std::fs::write(&path, &bytes).unwrap();
        let db = Db::open_with(&path, Options::default().read_only(true))
            .unwrap_or_else(|e| panic!("page size {page_size}: {e}"));
        assert_eq!(db.page_size(), page_size);
    }
}

// ---- Defects 4 and 6a: nesting deeper than any fixed cap, on a small stack ----

const DEEP: usize = 2000;

fn deep_path() -> Vec<Vec<u8>> {
    (0..DEEP).map(|i| format!("b{i}").into_bytes()).collect()
}

#[test]
fn a_chain_of_2000_nested_buckets_works_on_a_256_kib_stack() {
    let dir = tempfile::tempdir().unwrap();
    let dir_path = dir.path().to_path_buf();
    std::thread::Builder::new()
        .stack_size(256 * 1024)
        .spawn(move || deep_chain(&dir_path))
        .unwrap()
        .join()
        .expect("the deep chain thread panicked");
}

fn deep_chain(dir: &Path) {
    let path = deep_path();
    let db = Db::open(dir.join("db")).unwrap();
    db.update(|tx| {
        let mut parent: Vec<&[u8]> = Vec::new();
        for name in &path {
            if parent.is_empty() {
                tx.create_bucket(name)?;
            } else {
                let mut bucket = tx.bucket_path_mut(&parent)?.unwrap();
                bucket.create_bucket(name)?;
            }
            parent.push(name);
            let mut bucket = tx.bucket_path_mut(&parent)?.unwrap();
            bucket.put(b"depth", (parent.len() as u32).to_be_bytes())?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    let names: Vec<&[u8]> = path.iter().map(Vec::as_slice).collect();
    // Get and iterate at every level.
    db.view(|tx| {
        let mut bucket = tx.bucket(names[0])?.unwrap();
        for (level, name) in names.iter().enumerate().skip(1) {
            assert_eq!(bucket.iter().count(), 2, "level {level}");
            bucket = bucket.bucket(name)?.unwrap();
        }
        assert_eq!(
            bucket.get(b"depth")?,
            Some(&(DEEP as u32).to_be_bytes()[..])
        );
        let stats = tx.bucket(names[0])?.unwrap().stats()?;
        assert_eq!(stats.bucket_n, DEEP);
        assert_eq!(stats.key_n, 2 * DEEP - 1);
        assert!(tx.check().is_empty(), "{:?}", tx.check());
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    // A second transaction editing the deepest bucket rewrites the whole path.
    db.update(|tx| tx.bucket_path_mut(&names)?.unwrap().put(b"more", b"value"))
        .unwrap();
    assert_clean(&db);
    // Copies: compact and write_to.
    let compacted = Db::open(dir.join("compacted")).unwrap();
    rbolt::compact(&compacted, &db, 0).unwrap();
    assert_eq!(
        value_of(&compacted, &names, b"more").as_deref(),
        Some(&b"value"[..])
    );
    assert_clean(&compacted);
    drop(compacted);
    let copy_path = dir.join("copy");
    db.view(|tx| tx.copy_file(&copy_path)).unwrap();
    let copy = Db::open(&copy_path).unwrap();
    assert_eq!(
        value_of(&copy, &names, b"more").as_deref(),
        Some(&b"value"[..])
    );
    drop(copy);
    // Delete from the middle, then the top.
    db.update(|tx| {
        tx.bucket_path_mut(&names[..DEEP / 2])?
            .unwrap()
            .delete_bucket(names[DEEP / 2])
    })
    .unwrap();
    assert_clean(&db);
    db.update(|tx| tx.delete_bucket(names[0])).unwrap();
    assert_clean(&db);
    assert_eq!(
        db.view(|tx| Ok::<_, rbolt::Error>(tx.buckets().count()))
            .unwrap(),
        0
    );
    // A chain created and deleted in one transaction.
    db.update(|tx| {
        let mut parent: Vec<&[u8]> = Vec::new();
        for name in &names {
            if parent.is_empty() {
                tx.create_bucket(name)?;
            } else {
                tx.bucket_path_mut(&parent)?.unwrap().create_bucket(name)?;
            }
            parent.push(name);
        }
        tx.delete_bucket(names[0])
    })
    .unwrap();
    assert_clean(&db);
}

// ---- Defect 5: a failed sync poisons the handle ----

#[test]
fn a_failed_db_sync_poisons_the_handle() {
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default().no_sync(true)).unwrap();
    db.update(|tx| tx.create_bucket(b"b").map(drop)).unwrap();
    // The sync makes the commit durable with a commit of its own (writes, then fdatasyncs):
    // its fdatasync fails.
    sim.set_fault_plan(
        FaultPlan::new().fail_kind(rbolt::storage::OpKind::SyncData, FaultError::Io),
    );
    assert!(matches!(db.sync(), Err(Error::Io { .. })));
    assert!(matches!(db.begin_write(), Err(Error::Poisoned)));
    assert!(matches!(db.sync(), Err(Error::Poisoned)));
    // A write that fails before that commit's first sync rolls it back, as for any commit: the
    // handle goes on, and a later sync makes everything durable.
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default().no_sync(true)).unwrap();
    db.update(|tx| tx.create_bucket(b"b").map(drop)).unwrap();
    // (The first commit synced all the same, see `Durability::None`; this one does not.)
    db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"k", b"v"))
        .unwrap();
    sim.set_fault_plan(FaultPlan::new().fail_at(sim.op_count(), FaultError::Io));
    assert!(matches!(db.sync(), Err(Error::Io { .. })));
    db.sync().unwrap();
    let durable = SimFile::from_image(sim.durable_image()).unwrap();
    let reopened = Db::open_storage(Arc::new(durable), Options::default()).unwrap();
    assert!(
        reopened
            .begin_read()
            .unwrap()
            .bucket(b"b")
            .unwrap()
            .is_some()
    );
}

#[test]
fn a_failed_sync_after_growth_poisons_the_handle() {
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default()).unwrap();
    db.update(|tx| tx.create_bucket(b"b").map(drop)).unwrap();
    // Only the fsync that follows growth is a `sync_all`: fail every one of them.
    sim.set_fault_plan(FaultPlan::new().fail_kind(OpKind::SyncAll, FaultError::Io));
    let before = sim.counts();
    let result = db.update(|tx| {
        let mut b = tx.bucket_mut(b"b")?.unwrap();
        for i in 0..20_000u32 {
            b.put(i.to_be_bytes(), [2; 200])?;
        }
        Ok(())
    });
    assert_eq!(
        sim.counts().since(before).sync_all,
        1,
        "the commit grew the file"
    );
    assert!(matches!(result, Err(Error::Io { .. })), "{result:?}");
    sim.set_fault_plan(FaultPlan::new());
    assert!(matches!(db.begin_write(), Err(Error::Poisoned)));
    assert!(matches!(db.begin_read(), Err(Error::Poisoned)));
}

// ---- Defect 7: hangs, poisoning, two handles on one storage ----

#[test]
fn an_on_commit_hook_may_write() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path().join("db")).unwrap());
    let inner = db.clone();
    within(Duration::from_secs(20), move || {
        let hook_db = inner.clone();
        inner
            .update(move |tx| {
                tx.create_bucket(b"b")?;
                tx.on_commit(move || {
                    hook_db
                        .update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"from", b"hook"))
                        .unwrap();
                });
                Ok::<_, rbolt::Error>(())
            })
            .unwrap();
    });
    assert_eq!(
        value_of(&db, &[b"b"], b"from").as_deref(),
        Some(&b"hook"[..])
    );
}

#[test]
fn a_panic_in_a_batch_commit_hook_releases_every_caller() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Db::open_with(
            dir.path().join("db"),
            Options::default().max_batch_delay(Duration::from_millis(50)),
        )
        .unwrap(),
    );
    db.update(|tx| tx.create_bucket(b"b").map(drop)).unwrap();
    let results = within(Duration::from_secs(30), move || {
        let threads: Vec<_> = (0..4u32)
            .map(|i| {
                let db = db.clone();
                std::thread::spawn(move || {
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        db.batch(move |tx| {
                            tx.bucket_mut(b"b")?.unwrap().put(i.to_be_bytes(), b"v")?;
                            if i == 0 {
                                tx.on_commit(|| panic!("a hook panics"));
                            }
                            Ok::<_, rbolt::Error>(())
                        })
                    }))
                    .is_ok()
                })
            })
            .collect();
        threads
            .into_iter()
            .map(|t| t.join().unwrap())
            .collect::<Vec<bool>>()
    });
    assert_eq!(results.len(), 4);
}

#[test]
fn a_batch_delay_of_duration_max_does_not_strand_later_batches() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(
        Db::open_with(
            dir.path().join("db"),
            Options::default()
                .max_batch_delay(Duration::MAX)
                .max_batch_size(2),
        )
        .unwrap(),
    );
    db.update(|tx| tx.create_bucket(b"b").map(drop)).unwrap();
    within(Duration::from_secs(30), move || {
        let threads: Vec<_> = (0..4u32)
            .map(|i| {
                let db = db.clone();
                std::thread::spawn(move || {
                    db.batch(move |tx| tx.bucket_mut(b"b")?.unwrap().put(i.to_be_bytes(), b"v"))
                })
            })
            .collect();
        for t in threads {
            t.join().unwrap().unwrap();
        }
    });
}

#[test]
fn two_handles_on_one_storage_are_refused() {
    let sim = SimFile::new().unwrap();
    let storage: Arc<dyn rbolt::storage::Storage> = Arc::new(sim.clone());
    let first = Db::open_storage(storage.clone(), Options::default()).unwrap();
    let error = Db::open_storage(storage.clone(), Options::default()).unwrap_err();
    assert!(matches!(error, Error::StorageInUse { .. }), "{error}");
    // A clone of the same simulated file is the same file.
    let error = Db::open_storage(Arc::new(sim.clone()), Options::default()).unwrap_err();
    assert!(matches!(error, Error::StorageInUse { .. }), "{error}");
    drop(first);
    // Once the first handle is gone, the storage can be opened again.
    Db::open_storage(storage, Options::default()).unwrap();
}

#[test]
fn a_panic_after_the_meta_write_poisons_the_handle() {
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default()).unwrap();
    db.update(|tx| tx.create_bucket(b"b").map(drop)).unwrap();
    // A storage wrapper panics in the commit's second sync, the one after the meta write.
    let panicking = Arc::new(PanicOnSync::new(sim.clone(), 2));
    drop(db);
    let db = Db::open_storage(panicking.clone(), Options::default()).unwrap();
    panicking.arm();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"k", b"v"))
    }));
    assert!(outcome.is_err(), "the sync did not panic");
    assert!(matches!(db.begin_write(), Err(Error::Poisoned)));
}

/// A storage that panics on its `n`-th `sync_data` once armed.
#[derive(Debug)]
struct PanicOnSync {
    inner: SimFile,
    n: u64,
    seen: std::sync::atomic::AtomicU64,
    armed: std::sync::atomic::AtomicBool,
}

impl PanicOnSync {
    fn new(inner: SimFile, n: u64) -> PanicOnSync {
        PanicOnSync {
            inner,
            n,
            seen: Default::default(),
            armed: Default::default(),
        }
    }

    fn arm(&self) {
        self.armed.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

impl rbolt::storage::Storage for PanicOnSync {
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_all_at(buf, offset)
    }
    fn read_durable(&self, buf: &mut [u8], offset: u64) -> std::io::Result<bool> {
        self.inner.read_durable(buf, offset)
    }
    fn write_whole_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_whole_at(buf, offset)
    }
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> std::io::Result<()> {
        self.inner.write_vectored_at(bufs, offset)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        use std::sync::atomic::Ordering;
        if self.armed.load(Ordering::SeqCst)
            && self.seen.fetch_add(1, Ordering::SeqCst) + 1 == self.n
        {
            panic!("a panic in the meta sync");
        }
        self.inner.sync_data()
    }
    fn sync_all(&self) -> std::io::Result<()> {
        self.inner.sync_all()
    }
    fn grow(&self, len: u64) -> std::io::Result<()> {
        self.inner.grow(len)
    }
    fn map(&self, len: usize) -> std::io::Result<rbolt::storage::Mapping> {
        self.inner.map(len)
    }
    fn claim(&self) -> std::io::Result<rbolt::storage::Claim> {
        self.inner.claim()
    }
    fn path(&self) -> Option<&Path> {
        self.inner.path()
    }
}

// ---- Found by the model-based API test: stats inside a write transaction ----

#[test]
fn stats_in_a_write_transaction_count_nested_buckets_and_their_edits() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    db.update(|tx| {
        // Edited in this transaction, with a nested bucket.
        let mut a = tx.create_bucket(b"a")?;
        a.create_bucket(b"b")?.put(b"k", b"v")?;
        let stats = a.stats()?;
        assert_eq!((stats.key_n, stats.bucket_n), (2, 2));
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    // A committed page-rooted bucket, untouched, whose nested bucket is edited: the nested
    // bucket's edits count.
    db.update(|tx| {
        let mut a = tx.bucket_mut(b"a")?.unwrap();
        for i in 0..300u32 {
            a.put(i.to_be_bytes(), [0; 40])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db.update(|tx| {
        let mut a = tx.bucket_mut(b"a")?.unwrap();
        a.bucket_mut(b"b")?.unwrap().put(b"k2", b"v2")?;
        let stats = a.stats()?;
        assert_eq!((stats.key_n, stats.bucket_n), (300 + 1 + 2, 2));
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    let committed = db.view(|tx| tx.bucket(b"a")?.unwrap().stats()).unwrap();
    assert_eq!((committed.key_n, committed.bucket_n), (303, 2));
}

/// A new file whose meta 0 was garbled after its creation (a later commit's meta write that a
/// power loss garbled, then a close that shrank the file back to its four pages) is not an
/// interrupted creation: its meta 1 and the pages it names are whole, so a read-only open
/// opens it. The API model test found it (seed 1796655229818951868): the read-only open
/// refused with "the file's creation was interrupted before its first commit".
#[test]
fn a_new_file_with_one_garbled_meta_opens_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    rbolt::Db::open(&path).unwrap().close().unwrap();
    let mut bytes = std::fs::read(&path).unwrap();
    assert_eq!(bytes.len(), 4 * 4096, "a new file is four pages");
    for byte in &mut bytes[40..80] {
        *byte ^= 0x5a;
    }
    std::fs::write(&path, &bytes).unwrap();
    let db = rbolt::Db::open_with(&path, rbolt::Options::default().read_only(true))
        .expect("the other meta and its pages are whole");
    assert_eq!(db.begin_read().unwrap().buckets().count(), 0);
    drop(db);
    // A read-write open opens it too, and commits over the garbled slot.
    let db = rbolt::Db::open(&path).unwrap();
    db.update(|tx| tx.create_bucket("b").map(drop)).unwrap();
    drop(db);
    let db = rbolt::Db::open_with(&path, rbolt::Options::default().read_only(true)).unwrap();
    assert!(db.begin_read().unwrap().bucket("b").unwrap().is_some());
}
