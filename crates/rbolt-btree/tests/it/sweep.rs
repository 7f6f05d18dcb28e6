//! `Tree::delete_where` beside deletes one key at a time: the same entries, the same nodes
//! made, the same pages written at commit; and a walk that fails or deletes nothing leaves
//! the tree, edited nodes included, as it was.

use crate::support::walk;
use rbolt_btree::{Arena, Delete, Direction, MemStore, Tree, Verdict};
use rbolt_page::{Corruption, Pgid, Reason};
use std::collections::BTreeSet;
use std::ops::Bound;

const PAGE: usize = 512;
const KEYS: u32 = 3000;

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

/// The number of a key made by [`key`]; `None` for the key [`edit_first`] adds.
fn number(key: &[u8]) -> Option<u32> {
    Some(u32::from_be_bytes(key.try_into().ok()?))
}

/// A store holding a committed tree of `KEYS` keys in 512-byte pages (three levels or more),
/// and the tree's root.
fn committed() -> (MemStore, Pgid) {
    let mut store = MemStore::new(PAGE, true);
    let mut arena = Arena::new(PAGE);
    let mut tree = Tree::new();
    let (pages, alloc) = store.parts();
    for i in 0..KEYS {
        tree.put(pages, &mut arena, &key(i), &[i as u8; 20], 0)
            .unwrap();
    }
    tree.rebalance(pages, &mut arena, alloc).unwrap();
    let root = tree.spill(pages, &mut arena, alloc).unwrap();
    store.commit();
    assert!(walk(store.pages(), root).depth >= 3);
    (store, root)
}

/// What a committed outcome shows: the keys, the pages in use, the free pages, the high-water
/// mark.
type Committed = (Vec<Vec<u8>>, BTreeSet<Pgid>, BTreeSet<Pgid>, Pgid);

/// Commits `tree` into `store` and describes the result.
fn commit(store: &mut MemStore, mut tree: Tree, arena: &mut Arena) -> Committed {
    let (pages, alloc) = store.parts();
    tree.rebalance(pages, arena, alloc).unwrap();
    let root = tree.spill(pages, arena, alloc).unwrap();
    store.commit();
    let found = walk(store.pages(), root);
    (
        found.keys,
        found.pages,
        store.free_pages().clone(),
        store.high_water(),
    )
}

/// Edits done before the walk, so that some of the nodes it meets exist already: a put in the
/// low keys and a delete in the high ones.
fn edit_first(tree: &mut Tree, store: &MemStore, arena: &mut Arena) {
    let pages = store.pages();
    tree.put(pages, arena, &[0, 0, 0, 100, 1], b"new", 0)
        .unwrap();
    assert_eq!(
        tree.delete(pages, arena, &key(2900), 0).unwrap(),
        Delete::Deleted { flags: 0 }
    );
}

/// Deletes with `delete_where` from `start` in `direction` the keys `doomed` names among those
/// it is shown, stopping at `stop`; and, in a second store, the same keys one at a time. Both
/// trees must then agree on their entries, the nodes they made and what their commits write.
fn check_same_as_deletes(
    edited: bool,
    start: Bound<u32>,
    direction: Direction,
    doomed: impl Fn(u32) -> bool,
    stop: u32,
) {
    let (mut sweep_store, root) = committed();
    let (mut one_store, _) = committed();
    let mut arena = Arena::new(PAGE);
    let mut sweep = Tree::from_page(root);
    let mut one = Tree::from_page(root);
    if edited {
        edit_first(&mut sweep, &sweep_store, &mut arena);
        edit_first(&mut one, &one_store, &mut arena);
    }
    let start_key = start.map(key);
    let start = start_key.as_ref().map(|k| &k[..]);
    let mut expected = Vec::new();
    let deleted = sweep
        .delete_where::<Corruption>(
            sweep_store.pages(),
            &mut arena,
            start,
            direction,
            &mut |entry| {
                let i = number(entry.key);
                let delete = i.is_some_and(&doomed);
                if let (true, Some(i)) = (delete, i) {
                    expected.push(i);
                }
                Ok(match (delete, i == Some(stop)) {
                    (true, true) => Verdict::DeleteAndStop,
                    (true, false) => Verdict::Delete,
                    (false, true) => Verdict::Stop,
                    (false, false) => Verdict::Keep,
                })
            },
        )
        .unwrap();
    assert_eq!(deleted, expected.len() as u64);
    assert!(!expected.is_empty(), "the case deletes something");
    for &i in &expected {
        assert_eq!(
            one.delete(one_store.pages(), &mut arena, &key(i), 0)
                .unwrap(),
            Delete::Deleted { flags: 0 }
        );
    }
    assert_eq!(sweep.stats(), one.stats(), "the nodes made differ");
    let what = format!("edited {edited}, {direction:?}, deleted {expected:?}");
    let sweep = commit(&mut sweep_store, sweep, &mut arena);
    let one = commit(&mut one_store, one, &mut arena);
    assert_eq!(sweep, one, "{what}");
}

