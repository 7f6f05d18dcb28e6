//! The freelist logic both representations share: pending pages, allocation records,
//! release, rollback, and reading and writing pages. Only the free set itself differs between
//! the array and the span freelist; it is the type parameter.

use crate::error::FreelistError;
use crate::free_set::FreeSet;
use crate::merge::merge_pgids;
use crate::pending::{FreedSpan, Pending, TXID_UNKNOWN};
use crate::runs::Run;
use rbolt_page::{FreelistPage, Pgid, Txid, freelist_page_size, write_freelist_header};
use std::collections::HashMap;
use std::hash::{BuildHasherDefault, Hasher};
use std::mem;

/// Hashes a page id with one multiply (Fx-style). Page ids are distinct numbers that no
/// attacker picks, so a keyed hash (std's SipHash) buys nothing here and costs a few times more.
#[derive(Clone, Copy, Debug, Default)]
pub struct PgidHasher(u64);

impl Hasher for PgidHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.write_u64(u64::from(byte));
        }
    }

    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0.rotate_left(5) ^ n).wrapping_mul(0x517c_c1b7_2722_0a95);
    }

    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
}

/// A map keyed by page id, hashed with [`PgidHasher`].
pub type PgidMap<V> = HashMap<Pgid, V, BuildHasherDefault<PgidHasher>>;

/// A run a transaction allocated, remembered until it commits so that rollback can give it
/// back.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct UndoAlloc {
    n_pages: u64,
    /// The run came from past the high-water mark, not the free set: rollback does not make
    /// it free.
    from_high_water: bool,
    /// The allocation record of the run's start that this allocation overwrote. Only a caller
    /// that freed part of an earlier run leaves one behind, but rollback must restore even
    /// that to be exact.
    replaced: Option<Txid>,
}

/// A freelist over the free-set representation `S`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Core<S> {
    pub(crate) free: S,
    pub(crate) pending: Pending,
    /// The transaction that allocated each run still in use, by the run's start: bbolt's
    /// `allocs`. A freed span records it, and `release_range` uses it to free pages that no
    /// open reader can see even though older readers exist. Pages taken from the high-water
    /// mark are recorded by `record_allocation`. Only ever looked up by key, never walked in order: a hash map,
    /// since it holds a record for most pages of the file (one lookup per page freed), and a
    /// B-tree of 100,000 entries cost four cache misses a lookup where this costs one.
    allocs: PgidMap<Txid>,
    /// The runs each not-yet-committed transaction allocated, in the order it allocated them.
    /// With one writer at a time this holds one transaction's; it makes rollback proportional
    /// to what the transaction did and lets `free` reject a page the freeing transaction
    /// allocated. A vector kept with its memory between transactions (an ordered map made
    /// and dropped each transaction was a tenth of a small transaction's allocations).
    undo: Vec<(Txid, Pgid, UndoAlloc)>,
    /// The runs of `undo` longer than a page: what `free` looks through for a page inside
    /// one (the start of every run is in `allocs`).
    undo_multi: Vec<(Txid, Run)>,
    /// The free runs a not-yet-committed transaction cut off the top of the file
    /// (`trim_tail`), so that rollback makes them free again.
    trims: Vec<(Txid, Run)>,
    /// Runs on their way from pending to free; kept to reuse its memory. Empty between calls.
    scratch: Vec<Run>,
    /// The `begin` of the last `release_range` and the newest freeing transaction it looked
    /// at: with the same `begin` again, those need no second look (the spans of a committed
    /// transaction never change, and each was allocated before it was freed). Without it, a
    /// durable meta that stays put (commits without syncs) would make every transaction's
    /// start walk every transaction since.
    range_cursor: Option<(Txid, Txid)>,
    /// Transactions `release_range` emptied; kept to reuse its memory. Empty between calls.
    emptied: Vec<Txid>,
    /// `release_pending`'s barriers; kept to reuse its memory. Empty between calls.
    barriers: Vec<(Txid, Txid)>,
}

impl<S: FreeSet> Core<S> {
    /// One writer at a time: a transaction that allocates or frees while another still has an
    /// undo record means the caller forgot to commit or roll back the other.
    #[inline]
    fn debug_assert_one_writer(&self, txid: Txid) {
        debug_assert!(
            self.undo.first().is_none_or(|&(open, _, _)| open == txid),
            "transaction {txid} writes while {:?} neither committed nor rolled back",
            self.undo.first()
        );
    }

