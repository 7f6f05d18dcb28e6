//! A set of page ids, one bit each: the freelist's pending pages and the writer's checked
//! pages are kept in one.

use crate::types::Pgid;
use std::collections::{BTreeMap, btree_map};
use std::iter::FusedIterator;

/// A set of page ids as a bitmap of 64-id words: a vector of them for the ids below
/// [`DENSE_WORDS_MAX`] words (grown as ids come, so memory follows the highest id held: 16
/// KiB for a file of a million pages), and an ordered map of the nonzero words above, so
/// that an id far past any file costs a word, not the words before it. Adding, removing and
/// asking about a run of ids then costs a few word operations, where an ordered map of the
/// ids costs a search and, now and then, an allocation; listing the ids in order walks the
/// words.
#[derive(Clone, Debug, Default)]
pub struct PageSet {
    dense: Vec<u64>,
    sparse: BTreeMap<u64, u64>,
}

/// Words the vector of a [`PageSet`] grows to at most: 8 MiB, for the first 2^26 page ids
/// (256 GiB of 4 KiB pages).
const DENSE_WORDS_MAX: u64 = 1 << 20;

impl PartialEq for PageSet {
    /// Equal when they hold the same ids (whatever zero words either vector ends with).
    fn eq(&self, other: &PageSet) -> bool {
        let (short, long) = if self.dense.len() <= other.dense.len() {
            (&self.dense, &other.dense)
        } else {
            (&other.dense, &self.dense)
        };
        long[..short.len()] == short[..]
            && long[short.len()..].iter().all(|&w| w == 0)
            && self.sparse == other.sparse
    }
}

impl Eq for PageSet {}

/// The words a run of `n` ids from `start` touches, each with the mask of its bits in the run.
fn word_masks(start: u64, n: u64) -> impl Iterator<Item = (u64, u64)> {
    let end = start.saturating_add(n);
    let words = if end > start {
        start / 64..(end - 1) / 64 + 1
    } else {
        0..0
    };
    words.map(move |word| (word, mask_within(word, start, end)))
}

/// The bits of word `word` for the ids in `from..end`.
#[inline]
fn mask_within(word: u64, from: u64, end: u64) -> u64 {
    let base = word * 64;
    let low = from.saturating_sub(base).min(64);
    let high = end.saturating_sub(base).min(64);
    if high <= low {
        0
    } else if high - low == 64 {
        !0
    } else {
        ((1u64 << (high - low)) - 1) << low
    }
}

impl PageSet {
    /// The word `word`, for editing (made, as a zero, if not there).
    #[inline]
    fn word_mut(&mut self, word: u64) -> &mut u64 {
        if word < DENSE_WORDS_MAX {
            let index = word as usize;
            if index >= self.dense.len() {
                self.dense.resize(index + 1, 0);
            }
            &mut self.dense[index]
        } else {
            self.sparse.entry(word).or_insert(0)
        }
    }

    /// The word `word` (zero if not there).
    #[inline]
    fn word(&self, word: u64) -> u64 {
        if word < DENSE_WORDS_MAX {
            self.dense.get(word as usize).copied().unwrap_or(0)
        } else {
            self.sparse.get(&word).copied().unwrap_or(0)
        }
    }

    /// Adds the `n` ids from `start` on (those already in stay in).
    pub fn insert_run(&mut self, start: Pgid, n: u64) {
        if n == 1 {
            // The common case, a single page: one bit, no masks.
            *self.word_mut(start.0 / 64) |= 1 << (start.0 % 64);
            return;
        }
        for (word, mask) in word_masks(start.0, n) {
            *self.word_mut(word) |= mask;
        }
    }

    /// Removes the `n` ids from `start` on (`u64::MAX`: every id from `start` on); those
    /// not in are ignored. Touches only the words the set holds.
    pub fn remove_run(&mut self, start: Pgid, n: u64) {
        let end = start.0.saturating_add(n);
        if end <= start.0 {
            return;
        }
        let (first_word, last_word) = (start.0 / 64, (end - 1) / 64);
        if n == 1 && first_word < self.dense.len() as u64 {
            // The common case, a single page of the dense words: one bit, no masks.
            self.dense[first_word as usize] &= !(1 << (start.0 % 64));
            return;
        }
        let dense_end = (self.dense.len() as u64).min(last_word + 1);
        for word in first_word..dense_end {
            self.dense[word as usize] &= !mask_within(word, start.0, end);
        }
        if last_word >= DENSE_WORDS_MAX {
            let sparse_first = first_word.max(DENSE_WORDS_MAX);
            for (&word, bits) in self.sparse.range_mut(sparse_first..=last_word) {
                *bits &= !mask_within(word, start.0, end);
            }
            self.sparse.retain(|_, bits| *bits != 0);
        }
    }

    /// The lowest id in the set within `first..=last`.
    pub fn first_in(&self, first: Pgid, last: Pgid) -> Option<Pgid> {
        if last < first {
            return None;
        }
        if last == first {
            // The common case, a single page: one bit.
            return self.contains(first).then_some(first);
        }
        let end = last.0.saturating_add(1);
        let (first_word, last_word) = (first.0 / 64, last.0 / 64);
        let found = |word: u64, bits: u64| {
            let bits = bits & mask_within(word, first.0, end);
            (bits != 0).then(|| Pgid(word * 64 + u64::from(bits.trailing_zeros())))
        };
        let dense_end = (self.dense.len() as u64).min(last_word + 1);
        for word in first_word..dense_end {
            if let Some(pgid) = found(word, self.dense[word as usize]) {
                return Some(pgid);
            }
        }
        if last_word < DENSE_WORDS_MAX {
            return None;
        }
        let sparse_first = first_word.max(DENSE_WORDS_MAX);
        self.sparse
            .range(sparse_first..=last_word)
            .find_map(|(&word, &bits)| found(word, bits))
    }

