//! An edited node: a private copy of a page image, edited in place.
//!
//! A node made from a page starts as the page's image, laid out exactly as bbolt lays out a
//! page ("packed"): the 16-byte header, the element array, every key (and value) right after
//! it in element order, then free bytes to the end of the buffer. A delete, a changed value
//! and the first few inserts edit that image in place: they move the tail of the element
//! array and of the data by the bytes they add or remove and correct the relative positions
//! (`pos`) of the elements whose distance to their data changed. Such a node is written at
//! commit as it is: spill neither decodes nor encodes it, and what a put wrote into the image
//! is the only copy of that pair before the file.
//!
//! A node that takes more inserts (a load) switches to the layout LMDB keeps its pages in
//! ("gap"): the data moves to the end of the buffer once, and each insert then writes its
//! pair below the data and moves only the element array's tail, where a packed insert moves
//! everything after the new element, which in a load of random keys means most of a page the
//! caches no longer hold. Before such a node is written (or split or merged) it is packed
//! again, one copy of each pair in element order: bbolt's statistics and rbolt's format
//! documentation count on written pages being packed.
//!
//! A branch node's child is a page id, or a node of the same tree: `NODE_TAG | id` in the
//! element's page-id field until spill writes the child and puts its page id there.

use crate::arena::Arena;
use rbolt_page::{
    BRANCH_ELEMENT_SIZE, BranchPage, BucketValue, Corruption, FLAG_BRANCH, FLAG_LEAF,
    LEAF_ELEMENT_SIZE, LEAF_FLAG_BUCKET, LeafPage, PAGE_HEADER_SIZE, PageHeader, PageKind, Pgid,
    Reason, Result, compare_keys, key_prefix, pages_for,
};
use smallvec::SmallVec;
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

/// The size of one element, leaf or branch.
pub(crate) const ELEM: usize = 16;
const _: () = assert!(LEAF_ELEMENT_SIZE == ELEM && BRANCH_ELEMENT_SIZE == ELEM);

/// The most elements a page can count (its header's count is 16 bits).
pub const PAGE_COUNT_MAX: usize = u16::MAX as usize;

/// A new node's prefix array starts with room for a page's bytes divided by this (32 keys in
/// a 4 KiB page, about a page of 16-byte keys with 100-byte values).
const PREFIXES_RESERVE_DIVISOR: usize = 128;

/// Inserts a packed node takes in place before it switches to the gap layout: a packed
/// insert moves everything after the new element once, the switch and the packing before
/// the node is written move (or copy) the whole image once each.
pub const PACKED_INSERTS_MAX: u16 = 3;

/// Byte offsets in the header.
const HEADER_ID: usize = 0;
const HEADER_FLAGS: usize = 8;
const HEADER_COUNT: usize = 10;
const HEADER_OVERFLOW: usize = 12;

/// An entry to write into a node.
#[derive(Clone, Copy, Debug)]
pub(crate) enum NewEntry<'a> {
    Leaf {
        flags: u32,
        key: &'a [u8],
        value: &'a [u8],
    },
    /// `child`: a page id, or `NODE_TAG | id`.
    Branch { key: &'a [u8], child: u64 },
}

impl NewEntry<'_> {
    /// Bytes of its key (and value).
    #[inline]
    pub fn data_len(&self) -> usize {
        match self {
            NewEntry::Leaf { key, value, .. } => key.len() + value.len(),
            NewEntry::Branch { key, .. } => key.len(),
        }
    }

    /// Bytes it takes in a page: element and data.
    #[inline]
    pub fn size(&self) -> usize {
        ELEM + self.data_len()
    }

    #[inline]
    pub fn is_leaf(&self) -> bool {
        matches!(self, NewEntry::Leaf { .. })
    }

    #[inline]
    pub fn key(&self) -> &[u8] {
        match self {
            NewEntry::Leaf { key, .. } | NewEntry::Branch { key, .. } => key,
        }
    }
}

/// An editable node (see the module documentation).
#[derive(Debug)]
pub(crate) struct Node {
    /// The image, in a buffer of a whole number of pages (empty for a node that is gone).
    buf: Box<[u8]>,
    /// Bytes of the image as a packed page: header, elements, data. Packed, where the data
    /// ends.
    used: usize,
    /// The data lies at the end of the buffer, from `data_low` on, in any order (see the
    /// module documentation); otherwise the node is packed.
    gap: bool,
    /// Where the data starts, in the gap layout.
    data_low: usize,
    /// Inserts since the node was last packed.
    inserts: u16,
    /// The first eight bytes of every key (`key_prefix`), in element order: a search compares
    /// these and reads a key only on a tie, where reading the keys themselves costs two
    /// dependent loads a probe (the element, then its key), each a cache miss in a load.
    prefixes: Vec<u64>,
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

#[inline]
fn elem_off(index: usize) -> usize {
    PAGE_HEADER_SIZE + ELEM * index
}

impl Node {
    /// An empty leaf or branch in a buffer of `len` bytes (a whole number of pages) from
    /// `arena`.
    pub fn empty(arena: &mut Arena, page_size: usize, len: usize, leaf: bool) -> Node {
        let mut node = Node::empty_in(arena.take(page_size, len), leaf);
        node.prefixes = arena.take_prefixes();
        // Room for a page of average entries, so that the array does not grow one by one.
        node.prefixes.reserve(len / PREFIXES_RESERVE_DIVISOR);
        node
    }

    /// An empty leaf or branch in `buf`.
    fn empty_in(mut buf: Box<[u8]>, leaf: bool) -> Node {
        debug_assert!(
            buf.len() >= PAGE_HEADER_SIZE,
            "a node buffer without room for a header"
        );
        let kind = if leaf {
            PageKind::Leaf
        } else {
            PageKind::Branch
        };
        PageHeader::new(Pgid(0), kind, 0, 0).write(&mut buf);
        Node {
            buf,
            used: PAGE_HEADER_SIZE,
            gap: false,
            data_low: PAGE_HEADER_SIZE,
            inserts: 0,
            prefixes: Vec::new(),
            pgid: Pgid(0),
            overflow: 0,
            unbalanced: false,
            appended: false,
        }
    }

