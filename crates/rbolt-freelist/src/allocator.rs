//! The page allocator: the one place that decides where a write transaction's pages go.
//!
//! It owns everything allocation depends on — the free set, the high-water mark, the file's
//! size limit, a vacuum step's mark, cut and reserved runs, and the strategy for single
//! pages — and every allocation of a commit goes through [`Allocator::allocate`]. The vacuum's
//! planner asks the same code where a step's pages would land: [`Allocator::plan`] gives a
//! copy over the free ids alone (a [`FreeRuns`]), on which the planner makes the step's calls
//! and reads where each allocation went. So a change to how pages are chosen reaches the
//! planner without anyone modelling it twice.
//!
//! How a commit uses it, in order:
//! 1. [`Allocator::vacuum_step`] (a vacuum step only): its reserved runs, its cut, its mark.
//! 2. [`Allocator::choose_strategy`]: once, from whether the commit is durable and shrinks.
//! 3. [`Allocator::allocate`] for every page the spill writes.
//! 4. [`Allocator::end_spill`]: what was taken ahead of need goes back; the cut lifts.
//! 5. [`Allocator::trim_tail`] (a shrinking commit), then the freelist page's allocation.
//! 6. The freelist's `commit` or `rollback` ([`Allocator::free_set_mut`]).

use crate::free_runs::FreeRuns;
use crate::free_set::FreeSet;
use crate::runs::Run;
use crate::{AnyFreelist, FreeIds, Freelist, FreelistError};
use rbolt_page::{Pgid, Txid};

/// How a commit takes its single pages.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Strategy {
    /// The lowest free page, then the high-water mark (first fit, bbolt's way).
    #[default]
    LowestFirst,
    /// After the commit's first [`RUNS_AFTER_PAGES`] pages, the free runs of two or more
    /// pages, lowest first, each page after the one before, and then the high-water mark:
    /// isolated free pages are left free (decision record 0007 in `docs/decisions/`). Each
    /// contiguous run of page ids is one write call, and a big commit
    /// of pages taken lowest first from a fragmented free set writes almost as many runs as
    /// pages. Chosen only while the isolated free pages are under [`RUNS_FREE_DIVISOR`]th of
    /// the file, so the file grows by at most that fraction for the pages left free, and first
    /// fit takes them again once there are more.
    Runs,
}

/// A commit takes its first pages lowest first: a small one writes few runs whatever it
/// takes, and growing the file for it would leave a free page behind at every commit.
pub const RUNS_AFTER_PAGES: u64 = 64;
/// Runs are preferred while the isolated free pages are fewer than the file's pages over this.
pub const RUNS_FREE_DIVISOR: u64 = 8;

