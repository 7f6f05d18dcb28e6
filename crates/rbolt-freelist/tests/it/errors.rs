//! Misuse and corrupt pages give typed errors and change nothing.

use crate::{KINDS, Observed, observe};
use rbolt_freelist::{AnyFreelist, Freelist, FreelistError};
use rbolt_page::{
    Corruption, FreelistPage, PAGE_HEADER_SIZE, PageHeader, PageKind, Pgid, Reason, Txid,
    freelist_page_size, write_freelist_header, write_pgid,
};

/// A freelist with free, pending and allocated pages: free 10..=14 and 20, pending 30 and 31
/// (tx 4), pages 10 and 11 allocated by tx 5, still open.
fn busy(kind: rbolt_freelist::FreelistKind) -> AnyFreelist {
    let mut freelist = AnyFreelist::new(kind);
    let ids: Vec<Pgid> = [10, 11, 12, 13, 14, 20].map(Pgid).to_vec();
    freelist.rebuild(&ids).unwrap();
    freelist.free(Txid(4), Pgid(30), 1).unwrap();
    freelist.commit(Txid(4));
    assert_eq!(freelist.allocate(Txid(5), 2), Some(Pgid(10)));
    freelist
}

/// `op` on a busy freelist fails with `expected` and leaves it as it was, for both kinds.
fn check_err(op: impl Fn(&mut AnyFreelist) -> Result<(), FreelistError>, expected: FreelistError) {
    for kind in KINDS {
        let mut freelist = busy(kind);
        let before: Observed = observe(&freelist);
        assert_eq!(op(&mut freelist), Err(expected.clone()), "{kind:?}");
        assert_eq!(
            observe(&freelist),
            before,
            "{kind:?}: a failed call changed the freelist"
        );
        // Rollback still undoes tx 5 exactly after the failure.
        freelist.rollback(Txid(5));
        assert_eq!(
            freelist.free_ids().map(|id| id.0).collect::<Vec<_>>(),
            [10, 11, 12, 13, 14, 20]
        );
    }
}

#[test]
fn freeing_a_meta_page() {
    check_err(
        |f| f.free(Txid(5), Pgid(0), 0),
        FreelistError::MetaPage { pgid: Pgid(0) },
    );
    check_err(
        |f| f.free(Txid(5), Pgid(1), 0),
        FreelistError::MetaPage { pgid: Pgid(1) },
    );
    check_err(
        |f| f.free(Txid(5), Pgid(1), 40),
        FreelistError::MetaPage { pgid: Pgid(1) },
    );
}

#[test]
fn double_free() {
    let already = |pgid| FreelistError::AlreadyFreed { pgid: Pgid(pgid) };
    // Free, pending, and spans that run into either; the error names the lowest taken id.
    check_err(|f| f.free(Txid(5), Pgid(12), 0), already(12));
    check_err(|f| f.free(Txid(5), Pgid(20), 0), already(20));
    check_err(|f| f.free(Txid(5), Pgid(31), 0), already(31));
    check_err(|f| f.free(Txid(5), Pgid(28), 5), already(30));
    check_err(|f| f.free(Txid(5), Pgid(15), 6), already(20));
    check_err(|f| f.free(Txid(5), Pgid(29), 1), already(30));
    // The same page freed twice by one transaction.
    for kind in KINDS {
        let mut freelist = busy(kind);
        freelist.free(Txid(5), Pgid(40), 0).unwrap();
        let before = observe(&freelist);
        assert_eq!(freelist.free(Txid(5), Pgid(40), 0), Err(already(40)));
        assert_eq!(observe(&freelist), before);
    }
}

#[test]
fn freeing_an_own_allocation() {
    let own = |pgid| FreelistError::OwnAllocation {
        txid: Txid(5),
        pgid: Pgid(pgid),
    };
    check_err(|f| f.free(Txid(5), Pgid(10), 1), own(10));
    // Part of the run, or a span reaching into it, is caught too (bbolt checks the start only).
    check_err(|f| f.free(Txid(5), Pgid(11), 0), own(11));
    check_err(|f| f.free(Txid(5), Pgid(8), 2), own(8));
}

#[test]
fn span_past_the_largest_id() {
    check_err(
        |f| f.free(Txid(5), Pgid(u64::MAX - 1), 2),
        FreelistError::SpanTooLong {
            pgid: Pgid(u64::MAX - 1),
            overflow: 2,
        },
    );
}