    /// A node that was merged away or removed: it has no image.
    pub fn gone() -> Node {
        Node {
            buf: Box::default(),
            used: 0,
            gap: false,
            data_low: 0,
            inserts: 0,
            prefixes: Vec::new(),
            pgid: Pgid(0),
            overflow: 0,
            unbalanced: false,
            appended: false,
        }
    }

    /// Whether the node was merged away or removed.
    #[inline]
    pub fn is_gone(&self) -> bool {
        self.buf.is_empty()
    }

    /// Takes the node's buffer (leaving it gone), to write; its prefix array goes back to
    /// `arena`.
    pub fn take_buffer(&mut self, arena: &mut Arena) -> Box<[u8]> {
        self.used = 0;
        arena.give_prefixes(std::mem::take(&mut self.prefixes));
        std::mem::take(&mut self.buf)
    }

    /// Gives the node's memory back to `arena`, leaving it gone.
    pub fn recycle(&mut self, page_size: usize, arena: &mut Arena) {
        let buf = self.take_buffer(arena);
        arena.give(page_size, buf);
    }

    /// A copy of the leaf or branch page `bytes` (a page span, or an inline page), checked
    /// whole first: every element inside the span, leaf flags known, keys strictly
    /// ascending, bucket values well formed; a branch has children. Errors name `owner`.
    /// `source` is the page to free when the node is written (0 for an inline page).
    pub fn from_page(
        bytes: &[u8],
        owner: Pgid,
        source: Pgid,
        page_size: usize,
        arena: &mut Arena,
    ) -> Result<Node> {
        // Copy first, then check the copy: one sequential read of the mapped page, which the
        // hardware streams, where checking it in place costs a cache miss for every key. Only
        // the bytes up to the end of the data are copied, not the free space after it.
        let len = bytes.len();
        let end = data_end(bytes);
        let mut buf = arena.take_with(
            page_size,
            pages_for(len, page_size) * page_size,
            &bytes[..end],
        );
        let mut prefixes = arena.take_prefixes();
        // Checked as `len` bytes: an element pointing past `end` points past the span too.
        let layout = match check_page(&buf[..len], owner, &mut prefixes) {
            Ok(layout) => layout,
            Err(error) => {
                arena.give(page_size, buf);
                arena.give_prefixes(prefixes);
                return Err(error);
            }
        };
        if !layout.packed {
            // Valid, but not how bbolt lays a page out: lay it out anew.
            // Entries may share bytes (a corrupt page can say so): count them apart.
            let relaid_len = pages_for(layout.used, page_size) * page_size;
            let relaid = relay(&buf[..len], &layout, arena.take(page_size, relaid_len));
            arena.give(page_size, std::mem::replace(&mut buf, relaid));
        }
        let mut node = Node {
            buf,
            used: layout.used,
            gap: false,
            data_low: 0,
            inserts: 0,
            prefixes,
            pgid: source,
            overflow: 0,
            unbalanced: false,
            appended: false,
        };
        let kind = if layout.leaf { FLAG_LEAF } else { FLAG_BRANCH };
        node.buf[HEADER_FLAGS..HEADER_FLAGS + 2].copy_from_slice(&kind.to_le_bytes());
        node.write_header(source, 0);
        if !layout.leaf {
            for index in 0..layout.count {
                if node.child(index) & NODE_TAG != 0 {
                    node.set_child(index, CHILD_SANITISED);
                }
            }
        }
        node.debug_check();
        Ok(node)
    }

    // ---- Reading -------------------------------------------------------------------------

    #[inline]
    fn read_u32(&self, at: usize) -> u32 {
        u32::from_le_bytes(self.buf[at..at + 4].try_into().expect("4 bytes"))
    }

    #[inline]
    fn write_u32(&mut self, at: usize, value: u32) {
        self.buf[at..at + 4].copy_from_slice(&value.to_le_bytes());
    }

    /// Number of entries.
    #[inline]
    pub fn count(&self) -> usize {
        usize::from(u16::from_le_bytes([
            self.buf[HEADER_COUNT],
            self.buf[HEADER_COUNT + 1],
        ]))
    }

    #[inline]
    fn set_count(&mut self, count: usize) {
        debug_assert!(
            count <= PAGE_COUNT_MAX,
            "{count} elements do not fit a page header"
        );
        self.buf[HEADER_COUNT..HEADER_COUNT + 2].copy_from_slice(&(count as u16).to_le_bytes());
    }

    #[inline]
    pub fn is_leaf(&self) -> bool {
        u16::from_le_bytes([self.buf[HEADER_FLAGS], self.buf[HEADER_FLAGS + 1]]) == FLAG_LEAF
    }

    /// Bytes of the image in use.
    #[inline]
    pub fn used(&self) -> usize {
        self.used
    }

    /// The image: a page with this node's header, elements and data (in the gap layout, the
    /// whole buffer).
    #[inline]
    pub fn image(&self) -> &[u8] {
        if self.gap {
            &self.buf
        } else {
            &self.buf[..self.used]
        }
    }

    /// Whether the image is packed (as it is written).
    #[inline]
    pub fn is_packed(&self) -> bool {
        !self.gap
    }

    /// The offset of the `pos` field in an element.
    #[inline]
    fn pos_field(&self) -> usize {
        if self.is_leaf() { 4 } else { 0 }
    }

    #[inline]
    fn ksize(&self, index: usize) -> usize {
        let at = if self.is_leaf() { 8 } else { 4 };
        self.read_u32(elem_off(index) + at) as usize
    }

    #[inline]
    fn vsize(&self, index: usize) -> usize {
        debug_assert!(self.is_leaf(), "value size of a branch element");
        self.read_u32(elem_off(index) + 12) as usize
    }

