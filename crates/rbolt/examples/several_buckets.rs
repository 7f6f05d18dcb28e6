//! Several buckets of one write transaction open at once, as in bbolt: orders move from a
//! `pending` bucket to a `shipped` one while the first is iterated, and a log bucket records
//! each move, all in one transaction, with nothing collected into memory first.
//!
//! `cargo run -p rbolt --example several_buckets`

fn main() -> rbolt::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = rbolt::Db::open(dir.path().join("orders.db"))?;

    db.update(|tx| {
        let mut pending = tx.create_bucket("pending")?;
        for (id, item) in [("order-1", "book"), ("order-2", "lamp"), ("order-3", "pen")] {
            pending.put(id, item)?;
        }
        tx.create_bucket("shipped")?;
        tx.create_bucket("log")?;
        Ok::<_, rbolt::Error>(())
    })?;

    db.update(|tx| {
        // Three top-level buckets, each a handle of its own, open side by side.
        let mut pending = tx.bucket_mut("pending")?.expect("created above");
        let mut shipped = tx.bucket_mut("shipped")?.expect("created above");
        let mut log = tx.bucket_mut("log")?.expect("created above");
        // Copy while iterating one bucket and writing the others.
        for entry in pending.iter() {
            let entry = entry?;
            let item = entry.value().unwrap_or_default();
            shipped.put(entry.key(), item)?;
            let n = log.next_sequence()?;
            log.put(n.to_be_bytes(), [b"shipped ", entry.key()].concat())?;
        }
        // Then empty the first with a cursor that deletes.
        let mut cursor = pending.cursor_mut();
        while cursor.first()?.is_some() {
            cursor.delete()?;
        }
        drop(cursor);
        // A bucket held by a handle cannot be opened a second time (nor deleted or moved):
        // the error says so instead of panicking or deadlocking.
        assert!(matches!(
            tx.bucket_mut("shipped"),
            Err(rbolt::Error::BucketInUse)
        ));
        // `tx.commit()` here would not compile: the handles borrow the transaction. `update`
        // commits after the closure, when they are gone.
        Ok::<_, rbolt::Error>(())
    })?;

    db.view(|tx| {
        let pending = tx.bucket("pending")?.expect("created above");
        let shipped = tx.bucket("shipped")?.expect("created above");
        let log = tx.bucket("log")?.expect("created above");
        assert_eq!(pending.iter().count(), 0);
        assert_eq!(shipped.get("order-2")?, Some(&b"lamp"[..]));
        assert_eq!(log.iter().count(), 3);
        for entry in log.iter() {
            println!(
                "{}",
                String::from_utf8_lossy(entry?.value().unwrap_or_default())
            );
        }
        Ok(())
    })
}