    pub(crate) fn read(
        &mut self,
        page: &FreelistPage<'_>,
        high_water: Pgid,
    ) -> Result<(), FreelistError> {
        page.validate(high_water)?;
        let ids = page.iter().collect();
        *self = Core::default();
        self.free.assign(ids);
        Ok(())
    }

    pub(crate) fn reload(
        &mut self,
        page: &FreelistPage<'_>,
        high_water: Pgid,
    ) -> Result<(), FreelistError> {
        page.validate(high_water)?;
        let mut ids = page.iter().collect();
        self.retain_not_pending(&mut ids);
        self.free.assign(ids);
        Ok(())
    }

    pub(crate) fn rebuild(&mut self, ids: &[Pgid]) -> Result<(), FreelistError> {
        let mut sorted = ids.to_vec();
        sorted.sort_unstable();
        if let Some(&pgid) = sorted.first()
            && pgid.0 < 2
        {
            return Err(FreelistError::MetaPage { pgid });
        }
        if let Some(pair) = sorted.windows(2).find(|pair| pair[0] == pair[1]) {
            return Err(FreelistError::Duplicate { pgid: pair[0] });
        }
        self.retain_not_pending(&mut sorted);
        self.free.assign(sorted);
        Ok(())
    }

    /// Drops the pending ids from `ids` (ascending), walking both lists once.
    fn retain_not_pending(&self, ids: &mut Vec<Pgid>) {
        if self.pending.is_empty() {
            return;
        }
        let mut pending = self.pending.ids().peekable();
        ids.retain(|&id| {
            while pending.next_if(|&pending_id| pending_id < id).is_some() {}
            pending.peek() != Some(&id)
        });
    }

    pub(crate) fn allocate(&mut self, txid: Txid, n_pages: usize) -> Option<Pgid> {
        self.debug_assert_one_writer(txid);
        if n_pages == 0 {
            return None;
        }
        let n_pages = n_pages as u64;
        let start = self.free.allocate(n_pages)?;
        self.record_undo(txid, start, n_pages, false);
        Some(start)
    }

    pub(crate) fn allocate_pages(&mut self, txid: Txid, start: Pgid, n_pages: usize) -> bool {
        self.debug_assert_one_writer(txid);
        if n_pages == 0 || start.0 < 2 || !self.free.take_run(start, n_pages as u64) {
            return false;
        }
        for page in start.0..start.0 + n_pages as u64 {
            self.record_undo(txid, Pgid(page), 1, false);
        }
        true
    }

    /// Whether `pgid` is a page transaction `txid` took from the free set by itself (a
    /// one-page allocation, as `allocate_pages` makes them): where its newest record is.
    fn own_page(&self, txid: Txid, pgid: Pgid) -> Option<usize> {
        let index = self
            .undo
            .iter()
            .rposition(|&(open, start, _)| open == txid && start == pgid)?;
        let alloc = self.undo[index].2;
        (alloc.n_pages == 1 && !alloc.from_high_water).then_some(index)
    }

    pub(crate) fn unallocate_pages(&mut self, txid: Txid, start: Pgid, n_pages: usize) -> bool {
        let n = n_pages as u64;
        if n == 0 || start.0.checked_add(n).is_none() {
            return false;
        }
        let Some(first) = self.own_page(txid, start) else {
            return false;
        };
        // `allocate_pages` records a run's pages one after the other: then they go at once.
        let block = self.undo.get(first..first + n_pages).is_some_and(|block| {
            block
                .iter()
                .zip(start.0..)
                .all(|(&(open, pgid, alloc), page)| {
                    open == txid && pgid.0 == page && alloc.n_pages == 1 && !alloc.from_high_water
                })
        });
        let in_order = block || (1..n).all(|i| self.own_page(txid, Pgid(start.0 + i)).is_some());
        if !in_order {
            return false;
        }
        for page in (start.0..start.0 + n).rev() {
            let index = if block {
                first + (page - start.0) as usize
            } else {
                self.own_page(txid, Pgid(page)).expect("checked")
            };
            let (_, pgid, alloc) = if block {
                self.undo[index]
            } else {
                self.undo.remove(index)
            };
            let removed = match alloc.replaced {
                Some(previous) => self.allocs.insert(pgid, previous),
                None => self.allocs.remove(&pgid),
            };
            debug_assert_eq!(removed, Some(txid), "allocation record of {pgid} lost");
        }
        if block {
            self.undo.drain(first..first + n_pages);
        }
        self.free.insert_runs(&[Run { start, n_pages: n }]);
        true
    }

