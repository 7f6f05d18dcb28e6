//! The context bucket handles of a write transaction share: the snapshot's pages and the
//! workspace (node arena and page allocator) every edit borrows.

use std::cell::{Cell, RefCell};
use std::sync::Arc;

use rbolt_btree::{Arena, Pages};
use rbolt_page::Pgid;

use crate::alloc::TxAlloc;
use crate::bucket::state::BucketState;
use crate::snapshot::pages_of;
use crate::storage::Mapping;

/// What every bucket handle of a write transaction works in: the snapshot's pages, read
/// without any check, and the [`Workspace`] behind a `RefCell`, borrowed by each edit for its
/// own duration only.
#[derive(Debug)]
pub(crate) struct WriteContext {
    pub(crate) map: Arc<Mapping>,
    pub(crate) page_size: usize,
    /// The high-water mark of the snapshot the transaction started from: every page it reads
    /// lies below it.
    pub(crate) high_water: Pgid,
    pub(crate) core: RefCell<Workspace>,
    /// An emptied box for a top-level handle's state (`BucketMut::top`), kept from the last
    /// handle dropped and handed from one transaction to the next through the writer, so that
    /// opening a top-level bucket does not allocate.
    pub(crate) spare_state: SpareState,
}

/// See [`WriteContext::spare_state`].
pub(crate) struct SpareState(Cell<Option<Box<BucketState>>>);

impl SpareState {
    pub(crate) fn new(spare: Option<Box<BucketState>>) -> SpareState {
        SpareState(Cell::new(spare))
    }

    pub(crate) fn take(&self) -> Option<Box<BucketState>> {
        self.0.take()
    }

    pub(crate) fn set(&self, spare: Option<Box<BucketState>>) {
        self.0.set(spare);
    }
}

impl std::fmt::Debug for SpareState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SpareState")
    }
}

impl WriteContext {
    #[inline]
    pub(crate) fn pages(&self) -> Pages<'_> {
        pages_of(&self.map, self.page_size, self.high_water)
    }
}

/// What every edit of a write transaction works with: the page buffer pool (`arena`), the page
/// allocator, and whether an edit broke halfway.
#[derive(Debug)]
pub(crate) struct Workspace {
    pub(crate) arena: Arena,
    pub(crate) alloc: TxAlloc,
    /// An operation failed halfway, after a change it could not undo (only a corrupt file or a
    /// bug can cause it): the transaction refuses to commit, so nothing of it reaches the disk.
    pub(crate) broken: bool,
}
