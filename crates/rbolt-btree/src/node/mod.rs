//! An edited node: a private copy of a page image, edited in place, with what the tree keeps
//! beside it.
//!
//! The image and every edit of it are rbolt-page's [`PageMut`] (its packed and gap layouts,
//! insert, remove, repack); a node is written at commit as its image stands, so spill neither
//! decodes nor encodes it, and what a put wrote into the image is the only copy of that pair
//! before the file. This file keeps what belongs to the tree: the first eight bytes of every
//! key for the search, the page the node came from, the flags rebalance and split read, the
//! buffers it takes from the [`Arena`] as it grows and packs, and the copy of a page, checked
//! whole by rbolt-page's strict check before anything edits it.
//!
//! A branch node's child is a page id, or a node of the same tree: `NODE_TAG | id` in the
//! element's page-id field until spill writes the child and puts its page id there.

pub(crate) mod arena;

use crate::node::arena::Arena;
use rbolt_page::{
    NewEntry, PageMut, Pgid, Result, TreePageShape, check_tree_page, compare_keys, key_prefix,
    packed_data_end, page_data_end, pages_for, repack_into, reread_checked_tree_page,
};
use std::cell::{Cell, RefCell};
use std::cmp::Ordering;
use std::ops::Range;

/// Index of a node in its tree.
pub(crate) type NodeId = u32;

/// Bit 63 of a branch element's page-id field: the child is node `field & !NODE_TAG`.
pub(crate) const NODE_TAG: u64 = 1 << 63;

/// What a child field with `NODE_TAG` set becomes when a page is copied into a node: such a
/// value is past the end of every file, so the page was corrupt; this one is past the end of
/// every file too, and is not a node.
pub(crate) const CHILD_SANITISED: u64 = u64::MAX >> 1;

/// A new node's prefix array starts with room for a page's bytes divided by this (32 keys in
/// a 4 KiB page, about a page of 16-byte keys with 100-byte values).
const PREFIXES_RESERVE_DIVISOR: usize = 128;

/// A node copied from a page builds its prefix array on its this-many-th search: a node that
/// a transaction searches once or twice (most of a small transaction's) never pays a pass
/// over all its keys for it, and one searched often (a bulk load's) soon has it.
const PREFIXES_AFTER_SEARCHES: u32 = 4;

/// The first eight bytes of every key of a node (`key_prefix`), in element order, once built:
/// a search compares these and reads a key only on a tie, where reading the keys themselves
/// costs two dependent loads a probe (the element, then its key), each a cache miss in a
/// load. Built by the node's [`PREFIXES_AFTER_SEARCHES`]th search (a search takes `&self`,
/// hence the cells), then kept up by every edit.
#[derive(Debug, Default)]
struct Prefixes {
    list: RefCell<Vec<u64>>,
    built: Cell<bool>,
    /// Searches made before the list was built.
    searches: Cell<u32>,
}

impl Prefixes {
    /// `list` (emptied), to be built when a search needs it, or already built.
    fn new(list: Vec<u64>, built: bool) -> Prefixes {
        Prefixes {
            list: RefCell::new(list),
            built: Cell::new(built),
            searches: Cell::new(0),
        }
    }

    /// The list, if built, to keep up with an edit.
    #[inline]
    fn built_mut(&mut self) -> Option<&mut Vec<u64>> {
        if self.built.get() {
            Some(self.list.get_mut())
        } else {
            None
        }
    }
}

/// An editable node (see the module documentation).
#[derive(Debug)]
pub(crate) struct Node {
    /// The image, in a buffer of a whole number of pages (detached for a node that is gone).
    image: PageMut<Box<[u8]>>,
    /// The keys' prefixes (see [`Prefixes`]).
    prefixes: Prefixes,
    /// The committed page the node was copied from (0 for a new node): freed when the node
    /// is written elsewhere or removed.
    pub pgid: Pgid,
    /// The overflow count of that page.
    pub overflow: u32,
    /// Entries were deleted: check at commit whether to merge with a sibling.
    pub unbalanced: bool,
    /// The last insert went after the last entry: the node is filled in ascending order, so
    /// when it overflows it is split at the end (the append point) rather than the middle.
    pub appended: bool,
}

