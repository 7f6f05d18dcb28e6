//! The API's everyday behaviour.

use crate::support::assert_clean;
use rbolt::{Db, Error, Options};

fn temp_db() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    (dir, db)
}

#[test]
fn put_get_delete_and_iterate() {
    let (_dir, db) = temp_db();
    db.update(|tx| {
        let mut b = tx.create_bucket(b"b")?;
        for i in 0..1000u32 {
            b.put(i.to_be_bytes(), (i * 2).to_le_bytes())?;
        }
        assert!(b.delete(7u32.to_be_bytes())?);
        assert!(!b.delete(7u32.to_be_bytes())?);
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db.view(|tx| {
        let b = tx.bucket(b"b")?.unwrap();
        assert_eq!(b.get(8u32.to_be_bytes())?, Some(&16u32.to_le_bytes()[..]));
        assert_eq!(b.get(7u32.to_be_bytes())?, None);
        assert_eq!(b.iter().count(), 999);
        let back: Vec<_> = b
            .iter()
            .rev()
            .take(2)
            .map(|e| e.unwrap().key().to_vec())
            .collect();
        assert_eq!(
            back,
            [999u32.to_be_bytes().to_vec(), 998u32.to_be_bytes().to_vec()]
        );
        let lo = 10u32.to_be_bytes();
        let hi = 20u32.to_be_bytes();
        assert_eq!(b.range(&lo[..]..&hi[..]).count(), 10);
        assert_eq!(b.range(&lo[..]..=&hi[..]).count(), 11);
        assert_eq!(b.range(&lo[..]..&hi[..]).rev().count(), 10);
        // Meeting in the middle: front and back together yield each entry once.
        let mut iter = b.range(&lo[..]..&hi[..]);
        let mut seen = 0;
        loop {
            let front = iter.next();
            let back = iter.next_back();
            seen += usize::from(front.is_some()) + usize::from(back.is_some());
            if front.is_none() && back.is_none() {
                break;
            }
        }
        assert_eq!(seen, 10);
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_clean(&db);
}

#[test]
fn nested_buckets_sequences_and_rollback() {
    let (_dir, db) = temp_db();
    db.update(|tx| {
        let mut a = tx.create_bucket(b"a")?;
        let mut b = a.create_bucket(b"b")?;
        let mut c = b.create_bucket(b"c")?;
        c.put(b"k", b"v")?;
        assert_eq!(c.next_sequence()?, 1);
        assert_eq!(c.next_sequence()?, 2);
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    let tx = db.begin_write().unwrap();
    tx.create_bucket(b"gone").unwrap();
    tx.bucket_path_mut(&[b"a", b"b", b"c"])
        .unwrap()
        .unwrap()
        .put(b"k", b"changed")
        .unwrap();
    tx.rollback();
    db.view(|tx| {
        assert!(tx.bucket(b"gone")?.is_none());
        let c = tx
            .bucket(b"a")?
            .unwrap()
            .bucket(b"b")?
            .unwrap()
            .bucket(b"c")?
            .unwrap();
        assert_eq!(c.get(b"k")?, Some(&b"v"[..]));
        assert_eq!(c.sequence(), 2);
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_clean(&db);
}

#[test]
fn error_cases_leave_the_transaction_usable() {
    let (_dir, db) = temp_db();
    let tx = db.begin_write().unwrap();
    assert!(matches!(
        tx.create_bucket(b""),
        Err(Error::BucketNameRequired)
    ));
    let mut b = tx.create_bucket(b"b").unwrap();
    assert!(matches!(b.put(b"", b"v"), Err(Error::KeyRequired)));
    assert!(matches!(
        b.put([1u8; 32769], b"v"),
        Err(Error::KeyTooLarge { len: 32769 })
    ));
    b.put([1u8; 32768], b"max key").unwrap();
    b.create_bucket(b"child").unwrap();
    assert!(matches!(
        b.put(b"child", b"v"),
        Err(Error::IncompatibleValue)
    ));
    assert!(matches!(b.delete(b"child"), Err(Error::IncompatibleValue)));
    assert!(matches!(
        b.create_bucket(b"child"),
        Err(Error::BucketExists)
    ));
    b.put(b"value", b"v").unwrap();
    assert!(matches!(
        b.create_bucket(b"value"),
        Err(Error::IncompatibleValue)
    ));
    assert!(matches!(
        b.delete_bucket(b"value"),
        Err(Error::IncompatibleValue)
    ));
    assert!(matches!(
        b.delete_bucket(b"nothing"),
        Err(Error::BucketNotFound)
    ));
    assert!(matches!(
        b.bucket_mut(b"value"),
        Err(Error::IncompatibleValue)
    ));
    assert!(b.bucket_mut(b"nothing").unwrap().is_none());
    // While `b` holds the bucket, the transaction cannot open it again.
    assert!(matches!(tx.create_bucket(b"b"), Err(Error::BucketInUse)));
    drop(b);
    assert!(matches!(tx.create_bucket(b"b"), Err(Error::BucketExists)));
    assert!(matches!(tx.delete_bucket(b"x"), Err(Error::BucketNotFound)));
    // Still usable after every error.
    tx.bucket_mut(b"b")
        .unwrap()
        .unwrap()
        .put(b"after", b"errors")
        .unwrap();
    tx.commit().unwrap();
    db.view(|tx| {
        let b = tx.bucket(b"b")?.unwrap();
        assert_eq!(b.get(b"after")?, Some(&b"errors"[..]));
        assert_eq!(b.get([1u8; 32768])?, Some(&b"max key"[..]));
        assert_eq!(b.get(b"child")?, None, "a bucket has no value");
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_clean(&db);
}

#[test]
fn read_only_handles_refuse_writes() {
    let (dir, db) = temp_db();
    db.update(|tx| tx.create_bucket(b"b").map(|_| ())).unwrap();
    drop(db);
    let db = Db::open_with(dir.path().join("db"), Options::default().read_only(true)).unwrap();
    assert!(matches!(db.begin_write(), Err(Error::DatabaseReadOnly)));
    assert!(
        db.view(|tx| Ok::<_, rbolt::Error>(tx.bucket(b"b")?.is_some()))
            .unwrap()
    );
    // Another read-only handle can share the file.
    let other = Db::open_with(dir.path().join("db"), Options::default().read_only(true)).unwrap();
    drop(other);
}

#[test]
fn empty_files_are_initialised_read_write_and_refused_read_only() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("empty");
    std::fs::write(&path, b"").unwrap();
    let error = Db::open_with(&path, Options::default().read_only(true)).unwrap_err();
    assert!(matches!(error, Error::Invalid { .. }), "{error}");
    let db = Db::open(&path).unwrap();
    assert_clean(&db);
    assert_eq!(db.file_len().unwrap(), 4 * 4096);
}

#[test]
fn moving_buckets() {
    let (_dir, db) = temp_db();
    db.update(|tx| {
        tx.create_bucket(b"src")?
            .create_bucket(b"child")?
            .put(b"k", b"v")?;
        tx.create_bucket(b"dst")?;
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db.update(|tx| {
        assert!(matches!(
            tx.move_bucket(&[b"src"], &[&b"src"[..], b"x"]),
            Err(Error::MoveIntoSelf)
        ));
        assert!(matches!(
            tx.move_bucket(&["src", "child"], &["src", "child"]),
            Err(Error::SameBuckets)
        ));
        tx.move_bucket(&["src", "child"], &["dst", "renamed"])
    })
    .unwrap();
    db.view(|tx| {
        assert!(tx.bucket(b"src")?.unwrap().bucket(b"child")?.is_none());
        let moved = tx.bucket(b"dst")?.unwrap().bucket(b"renamed")?.unwrap();
        assert_eq!(moved.get(b"k")?, Some(&b"v"[..]));
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_clean(&db);
}

#[test]
fn cursor_mut_deletes_while_iterating() {
    let (_dir, db) = temp_db();
    db.update(|tx| {
        let mut b = tx.create_bucket(b"b")?;
        for i in 0..2000u32 {
            b.put(i.to_be_bytes(), b"v")?;
        }
        let mut cursor = b.cursor_mut();
        let mut entry = cursor.first()?.map(|e| e.key().to_vec());
        while let Some(key) = entry {
            let n = u32::from_be_bytes(key.try_into().unwrap());
            if n % 3 != 0 {
                assert!(cursor.delete()?);
            }
            entry = cursor.next()?.map(|e| e.key().to_vec());
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db.view(|tx| {
        let keys: Vec<u32> = tx
            .bucket(b"b")?
            .unwrap()
            .iter()
            .map(|e| u32::from_be_bytes(e.unwrap().key().try_into().unwrap()))
            .collect();
        assert_eq!(keys, (0..2000).filter(|n| n % 3 == 0).collect::<Vec<_>>());
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_clean(&db);
}

#[test]
fn hot_backup_and_compaction_copy_everything() {
    let dir = tempfile::tempdir().unwrap();
    let path = rbolt_fixtures::write_db("small", dir.path());
    let db = Db::open(&path).unwrap();
    let content = crate::support::read_db(&db).unwrap();
    // A backup taken while a writer changes the file holds the snapshot's content.
    let backup = dir.path().join("backup.db");
    let tx = db.begin_read().unwrap();
    std::thread::scope(|s| {
        s.spawn(|| {
            db.update(|tx| {
                let mut b = tx.create_bucket_if_not_exists(b"noise")?;
                for i in 0..3000u32 {
                    b.put(i.to_be_bytes(), [1; 100])?;
                }
                Ok::<_, rbolt::Error>(())
            })
            .unwrap();
        });
    });
    tx.copy_file(&backup).unwrap();
    drop(tx);
    let copy = Db::open(&backup).unwrap();
    assert!(crate::support::read_db(&copy).unwrap() == content);
    assert_clean(&copy);
    // Compaction into a fresh file.
    let compacted = Db::open(dir.path().join("compacted.db")).unwrap();
    rbolt::compact(&compacted, &copy, 4096).unwrap();
    assert!(crate::support::read_db(&compacted).unwrap() == content);
    assert_clean(&compacted);
}

#[test]
fn transaction_stats_count_what_a_commit_did() {
    let (_dir, db) = temp_db();
    let mut tx = db.begin_write().unwrap();
    let mut b = tx.create_bucket(b"b").unwrap();
    for i in 0..5000u32 {
        b.put(i.to_be_bytes(), [0; 100]).unwrap();
    }
    drop(b);
    let before = tx.stats();
    assert!(before.split > 0, "a node grew past a page: {before:?}");
    tx.commit().unwrap();
    let stats = db.stats();
    assert_eq!(stats.write_tx_n, 1);
    assert!(stats.tx_stats.page_count > 100, "{stats:?}");
    assert_eq!(stats.tx_stats.page_alloc, stats.tx_stats.page_count * 4096);
    assert!(
        stats.tx_stats.spill >= stats.tx_stats.page_count - 1,
        "{stats:?}"
    );
    db.update(|tx| {
        let mut b = tx.bucket_mut(b"b")?.unwrap();
        for i in 0..4990u32 {
            b.delete(i.to_be_bytes())?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    let after = db.stats();
    assert!(after.tx_stats.rebalance > 0, "{after:?}");
    assert!(after.tx_stats.node_count > 0, "{after:?}");
}

#[test]
fn oversized_values_are_refused_without_touching_the_tree() {
    let (_dir, db) = temp_db();
    // calloc'd and never touched: no real memory behind it.
    let huge = vec![0u8; rbolt::VALUE_SIZE_MAX + 1];
    db.update(|tx| {
        let mut b = tx.create_bucket(b"b")?;
        let error = b.put(b"k", &huge).unwrap_err();
        assert!(matches!(error, Error::ValueTooLarge { len } if len == rbolt::VALUE_SIZE_MAX + 1));
        b.put(b"k", b"fine")
    })
    .unwrap();
    assert_eq!(
        db.view(|tx| Ok::<_, rbolt::Error>(
            tx.bucket(b"b")?.unwrap().get(b"k")?.map(<[u8]>::to_vec)
        ))
        .unwrap()
        .as_deref(),
        Some(&b"fine"[..])
    );
}

#[test]
fn stats_inside_a_write_transaction_do_not_wait_for_it() {
    let (_dir, db) = temp_db();
    let tx = db.begin_write().unwrap();
    tx.create_bucket(b"b").unwrap();
    // Would deadlock if stats took the writer lock.
    let stats = db.stats();
    assert_eq!(stats.open_tx_n, 0);
    tx.commit().unwrap();
    assert_eq!(db.stats().write_tx_n, 1);
}

#[test]
fn copy_file_refuses_a_path_another_handle_has_open() {
    let (dir, db) = temp_db();
    db.update(|tx| tx.create_bucket(b"b")?.put(b"k", b"v"))
        .unwrap();
    let live = dir.path().join("db");
    let before = std::fs::read(&live).unwrap();
    let error = db.view(|tx| tx.copy_file(&live)).unwrap_err();
    assert!(matches!(error, rbolt::Error::Io { .. }), "{error}");
    assert!(
        std::fs::read(&live).unwrap() == before,
        "the live file changed"
    );
    // Onto a file that exists and is not open: replaced whole.
    let other = dir.path().join("other");
    std::fs::write(&other, vec![7u8; 1 << 20]).unwrap();
    let written = db.view(|tx| tx.copy_file(&other)).unwrap();
    assert_eq!(std::fs::metadata(&other).unwrap().len(), written);
    let copy = Db::open(&other).unwrap();
    assert_clean(&copy);
}

/// A handle opened down a path holds the bucket at its end: its edits, its nested buckets and
/// its sequence land there at commit, and the buckets beside it along the path stay as they
/// were, whichever way the handle was opened and however many handles came before.
#[test]
fn a_path_handle_edits_the_bucket_at_its_end_and_nothing_beside_it() {
    let (_dir, db) = temp_db();
    db.update(|tx| {
        let mut a = tx.create_bucket(b"a")?;
        a.put(b"beside", b"a's own")?;
        let mut b = a.create_bucket(b"b")?;
        b.create_bucket(b"sibling")?.put(b"k", b"kept")?;
        b.create_bucket(b"c")?;
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db.update(|tx| {
        for round in 0..3u32 {
            let mut c = tx.bucket_path_mut(&["a", "b", "c"])?.unwrap();
            for i in 0..500u32 {
                c.put(format!("{round}-{i:04}"), i.to_be_bytes())?;
            }
            c.next_sequence()?;
            c.create_bucket_if_not_exists(b"below")?
                .put(b"round", round.to_be_bytes())?;
        }
        let mut d = tx.create_bucket_path(&["a", "b", "d"])?;
        d.put(b"new", b"bucket")?;
        drop(d);
        // Opened and dropped without an edit: changes nothing.
        drop(tx.bucket_path_mut(&["a", "b", "sibling"])?.unwrap());
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db.view(|tx| {
        let a = tx.bucket(b"a")?.unwrap();
        assert_eq!(a.get(b"beside")?, Some(&b"a's own"[..]));
        let b = a.bucket(b"b")?.unwrap();
        assert_eq!(
            b.bucket(b"sibling")?.unwrap().get(b"k")?,
            Some(&b"kept"[..])
        );
        assert_eq!(b.bucket(b"d")?.unwrap().get(b"new")?, Some(&b"bucket"[..]));
        let c = b.bucket(b"c")?.unwrap();
        assert_eq!(c.sequence(), 3);
        assert_eq!(
            c.iter()
                .filter(|e| e.as_ref().is_ok_and(|e| !e.is_bucket()))
                .count(),
            1500
        );
        assert_eq!(c.get(b"2-0499")?, Some(&499u32.to_be_bytes()[..]));
        let below = c.bucket(b"below")?.unwrap();
        assert_eq!(below.get(b"round")?, Some(&2u32.to_be_bytes()[..]));
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_clean(&db);
}
