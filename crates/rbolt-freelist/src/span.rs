//! The free set as maximal runs of free ids (bbolt's "hashmap" freelist, made deterministic).
//!
//! bbolt indexes its runs in three hash maps: by start, by end and by length. Here runs are
//! ordered maps instead, so the choice of run is deterministic (first fit, the same as the
//! array) and the map by start also answers "which run ends just before this id": its
//! predecessor. That makes bbolt's map by end redundant, so there is none.

use crate::FreelistKind;
use crate::free_set::{FreeIds, FreeIdsInner, FreeSet};
use crate::runs::{Run, RunIds};
use rbolt_page::Pgid;
use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, BTreeSet};

/// Runs that first fit tries in id order before it looks up the length classes.
const FIRST_FIT_SCAN_RUNS: usize = 16;

/// Free ids as maximal runs: no two runs touch, so the representation of a set is unique.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SpanIds {
    /// Run start → run length.
    by_start: BTreeMap<Pgid, u64>,
    /// Run length → starts of the runs of that length. The classes are few (a set of `n` ids
    /// has fewer than `sqrt(2n)` distinct run lengths), so walking them is cheap, and the
    /// lowest start of a class is the left edge of its set, which repeated allocation keeps
    /// in cache.
    by_len: BTreeMap<u64, BTreeSet<Pgid>>,
    /// Number of free ids (the sum of the run lengths).
    len: usize,
}

impl SpanIds {
    fn add(&mut self, run: Run) {
        debug_assert!(run.n_pages > 0, "empty run at {}", run.start);
        self.by_start.insert(run.start, run.n_pages);
        self.by_len
            .entry(run.n_pages)
            .or_default()
            .insert(run.start);
        self.len += run.n_pages as usize;
    }

    fn remove(&mut self, run: Run) {
        let removed = self.by_start.remove(&run.start);
        debug_assert_eq!(
            removed,
            Some(run.n_pages),
            "span index out of step at {}",
            run.start
        );
        let removed = match self.by_len.entry(run.n_pages) {
            Entry::Occupied(mut class) => {
                let removed = class.get_mut().remove(&run.start);
                if class.get().is_empty() {
                    class.remove();
                }
                removed
            }
            Entry::Vacant(_) => false,
        };
        debug_assert!(removed, "length index out of step at {}", run.start);
        self.len -= run.n_pages as usize;
    }

    /// The lowest-starting run of at least `n_pages` ids.
    ///
    /// First the lowest few runs are tried in order: in a typical freelist one of them fits.
    /// Otherwise the lowest start of each length class from `n_pages` up is compared.
    pub(crate) fn first_fit(&self, n_pages: u64) -> Option<Run> {
        for (&start, &len) in self.by_start.iter().take(FIRST_FIT_SCAN_RUNS) {
            if len >= n_pages {
                return Some(Run {
                    start,
                    n_pages: len,
                });
            }
        }
        self.first_fit_by_length(n_pages)
    }

    /// The lowest-starting run of at least `n_pages` ids, found through the length index.
    fn first_fit_by_length(&self, n_pages: u64) -> Option<Run> {
        self.by_len
            .range(n_pages..)
            .filter_map(|(&len, starts)| {
                starts.first().map(|&start| Run {
                    start,
                    n_pages: len,
                })
            })
            .min_by_key(|run| run.start)
    }

    /// The run whose last id is `end - 1`, if `end - 1` is free. Runs are maximal, so it is the
    /// whole free run there, and only the last run can end there when every id is below `end`.
    pub(crate) fn run_ending_at(&self, end: Pgid) -> Option<Run> {
        let (&start, &n_pages) = self.by_start.range(..end).next_back()?;
        let run = Run { start, n_pages };
        (run.end() == end.0).then_some(run)
    }

    /// Adds `run`, merging it with the runs that end just before it and start just after it.
    fn insert_merged(&mut self, run: Run) {
        let mut merged = run;
        if let Some((&start, &n_pages)) = self.by_start.range(..run.start).next_back() {
            debug_assert!(
                start.0 + n_pages <= run.start.0,
                "run at {} overlaps free ids",
                run.start
            );
            if start.0 + n_pages == run.start.0 {
                self.remove(Run { start, n_pages });
                merged = Run {
                    start,
                    n_pages: n_pages + merged.n_pages,
                };
            }
        }
        let next = Pgid(run.end());
        if let Some(&n_pages) = self.by_start.get(&next) {
            self.remove(Run {
                start: next,
                n_pages,
            });
            merged.n_pages += n_pages;
        }
        debug_assert!(
            self.by_start
                .range(run.start..Pgid(run.end()))
                .next()
                .is_none(),
            "run at {} overlaps free ids",
            run.start
        );
        self.add(merged);
    }
}

impl FreeSet for SpanIds {
    const KIND: FreelistKind = FreelistKind::Span;

    type Iter<'a> = RunIds<'a, u64>;

    #[inline]
    fn len(&self) -> usize {
        self.len
    }

