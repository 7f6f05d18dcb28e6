//! bbolt's release semantics, rollback and the transaction protocol, scenario by scenario.

use crate::{KINDS, observe};
use rbolt_freelist::{
    AnyFreelist, ArrayFreelist, Freelist, FreelistKind, PendingPage, SpanFreelist, TXID_UNKNOWN,
};
use rbolt_page::{Pgid, Txid};

/// A page of `n_pages` at `pgid`, allocated by `alloc_tx` and freed by `free_tx`.
struct Page {
    pgid: u64,
    n_pages: usize,
    alloc_tx: u64,
    free_tx: u64,
}

const fn page(pgid: u64, n_pages: usize, alloc_tx: u64, free_tx: u64) -> Page {
    Page {
        pgid,
        n_pages,
        alloc_tx,
        free_tx,
    }
}

/// A freelist in which each of `pages` was allocated and later freed, as the transactions
/// say. The pages are the only free ids at first, laid out so first fit hands them out in
/// order.
fn with_history(kind: FreelistKind, pages: &[Page]) -> AnyFreelist {
    let mut freelist = AnyFreelist::new(kind);
    let ids: Vec<Pgid> = pages
        .iter()
        .flat_map(|p| (p.pgid..p.pgid + p.n_pages as u64).map(Pgid))
        .collect();
    freelist.rebuild(&ids).unwrap();
    for p in pages {
        assert_eq!(
            freelist.allocate(Txid(p.alloc_tx), p.n_pages),
            Some(Pgid(p.pgid))
        );
        freelist.commit(Txid(p.alloc_tx));
    }
    for p in pages {
        freelist
            .free(Txid(p.free_tx), Pgid(p.pgid), (p.n_pages - 1) as u32)
            .unwrap();
        freelist.commit(Txid(p.free_tx));
    }
    freelist
}

/// After `ranges` are released from `pages`' history, exactly `expected` is free.
fn check_ranges(pages: &[Page], ranges: &[(u64, u64)], expected: &[u64]) {
    for kind in KINDS {
        let mut freelist = with_history(kind, pages);
        for &(begin, end) in ranges {
            freelist.release_range(Txid(begin), Txid(end));
        }
        let free: Vec<u64> = freelist.free_ids().map(|id| id.0).collect();
        assert_eq!(free, expected, "{kind:?}: ranges {ranges:?}");
        assert_eq!(
            freelist.count(),
            pages.iter().map(|p| p.n_pages).sum::<usize>()
        );
    }
}

#[test]
fn release_range_boundaries() {
    let one = [page(3, 1, 100, 200)];
    check_ranges(&one, &[(1, 300)], &[3]);
    check_ranges(&one, &[(1, 200)], &[3]); // ends at the freeing tx
    check_ranges(&one, &[(1, 199)], &[]); // ends before it
    check_ranges(&one, &[(100, 300)], &[3]); // begins at the allocating tx
    check_ranges(&one, &[(101, 300)], &[]); // begins after it: a reader may see the page
    check_ranges(&one, &[(300, 100)], &[]); // an empty range
    // A reader at the allocating tx keeps the page, whatever surrounds it.
    let close = [page(3, 1, 199, 200)];
    check_ranges(&close, &[(199, 200)], &[3]);
    check_ranges(&close, &[(100, 198), (200, 300)], &[]);
    // Readers at 199 and 200 (ranges between adjacent readers are empty).
    let adjacent = [page(3, 1, 199, 200), page(4, 1, 200, 201)];
    check_ranges(&adjacent, &[(100, 198), (200, 199), (201, 300)], &[]);
    check_ranges(&adjacent, &[(201, 199), (201, 200), (200, 200)], &[]);
    // A reader at 150: what lived entirely before or entirely after it goes.
    let many = [
        page(3, 1, 100, 125),
        page(4, 1, 100, 200),
        page(5, 1, 125, 150),
        page(6, 1, 125, 175),
        page(7, 2, 150, 175),
        page(9, 2, 175, 200),
    ];
    check_ranges(&many, &[(50, 149), (151, 300)], &[3, 9, 10]);
    check_ranges(&many, &[(50, 300)], &[3, 4, 5, 6, 7, 8, 9, 10]);
}

#[test]
fn release_pending_uses_the_gaps_between_readers() {
    let many = [
        page(3, 1, 100, 125),
        page(4, 1, 100, 200),
        page(5, 1, 125, 150),
        page(6, 1, 125, 175),
        page(7, 2, 150, 175),
        page(9, 2, 175, 200),
    ];
    let check = |readers: &[u64], expected: &[u64]| {
        for kind in KINDS {
            let mut freelist = with_history(kind, &many);
            let readers: Vec<Txid> = readers.iter().copied().map(Txid).collect();
            freelist.release_pending(&readers);
            let free: Vec<u64> = freelist.free_ids().map(|id| id.0).collect();
            assert_eq!(free, expected, "{kind:?}: readers {readers:?}");
        }
    };
    check(&[], &[3, 4, 5, 6, 7, 8, 9, 10]);
    check(&[150], &[3, 9, 10]);
    check(&[300, 150, 150], &[3, 9, 10]); // any order, duplicates
    check(&[90], &[3, 4, 5, 6, 7, 8, 9, 10]); // all allocated after the reader
    check(&[100], &[5, 6, 7, 8, 9, 10]); // it saw only what tx 100 allocated
    check(&[130], &[3, 7, 8, 9, 10]);
    check(&[130, 180], &[3, 7, 8]);
    check(&[0, u64::MAX], &[3, 4, 5, 6, 7, 8, 9, 10]); // extreme txids do not overflow
}

