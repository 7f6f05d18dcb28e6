//! Runs of consecutive page ids, and the iterator that expands ordered runs into ids.

use rbolt_page::Pgid;
use std::collections::btree_map;
use std::iter::FusedIterator;

/// `n_pages` consecutive page ids starting at `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) struct Run {
    pub(crate) start: Pgid,
    pub(crate) n_pages: u64,
}

impl Run {
    /// The id just past the run.
    #[inline]
    pub(crate) fn end(self) -> u64 {
        self.start.0 + self.n_pages
    }
}

/// A map value that says how many pages the run starting at its key has.
pub(crate) trait RunLen {
    fn n_pages(&self) -> u64;
}

impl RunLen for u64 {
    #[inline]
    fn n_pages(&self) -> u64 {
        *self
    }
}

/// The ids of the runs of a `BTreeMap<start, run>`, ascending. Walking the map directly (rather
/// than collecting ids first) is what keeps the freelist write free of allocations.
#[derive(Clone, Debug)]
pub(crate) struct RunIds<'a, V> {
    runs: btree_map::Iter<'a, Pgid, V>,
    next: u64,
    end: u64,
    remaining: usize,
}

impl<'a, V: RunLen> RunIds<'a, V> {
    /// The ids of `runs`, which hold `len` ids in all.
    pub(crate) fn new(runs: btree_map::Iter<'a, Pgid, V>, len: usize) -> RunIds<'a, V> {
        RunIds {
            runs,
            next: 0,
            end: 0,
            remaining: len,
        }
    }
}

impl<V: RunLen> Iterator for RunIds<'_, V> {
    type Item = Pgid;

    #[inline]
    fn next(&mut self) -> Option<Pgid> {
        if self.next == self.end {
            let (start, run) = self.runs.next()?;
            debug_assert!(run.n_pages() > 0, "empty run at {start}");
            self.next = start.0;
            self.end = start.0 + run.n_pages();
        }
        let id = self.next;
        self.next += 1;
        self.remaining -= 1;
        Some(Pgid(id))
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl<V: RunLen> ExactSizeIterator for RunIds<'_, V> {}
impl<V: RunLen> FusedIterator for RunIds<'_, V> {}
