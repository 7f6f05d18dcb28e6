//! Pages freed by write transactions that readers may still see.

use crate::runs::{Run, RunIds, RunLen};
use rbolt_page::{Pgid, Txid};
use std::collections::BTreeMap;
use std::iter::FusedIterator;

/// The allocating transaction of a pending page when it is unknown: the page was allocated
/// before this process read the freelist, or from the high-water mark.
pub const TXID_UNKNOWN: Txid = Txid(0);

/// One pending page, as [`Pending::iter`] lists it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PendingPage {
    /// The page.
    pub pgid: Pgid,
    /// The write transaction that freed it.
    pub freed_by: Txid,
    /// The write transaction that allocated it, or [`TXID_UNKNOWN`].
    pub allocated_by: Txid,
}

/// A span of pages one `free` call made pending, with the transaction that allocated it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct FreedSpan {
    pub(crate) run: Run,
    /// The allocation record the span's first page had, if any; rollback puts it back.
    pub(crate) allocated_by: Option<Txid>,
}

/// The pending spans of one freeing transaction.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct TxPending {
    pub(crate) spans: Vec<FreedSpan>,
    /// The `begin` of the last `release_range` that looked at these spans. The spans of a
    /// committed transaction never change and each was allocated before it was freed, so
    /// another range with the same `begin` would release nothing new: bbolt's shortcut.
    pub(crate) last_release_begin: Option<Txid>,
}

/// Where a pending span lives in the ordered index: its length and who freed it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct IndexedSpan {
    pub(crate) n_pages: u64,
    pub(crate) freed_by: Txid,
}

impl RunLen for IndexedSpan {
    #[inline]
    fn n_pages(&self) -> u64 {
        self.n_pages
    }
}

/// The pending pages: freed by a write transaction, not reusable until no reader can see
/// them. Kept twice: per freeing transaction (for release and rollback) and ordered by id
/// (for double-free checks and for writing the page without sorting or allocating).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pending {
    pub(crate) by_tx: BTreeMap<Txid, TxPending>,
    pub(crate) by_start: BTreeMap<Pgid, IndexedSpan>,
    pub(crate) len: usize,
}

impl Pending {
    /// Number of pending page ids.
    #[inline]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether no page is pending.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The pending ids, ascending.
    pub fn ids(&self) -> PendingIds<'_> {
        PendingIds(RunIds::new(self.by_start.iter(), self.len))
    }

    /// The transactions that have pending pages, ascending.
    pub fn txids(&self) -> impl DoubleEndedIterator<Item = Txid> + ExactSizeIterator + '_ {
        self.by_tx.keys().copied()
    }

    /// Every pending page, by freeing transaction, then in the order they were freed.
    pub fn iter(&self) -> impl Iterator<Item = PendingPage> + '_ {
        self.by_tx.iter().flat_map(|(&freed_by, tx)| {
            tx.spans.iter().flat_map(move |span| {
                (span.run.start.0..span.run.end()).map(move |id| PendingPage {
                    pgid: Pgid(id),
                    freed_by,
                    allocated_by: span.allocated_by.unwrap_or(TXID_UNKNOWN),
                })
            })
        })
    }

    /// The transaction that freed `pgid`, when it is pending.
    pub fn freed_by(&self, pgid: Pgid) -> Option<Txid> {
        let (start, span) = self.by_start.range(..=pgid).next_back()?;
        (pgid.0 < start.0 + span.n_pages).then_some(span.freed_by)
    }

    /// The lowest pending id in `first..=last`.
    pub(crate) fn first_in(&self, first: Pgid, last: Pgid) -> Option<Pgid> {
        if let Some((start, span)) = self.by_start.range(..=first).next_back()
            && start.0 + span.n_pages > first.0
        {
            return Some(first);
        }
        let (&start, _) = self.by_start.range(first..=last).next()?;
        Some(start)
    }

    /// Adds a span freed by `freed_by`. The caller has checked it overlaps nothing.
    pub(crate) fn insert(&mut self, freed_by: Txid, span: FreedSpan) {
        let indexed = IndexedSpan {
            n_pages: span.run.n_pages,
            freed_by,
        };
        let previous = self.by_start.insert(span.run.start, indexed);
        debug_assert!(
            previous.is_none(),
            "pending span at {} twice",
            span.run.start
        );
        self.by_tx.entry(freed_by).or_default().spans.push(span);
        self.len += span.run.n_pages as usize;
    }

    /// Removes `run` from the ordered index (the caller removes it from its transaction).
    pub(crate) fn unindex(&mut self, run: Run) {
        let removed = self.by_start.remove(&run.start);
        debug_assert_eq!(
            removed.map(|span| span.n_pages),
            Some(run.n_pages),
            "pending index out of step at {}",
            run.start
        );
        self.len -= run.n_pages as usize;
    }
}

/// The pending ids, ascending. See [`Pending::ids`].
#[derive(Clone, Debug)]
pub struct PendingIds<'a>(RunIds<'a, IndexedSpan>);

impl Iterator for PendingIds<'_> {
    type Item = Pgid;

    #[inline]
    fn next(&mut self) -> Option<Pgid> {
        self.0.next()
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        self.0.size_hint()
    }
}

impl ExactSizeIterator for PendingIds<'_> {}
impl FusedIterator for PendingIds<'_> {}