/// Where the free set of an [`Allocator`] lives: the freelist itself (a transaction's
/// allocations), or a copy of its free ids (a plan's). Sealed: these two are the only ones.
pub trait FreePages: sealed::Sealed {
    /// Takes the lowest run of `n_pages` free ids (first fit).
    fn take_first_fit(&mut self, txid: Txid, n_pages: usize) -> Option<Pgid>;
    /// Takes the `n_pages` free ids from `start` on, each as a page of its own; whether they
    /// were all free (nothing changes when not).
    fn take_pages(&mut self, txid: Txid, start: Pgid, n_pages: usize) -> bool;
    /// Gives back the run of `n_pages` at `pgid` taken by `take_first_fit`.
    fn put_back(&mut self, txid: Txid, pgid: Pgid, n_pages: usize) -> bool;
    /// Gives back `n_pages` from `start` on taken by `take_pages`.
    fn put_back_pages(&mut self, txid: Txid, start: Pgid, n_pages: usize) -> bool;
    /// Notes pages taken past the high-water mark (see [`Freelist::record_allocation`]).
    fn note_high_water(&mut self, txid: Txid, pgid: Pgid, n_pages: usize);
    /// Cuts the free run that ends at `high_water` off the set; returns the new mark.
    fn cut_tail(&mut self, txid: Txid, high_water: Pgid) -> Pgid;
    /// The free ids, ascending.
    fn ids(&self) -> FreeIds<'_>;
    /// How many ids are free.
    fn len(&self) -> usize;
    /// Whether no id is free.
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

mod sealed {
    pub trait Sealed {}
    impl Sealed for crate::AnyFreelist {}
    impl Sealed for crate::FreeRuns {}
}

impl FreePages for AnyFreelist {
    #[inline]
    fn take_first_fit(&mut self, txid: Txid, n_pages: usize) -> Option<Pgid> {
        self.allocate(txid, n_pages)
    }
    fn take_pages(&mut self, txid: Txid, start: Pgid, n_pages: usize) -> bool {
        self.allocate_pages(txid, start, n_pages)
    }
    fn put_back(&mut self, txid: Txid, pgid: Pgid, _n_pages: usize) -> bool {
        self.unallocate(txid, pgid)
    }
    fn put_back_pages(&mut self, txid: Txid, start: Pgid, n_pages: usize) -> bool {
        self.unallocate_pages(txid, start, n_pages)
    }
    #[inline]
    fn note_high_water(&mut self, txid: Txid, pgid: Pgid, n_pages: usize) {
        self.record_allocation(txid, pgid, n_pages);
    }
    fn cut_tail(&mut self, txid: Txid, high_water: Pgid) -> Pgid {
        self.trim_tail(txid, high_water)
    }
    fn ids(&self) -> FreeIds<'_> {
        self.free_ids()
    }
    fn len(&self) -> usize {
        self.free_count()
    }
}

impl FreePages for FreeRuns {
    fn take_first_fit(&mut self, _txid: Txid, n_pages: usize) -> Option<Pgid> {
        if n_pages == 0 {
            return None;
        }
        self.set.allocate(n_pages as u64)
    }
    fn take_pages(&mut self, _txid: Txid, start: Pgid, n_pages: usize) -> bool {
        n_pages > 0 && self.set.take_run(start, n_pages as u64)
    }
    fn put_back(&mut self, _txid: Txid, pgid: Pgid, n_pages: usize) -> bool {
        self.put_back_run(pgid, n_pages)
    }
    fn put_back_pages(&mut self, _txid: Txid, start: Pgid, n_pages: usize) -> bool {
        self.put_back_run(start, n_pages)
    }
    fn note_high_water(&mut self, _txid: Txid, _pgid: Pgid, _n_pages: usize) {}
    fn cut_tail(&mut self, _txid: Txid, high_water: Pgid) -> Pgid {
        self.set
            .take_tail(high_water)
            .map_or(high_water, |run| run.start)
    }
    fn ids(&self) -> FreeIds<'_> {
        self.set.free_ids()
    }
    fn len(&self) -> usize {
        self.set.len()
    }
}

impl FreeRuns {
    /// Puts a run that was taken from the copy back; whether none of it was free.
    fn put_back_run(&mut self, start: Pgid, n_pages: usize) -> bool {
        let end = start.0 + n_pages as u64;
        if n_pages == 0 || self.set.first_in(start, Pgid(end - 1)).is_some() {
            return false;
        }
        self.set.insert_runs(&[Run {
            start,
            n_pages: n_pages as u64,
        }]);
        true
    }
}

/// The page allocator of one write transaction (see the module's documentation): over the
/// freelist for a commit (`Allocator<AnyFreelist>`), over a copy of the free ids for a plan
/// (`Allocator<FreeRuns>`, from [`Allocator::plan`]).
#[derive(Clone, Debug)]
pub struct Allocator<F: FreePages = AnyFreelist> {
    free: F,
    txid: Txid,
    page_size: u64,
    /// One past the last page allocated: the new high-water mark.
    high_water: Pgid,
    /// The file's size limit in bytes (0: none).
    max_size: u64,
    /// The high-water mark a vacuum step may not pass.
    mark: Option<Pgid>,
    /// A vacuum step's cut: the pages it moves lie at or past it, and every page it writes is
    /// meant to land below it.
    cut: Option<Pgid>,
    allocated_past_cut: u64,
    /// Runs taken ahead of need (a vacuum step's multi-page pages): handed out by size before
    /// any other run, so that single pages cannot break them up first.
    reserved: Vec<(usize, Pgid)>,
    strategy: Strategy,
    runs: Runs,
    pages_allocated: u64,
}

