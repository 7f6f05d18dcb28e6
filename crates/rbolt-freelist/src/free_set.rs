//! What the two free-set representations have in common, and the iterator over either.

use crate::FreelistKind;
use crate::runs::{Run, RunIds};
use rbolt_page::Pgid;
use std::fmt;
use std::iter::{FusedIterator, Rev};
use std::slice;

/// A set of free page ids. Implemented by [`crate::array::ArrayIds`] and
/// [`crate::span::SpanIds`]; everything else (pending pages, allocation records, rollback) is
/// shared in [`crate::core::Core`].
pub(crate) trait FreeSet: Clone + Default + fmt::Debug + PartialEq + Eq {
    const KIND: FreelistKind;

    /// The ids in ascending order, without allocating.
    type Iter<'a>: Iterator<Item = Pgid> + ExactSizeIterator
    where
        Self: 'a;

    /// Number of free ids.
    fn len(&self) -> usize;

    /// The ids, ascending.
    fn iter(&self) -> Self::Iter<'_>;

    /// The ids, ascending, as the public iterator.
    fn free_ids(&self) -> FreeIds<'_>;

    /// The lowest free id in `first..=last`.
    fn first_in(&self, first: Pgid, last: Pgid) -> Option<Pgid>;

    /// Removes and returns the start of the lowest run of at least `n_pages` (>= 1) free ids.
    fn allocate(&mut self, n_pages: u64) -> Option<Pgid>;

    /// Removes the `n_pages` (>= 1) ids from `start` on when every one of them is free;
    /// returns whether it did (nothing changes when not).
    fn take_run(&mut self, start: Pgid, n_pages: u64) -> bool;

    /// Removes and returns the run of free ids that ends just below `end` (its last id is
    /// `end - 1`), as long as it goes: what lies at the top of the file when `end` is the
    /// high-water mark. `None` when `end - 1` is not free.
    fn take_tail(&mut self, end: Pgid) -> Option<Run>;

    /// Adds `runs`: sorted by start, disjoint from each other and from the set (they may be
    /// adjacent).
    fn insert_runs(&mut self, runs: &[Run]);

    /// Replaces the set with `ids` (strictly ascending), reusing `ids`' memory where it can.
    fn assign(&mut self, ids: Vec<Pgid>);

    /// Panics when the representation is inconsistent (tests only).
    #[cfg(test)]
    fn check(&self);
}

/// The free ids of a freelist, ascending. See [`crate::Freelist::free_ids`].
#[derive(Clone, Debug)]
pub struct FreeIds<'a>(pub(crate) FreeIdsInner<'a>);

#[derive(Clone, Debug)]
pub(crate) enum FreeIdsInner<'a> {
    /// The array keeps its ids descending.
    Array(Rev<slice::Iter<'a, Pgid>>),
    Span(RunIds<'a, u64>),
}

impl Iterator for FreeIds<'_> {
    type Item = Pgid;

    #[inline]
    fn next(&mut self) -> Option<Pgid> {
        match &mut self.0 {
            FreeIdsInner::Array(ids) => ids.next().copied(),
            FreeIdsInner::Span(ids) => ids.next(),
        }
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        match &self.0 {
            FreeIdsInner::Array(ids) => ids.size_hint(),
            FreeIdsInner::Span(ids) => ids.size_hint(),
        }
    }
}

impl ExactSizeIterator for FreeIds<'_> {}
impl FusedIterator for FreeIds<'_> {}
