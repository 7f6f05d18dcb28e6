//! Micro benchmarks of the freelist, for both implementations. `FreelistRelease*` mirror
//! bbolt's `Benchmark_FreelistRelease*` (internal/freelist/freelist_test.go) so the results
//! compare line by line; allocate and write have no bbolt counterpart.
//!
//! `cargo bench -p rbolt-freelist` runs everything in a few minutes on two cores: the large
//! sizes take 10 flat samples with short measurement times.

use criterion::measurement::WallTime;
use criterion::{
    BenchmarkGroup, BenchmarkId, Criterion, SamplingMode, criterion_group, criterion_main,
};
use rbolt_fixtures::rng::Rng;
use rbolt_freelist::{AnyFreelist, Freelist, FreelistKind};
use rbolt_page::{Pgid, Txid};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Freelist sizes in ids, named as bbolt names them.
const SIZES: [(usize, &str); 4] = [
    (10_000, "10K"),
    (100_000, "100K"),
    (1_000_000, "1000K"),
    (10_000_000, "10000K"),
];

const KINDS: [(FreelistKind, &str); 2] =
    [(FreelistKind::Array, "array"), (FreelistKind::Span, "span")];

/// bbolt's benchmark makes one id in 400 pending.
const PENDING_RATIO: usize = 400;

/// Allocations timed between two untimed rollbacks in the allocate benchmarks: few enough
/// that the freelist stays in its measured shape, many enough that reading the clock is noise.
const ALLOCS_PER_ROLLBACK: u64 = 64;

/// `n` sorted random ids below 2^63 (bbolt's `randomPgids`) and `n / 400` more, distinct from
/// them, to make pending.
fn random_ids(n: usize) -> (Vec<Pgid>, Vec<Pgid>) {
    let mut rng = Rng::new(n as u64);
    let n_pending = n / PENDING_RATIO;
    let mut all: Vec<Pgid> = (0..n + n_pending)
        .map(|_| Pgid(2 + (rng.next_u64() >> 1)))
        .collect();
    let pending = all.split_off(n);
    all.sort_unstable();
    let mut check = all.clone();
    check.extend(&pending);
    check.sort_unstable();
    check.dedup();
    assert_eq!(
        check.len(),
        n + n_pending,
        "random ids collided; change the seed"
    );
    (all, pending)
}

/// A fragmented freelist of `n` ids: each id of `2..` is free with probability 1/2, so runs
/// have geometric lengths (one in eight runs is 4 long or more); one id in 400 is pending
/// under one of 10 transactions.
fn fragmented(kind: FreelistKind, n: usize) -> AnyFreelist {
    let mut rng = Rng::new(7);
    let mut free = Vec::with_capacity(n);
    let mut pending = Vec::with_capacity(n / PENDING_RATIO + 1);
    let mut id = 2;
    while free.len() + pending.len() < n {
        let bits = rng.next_u64();
        for bit in 0..64 {
            let taken = free.len() + pending.len();
            if taken < n && bits >> bit & 1 == 1 {
                if taken.is_multiple_of(PENDING_RATIO) {
                    pending.push(Pgid(id));
                } else {
                    free.push(Pgid(id));
                }
            }
            id += 1;
        }
    }
    let mut freelist = AnyFreelist::new(kind);
    freelist.rebuild(&free).unwrap();
    for (index, &pgid) in pending.iter().enumerate() {
        freelist.free(Txid(2 + index as u64 % 10), pgid, 0).unwrap();
    }
    assert_eq!(freelist.count(), n);
    freelist
}

/// Shorter runs for the sizes whose single iteration takes long.
fn configure(group: &mut BenchmarkGroup<'_, WallTime>, n: usize) {
    group.sample_size(10);
    if n >= 1_000_000 {
        group.sampling_mode(SamplingMode::Flat);
        group.warm_up_time(Duration::from_millis(500));
        group.measurement_time(Duration::from_secs(3));
    } else {
        group.warm_up_time(Duration::from_millis(300));
        group.measurement_time(Duration::from_secs(1));
    }
}

fn release(c: &mut Criterion) {
    for (n, size) in SIZES {
        let (ids, pending) = random_ids(n);
        let mut group = c.benchmark_group(format!("FreelistRelease{size}"));
        configure(&mut group, n);
        for (kind, name) in KINDS {
            group.bench_function(name, |b| {
                // Like bbolt's benchmark, each iteration builds the freelist from `n` ids (bbolt's
                // `Init`, our `rebuild`), makes the pending ids pending under txid 1 and
                // releases them; the build dominates at every size. Dropping the freelist is
                // timed too (Go's garbage collector runs during bbolt's loop).
                b.iter(|| {
                    let mut freelist = AnyFreelist::new(kind);
                    freelist.rebuild(&ids).unwrap();
                    for &pgid in &pending {
                        freelist.free(Txid(1), pgid, 0).unwrap();
                    }
                    freelist.release(Txid(1));
                    black_box(freelist.free_count());
                })
            });
        }
        group.finish();
    }
}

fn allocate_and_write(c: &mut Criterion) {
    for (n, size) in SIZES {
        for (kind, name) in KINDS {
            let mut freelist = fragmented(kind, n);
            for n_pages in [1, 4] {
                let mut group = c.benchmark_group(format!("FreelistAllocate{n_pages}"));
                configure(&mut group, n);
                group.bench_function(BenchmarkId::new(name, size), |b| {
                    // Time only the allocations; the rollback that gives the runs back (so the
                    // freelist keeps its shape however many iterations run) is untimed.
                    b.iter_custom(|iters| {
                        let mut elapsed = Duration::ZERO;
                        let mut done = 0;
                        while done < iters {
                            let batch = ALLOCS_PER_ROLLBACK.min(iters - done);
                            let start = Instant::now();
                            for _ in 0..batch {
                                black_box(freelist.allocate(Txid(100), n_pages));
                            }
                            elapsed += start.elapsed();
                            freelist.rollback(Txid(100));
                            done += batch;
                        }
                        elapsed
                    })
                });
                group.finish();
            }
            let mut page = vec![0u8; freelist.write_size()];
            let mut group = c.benchmark_group("FreelistWrite");
            configure(&mut group, n);
            group.bench_function(BenchmarkId::new(name, size), |b| {
                b.iter(|| black_box(freelist.write_into(black_box(&mut page), Pgid(3), 0)))
            });
            group.finish();
        }
    }
}

criterion_group!(benches, release, allocate_and_write);
criterion_main!(benches);
