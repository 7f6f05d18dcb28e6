//! Criterion benchmarks of the database, named after the bbolt benchmarks they mirror.
//!
//! - `DBBatchAutomatic`, `DBBatchSingle`, `DBBatchManual10x100`: bbolt's batch benchmarks,
//!   1,000 inserts per iteration on a durable database (bbolt uses 1,000 goroutines; here
//!   1,000 threads, whose start-up is part of the figure).
//! - `Get1M`: a random point lookup in a read transaction on 1,000,000 keys.
//! - `BulkLoad1M`: 1,000,000 random 16-byte keys with 100-byte values in one durable
//!   transaction into a new file.
//! - `BulkLoadSorted1M`: the same keys sorted, at fill percent 1.0 (the comparison's (a2)).
//! - `Tx100RandomPuts`: one transaction of 100 random new keys into a bucket of 1,000,000,
//!   committed with `no_sync` (the comparison's (e), one transaction per iteration).
//! - `DurableCommit`: one single-key durable commit.
//!
//! Allocations per `Get1M` lookup and per put of `Tx100RandomPuts` (the whole transaction,
//! commit included, over its 100 puts) are counted with a counting allocator outside the
//! timing loop and printed; the benchmark fails if a lookup allocates.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use rbolt::{Db, Options};
use rbolt_testkit::alloc::{CountingAlloc, start_counting, stop_counting};
use rbolt_testkit::fnv::fnv1a32;
use rbolt_testkit::rng::Rng;
use std::hint::black_box;
use std::time::Duration;

/// Counts the allocations of `Get1M` and `Tx100RandomPuts` (every thread's).
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Deterministic 16-byte keys.
fn keys(n: usize, seed: u64) -> Vec<[u8; 16]> {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let mut key = [0u8; 16];
            rng.fill(&mut key);
            key
        })
        .collect()
}

/// The key bbolt's batch benchmarks make of `id`: FNV-1a 32 of its little-endian bytes, big
/// endian (Go's `Sum`).
fn fnv32a(id: u32) -> [u8; 4] {
    fnv1a32(&id.to_le_bytes()).to_be_bytes()
}

fn bench_db() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("bench.db")).unwrap();
    db.update(|tx| tx.create_bucket(b"bench").map(|_| ()))
        .unwrap();
    (dir, db)
}

fn batch(c: &mut Criterion) {
    let mut group = c.benchmark_group("batch");
    group
        .sample_size(10)
        .measurement_time(Duration::from_secs(10));
    group.throughput(Throughput::Elements(1000));
    group.bench_function("DBBatchAutomatic", |b| {
        let (_dir, db) = bench_db();
        b.iter(|| {
            std::thread::scope(|s| {
                for round in 0..1000u32 {
                    let db = &db;
                    s.spawn(move || {
                        let key = fnv32a(round);
                        db.batch(move |tx| tx.bucket_mut(b"bench")?.unwrap().put(key, b"filler"))
                            .unwrap();
                    });
                }
            });
        });
    });
    group.bench_function("DBBatchSingle", |b| {
        let (_dir, db) = bench_db();
        b.iter(|| {
            std::thread::scope(|s| {
                for round in 0..1000u32 {
                    let db = &db;
                    s.spawn(move || {
                        let key = fnv32a(round);
                        db.update(|tx| tx.bucket_mut(b"bench")?.unwrap().put(key, b"filler"))
                            .unwrap();
                    });
                }
            });
        });
    });
    group.bench_function("DBBatchManual10x100", |b| {
        let (_dir, db) = bench_db();
        b.iter(|| {
            std::thread::scope(|s| {
                for major in 0..10u32 {
                    let db = &db;
                    s.spawn(move || {
                        db.update(|tx| {
                            let mut bucket = tx.bucket_mut(b"bench")?.unwrap();
                            for minor in 0..100u32 {
                                bucket.put(fnv32a(major << 16 | minor), b"filler")?;
                            }
                            Ok::<_, rbolt::Error>(())
                        })
                        .unwrap();
                    });
                }
            });
        });
    });
    group.finish();
}