    /// Where entry `index`'s key starts.
    #[inline]
    fn data_start(&self, index: usize) -> usize {
        elem_off(index) + self.read_u32(elem_off(index) + self.pos_field()) as usize
    }

    /// Bytes of entry `index`'s key and value.
    #[inline]
    fn data_len(&self, index: usize) -> usize {
        if self.is_leaf() {
            self.ksize(index) + self.vsize(index)
        } else {
            self.ksize(index)
        }
    }

    /// Bytes entry `index` takes in a page.
    #[inline]
    pub fn entry_size(&self, index: usize) -> usize {
        ELEM + self.data_len(index)
    }

    #[inline]
    pub fn key(&self, index: usize) -> &[u8] {
        let start = self.data_start(index);
        &self.buf[start..start + self.ksize(index)]
    }

    #[inline]
    pub fn value(&self, index: usize) -> &[u8] {
        let start = self.data_start(index) + self.ksize(index);
        &self.buf[start..start + self.vsize(index)]
    }

    /// A leaf entry's flags.
    #[inline]
    pub fn flags(&self, index: usize) -> u32 {
        debug_assert!(self.is_leaf(), "flags of a branch element");
        self.read_u32(elem_off(index))
    }

    /// A branch entry's child: a page id, or `NODE_TAG | id`.
    #[inline]
    pub fn child(&self, index: usize) -> u64 {
        debug_assert!(!self.is_leaf(), "child of a leaf element");
        let at = elem_off(index) + 8;
        u64::from_le_bytes(self.buf[at..at + 8].try_into().expect("8 bytes"))
    }

    /// Whether any entry holds a bucket.
    pub fn has_buckets(&self) -> bool {
        self.is_leaf() && (0..self.count()).any(|i| self.flags(i) & LEAF_FLAG_BUCKET != 0)
    }

    /// Exact-match search: `Ok(index)` of `key`, or `Err(index)` where it would go.
    #[inline]
    pub fn search(&self, key: &[u8]) -> core::result::Result<usize, usize> {
        self.search_from(0, key)
    }

