//! `Tree::free_all` and `Tree::for_each_page`: every page of a deleted tree, committed or the
//! origin of an edited node, once, with its overflow; and the second names exactly what the
//! first frees.

use crate::support::walk;
use rbolt_btree::{Arena, MemStore, PageAlloc, Tree};
use rbolt_page::{Corruption, Pgid, Reason};
use std::collections::BTreeSet;

const PAGE: usize = 512;

/// An allocator that only records what is freed.
#[derive(Default)]
struct Freed(Spans);

impl PageAlloc for Freed {
    type Error = Corruption;

    fn allocate(&mut self, _: usize) -> Result<Pgid, Corruption> {
        Err(Corruption::new(Pgid(0), Reason::Other("freeing allocates")))
    }

    fn write(&mut self, pgid: Pgid, _: Box<[u8]>, _: &mut Arena) -> Result<(), Corruption> {
        Err(Corruption::new(pgid, Reason::Other("freeing writes")))
    }

    fn free(&mut self, pgid: Pgid, overflow: u32) -> Result<(), Corruption> {
        self.0.push((pgid, overflow));
        Ok(())
    }
}

/// A committed tree of 600 entries in 512-byte pages (three levels), two of them large enough
/// to need overflow pages.
fn committed() -> (MemStore, Pgid) {
    let mut store = MemStore::new(PAGE, true);
    let mut arena = Arena::new(PAGE);
    let mut tree = Tree::new();
    let (pages, alloc) = store.parts();
    for i in 0..600u32 {
        let len = if i % 250 == 7 { 1500 } else { 20 };
        tree.put(pages, &mut arena, &(i * 2).to_be_bytes(), &vec![1; len], 0)
            .unwrap();
    }
    tree.rebalance(pages, &mut arena, alloc).unwrap();
    let root = tree.spill(pages, &mut arena, alloc).unwrap();
    store.commit();
    assert!(walk(store.pages(), root).depth >= 3);
    (store, root)
}

/// Pages, each with its overflow, in the order met.
type Spans = Vec<(Pgid, u32)>;

/// The pages `for_each_page` names and those `free_all` frees, in order.
fn pages_of(tree: &mut Tree, store: &MemStore) -> (Spans, Spans) {
    let mut named = Vec::new();
    tree.for_each_page(store.pages(), |pgid, overflow| {
        named.push((pgid, overflow));
    })
    .unwrap();
    let mut freed = Freed::default();
    tree.free_all(store.pages(), &mut freed).unwrap();
    (named, freed.0)
}

/// Every page id of the spans in `freed`, each span once.
fn spans(freed: &[(Pgid, u32)]) -> BTreeSet<Pgid> {
    let mut ids = BTreeSet::new();
    for &(pgid, overflow) in freed {
        for id in pgid.0..=pgid.0 + u64::from(overflow) {
            assert!(ids.insert(Pgid(id)), "page {id} freed twice");
        }
    }
    ids
}

#[test]
fn free_all_frees_every_page_of_the_tree_once_and_for_each_page_names_them() {
    let (store, root) = committed();
    let committed_pages = walk(store.pages(), root).pages;
    let mut arena = Arena::new(PAGE);
    // Untouched; edited (nodes made from pages, and nodes split off with no page yet).
    for edited in [false, true] {
        let mut tree = Tree::from_page(root);
        if edited {
            for i in 0..40u32 {
                let key = (600 + i * 2 + 1).to_be_bytes();
                tree.put(store.pages(), &mut arena, &key, &[2; 20], 0)
                    .unwrap();
            }
            tree.delete(store.pages(), &mut arena, &14u32.to_be_bytes(), 0)
                .unwrap();
            assert!(tree.stats().split > 0, "a node split off in memory");
        }
        let (named, freed) = pages_of(&mut tree, &store);
        assert_eq!(named, freed, "edited {edited}");
        assert_eq!(spans(&freed), committed_pages, "edited {edited}");
        assert!(freed.iter().filter(|(_, overflow)| *overflow > 0).count() >= 2);
    }
    // A new tree has no pages.
    let (named, freed) = pages_of(&mut Tree::new(), &store);
    assert!(named.is_empty() && freed.is_empty());
}
