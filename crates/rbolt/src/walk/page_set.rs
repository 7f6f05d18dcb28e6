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

    /// Removes `pgid` (ids past the high-water mark are never in the set).
    pub(crate) fn remove(&mut self, pgid: u64) {
        if let Some(word) = self.bits.get_mut((pgid / 64) as usize) {
            *word &= !(1u64 << (pgid % 64));
        }
    }

    /// Adds every id below `end` (up to the set's high-water mark).
    pub(crate) fn fill_below(&mut self, end: u64) {
        let end = end.min(self.bits.len() as u64 * 64);
        let full = (end / 64) as usize;
        self.bits[..full].fill(u64::MAX);
        if !end.is_multiple_of(64) {
            self.bits[full] |= (1u64 << (end % 64)) - 1;
        }
    }

    /// The ids in the set, ascending.
    pub(crate) fn ids(&self) -> impl Iterator<Item = Pgid> + '_ {
        self.bits.iter().enumerate().flat_map(|(index, &word)| {
            let base = index as u64 * 64;
            let mut rest = word;
            std::iter::from_fn(move || {
                (rest != 0).then(|| {
                    let bit = u64::from(rest.trailing_zeros());
                    rest &= rest - 1;
                    Pgid(base + bit)
                })
            })
        })
    }

    pub(crate) fn contains(&self, pgid: u64) -> bool {
        self.bits
            .get((pgid / 64) as usize)
            .is_some_and(|word| word & (1u64 << (pgid % 64)) != 0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_the_members_ascending() {
        let mut set = PageSet::new(Pgid(300));
        for id in [299, 0, 64, 63, 65, 128, 7] {
            set.insert(id);
        }
        set.insert(320); // past the words for the mark: ignored
        let ids: Vec<u64> = set.ids().map(|pgid| pgid.0).collect();
        assert_eq!(ids, [0, 7, 63, 64, 65, 128, 299]);
    }

    #[test]
    fn fill_below_and_remove() {
        for end in [0u64, 1, 63, 64, 65, 130, 300, 400] {
            let mut set = PageSet::new(Pgid(300));
            set.fill_below(end);
            set.remove(5);
            set.remove(299);
            set.remove(1000);
            let ids: Vec<u64> = set.ids().map(|pgid| pgid.0).collect();
            let want: Vec<u64> = (0..end.min(320))
                .filter(|&id| id != 5 && id != 299)
                .collect();
            assert_eq!(ids, want, "end {end}");
        }
    }
}
