//! Micro benchmarks of the tree, mirroring the cursor benchmarks proposed for bbolt in PR 1240
//! (`BenchmarkCursorGet`, `...Seek`, `...Scan`, `...Put`) and a one-transaction bulk load, so
//! the results compare line by line. Each group is named after the bbolt benchmark; the
//! function is the engine (`rbolt`), leaving room for others beside it.
//!
//! The read benchmarks use a committed tree of 100,000 random 8-byte keys (big-endian u64
//! from a fixed seed) with 32-byte values, spilled into a `MemStore` of 4096-byte pages and
//! read back through pages only.
//!
//! Before each benchmark is timed, a counting global allocator measures its allocations per
//! operation (printed to stderr as `allocs/op <Name>: <n>`); the read paths (get, seek, scan)
//! must allocate nothing, and the benchmark binary panics if they do.
//!
//! `cargo bench -p rbolt-btree` takes about a minute and a half on two cores.

use criterion::measurement::WallTime;
use criterion::{
    BatchSize, BenchmarkGroup, Criterion, SamplingMode, Throughput, criterion_group, criterion_main,
};
use rbolt_btree::{Arena, MemStore, Tree, TreeView};
use rbolt_fixtures::rng::Rng;
use rbolt_page::Pgid;
use rbolt_testkit::alloc::{CountingAlloc, count_allocations};
use std::hint::black_box;
use std::time::{Duration, Instant};

/// Keys in the tree the cursor benchmarks read.
const KEY_COUNT: usize = 100_000;
/// Value length of the cursor benchmarks.
const VALUE_LEN: usize = 32;
const PAGE_SIZE: usize = 4096;
/// Operations run while counting allocations (a scan counts its elements).
const COUNTED_OPS: usize = 10_000;
/// `CursorPut`: puts into one `Tree` made from the committed tree before it is dropped and
/// made again (a write transaction of this many random puts).
const PUTS_PER_TX: u64 = 1_000;
/// `BulkInsertRandom1M`: keys, key length and value length of the load.
const BULK_KEY_COUNT: usize = 1_000_000;
const BULK_KEY_LEN: usize = 16;
const BULK_VALUE_LEN: usize = 100;

// ---- Allocation counting -------------------------------------------------------------------

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Prints allocations per operation; with `must_be_zero`, fails the benchmark unless none.
fn report_allocations(name: &str, allocations: u64, ops: usize, must_be_zero: bool) {
    let per_op = allocations as f64 / ops as f64;
    eprintln!("allocs/op {name}: {per_op:.3} ({allocations} in {ops} ops)");
    assert!(
        !must_be_zero || allocations == 0,
        "{name}: the read path allocated {allocations} times in {ops} operations"
    );
}

// ---- Data ----------------------------------------------------------------------------------

/// A committed tree in a `MemStore`, and its keys in insertion (random) order.
struct Fixture {
    store: MemStore,
    root: Pgid,
    keys: Vec<[u8; 8]>,
}

impl Fixture {
    /// 100,000 distinct random 8-byte keys with 32-byte values, put into a new tree in random
    /// order and spilled in one commit.
    fn new() -> Fixture {
        let mut rng = Rng::new(0x5EED_0001);
        let mut keys: Vec<[u8; 8]> = (0..KEY_COUNT)
            .map(|_| rng.next_u64().to_be_bytes())
            .collect();
        let mut sorted = keys.clone();
        sorted.sort_unstable();
        sorted.dedup();
        assert_eq!(
            sorted.len(),
            KEY_COUNT,
            "random keys collided; change the seed"
        );

        let mut store = MemStore::new(PAGE_SIZE, false);
        let mut arena = Arena::new(PAGE_SIZE);
        let mut tree = Tree::new();
        for key in &keys {
            tree.put(store.pages(), &mut arena, key, &value_of(key), 0)
                .expect("put into a new tree");
        }
        let (pages, alloc) = store.parts();
        tree.rebalance(pages, &mut arena, alloc).expect("rebalance");
        let root = tree.spill(pages, &mut arena, alloc).expect("spill");
        store.commit();

        // Look keys up in an order unrelated to insertion.
        for i in (1..keys.len()).rev() {
            keys.swap(i, rng.index(i + 1));
        }
        Fixture { store, root, keys }
    }

