//! The online vacuum's figures (issue 17): N keys (16 random bytes, 100-byte values), 90% of
//! them deleted at random; then the file size before, after `Db::vacuum`, and after an offline
//! `compact` of the same data; the time to vacuum; a durable writer's commit latency (p50,
//! p99) and two readers' get latency (p99, max) while a vacuum runs beside them, against the
//! same workload with no vacuum, interleaved repeats.
//!
//! Not a criterion benchmark: one vacuum changes the file it measures. Run it in release:
//! `cargo bench -p rbolt-bench --bench vacuum_figures` (`RBOLT_VACUUM_KEYS`, default 1,000,000;
//! `RBOLT_VACUUM_REPEAT`, default 3; `RBOLT_VACUUM_DIR`, default the system's temp dir).

use rbolt::{Db, Options, VacuumOptions};
use rbolt_testkit::rng::Rng;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Keys per load transaction.
const LOAD_TX_KEYS: usize = 100_000;
/// Random puts per commit of the writer that runs beside the vacuum.
const WRITER_TX_KEYS: usize = 100;
const VALUE: [u8; 100] = [0x5A; 100];

fn env_or(name: &str, default: usize) -> usize {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn key(rng: &mut Rng) -> [u8; 16] {
    let mut key = [0; 16];
    rng.fill(&mut key);
    key
}

/// Loads `n` random keys, deletes 90% at random; returns the keys that remain.
fn build(path: &Path, n: usize) -> Vec<[u8; 16]> {
    let db = Db::open(path).expect("open");
    let mut rng = Rng::new(17);
    let keys: Vec<[u8; 16]> = (0..n).map(|_| key(&mut rng)).collect();
    for chunk in keys.chunks(LOAD_TX_KEYS) {
        db.update(|tx| {
            let mut b = tx.create_bucket_if_not_exists(b"data")?;
            for k in chunk {
                b.put(k, VALUE)?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .expect("load");
    }
    let mut order: Vec<usize> = (0..n).collect();
    rng.shuffle(&mut order);
    let (gone, kept) = order.split_at(n * 9 / 10);
    for chunk in gone.chunks(LOAD_TX_KEYS) {
        db.update(|tx| {
            let mut b = tx.bucket_mut(b"data")?.expect("loaded");
            for &i in chunk {
                b.delete(keys[i])?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .expect("delete");
    }
    kept.iter().map(|&i| keys[i]).collect()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// What the writer and the readers saw in one run.
#[derive(Debug)]
struct Beside {
    commit_p50: Duration,
    commit_p99: Duration,
    commits: usize,
    get_p99: Duration,
    get_max: Duration,
    vacuum: Option<Duration>,
    file_after: u64,
}

/// A durable writer and two readers on a copy of the thinned file for `duration`, or for as
/// long as a vacuum beside them takes.
fn beside(path: &Path, kept: &[[u8; 16]], vacuum: bool, duration: Duration) -> Beside {
    let db = Db::open(path).expect("open");
    let stop = AtomicBool::new(false);
    let (commits, gets, vacuum_time) = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut rng = Rng::new(99);
            let mut latencies = Vec::new();
            while !stop.load(Ordering::Acquire) {
                let started = Instant::now();
                db.update(|tx| {
                    let mut b = tx.bucket_mut(b"data")?.expect("loaded");
                    for _ in 0..WRITER_TX_KEYS {
                        b.put(key(&mut rng), VALUE)?;
                    }
                    Ok::<_, rbolt::Error>(())
                })
                .expect("writer commit");
                latencies.push(started.elapsed());
            }
            latencies
        });
        let readers: Vec<_> = (0..2u64)
            .map(|seed| {
                let db = &db;
                let stop = &stop;
                s.spawn(move || {
                    let mut rng = Rng::new(seed);
                    let mut latencies = Vec::new();
                    while !stop.load(Ordering::Acquire) {
                        let tx = db.begin_read().expect("read");
                        let b = tx.bucket(b"data").expect("bucket").expect("loaded");
                        for _ in 0..1000 {
                            let k = &kept[rng.index(kept.len())];
                            let started = Instant::now();
                            let found = b.get(k).expect("get").is_some();
                            latencies.push(started.elapsed());
                            assert!(found, "a kept key is missing");
                        }
                    }
                    latencies
                })
            })
            .collect();
        let vacuum_time = if vacuum {
            let started = Instant::now();
            db.vacuum(VacuumOptions::default(), |_| ControlFlow::Continue(()))
                .expect("vacuum");
            Some(started.elapsed())
        } else {
            std::thread::sleep(duration);
            None
        };
        stop.store(true, Ordering::Release);
        let commits = writer.join().expect("writer");
        let mut gets = Vec::new();
        for reader in readers {
            gets.extend(reader.join().expect("reader"));
        }
        (commits, gets, vacuum_time)
    });
    let mut commits = commits;
    commits.sort();
    let mut gets = gets;
    gets.sort();
    let file_after = db.file_len().expect("len");
    Beside {
        commit_p50: percentile(&commits, 0.5),
        commit_p99: percentile(&commits, 0.99),
        commits: commits.len(),
        get_p99: percentile(&gets, 0.99),
        get_max: gets.last().copied().unwrap_or_default(),
        vacuum: vacuum_time,
        file_after,
    }
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

fn main() {
    // `cargo bench` passes `--bench`; a filter argument that is not ours means another bench
    // was asked for.
    if std::env::args()
        .skip(1)
        .any(|a| !a.starts_with('-') && a != "vacuum_figures")
    {
        return;
    }
    let n = env_or("RBOLT_VACUUM_KEYS", 1_000_000);
    let repeat = env_or("RBOLT_VACUUM_REPEAT", 3).max(1);
    let dir = match std::env::var_os("RBOLT_VACUUM_DIR") {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .expect("temp dir");
    let base: PathBuf = dir.path().join("thinned.db");
    let started = Instant::now();
    let kept = build(&base, n);
    eprintln!(
        "built {n} keys, kept {}, in {:?}",
        kept.len(),
        started.elapsed()
    );
    let before = std::fs::metadata(&base).expect("size").len();

    // Offline compaction of the same data.
    let compacted = {
        let src = Db::open_with(&base, Options::default().read_only(true)).expect("open");
        let path = dir.path().join("compacted.db");
        let dst = Db::open(&path).expect("create");
        let started = Instant::now();
        rbolt::compact(&dst, &src, 65536).expect("compact");
        let took = started.elapsed();
        let extent = dst
            .view(|tx| Ok::<_, rbolt::Error>(tx.size()))
            .expect("size");
        drop(dst);
        (std::fs::metadata(&path).expect("size").len(), took, extent)
    };

    // Vacuum alone, `repeat` times on fresh copies.
    let mut alone = Vec::new();
    let mut after = 0;
    let mut moved = 0;
    for i in 0..repeat {
        let path = dir.path().join(format!("alone-{i}.db"));
        std::fs::copy(&base, &path).expect("copy");
        let db = Db::open(&path).expect("open");
        let started = Instant::now();
        let trace = std::env::var_os("RBOLT_VACUUM_TRACE").is_some();
        let report = db
            .vacuum(VacuumOptions::default(), |progress| {
                if trace {
                    eprintln!("{progress:?}");
                }
                ControlFlow::Continue(())
            })
            .expect("vacuum");
        alone.push(started.elapsed().as_secs_f64());
        after = report.file_len;
        moved = report.pages_moved;
        drop(db);
        std::fs::remove_file(&path).expect("remove");
    }
    let vacuum_secs = median(alone.clone());

    // Beside a writer and two readers, against the same without a vacuum, interleaved.
    let mut with = Vec::new();
    let mut without = Vec::new();
    for i in 0..repeat {
        for vacuum in [false, true] {
            let path = dir.path().join(format!("beside-{i}-{vacuum}.db"));
            std::fs::copy(&base, &path).expect("copy");
            let run = beside(
                &path,
                &kept,
                vacuum,
                Duration::from_secs_f64(vacuum_secs.max(1.0)),
            );
            eprintln!("{} {run:?}", if vacuum { "with" } else { "without" });
            if vacuum {
                with.push(run)
            } else {
                without.push(run)
            }
            std::fs::remove_file(&path).expect("remove");
        }
    }
    let ms = |d: Duration| d.as_secs_f64() * 1e3;
    let us = |d: Duration| d.as_secs_f64() * 1e6;
    let med = |runs: &[Beside], f: &dyn Fn(&Beside) -> f64| median(runs.iter().map(f).collect());
    println!("## Vacuum figures: {n} keys (16 B random, 100 B values), 90% deleted at random");
    println!();
    println!("| what | value |");
    println!("|---|---|");
    println!("| file before | {:.1} MiB |", mib(before));
    println!(
        "| after `vacuum` | {:.1} MiB ({} pages moved) |",
        mib(after),
        moved
    );
    println!(
        "| after offline `compact` | {:.1} MiB (in {:.2} s) |",
        mib(compacted.0),
        compacted.1.as_secs_f64()
    );
    println!(
        "| vacuum / compacted (file sizes) | {:.2}x |",
        after as f64 / compacted.0 as f64
    );
    println!(
        "| compacted pages (high-water mark; its file is grown to a power of two) | {:.1} MiB |",
        mib(compacted.2)
    );
    println!(
        "| vacuum / compacted pages | {:.2}x |",
        after as f64 / compacted.2 as f64
    );
    println!(
        "| time to vacuum, alone (median of {repeat}) | {:.2} s |",
        vacuum_secs
    );
    println!(
        "| time to vacuum beside a writer and two readers | {:.2} s |",
        med(&with, &|r| r.vacuum.map_or(0.0, |d| d.as_secs_f64()))
    );
    println!(
        "| after `vacuum` beside the writer | {:.1} MiB |",
        mib(with.last().map_or(0, |r| r.file_after))
    );
    println!(
        "| writer commit p50 / p99, no vacuum | {:.2} / {:.2} ms ({} commits) |",
        med(&without, &|r| ms(r.commit_p50)),
        med(&without, &|r| ms(r.commit_p99)),
        med(&without, &|r| r.commits as f64)
    );
    println!(
        "| writer commit p50 / p99, vacuum beside | {:.2} / {:.2} ms ({} commits) |",
        med(&with, &|r| ms(r.commit_p50)),
        med(&with, &|r| ms(r.commit_p99)),
        med(&with, &|r| r.commits as f64)
    );
    println!(
        "| reader get p99 / max, no vacuum | {:.1} / {:.0} µs |",
        med(&without, &|r| us(r.get_p99)),
        med(&without, &|r| us(r.get_max))
    );
    println!(
        "| reader get p99 / max, vacuum beside | {:.1} / {:.0} µs |",
        med(&with, &|r| us(r.get_p99)),
        med(&with, &|r| us(r.get_max))
    );
}