impl Node {
    fn with_image(image: PageMut<Box<[u8]>>, prefixes: Prefixes, pgid: Pgid) -> Node {
        Node {
            image,
            prefixes,
            pgid,
            overflow: 0,
            unbalanced: false,
            appended: false,
        }
    }

    /// An empty leaf or branch in a buffer of `len` bytes (a whole number of pages) from
    /// `arena`.
    pub fn empty(arena: &mut Arena, len: usize, leaf: bool) -> Node {
        let image = PageMut::empty(arena.take(len), leaf);
        let mut prefixes = arena.take_prefixes();
        // Room for a page of average entries, so that the array does not grow one by one.
        prefixes.reserve(len / PREFIXES_RESERVE_DIVISOR);
        Node::with_image(image, Prefixes::new(prefixes, true), Pgid(0))
    }

    /// A node that was merged away or removed: it has no image.
    pub fn gone() -> Node {
        Node::with_image(PageMut::detached(), Prefixes::default(), Pgid(0))
    }

    /// Whether the node was merged away or removed.
    #[inline]
    pub fn is_gone(&self) -> bool {
        self.image.is_detached()
    }

    /// Takes the node's buffer (leaving it gone), to write; its prefix array goes back to
    /// `arena`.
    pub fn take_buffer(&mut self, arena: &mut Arena) -> Box<[u8]> {
        arena.give_prefixes(std::mem::take(self.prefixes.list.get_mut()));
        self.image.take_buffer()
    }

    /// Gives the node's memory back to `arena`, leaving it gone.
    pub fn recycle(&mut self, arena: &mut Arena) {
        let buf = self.take_buffer(arena);
        arena.give(buf);
    }

    /// A copy of the leaf or branch page `bytes` (a page span, or an inline page), checked
    /// whole first ([`check_tree_page`]). Errors name `owner`. `source` is the page to free
    /// when the node is written (0 for an inline page).
    pub fn from_page(bytes: &[u8], owner: Pgid, source: Pgid, arena: &mut Arena) -> Result<Node> {
        Node::copy_checked(bytes, owner, source, arena).map(|(node, _)| node)
    }

    /// A copy of the page at `pgid` in the file (its span `bytes`), as [`Node::from_page`]
    /// makes it, but checked whole only the first time: a single page that passes as it is
    /// (packed, no child to sanitise) is marked in `arena` ([`Arena::mark_checked`]), and a
    /// marked page is read again with only its bounds checked ([`reread_checked_tree_page`]),
    /// its key prefixes left to its searches (see `Prefixes`). A marked page that fails even that
    /// loses its mark and gets the whole check, whose error it returns.
    pub fn from_file_page(bytes: &[u8], pgid: Pgid, arena: &mut Arena) -> Result<Node> {
        let page_size = arena.page_size();
        if bytes.len() != page_size {
            return Node::from_page(bytes, pgid, pgid, arena);
        }
        if arena.is_checked(pgid) {
            // Only the data is copied, not the free space after it (the reread refuses a copy
            // whose entries do not end exactly there).
            let buf = arena.take_with(page_size, &bytes[..packed_data_end(bytes)]);
            // The prefixes wait for the node's searches (see `Prefixes`).
            if let Some(shape) = reread_checked_tree_page(&buf) {
                let prefixes = Prefixes::new(arena.take_prefixes(), false);
                // A marked page has no child to sanitise: none is marked that had one.
                return Ok(Node::from_checked(buf, &shape, prefixes, pgid, false).0);
            }
            arena.give(buf);
            arena.forget_checked(pgid, 1);
        }
        let (node, as_is) = Node::copy_checked(bytes, pgid, pgid, arena)?;
        if as_is {
            arena.mark_checked(pgid);
        }
        Ok(node)
    }

