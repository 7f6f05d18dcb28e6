//! `PageSet`: a set of page ids below a high-water mark, one bit each — what a page walk has
//! reached, what a freelist lists.

use rbolt_page::Pgid;

/// A set of page ids below a high-water mark, one bit each.
#[derive(Clone, Debug)]
pub(crate) struct PageSet {
    bits: Vec<u64>,
}

impl PageSet {
    pub(crate) fn new(high_water: Pgid) -> PageSet {
        PageSet {
            bits: vec![0; (high_water.0 as usize).div_ceil(64)],
        }
    }

    /// Adds `pgid`; returns whether it was new. Ids past the high-water mark are ignored.
    pub(crate) fn insert(&mut self, pgid: u64) -> bool {
        let Some(word) = self.bits.get_mut((pgid / 64) as usize) else {
            return false;
        };
        let bit = 1u64 << (pgid % 64);
        let new = *word & bit == 0;
        *word |= bit;
        new
    }

    pub(crate) fn contains(&self, pgid: u64) -> bool {
        self.bits
            .get((pgid / 64) as usize)
            .is_some_and(|word| word & (1u64 << (pgid % 64)) != 0)
    }
}
