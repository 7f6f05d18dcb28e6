//! The read path allocates nothing: point lookups, seek, first/next, last/prev, on a tree
//! 16 levels deep.

use crate::support::walk;
use rbolt_btree::{Arena, MemStore, Tree, TreeView};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static ALLOCATIONS: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    static COUNTING: Cell<bool> = const { Cell::new(false) };
}

// SAFETY: forwards to the system allocator; counting touches only an atomic and a
// const-initialised thread-local, neither of which allocates.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: same contract as ours.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if COUNTING.with(Cell::get) {
            ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
        }
        // SAFETY: same contract as ours.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by this thread while `f` runs.
fn allocations_in(f: impl FnOnce()) -> usize {
    let before = ALLOCATIONS.load(Ordering::Relaxed);
    COUNTING.with(|c| c.set(true));
    f();
    COUNTING.with(|c| c.set(false));
    ALLOCATIONS.load(Ordering::Relaxed) - before
}

#[test]
fn read_path_allocates_nothing_on_a_16_level_tree() {
    // 512-byte pages and 450-byte keys at fill 0.1: a node splits inside the transaction at
    // five entries, at the page boundary after its second, and spill cuts nodes into pages of
    // two: a fan-out of about two, so depth grows fast. (With keys under about 400 bytes a
    // node reaches the in-transaction limit with more entries and is cut after its fourth,
    // and spill keeps a node of four whole: a fan-out of four.)
    let mut store = MemStore::new(512, true);
    let mut arena = Arena::new();
    let key_of = |i: u32| {
        let mut key = vec![b'k'; 450];
        key[..4].copy_from_slice(&i.to_be_bytes());
        key
    };
    // Grow the tree a batch at a time until it is 16 levels deep.
    let mut n: u32 = 0;
    let mut root = None;
    let mut depth = 0;
    while depth < 16 {
        let mut tree = root.map_or_else(Tree::new, Tree::from_page);
        tree.set_fill_percent(0.1);
        for i in n..n + 8192 {
            tree.put(store.pages(), &mut arena, &key_of(i), &i.to_le_bytes(), 0)
                .unwrap();
        }
        n += 8192;
        let (pages, alloc) = store.parts();
        tree.rebalance(pages, &mut arena, alloc).unwrap();
        root = Some(tree.spill(pages, &mut arena, alloc).unwrap());
        store.commit();
        depth = walk(store.pages(), root.unwrap()).depth;
    }
    assert_eq!(
        depth, 16,
        "the test wants a tree exactly as deep as the inline stack"
    );
    let root = root.unwrap();
    let pages = store.pages();
    let view = TreeView::from_page(pages, root);
    let probes: Vec<Vec<u8>> = (0..n).step_by(97).map(key_of).collect();

    let mut found = 0;
    let mut scanned = 0;
    let count = allocations_in(|| {
        for probe in &probes {
            found += usize::from(view.get(probe).unwrap().is_some());
            let mut cursor = view.cursor();
            cursor.seek(probe).unwrap().unwrap();
            for _ in 0..5 {
                cursor.next().unwrap();
                cursor.prev().unwrap();
            }
        }
        let mut cursor = view.cursor();
        let mut entry = cursor.first().unwrap();
        while entry.is_some() {
            scanned += 1;
            entry = cursor.next().unwrap();
        }
        let mut entry = cursor.last().unwrap();
        while entry.is_some() {
            entry = cursor.prev().unwrap();
        }
    });
    assert_eq!(found, probes.len());
    assert_eq!(scanned, n as usize);
    assert_eq!(count, 0, "the read path allocated {count} times");
}

#[test]
fn the_counter_sees_allocations() {
    // The counting allocator must be able to fail the test above.
    let count = allocations_in(|| {
        std::hint::black_box(vec![1u8; 10]);
    });
    assert_eq!(count, 1);
}