    pub(crate) fn record_allocation(&mut self, txid: Txid, pgid: Pgid, n_pages: usize) {
        self.debug_assert_one_writer(txid);
        self.record_undo(txid, pgid, n_pages as u64, true);
    }

    /// Records the allocation of `n_pages` at `start` by `txid`, and its undo.
    fn record_undo(&mut self, txid: Txid, start: Pgid, n_pages: u64, from_high_water: bool) {
        let replaced = self.allocs.insert(start, txid);
        let alloc = UndoAlloc {
            n_pages,
            from_high_water,
            replaced,
        };
        self.undo.push((txid, start, alloc));
        if n_pages > 1 {
            self.undo_multi.push((txid, Run { start, n_pages }));
        }
    }

    pub(crate) fn free(
        &mut self,
        txid: Txid,
        pgid: Pgid,
        overflow: u32,
    ) -> Result<(), FreelistError> {
        self.debug_assert_one_writer(txid);
        if pgid.0 < 2 {
            return Err(FreelistError::MetaPage { pgid });
        }
        let last = pgid
            .0
            .checked_add(u64::from(overflow))
            .map(Pgid)
            .ok_or(FreelistError::SpanTooLong { pgid, overflow })?;
        // Taken out at once (one lookup, not two), and put back if the free is refused.
        let allocated_by = self.allocs.remove(&pgid);
        let refuse = |core: &mut Self, error| {
            if let Some(allocated_by) = allocated_by {
                core.allocs.insert(pgid, allocated_by);
            }
            Err(error)
        };
        // A run of this transaction's overlaps the span: one starting at `pgid` (`allocs`),
        // a longer one starting before it, or (for a span of several pages) any inside it.
        let overlaps = |start: Pgid, n_pages: u64| start <= last && start.0 + n_pages > pgid.0;
        let own = allocated_by == Some(txid)
            || self
                .undo_multi
                .iter()
                .any(|&(open, run)| open == txid && overlaps(run.start, run.n_pages))
            || overflow > 0
                && self
                    .undo
                    .iter()
                    .any(|&(open, start, alloc)| open == txid && overlaps(start, alloc.n_pages));
        if own {
            return refuse(self, FreelistError::OwnAllocation { txid, pgid });
        }
        let taken = [
            self.free.first_in(pgid, last),
            self.pending.first_in(pgid, last),
        ]
        .into_iter()
        .flatten()
        .min();
        if let Some(taken) = taken {
            return refuse(self, FreelistError::AlreadyFreed { pgid: taken });
        }
        let run = Run {
            start: pgid,
            n_pages: u64::from(overflow) + 1,
        };
        self.pending.insert(txid, FreedSpan { run, allocated_by });
        Ok(())
    }

    pub(crate) fn release(&mut self, up_to: Txid) {
        // The oldest transactions first, taken off the front one by one: a split of the map
        // would build a new one for what stays, an allocation every time.
        let mut runs = mem::take(&mut self.scratch);
        while let Some(entry) = self.pending.by_tx.first_entry() {
            if *entry.key() > up_to {
                break;
            }
            let tx = entry.remove();
            runs.extend(tx.spans.iter().map(|span| span.run));
            self.pending.recycle(tx);
        }
        self.free_pending_runs(runs);
    }

    pub(crate) fn release_range(&mut self, begin: Txid, end: Txid) {
        let from = match self.range_cursor {
            Some((cursor_begin, through)) if cursor_begin == begin => {
                match through.0.checked_add(1) {
                    Some(next) => Txid(next.max(begin.0)),
                    None => return,
                }
            }
            _ => begin,
        };
        if from > end {
            return;
        }
        if let Some((&newest, _)) = self.pending.by_tx.range(from..=end).next_back() {
            self.range_cursor = Some((begin, newest));
        }
        let mut runs = mem::take(&mut self.scratch);
        // Transactions left with nothing pending go; removed one by one, so that the cost stays
        // in proportion to the range looked at, not to everything pending.
        let mut emptied = mem::take(&mut self.emptied);
        for (&txid, tx) in self.pending.by_tx.range_mut(from..=end) {
            if tx.last_release_begin == Some(begin) {
                continue;
            }
            tx.spans.retain(|span| {
                let allocated_by = span.allocated_by.unwrap_or(TXID_UNKNOWN);
                let release = (begin..=end).contains(&allocated_by);
                if release {
                    runs.push(span.run);
                }
                !release
            });
            tx.last_release_begin = Some(begin);
            if tx.spans.is_empty() {
                emptied.push(txid);
            }
        }
        for txid in emptied.drain(..) {
            if let Some(tx) = self.pending.by_tx.remove(&txid) {
                self.pending.recycle(tx);
            }
        }
        self.emptied = emptied;
        self.free_pending_runs(runs);
    }