    /// `search` over the entries from `low` on, by prefixes first.
    #[inline]
    fn search_from(&self, mut low: usize, key: &[u8]) -> core::result::Result<usize, usize> {
        let prefix = key_prefix(key);
        let mut high = self.prefixes.len();
        while low < high {
            let mid = low + (high - low) / 2;
            let order = self.prefixes[mid]
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
        let Some(&last) = self.prefixes.last() else {
            return false;
        };
        last.cmp(&key_prefix(key))
            .then_with(|| compare_keys(self.key(self.prefixes.len() - 1), key))
            == Ordering::Less
    }

    /// Whether `extra` more bytes in `extra_count` more entries keep the image within one
    /// page of `page_size` bytes (and within what a page header can count).
    #[inline]
    pub fn fits(&self, extra: usize, extra_count: usize, page_size: usize) -> bool {
        self.used + extra <= page_size && self.count() + extra_count <= PAGE_COUNT_MAX
    }

    // ---- Editing -------------------------------------------------------------------------

    /// Adds `delta` to the `pos` of elements `range`.
    #[inline]
    fn shift_pos(&mut self, range: Range<usize>, delta: i64) {
        if delta == 0 {
            return;
        }
        let field = self.pos_field();
        for index in range {
            let at = elem_off(index) + field;
            let pos = i64::from(self.read_u32(at)) + delta;
            debug_assert!(
                (0..=i64::from(u32::MAX)).contains(&pos),
                "element {index} pos {pos} out of range"
            );
            self.write_u32(at, pos as u32);
        }
    }

    /// Writes element `index` (its fields, with data at `data`) and the entry's bytes.
    #[inline]
    fn write_entry(&mut self, index: usize, data: usize, entry: &NewEntry<'_>) {
        let at = elem_off(index);
        let pos = (data - at) as u32;
        match *entry {
            NewEntry::Leaf { flags, key, value } => {
                self.write_u32(at, flags);
                self.write_u32(at + 4, pos);
                self.write_u32(at + 8, key.len() as u32);
                self.write_u32(at + 12, value.len() as u32);
                self.buf[data..data + key.len()].copy_from_slice(key);
                self.buf[data + key.len()..data + key.len() + value.len()].copy_from_slice(value);
            }
            NewEntry::Branch { key, child } => {
                self.write_u32(at, pos);
                self.write_u32(at + 4, key.len() as u32);
                self.buf[at + 8..at + 16].copy_from_slice(&child.to_le_bytes());
                self.buf[data..data + key.len()].copy_from_slice(key);
            }
        }
    }

    /// Inserts `entry` at `index`, in place: the buffer must have room (see `reserve`).
    pub fn insert(&mut self, index: usize, entry: &NewEntry<'_>) {
        if !self.gap && self.inserts >= PACKED_INSERTS_MAX && self.count() > 0 {
            self.open_gap();
        }
        if self.gap {
            self.insert_gap(index, entry);
        } else {
            self.insert_packed(index, entry);
            self.inserts = self.inserts.saturating_add(1);
        }
    }

    /// Moves the data of a packed node to the end of its buffer: the gap layout.
    fn open_gap(&mut self) {
        debug_assert!(!self.gap, "a node in the gap layout already");
        let count = self.count();
        let (start, end, len) = (elem_off(count), self.used, self.buf.len());
        let shift = len - end;
        self.buf.copy_within(start..end, start + shift);
        self.shift_pos(0..count, shift as i64);
        self.gap = true;
        self.data_low = start + shift;
        self.debug_check();
    }

    /// What every insert relies on: the index is within the node, the entry is of the node's
    /// kind, and the node has room for one more element.
    #[inline]
    fn debug_check_insert(&self, index: usize, entry: &NewEntry<'_>) {
        let count = self.count();
        debug_assert!(index <= count, "insert at {index} of {count}");
        debug_assert_eq!(
            entry.is_leaf(),
            self.is_leaf(),
            "an entry of the other kind"
        );
        debug_assert!(count < PAGE_COUNT_MAX, "a node of {count} elements is full");
    }

    /// An insert in the gap layout: the element array's tail moves up one element, the pair
    /// goes below the data.
    fn insert_gap(&mut self, index: usize, entry: &NewEntry<'_>) {
        let count = self.count();
        let grow = entry.size();
        self.debug_check_insert(index, entry);
        debug_assert!(
            elem_off(count + 1) + entry.data_len() <= self.data_low,
            "insert of {grow} bytes into a gap of {}",
            self.data_low - elem_off(count)
        );
        self.buf
            .copy_within(elem_off(index)..elem_off(count), elem_off(index + 1));
        // Elements after `index` moved up one element; their data stayed.
        self.shift_pos(index + 1..count + 1, -(ELEM as i64));
        let data = self.data_low - entry.data_len();
        self.write_entry(index, data, entry);
        self.prefixes.insert(index, key_prefix(entry.key()));
        self.data_low = data;
        self.used += grow;
        self.set_count(count + 1);
        self.debug_check();
    }

    /// An insert in the packed layout.
    fn insert_packed(&mut self, index: usize, entry: &NewEntry<'_>) {
        let count = self.count();
        let grow = entry.size();
        self.debug_check_insert(index, entry);
        debug_assert!(
            self.used + grow <= self.buf.len(),
            "insert of {grow} bytes into {} of {}",
            self.used,
            self.buf.len()
        );
        let used = self.used;
        let at = elem_off(index);
        let data = if index < count {
            self.data_start(index)
        } else {
            used
        };
        // Entries from `index` on move up by the new element and data; the elements from
        // `index` on and the data before it, by one element.
        self.buf.copy_within(data..used, data + grow);
        self.buf.copy_within(at..data, at + ELEM);
        // Elements before `index` stayed, their data moved up one element; elements after it
        // moved up one element, their data by that and the new data.
        self.shift_pos(0..index, ELEM as i64);
        self.shift_pos(index + 1..count + 1, entry.data_len() as i64);
        self.write_entry(index, data + ELEM, entry);
        self.prefixes.insert(index, key_prefix(entry.key()));
        self.used = used + grow;
        self.set_count(count + 1);
        self.debug_check();
    }

    /// Removes entry `index`, in place.
    pub fn remove(&mut self, index: usize) {
        if self.gap {
            self.remove_gap(index);
        } else {
            self.remove_packed(index);
        }
    }

    /// A delete in the gap layout: the element array's tail moves down one element, the data
    /// below the pair up by the pair (as LMDB does).
    fn remove_gap(&mut self, index: usize) {
        let count = self.count();
        debug_assert!(index < count, "remove {index} of {count}");
        let start = self.data_start(index);
        let len = self.data_len(index);
        self.buf
            .copy_within(elem_off(index + 1)..elem_off(count), elem_off(index));
        self.shift_pos(index..count - 1, ELEM as i64);
        let low = self.data_low;
        self.buf.copy_within(low..start, low + len);
        let field = self.pos_field();
        for other in 0..count - 1 {
            // An empty pair (an empty key of a corrupt page) at `start` moves too: it would be
            // left below the data otherwise.
            let other_start = self.data_start(other);
            if other_start < start || (other_start == start && self.data_len(other) == 0) {
                let at = elem_off(other) + field;
                let pos = self.read_u32(at) + len as u32;
                self.write_u32(at, pos);
            }
        }
        self.data_low = low + len;
        self.used -= ELEM + len;
        self.prefixes.remove(index);
        self.set_count(count - 1);
        self.debug_check();
    }

    /// A delete in the packed layout.
    fn remove_packed(&mut self, index: usize) {
        let count = self.count();
        debug_assert!(index < count, "remove {index} of {count}");
        let used = self.used;
        let at = elem_off(index);
        let data = self.data_start(index);
        let len = self.data_len(index);
        self.buf.copy_within(at + ELEM..data, at);
        self.buf.copy_within(data + len..used, data - ELEM);
        self.shift_pos(0..index, -(ELEM as i64));
        self.shift_pos(index..count - 1, -(len as i64));
        self.used = used - ELEM - len;
        self.prefixes.remove(index);
        self.set_count(count - 1);
        self.debug_check();
    }

    /// Replaces leaf entry `index`'s flags and value, in place: the buffer must have room for
    /// a longer value.
    pub fn set_value(&mut self, index: usize, flags: u32, value: &[u8]) {
        debug_assert!(self.is_leaf(), "value of a branch element");
        if self.gap {
            if value.len() == self.vsize(index) {
                let start = self.data_start(index) + self.ksize(index);
                self.buf[start..start + value.len()].copy_from_slice(value);
                self.write_u32(elem_off(index), flags);
            } else {
                // Out and in again; the key is copied first, as its bytes move.
                let key: SmallVec<[u8; 64]> = SmallVec::from_slice(self.key(index));
                self.remove_gap(index);
                self.insert_gap(
                    index,
                    &NewEntry::Leaf {
                        flags,
                        key: &key,
                        value,
                    },
                );
            }
            return;
        }
        let count = self.count();
        let start = self.data_start(index) + self.ksize(index);
        let old = self.vsize(index);
        let delta = value.len() as i64 - old as i64;
        debug_assert!(
            (self.used as i64 + delta) as usize <= self.buf.len(),
            "a value that does not fit"
        );
        let used = self.used;
        self.buf.copy_within(start + old..used, start + value.len());
        self.buf[start..start + value.len()].copy_from_slice(value);
        self.shift_pos(index + 1..count, delta);
        let at = elem_off(index);
        self.write_u32(at, flags);
        self.write_u32(at + 12, value.len() as u32);
        self.used = (used as i64 + delta) as usize;
        self.debug_check();
    }

    /// Sets branch entry `index`'s child.
    #[inline]
    pub fn set_child(&mut self, index: usize, child: u64) {
        debug_assert!(!self.is_leaf(), "child of a leaf element");
        let at = elem_off(index) + 8;
        self.buf[at..at + 8].copy_from_slice(&child.to_le_bytes());
    }

    /// Keeps the first `keep` entries.
    pub fn truncate(&mut self, keep: usize) {
        debug_assert!(!self.gap, "a node in the gap layout: pack it first");
        let count = self.count();
        if keep >= count {
            return;
        }
        let data = elem_off(count);
        let end = if keep > 0 {
            self.data_start(keep - 1) + self.data_len(keep - 1)
        } else {
            data
        };
        let shift = ELEM * (count - keep);
        self.buf.copy_within(data..end, data - shift);
        self.shift_pos(0..keep, -(shift as i64));
        self.used = end - shift;
        self.prefixes.truncate(keep);
        self.set_count(keep);
        self.debug_check();
    }

    /// Appends entries `range` of `source` (a node of the same kind, keys after this one's),
    /// in place: the buffer must have room.
    pub fn append_from(&mut self, source: &Node, range: Range<usize>) {
        debug_assert!(
            !self.gap && !source.gap,
            "a node in the gap layout: pack it first"
        );
        let range_copy = range.clone();
        if range.is_empty() {
            return;
        }
        debug_assert_eq!(
            source.is_leaf(),
            self.is_leaf(),
            "entries of the other kind"
        );
        let count = self.count();
        let added = range.len();
        let elements = ELEM * added;
        let used = self.used;
        // Own data moves up by the new elements.
        self.buf
            .copy_within(elem_off(count)..used, elem_off(count) + elements);
        self.shift_pos(0..count, elements as i64);
        // The source's data for `range` is one packed block: one copy.
        let first = source.data_start(range.start);
        let last = range.end - 1;
        let end = source.data_start(last) + source.data_len(last);
        let data = used + elements;
        let len = end - first;
        debug_assert!(data + len <= self.buf.len(), "appended entries do not fit");
        self.buf[data..data + len].copy_from_slice(&source.buf[first..end]);
        let field = self.pos_field();
        for (slot, index) in range.enumerate() {
            let to = elem_off(count + slot);
            let from = elem_off(index);
            self.buf[to..to + ELEM].copy_from_slice(&source.buf[from..from + ELEM]);
            let entry_data = data + (source.data_start(index) - first);
            self.write_u32(to + field, (entry_data - to) as u32);
        }
        self.used = data + len;
        self.prefixes
            .extend_from_slice(&source.prefixes[range_copy.clone()]);
        self.set_count(count + added);
        self.debug_check();
    }

    /// Makes the buffer hold at least `len` bytes (a whole number of pages), keeping the
    /// image; the old buffer goes back to `arena`.
    pub fn reserve(&mut self, len: usize, page_size: usize, arena: &mut Arena) {
        if len <= self.buf.len() {
            return;
        }
        let mut buf = arena.take(page_size, pages_for(len, page_size) * page_size);
        if self.gap {
            // Elements at the front, data at the end of the new buffer.
            let count = self.count();
            let shift = buf.len() - self.buf.len();
            buf[..elem_off(count)].copy_from_slice(&self.buf[..elem_off(count)]);
            let low = self.data_low;
            buf[low + shift..].copy_from_slice(&self.buf[low..]);
            let old = std::mem::replace(&mut self.buf, buf);
            arena.give(page_size, old);
            self.shift_pos(0..count, shift as i64);
            self.data_low = low + shift;
        } else {
            buf[..self.used].copy_from_slice(&self.buf[..self.used]);
            let old = std::mem::replace(&mut self.buf, buf);
            arena.give(page_size, old);
        }
        self.debug_check();
    }

    /// Packs a node in the gap layout: its pairs in element order right after the elements,
    /// in a buffer of `len` bytes (at least the packed image's, a whole number of pages) from
    /// `arena`; its old buffer goes back. A packed node only moves to a buffer of `len` bytes
    /// if it has another size.
    pub fn pack(&mut self, len: usize, page_size: usize, arena: &mut Arena) {
        debug_assert!(
            self.used <= len,
            "a packed image of {} in {len} bytes",
            self.used
        );
        if !self.gap {
            self.fit_buffer(len, page_size, arena);
            return;
        }
        let mut buf = arena.take(page_size, len);
        self.write_packed(&mut buf);
        let old = std::mem::replace(&mut self.buf, buf);
        arena.give(page_size, old);
        self.gap = false;
        self.data_low = 0;
        self.inserts = 0;
        self.debug_check();
    }

    /// Writes the packed image (header, elements, pairs in element order) into `out`, which
    /// holds at least `used` bytes.
    pub fn write_packed(&self, out: &mut [u8]) {
        let count = self.count();
        out[..elem_off(count)].copy_from_slice(&self.buf[..elem_off(count)]);
        let field = self.pos_field();
        let mut data = elem_off(count);
        for index in 0..count {
            let start = self.data_start(index);
            let len = self.data_len(index);
            out[data..data + len].copy_from_slice(&self.buf[start..start + len]);
            let at = elem_off(index) + field;
            out[at..at + 4].copy_from_slice(&((data - elem_off(index)) as u32).to_le_bytes());
            data += len;
        }
        debug_assert_eq!(data, self.used, "packed into other bytes than counted");
    }

    /// Packs the node if it is in the gap layout (in a buffer of the same size).
    pub fn ensure_packed(&mut self, page_size: usize, arena: &mut Arena) {
        if self.gap {
            self.pack(self.buf.len(), page_size, arena);
        }
    }

    /// Moves a packed image into a buffer of exactly `len` bytes if it has another size.
    fn fit_buffer(&mut self, len: usize, page_size: usize, arena: &mut Arena) {
        debug_assert!(!self.gap, "a node in the gap layout: pack it first");
        debug_assert!(self.used <= len, "the image does not fit {len} bytes");
        if self.buf.len() == len {
            return;
        }
        let mut buf = arena.take(page_size, len);
        buf[..self.used].copy_from_slice(&self.buf[..self.used]);
        let old = std::mem::replace(&mut self.buf, buf);
        arena.give(page_size, old);
    }

    /// Writes the header's page id and overflow count.
    pub fn write_header(&mut self, id: Pgid, overflow: u32) {
        self.buf[HEADER_ID..HEADER_ID + 8].copy_from_slice(&id.0.to_le_bytes());
        self.buf[HEADER_OVERFLOW..HEADER_OVERFLOW + 4].copy_from_slice(&overflow.to_le_bytes());
    }

    /// Turns an empty branch into an empty leaf.
    pub fn make_empty_leaf(&mut self) {
        debug_assert_eq!(self.count(), 0, "only an empty node changes kind");
        self.buf[HEADER_FLAGS..HEADER_FLAGS + 2].copy_from_slice(&FLAG_LEAF.to_le_bytes());
        self.used = PAGE_HEADER_SIZE;
        self.gap = false;
        self.prefixes.clear();
    }

    /// Zeroes the bytes after a packed image, so what is written holds nothing stale.
    pub fn zero_tail(&mut self) {
        debug_assert!(!self.gap, "a node in the gap layout: pack it first");
        let used = self.used;
        self.buf[used..].fill(0);
    }

    /// Swaps the images of two nodes (for a root taking its only child's place).
    pub fn swap_image(&mut self, other: &mut Node) {
        std::mem::swap(&mut self.buf, &mut other.buf);
        std::mem::swap(&mut self.used, &mut other.used);
        std::mem::swap(&mut self.gap, &mut other.gap);
        std::mem::swap(&mut self.data_low, &mut other.data_low);
        std::mem::swap(&mut self.inserts, &mut other.inserts);
        std::mem::swap(&mut self.prefixes, &mut other.prefixes);
    }

    // ---- Checking ------------------------------------------------------------------------

    /// Debug builds check the layout after every edit.
    #[inline]
    fn debug_check(&self) {
        if cfg!(debug_assertions) {
            self.check_layout();
        }
    }

    /// Panics unless the image is laid out as this module says: packed, the data in element
    /// order right after the elements and `used` where it ends; in the gap layout, every pair
    /// inside the data at the end of the buffer, the pairs apart and filling it. Keys strictly
    /// ascending (a branch's first key aside, which may be stale until spill).
    pub fn check_layout(&self) {
        let count = self.count();
        let data_len: usize = (0..count).map(|index| self.data_len(index)).sum();
        assert_eq!(
            elem_off(count) + data_len,
            self.used,
            "used bytes miscounted"
        );
        assert!(self.used <= self.buf.len(), "image longer than its buffer");
        if self.gap {
            assert!(
                elem_off(count) <= self.data_low,
                "elements run into the data"
            );
            assert_eq!(
                self.data_low + data_len,
                self.buf.len(),
                "data not at the end"
            );
            let mut ranges: Vec<(usize, usize)> = (0..count)
                .map(|index| (self.data_start(index), self.data_len(index)))
                .collect();
            ranges.sort_unstable();
            let mut end = self.data_low;
            for (start, len) in ranges {
                assert_eq!(
                    start, end,
                    "pairs in the gap layout overlap or leave a hole"
                );
                end += len;
            }
        } else {
            let mut end = elem_off(count);
            for index in 0..count {
                assert_eq!(
                    self.data_start(index),
                    end,
                    "entry {index} of {count}: data not packed in element order"
                );
                end += self.data_len(index);
            }
        }
        assert_eq!(self.prefixes.len(), count, "one prefix for every key");
        for index in 0..count {
            assert_eq!(
                self.prefixes[index],
                key_prefix(self.key(index)),
                "prefix {index} is not its key's"
            );
        }
        for index in usize::from(!self.is_leaf()) + 1..count {
            assert_eq!(
                compare_keys(self.key(index - 1), self.key(index)),
                Ordering::Less,
                "keys {} and {index} out of order",
                index - 1
            );
        }
    }
}

/// What checking a page found: its kind, entries, bytes in use once packed, and whether its
/// data is packed in element order right after the elements already.
struct Layout {
    leaf: bool,
    count: usize,
    used: usize,
    packed: bool,
}

/// How many bytes of page `bytes` its elements use: up to the furthest end of the data they
/// point at, within the page (whatever the elements say: they are checked afterwards).
fn data_end(bytes: &[u8]) -> usize {
    let Some(header) = PageHeader::read(bytes) else {
        return bytes.len();
    };
    let count = usize::from(header.count).min(bytes.len().saturating_sub(PAGE_HEADER_SIZE) / ELEM);
    let leaf = header.kind() == Some(PageKind::Leaf);
    let field = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
    let mut end = elem_off(count);
    for index in 0..count {
        let at = elem_off(index);
        let (pos, len) = if leaf {
            (
                field(at + 4),
                u64::from(field(at + 8)) + u64::from(field(at + 12)),
            )
        } else {
            (field(at), u64::from(field(at + 4)))
        };
        let data_end = at as u64 + u64::from(pos) + len;
        end = end.max(data_end.min(bytes.len() as u64) as usize);
    }
    end.min(bytes.len())
}

/// Checks a leaf or branch page (see [`Node::from_page`]) and reads its layout; `prefixes`
/// receives its keys' prefixes.
fn check_page(bytes: &[u8], owner: Pgid, prefixes: &mut Vec<u64>) -> Result<Layout> {
    let header = PageHeader::read(bytes)
        .ok_or_else(|| Corruption::new(owner, Reason::Other("page header past the end")))?;
    let base = bytes.as_ptr() as usize;
    let mut packed = true;
    let mut data_len = 0;
    // Each entry's data must start where the one before ended for the page to be packed.
    let mut note = |count: usize, start: usize, len: usize| {
        packed &= start == elem_off(count) + data_len;
        data_len += len;
    };
    let (leaf, count) = match header.kind() {
        Some(PageKind::Leaf) => {
            let page = LeafPage::from_header(bytes, owner, header)?;
            let count = page.len();
            let mut previous: Option<&[u8]> = None;
            for index in 0..count {
                let entry = page.entry(index)?;
                if entry.flags & !LEAF_FLAG_BUCKET != 0 {
                    return Err(Corruption::new(
                        owner,
                        Reason::UnknownElementFlags {
                            index,
                            flags: entry.flags,
                        },
                    ));
                }
                let prefix = key_prefix(entry.key);
                if !ascending(previous, prefixes.last(), entry.key, prefix) {
                    return Err(Corruption::new(owner, Reason::KeyOrder { index }));
                }
                if entry.is_bucket() {
                    BucketValue::parse(entry.value, owner)?;
                }
                previous = Some(entry.key);
                prefixes.push(prefix);
                let start = entry.key.as_ptr() as usize - base;
                note(count, start, entry.key.len() + entry.value.len());
            }
            (true, count)
        }
        Some(PageKind::Branch) => {
            let page = BranchPage::from_header(bytes, owner, header)?;
            let count = page.len();
            if count == 0 {
                return Err(Corruption::new(
                    owner,
                    Reason::Other("branch page has no children"),
                ));
            }
            let mut previous: Option<&[u8]> = None;
            for index in 0..count {
                let key = page.key(index)?;
                let prefix = key_prefix(key);
                if !ascending(previous, prefixes.last(), key, prefix) {
                    return Err(Corruption::new(owner, Reason::KeyOrder { index }));
                }
                previous = Some(key);
                prefixes.push(prefix);
                note(count, key.as_ptr() as usize - base, key.len());
            }
            (false, count)
        }
        _ => {
            return Err(Corruption::new(
                owner,
                Reason::Other("a tree points at a page that is neither a branch nor a leaf"),
            ));
        }
    };
    Ok(Layout {
        leaf,
        count,
        used: elem_off(count) + data_len,
        packed,
    })
}

/// Whether `key` (prefix `prefix`) sorts strictly after `previous` (prefix
/// `previous_prefix`), or comes first: by the prefixes, and by the keys on a tie.
#[inline]
fn ascending(
    previous: Option<&[u8]>,
    previous_prefix: Option<&u64>,
    key: &[u8],
    prefix: u64,
) -> bool {
    match (previous, previous_prefix) {
        (Some(previous), Some(&previous_prefix)) => match previous_prefix.cmp(&prefix) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => compare_keys(previous, key) == Ordering::Less,
        },
        _ => true,
    }
}

/// The checked page `bytes` laid out anew in `buf`: its elements, then each entry's data in
/// element order.
fn relay(bytes: &[u8], layout: &Layout, mut buf: Box<[u8]>) -> Box<[u8]> {
    let count = layout.count;
    let field = |index: usize, at: usize| -> usize {
        let start = elem_off(index) + at;
        u32::from_le_bytes(bytes[start..start + 4].try_into().expect("4 bytes")) as usize
    };
    let pos_at = if layout.leaf { 4 } else { 0 };
    buf[..elem_off(count)].copy_from_slice(&bytes[..elem_off(count)]);
    let mut data = elem_off(count);
    for index in 0..count {
        let len = if layout.leaf {
            field(index, 8) + field(index, 12)
        } else {
            field(index, 4)
        };
        let start = elem_off(index) + field(index, pos_at);
        buf[data..data + len].copy_from_slice(&bytes[start..start + len]);
        let pos = (data - elem_off(index)) as u32;
        let at = elem_off(index) + pos_at;
        buf[at..at + 4].copy_from_slice(&pos.to_le_bytes());
        data += len;
    }
    debug_assert_eq!(
        data, layout.used,
        "laid out anew to other bytes than counted"
    );
    buf
}

#[cfg(test)]
mod tests {
    use super::*;
    use rbolt_page::{LeafBuilder, leaf_page_size};

