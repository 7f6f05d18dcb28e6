//! The free page ids of an rbolt database file, and the ids that write transactions freed but
//! readers may still see ("pending"), with bbolt's semantics and bbolt's freelist page format.
//!
//! This crate owns which pages are free: `free` makes a page pending at its transaction,
//! `release*` turns pending pages free once no open reader can see them, `allocate` hands out
//! contiguous runs first fit, `rollback` undoes a transaction exactly, and `write_into` writes
//! the freelist page straight into the caller's buffer. There are two representations of the
//! free set behind one trait, [`Freelist`]: [`ArrayFreelist`] (a sorted array, bbolt's
//! "array") and [`SpanFreelist`] (runs indexed by start and by length, bbolt's "hashmap"). They
//! choose the same pages and write byte-identical pages. [`AnyFreelist`] picks one at run time.
//! [`FreeRuns`] is a copy of the free ids that answers where first fit would allocate (below a
//! given page, or after earlier allocations) without changing the freelist.
//!
//! [`Allocator`] is the one place that decides where a write transaction's pages go: it owns
//! the freelist during the transaction, the high-water mark, the size limit, a vacuum step's
//! mark, cut and reserved runs, and the strategy for single pages; its planning face
//! ([`Allocator::plan`]) answers where a vacuum step's pages would land through the same code.
//!
//! It must not do I/O or know about files or mappings: the caller reads and writes the page
//! bytes and extends the file to the high-water mark. It contains no `unsafe`. Writing a page
//! allocates nothing, and no operation costs time in proportion to the whole freelist except
//! reading, rebuilding and writing it (and inserting into the array, which moves ids as any
//! sorted array must).
//!
//! ```
//! use rbolt_freelist::{AnyFreelist, Freelist, FreelistKind};
//! use rbolt_page::{FreelistPage, Pgid, Txid};
//!
//! let mut freelist = AnyFreelist::new(FreelistKind::Span);
//! freelist.rebuild(&[Pgid(5), Pgid(6), Pgid(7), Pgid(10)]).unwrap();
//! assert_eq!(freelist.allocate(Txid(3), 2), Some(Pgid(5))); // first fit
//! freelist.free(Txid(3), Pgid(12), 1).unwrap(); // pages 12 and 13, pending at tx 3
//! freelist.commit(Txid(3));
//! assert_eq!(freelist.free_ids().collect::<Vec<_>>(), [Pgid(7), Pgid(10)]);
//!
//! let mut page = vec![0u8; freelist.write_size()];
//! freelist.write_into(&mut page, Pgid(20), 0);
//! let read = FreelistPage::new(&page, Pgid(20)).unwrap();
//! assert_eq!(read.iter().collect::<Vec<_>>(), [Pgid(7), Pgid(10), Pgid(12), Pgid(13)]);
//!
//! freelist.release_pending(&[]); // no reader is open: pending pages become free
//! assert_eq!(freelist.free_count(), 4);
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod allocator;
mod array;
mod core;
mod error;
mod free_runs;
mod free_set;
mod merge;
mod pending;
mod runs;
mod span;

#[cfg(test)]
mod allocator_tests;
#[cfg(test)]
mod tests;

pub use crate::core::{PgidHasher, PgidMap};
pub use allocator::{Allocator, FreePages, Limits, RUNS_AFTER_PAGES, RUNS_FREE_DIVISOR, Strategy};
pub use error::FreelistError;
pub use free_runs::FreeRuns;
pub use free_set::FreeIds;
pub use merge::merge_pgids;
pub use pending::{Pending, PendingIds, PendingPage, TXID_UNKNOWN};

use crate::array::ArrayIds;
use crate::core::Core;
use crate::free_set::FreeSet;
use crate::span::SpanIds;
use rbolt_page::{FreelistPage, Pgid, Txid, freelist_page_size};

/// Which representation of the free set a freelist uses (bbolt's `FreelistType`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum FreelistKind {
    /// One sorted array of ids: compact, the fastest to read, write and allocate single
    /// pages from; but releasing pages moves the ids below them, and a multi-page allocation
    /// scans from the lowest id for a fitting run.
    #[default]
    Array,
    /// Maximal runs of ids indexed by start and by length: allocating and releasing never
    /// move or scan the whole set (an allocation costs at most one map lookup per distinct
    /// run length), at the price of more memory and slower reads and writes of the page.
    Span,
}

