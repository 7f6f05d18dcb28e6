//! `Tree::touch_key`: the path to a key is written anew at commit, nothing else changes.

use crate::support::walk;
use rbolt_btree::{Arena, MemStore, Tree};
use rbolt_page::{PageRef, Pgid};
use std::collections::BTreeSet;

/// A committed tree of `n` keys (`k00000`..), values of `value_len` bytes, in `store`.
fn build(store: &mut MemStore, n: usize, value_len: usize) -> Pgid {
    let mut arena = Arena::new(store.pages().page_size());
    let mut tree = Tree::new();
    let (pages, alloc) = store.parts();
    for i in 0..n {
        let key = format!("k{i:05}");
        tree.put(
            pages,
            &mut arena,
            key.as_bytes(),
            &vec![i as u8; value_len],
            0,
        )
        .unwrap();
    }
    tree.rebalance(pages, &mut arena, alloc).unwrap();
    let root = tree.spill(pages, &mut arena, alloc).unwrap();
    store.commit();
    root
}

/// The pages on the path from `root` to the leaf where `key` belongs, root first.
fn path_pages(store: &MemStore, root: Pgid, key: &[u8]) -> Vec<Pgid> {
    let pages = store.pages();
    let mut path = vec![root];
    loop {
        let pgid = *path.last().unwrap();
        let page = PageRef::new(pages.page(Pgid(0), pgid).unwrap(), pgid).unwrap();
        let Ok(branch) = page.branch() else {
            return path;
        };
        let mut index = 0;
        for i in 0..branch.len() {
            if branch.key(i).unwrap() <= key {
                index = i;
            }
        }
        path.push(branch.child(index).unwrap());
    }
}

/// Touches `key` in the tree at `root` (down to `depth`, or to the leaf), commits, and checks
/// that exactly the path's pages were replaced and every key and value reads back as before.
fn check_touch(n: usize, value_len: usize, key: &[u8]) {
    check_touch_to(n, value_len, key, None);
}

fn check_touch_to(n: usize, value_len: usize, key: &[u8], depth: Option<usize>) {
    let mut store = MemStore::new(4096, true);
    let root = build(&mut store, n, value_len);
    let before = walk(store.pages(), root);
    let mut path = path_pages(&store, root, key);
    if let Some(depth) = depth {
        path.truncate(depth + 1);
    }
    let deepest = *path.last().unwrap();
    let path: BTreeSet<Pgid> = path.into_iter().collect();
    let mut arena = Arena::new(store.pages().page_size());
    let mut tree = Tree::from_page(root);
    let (pages, alloc) = store.parts();
    match depth {
        Some(depth) => {
            let found = tree.touch_to_depth(pages, &mut arena, key, depth).unwrap();
            assert_eq!(found, Some(deepest), "the page at depth {depth}");
        }
        None => tree.touch_key(pages, &mut arena, key).unwrap(),
    }
    assert!(tree.is_dirty(), "a touched tree is written at commit");
    tree.rebalance(pages, &mut arena, alloc).unwrap();
    let new_root = tree.spill(pages, &mut arena, alloc).unwrap();
    store.commit();
    let after = walk(store.pages(), new_root);
    assert_eq!(after.keys, before.keys, "touching changed the keys");
    // Every page of the path is gone (freed, whole with its overflow), no other page is.
    let gone: BTreeSet<Pgid> = before.pages.difference(&after.pages).copied().collect();
    let path_spans: BTreeSet<Pgid> = before
        .pages
        .iter()
        .copied()
        .filter(|pgid| {
            path.iter().any(|start| {
                let page = PageRef::new(store.pages().page(Pgid(0), *start).unwrap(), *start);
                let overflow = page.map_or(0, |p| u64::from(p.header().overflow));
                (start.0..=start.0 + overflow).contains(&pgid.0)
            })
        })
        .collect();
    assert_eq!(gone, path_spans, "n {n}, key {key:?}");
    for pgid in &gone {
        assert!(
            store.free_pages().contains(pgid),
            "old page {pgid} not freed"
        );
    }
    let view = rbolt_btree::TreeView::from_page(store.pages(), new_root);
    for i in 0..n {
        let key = format!("k{i:05}");
        let entry = view.get(key.as_bytes()).unwrap().expect("key kept");
        assert_eq!(entry.value, &vec![i as u8; value_len][..]);
    }
}

#[test]
fn touch_key_rewrites_exactly_the_path() {
    check_touch(1, 10, b"k00000");
    check_touch(2000, 100, b"k00000");
    check_touch(2000, 100, b"k01234");
    check_touch(2000, 100, b"k01999");
    // A key that is not there: the path it would take.
    check_touch(2000, 100, b"k01234x");
    check_touch(2000, 100, b"a");
    check_touch(2000, 100, b"z");
    // Leaves with overflow pages (values larger than a page).
    check_touch(20, 9000, b"k00007");
}

