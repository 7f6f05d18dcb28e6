//! Many threads writing small changes: `batch` folds concurrent calls into one transaction,
//! so they share its two fdatasyncs.
//!
//! `cargo run -p rbolt --example batch`

use std::sync::Arc;
use std::time::Instant;

fn main() -> rbolt::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Arc::new(rbolt::Db::open(dir.path().join("batch.db"))?);
    db.update(|tx| tx.create_bucket("events").map(drop))?;

    let started = Instant::now();
    let threads: Vec<_> = (0..200u32)
        .map(|i| {
            let db = db.clone();
            std::thread::spawn(move || {
                // The closure may run more than once (if the shared transaction fails, each
                // call is retried alone), so it only writes to the database.
                db.batch(move |tx| {
                    let mut events = tx.bucket_mut("events")?.expect("created");
                    events.put(i.to_be_bytes(), "happened")
                })
            })
        })
        .collect();
    for thread in threads {
        thread.join().expect("a thread panicked")?;
    }
    let stats = db.stats();
    println!(
        "200 durable writes in {:?} and {} commits",
        started.elapsed(),
        stats.write_tx_n
    );
    assert_eq!(
        db.view(|tx| Ok::<_, rbolt::Error>(tx.bucket("events")?.unwrap().iter().count()))?,
        200
    );
    Ok(())
}