    const PAGE: usize = 512;

    fn leaf_entries(node: &Node) -> Vec<(u32, Vec<u8>, Vec<u8>)> {
        let page = LeafPage::inline(node.image(), Pgid(0)).unwrap();
        page.validate().unwrap();
        page.iter()
            .map(|e| {
                let e = e.unwrap();
                (e.flags, e.key.to_vec(), e.value.to_vec())
            })
            .collect()
    }

    fn leaf(arena: &mut Arena) -> Node {
        Node::empty(arena, PAGE, PAGE, true)
    }

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

    #[test]
    fn edits_keep_a_packed_page_that_reads_back() {
        let mut arena = Arena::new();
        let mut node = leaf(&mut arena);
        let mut model = std::collections::BTreeMap::new();
        let mut state = 0x1234_5678u32;
        for round in 0..2000 {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            let key = [b'k', (state % 23) as u8];
            let value = vec![round as u8; (state % 13) as usize];
            match state % 4 {
                0 => {
                    if let Ok(index) = node.search(&key) {
                        node.remove(index);
                        model.remove(key.as_slice());
                    }
                }
                _ => {
                    let existing = model.get(key.as_slice()).map_or(0, |v: &Vec<u8>| v.len());
                    let grow = if model.contains_key(key.as_slice()) {
                        value.len().saturating_sub(existing)
                    } else {
                        ELEM + key.len() + value.len()
                    };
                    if node.used() + grow <= PAGE {
                        put(&mut node, &key, &value);
                        model.insert(key.to_vec(), value);
                    }
                }
            }
            let want: Vec<_> = model
                .iter()
                .map(|(k, v)| (0, k.clone(), v.clone()))
                .collect();
            assert_eq!(leaf_entries(&node), want, "round {round}");
            let kv: usize = model.iter().map(|(k, v)| k.len() + v.len()).sum();
            assert_eq!(node.used(), leaf_page_size(model.len(), kv));
        }
    }