#[test]
fn release_up_to() {
    for kind in KINDS {
        let mut freelist = AnyFreelist::new(kind);
        freelist.free(Txid(100), Pgid(12), 1).unwrap();
        freelist.free(Txid(100), Pgid(9), 0).unwrap();
        freelist.free(Txid(102), Pgid(39), 0).unwrap();
        freelist.release(Txid(99));
        assert_eq!(freelist.free_count(), 0);
        freelist.release(Txid(100));
        freelist.release(Txid(101));
        assert_eq!(
            freelist.free_ids().map(|id| id.0).collect::<Vec<_>>(),
            [9, 12, 13]
        );
        assert_eq!(
            freelist.pending().ids().map(|id| id.0).collect::<Vec<_>>(),
            [39]
        );
        freelist.release(Txid(u64::MAX));
        assert_eq!(
            freelist.free_ids().map(|id| id.0).collect::<Vec<_>>(),
            [9, 12, 13, 39]
        );
        assert_eq!(freelist.pending_count(), 0);
    }
}

#[test]
fn rollback_restores_the_state_before_the_transaction() {
    for kind in KINDS {
        let mut freelist = AnyFreelist::new(kind);
        freelist
            .rebuild(&(2..40).map(Pgid).collect::<Vec<_>>())
            .unwrap();
        assert_eq!(freelist.allocate(Txid(5), 3), Some(Pgid(2)));
        freelist.commit(Txid(5));
        freelist.free(Txid(6), Pgid(50), 0).unwrap();
        freelist.commit(Txid(6));
        let before = observe(&freelist);

        // Transaction 7 allocates, frees what tx 5 allocated and an old page, then aborts.
        assert_eq!(freelist.allocate(Txid(7), 1), Some(Pgid(5)));
        assert_eq!(freelist.allocate(Txid(7), 4), Some(Pgid(6)));
        freelist.free(Txid(7), Pgid(2), 2).unwrap();
        freelist.free(Txid(7), Pgid(60), 3).unwrap();
        assert_eq!(
            freelist
                .pending()
                .iter()
                .filter(|p| p.freed_by == Txid(7))
                .count(),
            7
        );
        freelist.rollback(Txid(7));
        assert_eq!(observe(&freelist), before, "{kind:?}");

        // The allocation record of tx 5 came back: freeing its run again records it.
        freelist.free(Txid(7), Pgid(2), 2).unwrap();
        let page = freelist
            .pending()
            .iter()
            .find(|p| p.pgid == Pgid(2))
            .unwrap();
        assert_eq!(
            page,
            PendingPage {
                pgid: Pgid(2),
                freed_by: Txid(7),
                allocated_by: Txid(5)
            }
        );
        // Rolling back a transaction that did nothing changes nothing.
        freelist.rollback(Txid(8));
        freelist.rollback(Txid(7));
        assert_eq!(observe(&freelist), before, "{kind:?}");
    }
}

#[test]
fn pages_of_unknown_origin() {
    for kind in KINDS {
        let mut freelist = AnyFreelist::new(kind);
        // Page 12 was never allocated by this freelist (e.g. the old freelist page).
        freelist.free(Txid(100), Pgid(12), 0).unwrap();
        let page = freelist.pending().iter().next().unwrap();
        assert_eq!(page.allocated_by, TXID_UNKNOWN);
        // No range that starts after 0 can release it; only `release` does.
        freelist.release_range(Txid(1), Txid(u64::MAX));
        assert_eq!(freelist.free_count(), 0);
        freelist.rollback(Txid(100));
        assert!(!freelist.is_freed(Pgid(12)));
        freelist.free(Txid(101), Pgid(12), 0).unwrap();
        assert!(freelist.is_freed(Pgid(12)));
        assert_eq!(freelist.pending().freed_by(Pgid(12)), Some(Txid(101)));
    }
}

