//! Readers beside a writer: every reader sees the snapshot it started with, readers never wait
//! for the writer, and the writer never waits for readers (not even to grow the file).
//!
//! `cargo run -p rbolt --example concurrent_readers`

use std::sync::atomic::{AtomicBool, Ordering};

fn main() -> rbolt::Result<()> {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = rbolt::Db::open(dir.path().join("concurrent.db"))?;
    db.update(|tx| tx.create_bucket("counter")?.put("n", 0u64.to_be_bytes()))?;
    let done = AtomicBool::new(false);

    std::thread::scope(|scope| -> rbolt::Result<()> {
        // Readers: within one transaction the value never changes, however often it is read.
        let mut readers = Vec::new();
        for _ in 0..2 {
            readers.push(scope.spawn(|| -> rbolt::Result<u64> {
                let mut snapshots = 0;
                while !done.load(Ordering::Acquire) {
                    let tx = db.begin_read()?;
                    let counter = tx.bucket("counter")?.expect("created");
                    let first = counter.get("n")?.map(<[u8]>::to_vec);
                    std::thread::yield_now();
                    assert_eq!(counter.get("n")?.map(<[u8]>::to_vec), first);
                    snapshots += 1;
                }
                Ok(snapshots)
            }));
        }
        // The writer: a thousand commits, each adding a page of data (the file grows).
        for i in 1..=1000u64 {
            db.update(|tx| {
                let mut counter = tx.bucket_mut("counter")?.expect("created");
                counter.put("n", i.to_be_bytes())?;
                counter.put(i.to_be_bytes(), [0u8; 200])
            })?;
        }
        done.store(true, Ordering::Release);
        for reader in readers {
            let snapshots = reader.join().expect("a reader panicked")?;
            println!("a reader read {snapshots} consistent snapshots");
        }
        Ok(())
    })?;
    let n = db.view(|tx| {
        let value = tx.bucket("counter")?.unwrap().get("n")?.unwrap();
        Ok::<_, rbolt::Error>(u64::from_be_bytes(value.try_into().unwrap()))
    })?;
    assert_eq!(n, 1000);
    db.close()
}
