//! The context bucket handles of a write transaction share: the snapshot's pages and the
//! workspace (node arena and page allocator) every edit borrows.

use std::cell::RefCell;
use std::sync::Arc;

use rbolt_btree::{Arena, Pages};
use rbolt_page::Pgid;

use crate::engine::page_writes::PageWrites;
use crate::engine::snapshot::pages_of;
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
}

impl WriteContext {
    #[inline]
    pub(crate) fn pages(&self) -> Pages<'_> {
        pages_of(&self.map, self.page_size, self.high_water)
    }
}

/// What every edit of a write transaction works with: the page buffer pool (`arena`), the pages
/// it writes and their allocator, and whether an edit broke halfway.
#[derive(Debug)]
pub(crate) struct Workspace {
    pub(crate) arena: Arena,
    pub(crate) writes: PageWrites,
    /// An operation failed halfway, after a change it could not undo (only a corrupt file or a
    /// bug can cause it): the transaction refuses to commit, so nothing of it reaches the disk.
    pub(crate) broken: bool,
}
