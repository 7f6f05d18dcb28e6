//! Commits without syncs (`Durability::None`) and what they cost the file: a database of
//! `KEYS` keys, written durably, then `COMMITS` one-key overwrites at random keys, each with
//! `Durability::None`. Pages the last durable commit reaches are not reused until a commit is
//! durable again, so the file grows, but each of them is freed once at most: the file at most
//! about doubles. Prints the file's pages before, at most and after, the pages the data uses,
//! and the time a commit takes.
//!
//! `cargo run --release -p rbolt --example unsynced_growth -- [COMMITS] [KEYS]`

use rbolt::{Db, Durability};
use std::time::Instant;

fn main() -> rbolt::Result<()> {
    let mut args = std::env::args().skip(1);
    let commits: u64 = args.next().map_or(5_000, |a| a.parse().expect("COMMITS"));
    let keys: u64 = args.next().map_or(10_000, |a| a.parse().expect("KEYS"));
    let dir = tempfile::tempdir().expect("a temporary directory");
    let db = Db::open(dir.path().join("unsynced.db"))?;
    db.update(|tx| {
        let mut b = tx.create_bucket(b"b")?;
        for i in 0..keys {
            b.put(format!("key{i:010}"), [1u8; 100])?;
        }
        Ok::<_, rbolt::Error>(())
    })?;
    let pages = |db: &Db| db.view(|tx| Ok::<_, rbolt::Error>(tx.meta().pgid));
    // Pages neither free nor pending (freed, not yet reusable): what the data needs.
    let in_use = |db: &Db| -> rbolt::Result<u64> {
        let stats = db.stats();
        Ok(pages(db)? - stats.free_page_n as u64 - stats.pending_page_n as u64)
    };
    let before = pages(&db)?;
    let in_use_before = in_use(&db)?;
    // A small generator of its own: examples depend on the crate alone.
    let mut state = 0x9E37_79B9_7F4A_7C15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let started = Instant::now();
    let mut most = before;
    for n in 0..commits {
        let tx = db.begin_write()?;
        tx.set_durability(Durability::None);
        let key = format!("key{:010}", next() % keys);
        tx.bucket_mut(b"b")?
            .expect("created above")
            .put(key, n.to_le_bytes())?;
        tx.commit()?;
        if n % 1000 == 0 {
            most = most.max(pages(&db)?);
        }
    }
    let elapsed = started.elapsed();
    let after = pages(&db)?;
    most = most.max(after);
    println!(
        "unsynced-growth: keys={keys} commits={commits} pages_before={before} \
         in_use_before={in_use_before} pages_most={most} pages_after={after} in_use_after={} \
         growth={:.3} us_per_commit={:.1}",
        in_use(&db)?,
        most as f64 / before as f64,
        elapsed.as_secs_f64() * 1e6 / commits as f64,
    );
    db.close()
}
