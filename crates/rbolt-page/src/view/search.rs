//! Binary search over sorted keys, with no closure per comparison.
//!
//! The keys come from anything that can hand out key `i`: a leaf or branch page, or an array
//! in memory. Results match `slice::binary_search_by` and `slice::partition_point` on sorted
//! keys without duplicates (the only keys a valid tree holds).

use crate::error::Result;
use crate::view::{BranchPage, LeafPage};
use core::cmp::Ordering;

/// Something that holds sorted keys, addressable by index.
pub trait KeySource {
    /// Number of keys.
    fn key_count(&self) -> usize;
    /// Key `index` (`index < key_count()`).
    fn key_at(&self, index: usize) -> Result<&[u8]>;
}

/// Leaf and branch pages list their keys alike: `len()` of them, each read by `key(index)`.
macro_rules! key_source_of_page {
    ($($page:ident),*) => {$(
        impl KeySource for $page<'_> {
            #[inline]
            fn key_count(&self) -> usize {
                self.len()
            }
            #[inline]
            fn key_at(&self, index: usize) -> Result<&[u8]> {
                self.key(index)
            }
        }
    )*};
}

key_source_of_page!(LeafPage, BranchPage);

impl<T: AsRef<[u8]>> KeySource for [T] {
    #[inline]
    fn key_count(&self) -> usize {
        self.len()
    }
    #[inline]
    fn key_at(&self, index: usize) -> Result<&[u8]> {
        match self.get(index) {
            Some(key) => Ok(key.as_ref()),
            None => Err(crate::Corruption::new(
                crate::Pgid(0),
                crate::Reason::Other("key index out of range"),
            )),
        }
    }
}

/// Keys at most this long are compared eight bytes at a time in registers; longer ones go
/// to `memcmp`, which wins once there is enough to compare.
const INLINE_COMPARE_MAX: usize = 32;

/// Bytewise order of two keys (the order of `<[u8]>::cmp`), fast for short keys: their
/// bytes are compared as big-endian words, without a call to `memcmp`.
#[inline]
pub fn compare_keys(a: &[u8], b: &[u8]) -> Ordering {
    let n = a.len().min(b.len());
    if n > INLINE_COMPARE_MAX {
        return a.cmp(b);
    }
    let (mut a_rest, mut b_rest) = (&a[..n], &b[..n]);
    while let (Some((a_word, a_tail)), Some((b_word, b_tail))) = (
        a_rest.split_first_chunk::<8>(),
        b_rest.split_first_chunk::<8>(),
    ) {
        let (x, y) = (u64::from_be_bytes(*a_word), u64::from_be_bytes(*b_word));
        if x != y {
            return x.cmp(&y);
        }
        a_rest = a_tail;
        b_rest = b_tail;
    }
    for (x, y) in a_rest.iter().zip(b_rest) {
        if x != y {
            return x.cmp(y);
        }
    }
    a.len().cmp(&b.len())
}

/// The first eight bytes of `key` as a big-endian number, zero-padded: when two keys'
/// prefixes differ, they order the keys; when equal, the keys must be compared whole.
#[inline]
pub fn key_prefix(key: &[u8]) -> u64 {
    match key.first_chunk::<8>() {
        Some(word) => u64::from_be_bytes(*word),
        None => {
            let mut word = [0u8; 8];
            word[..key.len()].copy_from_slice(key);
            u64::from_be_bytes(word)
        }
    }
}

/// Exact-match search that stops at the first equal key: `Ok(Ok(index))` when `key` is there,
/// `Ok(Err(index))` with the index it would be inserted at otherwise.
#[inline]
pub fn search<K: KeySource + ?Sized>(
    keys: &K,
    key: &[u8],
) -> Result<core::result::Result<usize, usize>> {
    let mut low = 0;
    let mut high = keys.key_count();
    while low < high {
        let mid = low + (high - low) / 2;
        match compare_keys(keys.key_at(mid)?, key) {
            Ordering::Less => low = mid + 1,
            Ordering::Greater => high = mid,
            Ordering::Equal => return Ok(Ok(mid)),
        }
    }
    Ok(Err(low))
}

/// The index of the first key not less than `key` (`key_count()` when all are less).
#[inline]
pub fn lower_bound<K: KeySource + ?Sized>(keys: &K, key: &[u8]) -> Result<usize> {
    let mut low = 0;
    let mut high = keys.key_count();
    while low < high {
        let mid = low + (high - low) / 2;
        if compare_keys(keys.key_at(mid)?, key) == Ordering::Less {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    Ok(low)
}

/// In a branch, the index of the child whose subtree would hold `key`: the last separator not
/// greater than `key`, or the first child when `key` sorts before every separator.
#[inline]
pub fn child_index<K: KeySource + ?Sized>(keys: &K, key: &[u8]) -> Result<usize> {
    Ok(match search(keys, key)? {
        Ok(index) => index,
        Err(index) => index.saturating_sub(1),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use quickcheck::quickcheck;

    fn sorted_unique(mut keys: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
        keys.sort();
        keys.dedup();
        keys
    }

    quickcheck! {
        fn compare_keys_matches_slice_order(a: Vec<u8>, b: Vec<u8>) -> bool {
            compare_keys(&a, &b) == a.cmp(&b) && compare_keys(&b, &a) == b.cmp(&a)
        }

        fn compare_keys_matches_on_shared_prefixes(common: Vec<u8>, a: Vec<u8>, b: Vec<u8>) -> bool {
            let a = [common.clone(), a].concat();
            let b = [common, b].concat();
            compare_keys(&a, &b) == a.cmp(&b)
        }

        fn differing_prefixes_order_keys(a: Vec<u8>, b: Vec<u8>) -> bool {
            let (pa, pb) = (key_prefix(&a), key_prefix(&b));
            pa == pb || pa.cmp(&pb) == a.cmp(&b)
        }

        fn search_matches_std(keys: Vec<Vec<u8>>, probe: Vec<u8>) -> bool {
            let keys = sorted_unique(keys);
            let ours = search(keys.as_slice(), &probe).unwrap();
            let std = keys.binary_search_by(|k| k.as_slice().cmp(&probe));
            ours == std
        }

        fn search_finds_every_present_key(keys: Vec<Vec<u8>>) -> bool {
            let keys = sorted_unique(keys);
            keys.iter().enumerate().all(|(i, k)| search(keys.as_slice(), k).unwrap() == Ok(i))
        }

        fn lower_bound_matches_partition_point(keys: Vec<Vec<u8>>, probe: Vec<u8>) -> bool {
            let keys = sorted_unique(keys);
            lower_bound(keys.as_slice(), &probe).unwrap()
                == keys.partition_point(|k| k.as_slice() < probe.as_slice())
        }

        fn child_index_is_last_not_greater(keys: Vec<Vec<u8>>, probe: Vec<u8>) -> bool {
            let keys = sorted_unique(keys);
            let expected = keys
                .iter()
                .rposition(|k| k.as_slice() <= probe.as_slice())
                .unwrap_or(0);
            child_index(keys.as_slice(), &probe).unwrap() == expected
        }
    }

    #[test]
    fn empty_arrays() {
        let keys: [&[u8]; 0] = [];
        assert_eq!(search(&keys[..], b"a").unwrap(), Err(0));
        assert_eq!(lower_bound(&keys[..], b"a").unwrap(), 0);
        assert_eq!(child_index(&keys[..], b"a").unwrap(), 0);
    }
}
