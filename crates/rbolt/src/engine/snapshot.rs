//! The committed state readers start from: a [`Snapshot`] (the newest meta and a mapping that
//! covers it), the pages it reaches, and how long a mapping is made for a file of a given
//! length.

use std::sync::Arc;

use rbolt_btree::Pages;
use rbolt_page::{Meta, Pgid};

use crate::storage::Mapping;

/// The smallest mapping (bbolt's: 32 KiB); mappings double from here up to 1 GiB.
const MAP_SIZE_MIN: u64 = 32 * 1024;
/// Past 1 GiB, mappings grow in steps of this many bytes.
const MAP_STEP_MAX: u64 = 1 << 30;

/// What readers see: the newest committed meta and a mapping that covers it.
#[derive(Clone, Debug)]
pub(crate) struct Snapshot {
    pub(crate) meta: Meta,
    pub(crate) map: Arc<Mapping>,
}

/// The pages of a snapshot: the mapping up to its high-water mark.
pub(crate) fn pages_of(map: &Mapping, page_size: usize, high_water: Pgid) -> Pages<'_> {
    Pages::new(map, page_size, high_water).expect("the mapping covers the high-water mark")
}

/// The mapping length for `needed` bytes (a whole number of pages): powers of two from 32 KiB
/// to 1 GiB, then 1 GiB steps, so that growth remaps rarely. `None` when that does not fit in
/// the address space. (Only `needed` bytes are ever read; the rest is reserved address space,
/// so the length need not be a multiple of the page size.)
pub(crate) fn map_size(needed: u64) -> Option<usize> {
    let needed = needed.max(MAP_SIZE_MIN);
    let size = if needed <= MAP_STEP_MAX {
        needed.next_power_of_two()
    } else {
        needed.div_ceil(MAP_STEP_MAX).checked_mul(MAP_STEP_MAX)?
    };
    // Half the address space at most: mmap cannot reserve more, and offsets stay in `isize`.
    usize::try_from(size)
        .ok()
        .filter(|&size| size <= isize::MAX as usize / 2)
}