    /// [`Node::from_page`], and whether the copy is the page as it is: packed, not laid out
    /// anew, and without a child field to sanitise.
    fn copy_checked(
        bytes: &[u8],
        owner: Pgid,
        source: Pgid,
        arena: &mut Arena,
    ) -> Result<(Node, bool)> {
        // Copy first, then check the copy: one sequential read of the mapped page, which the
        // hardware streams, where checking it in place costs a cache miss for every key. Only
        // the bytes up to the end of the data are copied, not the free space after it.
        let page_size = arena.page_size();
        let len = bytes.len();
        let end = page_data_end(bytes);
        let mut buf = arena.take_with(pages_for(len, page_size) * page_size, &bytes[..end]);
        let mut prefixes = arena.take_prefixes();
        // Checked as `len` bytes: an element pointing past `end` points past the span too.
        let shape = match check_tree_page(&buf[..len], owner, |prefix| prefixes.push(prefix)) {
            Ok(shape) => shape,
            Err(error) => {
                arena.give(buf);
                arena.give_prefixes(prefixes);
                return Err(error);
            }
        };
        let packed = shape.is_packed();
        if !packed {
            // Valid, but not how bbolt lays a page out: lay it out anew.
            let relaid_len = pages_for(shape.packed_len(), page_size) * page_size;
            let mut relaid = arena.take(relaid_len);
            repack_into(&buf[..len], &shape, &mut relaid);
            arena.give(std::mem::replace(&mut buf, relaid));
        }
        let prefixes = Prefixes::new(prefixes, true);
        let (node, sanitised) = Node::from_checked(buf, &shape, prefixes, source, true);
        Ok((node, packed && !sanitised))
    }

    /// The node of the checked packed image in `buf` (`shape`, its keys' `prefixes`), to be
    /// freed as `source` when written, with its children sanitised if `sanitise` (a child
    /// field with [`NODE_TAG`] becomes [`CHILD_SANITISED`]); and whether one was.
    fn from_checked(
        buf: Box<[u8]>,
        shape: &TreePageShape,
        prefixes: Prefixes,
        source: Pgid,
        sanitise: bool,
    ) -> (Node, bool) {
        let mut image = PageMut::from_checked(buf, shape);
        image.write_header(source, 0);
        let mut sanitised = false;
        if sanitise && !shape.is_leaf() {
            for index in 0..shape.len() {
                if image.child(index) & NODE_TAG != 0 {
                    image.set_child(index, CHILD_SANITISED);
                    sanitised = true;
                }
            }
        }
        debug_assert!(
            shape.is_leaf() || (0..shape.len()).all(|index| image.child(index) & NODE_TAG == 0),
            "a copied branch points at a node"
        );
        let node = Node::with_image(image, prefixes, source);
        node.debug_check();
        (node, sanitised)
    }

    // ---- Reading -------------------------------------------------------------------------

    /// Number of entries.
    #[inline]
    pub fn count(&self) -> usize {
        self.image.count()
    }

    #[inline]
    pub fn is_leaf(&self) -> bool {
        self.image.is_leaf()
    }

    /// Bytes of the image as a packed page.
    #[inline]
    pub fn used(&self) -> usize {
        self.image.used()
    }

    /// Bytes of its entries, without the page header (see [`PageMut::entries_len`]).
    #[inline]
    pub fn entries_len(&self) -> usize {
        self.image.entries_len()
    }

    /// The image, read as a page.
    #[inline]
    pub fn image(&self) -> &PageMut<Box<[u8]>> {
        &self.image
    }

    /// Whether the image is packed (as it is written).
    #[inline]
    pub fn is_packed(&self) -> bool {
        self.image.is_packed()
    }

    /// Bytes entry `index` takes in a page.
    #[inline]
    pub fn entry_size(&self, index: usize) -> usize {
        self.image.entry_size(index)
    }

    #[inline]
    pub fn key(&self, index: usize) -> &[u8] {
        self.image.key(index)
    }