    fn view(&self) -> TreeView<'_> {
        TreeView::from_page(self.store.pages(), self.root)
    }
}

fn value_of(key: &[u8]) -> [u8; VALUE_LEN] {
    let mut value = [0u8; VALUE_LEN];
    for chunk in value.chunks_mut(key.len()) {
        chunk.copy_from_slice(&key[..chunk.len()]);
    }
    value
}

/// Cycles through `keys` forever.
struct Probes<'k, K> {
    keys: &'k [K],
    next: usize,
}

impl<'k, K> Probes<'k, K> {
    fn new(keys: &'k [K]) -> Self {
        Probes { keys, next: 0 }
    }

    #[inline]
    fn next(&mut self) -> &'k K {
        let key = &self.keys[self.next];
        self.next += 1;
        if self.next == self.keys.len() {
            self.next = 0;
        }
        key
    }
}

fn configure(group: &mut BenchmarkGroup<'_, WallTime>, samples: usize, secs: u64) {
    group.sample_size(samples);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(secs));
}

// ---- Benchmarks ----------------------------------------------------------------------------

/// `CursorGet`: one `TreeView::get` of a random existing key.
fn cursor_get(c: &mut Criterion, fixture: &Fixture) {
    let view = fixture.view();
    let mut probes = Probes::new(&fixture.keys);
    let (found, allocations) = count_allocations(|| {
        (0..COUNTED_OPS)
            .filter(|_| view.get(probes.next()).unwrap().is_some())
            .count()
    });
    assert_eq!(found, COUNTED_OPS, "every key is found");
    report_allocations("CursorGet", allocations, COUNTED_OPS, true);

    let mut group = c.benchmark_group("CursorGet");
    configure(&mut group, 50, 3);
    group.bench_function("rbolt", |b| {
        b.iter(|| black_box(view.get(black_box(probes.next())).unwrap()));
    });
    group.finish();
}

/// `CursorSeek`: one `Cursor::seek` of a random existing key, on a cursor reused across seeks.
fn cursor_seek(c: &mut Criterion, fixture: &Fixture) {
    let view = fixture.view();
    let mut probes = Probes::new(&fixture.keys);
    let mut cursor = view.cursor();
    let (found, allocations) = count_allocations(|| {
        (0..COUNTED_OPS)
            .filter(|_| {
                let key = probes.next();
                cursor.seek(key).unwrap().is_some_and(|e| e.key == key)
            })
            .count()
    });
    assert_eq!(found, COUNTED_OPS, "every seek lands on its key");
    report_allocations("CursorSeek", allocations, COUNTED_OPS, true);

    let mut group = c.benchmark_group("CursorSeek");
    configure(&mut group, 50, 3);
    group.bench_function("rbolt", |b| {
        b.iter(|| black_box(cursor.seek(black_box(probes.next())).unwrap()));
    });
    group.finish();
}

/// A full forward scan: `first`, then `next` until the end. Returns the entries seen.
#[inline]
fn scan(view: &TreeView<'_>) -> usize {
    let mut cursor = view.cursor();
    let mut seen = 0;
    let mut entry = cursor.first().unwrap();
    while let Some(e) = entry {
        black_box(e);
        seen += 1;
        entry = cursor.next().unwrap();
    }
    seen
}

/// `CursorScan`: one full forward scan of the 100,000 keys (criterion reports the time per
/// scan and the elements per second).
fn cursor_scan(c: &mut Criterion, fixture: &Fixture) {
    let view = fixture.view();
    let (seen, allocations) = count_allocations(|| scan(&view));
    assert_eq!(seen, KEY_COUNT, "a scan sees every key");
    // One op is one element (one `first` or `next`).
    report_allocations("CursorScan", allocations, seen, true);

    let mut group = c.benchmark_group("CursorScan");
    configure(&mut group, 30, 5);
    group.throughput(Throughput::Elements(KEY_COUNT as u64));
    group.bench_function("rbolt", |b| b.iter(|| black_box(scan(&view))));
    group.finish();
}

