//! What a Rust user reaches for (issue 14): durability per transaction, no same-thread
//! deadlock, refusing to create a mistyped path.

use crate::support::{read_db, within};
use rbolt::storage::SimFile;
use rbolt::{Db, Durability, Error, Options};
use std::sync::Arc;
use std::time::Duration;

#[test]
fn durability_is_chosen_per_transaction_and_sync_makes_everything_durable() {
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default()).unwrap();
    db.update(|tx| tx.create_bucket(b"b").map(drop)).unwrap();
    // A load without syncs.
    let before = sim.counts();
    for round in 0..5u32 {
        let tx = db.begin_write().unwrap();
        assert_eq!(tx.durability(), Durability::Immediate);
        tx.set_durability(Durability::None);
        let mut b = tx.bucket_mut(b"b").unwrap().unwrap();
        for i in 0..50u32 {
            b.put((round * 100 + i).to_be_bytes(), b"v").unwrap();
        }
        drop(b);
        tx.commit().unwrap();
    }
    // No fdatasync, and no fsync either when the file grows (the next durable commit syncs the
    // length with its data).
    assert_eq!(sim.counts().since(before).syncs(), 0, "no sync in the load");
    // Until something syncs, a power loss finds the file as before the load, and a crash of
    // the process (the page cache survives it) finds it after the load.
    let loaded = read_db(&db).unwrap();
    let power_loss = SimFile::from_image(sim.durable_image()).unwrap();
    let reopened = Db::open_storage(Arc::new(power_loss), Options::default()).unwrap();
    let empty = reopened.view(|tx| Ok::<_, Error>(tx.bucket(b"b")?.unwrap().iter().count()));
    assert_eq!(empty.unwrap(), 0);
    drop(reopened);
    let process_crash = sim.after_process_crash().unwrap();
    let reopened = Db::open_storage(Arc::new(process_crash), Options::default()).unwrap();
    assert!(read_db(&reopened).unwrap() == loaded);
    drop(reopened);
    // The next durable commit makes the load durable with itself: two syncs, as always (the
    // load never reused a page the durable state reaches, so nothing has to be synced first).
    let before = sim.counts();
    db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"last", b"v"))
        .unwrap();
    assert_eq!(sim.counts().since(before).syncs(), 2);
    // After that, a durable commit is two syncs again.
    let before = sim.counts();
    db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"more", b"v"))
        .unwrap();
    assert_eq!(sim.counts().since(before).syncs(), 2);
    // Db::sync after unsynced commits: the data, then the newest meta written again durable;
    // the next durable commit is two syncs.
    let tx = db.begin_write().unwrap();
    tx.set_durability(Durability::None);
    tx.bucket_mut(b"b")
        .unwrap()
        .unwrap()
        .put(b"x", b"y")
        .unwrap();
    tx.commit().unwrap();
    let before = sim.counts();
    db.sync().unwrap();
    assert_eq!(sim.counts().since(before).syncs(), 2);
    // With nothing unsynced, a sync is one fdatasync.
    let before = sim.counts();
    db.sync().unwrap();
    assert_eq!(sim.counts().since(before).syncs(), 1);
    let before = sim.counts();
    db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"z", b"y"))
        .unwrap();
    assert_eq!(sim.counts().since(before).syncs(), 2);
    // Everything is in the durable image.
    let content = read_db(&db).unwrap();
    drop(db);
    let durable = SimFile::from_image(sim.durable_image()).unwrap();
    let db = Db::open_storage(Arc::new(durable), Options::default()).unwrap();
    assert!(read_db(&db).unwrap() == content);
}

#[test]
fn no_sync_in_the_options_is_the_default_durability_and_a_transaction_can_override_it() {
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default().no_sync(true)).unwrap();
    db.update(|tx| {
        assert_eq!(tx.durability(), Durability::None);
        tx.create_bucket(b"b").map(drop)
    })
    .unwrap();
    // That first commit syncs all the same: a new file's durable meta is in slot 1, and slot 0
    // takes only durable metas (see `Durability::None`). The next ones do not.
    let before = sim.counts();
    for _ in 0..3 {
        db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"n", b"v"))
            .unwrap();
    }
    assert_eq!(sim.counts().since(before).syncs(), 0);
    let before = sim.counts();
    let tx = db.begin_write().unwrap();
    tx.set_durability(Durability::Immediate);
    tx.bucket_mut(b"b")
        .unwrap()
        .unwrap()
        .put(b"k", b"v")
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(sim.counts().since(before).syncs(), 2);
}

#[test]
fn a_thread_holding_the_writer_gets_an_error_instead_of_a_deadlock() {
    let dir = tempfile::tempdir().unwrap();
    let db = Arc::new(Db::open(dir.path().join("db")).unwrap());
    let inner = db.clone();
    within(Duration::from_secs(20), move || {
        let db = inner;
        // update inside update
        let nested: rbolt::Result<()> = db.update(|tx| {
            tx.create_bucket(b"b")?;
            let error = db.update(|_| Ok(())).unwrap_err();
            assert!(matches!(error, Error::WriteTxOnThisThread), "{error}");
            // batch inside update
            let error = db.batch(|_| Ok(())).unwrap_err();
            assert!(matches!(error, Error::WriteTxOnThisThread), "{error}");
            // begin_write while holding the writer
            assert!(matches!(db.begin_write(), Err(Error::WriteTxOnThisThread)));
            Ok(())
        });
        nested.unwrap();
        // Once the writer is given back, the same thread writes again.
        db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"k", b"v"))
            .unwrap();
        let tx = db.begin_write().unwrap();
        drop(tx);
        db.update(|_| Ok::<_, rbolt::Error>(())).unwrap();
    });
    // Another thread still waits for the writer, as it should.
    let tx = db.begin_write().unwrap();
    let other = db.clone();
    let waiter = std::thread::spawn(move || other.update(|_| Ok::<_, rbolt::Error>(())));
    std::thread::sleep(Duration::from_millis(50));
    assert!(
        !waiter.is_finished(),
        "another thread did not wait for the writer"
    );
    drop(tx);
    waiter.join().unwrap().unwrap();
}

