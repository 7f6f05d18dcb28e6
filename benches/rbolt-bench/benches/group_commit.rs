//! Durable commits per second with 1, 4 and 16 threads each committing one key at a time
//! (issue 51's group commit): each thread through `Db::update` (a commit, and its syncs, of
//! its own), and through `Db::batch` with a delay of zero (calls that arrive while a commit
//! runs share the next one's syncs) and with the default delay (10 ms, bbolt's); with two
//! syncs a commit (the default) and with one (`Options::one_sync`).
//!
//! Not a criterion benchmark: it measures a rate over many threads. Run it in release:
//! `cargo bench -p rbolt-bench --bench group_commit` (`RBOLT_GROUP_SECS`, seconds a cell,
//! default 2; `RBOLT_GROUP_REPEAT`, interleaved repeats, default 3, the median printed;
//! `RBOLT_GROUP_DIR`, default the system's temp dir). Keys are 16 bytes, values 100.

use rbolt::{Db, Options};
use rbolt_testkit::rng::Rng;
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Keys in the bucket before the threads start, so that a commit rewrites a real tree path.
const PRELOAD: usize = 100_000;

#[derive(Clone, Copy, Debug)]
enum Way {
    Update,
    BatchNoDelay,
    BatchDefault,
}

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn open(dir: &std::path::Path, one_sync: bool, way: Way) -> Db {
    let path = dir.join("db");
    let _ = std::fs::remove_file(&path);
    let mut options = Options::default().one_sync(one_sync);
    if let Way::BatchNoDelay = way {
        options = options.max_batch_delay(Duration::ZERO);
    }
    let db = Db::open_with(&path, options).expect("open");
    let mut rng = Rng::new(5);
    db.update(|tx| {
        let mut b = tx.create_bucket_if_not_exists("b")?;
        for _ in 0..PRELOAD {
            let mut key = [0u8; 16];
            rng.fill(&mut key);
            b.put(key, [1u8; 100])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .expect("preload");
    db
}

/// Commits per second of `threads` threads for `secs` seconds.
fn rate(db: &Db, threads: usize, way: Way, secs: u64) -> f64 {
    let stop = AtomicBool::new(false);
    let commits = AtomicU64::new(0);
    let start = Barrier::new(threads + 1);
    let elapsed = std::thread::scope(|s| {
        for t in 0..threads {
            let (stop, commits, start) = (&stop, &commits, &start);
            s.spawn(move || {
                let mut rng = Rng::new(100 + t as u64);
                start.wait();
                while !stop.load(Ordering::Relaxed) {
                    let mut key = [0u8; 16];
                    rng.fill(&mut key);
                    match way {
                        Way::Update => {
                            db.update(|tx| tx.bucket_mut("b")?.unwrap().put(key, [2u8; 100]))
                        }
                        Way::BatchNoDelay | Way::BatchDefault => {
                            db.batch(move |tx| tx.bucket_mut("b")?.unwrap().put(key, [2u8; 100]))
                        }
                    }
                    .expect("commit");
                    commits.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        start.wait();
        let began = Instant::now();
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        began.elapsed()
    });
    commits.load(Ordering::Relaxed) as f64 / elapsed.as_secs_f64()
}

fn main() {
    let secs = env_or("RBOLT_GROUP_SECS", 2);
    let repeat = env_or("RBOLT_GROUP_REPEAT", 3).max(1);
    let base = std::env::var_os("RBOLT_GROUP_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).expect("temp dir");
    let ways = [Way::Update, Way::BatchNoDelay, Way::BatchDefault];
    let cells: Vec<(bool, Way, usize)> = [false, true]
        .into_iter()
        .flat_map(|one_sync| ways.map(|way| (one_sync, way)))
        .flat_map(|(one_sync, way)| [1, 4, 16].map(|threads| (one_sync, way, threads)))
        .collect();
    let mut runs = vec![Vec::new(); cells.len()];
    for _ in 0..repeat {
        for (cell, &(one_sync, way, threads)) in cells.iter().enumerate() {
            let db = open(dir.path(), one_sync, way);
            runs[cell].push(rate(&db, threads, way, secs));
        }
    }
    println!("durable commits/s (one key each; median of {repeat} interleaved runs of {secs} s)");
    println!("| syncs | way | 1 thread | 4 threads | 16 threads |");
    println!("|---|---|---|---|---|");
    for (row, chunk) in runs.chunks_mut(3).enumerate() {
        let (one_sync, way, _) = cells[row * 3];
        let medians: Vec<String> = chunk
            .iter_mut()
            .map(|runs| {
                runs.sort_by(f64::total_cmp);
                format!("{:.0}", runs[runs.len() / 2])
            })
            .collect();
        let syncs = if one_sync { "one" } else { "two" };
        println!("| {syncs} | {way:?} | {} |", medians.join(" | "));
    }
}
