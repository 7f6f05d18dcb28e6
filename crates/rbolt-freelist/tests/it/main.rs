//! Integration tests of rbolt-freelist through its public API: the Go bbolt fixtures, typed
//! errors, bbolt's release scenarios, the allocation-free page write, and first fit asked of
//! `FreeRuns`.

mod errors;
mod first_fit;
mod fixtures;
mod no_alloc;
mod release;

use rbolt_freelist::{AnyFreelist, Freelist, FreelistKind, PendingPage};
use rbolt_page::Pgid;
use rbolt_testkit::alloc::CountingAlloc;

/// `no_alloc` counts this thread's allocations around a freelist write.
#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

/// Both kinds, for tests that run against each.
pub(crate) const KINDS: [FreelistKind; 2] = [FreelistKind::Array, FreelistKind::Span];

/// Everything observable about a freelist: free ids, pending pages, and the page it writes.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct Observed {
    free: Vec<Pgid>,
    pending: Vec<PendingPage>,
    page: Vec<u8>,
}

pub(crate) fn observe(freelist: &AnyFreelist) -> Observed {
    let mut page = vec![0; freelist.write_size()];
    freelist.write_into(&mut page, Pgid(3), 0);
    Observed {
        free: freelist.free_ids().collect(),
        pending: freelist.pending().iter().collect(),
        page,
    }
}