    #[inline]
    fn iter(&self) -> Self::Iter<'_> {
        RunIds::new(self.by_start.iter(), self.len)
    }

    fn free_ids(&self) -> FreeIds<'_> {
        FreeIds(FreeIdsInner::Span(self.iter()))
    }

    fn first_in(&self, first: Pgid, last: Pgid) -> Option<Pgid> {
        // Either the run that starts at or before `first` covers it, or the lowest id is the
        // start of the first run inside the range.
        if let Some((&start, &n_pages)) = self.by_start.range(..=first).next_back()
            && start.0 + n_pages > first.0
        {
            return Some(first);
        }
        let (&start, _) = self.by_start.range(first..=last).next()?;
        Some(start)
    }

    fn allocate(&mut self, n_pages: u64) -> Option<Pgid> {
        debug_assert!(n_pages > 0, "allocate of no pages");
        let run = self.first_fit(n_pages)?;
        self.remove(run);
        if run.n_pages > n_pages {
            self.add(Run {
                start: run.start.add(n_pages),
                n_pages: run.n_pages - n_pages,
            });
        }
        Some(run.start)
    }

    fn take_run(&mut self, start: Pgid, n_pages: u64) -> bool {
        debug_assert!(n_pages > 0, "take of no pages");
        let Some((&run_start, &run_len)) = self.by_start.range(..=start).next_back() else {
            return false;
        };
        let run = Run {
            start: run_start,
            n_pages: run_len,
        };
        let Some(end) = start.0.checked_add(n_pages) else {
            return false;
        };
        if end > run.end() {
            return false;
        }
        self.remove(run);
        if run_start < start {
            self.add(Run {
                start: run_start,
                n_pages: start.0 - run_start.0,
            });
        }
        if end < run.end() {
            self.add(Run {
                start: Pgid(end),
                n_pages: run.end() - end,
            });
        }
        true
    }

    fn take_tail(&mut self, end: Pgid) -> Option<Run> {
        // Runs are maximal, so the last run is the whole tail run when it ends at `end`.
        let (&start, &n_pages) = self.by_start.iter().next_back()?;
        let run = Run { start, n_pages };
        if run.end() != end.0 {
            return None;
        }
        self.remove(run);
        Some(run)
    }

    fn insert_runs(&mut self, runs: &[Run]) {
        let mut runs = runs.iter().copied();
        let Some(mut pending) = runs.next() else {
            return;
        };
        // Coalesce adjacent input runs first (spans freed by different transactions often
        // touch), so each maximal run costs one merge.
        for run in runs {
            debug_assert!(run.start.0 >= pending.end(), "runs to insert not sorted");
            if run.start.0 == pending.end() {
                pending.n_pages += run.n_pages;
            } else {
                self.insert_merged(pending);
                pending = run;
            }
        }
        self.insert_merged(pending);
    }

    fn assign(&mut self, ids: Vec<Pgid>) {
        let mut runs: Vec<(Pgid, u64)> = Vec::new();
        for id in ids {
            match runs.last_mut() {
                Some((start, n_pages)) if start.0 + *n_pages == id.0 => *n_pages += 1,
                _ => runs.push((id, 1)),
            }
        }
        self.len = runs.iter().map(|&(_, n_pages)| n_pages as usize).sum();
        let mut classes: BTreeMap<u64, Vec<Pgid>> = BTreeMap::new();
        for &(start, n_pages) in &runs {
            classes.entry(n_pages).or_default().push(start);
        }
        // Each class's starts are ascending already, which makes building its set linear.
        self.by_len = classes
            .into_iter()
            .map(|(n_pages, starts)| (n_pages, starts.into_iter().collect()))
            .collect();
        self.by_start = runs.into_iter().collect();
    }

    #[cfg(test)]
    fn check(&self) {
        let mut previous_end: Option<u64> = None;
        let mut len = 0;
        for (&start, &n_pages) in &self.by_start {
            assert!(n_pages > 0, "empty run at {start}");
            assert!(start.0 >= 2, "meta page in a run");
            assert!(
                previous_end.is_none_or(|end| start.0 > end),
                "runs at {start} touch or overlap"
            );
            assert!(
                self.by_len
                    .get(&n_pages)
                    .is_some_and(|starts| starts.contains(&start)),
                "run at {start} missing by length"
            );
            previous_end = Some(start.0 + n_pages);
            len += n_pages as usize;
        }
        assert!(
            self.by_len.values().all(|starts| !starts.is_empty()),
            "empty length class"
        );
        assert_eq!(
            self.by_len.values().map(BTreeSet::len).sum::<usize>(),
            self.by_start.len(),
            "length index has extra runs"
        );
        assert_eq!(self.len, len, "free count out of step");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    /// The free set holding the ids in `bits` (bit i set: page i + 2 is free).
    fn set_of(bits: &[bool]) -> SpanIds {
        let mut set = SpanIds::default();
        let ids = (0..bits.len())
            .filter(|&i| bits[i])
            .map(|i| Pgid(i as u64 + 2))
            .collect();
        set.assign(ids);
        set
    }

    quickcheck! {
        /// The length index finds what a walk over every run finds (the fast path only walks a
        /// few runs, so small tests would not reach the index otherwise).
        fn length_index_is_first_fit(bits: Vec<bool>, n_pages: u8) -> bool {
            let set = set_of(&bits);
            let n_pages = u64::from(n_pages % 8) + 1;
            let walked = set
                .by_start
                .iter()
                .find(|&(_, &len)| len >= n_pages)
                .map(|(&start, &len)| Run { start, n_pages: len });
            set.check();
            set.first_fit_by_length(n_pages) == walked && set.first_fit(n_pages) == walked
        }
    }
}