    #[test]
    fn loads_switch_to_the_gap_layout_and_pack_back_to_bbolts_bytes() {
        // Keys inserted out of order: the node switches layouts after a few inserts, takes
        // deletes and changed values in either, and packs into the bytes bbolt writes.
        let mut arena = Arena::new();
        let mut node = leaf(&mut arena);
        let mut model = std::collections::BTreeMap::new();
        for i in [5u8, 1, 9, 3, 7, 2, 8, 0, 6, 4] {
            put(&mut node, &[i], &vec![i; usize::from(i) + 1]);
            model.insert(vec![i], vec![i; usize::from(i) + 1]);
        }
        assert!(!node.is_packed(), "ten inserts switch to the gap layout");
        node.remove(node.search(&[3]).unwrap());
        model.remove(&vec![3]);
        put(&mut node, &[7], b"seven");
        model.insert(vec![7], b"seven".to_vec());
        put(&mut node, &[8], &[8; 9]);
        let want: Vec<_> = model
            .iter()
            .map(|(k, v)| (0, k.clone(), v.clone()))
            .collect();
        assert_eq!(leaf_entries(&node), want);
        node.pack(PAGE, PAGE, &mut arena);
        assert!(node.is_packed());
        let mut expected = vec![0u8; PAGE];
        let mut builder = LeafBuilder::new(&mut expected, Pgid(0), model.len(), 0);
        for (key, value) in &model {
            builder.push(0, key, value);
        }
        let used = builder.finish();
        assert_eq!(node.image(), &expected[..used]);
    }