#[test]
fn opening_a_file_this_process_has_open_fails_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path).unwrap();
    let path2 = path.clone();
    // The default lock timeout waits for ever; this must not.
    let second = within(Duration::from_secs(20), move || Db::open(&path2).err());
    assert!(
        matches!(second, Some(Error::StorageInUse { .. })),
        "{second:?}"
    );
    let read_only = Options::default().read_only(true);
    assert!(matches!(
        Db::open_with(&path, read_only.clone()),
        Err(Error::StorageInUse { .. })
    ));
    drop(db);
    // Read-only opens share the file; a writer is refused while they are open.
    let a = Db::open_with(&path, read_only.clone()).unwrap();
    let b = Db::open_with(&path, read_only).unwrap();
    assert!(matches!(Db::open(&path), Err(Error::StorageInUse { .. })));
    drop((a, b));
    Db::open(&path).unwrap();
}

#[test]
fn create_false_refuses_a_missing_file_and_makes_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mistyped.db");
    let error = Db::open_with(&path, Options::default().create(false)).unwrap_err();
    assert!(
        matches!(&error, Error::Io { source, .. } if source.kind() == std::io::ErrorKind::NotFound),
        "{error}"
    );
    assert!(!path.exists());
    drop(Db::open(&path).unwrap());
    Db::open_with(&path, Options::default().create(false)).unwrap();
}

#[test]
fn several_top_level_buckets_are_open_at_once_and_a_held_one_is_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    db.update(|tx| {
        let mut a = tx.create_bucket("a")?;
        for i in 0..300u32 {
            a.put(i.to_be_bytes(), [7u8; 40])?;
        }
        a.create_bucket("nested")?.put("n", "1")?;
        tx.create_bucket("b")?;
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();

    let tx = db.begin_write().unwrap();
    let a = tx.bucket_mut("a").unwrap().unwrap();
    let mut b = tx.bucket_mut("b").unwrap().unwrap();
    // Write one while iterating the other.
    for entry in a.iter() {
        let entry = entry.unwrap();
        if let Some(value) = entry.value() {
            b.put(entry.key(), value).unwrap();
        }
    }
    // Every way back to a held bucket is refused, and changes nothing.
    assert!(matches!(tx.bucket_mut("a"), Err(Error::BucketInUse)));
    assert!(matches!(tx.create_bucket("a"), Err(Error::BucketInUse)));
    assert!(matches!(
        tx.create_bucket_if_not_exists("b"),
        Err(Error::BucketInUse)
    ));
    assert!(matches!(tx.delete_bucket("a"), Err(Error::BucketInUse)));
    assert!(matches!(
        tx.move_bucket(&["a"], &["c"]),
        Err(Error::BucketInUse)
    ));
    assert!(matches!(
        tx.move_bucket(&["x"], &["b", "x"]),
        Err(Error::BucketInUse)
    ));
    assert!(matches!(
        tx.bucket_path_mut(&["a", "nested"]),
        Err(Error::BucketInUse)
    ));
    let message = tx.delete_bucket("b").unwrap_err().to_string();
    assert!(message.contains("drop it"), "{message}");
    // Buckets no handle holds are as usual beside the held ones.
    tx.create_bucket("c").unwrap().put("k", "v").unwrap();
    assert!(matches!(
        tx.delete_bucket("missing"),
        Err(Error::BucketNotFound)
    ));
    // A nested handle borrows its parent handle; the top-level handle edits stay.
    let mut b_nested = b.create_bucket("inner").unwrap();
    b_nested.put("deep", "value").unwrap();
    drop(b_nested);
    b.put("final", "write").unwrap();
    drop((a, b));
    // Back in the registry: opened again, with the edits.
    assert_eq!(
        tx.bucket_mut("b").unwrap().unwrap().get("final").unwrap(),
        Some(&b"write"[..])
    );
    tx.commit().unwrap();

    db.view(|tx| {
        let a = tx.bucket("a")?.unwrap();
        let b = tx.bucket("b")?.unwrap();
        let values = |bucket: rbolt::Bucket<'_>| -> Vec<(Vec<u8>, Vec<u8>)> {
            bucket
                .iter()
                .map(|e| e.unwrap())
                .filter_map(|e| Some((e.key().to_vec(), e.value()?.to_vec())))
                .filter(|(k, _)| k.len() == 4)
                .collect()
        };
        assert_eq!(values(a), values(b));
        assert_eq!(values(b).len(), 300);
        assert_eq!(b.get("final")?, Some(&b"write"[..]));
        assert_eq!(
            b.bucket("inner")?.unwrap().get("deep")?,
            Some(&b"value"[..])
        );
        assert_eq!(a.bucket("nested")?.unwrap().get("n")?, Some(&b"1"[..]));
        assert_eq!(tx.bucket("c")?.unwrap().get("k")?, Some(&b"v"[..]));
        assert!(tx.check().is_empty());
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
}
