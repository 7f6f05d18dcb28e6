//! The read path allocates nothing: point lookups, seek, first/next, last/prev, on a tree
//! 16 levels deep.

use crate::support::walk;
use rbolt_btree::{Arena, MemStore, Tree, TreeView};
use rbolt_testkit::alloc::{CountingAlloc, count_allocations};

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Allocations made by this thread while `f` runs.
fn allocations_in(f: impl FnOnce()) -> u64 {
    count_allocations(f).1
}

#[test]
fn read_path_allocates_nothing_on_a_16_level_tree() {
    // 512-byte pages and 450-byte keys at fill 0.1: a node splits inside the transaction at
    // five entries, at the page boundary after its second, and spill cuts nodes into pages of
    // two: a fan-out of about two, so depth grows fast. (With keys under about 400 bytes a
    // node reaches the in-transaction limit with more entries and is cut after its fourth,
    // and spill keeps a node of four whole: a fan-out of four.)
    let mut store = MemStore::new(512, true);
    let mut arena = Arena::new(512);
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