#[test]
fn counts_and_lookups() {
    for kind in KINDS {
        let mut freelist = AnyFreelist::new(kind);
        assert_eq!(freelist.kind(), kind);
        assert_eq!(
            (
                freelist.free_count(),
                freelist.pending_count(),
                freelist.count()
            ),
            (0, 0, 0)
        );
        assert_eq!(freelist.write_size(), 16);
        freelist.rebuild(&[Pgid(9), Pgid(3), Pgid(4)]).unwrap();
        freelist.free(Txid(3), Pgid(20), 2).unwrap();
        assert_eq!(
            (
                freelist.free_count(),
                freelist.pending_count(),
                freelist.count()
            ),
            (3, 3, 6)
        );
        assert_eq!(freelist.write_size(), 16 + 6 * 8);
        let freed: Vec<u64> = (0..25).filter(|&id| freelist.is_freed(Pgid(id))).collect();
        assert_eq!(freed, [3, 4, 9, 20, 21, 22]);
        assert_eq!(freelist.allocate(Txid(4), 0), None);
        assert_eq!(freelist.allocate(Txid(4), 3), None);
        assert_eq!(freelist.allocate(Txid(4), 2), Some(Pgid(3)));
        assert_eq!(freelist.allocate(Txid(4), 1), Some(Pgid(9)));
        assert_eq!(freelist.allocate(Txid(4), 1), None);
        // Rebuilding keeps pending pages out of the free set.
        freelist.commit(Txid(4));
        freelist
            .rebuild(&[Pgid(21), Pgid(30), Pgid(20), Pgid(22)])
            .unwrap();
        assert_eq!(freelist.free_ids().map(|id| id.0).collect::<Vec<_>>(), [30]);
    }
}

#[test]
fn the_trait_is_object_safe() {
    let mut freelists: Vec<Box<dyn Freelist>> = vec![
        Box::new(ArrayFreelist::new()),
        Box::new(SpanFreelist::new()),
    ];
    for freelist in &mut freelists {
        freelist.rebuild(&[Pgid(5), Pgid(6)]).unwrap();
        assert_eq!(freelist.allocate(Txid(2), 2), Some(Pgid(5)));
    }
    assert_eq!(freelists[0].kind(), FreelistKind::Array);
    assert_eq!(freelists[1].kind(), FreelistKind::Span);
}

#[test]
fn pages_taken_from_the_high_water_mark_release_between_readers_once_recorded() {
    for kind in KINDS {
        let mut freelist = AnyFreelist::new(kind);
        // Transaction 5 grows the file by two pages at 10; transaction 7 frees them while a
        // reader of txid 3 is still open.
        freelist.record_allocation(Txid(5), Pgid(10), 2);
        freelist.commit(Txid(5));
        freelist.free(Txid(7), Pgid(10), 1).unwrap();
        freelist.commit(Txid(7));
        // Without the record the reader at 3 would pin them; with it, nobody between 4 and the
        // end saw them.
        freelist.release_pending(&[Txid(3)]);
        let free: Vec<u64> = freelist.free_ids().map(|id| id.0).collect();
        assert_eq!(free, [10, 11], "{kind:?}");
        assert_eq!(freelist.pending_count(), 0, "{kind:?}");
    }
}

#[test]
fn rolling_back_a_high_water_allocation_forgets_it_without_freeing_it() {
    for kind in KINDS {
        let mut freelist = AnyFreelist::new(kind);
        let before = freelist.clone();
        freelist.record_allocation(Txid(2), Pgid(4), 3);
        freelist.rollback(Txid(2));
        assert_eq!(freelist.free_count(), 0, "{kind:?}");
        assert_eq!(
            freelist, before,
            "{kind:?}: rollback restores the state exactly"
        );
        // The same pages taken again by the next transaction, then freed by a later one,
        // are attributed to that transaction only.
        freelist.record_allocation(Txid(2), Pgid(4), 3);
        freelist.commit(Txid(2));
        freelist.free(Txid(3), Pgid(4), 2).unwrap();
        assert_eq!(
            freelist
                .pending()
                .iter()
                .map(|p| p.allocated_by)
                .collect::<Vec<_>>(),
            [Txid(2); 3]
        );
    }
}

/// `pend_free_pages` (a writer opening while readers of older snapshots live in other
/// processes): every free page is pending at the given txid, kept by any reader at or before
/// it, released once every reader is past it, and the page written lists the same ids.
#[test]
fn free_pages_held_for_older_readers_wait_until_every_reader_is_past_them() {
    for kind in KINDS {
        let mut freelist = AnyFreelist::new(kind);
        let ids: Vec<Pgid> = [3, 4, 5, 9, 12, 13].map(Pgid).to_vec();
        freelist.rebuild(&ids).unwrap();
        let count = freelist.count();
        freelist.pend_free_pages(Txid(9)).unwrap();
        assert_eq!(
            (freelist.free_count(), freelist.pending_count()),
            (0, 6),
            "{kind:?}"
        );
        assert_eq!(
            freelist.count(),
            count,
            "{kind:?}: the page lists the same ids"
        );
        for reader in [0, 4, 9] {
            let mut held = freelist.clone();
            held.release_pending(&[Txid(reader), Txid(40)]);
            assert_eq!(
                held.free_count(),
                0,
                "{kind:?}: a reader at {reader} keeps them"
            );
        }
        freelist.release_pending(&[Txid(10)]);
        let free: Vec<Pgid> = freelist.free_ids().collect();
        assert_eq!(free, ids, "{kind:?}: every reader past them");
    }
}