/// The free runs a commit under [`Strategy::Runs`] hands out.
#[derive(Clone, Debug, Default)]
enum Runs {
    /// Not looked at yet in this transaction.
    #[default]
    Unknown,
    /// Isolated free pages are plenty, or the spill is over: lowest first.
    Off,
    /// Handing out `next..end`, then the runs from `runs[index]` on.
    On {
        runs: Vec<(Pgid, u64)>,
        index: usize,
        next: u64,
        end: u64,
    },
}

/// The limits an allocator holds a transaction to.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    /// Bytes of a page.
    pub page_size: usize,
    /// The file's size limit in bytes (0: none): no page is allocated past it.
    pub max_size: u64,
}

impl Allocator<AnyFreelist> {
    /// The allocator of transaction `txid`, which starts from `freelist` and `high_water`.
    pub fn new(freelist: AnyFreelist, txid: Txid, high_water: Pgid, limits: Limits) -> Self {
        Allocator {
            free: freelist,
            txid,
            page_size: limits.page_size as u64,
            high_water,
            max_size: limits.max_size,
            mark: None,
            cut: None,
            allocated_past_cut: 0,
            reserved: Vec::new(),
            strategy: Strategy::LowestFirst,
            runs: Runs::Unknown,
            pages_allocated: 0,
        }
    }

    /// The planning face: a copy over the free ids alone, cheap to clone, that allocates
    /// through the same code as this one and changes nothing here.
    pub fn plan(&self) -> Allocator<FreeRuns> {
        Allocator {
            free: FreeRuns::new(&self.free),
            txid: self.txid,
            page_size: self.page_size,
            high_water: self.high_water,
            max_size: self.max_size,
            mark: self.mark,
            cut: self.cut,
            allocated_past_cut: self.allocated_past_cut,
            reserved: self.reserved.clone(),
            strategy: self.strategy,
            runs: self.runs.clone(),
            pages_allocated: self.pages_allocated,
        }
    }

    /// Fails when a durable point after this commit (`Db::sync`, a durable commit, the close)
    /// could not place its freelist page: no free run of the pages it needs and no room for
    /// them below the size limit. A commit without syncs asks before it writes anything, so
    /// that the file can always be made durable.
    pub fn ensure_room_for_freelist(&mut self) -> Result<(), FreelistError> {
        if self.max_size == 0 {
            return Ok(());
        }
        // What the durable point's page holds: every free and pending id then, which are the
        // ones now (a commit without syncs frees no freelist page of its own).
        let n_pages = rbolt_page::pages_for(self.free.write_size(), self.page_size as usize);
        let end = self.high_water.0 + n_pages as u64;
        if end.saturating_mul(self.page_size) <= self.max_size {
            return Ok(());
        }
        if let Some(pgid) = self.free.allocate(self.txid, n_pages) {
            let given_back = self.free.unallocate(self.txid, pgid);
            debug_assert!(given_back, "the run at {pgid} was just taken");
            return Ok(());
        }
        Err(FreelistError::MaxSizeReached {
            max_size: self.max_size,
        })
    }

    /// The freelist, to give back to the writer at the transaction's end.
    pub fn into_freelist(self) -> AnyFreelist {
        self.free
    }
}

impl<F: FreePages> Allocator<F> {
    /// The transaction the allocator serves.
    pub fn txid(&self) -> Txid {
        self.txid
    }

    /// One past the last page allocated: the high-water mark the commit leaves.
    pub fn high_water(&self) -> Pgid {
        self.high_water
    }

    /// The free set (the freelist, or the plan's copy).
    pub fn free_set(&self) -> &F {
        &self.free
    }