#[test]
fn rebuild_rejects_meta_pages_and_duplicates() {
    check_err(
        |f| f.rebuild(&[Pgid(9), Pgid(1)]),
        FreelistError::MetaPage { pgid: Pgid(1) },
    );
    check_err(
        |f| f.rebuild(&[Pgid(9), Pgid(4), Pgid(9)]),
        FreelistError::Duplicate { pgid: Pgid(9) },
    );
}

/// A freelist page for `pgid` holding exactly `ids` (in the given order, valid or not).
fn raw_page(pgid: Pgid, ids: &[u64]) -> Vec<u8> {
    let mut page = vec![0; freelist_page_size(ids.len()).max(64)];
    let slots = write_freelist_header(&mut page, pgid, ids.len(), 0);
    for (index, &id) in ids.iter().enumerate() {
        write_pgid(slots, index, Pgid(id));
    }
    page
}

/// Reading (and reloading) `page` against `high_water` fails with `reason` for both kinds and
/// changes nothing.
fn check_corrupt(page: &[u8], high_water: u64, reason: Reason) {
    let expected = FreelistError::Corruption(Corruption::new(Pgid(50), reason));
    let view = FreelistPage::new(page, Pgid(50)).unwrap();
    check_err(|f| f.read(&view, Pgid(high_water)), expected.clone());
    check_err(|f| f.reload(&view, Pgid(high_water)), expected.clone());
}

fn out_of_bounds(pgid: u64, high_water: u64) -> Reason {
    Reason::PgidOutOfBounds {
        what: "free",
        pgid,
        high_water,
    }
}

#[test]
fn corrupt_pages() {
    let unsorted = Reason::Other("freelist ids are not strictly ascending");
    check_corrupt(
        &raw_page(Pgid(50), &[3, 4, 100]),
        100,
        out_of_bounds(100, 100),
    );
    check_corrupt(
        &raw_page(Pgid(50), &[3, 4, u64::MAX]),
        100,
        out_of_bounds(u64::MAX, 100),
    );
    check_corrupt(&raw_page(Pgid(50), &[1, 4]), 100, out_of_bounds(1, 100));
    check_corrupt(&raw_page(Pgid(50), &[0]), 100, out_of_bounds(0, 100));
    check_corrupt(&raw_page(Pgid(50), &[3, 5, 4]), 100, unsorted.clone());
    check_corrupt(&raw_page(Pgid(50), &[3, 4, 4, 5]), 100, unsorted);
}

#[test]
fn counts_that_do_not_fit() {
    // The header claims more ids than the page holds: the view refuses it, and the error
    // converts into the freelist's.
    let mut page = raw_page(Pgid(50), &[3, 4]);
    PageHeader::new(Pgid(50), PageKind::Freelist, 40, 0).write(&mut page);
    let err = FreelistPage::new(&page, Pgid(50))
        .map(|_| ())
        .map_err(FreelistError::from);
    assert!(
        matches!(&err, Err(FreelistError::Corruption(c)) if matches!(c.reason, Reason::CountTooLarge { count: 40, .. })),
        "{err:?}"
    );
    // The same with the 0xFFFF rule: the real count in the first slot.
    let mut page = vec![0; 64];
    PageHeader::new(Pgid(50), PageKind::Freelist, 0xFFFF, 0).write(&mut page);
    page[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    let err = FreelistPage::new(&page, Pgid(50))
        .map(|_| ())
        .map_err(FreelistError::from);
    assert!(
        matches!(&err, Err(FreelistError::Corruption(c)) if matches!(c.reason, Reason::CountTooLarge { count: u64::MAX, .. })),
        "{err:?}"
    );
    // A page of another kind is not a freelist.
    let mut page = raw_page(Pgid(50), &[3]);
    PageHeader::new(Pgid(50), PageKind::Leaf, 0, 0).write(&mut page);
    assert!(FreelistPage::new(&page, Pgid(50)).is_err());
}

#[test]
fn errors_display_one_clear_sentence() {
    let err = FreelistError::AlreadyFreed { pgid: Pgid(7) };
    assert_eq!(err.to_string(), "page 7 is already free or pending");
    let corrupt = FreelistError::from(Corruption::new(Pgid(9), Reason::Other("bad")));
    assert_eq!(corrupt.to_string(), "page 9: bad");
    // The corruption is shown, not also chained as a source.
    assert!(std::error::Error::source(&corrupt).is_none());
}