/// The operations of a freelist. Both implementations behave identically: same ids
/// allocated, same errors, same pages written.
///
/// Transaction protocol: one write transaction at a time calls `allocate` and `free` with its
/// txid, then either `commit` or `rollback` with it. `release*` run between write
/// transactions (bbolt runs them when a write transaction begins). Write transaction ids are
/// at least 1; [`TXID_UNKNOWN`] (0) means "unknown".
pub trait Freelist {
    /// Which representation this is.
    fn kind(&self) -> FreelistKind;

    /// Replaces the whole state with the ids of `page` as the free set: nothing pending,
    /// nothing allocated (as when a file is opened). The ids must be strictly ascending, none
    /// a meta page, all below `high_water`; otherwise returns
    /// [`FreelistError::Corruption`] and changes nothing.
    fn read(&mut self, page: &FreelistPage<'_>, high_water: Pgid) -> Result<(), FreelistError>;

    /// Makes the ids of `page` that are not pending the free set, keeping pending pages and
    /// allocation records (bbolt's `Reload`). Validates like [`Freelist::read`]. Call it
    /// between write transactions: the ids of an open transaction's allocations would be
    /// free twice after its rollback.
    fn reload(&mut self, page: &FreelistPage<'_>, high_water: Pgid) -> Result<(), FreelistError>;

    /// Makes `ids` (any order) minus the pending ids the free set, for files whose freelist is
    /// not persisted (bbolt's `NoSyncReload`). A meta page or a repeated id is an error and
    /// changes nothing. Call it between write transactions, like [`Freelist::reload`].
    fn rebuild(&mut self, ids: &[Pgid]) -> Result<(), FreelistError>;

    /// Takes the lowest run of `n_pages` contiguous free ids for transaction `txid` and
    /// returns its first id, or `None` when there is no such run (the caller then takes pages
    /// from the high-water mark). `n_pages == 0` gives `None`.
    fn allocate(&mut self, txid: Txid, n_pages: usize) -> Option<Pgid>;

    /// Takes the `n_pages` free pages from `start` on for transaction `txid`, each as a
    /// one-page allocation of its own (as `n_pages` calls of `allocate(txid, 1)` that
    /// happened to get them), for a caller that picks where its pages go rather than taking
    /// the lowest. Returns whether every one was free; nothing changes when one was not (or
    /// when `n_pages == 0` or `start` is a meta page).
    fn allocate_pages(&mut self, txid: Txid, start: Pgid, n_pages: usize) -> bool;

    /// Gives back `n_pages` pages from `start` on that transaction `txid` took one by one
    /// (with `allocate_pages`, or `allocate(txid, 1)`) and did not use, as rollback would
    /// give each back. Returns whether every one was such a page; nothing changes when one was
    /// not. Costs a look through the transaction's allocations when the pages were taken by
    /// one `allocate_pages`, one per page otherwise.
    fn unallocate_pages(&mut self, txid: Txid, start: Pgid, n_pages: usize) -> bool;

    /// Records that transaction `txid` took `n_pages` pages at `pgid` from past the
    /// high-water mark (not from the free set), so that once freed they can be released
    /// between long readers like any other allocation (`release_range`). Rollback forgets the
    /// record without making the pages free: they lie past the committed high-water mark.
    fn record_allocation(&mut self, txid: Txid, pgid: Pgid, n_pages: usize);

    /// Undoes the one allocation transaction `txid` made at `pgid` (with `allocate`, or
    /// `record_allocation`), as its rollback would: a run from the free set is free again.
    /// Returns whether there was such an allocation; nothing changes otherwise. For a run a
    /// transaction took ahead of need (a reservation) and did not use.
    fn unallocate(&mut self, txid: Txid, pgid: Pgid) -> bool;

    /// Cuts the free pages at the top of the file off the free set, for transaction `txid`
    /// about to lower the high-water mark: returns the lowest `mark` such that every id in
    /// `mark..high_water` was free (not pending), and those ids are no longer in the freelist,
    /// so it lists no id at or past `mark`. Returns `high_water` when `high_water - 1` is not
    /// free. `rollback(txid)` makes them free again; `commit(txid)` forgets them. Pending ids
    /// are never cut: an open reader may still see them.
    fn trim_tail(&mut self, txid: Txid, high_water: Pgid) -> Pgid;

    /// Makes page `pgid` and its `overflow` following pages pending at transaction `txid`.
    /// Freeing a meta page, a page already free or pending, or a page `txid` allocated itself
    /// is an error and changes nothing.
    fn free(&mut self, txid: Txid, pgid: Pgid, overflow: u32) -> Result<(), FreelistError>;

    /// Makes every page pending at a transaction `<= up_to` free.
    fn release(&mut self, up_to: Txid);

    /// Makes free every page pending at a transaction in `begin..=end` that was also
    /// allocated by a transaction in `begin..=end`: no reader outside that range saw it, so
    /// when no reader is open inside it, nobody can (bbolt's `releaseRange`).
    fn release_range(&mut self, begin: Txid, end: Txid);

    /// Releases everything no open reader can see, given the txids of the open read
    /// transactions in any order (bbolt's `ReleasePendingPages`): `release` before the oldest
    /// reader, `release_range` between readers and after the newest.
    fn release_pending(&mut self, open_readers: &[Txid]);

    /// As [`release_pending`](Freelist::release_pending), and keeps what the meta of the
    /// last durable commit `durable` reaches: the pages it holds that later commits freed
    /// (allocated at or before `durable`, freed after it). A crash may bring that meta back
    /// while later commits are not yet durable, so its pages must stay as they are until a
    /// newer meta is durable. Pages both allocated and freed after it are released as usual.
    fn release_pending_durable(&mut self, open_readers: &[Txid], durable: Txid);

    /// Makes every free page pending, as if transaction `freed_by` had freed it (with no
    /// known allocation): it is released once no reader older than `freed_by + 1` is open.
    /// For a writer that opens while readers of other processes still read older snapshots:
    /// the freelist it loads lists the pages the commits since their snapshots freed as free,
    /// without saying which commit freed which. The freelist page written next lists them as
    /// before (pending pages are written as free). Call it between write transactions.
    fn pend_free_pages(&mut self, freed_by: Txid) -> Result<(), FreelistError> {
        let ids: Vec<Pgid> = self.free_ids().collect();
        let mut start = 0;
        while start < ids.len() {
            let mut end = start + 1;
            while end < ids.len() && ids[end].0 == ids[end - 1].0 + 1 {
                end += 1;
            }
            // Taken by transaction 0, which every reader follows: a reader at `r` keeps a
            // pending page allocated at or before `r` and freed at or after it.
            let taken = self.allocate_pages(Txid(0), ids[start], end - start);
            debug_assert!(taken, "a free run could not be taken");
            start = end;
        }
        self.commit(Txid(0));
        for &pgid in &ids {
            self.free(freed_by, pgid, 0)?;
        }
        Ok(())
    }

    /// Undoes everything transaction `txid` did: its pending pages are in use again and the
    /// runs it allocated are free again, exactly as before it began. Costs in proportion to
    /// what the transaction did.
    fn rollback(&mut self, txid: Txid);

    /// Transaction `txid` (and any older one) committed: forget what `rollback` would need.
    fn commit(&mut self, txid: Txid);

    /// Number of free ids.
    fn free_count(&self) -> usize;

    /// Number of pending ids.
    fn pending_count(&self) -> usize;

    /// Number of free and pending ids: the ids the freelist page holds.
    #[inline]
    fn count(&self) -> usize {
        self.free_count() + self.pending_count()
    }

    /// Whether `pgid` is free or pending.
    fn is_freed(&self, pgid: Pgid) -> bool;

    /// The free ids, ascending.
    fn free_ids(&self) -> FreeIds<'_>;

    /// The pending pages, for tools and tests.
    fn pending(&self) -> &Pending;

    /// Bytes the freelist page needs (header, count slot if any, and every id).
    #[inline]
    fn write_size(&self) -> usize {
        freelist_page_size(self.count())
    }

    /// Writes the freelist page (header for `pgid` with `overflow`, then the free and pending
    /// ids merged ascending) into `buf` and returns the bytes written, `write_size()`.
    /// Allocates nothing.
    ///
    /// # Panics
    /// When `buf` is shorter than `write_size()`.
    fn write_into(&self, buf: &mut [u8], pgid: Pgid, overflow: u32) -> usize;
}

/// Implements [`Freelist`] for a newtype over `Core<S>` by forwarding.
macro_rules! forward_to_core {
    ($name:ident, $set:ty) => {
        impl $name {
            /// An empty freelist.
            pub fn new() -> $name {
                $name(Core::<$set>::default())
            }
        }

        impl Freelist for $name {
            #[inline]
            fn kind(&self) -> FreelistKind {
                <$set as FreeSet>::KIND
            }
            fn read(
                &mut self,
                page: &FreelistPage<'_>,
                high_water: Pgid,
            ) -> Result<(), FreelistError> {
                self.0.read(page, high_water)
            }
            fn reload(
                &mut self,
                page: &FreelistPage<'_>,
                high_water: Pgid,
            ) -> Result<(), FreelistError> {
                self.0.reload(page, high_water)
            }
            fn rebuild(&mut self, ids: &[Pgid]) -> Result<(), FreelistError> {
                self.0.rebuild(ids)
            }
            #[inline]
            fn allocate(&mut self, txid: Txid, n_pages: usize) -> Option<Pgid> {
                self.0.allocate(txid, n_pages)
            }
            fn allocate_pages(&mut self, txid: Txid, start: Pgid, n_pages: usize) -> bool {
                self.0.allocate_pages(txid, start, n_pages)
            }
            fn unallocate_pages(&mut self, txid: Txid, start: Pgid, n_pages: usize) -> bool {
                self.0.unallocate_pages(txid, start, n_pages)
            }
            #[inline]
            fn record_allocation(&mut self, txid: Txid, pgid: Pgid, n_pages: usize) {
                self.0.record_allocation(txid, pgid, n_pages)
            }
            fn unallocate(&mut self, txid: Txid, pgid: Pgid) -> bool {
                self.0.unallocate(txid, pgid)
            }
            fn trim_tail(&mut self, txid: Txid, high_water: Pgid) -> Pgid {
                self.0.trim_tail(txid, high_water)
            }
            #[inline]
            fn free(&mut self, txid: Txid, pgid: Pgid, overflow: u32) -> Result<(), FreelistError> {
                self.0.free(txid, pgid, overflow)
            }
            fn release(&mut self, up_to: Txid) {
                self.0.release(up_to)
            }
            fn release_range(&mut self, begin: Txid, end: Txid) {
                self.0.release_range(begin, end)
            }
            fn release_pending(&mut self, open_readers: &[Txid]) {
                self.0.release_pending(open_readers, None)
            }
            fn release_pending_durable(&mut self, open_readers: &[Txid], durable: Txid) {
                self.0.release_pending(open_readers, Some(durable))
            }
            fn rollback(&mut self, txid: Txid) {
                self.0.rollback(txid)
            }
            fn commit(&mut self, txid: Txid) {
                self.0.commit(txid)
            }
            #[inline]
            fn free_count(&self) -> usize {
                self.0.free.len()
            }
            #[inline]
            fn pending_count(&self) -> usize {
                self.0.pending.len()
            }
            #[inline]
            fn is_freed(&self, pgid: Pgid) -> bool {
                self.0.is_freed(pgid)
            }
            fn free_ids(&self) -> FreeIds<'_> {
                self.0.free.free_ids()
            }
            fn pending(&self) -> &Pending {
                &self.0.pending
            }
            fn write_into(&self, buf: &mut [u8], pgid: Pgid, overflow: u32) -> usize {
                self.0.write_into(buf, pgid, overflow)
            }
        }
    };
}

/// A freelist whose free ids are one sorted array (bbolt's "array" freelist). Compact and
/// fast to read and write; allocating a run of more than one page scans from the lowest id,
/// and releasing pages moves the ids below them.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ArrayFreelist(Core<ArrayIds>);

/// A freelist whose free ids are maximal runs indexed by start and by length (bbolt's
/// "hashmap" freelist, with ordered maps so that it picks the same runs as the array).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpanFreelist(Core<SpanIds>);

forward_to_core!(ArrayFreelist, ArrayIds);
forward_to_core!(SpanFreelist, SpanIds);

/// Either freelist, chosen at run time from an option, dispatched with a `match` (no
/// virtual calls on the hot path).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AnyFreelist {
    /// An [`ArrayFreelist`].
    Array(ArrayFreelist),
    /// A [`SpanFreelist`].
    Span(SpanFreelist),
}

