//! Pages freed by write transactions that readers may still see.

use crate::runs::Run;
use rbolt_page::{PageSet, PageSetIds, Pgid, Txid};
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

/// The pending pages: freed by a write transaction, not reusable until no reader can see
/// them. Kept twice: per freeing transaction (for release and rollback) and as a bitmap of
/// ids (for double-free checks and for writing the page in order without sorting or
/// allocating; a bitmap, not an ordered map, since every page a commit frees goes in and out
/// of it: a few word operations each, where a map's search and rebalancing was a sixth of a
/// small transaction's instructions).
#[derive(Clone, Debug, Default)]
pub struct Pending {
    pub(crate) by_tx: BTreeMap<Txid, TxPending>,
    pub(crate) ids: PageSet,
    pub(crate) len: usize,
    /// Emptied span lists of released transactions, kept with their memory for the next
    /// transactions' (see [`Pending::recycle`]); not part of the value.
    spare: Vec<Vec<FreedSpan>>,
}

/// Span lists [`Pending`] keeps for reuse at most.
const SPARE_LISTS_MAX: usize = 16;

/// Room in a new span list: what a small transaction frees (its tree path and a few leaves),
/// so the list grows once or not at all. New lists are made when none is spare: while commits
/// do not sync, each keeps its list for the pages the last durable commit reaches.
const SPAN_LIST_INITIAL: usize = 64;

impl PartialEq for Pending {
    fn eq(&self, other: &Pending) -> bool {
        self.by_tx == other.by_tx && self.ids == other.ids && self.len == other.len
    }
}

impl Eq for Pending {}

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
        PendingIds(self.ids.iter(self.len))
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

    /// The spans that `txid` freed, in the order it freed them: each `free` call's first page
    /// and its number of pages (the page and its overflow).
    ///
    /// ```
    /// use rbolt_freelist::{AnyFreelist, Freelist, FreelistKind};
    /// use rbolt_page::{Pgid, Txid};
    /// let mut freelist = AnyFreelist::new(FreelistKind::Array);
    /// freelist.free(Txid(3), Pgid(12), 1).unwrap(); // pages 12 and 13
    /// freelist.free(Txid(3), Pgid(9), 0).unwrap();
    /// freelist.free(Txid(4), Pgid(20), 0).unwrap();
    /// let spans: Vec<_> = freelist.pending().spans_freed_by(Txid(3)).collect();
    /// assert_eq!(spans, [(Pgid(12), 2), (Pgid(9), 1)]);
    /// assert_eq!(freelist.pending().spans_freed_by(Txid(5)).count(), 0);
    /// ```
    pub fn spans_freed_by(&self, txid: Txid) -> impl Iterator<Item = (Pgid, u64)> + '_ {
        self.by_tx.get(&txid).into_iter().flat_map(|tx| {
            tx.spans
                .iter()
                .map(|span| (span.run.start, span.run.n_pages))
        })
    }

    /// The transaction that freed `pgid`, when it is pending (a walk of the pending spans).
    pub fn freed_by(&self, pgid: Pgid) -> Option<Txid> {
        if !self.ids.contains(pgid) {
            return None;
        }
        self.by_tx.iter().find_map(|(&txid, tx)| {
            tx.spans
                .iter()
                .any(|span| span.run.start <= pgid && pgid.0 < span.run.end())
                .then_some(txid)
        })
    }

    /// The lowest pending id in `first..=last`.
    #[inline]
    pub(crate) fn first_in(&self, first: Pgid, last: Pgid) -> Option<Pgid> {
        self.ids.first_in(first, last)
    }

    /// Adds a span freed by `freed_by`. The caller has checked it overlaps nothing.
    pub(crate) fn insert(&mut self, freed_by: Txid, span: FreedSpan) {
        debug_assert!(
            self.ids
                .first_in(span.run.start, Pgid(span.run.end() - 1))
                .is_none(),
            "pending span at {} overlaps one pending",
            span.run.start
        );
        self.ids.insert_run(span.run.start, span.run.n_pages);
        self.len += span.run.n_pages as usize;
        // The freeing transaction is the open one, the newest: its list is the map's last, found
        // without comparing keys down the map (which holds every transaction since the last
        // durable commit when commits do not sync).
        if let Some(mut last) = self.by_tx.last_entry()
            && *last.key() == freed_by
        {
            last.get_mut().spans.push(span);
            return;
        }
        let spare = &mut self.spare;
        self.by_tx
            .entry(freed_by)
            .or_insert_with(|| TxPending {
                spans: spare
                    .pop()
                    .unwrap_or_else(|| Vec::with_capacity(SPAN_LIST_INITIAL)),
                last_release_begin: None,
            })
            .spans
            .push(span);
    }

    /// Keeps the memory of `tx`'s span list (a transaction's, taken out of `by_tx`) for a
    /// later transaction's.
    pub(crate) fn recycle(&mut self, tx: TxPending) {
        let mut spans = tx.spans;
        if spans.capacity() > 0 && self.spare.len() < SPARE_LISTS_MAX {
            spans.clear();
            self.spare.push(spans);
        }
    }

    /// Removes `run` from the index of ids (the caller removes it from its transaction).
    pub(crate) fn unindex(&mut self, run: Run) {
        self.ids.remove_run(run.start, run.n_pages);
        self.len -= run.n_pages as usize;
    }
}

/// The pending ids, ascending. See [`Pending::ids`].
#[derive(Clone, Debug)]
pub struct PendingIds<'a>(PageSetIds<'a>);

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
