//! `FreeRuns` answers first fit as the freelists allocate, below a page and after earlier
//! allocations, and changes nothing in the freelist it copies.

use crate::{KINDS, observe};
use quickcheck::{QuickCheck, TestResult};
use rbolt_freelist::{AnyFreelist, FreeRuns, Freelist, FreelistKind};
use rbolt_page::{Pgid, Txid};

/// The free ids `bits` say (bit i set: page i + 2 is free), in a freelist of `kind`.
fn freelist_of(kind: FreelistKind, bits: &[bool]) -> AnyFreelist {
    let ids: Vec<Pgid> = (0..bits.len())
        .filter(|&i| bits[i])
        .map(|i| Pgid(i as u64 + 2))
        .collect();
    let mut freelist = AnyFreelist::new(kind);
    freelist.rebuild(&ids).unwrap();
    freelist
}

/// The plainest restatement: the lowest id that starts `n_pages` consecutive free ids, all
/// below `end`.
fn lowest_run_below(free: &[Pgid], n_pages: usize, end: u64) -> Option<Pgid> {
    if n_pages == 0 {
        return None;
    }
    let mut run: Option<(u64, usize)> = None;
    for &Pgid(id) in free.iter().take_while(|id| id.0 < end) {
        run = match run {
            Some((start, len)) if start + len as u64 == id => Some((start, len + 1)),
            _ => Some((id, 1)),
        };
        if let Some((start, len)) = run
            && len == n_pages
        {
            return Some(Pgid(start));
        }
    }
    None
}

/// Queries and allocations from `(n_pages, end)` pairs: each agrees with the restatement, an
/// allocation takes what both freelists' `allocate` takes, and a refused one takes nothing.
fn agrees(bits: Vec<bool>, asks: Vec<(u8, u8)>) -> TestResult {
    let mut freelists = KINDS.map(|kind| freelist_of(kind, &bits));
    let before = observe(&freelists[0]);
    let mut runs = FreeRuns::new(&freelists[0]);
    assert_eq!(runs, FreeRuns::new(&freelists[1]));
    assert_eq!(
        observe(&freelists[0]),
        before,
        "copying changed the freelist"
    );
    for (index, &(n, end)) in asks.iter().enumerate() {
        let n_pages = usize::from(n % 6);
        let end = Pgid(u64::from(end) % (bits.len() as u64 + 4));
        let free: Vec<Pgid> = freelists[0].free_ids().collect();
        let expected = lowest_run_below(&free, n_pages, end.0);
        assert_eq!(
            runs.first_fit_below(n_pages, end),
            expected,
            "{n_pages} below {end}"
        );
        if index % 2 == 0 {
            continue;
        }
        let len = runs.len();
        assert_eq!(runs.allocate_below(n_pages, end), expected);
        match expected {
            Some(start) => {
                for freelist in &mut freelists {
                    assert_eq!(freelist.allocate(Txid(9), n_pages), Some(start));
                }
                assert_eq!(runs.len(), len - n_pages);
            }
            None => assert_eq!(runs.len(), len, "a refused allocation took pages"),
        }
        let lowest = freelists[0].free_ids().next();
        assert_eq!(runs.first_fit_below(1, Pgid(u64::MAX)), lowest);
    }
    assert_eq!(runs.len(), freelists[0].free_count());
    TestResult::passed()
}

#[test]
fn first_fit_below_a_page_is_the_lowest_run_below_it_and_what_allocate_takes() {
    QuickCheck::new()
        .tests(500)
        .quickcheck(agrees as fn(Vec<bool>, Vec<(u8, u8)>) -> TestResult);
}

#[test]
fn a_run_cut_by_the_page_does_not_fit_and_a_lower_short_run_does_not_either() {
    // Free: 3, 6..=8, 20..=21.
    let mut freelist = AnyFreelist::new(FreelistKind::Span);
    freelist
        .rebuild(&[Pgid(3), Pgid(6), Pgid(7), Pgid(8), Pgid(20), Pgid(21)])
        .unwrap();
    let runs = FreeRuns::new(&freelist);
    assert_eq!(runs.first_fit_below(1, Pgid(4)), Some(Pgid(3)));
    assert_eq!(runs.first_fit_below(1, Pgid(3)), None);
    assert_eq!(runs.first_fit_below(3, Pgid(9)), Some(Pgid(6)));
    assert_eq!(runs.first_fit_below(3, Pgid(8)), None);
    // 6..=8 is the first fit for 2, so a page cutting it leaves none, though 20..=21 is free.
    assert_eq!(runs.first_fit_below(2, Pgid(7)), None);
    assert_eq!(runs.first_fit_below(2, Pgid(22)), Some(Pgid(6)));
    assert_eq!(runs.first_fit_below(4, Pgid(100)), None);
    assert_eq!(runs.first_fit_below(0, Pgid(100)), None);
}

#[test]
fn the_tail_is_the_free_run_that_ends_at_the_page() {
    let mut freelist = AnyFreelist::new(FreelistKind::Array);
    freelist
        .rebuild(&[Pgid(3), Pgid(6), Pgid(7), Pgid(8)])
        .unwrap();
    let runs = FreeRuns::new(&freelist);
    assert_eq!(runs.tail_len(Pgid(9)), 3);
    assert_eq!(runs.tail_len(Pgid(8)), 0);
    assert_eq!(runs.tail_len(Pgid(4)), 1);
    assert_eq!(runs.tail_len(Pgid(10)), 0);
    assert_eq!(FreeRuns::default().tail_len(Pgid(9)), 0);
}

#[test]
fn pending_ids_are_not_free_runs() {
    for kind in KINDS {
        let mut freelist = AnyFreelist::new(kind);
        freelist.rebuild(&[Pgid(5)]).unwrap();
        freelist.free(Txid(4), Pgid(6), 2).unwrap();
        let runs = FreeRuns::new(&freelist);
        assert_eq!(runs.len(), 1);
        assert_eq!(runs.first_fit_below(2, Pgid(100)), None);
        assert_eq!(runs.tail_len(Pgid(6)), 1);
    }
}