#[test]
fn touch_to_depth_rewrites_the_path_down_to_that_depth_and_nothing_below() {
    // 20,000 keys of 100 bytes: three levels at 4 KiB pages.
    for depth in [0, 1, 2, 5] {
        check_touch_to(20_000, 100, b"k00000", Some(depth));
        check_touch_to(20_000, 100, b"k12345", Some(depth));
        check_touch_to(20_000, 100, b"k19999", Some(depth));
    }
    // Overflow leaves: the branch above one moves, the leaf stays.
    check_touch_to(20, 9000, b"k00007", Some(0));
    check_touch_to(20, 9000, b"k00007", Some(1));
    // Touching again what is a node already reports no page.
    let mut store = MemStore::new(4096, true);
    let root = build(&mut store, 20_000, 100);
    let mut arena = Arena::new(4096);
    let mut tree = Tree::from_page(root);
    let pages = store.pages();
    assert!(
        tree.touch_to_depth(pages, &mut arena, b"k1", 1)
            .unwrap()
            .is_some()
    );
    assert_eq!(
        tree.touch_to_depth(pages, &mut arena, b"k1", 1).unwrap(),
        None
    );
}

#[test]
fn touch_key_on_an_empty_tree_writes_its_root() {
    let mut store = MemStore::new(4096, true);
    let root = build(&mut store, 0, 0);
    let mut arena = Arena::new(4096);
    let mut tree = Tree::from_page(root);
    let (pages, alloc) = store.parts();
    tree.touch_key(pages, &mut arena, b"anything").unwrap();
    tree.rebalance(pages, &mut arena, alloc).unwrap();
    let new_root = tree.spill(pages, &mut arena, alloc).unwrap();
    store.commit();
    assert_ne!(new_root, root, "the root moved");
    assert!(store.free_pages().contains(&root));
    assert!(walk(store.pages(), new_root).keys.is_empty());
}

/// A committed tree of 2000 keys of which all but every fifth were deleted (leaves left about
/// a fifth to a half full), in `store`.
fn thinned(store: &mut MemStore) -> Pgid {
    let root = build(store, 2000, 100);
    let mut arena = Arena::new(store.pages().page_size());
    let mut tree = Tree::from_page(root);
    let (pages, alloc) = store.parts();
    for i in (0..2000).filter(|i| i % 5 != 0) {
        tree.delete(pages, &mut arena, format!("k{i:05}").as_bytes(), 0)
            .unwrap();
    }
    tree.rebalance(pages, &mut arena, alloc).unwrap();
    let root = tree.spill(pages, &mut arena, alloc).unwrap();
    store.commit();
    root
}

#[test]
fn repack_key_merges_sparse_leaves_into_full_pages() {
    let mut store = MemStore::new(4096, true);
    let root = thinned(&mut store);
    let before = walk(store.pages(), root);
    let mut arena = Arena::new(4096);
    let mut tree = Tree::from_page(root);
    tree.set_fill_percent(1.0);
    let (pages, alloc) = store.parts();
    let merged = tree
        .repack_key(pages, &mut arena, alloc, b"k00000", 4 * 4096)
        .unwrap();
    assert!(merged >= 2, "merged {merged}");
    tree.rebalance(pages, &mut arena, alloc).unwrap();
    let new_root = tree.spill(pages, &mut arena, alloc).unwrap();
    store.commit();
    let after = walk(store.pages(), new_root);
    assert_eq!(after.keys, before.keys, "repacking changed the keys");
    assert!(
        after.leaves < before.leaves,
        "{} leaves before, {} after",
        before.leaves,
        after.leaves
    );
    let view = rbolt_btree::TreeView::from_page(store.pages(), new_root);
    for i in (0..2000).step_by(5) {
        let entry = view.get(format!("k{i:05}").as_bytes()).unwrap().unwrap();
        assert_eq!(entry.value, &vec![i as u8; 100][..]);
    }
    // Repacking what is packed: the first leaf is full now, nothing merges.
    let mut tree = Tree::from_page(new_root);
    tree.set_fill_percent(1.0);
    let (pages, alloc) = store.parts();
    let again = tree
        .repack_key(pages, &mut arena, alloc, b"k00000", 4 * 4096)
        .unwrap();
    assert_eq!(again, 0);
    store.rollback();
}

#[test]
fn repack_key_with_a_small_budget_or_a_lone_leaf_merges_little() {
    let mut store = MemStore::new(4096, true);
    let root = thinned(&mut store);
    let mut arena = Arena::new(4096);
    let mut tree = Tree::from_page(root);
    let (pages, alloc) = store.parts();
    // A budget of one page merges at most what fits one page.
    let merged = tree
        .repack_key(pages, &mut arena, alloc, b"k01000", 4096)
        .unwrap();
    tree.rebalance(pages, &mut arena, alloc).unwrap();
    let new_root = tree.spill(pages, &mut arena, alloc).unwrap();
    store.commit();
    let after = walk(store.pages(), new_root);
    assert_eq!(after.keys.len(), 400);
    assert!(merged <= 4, "merged {merged}");
    // A tree that is one leaf has no siblings.
    let mut store = MemStore::new(4096, true);
    let root = build(&mut store, 3, 10);
    let mut tree = Tree::from_page(root);
    let (pages, alloc) = store.parts();
    let merged = tree
        .repack_key(pages, &mut arena, alloc, b"k00001", 4 * 4096)
        .unwrap();
    assert_eq!(merged, 0);
    assert!(
        tree.is_dirty(),
        "the path is touched even when nothing merges"
    );
}