    /// Whether `pgid` is in the set.
    #[inline]
    pub fn contains(&self, pgid: Pgid) -> bool {
        self.word(pgid.0 / 64) & (1 << (pgid.0 % 64)) != 0
    }

    /// How many ids the set holds (a walk of its words).
    pub fn count(&self) -> usize {
        let ones = |w: &u64| w.count_ones() as usize;
        self.dense.iter().map(ones).sum::<usize>() + self.sparse.values().map(ones).sum::<usize>()
    }

    /// The ids, ascending; `len` is how many there are (what the iterator's length says).
    pub fn iter(&self, len: usize) -> PageSetIds<'_> {
        PageSetIds {
            dense: self.dense.iter().enumerate(),
            sparse: self.sparse.iter(),
            word: 0,
            bits: 0,
            remaining: len,
        }
    }
}

/// The ids of a [`PageSet`], ascending.
#[derive(Clone, Debug)]
pub struct PageSetIds<'a> {
    dense: std::iter::Enumerate<std::slice::Iter<'a, u64>>,
    sparse: btree_map::Iter<'a, u64, u64>,
    /// The word `bits` is what is left of.
    word: u64,
    bits: u64,
    remaining: usize,
}

impl Iterator for PageSetIds<'_> {
    type Item = Pgid;

    #[inline]
    fn next(&mut self) -> Option<Pgid> {
        while self.bits == 0 {
            (self.word, self.bits) = match self.dense.next() {
                Some((word, &bits)) => (word as u64, bits),
                None => {
                    let (&word, &bits) = self.sparse.next()?;
                    (word, bits)
                }
            };
        }
        let bit = self.bits.trailing_zeros();
        self.bits &= self.bits - 1;
        self.remaining = self.remaining.saturating_sub(1);
        Some(Pgid(self.word * 64 + u64::from(bit)))
    }

    #[inline]
    fn size_hint(&self) -> (usize, Option<usize>) {
        (self.remaining, Some(self.remaining))
    }
}

impl ExactSizeIterator for PageSetIds<'_> {}
impl FusedIterator for PageSetIds<'_> {}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    #[test]
    fn runs_in_and_out_as_a_set_of_ids_holds_them() {
        // Ids in the vector's words, and ids on both sides of where the map's start.
        for base in [0, DENSE_WORDS_MAX * 64 - 400] {
            random_runs(base);
        }
    }

    fn random_runs(base: u64) {
        let mut bits = PageSet::default();
        let mut model = BTreeSet::new();
        let mut rng = rbolt_testkit::rng::Rng::new(0x2545_F491_4F6C_DD1D);
        for _ in 0..4000 {
            let state = rng.next_u64();
            let start = base + 2 + state % 700;
            let n = 1 + (state >> 20) % if state.is_multiple_of(7) { 150 } else { 3 };
            let run: Vec<u64> = (start..start + n).collect();
            if run.iter().all(|id| !model.contains(id)) {
                bits.insert_run(Pgid(start), n);
                model.extend(run);
            } else if run.iter().all(|id| model.contains(id)) {
                bits.remove_run(Pgid(start), n);
                for id in run {
                    model.remove(&id);
                }
            }
            let first = base + state % 800;
            let last = first + (state >> 40) % 90;
            assert_eq!(
                bits.first_in(Pgid(first), Pgid(last)).map(|p| p.0),
                model.range(first..=last).next().copied()
            );
            assert_eq!(bits.contains(Pgid(start)), model.contains(&start));
        }
        let ids: Vec<u64> = bits.iter(model.len()).map(|p| p.0).collect();
        assert_eq!(ids, model.iter().copied().collect::<Vec<_>>());
        assert_eq!(bits.count(), model.len());
        assert_eq!(bits.iter(model.len()).len(), model.len());
        // Equality is of the ids, not of the words.
        let mut other = PageSet::default();
        for &id in &model {
            other.insert_run(Pgid(id), 1);
        }
        other.insert_run(Pgid(5000), 1);
        other.remove_run(Pgid(5000), 1);
        assert_eq!(other, bits);
        for &id in &model {
            other.remove_run(Pgid(id), 1);
        }
        assert_eq!(other, PageSet::default());
        // Ids far apart take a word each, not the words between.
        let mut far = PageSet::default();
        far.insert_run(Pgid(u64::MAX - 70), 70);
        far.insert_run(Pgid(3), 1);
        assert_eq!((far.dense.len(), far.sparse.len()), (1, 2));
        assert_eq!(
            far.first_in(Pgid(4), Pgid(u64::MAX)),
            Some(Pgid(u64::MAX - 70))
        );
        assert_eq!(far.iter(71).count(), 71);
        // Removing every id from one on touches only the words held, and ids not held are
        // ignored.
        far.remove_run(Pgid(4), u64::MAX);
        assert_eq!((far.count(), far.sparse.len()), (1, 0));
        far.remove_run(Pgid(100), 5);
        assert!(far.contains(Pgid(3)));
    }
}