#[test]
fn delete_where_writes_what_deleting_the_keys_one_by_one_writes() {
    for edited in [false, true] {
        // A few keys of one leaf, after a walk over many leaves it leaves unchanged.
        let middle = |i: u32| (1500..1504).contains(&i);
        check_same_as_deletes(edited, Bound::Unbounded, Direction::Forward, middle, 1510);
        check_same_as_deletes(edited, Bound::Unbounded, Direction::Backward, middle, 1490);
        // Keys far apart: changed leaves under unchanged ones and unchanged branches.
        let sparse = |i: u32| i % 700 == 3;
        check_same_as_deletes(
            edited,
            Bound::Included(0),
            Direction::Forward,
            sparse,
            u32::MAX,
        );
        check_same_as_deletes(
            edited,
            Bound::Excluded(2999),
            Direction::Backward,
            sparse,
            0,
        );
        // A whole run: leaves emptied, branches losing children.
        let run = |i: u32| (1000..1600).contains(&i);
        check_same_as_deletes(edited, Bound::Included(900), Direction::Forward, run, 1700);
        check_same_as_deletes(edited, Bound::Excluded(1650), Direction::Backward, run, 950);
    }
}

/// A walk that fails after deleting, or deletes nothing, leaves the tree as it was: what it
/// commits is what the tree commits without the walk.
#[test]
fn a_failed_or_empty_delete_where_leaves_edited_nodes_as_they_were() {
    #[derive(Clone, Copy, Debug)]
    enum Ending {
        FailAt(u32),
        NothingDeleted,
    }
    for ending in [
        Ending::FailAt(2800),
        Ending::FailAt(120),
        Ending::NothingDeleted,
    ] {
        for direction in [Direction::Forward, Direction::Backward] {
            let (mut walked_store, root) = committed();
            let (mut still_store, _) = committed();
            let mut arena = Arena::new(PAGE);
            let mut walked = Tree::from_page(root);
            let mut still = Tree::from_page(root);
            edit_first(&mut walked, &walked_store, &mut arena);
            edit_first(&mut still, &still_store, &mut arena);
            let before = walked.stats();
            let mut shown = 0;
            let outcome = walked.delete_where::<Corruption>(
                walked_store.pages(),
                &mut arena,
                Bound::Unbounded,
                direction,
                &mut |entry| {
                    shown += 1;
                    match ending {
                        Ending::FailAt(at) if number(entry.key) == Some(at) => Err(
                            Corruption::new(Pgid(0), Reason::Other("the closure failed")),
                        ),
                        Ending::FailAt(_) => Ok(Verdict::Delete),
                        Ending::NothingDeleted => Ok(Verdict::Keep),
                    }
                },
            );
            let what = format!("{ending:?}, {direction:?}");
            match ending {
                Ending::FailAt(_) => assert!(outcome.is_err(), "{what}"),
                Ending::NothingDeleted => {
                    assert_eq!(outcome.unwrap(), 0, "{what}");
                    assert_eq!(shown, KEYS, "every entry shown, {what}");
                }
            }
            assert!(
                shown > 50,
                "{what}: the walk crossed leaves before it ended"
            );
            assert_eq!(walked.stats(), before, "{what}");
            let walked = commit(&mut walked_store, walked, &mut arena);
            let still = commit(&mut still_store, still, &mut arena);
            assert_eq!(walked, still, "{what}");
        }
    }
}

/// A walk that deletes nothing gives every buffer it took back to the arena: the pool then
/// holds one per level of the tree, the most nodes the walk held at once (one path).
#[test]
fn a_walk_that_deletes_nothing_gives_its_buffers_back() {
    let (store, root) = committed();
    let depth = walk(store.pages(), root).depth;
    let mut arena = Arena::new(PAGE);
    let mut tree = Tree::from_page(root);
    for direction in [Direction::Forward, Direction::Backward] {
        let deleted = tree
            .delete_where::<Corruption>(
                store.pages(),
                &mut arena,
                Bound::Unbounded,
                direction,
                &mut |_| Ok(Verdict::Keep),
            )
            .unwrap();
        assert_eq!(deleted, 0);
        assert_eq!(arena.len(), depth, "{direction:?}");
    }
}