    #[test]
    fn an_empty_pair_stays_inside_the_data_of_the_gap_layout() {
        // Only corrupt pages hold empty keys, but what the layout does with them must stay
        // sound: an empty pair written at the bottom of the data, then the pair it sits on
        // removed.
        let mut arena = Arena::new();
        let mut node = leaf(&mut arena);
        for i in 1..6u8 {
            put(&mut node, &[i], &[i; 3]);
        }
        assert!(!node.is_packed());
        put(&mut node, b"", b"");
        for i in (1..6u8).rev() {
            node.remove(node.search(&[i]).unwrap());
            node.check_layout();
        }
        assert_eq!(leaf_entries(&node), [(0, vec![], vec![])]);
    }

    #[test]
    fn truncate_and_append_from_move_entries_between_nodes() {
        let mut arena = Arena::new();
        let mut left = leaf(&mut arena);
        for i in 0..10u8 {
            put(&mut left, &[i], &[i; 7]);
        }
        left.ensure_packed(PAGE, &mut arena);
        let mut right = leaf(&mut arena);
        right.append_from(&left, 6..10);
        left.truncate(6);
        assert_eq!(leaf_entries(&left).len(), 6);
        assert_eq!(
            leaf_entries(&right),
            (6..10u8)
                .map(|i| (0, vec![i], vec![i; 7]))
                .collect::<Vec<_>>()
        );
        left.append_from(&right, 0..4);
        assert_eq!(
            leaf_entries(&left),
            (0..10u8)
                .map(|i| (0, vec![i], vec![i; 7]))
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn entries_sharing_bytes_are_copied_apart() {
        // Element 1's key is the first byte of element 0's value: a page that reads, but
        // whose entries take 602 bytes once apart, more than its 512.
        let mut arena = Arena::new();
        let mut page = vec![0u8; PAGE];
        PageHeader::new(Pgid(3), PageKind::Leaf, 2, 0).write(&mut page);
        let data = elem_off(2);
        page[data] = b'a';
        page[data + 1] = b'b';
        page[data + 2..data + 302].fill(7);
        for (index, start) in [(0, data), (1, data + 1)] {
            let at = elem_off(index);
            let fields = [0, (start - at) as u32, 1, 300];
            for (i, field) in fields.into_iter().enumerate() {
                page[at + 4 * i..at + 4 * i + 4].copy_from_slice(&field.to_le_bytes());
            }
        }
        let node = Node::from_page(&page, Pgid(3), Pgid(3), PAGE, &mut arena).unwrap();
        let mut first = vec![b'b'];
        first.extend([7; 299]);
        assert_eq!(
            leaf_entries(&node),
            [(0, b"a".to_vec(), first), (0, b"b".to_vec(), vec![7; 300])]
        );
        assert_eq!(node.used(), leaf_page_size(2, 602));
    }

    #[test]
    fn pages_copy_whether_packed_or_not() {
        // A page written by a builder (packed), and the same entries with their data in
        // reverse order (valid, but not how bbolt writes): both give the same node.
        let mut arena = Arena::new();
        let mut buf = vec![0u8; PAGE];
        let mut builder = LeafBuilder::new(&mut buf, Pgid(5), 3, 0);
        for i in 0..3u8 {
            builder.push(0, &[b'a' + i], &[i; 4]);
        }
        builder.finish();
        let packed = Node::from_page(&buf, Pgid(5), Pgid(5), PAGE, &mut arena).unwrap();
        let mut reversed = vec![0u8; PAGE];
        reversed[..elem_off(3)].copy_from_slice(&buf[..elem_off(3)]);
        let mut data = elem_off(3);
        for index in (0..3).rev() {
            let start = elem_off(3) + index * 5;
            reversed[data..data + 5].copy_from_slice(&buf[start..start + 5]);
            let pos = (data - elem_off(index)) as u32;
            reversed[elem_off(index) + 4..elem_off(index) + 8].copy_from_slice(&pos.to_le_bytes());
            data += 5;
        }
        let relaid = Node::from_page(&reversed, Pgid(5), Pgid(5), PAGE, &mut arena).unwrap();
        assert_eq!(leaf_entries(&packed), leaf_entries(&relaid));
        assert_eq!(packed.image(), relaid.image());
        assert_eq!(packed.pgid, Pgid(5));
    }
}