    /// The free set, to free pages into and to end the transaction with (`commit`,
    /// `rollback`). Allocations go through the allocator.
    pub fn free_set_mut(&mut self) -> &mut F {
        &mut self.free
    }

    /// The strategy chosen for this transaction.
    pub fn strategy(&self) -> Strategy {
        self.strategy
    }

    /// Pages allocated so far.
    pub fn pages_allocated(&self) -> u64 {
        self.pages_allocated
    }

    /// Pages allocated at or past the vacuum step's cut: meant to move, and did not.
    pub fn allocated_past_cut(&self) -> u64 {
        self.allocated_past_cut
    }

    /// A vacuum step's allocations: its multi-page pages' runs (`spans`, taken now, largest
    /// first, the lowest of each size), the cut every page it writes is meant to land below,
    /// and the high-water mark it may never pass (an allocation past it fails, before the
    /// commit writes anything). Returns the reserved runs' starts, `None` where the free set
    /// had no run of that size (those pages then come from the high-water mark).
    pub fn vacuum_step(
        &mut self,
        spans: &[u64],
        cut: Option<Pgid>,
        mark: Pgid,
    ) -> Vec<Option<Pgid>> {
        let mut sizes = spans.to_vec();
        sizes.sort_unstable_by(|a, b| b.cmp(a));
        let reserved = sizes
            .iter()
            .map(|&n_pages| {
                let n_pages = n_pages as usize;
                let pgid = self.free.take_first_fit(self.txid, n_pages)?;
                self.reserved.push((n_pages, pgid));
                Some(pgid)
            })
            .collect();
        self.cut = cut;
        self.mark = Some(mark);
        reserved
    }

    /// Picks how the commit takes its single pages, once per transaction: a durable commit
    /// that may grow the file writes its pages in long runs ([`Strategy::Runs`]); a shrinking
    /// one, a vacuum step, a commit without syncs (whose rewrites of cached pages are copies,
    /// where runs do not count) and one on a file with a size limit (whose room is for pages
    /// that need a run) take pages lowest first.
    pub fn choose_strategy(&mut self, durable: bool, shrinking: bool) -> Strategy {
        let runs = durable
            && !shrinking
            && self.mark.is_none()
            && self.cut.is_none()
            && self.max_size == 0;
        self.strategy = if runs {
            Strategy::Runs
        } else {
            Strategy::LowestFirst
        };
        self.strategy
    }

    /// Takes `n_pages` contiguous page ids: a reserved run of that size, a page of a free run
    /// (under [`Strategy::Runs`]), the lowest free run, or the high-water mark. Fails, taking
    /// nothing, when the pages would pass the size limit or the vacuum step's mark.
    pub fn allocate(&mut self, n_pages: usize) -> Result<Pgid, FreelistError> {
        let pgid = self.take(n_pages)?;
        self.pages_allocated += n_pages as u64;
        if self.cut.is_some_and(|cut| pgid >= cut) {
            self.allocated_past_cut += n_pages as u64;
        }
        Ok(pgid)
    }

    fn take(&mut self, n_pages: usize) -> Result<Pgid, FreelistError> {
        if let Some(index) = self.reserved.iter().position(|&(n, _)| n == n_pages) {
            return Ok(self.reserved.swap_remove(index).1);
        }
        if n_pages == 1
            && self.strategy == Strategy::Runs
            && self.pages_allocated + 1 > RUNS_AFTER_PAGES
        {
            if let Some(pgid) = self.run_page() {
                return Ok(pgid);
            }
            // No run left: the high-water mark (`Runs` is for files without a size limit).
            if matches!(self.runs, Runs::On { .. }) {
                return self.take_high_water(1);
            }
        }
        if let Some(pgid) = self.free.take_first_fit(self.txid, n_pages) {
            return Ok(pgid);
        }
        self.take_high_water(n_pages)
    }

