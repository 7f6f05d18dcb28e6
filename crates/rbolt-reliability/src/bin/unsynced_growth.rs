//! How far a workload of only commits without syncs (`Durability::None`) grows a file: a
//! database of `KEYS` keys, written durably, then `COMMITS` one-key overwrites at random keys,
//! each committed with `Durability::None`. Prints the file's pages before and after, the pages
//! in use, and how many commits the growth bound made durable (counted as data syncs).
//!
//! `cargo run --release -p rbolt-reliability --bin rbolt-unsynced-growth -- [COMMITS] [KEYS]`

use rbolt::storage::SimFile;
use rbolt::{Db, Durability, Options};
use rbolt_fixtures::rng::Rng;
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let mut args = std::env::args().skip(1);
    let commits: u64 = args
        .next()
        .map_or(1_000_000, |a| a.parse().expect("COMMITS"));
    let keys: u64 = args.next().map_or(100_000, |a| a.parse().expect("KEYS"));
    let sim = SimFile::new().expect("a simulated file");
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default()).expect("open");
    db.update(|tx| {
        let mut b = tx.create_bucket(b"b")?;
        for i in 0..keys {
            b.put(format!("key{i:010}"), [1u8; 100])?;
        }
        Ok(())
    })
    .expect("load");
    let pages = |db: &Db| db.view(|tx| Ok(tx.meta().pgid)).expect("meta");
    // Pages neither free nor pending (freed, not yet reusable): what the data needs.
    let in_use = |db: &Db| {
        let stats = db.stats();
        pages(db) - stats.free_page_n as u64 - stats.pending_page_n as u64
    };
    let before = pages(&db);
    let used_before = in_use(&db);
    let syncs_before = sim.counts().sync_data;
    let mut rng = Rng::new(7);
    let started = Instant::now();
    let mut mark_max = before;
    for n in 0..commits {
        let tx = db.begin_write().expect("begin");
        tx.set_durability(Durability::None);
        let key = format!("key{:010}", rng.below(keys));
        tx.bucket_mut(b"b")
            .expect("bucket")
            .expect("created")
            .put(key, n.to_le_bytes())
            .expect("put");
        tx.commit().expect("commit");
        if n % 1000 == 0 {
            mark_max = mark_max.max(pages(&db));
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let after = pages(&db);
    let syncs = sim.counts().sync_data - syncs_before;
    println!(
        "unsynced-growth: keys={keys} commits={commits} pages_before={before} in_use_before={used_before} \
         pages_after={after} pages_max={} in_use_after={} growth={:.3} syncs={syncs} \
         (each durable point is two) secs={secs:.1}",
        mark_max.max(after),
        in_use(&db),
        mark_max.max(after) as f64 / before as f64,
    );
}