    /// Moves `runs` (removed from their transactions already) from pending to free.
    fn free_pending_runs(&mut self, mut runs: Vec<Run>) {
        for &run in &runs {
            self.pending.unindex(run);
        }
        runs.sort_unstable_by_key(|run| run.start);
        self.free.insert_runs(&runs);
        runs.clear();
        self.scratch = runs;
    }

    pub(crate) fn release_pending(&mut self, open_readers: &[Txid], durable: Option<Txid>) {
        // What each open reader, and the last durable meta, may reach: a page allocated by
        // `a` and freed by `f` is reachable from the meta of transaction `m` when `a <= m < f`.
        // A barrier `(allocated_max, freed_min)` keeps every pending page allocated at or before
        // the first and freed at or after the second. A reader at `r` keeps `(r, r)`, one more
        // freeing transaction than it needs (bbolt's rule); the durable meta keeps exactly what
        // it reaches, `(d, d + 1)`.
        let mut barriers = mem::take(&mut self.barriers);
        barriers.extend(open_readers.iter().map(|&r| (r, r)));
        if let Some(durable) = durable {
            barriers.push((durable, Txid(durable.0.saturating_add(1))));
        }
        // Sorted by the first field, the second ascends too (a reader at `d` sorts before the
        // durable barrier at `d`, one at `d + 1` after it).
        barriers.sort_unstable();
        barriers.dedup();
        let Some(&(_, freed_min)) = barriers.first() else {
            // Nothing can reach a pending page.
            self.barriers = barriers;
            self.release(Txid(u64::MAX));
            return;
        };
        // Nothing freed at or after the first barrier's freeing bound is released wholesale...
        if let Some(before) = freed_min.0.checked_sub(1) {
            self.release(Txid(before));
        }
        // ...but a page both allocated after one barrier and freed before the next (or
        // allocated after the last) was never reachable from any of them.
        for pair in barriers.windows(2) {
            let (begin, end) = ((pair[0].0).0.checked_add(1), (pair[1].1).0.checked_sub(1));
            if let (Some(begin), Some(end)) = (begin, end) {
                self.release_range(Txid(begin), Txid(end));
            }
        }
        let (allocated_max, _) = barriers[barriers.len() - 1];
        if let Some(begin) = allocated_max.0.checked_add(1) {
            self.release_range(Txid(begin), Txid(u64::MAX));
        }
        barriers.clear();
        self.barriers = barriers;
    }

    pub(crate) fn rollback(&mut self, txid: Txid) {
        if self.trims.iter().any(|&(open, _)| open == txid) {
            // The trimmed runs lie above everything the transaction allocated from the free
            // set, and no later trim can overlap an earlier one: disjoint, as insert_runs needs.
            let mut runs: Vec<Run> = self
                .trims
                .iter()
                .filter(|&&(open, _)| open == txid)
                .map(|&(_, run)| run)
                .collect();
            self.trims.retain(|&(open, _)| open != txid);
            runs.sort_unstable_by_key(|run| run.start);
            self.free.insert_runs(&runs);
        }
        if let Some(tx) = self.pending.by_tx.remove(&txid) {
            for span in tx.spans {
                self.pending.unindex(span.run);
                if let Some(allocated_by) = span.allocated_by {
                    self.allocs.insert(span.run.start, allocated_by);
                }
            }
        }
        if self.undo.iter().any(|&(open, _, _)| open == txid) {
            let mut allocated = mem::take(&mut self.undo);
            // Put back in the order allocated, the last first: a start allocated twice (only
            // after a caller freed part of a run) gets its oldest record back.
            let mut runs = mem::take(&mut self.scratch);
            for &(_, start, alloc) in allocated.iter().rev().filter(|(open, _, _)| *open == txid) {
                let removed = match alloc.replaced {
                    Some(previous) => self.allocs.insert(start, previous),
                    None => self.allocs.remove(&start),
                };
                debug_assert_eq!(removed, Some(txid), "allocation record of {start} lost");
                if !alloc.from_high_water {
                    runs.push(Run {
                        start,
                        n_pages: alloc.n_pages,
                    });
                }
            }
            runs.sort_unstable_by_key(|run| run.start);
            self.free.insert_runs(&runs);
            runs.clear();
            self.scratch = runs;
            allocated.retain(|&(open, _, _)| open != txid);
            self.undo = allocated;
            self.undo_multi.retain(|&(open, _)| open != txid);
        }
    }