fn get(c: &mut Criterion) {
    const N: usize = 1_000_000;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("get.db"), Options::default().no_sync(true)).unwrap();
    let keys = keys(N, 42);
    db.update(|tx| {
        let mut bucket = tx.create_bucket(b"bench")?;
        for key in &keys {
            bucket.put(key, [0x5a; 100])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    let tx = db.begin_read().unwrap();
    let bucket = tx.bucket(b"bench").unwrap().unwrap();

    // Allocations per lookup, once the transaction is open.
    start_counting();
    for key in keys.iter().take(100_000) {
        black_box(bucket.get(key).unwrap());
    }
    let per_get = stop_counting() as f64 / 100_000.0;
    eprintln!("allocs/op Get1M: {per_get:.3}");
    assert_eq!(per_get, 0.0, "a lookup allocated");

    let mut group = c.benchmark_group("get");
    group.throughput(Throughput::Elements(1));
    let mut index = 0usize;
    group.bench_function("Get1M", |b| {
        b.iter(|| {
            index = (index + 7919) % N;
            let value = bucket.get(keys[index]).unwrap().unwrap();
            assert_eq!(value.len(), 100);
            black_box(value)
        });
    });
    group.finish();
}

fn load(c: &mut Criterion) {
    bulk_load(c, "BulkLoad1M", false, Duration::from_secs(60));
}

fn load_sorted(c: &mut Criterion) {
    bulk_load(c, "BulkLoadSorted1M", true, Duration::from_secs(30));
}

/// A million keys into a new file in one transaction: in random order, or sorted into a
/// bucket with fill percent 1.0 (the append path).
fn bulk_load(c: &mut Criterion, name: &str, sorted: bool, measurement: Duration) {
    const N: usize = 1_000_000;
    let mut keys = keys(N, 7);
    if sorted {
        keys.sort_unstable();
    }
    let mut group = c.benchmark_group("load");
    group.sample_size(10).measurement_time(measurement);
    group.throughput(Throughput::Elements(N as u64));
    group.bench_function(name, |b| {
        b.iter_batched(
            || tempfile::tempdir().unwrap(),
            |dir| {
                let db = Db::open(dir.path().join("load.db")).unwrap();
                db.update(|tx| {
                    let mut bucket = tx.create_bucket(b"bench")?;
                    if sorted {
                        bucket.set_fill_percent(1.0);
                    }
                    for key in &keys {
                        bucket.put(key, [0x5a; 100])?;
                    }
                    Ok::<_, rbolt::Error>(())
                })
                .unwrap();
                dir
            },
            BatchSize::PerIteration,
        );
    });
    group.finish();
}

fn tx_puts(c: &mut Criterion) {
    const N: usize = 1_000_000;
    const PUTS_PER_TX: usize = 100;
    const COUNTED_TXS: usize = 100;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("tx.db"), Options::default().no_sync(true)).unwrap();
    db.update(|tx| {
        let mut bucket = tx.create_bucket(b"bench")?;
        for key in &keys(N, 11) {
            bucket.put(key, [0x5a; 100])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    // New keys, never the loaded ones: a different seed, and far more than the benchmark uses.
    let fresh = keys(4_000_000, 13);
    let mut next = 0usize;
    let mut one_tx = |db: &Db| {
        let batch = &fresh[next..next + PUTS_PER_TX];
        next = (next + PUTS_PER_TX) % (fresh.len() - PUTS_PER_TX);
        db.update(|tx| {
            let mut bucket = tx.bucket_mut(b"bench")?.unwrap();
            for key in batch {
                bucket.put(key, [0x6b; 100])?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
    };
    // Warm the buffer pools, then count a run of transactions.
    for _ in 0..10 {
        one_tx(&db);
    }
    start_counting();
    for _ in 0..COUNTED_TXS {
        one_tx(&db);
    }
    let per_put = stop_counting() as f64 / (COUNTED_TXS * PUTS_PER_TX) as f64;
    eprintln!("allocs/op Tx100RandomPuts (per put, commit included): {per_put:.3}");

    let mut group = c.benchmark_group("put");
    group.throughput(Throughput::Elements(PUTS_PER_TX as u64));
    group
        .sample_size(30)
        .measurement_time(Duration::from_secs(10));
    group.bench_function("Tx100RandomPuts", |b| b.iter(|| one_tx(&db)));
    group.finish();
}

fn commit(c: &mut Criterion) {
    let (_dir, db) = bench_db();
    let mut group = c.benchmark_group("commit");
    group.sample_size(50);
    let mut n = 0u64;
    group.bench_function("DurableCommit", |b| {
        b.iter(|| {
            n += 1;
            db.update(|tx| {
                tx.bucket_mut(b"bench")?
                    .unwrap()
                    .put(n.to_be_bytes(), b"value")
            })
            .unwrap();
        });
    });
    group.finish();
}

criterion_group!(benches, get, batch, commit, load, load_sorted, tx_puts);
criterion_main!(benches);
