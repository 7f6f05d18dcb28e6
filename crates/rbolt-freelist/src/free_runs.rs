//! A copy of a freelist's free ids to ask first fit about without touching the freelist:
//! where `allocate` would put a run if only the ids below a page counted, and what a sequence
//! of allocations would take. The vacuum's planner models a commit's allocations with it.

use crate::Freelist;
use crate::free_set::FreeSet;
use crate::span::SpanIds;
use rbolt_page::Pgid;

/// The free ids of a freelist (not its pending ones), copied as maximal runs. First fit here
/// is the span freelist's own, which picks what both freelists pick; allocating from the copy
/// changes only the copy.
///
/// ```
/// use rbolt_freelist::{AnyFreelist, FreeRuns, Freelist, FreelistKind};
/// use rbolt_page::Pgid;
///
/// let mut freelist = AnyFreelist::new(FreelistKind::Array);
/// freelist.rebuild(&[Pgid(3), Pgid(6), Pgid(7), Pgid(8), Pgid(20), Pgid(21)]).unwrap();
/// let mut runs = FreeRuns::new(&freelist);
/// assert_eq!(runs.first_fit_below(2, Pgid(10)), Some(Pgid(6)));
/// assert_eq!(runs.first_fit_below(3, Pgid(8)), None); // 6..=8 does not end below 8
/// assert_eq!(runs.allocate_below(2, Pgid(10)), Some(Pgid(6)));
/// assert_eq!(runs.first_fit_below(2, Pgid(30)), Some(Pgid(20)));
/// assert_eq!(runs.tail_len(Pgid(22)), 2);
/// assert_eq!(freelist.free_count(), 6); // the freelist is as it was
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FreeRuns {
    pub(crate) set: SpanIds,
}

impl FreeRuns {
    /// The free ids of `freelist`.
    pub fn new<F: Freelist + ?Sized>(freelist: &F) -> FreeRuns {
        let mut set = SpanIds::default();
        set.assign(freelist.free_ids().collect());
        FreeRuns { set }
    }

    /// Number of free ids.
    pub fn len(&self) -> usize {
        self.set.len()
    }

    /// Whether no id is free.
    pub fn is_empty(&self) -> bool {
        self.set.len() == 0
    }

    /// The start of the lowest run of `n_pages` free ids that lies wholly below `end`: where
    /// [`Freelist::allocate`] would put the run if no id at or past `end` were free. That is
    /// the run `allocate` takes whenever the run it takes ends below `end`, and `None`
    /// otherwise, and for `n_pages == 0` (as `allocate`). Takes nothing.
    pub fn first_fit_below(&self, n_pages: usize, end: Pgid) -> Option<Pgid> {
        if n_pages == 0 {
            return None;
        }
        let n_pages = n_pages as u64;
        // The lowest run that holds `n_pages` at all: a lower one is too short, cut at `end`
        // or not; a higher one starts later, so it ends past `end` if this one does.
        let run = self.set.first_fit(n_pages)?;
        (run.start.0.checked_add(n_pages)? <= end.0).then_some(run.start)
    }

    /// Takes the run [`first_fit_below`](FreeRuns::first_fit_below) names, as `allocate`
    /// takes it, and returns its start; takes nothing when that is `None`.
    pub fn allocate_below(&mut self, n_pages: usize, end: Pgid) -> Option<Pgid> {
        let start = self.first_fit_below(n_pages, end)?;
        let taken = self.set.allocate(n_pages as u64);
        debug_assert_eq!(taken, Some(start), "first fit out of step with allocate");
        Some(start)
    }

    /// How many free ids run up to `end`: the length of the free run whose last id is
    /// `end - 1`, 0 when `end - 1` is not free. With `end` the high-water mark, the free tail
    /// a commit can cut off.
    pub fn tail_len(&self, end: Pgid) -> u64 {
        self.set.run_ending_at(end).map_or(0, |run| run.n_pages)
    }
}
