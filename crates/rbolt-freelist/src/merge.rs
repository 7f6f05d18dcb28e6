//! Merging two ascending id sources straight into a freelist page's id slots.

use rbolt_page::{Pgid, pgid_slots, set_pgid_slot};

/// Writes the ids of `a` and `b`, two ascending sources with no id in common, into the id slots
/// `dst` (as returned by `rbolt_page::write_freelist_header`) in ascending order, and returns
/// how many ids it wrote. It allocates nothing: this is how a freelist page is written without
/// a temporary list as long as the freelist.
///
/// # Panics
/// When the sources hold more ids than `dst` has slots, or `dst` is not a whole number of
/// slots. Debug builds also check that the ids come out strictly ascending.
pub fn merge_pgids(
    dst: &mut [u8],
    a: impl IntoIterator<Item = Pgid>,
    b: impl IntoIterator<Item = Pgid>,
) -> usize {
    let len = dst.len();
    let mut slots = pgid_slots(dst)
        .unwrap_or_else(|| panic!("merge_pgids: {len} bytes are not whole id slots"))
        .iter_mut();
    let mut a = a.into_iter().fuse();
    let mut b = b.into_iter().fuse();
    let mut next_a = a.next();
    let mut next_b = b.next();
    let mut written = 0;
    let mut previous: Option<Pgid> = None;
    let mut put = |slot: Option<&mut _>, id: Pgid| {
        debug_assert!(
            previous.is_none_or(|prev| prev < id),
            "merge_pgids: {id} after {previous:?}: sources not ascending or not disjoint"
        );
        previous = Some(id);
        set_pgid_slot(slot.expect("merge_pgids: more ids than slots"), id);
    };
    // Both sources have ids: take the smaller one each time.
    while let (Some(id_a), Some(id_b)) = (next_a, next_b) {
        if id_a < id_b {
            put(slots.next(), id_a);
            next_a = a.next();
        } else {
            put(slots.next(), id_b);
            next_b = b.next();
        }
        written += 1;
    }
    // One source is done: copy the rest of the other.
    for id in next_a.into_iter().chain(a) {
        put(slots.next(), id);
        written += 1;
    }
    for id in next_b.into_iter().chain(b) {
        put(slots.next(), id);
        written += 1;
    }
    written
}