/// `CursorPut`: one `Tree::put` of a random new 8-byte key with a 32-byte value into a tree
/// made from the committed 100,000-key tree, so the puts take the copy-on-write path (nodes
/// materialised from pages on the way down). Every `PUTS_PER_TX` puts the tree is dropped and
/// made again from the committed root, outside the timing (its nodes' memory kept in the
/// arena, as the database keeps it), so memory stays bounded and each batch looks like one
/// write transaction of random puts.
fn cursor_put(c: &mut Criterion, fixture: &Fixture) {
    let pages = fixture.store.pages();
    let mut rng = Rng::new(0x5EED_0002);
    let mut arena = Arena::new(PAGE_SIZE);
    let value = [0x42u8; VALUE_LEN];

    // Times `n` puts, starting a fresh transaction every `PUTS_PER_TX`.
    let mut run = |n: u64, arena: &mut Arena, count: bool| -> (Duration, u64) {
        let mut elapsed = Duration::ZERO;
        let mut allocations = 0;
        let mut done = 0;
        while done < n {
            let batch = PUTS_PER_TX.min(n - done);
            let mut tree = Tree::from_page(fixture.root);
            let keys: Vec<[u8; 8]> = (0..batch).map(|_| rng.next_u64().to_be_bytes()).collect();
            let start = Instant::now();
            let ((), counted) = if count {
                count_allocations(|| {
                    for key in &keys {
                        tree.put(pages, arena, key, &value, 0).unwrap();
                    }
                })
            } else {
                for key in &keys {
                    black_box(tree.put(pages, arena, black_box(key), &value, 0).unwrap());
                }
                ((), 0)
            };
            elapsed += start.elapsed();
            allocations += counted;
            done += batch;
            // As a rolled-back transaction: the nodes' memory is kept for the next one.
            tree.recycle(arena);
        }
        (elapsed, allocations)
    };

    let (_, allocations) = run(COUNTED_OPS as u64, &mut arena, true);
    report_allocations("CursorPut", allocations, COUNTED_OPS, false);

    let mut group = c.benchmark_group("CursorPut");
    configure(&mut group, 30, 4);
    group.bench_function("rbolt", |b| {
        b.iter_custom(|iters| run(iters, &mut arena, false).0);
    });
    group.finish();
}

/// `BulkInsertRandom1M`: one transaction that puts 1,000,000 random 16-byte keys with 100-byte
/// values into an empty tree, then rebalances and spills it into a new `MemStore` (no page
/// reuse). Dropping the store afterwards is not timed.
fn bulk_insert_random_1m(c: &mut Criterion) {
    let mut rng = Rng::new(0x5EED_0003);
    let keys: Vec<[u8; BULK_KEY_LEN]> = (0..BULK_KEY_COUNT)
        .map(|_| {
            let mut key = [0u8; BULK_KEY_LEN];
            key[..8].copy_from_slice(&rng.next_u64().to_be_bytes());
            key[8..].copy_from_slice(&rng.next_u64().to_be_bytes());
            key
        })
        .collect();
    let value = [0x17u8; BULK_VALUE_LEN];

    let load = || {
        let mut store = MemStore::new(PAGE_SIZE, false);
        let mut arena = Arena::new(PAGE_SIZE);
        let mut tree = Tree::new();
        for key in &keys {
            tree.put(store.pages(), &mut arena, key, &value, 0).unwrap();
        }
        let (pages, alloc) = store.parts();
        tree.rebalance(pages, &mut arena, alloc).unwrap();
        let root = tree.spill(pages, &mut arena, alloc).unwrap();
        store.commit();
        (store, arena, tree, root)
    };

    let mut group = c.benchmark_group("BulkInsertRandom1M");
    group.sample_size(10);
    group.sampling_mode(SamplingMode::Flat);
    group.warm_up_time(Duration::from_secs(1));
    group.measurement_time(Duration::from_secs(25));
    group.throughput(Throughput::Elements(BULK_KEY_COUNT as u64));
    group.bench_function("rbolt", |b| {
        b.iter_batched(|| (), |()| load(), BatchSize::PerIteration);
    });
    group.finish();
}

fn cursor_benches(c: &mut Criterion) {
    // The counter must be able to fail the zero-allocation checks.
    let ((), seen) = count_allocations(|| drop(black_box(vec![1u8; 10])));
    assert_eq!(seen, 1, "the counting allocator does not count");
    let fixture = Fixture::new();
    cursor_get(c, &fixture);
    cursor_seek(c, &fixture);
    cursor_scan(c, &fixture);
    cursor_put(c, &fixture);
}

criterion_group!(benches, cursor_benches, bulk_insert_random_1m);
criterion_main!(benches);
