//! The free set as one sorted array of ids (bbolt's "array" freelist).
//!
//! The ids are kept in *descending* order. First fit always takes the lowest ids, and with
//! the lowest ids at the end of the vector a one-page allocation is a `pop` and a longer one
//! moves only the ids below the run it takes; bbolt gets the same effect by re-slicing.

use crate::FreelistKind;
use crate::free_set::{FreeIds, FreeIdsInner, FreeSet};
use crate::runs::Run;
use rbolt_page::Pgid;
use std::iter::Rev;
use std::slice;

/// Free ids, descending, no duplicates.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct ArrayIds {
    ids: Vec<Pgid>,
}

/// The index where the ids below `id` start in `ids` (descending, its last id below `id`).
///
/// Gallops from the end rather than bisecting the whole slice: merging released ids walks the
/// array from its low end, so the answer is near the end, and probing near it stays in cache
/// where a binary search of a large array would miss on almost every probe.
fn start_of_ids_below(ids: &[Pgid], id: Pgid) -> usize {
    debug_assert!(
        ids.last().is_some_and(|&last| last < id),
        "no id below {id}"
    );
    let len = ids.len();
    // ids[len - known..] are all below `id`; double the probe distance until one is not.
    let mut known = 1;
    let lo = loop {
        let probe = known * 2;
        if probe > len {
            break 0;
        }
        if ids[len - probe] > id {
            break len - probe;
        }
        known = probe;
    };
    lo + ids[lo..len - known].partition_point(|&old| old > id)
}

impl FreeSet for ArrayIds {
    const KIND: FreelistKind = FreelistKind::Array;

    type Iter<'a> = std::iter::Copied<Rev<slice::Iter<'a, Pgid>>>;

    #[inline]
    fn len(&self) -> usize {
        self.ids.len()
    }

    #[inline]
    fn iter(&self) -> Self::Iter<'_> {
        self.ids.iter().rev().copied()
    }

    fn free_ids(&self) -> FreeIds<'_> {
        FreeIds(FreeIdsInner::Array(self.ids.iter().rev()))
    }

    fn first_in(&self, first: Pgid, last: Pgid) -> Option<Pgid> {
        // In descending order the ids >= first come first; the last of them is the lowest.
        let at_least_first = self.ids.partition_point(|&id| id >= first);
        let lowest = *self.ids[..at_least_first].last()?;
        (lowest <= last).then_some(lowest)
    }

    fn allocate(&mut self, n_pages: u64) -> Option<Pgid> {
        debug_assert!(n_pages > 0, "allocate of no pages");
        if n_pages == 1 {
            return self.ids.pop();
        }
        let n = usize::try_from(n_pages).ok()?;
        if n > self.ids.len() {
            return None;
        }
        // A window of n descending ids is one contiguous run exactly when its ends differ by
        // n - 1. Searching from the back finds the lowest such window, and the lowest window
        // always starts a maximal run (a lower neighbour would have made an earlier window).
        let idx = self
            .ids
            .windows(n)
            .rposition(|window| window[0].0 - window[n - 1].0 == n_pages - 1)?;
        let start = self.ids[idx + n - 1];
        self.ids.drain(idx..idx + n);
        Some(start)
    }

    fn take_run(&mut self, start: Pgid, n_pages: u64) -> bool {
        debug_assert!(n_pages > 0, "take of no pages");
        let (Ok(n), Some(last)) = (usize::try_from(n_pages), start.0.checked_add(n_pages - 1))
        else {
            return false;
        };
        // Descending and distinct: the run is the n ids from where `last` stands exactly when
        // that window runs from `last` down to `start`.
        let at = self.ids.partition_point(|&id| id.0 > last);
        let whole =
            at + n <= self.ids.len() && self.ids[at].0 == last && self.ids[at + n - 1] == start;
        if whole {
            self.ids.drain(at..at + n);
        }
        whole
    }

    fn take_tail(&mut self, end: Pgid) -> Option<Run> {
        // Descending: the tail run is a prefix of the array whose ids count down from end - 1.
        let n = self
            .ids
            .iter()
            .enumerate()
            .take_while(|&(i, id)| id.0.checked_add(i as u64 + 1) == Some(end.0))
            .count();
        if n == 0 {
            return None;
        }
        let start = self.ids[n - 1];
        self.ids.drain(..n);
        Some(Run {
            start,
            n_pages: n as u64,
        })
    }

    fn insert_runs(&mut self, runs: &[Run]) {
        let added: u64 = runs.iter().map(|run| run.n_pages).sum();
        if added == 0 {
            return;
        }
        // Merge in place from the back: the vector grows at its low end, and we fill the new
        // slots with the smallest ids first, moving each block of old ids that lies below the
        // next new id with one `copy_within`. No second array is allocated.
        let old_len = self.ids.len();
        self.ids.resize(old_len + added as usize, Pgid(0));
        let mut write = self.ids.len(); // ids[write..] are final
        let mut read = old_len; // ids[..read] are the old ids not yet moved
        for run in runs {
            for id in (run.start.0..run.end()).map(Pgid) {
                if read > 0 && self.ids[read - 1] < id {
                    let below = start_of_ids_below(&self.ids[..read], id);
                    let moved = read - below;
                    self.ids.copy_within(below..read, write - moved);
                    write -= moved;
                    read = below;
                }
                debug_assert!(
                    read == 0 || self.ids[read - 1] != id,
                    "page {id} inserted while already free"
                );
                write -= 1;
                self.ids[write] = id;
            }
        }
        debug_assert_eq!(write, read, "array merge out of step");
    }

    fn assign(&mut self, mut ids: Vec<Pgid>) {
        ids.reverse();
        self.ids = ids;
    }

    #[cfg(test)]
    fn check(&self) {
        assert!(
            self.ids.windows(2).all(|pair| pair[0] > pair[1]),
            "array ids not strictly descending"
        );
        assert!(
            self.ids.last().is_none_or(|id| id.0 >= 2),
            "meta page in the array"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    quickcheck! {
        /// Galloping finds what bisecting the whole slice finds.
        fn gallop_matches_bisection(ids: Vec<u16>, id: u16) -> bool {
            let mut ids: Vec<Pgid> = ids.into_iter().map(|id| Pgid(u64::from(id))).collect();
            ids.sort_unstable_by(|a, b| b.cmp(a));
            ids.dedup();
            let id = Pgid(u64::from(id));
            ids.retain(|&old| old != id);
            if ids.last().is_none_or(|&last| last > id) {
                return true; // outside the helper's precondition
            }
            start_of_ids_below(&ids, id) == ids.partition_point(|&old| old > id)
        }
    }
}
