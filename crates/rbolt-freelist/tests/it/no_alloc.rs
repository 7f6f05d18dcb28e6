//! Writing the freelist page allocates nothing, whatever the size of the freelist.

use crate::KINDS;
use rbolt_freelist::{AnyFreelist, Freelist};
use rbolt_page::{FreelistPage, Pgid, Txid};
use rbolt_testkit::alloc::count_allocations;

/// Ids in the freelist of the test: large enough that any per-id or per-pending allocation
/// would show, and past the 0xFFFF count rule.
const N_IDS: u64 = 1_000_000;

#[test]
fn write_into_allocates_nothing() {
    // Every third id of 2..: runs of two free ids, with one id in every four of them pending
    // under one of 50 transactions, so the write merges two interleaved sources.
    let ids: Vec<Pgid> = (0..N_IDS).map(|i| Pgid(2 + i + i / 2)).collect();
    for kind in KINDS {
        let mut freelist = AnyFreelist::new(kind);
        let (free, pending): (Vec<Pgid>, Vec<Pgid>) =
            ids.iter().partition(|id| !id.0.is_multiple_of(4));
        freelist.rebuild(&free).unwrap();
        for (index, id) in pending.iter().enumerate() {
            let txid = Txid(10 + index as u64 % 50);
            freelist.free(txid, *id, 0).unwrap();
        }
        assert_eq!(freelist.count() as u64, N_IDS);
        assert!(freelist.pending_count() > 200_000);
        let mut page = vec![0u8; freelist.write_size()];

        let (written, allocations) =
            count_allocations(|| freelist.write_into(&mut page, Pgid(7), 0));

        assert_eq!(allocations, 0, "{kind:?}: write_into allocated");
        assert_eq!(written, page.len());
        let view = FreelistPage::new(&page, Pgid(7)).unwrap();
        assert!(view.iter().eq(ids.iter().copied()), "{kind:?}: page ids");
    }
}
