//! Unit tests of the edges mutation testing found unchecked (issue 48): the refusals of
//! `allocate_pages` and `unallocate_pages`, which must take or give back nothing,
//! `release_range` resuming at the last transaction of its range, and the debug check that
//! one transaction writes at a time.

use crate::{AnyFreelist, Freelist, FreelistKind};
use rbolt_page::{Pgid, Txid};

const TX: Txid = Txid(9);

/// Both freelists with the free ids `ids`, named for the messages.
fn both(ids: &[u64]) -> [(&'static str, AnyFreelist); 2] {
    let ids: Vec<Pgid> = ids.iter().map(|&id| Pgid(id)).collect();
    [("array", FreelistKind::Array), ("span", FreelistKind::Span)].map(|(name, kind)| {
        let mut freelist = AnyFreelist::new(kind);
        freelist.rebuild(&ids).unwrap();
        (name, freelist)
    })
}

fn free_ids(freelist: &AnyFreelist) -> Vec<u64> {
    freelist.free_ids().map(|id| id.0).collect()
}

fn check_invariants(freelist: &AnyFreelist) {
    match freelist {
        AnyFreelist::Array(array) => array.core().check_invariants(),
        AnyFreelist::Span(span) => span.core().check_invariants(),
    }
}

/// `allocate_pages(TX, start, n_pages)` on free `ids` answers `expected`, and when it refuses
/// nothing changed: the free ids are as before and a rollback finds nothing to undo.
fn check_allocate_pages(ids: &[u64], start: u64, n_pages: usize, expected: bool) {
    for (name, mut freelist) in both(ids) {
        let taken = freelist.allocate_pages(TX, Pgid(start), n_pages);
        assert_eq!(taken, expected, "{name}: {ids:?} from {start} n={n_pages}");
        check_invariants(&freelist);
        let left: Vec<u64> = ids
            .iter()
            .copied()
            .filter(|id| !expected || !(start..start + n_pages as u64).contains(id))
            .collect();
        assert_eq!(free_ids(&freelist), left, "{name}: what is left free");
        freelist.rollback(TX);
        check_invariants(&freelist);
        assert_eq!(free_ids(&freelist), ids, "{name}: after the rollback");
    }
}

#[test]
fn allocate_pages_takes_only_runs_that_are_all_free() {
    check_allocate_pages(&[2, 3, 4, 8], 2, 3, true);
    check_allocate_pages(&[2, 3, 4, 8], 2, 1, true);
    check_allocate_pages(&[2, 3, 4, 8], 3, 2, true);
    check_allocate_pages(&[2, 3, 4, 8], 8, 1, true);
    // Nothing asked, a meta page, a page in use inside the run, past the free ids.
    check_allocate_pages(&[2, 3, 4, 8], 3, 0, false);
    check_allocate_pages(&[2, 3, 4, 8], 1, 2, false);
    check_allocate_pages(&[2, 3, 4, 8], 0, 1, false);
    check_allocate_pages(&[2, 3, 4, 8], 3, 3, false);
    check_allocate_pages(&[2, 3, 4, 8], 8, 2, false);
}

/// Gives back `(start, n_pages)` with `unallocate_pages` and checks the answer, and that a
/// refusal changed nothing: the whole freelist, records and undo log included, is as before.
fn check_unallocate(
    freelist: &mut AnyFreelist,
    name: &str,
    start: u64,
    n_pages: usize,
    expected: bool,
) {
    let before = freelist.clone();
    let given = freelist.unallocate_pages(TX, Pgid(start), n_pages);
    assert_eq!(given, expected, "{name}: give back {start} n={n_pages}");
    check_invariants(freelist);
    if !expected {
        assert_eq!(*freelist, before, "{name}: a refusal changed the freelist");
    }
}

#[test]
fn unallocate_pages_refuses_what_the_transaction_did_not_take_page_by_page() {
    for (name, mut freelist) in both(&[2, 3, 4, 6, 8, 10, 11, 12]) {
        assert!(freelist.allocate_pages(TX, Pgid(2), 2));
        assert_eq!(freelist.allocate(TX, 3), Some(Pgid(10)), "{name}");
        freelist.record_allocation(TX, Pgid(40), 1);
        assert!(freelist.allocate_pages(TX, Pgid(6), 1));
        check_unallocate(&mut freelist, name, 2, 0, false);
        // Not taken, taken as one run of three, taken from the high-water mark, taken by
        // another transaction, running past the pages taken, and past the last page id.
        check_unallocate(&mut freelist, name, 4, 1, false);
        check_unallocate(&mut freelist, name, 10, 1, false);
        check_unallocate(&mut freelist, name, 40, 1, false);
        assert!(!freelist.unallocate_pages(Txid(8), Pgid(2), 1), "{name}");
        check_unallocate(&mut freelist, name, 2, 3, false);
        check_unallocate(&mut freelist, name, 6, 2, false);
        check_unallocate(&mut freelist, name, u64::MAX, 1, false);
        // Given back: the pages are free, and the rollback gives back only the rest.
        check_unallocate(&mut freelist, name, 2, 2, true);
        check_unallocate(&mut freelist, name, 2, 1, false);
        assert_eq!(free_ids(&freelist), [2, 3, 4, 8], "{name}");
        freelist.rollback(TX);
        check_invariants(&freelist);
        assert_eq!(free_ids(&freelist), [2, 3, 4, 6, 8, 10, 11, 12], "{name}");
    }
}

/// Pages taken one by one out of order give back each its own record, not the records
/// that happen to follow the first one.
#[test]
fn unallocate_pages_taken_out_of_order_gives_back_their_own_records() {
    for (name, mut freelist) in both(&[2, 3, 4, 5, 6, 7]) {
        assert!(freelist.allocate_pages(TX, Pgid(3), 1));
        assert!(freelist.allocate_pages(TX, Pgid(2), 1));
        assert!(freelist.allocate_pages(TX, Pgid(6), 1));
        assert!(freelist.allocate_pages(TX, Pgid(4), 2));
        check_unallocate(&mut freelist, name, 2, 2, true);
        assert_eq!(free_ids(&freelist), [2, 3, 7], "{name}");
        check_unallocate(&mut freelist, name, 4, 3, true);
        assert_eq!(free_ids(&freelist), [2, 3, 4, 5, 6, 7], "{name}");
        // Nothing is left to undo: the rollback gives back no page twice.
        freelist.rollback(TX);
        check_invariants(&freelist);
        assert_eq!(free_ids(&freelist), [2, 3, 4, 5, 6, 7], "{name}");
    }
}

/// A second `release_range` with the same `begin` looks only at transactions after the ones
/// it looked at before; when that leaves exactly the range's last transaction, it still
/// looks at it.
#[test]
fn release_range_resumes_at_the_last_transaction_of_its_range() {
    for (name, mut freelist) in both(&[2, 3, 4, 5]) {
        assert_eq!(freelist.allocate(Txid(4), 2), Some(Pgid(2)), "{name}");
        assert_eq!(freelist.allocate(Txid(4), 1), Some(Pgid(4)), "{name}");
        freelist.commit(Txid(4));
        freelist.free(Txid(5), Pgid(2), 1).unwrap();
        freelist.commit(Txid(5));
        freelist.release_range(Txid(3), Txid(6));
        assert_eq!(free_ids(&freelist), [2, 3, 5], "{name}: freed by 5");
        freelist.free(Txid(6), Pgid(4), 0).unwrap();
        freelist.commit(Txid(6));
        freelist.release_range(Txid(3), Txid(6));
        assert_eq!(free_ids(&freelist), [2, 3, 4, 5], "{name}: freed by 6");
        assert_eq!(freelist.pending_count(), 0, "{name}");
        check_invariants(&freelist);
    }
}

/// A second transaction that allocates while the first neither committed nor rolled back is
/// a caller's bug, which debug builds stop at once (there is no `Err` to return: the freelist
/// cannot tell which transaction is the stray one).
#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "neither committed nor rolled back")]
fn a_second_writer_before_the_first_ends_fails_a_debug_check() {
    let [(_, mut freelist), _] = both(&[2, 3]);
    assert_eq!(freelist.allocate(Txid(4), 1), Some(Pgid(2)));
    freelist.allocate(Txid(5), 1);
}