impl AnyFreelist {
    /// An empty freelist of `kind`.
    pub fn new(kind: FreelistKind) -> AnyFreelist {
        match kind {
            FreelistKind::Array => AnyFreelist::Array(ArrayFreelist::new()),
            FreelistKind::Span => AnyFreelist::Span(SpanFreelist::new()),
        }
    }
}

impl Default for AnyFreelist {
    fn default() -> AnyFreelist {
        AnyFreelist::new(FreelistKind::default())
    }
}

impl From<ArrayFreelist> for AnyFreelist {
    fn from(freelist: ArrayFreelist) -> AnyFreelist {
        AnyFreelist::Array(freelist)
    }
}

impl From<SpanFreelist> for AnyFreelist {
    fn from(freelist: SpanFreelist) -> AnyFreelist {
        AnyFreelist::Span(freelist)
    }
}

/// Calls `$call` on whichever freelist `$self` holds.
macro_rules! dispatch {
    ($self:expr, $freelist:ident => $call:expr) => {
        match $self {
            AnyFreelist::Array($freelist) => $call,
            AnyFreelist::Span($freelist) => $call,
        }
    };
}

impl Freelist for AnyFreelist {
    #[inline]
    fn kind(&self) -> FreelistKind {
        dispatch!(self, f => f.kind())
    }
    fn read(&mut self, page: &FreelistPage<'_>, high_water: Pgid) -> Result<(), FreelistError> {
        dispatch!(self, f => f.read(page, high_water))
    }
    fn reload(&mut self, page: &FreelistPage<'_>, high_water: Pgid) -> Result<(), FreelistError> {
        dispatch!(self, f => f.reload(page, high_water))
    }
    fn rebuild(&mut self, ids: &[Pgid]) -> Result<(), FreelistError> {
        dispatch!(self, f => f.rebuild(ids))
    }
    #[inline]
    fn allocate(&mut self, txid: Txid, n_pages: usize) -> Option<Pgid> {
        dispatch!(self, f => f.allocate(txid, n_pages))
    }
    fn allocate_pages(&mut self, txid: Txid, start: Pgid, n_pages: usize) -> bool {
        dispatch!(self, f => f.allocate_pages(txid, start, n_pages))
    }
    fn unallocate_pages(&mut self, txid: Txid, start: Pgid, n_pages: usize) -> bool {
        dispatch!(self, f => f.unallocate_pages(txid, start, n_pages))
    }
    #[inline]
    fn record_allocation(&mut self, txid: Txid, pgid: Pgid, n_pages: usize) {
        dispatch!(self, f => f.record_allocation(txid, pgid, n_pages))
    }
    fn unallocate(&mut self, txid: Txid, pgid: Pgid) -> bool {
        dispatch!(self, f => f.unallocate(txid, pgid))
    }
    fn trim_tail(&mut self, txid: Txid, high_water: Pgid) -> Pgid {
        dispatch!(self, f => f.trim_tail(txid, high_water))
    }
    #[inline]
    fn free(&mut self, txid: Txid, pgid: Pgid, overflow: u32) -> Result<(), FreelistError> {
        dispatch!(self, f => f.free(txid, pgid, overflow))
    }
    fn release(&mut self, up_to: Txid) {
        dispatch!(self, f => f.release(up_to))
    }
    fn release_range(&mut self, begin: Txid, end: Txid) {
        dispatch!(self, f => f.release_range(begin, end))
    }
    fn release_pending(&mut self, open_readers: &[Txid]) {
        dispatch!(self, f => f.release_pending(open_readers))
    }
    fn release_pending_durable(&mut self, open_readers: &[Txid], durable: Txid) {
        dispatch!(self, f => f.release_pending_durable(open_readers, durable))
    }
    fn rollback(&mut self, txid: Txid) {
        dispatch!(self, f => f.rollback(txid))
    }
    fn commit(&mut self, txid: Txid) {
        dispatch!(self, f => f.commit(txid))
    }
    #[inline]
    fn free_count(&self) -> usize {
        dispatch!(self, f => f.free_count())
    }
    #[inline]
    fn pending_count(&self) -> usize {
        dispatch!(self, f => f.pending_count())
    }
    #[inline]
    fn is_freed(&self, pgid: Pgid) -> bool {
        dispatch!(self, f => f.is_freed(pgid))
    }
    fn free_ids(&self) -> FreeIds<'_> {
        dispatch!(self, f => f.free_ids())
    }
    fn pending(&self) -> &Pending {
        dispatch!(self, f => f.pending())
    }
    fn write_into(&self, buf: &mut [u8], pgid: Pgid, overflow: u32) -> usize {
        dispatch!(self, f => f.write_into(buf, pgid, overflow))
    }
}

#[cfg(test)]
impl ArrayFreelist {
    pub(crate) fn core(&self) -> &Core<ArrayIds> {
        &self.0
    }
}

#[cfg(test)]
impl SpanFreelist {
    pub(crate) fn core(&self) -> &Core<SpanIds> {
        &self.0
    }
}