    #[inline]
    pub fn value(&self, index: usize) -> &[u8] {
        self.image.value(index)
    }

    /// A leaf entry's flags.
    #[inline]
    pub fn flags(&self, index: usize) -> u32 {
        self.image.flags(index)
    }

    /// A branch entry's child: a page id, or `NODE_TAG | id`.
    #[inline]
    pub fn child(&self, index: usize) -> u64 {
        self.image.child(index)
    }

    /// Whether any entry holds a bucket.
    pub fn has_buckets(&self) -> bool {
        self.image.has_buckets()
    }

    /// Whether `extra` more bytes in `extra_count` more entries keep the image within one
    /// page of `page_size` bytes (and within what a page header can count).
    #[inline]
    pub fn fits(&self, extra: usize, extra_count: usize, page_size: usize) -> bool {
        self.image.fits(extra, extra_count, page_size)
    }

    /// Exact-match search: `Ok(index)` of `key`, or `Err(index)` where it would go.
    #[inline]
    pub fn search(&self, key: &[u8]) -> core::result::Result<usize, usize> {
        self.search_from(0, key)
    }

    /// `search` over the entries from `low` on, by prefixes first once they are built.
    #[inline]
    fn search_from(&self, mut low: usize, key: &[u8]) -> core::result::Result<usize, usize> {
        if !self.prefixes.built.get() {
            let searches = self.prefixes.searches.get() + 1;
            if searches < PREFIXES_AFTER_SEARCHES {
                self.prefixes.searches.set(searches);
                return self.search_keys(low, key);
            }
            self.build_prefixes();
        }
        let prefixes = self.prefixes.list.borrow();
        let prefix = key_prefix(key);
        let mut high = prefixes.len();
        while low < high {
            let mid = low + (high - low) / 2;
            let order = prefixes[mid]
                .cmp(&prefix)
                .then_with(|| compare_keys(self.key(mid), key));
            match order {
                Ordering::Less => low = mid + 1,
                Ordering::Greater => high = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        Err(low)
    }

    /// `search_from` by the keys themselves.
    fn search_keys(&self, mut low: usize, key: &[u8]) -> core::result::Result<usize, usize> {
        let mut high = self.count();
        while low < high {
            let mid = low + (high - low) / 2;
            match compare_keys(self.key(mid), key) {
                Ordering::Less => low = mid + 1,
                Ordering::Greater => high = mid,
                Ordering::Equal => return Ok(mid),
            }
        }
        Err(low)
    }

    /// Builds the prefix array from the keys.
    #[cold]
    fn build_prefixes(&self) {
        let mut list = self.prefixes.list.borrow_mut();
        list.clear();
        list.extend((0..self.count()).map(|index| key_prefix(self.key(index))));
        self.prefixes.built.set(true);
    }

    /// In a branch, the child whose subtree would hold `key`: the last whose separator is
    /// not above `key`, the first separator left out (it routes nothing: every key below
    /// the second goes to the first child, and until spill the first may be stale).
    #[inline]
    pub fn child_index(&self, key: &[u8]) -> usize {
        debug_assert!(!self.is_leaf(), "child index in a leaf");
        match self.search_from(1, key) {
            Ok(index) => index,
            Err(index) => index - 1,
        }
    }

    /// Whether `key` sorts after every key of this leaf (false for an empty one).
    #[inline]
    pub fn is_after_last(&self, key: &[u8]) -> bool {
        let Some(last) = self.count().checked_sub(1) else {
            return false;
        };
        let first_order = if self.prefixes.built.get() {
            self.prefixes.list.borrow()[last].cmp(&key_prefix(key))
        } else {
            Ordering::Equal
        };
        first_order.then_with(|| compare_keys(self.key(last), key)) == Ordering::Less
    }

    // ---- Editing -------------------------------------------------------------------------

    /// Inserts `entry` at `index`, in place: the buffer must have room (see `reserve`).
    #[inline]
    pub fn insert(&mut self, index: usize, entry: &NewEntry<'_>) {
        self.image.insert(index, entry);
        if let Some(list) = self.prefixes.built_mut() {
            list.insert(index, key_prefix(entry.key()));
        }
        self.debug_check();
    }

    /// Removes entry `index`, in place.
    #[inline]
    pub fn remove(&mut self, index: usize) {
        self.image.remove(index);
        if let Some(list) = self.prefixes.built_mut() {
            list.remove(index);
        }
        self.debug_check();
    }

    /// Replaces leaf entry `index`'s flags and value, in place: the buffer must have room for
    /// a longer value.
    #[inline]
    pub fn set_value(&mut self, index: usize, flags: u32, value: &[u8]) {
        self.image.set_value(index, flags, value);
    }

    /// Sets branch entry `index`'s child.
    #[inline]
    pub fn set_child(&mut self, index: usize, child: u64) {
        self.image.set_child(index, child);
    }

    /// Keeps the first `keep` entries (of a packed node).
    pub fn truncate(&mut self, keep: usize) {
        self.image.truncate(keep);
        if let Some(list) = self.prefixes.built_mut() {
            list.truncate(keep);
        }
        self.debug_check();
    }

    /// Appends entries `range` of `source` (a packed node of the same kind, keys after this
    /// one's) to this packed node, in place: the buffer must have room.
    pub fn append_from(&mut self, source: &Node, range: Range<usize>) {
        self.image.append_from(&source.image, range.clone());
        if let Some(list) = self.prefixes.built_mut() {
            list.extend(range.map(|index| key_prefix(source.key(index))));
        }
        self.debug_check();
    }

    /// Makes the buffer hold at least `len` bytes (a whole number of pages), keeping the
    /// image; the old buffer goes back to `arena`.
    pub fn reserve(&mut self, len: usize, arena: &mut Arena) {
        if len <= self.image.buffer_len() {
            return;
        }
        let page_size = arena.page_size();
        let buf = arena.take(pages_for(len, page_size) * page_size);
        arena.give(self.image.move_to(buf));
    }

    /// Packs the node, in a buffer of `len` bytes (at least the packed image's, a whole number
    /// of pages) from `arena`; its old buffer goes back. A packed node only moves to a buffer
    /// of `len` bytes if it has another size.
    pub fn pack(&mut self, len: usize, arena: &mut Arena) {
        debug_assert!(
            self.used() <= len,
            "a packed image of {} in {len} bytes",
            self.used()
        );
        if self.is_packed() && self.image.buffer_len() == len {
            return;
        }
        let buf = arena.take(len);
        arena.give(self.image.pack_to(buf));
    }

    /// Packs the node if it is in the gap layout (in a buffer of the same size).
    pub fn ensure_packed(&mut self, arena: &mut Arena) {
        if !self.is_packed() {
            self.pack(self.image.buffer_len(), arena);
        }
    }

    /// Writes the root leaf as an inline page (id 0) into `out`, exactly `used` bytes.
    pub fn write_inline(&self, out: &mut [u8]) {
        self.image.write_inline(out);
    }

    /// Writes the header's page id and overflow count.
    pub fn write_header(&mut self, id: Pgid, overflow: u32) {
        self.image.write_header(id, overflow);
    }

    /// Turns an empty branch into an empty leaf.
    pub fn make_empty_leaf(&mut self) {
        self.image.make_empty_leaf();
        self.prefixes.list.get_mut().clear();
        self.prefixes.built.set(true);
    }

    /// Zeroes the bytes after a packed image, so what is written holds nothing stale.
    pub fn zero_tail(&mut self) {
        self.image.zero_tail();
    }

    /// A copy of the node in a buffer of the same size from `arena` (the node is packed
    /// first), with its page, overflow and flags: what a walk keeps to put the node back.
    pub fn duplicate(&mut self, arena: &mut Arena) -> Node {
        self.ensure_packed(arena);
        let mut copy = Node::empty(arena, self.image.buffer_len(), self.is_leaf());
        copy.append_from(self, 0..self.count());
        copy.image.write_header(self.pgid, 0);
        copy.pgid = self.pgid;
        copy.overflow = self.overflow;
        copy.unbalanced = self.unbalanced;
        copy.appended = self.appended;
        copy
    }

    /// Swaps the images of two nodes (for a root taking its only child's place).
    pub fn swap_image(&mut self, other: &mut Node) {
        std::mem::swap(&mut self.image, &mut other.image);
        std::mem::swap(&mut self.prefixes, &mut other.prefixes);
    }

    // ---- Checking ------------------------------------------------------------------------

    /// Debug builds check the prefixes after every edit (the image checks its own layout).
    #[inline]
    fn debug_check(&self) {
        if cfg!(debug_assertions) {
            self.check_prefixes();
        }
    }

    /// Panics unless the image is laid out as rbolt-page says ([`PageMut::check_layout`])
    /// and the prefixes are its keys'.
    pub fn check_layout(&self) {
        self.image.check_layout();
        self.check_prefixes();
    }

    fn check_prefixes(&self) {
        if !self.prefixes.built.get() {
            return;
        }
        let prefixes = self.prefixes.list.borrow();
        let count = self.count();
        assert_eq!(prefixes.len(), count, "one prefix for every key");
        for index in 0..count {
            assert_eq!(
                prefixes[index],
                key_prefix(self.key(index)),
                "prefix {index} is not its key's"
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rbolt_page::{LeafBuilder, leaf_page_size};

    const PAGE: usize = 512;

    fn put(node: &mut Node, key: &[u8], value: &[u8]) {
        let entry = NewEntry::Leaf {
            flags: 0,
            key,
            value,
        };
        match node.search(key) {
            Ok(index) => node.set_value(index, 0, value),
            Err(index) => node.insert(index, &entry),
        }
    }

    /// The node's search and its prefixes follow every edit: puts, deletes, a split's
    /// truncate and append, packing; each key is found where the image holds it.
    #[test]
    fn the_search_follows_every_edit() {
        let mut arena = Arena::new(PAGE);
        let mut node = Node::empty(&mut arena, PAGE, true);
        let mut model = std::collections::BTreeMap::new();
        let mut rng = rbolt_testkit::rng::Rng::new(0x9E37_79B9);
        for round in 0..1500u32 {
            let state = rng.next_u64() as u32;
            let key = [
                b'k',
                (state % 29) as u8,
                b'-',
                b'x',
                b'y',
                b'z',
                b'w',
                (state % 3) as u8,
            ];
            let value = vec![round as u8; (state % 11) as usize];
            if round % 7 == 3 {
                // Read back from its page as a marked page is: its prefixes are built only
                // by its searches, and this round's edit comes before them.
                node.ensure_packed(&mut arena);
                node.write_header(Pgid(7), 0);
                let mut page = node.image().image().to_vec();
                page.resize(PAGE, 0);
                node.recycle(&mut arena);
                arena.mark_checked(Pgid(7));
                node = Node::from_file_page(&page, Pgid(7), &mut arena).unwrap();
                assert!(!node.prefixes.built.get() || node.count() == 0);
            }
            if state.is_multiple_of(5) {
                if let Ok(index) = node.search(&key) {
                    node.remove(index);
                    model.remove(key.as_slice());
                }
            } else if node.fits(
                NewEntry::Leaf {
                    flags: 0,
                    key: &key,
                    value: &value,
                }
                .size(),
                1,
                PAGE,
            ) {
                put(&mut node, &key, &value);
                model.insert(key.to_vec(), value);
            }
            if round.is_multiple_of(97) {
                node.ensure_packed(&mut arena);
                let mut right = Node::empty(&mut arena, PAGE, true);
                let half = node.count() / 2;
                right.append_from(&node, half..node.count());
                node.truncate(half);
                node.append_from(&right, 0..right.count());
                right.recycle(&mut arena);
            }
            node.check_layout();
            for (index, (key, value)) in model.iter().enumerate() {
                assert_eq!(node.search(key), Ok(index), "round {round}");
                assert_eq!(node.value(index), &value[..]);
            }
            assert_eq!(node.search(b"zz"), Err(model.len()));
            assert_eq!(node.is_after_last(b"zz"), !model.is_empty());
        }
    }

    #[test]
    fn pages_copy_checked_and_packed() {
        // A page written by a builder, and one that is not packed: both copy into the packed
        // image with the prefixes of their keys; a corrupt one gives its buffers back.
        let mut arena = Arena::new(PAGE);
        let mut buf = vec![0u8; PAGE];
        let mut builder = LeafBuilder::new(&mut buf, Pgid(5), 3, 0);
        for i in 0..3u8 {
            builder.push(0, &[b'a' + i], &[i; 4]);
        }
        builder.finish();
        let node = Node::from_page(&buf, Pgid(5), Pgid(5), &mut arena).unwrap();
        assert_eq!(node.used(), leaf_page_size(3, 15));
        assert_eq!(node.search(b"b"), Ok(1));
        assert_eq!(node.pgid, Pgid(5));
        node.check_layout();
        buf[PAGE - 1] = 0xFF; // outside the data: copied or not, nothing changes
        let again = Node::from_page(&buf, Pgid(5), Pgid(5), &mut arena).unwrap();
        assert_eq!(again.image().image(), node.image().image());
        // A page whose data is not packed (a node's image in the gap layout is one) is laid
        // out anew: the same image as the packed page's.
        let mut gap = Node::empty(&mut arena, PAGE, true);
        for i in [2u8, 0, 1] {
            put(&mut gap, &[b'a' + i], &[i; 4]);
        }
        put(&mut gap, b"d", b"");
        gap.remove(3);
        assert!(!gap.is_packed());
        let relaid = Node::from_page(gap.image().image(), Pgid(0), Pgid(0), &mut arena);
        let mut relaid = relaid.unwrap();
        relaid.write_header(Pgid(5), 0);
        assert!(relaid.is_packed());
        assert_eq!(relaid.image().image(), node.image().image());
        relaid.check_layout();
        while !arena.is_empty() {
            drop(arena.take(PAGE));
        }
        let corrupt = Node::from_page(&buf[..8], Pgid(5), Pgid(5), &mut arena);
        assert!(corrupt.is_err());
        assert_eq!(arena.len(), 1, "the copy's buffer goes back to the arena");
    }

    #[test]
    fn node_children_of_a_corrupt_page_are_sanitised() {
        // A branch page whose child field carries the node tag (only a corrupt file can):
        // copied, it points past every file, not at a node.
        let mut arena = Arena::new(PAGE);
        let mut buf = vec![0u8; PAGE];
        let mut builder = rbolt_page::BranchBuilder::new(&mut buf, Pgid(4), 2, 0);
        builder.push(b"a", Pgid(NODE_TAG | 1));
        builder.push(b"b", Pgid(9));
        builder.finish();
        let node = Node::from_page(&buf, Pgid(4), Pgid(4), &mut arena).unwrap();
        assert_eq!((node.child(0), node.child(1)), (CHILD_SANITISED, 9));
        // Such a page is never marked checked (a marked page is copied without sanitising),
        // so every copy of it is sanitised.
        for _ in 0..2 {
            let node = Node::from_file_page(&buf, Pgid(4), &mut arena).unwrap();
            assert_eq!((node.child(0), node.child(1)), (CHILD_SANITISED, 9));
            assert!(!arena.is_checked(Pgid(4)));
        }
    }

    fn leaf_page(keys: &[&[u8]]) -> Vec<u8> {
        let mut buf = vec![0u8; PAGE];
        let mut builder = LeafBuilder::new(&mut buf, Pgid(7), keys.len(), 0);
        for key in keys {
            builder.push(0, key, b"value");
        }
        builder.finish();
        buf
    }

    /// A page read from the file is checked whole once, then marked; a marked page is read
    /// again without the costly parts of the check, and one whose bytes broke the promise
    /// still gets the check's error, never a panic.
    #[test]
    fn a_file_page_is_checked_once_and_a_broken_promise_is_still_an_error() {
        let mut arena = Arena::new(PAGE);
        let good = leaf_page(&[b"a", b"b", b"c"]);
        assert!(!arena.is_checked(Pgid(7)));
        let node = Node::from_file_page(&good, Pgid(7), &mut arena).unwrap();
        assert!(
            arena.is_checked(Pgid(7)),
            "a packed page that passed is marked"
        );
        let reread = Node::from_file_page(&good, Pgid(7), &mut arena).unwrap();
        assert_eq!(reread.image().image(), node.image().image());
        assert_eq!(reread.search(b"b"), Ok(1));
        assert_eq!(reread.search(b"bb"), Err(2), "the prefixes came with it");

        // Keys out of order: caught by the whole check, which the mark skips (the promise is
        // the writer's: it forgets a page's mark before writing over it).
        let mut swapped = leaf_page(&[b"a", b"b", b"c"]);
        let data = page_data_end(&swapped);
        // The last entry's key ("c", then "value") becomes "a": out of order.
        swapped[data - 6] = b'a';
        assert!(Node::from_page(&swapped, Pgid(7), Pgid(7), &mut arena).is_err());
        arena.forget_checked(Pgid(7), 1);
        assert!(Node::from_file_page(&swapped, Pgid(7), &mut arena).is_err());
        assert!(
            !arena.is_checked(Pgid(7)),
            "a page that fails is not marked"
        );

        // Bytes that break the bounds: the marked page loses its mark and gets the whole
        // check's error.
        Node::from_file_page(&good, Pgid(7), &mut arena).unwrap();
        assert!(arena.is_checked(Pgid(7)));
        // Offsets in the page: the header's flags (8) and count (10); an element (16 bytes
        // from 16 on) has its data's position at 4, its key's length at 8 and its value's at
        // 12. The last element's value reaching past the page moves the end the copy is cut
        // at (`packed_data_end`) to the page's end: the reread refuses it all the same.
        let damages: [(usize, &[u8]); 5] = [
            (16 + 4, &[0xff, 0xff, 0xff, 0x7f]),
            (16 + 2 * 16 + 8, &[0xff, 0xff]),
            (16 + 2 * 16 + 12, &[0xff, 0xff]),
            (10, &[0xff]),
            (8, &[0x10]),
        ];
        for (at, bytes) in damages {
            let mut bad = good.clone();
            bad[at..at + bytes.len()].copy_from_slice(bytes);
            arena.mark_checked(Pgid(7));
            let read = Node::from_file_page(&bad, Pgid(7), &mut arena);
            assert!(
                read.is_err(),
                "damaged page read as {:?}",
                read.map(|n| n.count())
            );
            assert!(!arena.is_checked(Pgid(7)));
        }

        // Marks are per page: forgetting a span forgets exactly it.
        for pgid in [3u64, 63, 64, 65, 200] {
            arena.mark_checked(Pgid(pgid));
        }
        arena.forget_checked(Pgid(63), 2);
        let marked: Vec<u64> = [3u64, 63, 64, 65, 200]
            .into_iter()
            .filter(|&p| arena.is_checked(Pgid(p)))
            .collect();
        assert_eq!(marked, [3, 65, 200]);
        arena.forget_checked(Pgid(4), u64::MAX);
        assert!(arena.is_checked(Pgid(3)) && !arena.is_checked(Pgid(200)));
        // A span of one page only: a multi-page span is checked every time, never marked.
        let mut big = vec![0u8; 2 * PAGE];
        big[..PAGE].copy_from_slice(&good);
        Node::from_file_page(&big, Pgid(9), &mut arena).unwrap();
        assert!(!arena.is_checked(Pgid(9)));
    }
}