    pub(crate) fn unallocate(&mut self, txid: Txid, pgid: Pgid) -> bool {
        let Some(index) = self
            .undo
            .iter()
            .rposition(|&(open, start, _)| open == txid && start == pgid)
        else {
            return false;
        };
        let (_, _, alloc) = self.undo.remove(index);
        if let Some(index) = self
            .undo_multi
            .iter()
            .rposition(|&(open, run)| open == txid && run.start == pgid)
        {
            self.undo_multi.remove(index);
        }
        let removed = match alloc.replaced {
            Some(previous) => self.allocs.insert(pgid, previous),
            None => self.allocs.remove(&pgid),
        };
        debug_assert_eq!(removed, Some(txid), "allocation record of {pgid} lost");
        if !alloc.from_high_water {
            self.free.insert_runs(&[Run {
                start: pgid,
                n_pages: alloc.n_pages,
            }]);
        }
        true
    }

    pub(crate) fn trim_tail(&mut self, txid: Txid, high_water: Pgid) -> Pgid {
        self.debug_assert_one_writer(txid);
        debug_assert!(
            self.trims.iter().all(|&(open, _)| open == txid),
            "transaction {txid} trims while another neither committed nor rolled back"
        );
        match self.free.take_tail(high_water) {
            Some(run) => {
                debug_assert!(run.start.0 >= 2, "a meta page was free");
                self.trims.push((txid, run));
                run.start
            }
            None => high_water,
        }
    }

    pub(crate) fn commit(&mut self, txid: Txid) {
        self.undo.retain(|&(open, _, _)| open > txid);
        self.undo_multi.retain(|&(open, _)| open > txid);
        self.trims.retain(|&(open, _)| open > txid);
    }

    #[inline]
    pub(crate) fn count(&self) -> usize {
        self.free.len() + self.pending.len()
    }

    #[inline]
    pub(crate) fn is_freed(&self, pgid: Pgid) -> bool {
        self.free.first_in(pgid, pgid).is_some() || self.pending.first_in(pgid, pgid).is_some()
    }

    pub(crate) fn write_into(&self, buf: &mut [u8], pgid: Pgid, overflow: u32) -> usize {
        let count = self.count();
        let slots = write_freelist_header(buf, pgid, count, overflow);
        let written = merge_pgids(slots, self.free.iter(), self.pending.ids());
        assert_eq!(written, count, "freelist count out of step with its ids");
        freelist_page_size(count)
    }

    /// Panics when the bookkeeping is inconsistent (tests only; O(size)).
    #[cfg(test)]
    pub(crate) fn check_invariants(&self) {
        self.free.check();
        let mut len = 0;
        for (txid, tx) in &self.pending.by_tx {
            assert!(!tx.spans.is_empty(), "empty pending entry for {txid}");
            for span in &tx.spans {
                assert!(span.run.start.0 >= 2, "a pending meta page");
                for id in span.run.start.0..span.run.end() {
                    assert!(self.pending.ids.contains(Pgid(id)), "{id} not indexed");
                }
                len += span.run.n_pages as usize;
            }
        }
        assert_eq!(len, self.pending.len, "pending count");
        // Every span's ids are in the index and the index holds as many: the spans do not
        // overlap, and the index has nothing else.
        assert_eq!(
            self.pending.ids.count(),
            len,
            "pending spans overlap, or extra ids"
        );
        let mut pending = self.pending.ids().peekable();
        for id in self.free.iter() {
            while pending.next_if(|&pending_id| pending_id < id).is_some() {}
            assert_ne!(pending.peek(), Some(&id), "page {id} both free and pending");
        }
        assert!(
            self.undo.windows(2).all(|pair| pair[0].0 == pair[1].0),
            "more than one open writer"
        );
        for (txid, start, alloc) in &self.undo {
            assert_eq!(
                self.allocs.get(start),
                Some(txid),
                "undo run without record"
            );
            let multi = self
                .undo_multi
                .iter()
                .filter(|(open, run)| open == txid && run.start == *start)
                .count();
            assert_eq!(
                multi,
                usize::from(alloc.n_pages > 1),
                "multi-page undo index"
            );
        }
        assert!(self.scratch.is_empty(), "scratch left behind");
        for &(_, run) in &self.trims {
            assert!(
                self.free.first_in(run.start, Pgid(run.end() - 1)).is_none(),
                "trimmed run at {} is free",
                run.start
            );
        }
    }
}
