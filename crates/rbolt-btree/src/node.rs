//! An edited node: a private copy of a page image, edited in place.
//!
//! The image is laid out exactly as bbolt lays out a page: the 16-byte header, the element
//! array, every key (and value) packed after it in element order, then free bytes to the end
//! of the buffer. An insert or a delete moves the tail of the element array and of the data by
//! the bytes it adds or removes, and corrects the relative positions (`pos`) of the elements
//! whose distance to their data changed. A node that fits its page is written as it is: spill
//! neither decodes nor encodes it, and what a put wrote into the image is the only copy of
//! that pair before the file. Only splits, merges and a buffer outgrowing its pages copy
//! entries from one image into another.
//!
//! A branch node's child is a page id, or a node of the same tree: `NODE_TAG | id` in the
//! element's page-id field until spill writes the child and puts its page id there.

use crate::arena::Arena;
use rbolt_page::{
    BRANCH_ELEMENT_SIZE, BranchPage, BucketValue, Corruption, FLAG_BRANCH, FLAG_LEAF,
    LEAF_ELEMENT_SIZE, LEAF_FLAG_BUCKET, LeafPage, PAGE_HEADER_SIZE, PageHeader, PageKind, Pgid,
    Reason, Result, compare_keys, pages_for,
};
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
}