    /// Takes `n_pages` at the high-water mark, within the limits.
    fn take_high_water(&mut self, n_pages: usize) -> Result<Pgid, FreelistError> {
        let pgid = self.high_water;
        let end = pgid.0 + n_pages as u64;
        if self.max_size > 0 && end.saturating_mul(self.page_size) > self.max_size {
            return Err(FreelistError::MaxSizeReached {
                max_size: self.max_size,
            });
        }
        if let Some(mark) = self.mark
            && end > mark.0
        {
            return Err(FreelistError::MarkReached {
                mark,
                max_size: mark.0.saturating_mul(self.page_size),
            });
        }
        self.high_water = Pgid(end);
        // Recorded so that, once freed, these pages can be released between long readers.
        self.free.note_high_water(self.txid, pgid, n_pages);
        Ok(pgid)
    }

    /// The next page of a free run of two or more (see [`Strategy::Runs`]), or `None` when
    /// there is no run left or isolated free pages are plenty.
    fn run_page(&mut self) -> Option<Pgid> {
        if matches!(self.runs, Runs::Unknown) {
            let runs = runs_of_two_or_more(self.free.ids());
            let in_runs: u64 = runs.iter().map(|&(_, n_pages)| n_pages).sum();
            let isolated = self.free.len() as u64 - in_runs;
            self.runs = if isolated.saturating_mul(RUNS_FREE_DIVISOR) < self.high_water.0 {
                Runs::On {
                    runs,
                    index: 0,
                    next: 0,
                    end: 0,
                }
            } else {
                Runs::Off
            };
        }
        let Runs::On {
            runs,
            index,
            next,
            end,
        } = &mut self.runs
        else {
            return None;
        };
        loop {
            if *next < *end {
                *next += 1;
                return Some(Pgid(*next - 1));
            }
            let &(start, n_pages) = runs.get(*index)?;
            *index += 1;
            // Taken whole now, as pages of their own, so that what the commit does not use
            // goes back in one piece (`end_spill`). A multi-page allocation may have taken
            // part of it since the runs were listed: then it is skipped.
            if self.free.take_pages(self.txid, start, n_pages as usize) {
                (*next, *end) = (start.0, start.0 + n_pages);
            }
        }
    }

    /// The spill is over: the reserved runs no page took and the rest of the last free run
    /// go back to the free set, the cut lifts, and what is allocated next (the freelist page)
    /// is lowest first.
    pub fn end_spill(&mut self) {
        for (n_pages, pgid) in self.reserved.drain(..) {
            let given_back = self.free.put_back(self.txid, pgid, n_pages);
            debug_assert!(
                given_back,
                "a reserved run at {pgid} was not this transaction's"
            );
        }
        if let Runs::On { next, end, .. } = self.runs
            && next < end
        {
            let n_pages = (end - next) as usize;
            let given_back = self.free.put_back_pages(self.txid, Pgid(next), n_pages);
            debug_assert!(given_back, "the run at {next} was not this transaction's");
        }
        self.runs = Runs::Off;
        self.strategy = Strategy::LowestFirst;
        self.cut = None;
    }

    /// Lowers the high-water mark past the free pages at the end of the file (a shrinking
    /// commit): they leave the free set, and the mark is returned.
    pub fn trim_tail(&mut self) -> Pgid {
        self.high_water = self.free.cut_tail(self.txid, self.high_water);
        self.high_water
    }
}

/// The free runs of two or more pages among `ids` (ascending): start and length.
fn runs_of_two_or_more(mut ids: FreeIds<'_>) -> Vec<(Pgid, u64)> {
    let mut runs = Vec::new();
    let Some(first) = ids.next() else {
        return runs;
    };
    let (mut start, mut n_pages) = (first.0, 1u64);
    for id in ids.chain(std::iter::once(Pgid(u64::MAX))) {
        if id.0 == start + n_pages {
            n_pages += 1;
            continue;
        }
        if n_pages >= 2 {
            runs.push((Pgid(start), n_pages));
        }
        (start, n_pages) = (id.0, 1);
    }
    runs
}