/// An editable node (see the module documentation).
#[derive(Debug)]
pub(crate) struct Node {
    /// The image, in a buffer of a whole number of pages (empty for a node that is gone).
    buf: Box<[u8]>,
    /// Bytes of the image in use: header, elements, data.
    used: usize,
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
    /// An empty leaf or branch in `buf`.
    pub fn empty(mut buf: Box<[u8]>, leaf: bool) -> Node {
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

    /// Takes the node's buffer (leaving it gone), to recycle or to write.
    pub fn take_buffer(&mut self) -> Box<[u8]> {
        self.used = 0;
        std::mem::take(&mut self.buf)
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
        let header = PageHeader::read(bytes)
            .ok_or_else(|| Corruption::new(owner, Reason::Other("page header past the end")))?;
        // One pass checks every entry and reads where its data lies (its range in `bytes`).
        let mut ranges_packed = true;
        let mut data_len = 0;
        let mut note = |count: usize, range: Range<usize>| {
            ranges_packed &= range.start == elem_off(count) + data_len;
            data_len += range.len();
        };
        let base = bytes.as_ptr() as usize;
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
                    if previous.is_some_and(|prev| compare_keys(prev, entry.key).is_ge()) {
                        return Err(Corruption::new(owner, Reason::KeyOrder { index }));
                    }
                    if entry.is_bucket() {
                        BucketValue::parse(entry.value, owner)?;
                    }
                    previous = Some(entry.key);
                    let start = entry.key.as_ptr() as usize - base;
                    note(count, start..start + entry.key.len() + entry.value.len());
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
                    if previous.is_some_and(|prev| compare_keys(prev, key).is_ge()) {
                        return Err(Corruption::new(owner, Reason::KeyOrder { index }));
                    }
                    previous = Some(key);
                    let start = key.as_ptr() as usize - base;
                    note(count, start..start + key.len());
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
        let packed = ranges_packed;
        let used = elem_off(count) + data_len;
        // Every element is inside the span (checked above): read the layout.
        let field = |index: usize, at: usize| -> usize {
            let start = elem_off(index) + at;
            u32::from_le_bytes(bytes[start..start + 4].try_into().expect("4 bytes")) as usize
        };
        let data_range = |index: usize| -> Range<usize> {
            let (pos, len) = if leaf {
                (field(index, 4), field(index, 8) + field(index, 12))
            } else {
                (field(index, 0), field(index, 4))
            };
            let start = elem_off(index) + pos;
            start..start + len
        };
        let buf = arena.take(page_size, pages_for(used, page_size) * page_size);
        let mut node = Node::empty(buf, leaf);
        if packed {
            node.buf[..used].copy_from_slice(&bytes[..used]);
        } else {
            node.buf[..elem_off(count)].copy_from_slice(&bytes[..elem_off(count)]);
            let mut data = elem_off(count);
            for index in 0..count {
                let range = data_range(index);
                node.buf[data..data + range.len()].copy_from_slice(&bytes[range.clone()]);
                let pos = (data - elem_off(index)) as u32;
                let at = elem_off(index) + if leaf { 4 } else { 0 };
                node.buf[at..at + 4].copy_from_slice(&pos.to_le_bytes());
                data += range.len();
            }
        }
        node.used = used;
        let kind = if leaf { FLAG_LEAF } else { FLAG_BRANCH };
        node.buf[HEADER_FLAGS..HEADER_FLAGS + 2].copy_from_slice(&kind.to_le_bytes());
        node.write_header(source, 0);
        if !leaf {
            for index in 0..count {
                if node.child(index) & NODE_TAG != 0 {
                    node.set_child(index, CHILD_SANITISED);
                }
            }
        }
        node.pgid = source;
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

    /// The image: a page with this node's header, elements and data.
    #[inline]
    pub fn image(&self) -> &[u8] {
        &self.buf[..self.used]
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
        let (mut low, mut high) = (0, self.count());
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

    /// In a branch, the child whose subtree would hold `key`: the last whose separator is
    /// not above `key`, the first separator left out (it routes nothing: every key below
    /// the second goes to the first child, and until spill the first may be stale).
    #[inline]
    pub fn child_index(&self, key: &[u8]) -> usize {
        debug_assert!(!self.is_leaf(), "child index in a leaf");
        let (mut low, mut high) = (1, self.count());
        while low < high {
            let mid = low + (high - low) / 2;
            match compare_keys(self.key(mid), key) {
                Ordering::Less => low = mid + 1,
                Ordering::Greater => high = mid,
                Ordering::Equal => return mid,
            }
        }
        low - 1
    }

    /// Whether `key` sorts after every key of this leaf (false for an empty one).
    #[inline]
    pub fn is_after_last(&self, key: &[u8]) -> bool {
        let count = self.count();
        count > 0 && compare_keys(self.key(count - 1), key) == Ordering::Less
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
        let count = self.count();
        let grow = entry.size();
        debug_assert!(index <= count, "insert at {index} of {count}");
        debug_assert_eq!(
            entry.is_leaf(),
            self.is_leaf(),
            "an entry of the other kind"
        );
        debug_assert!(count < PAGE_COUNT_MAX, "a node of {count} elements is full");
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
        self.used = used + grow;
        self.set_count(count + 1);
        self.debug_check();
    }

    /// Removes entry `index`, in place.
    pub fn remove(&mut self, index: usize) {
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
        self.set_count(count - 1);
        self.debug_check();
    }

    /// Replaces leaf entry `index`'s flags and value, in place: the buffer must have room for
    /// a longer value.
    pub fn set_value(&mut self, index: usize, flags: u32, value: &[u8]) {
        debug_assert!(self.is_leaf(), "value of a branch element");
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

    /// Removes the first `removed` entries.
    pub fn remove_front(&mut self, removed: usize) {
        let count = self.count();
        debug_assert!(removed <= count, "remove {removed} of {count} entries");
        if removed == 0 {
            return;
        }
        let used = self.used;
        // The data of the first `removed` entries is the block before the next entry's.
        let data = if removed < count {
            self.data_start(removed)
        } else {
            used
        };
        let removed_data = data - elem_off(count);
        self.buf
            .copy_within(elem_off(removed)..elem_off(count), PAGE_HEADER_SIZE);
        self.buf.copy_within(data..used, elem_off(count - removed));
        // Every element moved down by the removed elements, its data by those and their data.
        self.shift_pos(0..count - removed, -(removed_data as i64));
        self.used = used - ELEM * removed - removed_data;
        self.set_count(count - removed);
        self.debug_check();
    }

    /// Keeps the first `keep` entries.
    pub fn truncate(&mut self, keep: usize) {
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
        self.set_count(keep);
        self.debug_check();
    }

    /// Appends entries `range` of `source` (a node of the same kind, keys after this one's),
    /// in place: the buffer must have room.
    pub fn append_from(&mut self, source: &Node, range: Range<usize>) {
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
        self.set_count(count + added);
        self.debug_check();
    }

    /// Puts entries `range` of `source` (a node of the same kind, keys before this one's)
    /// before this node's entries, in place: the buffer must have room.
    pub fn prepend_from(&mut self, source: &Node, range: Range<usize>) {
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
        let first = source.data_start(range.start);
        let last = range.end - 1;
        let len = source.data_start(last) + source.data_len(last) - first;
        let used = self.used;
        debug_assert!(
            used + ELEM * added + len <= self.buf.len(),
            "entries do not fit"
        );
        // Own data moves up by the new elements and data, own elements by the new elements.
        self.buf
            .copy_within(elem_off(count)..used, elem_off(count + added) + len);
        self.buf
            .copy_within(PAGE_HEADER_SIZE..elem_off(count), elem_off(added));
        self.shift_pos(added..added + count, len as i64);
        let data = elem_off(count + added);
        self.buf[data..data + len].copy_from_slice(&source.buf[first..first + len]);
        let field = self.pos_field();
        for (slot, index) in range.enumerate() {
            let to = elem_off(slot);
            let from = elem_off(index);
            self.buf[to..to + ELEM].copy_from_slice(&source.buf[from..from + ELEM]);
            let entry_data = data + (source.data_start(index) - first);
            self.write_u32(to + field, (entry_data - to) as u32);
        }
        self.used = used + ELEM * added + len;
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
        buf[..self.used].copy_from_slice(&self.buf[..self.used]);
        let old = std::mem::replace(&mut self.buf, buf);
        arena.give(page_size, old);
    }

    /// Moves the image into a buffer of exactly `n_pages` pages if it has another size.
    pub fn fit_buffer(&mut self, n_pages: usize, page_size: usize, arena: &mut Arena) {
        let len = n_pages * page_size;
        debug_assert!(self.used <= len, "the image does not fit {n_pages} pages");
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
    }

    /// Zeroes the bytes after the image, so what is written holds nothing stale.
    pub fn zero_tail(&mut self) {
        let used = self.used;
        self.buf[used..].fill(0);
    }

    /// Swaps the images of two nodes (for a root taking its only child's place).
    pub fn swap_image(&mut self, other: &mut Node) {
        std::mem::swap(&mut self.buf, &mut other.buf);
        std::mem::swap(&mut self.used, &mut other.used);
    }

    // ---- Checking ------------------------------------------------------------------------

    /// Debug builds check the layout after every edit.
    #[inline]
    fn debug_check(&self) {
        if cfg!(debug_assertions) {
            self.check_layout();
        }
    }

    /// Panics unless the image is laid out as this module says: data packed in element order
    /// right after the elements, `used` where it ends, keys strictly ascending (a branch's
    /// first key aside, which may be stale until spill).
    pub fn check_layout(&self) {
        let count = self.count();
        let mut end = elem_off(count);
        for index in 0..count {
            assert_eq!(
                self.data_start(index),
                end,
                "entry {index} of {count}: data not packed in element order"
            );
            end += self.data_len(index);
            if index > usize::from(!self.is_leaf()) {
                assert_eq!(
                    compare_keys(self.key(index - 1), self.key(index)),
                    Ordering::Less,
                    "keys {} and {index} out of order",
                    index - 1
                );
            }
        }
        assert_eq!(end, self.used, "used bytes do not end the data");
        assert!(self.used <= self.buf.len(), "image longer than its buffer");
    }
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
        Node::empty(arena.take(PAGE, PAGE), true)
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
    fn truncate_and_append_from_move_entries_between_nodes() {
        let mut arena = Arena::new();
        let mut left = leaf(&mut arena);
        for i in 0..10u8 {
            put(&mut left, &[i], &[i; 7]);
        }
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
    fn remove_front_keeps_the_rest() {
        let mut arena = Arena::new();
        for removed in 0..=6 {
            let mut node = leaf(&mut arena);
            for i in 0..6u8 {
                put(&mut node, &[i], &vec![i; usize::from(i)]);
            }
            node.remove_front(removed);
            assert_eq!(
                leaf_entries(&node),
                (removed as u8..6)
                    .map(|i| (0, vec![i], vec![i; usize::from(i)]))
                    .collect::<Vec<_>>()
            );
        }
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
