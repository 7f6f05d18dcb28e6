//! Editing a leaf or branch page image in place: [`PageMut`], the mutator beside the views,
//! and the strict check a page passes before it is edited ([`check_tree_page`]).
//!
//! An image copied from a page starts laid out exactly as bbolt lays out a page ("packed"):
//! the header, the element array, every key (and value) right after it in element order, then
//! free bytes to the end of the buffer. A delete, a changed value and the first few inserts
//! edit that image in place: they move the tail of the element array and of the data by the
//! bytes they add or remove and correct the relative positions (`pos`) of the elements whose
//! distance to their data changed. Such an image is a page as it stands.
//!
//! An image that takes more inserts (a load) switches to the layout LMDB keeps its pages in
//! ("gap"): the data moves to the end of the buffer once, and each insert then writes its
//! pair below the data and moves only the element array's tail, where a packed insert moves
//! everything after the new element, which in a load of random keys means most of a page the
//! caches no longer hold. Before such an image is written (or cut or merged) it is packed
//! again, one copy of each pair in element order: bbolt's statistics and the format
//! documentation count on written pages being packed.
//!
//! Every offset here comes from the `Pod` records of `layout.rs`. A branch element's page-id
//! field is written as the caller gives it: a caller may keep its own tags there (rbolt-btree
//! marks children that are not yet pages) as long as it replaces them before the page is
//! written. Misuse (an index out of range, an edit without room) is a programmer error and
//! panics, as the builders do; bytes from disk are checked by [`check_tree_page`] before they
//! become an image.

mod check;
mod inplace;
#[cfg(test)]
mod tests;

pub use check::{
    TreePageShape, check_tree_page, packed_data_end, page_data_end, page_digest, repack_into,
    reread_checked_tree_page,
};

use crate::error::{Corruption, Reason, Result};
use crate::layout::{BranchElement, LeafElement, PageHeader};
use crate::types::{
    BRANCH_ELEMENT_SIZE, ELEMENT_COUNT_MAX, LEAF_ELEMENT_SIZE, LEAF_FLAG_BUCKET, PAGE_HEADER_SIZE,
    PageKind, Pgid,
};
use crate::view::search::compare_keys;
use crate::view::{BranchPage, LeafPage};
use core::cmp::Ordering;
use core::mem::offset_of;

/// Inserts a packed image takes in place before it switches to the gap layout: a packed
/// insert moves everything after the new element once, the switch and the packing before
/// the image is written move (or copy) the whole image once each.
pub const PACKED_INSERTS_MAX: u16 = 3;

/// The size of one element, leaf or branch.
const ELEMENT_SIZE: usize = LEAF_ELEMENT_SIZE;
const _: () = assert!(LEAF_ELEMENT_SIZE == BRANCH_ELEMENT_SIZE);

const HEADER_ID: usize = offset_of!(PageHeader, id);
const HEADER_COUNT: usize = offset_of!(PageHeader, count);
const HEADER_OVERFLOW: usize = offset_of!(PageHeader, overflow);
const LEAF_FLAGS: usize = offset_of!(LeafElement, flags);
const LEAF_POS: usize = offset_of!(LeafElement, pos);
const LEAF_KSIZE: usize = offset_of!(LeafElement, ksize);
const LEAF_VSIZE: usize = offset_of!(LeafElement, vsize);
const BRANCH_POS: usize = offset_of!(BranchElement, pos);
const BRANCH_KSIZE: usize = offset_of!(BranchElement, ksize);
const BRANCH_PGID: usize = offset_of!(BranchElement, pgid);

/// Where element `index` starts.
#[inline]
fn elem_off(index: usize) -> usize {
    PAGE_HEADER_SIZE + ELEMENT_SIZE * index
}

#[inline]
fn read_u32(buf: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(buf[at..at + 4].try_into().expect("4 bytes"))
}

#[inline]
fn write_u32(buf: &mut [u8], at: usize, value: u32) {
    buf[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

/// An entry to write into an image.
#[derive(Clone, Copy, Debug)]
pub enum NewEntry<'a> {
    /// A leaf entry.
    Leaf {
        /// 0, or `LEAF_FLAG_BUCKET`.
        flags: u32,
        /// The key.
        key: &'a [u8],
        /// The value.
        value: &'a [u8],
    },
    /// A branch entry.
    Branch {
        /// The separator key.
        key: &'a [u8],
        /// The page-id field as written: a page id, or the caller's tag (see the module
        /// documentation).
        child: u64,
    },
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
        ELEMENT_SIZE + self.data_len()
    }

    /// Whether it is a leaf entry.
    #[inline]
    pub fn is_leaf(&self) -> bool {
        matches!(self, NewEntry::Leaf { .. })
    }

    /// Its key.
    #[inline]
    pub fn key(&self) -> &[u8] {
        match self {
            NewEntry::Leaf { key, .. } | NewEntry::Branch { key, .. } => key,
        }
    }
}

/// A leaf or branch page image, edited in place, in a buffer the caller owns (`B`: a boxed
/// slice, a vector, a borrowed slice): see the module documentation. Reads go through the
/// same views as a page's ([`PageMut::leaf`], [`PageMut::branch`]) or the accessors here.
///
/// A `PageMut` whose buffer was taken ([`PageMut::take_buffer`]) holds no image: only
/// [`PageMut::is_detached`] may be asked of it.
#[derive(Debug)]
pub struct PageMut<B> {
    /// The image, in a buffer of at least a header (empty once detached).
    buf: B,
    /// Bytes of the image as a packed page: header, elements, data. Packed, where the data
    /// ends.
    used: usize,
    /// Where the data starts, in the gap layout.
    data_low: usize,
    /// The data lies at the end of the buffer, from `data_low` on, in any order; otherwise
    /// the image is packed.
    gap: bool,
    /// A leaf (else a branch), as the header's flags say.
    leaf: bool,
    /// Inserts since the image was last packed.
    inserts: u16,
}

impl<B: Default> PageMut<B> {
    /// An image with no buffer: what is left of one whose buffer was taken.
    pub fn detached() -> PageMut<B> {
        PageMut {
            buf: B::default(),
            used: 0,
            data_low: 0,
            gap: false,
            leaf: false,
            inserts: 0,
        }
    }

    /// Takes the buffer (holding the image as it is), leaving the image detached.
    pub fn take_buffer(&mut self) -> B {
        self.used = 0;
        self.gap = false;
        std::mem::take(&mut self.buf)
    }
}

impl<B: AsRef<[u8]>> PageMut<B> {
    #[inline]
    fn bytes(&self) -> &[u8] {
        self.buf.as_ref()
    }

    /// Whether the buffer was taken: the image is gone.
    #[inline]
    pub fn is_detached(&self) -> bool {
        self.bytes().is_empty()
    }

    /// Bytes of the buffer.
    #[inline]
    pub fn buffer_len(&self) -> usize {
        self.bytes().len()
    }

    /// Number of entries.
    #[inline]
    pub fn count(&self) -> usize {
        let buf = self.bytes();
        usize::from(u16::from_le_bytes([
            buf[HEADER_COUNT],
            buf[HEADER_COUNT + 1],
        ]))
    }

    /// Whether it is a leaf (else a branch).
    #[inline]
    pub fn is_leaf(&self) -> bool {
        self.leaf
    }

    /// Bytes of the image as a packed page: header, elements, data.
    #[inline]
    pub fn used(&self) -> usize {
        self.used
    }

    /// Bytes of its entries (elements and data): [`PageMut::used`] without the header, what
    /// the entries add to another page.
    #[inline]
    pub fn entries_len(&self) -> usize {
        self.used - PAGE_HEADER_SIZE
    }

    /// The image: a page with this header, elements and data (in the gap layout, the whole
    /// buffer).
    #[inline]
    pub fn image(&self) -> &[u8] {
        if self.gap {
            self.bytes()
        } else {
            &self.bytes()[..self.used]
        }
    }

    /// Whether the image is packed (as it is written).
    #[inline]
    pub fn is_packed(&self) -> bool {
        !self.gap
    }

    /// The image read as a leaf page; errors name `owner`.
    #[inline]
    pub fn leaf(&self, owner: Pgid) -> Result<LeafPage<'_>> {
        LeafPage::from_header(self.image(), owner, self.header(owner)?)
    }

    /// The image read as a branch page; errors name `owner`.
    #[inline]
    pub fn branch(&self, owner: Pgid) -> Result<BranchPage<'_>> {
        BranchPage::from_header(self.image(), owner, self.header(owner)?)
    }

    #[inline]
    fn header(&self, owner: Pgid) -> Result<PageHeader> {
        PageHeader::read(self.bytes()).ok_or_else(|| {
            Corruption::new(
                owner,
                Reason::Truncated {
                    what: "page header",
                    need: PAGE_HEADER_SIZE as u64,
                    have: self.bytes().len() as u64,
                },
            )
        })
    }

    /// The offset of the `pos` field in an element.
    #[inline]
    fn pos_field(&self) -> usize {
        if self.leaf { LEAF_POS } else { BRANCH_POS }
    }

    #[inline]
    fn ksize(&self, index: usize) -> usize {
        let at = if self.leaf { LEAF_KSIZE } else { BRANCH_KSIZE };
        read_u32(self.bytes(), elem_off(index) + at) as usize
    }

    #[inline]
    fn vsize(&self, index: usize) -> usize {
        debug_assert!(self.leaf, "value size of a branch element");
        read_u32(self.bytes(), elem_off(index) + LEAF_VSIZE) as usize
    }

    /// Where entry `index`'s key starts.
    #[inline]
    fn data_start(&self, index: usize) -> usize {
        elem_off(index) + read_u32(self.bytes(), elem_off(index) + self.pos_field()) as usize
    }

    /// Bytes of entry `index`'s key and value.
    #[inline]
    fn data_len(&self, index: usize) -> usize {
        if self.leaf {
            self.ksize(index) + self.vsize(index)
        } else {
            self.ksize(index)
        }
    }

    /// Bytes entry `index` takes in a page: element and data.
    #[inline]
    pub fn entry_size(&self, index: usize) -> usize {
        ELEMENT_SIZE + self.data_len(index)
    }

    /// The key of entry `index`.
    #[inline]
    pub fn key(&self, index: usize) -> &[u8] {
        let start = self.data_start(index);
        &self.bytes()[start..start + self.ksize(index)]
    }

    /// The value of leaf entry `index`.
    #[inline]
    pub fn value(&self, index: usize) -> &[u8] {
        let start = self.data_start(index) + self.ksize(index);
        &self.bytes()[start..start + self.vsize(index)]
    }

    /// The flags of leaf entry `index`.
    #[inline]
    pub fn flags(&self, index: usize) -> u32 {
        debug_assert!(self.leaf, "flags of a branch element");
        read_u32(self.bytes(), elem_off(index) + LEAF_FLAGS)
    }

    /// The page-id field of branch entry `index`, as written.
    #[inline]
    pub fn child(&self, index: usize) -> u64 {
        debug_assert!(!self.leaf, "child of a leaf element");
        let at = elem_off(index) + BRANCH_PGID;
        u64::from_le_bytes(self.bytes()[at..at + 8].try_into().expect("8 bytes"))
    }

    /// The first branch entry at index `from` or after whose page-id field has a bit of `mask`
    /// set, with that field: one pass over the element array (a caller that marks some
    /// children in the field finds them without reading each entry through [`PageMut::child`]).
    #[inline]
    pub fn next_child_with(&self, from: usize, mask: u64) -> Option<(usize, u64)> {
        debug_assert!(!self.leaf, "children of a leaf");
        let count = self.count();
        if from >= count {
            return None;
        }
        let elements = &self.bytes()[elem_off(from)..elem_off(count)];
        elements
            .chunks_exact(ELEMENT_SIZE)
            .enumerate()
            .find_map(|(offset, element)| {
                let field = u64::from_le_bytes(
                    element[BRANCH_PGID..BRANCH_PGID + 8]
                        .try_into()
                        .expect("8 bytes"),
                );
                (field & mask != 0).then_some((from + offset, field))
            })
    }

    /// Whether any entry holds a bucket.
    pub fn has_buckets(&self) -> bool {
        self.leaf && (0..self.count()).any(|i| self.flags(i) & LEAF_FLAG_BUCKET != 0)
    }

    /// Whether `extra` more bytes in `extra_count` more entries keep the image within one
    /// page of `page_size` bytes (and within what a page header can count).
    #[inline]
    pub fn fits(&self, extra: usize, extra_count: usize, page_size: usize) -> bool {
        self.used + extra <= page_size && self.count() + extra_count <= ELEMENT_COUNT_MAX
    }

    /// Writes the packed image (header, elements, pairs in element order) into `out`, which
    /// holds at least [`PageMut::used`] bytes.
    pub fn write_packed(&self, out: &mut [u8]) {
        let count = self.count();
        out[..elem_off(count)].copy_from_slice(&self.bytes()[..elem_off(count)]);
        let field = self.pos_field();
        let mut data = elem_off(count);
        for index in 0..count {
            let start = self.data_start(index);
            let len = self.data_len(index);
            out[data..data + len].copy_from_slice(&self.bytes()[start..start + len]);
            write_u32(
                out,
                elem_off(index) + field,
                (data - elem_off(index)) as u32,
            );
            data += len;
        }
        debug_assert_eq!(data, self.used, "packed into other bytes than counted");
    }

    /// Writes the packed image as an inline page into `out`, exactly [`PageMut::used`] bytes:
    /// its header's page id and overflow 0, as a bucket value holds it.
    pub fn write_inline(&self, out: &mut [u8]) {
        assert_eq!(out.len(), self.used, "inline buffer of the wrong size");
        self.write_packed(out);
        let header = PageHeader::read(out).expect("an image has a header");
        PageHeader {
            id: 0,
            overflow: 0,
            ..header
        }
        .write(out);
    }

    /// Panics unless the image is laid out as the module documentation says: packed, the data
    /// in element order right after the elements and `used` where it ends; in the gap layout,
    /// every pair inside the data at the end of the buffer, the pairs apart and filling it.
    /// Keys strictly ascending (a branch's first key aside, which its editor may leave stale).
    pub fn check_layout(&self) {
        let count = self.count();
        let header = PageHeader::read(self.bytes()).expect("an image has a header");
        let kind = if self.leaf {
            PageKind::Leaf
        } else {
            PageKind::Branch
        };
        assert_eq!(
            header.kind(),
            Some(kind),
            "header flags disagree with the kind"
        );
        let data_len: usize = (0..count).map(|index| self.data_len(index)).sum();
        assert_eq!(
            elem_off(count) + data_len,
            self.used,
            "used bytes miscounted"
        );
        assert!(
            self.used <= self.bytes().len(),
            "image longer than its buffer"
        );
        if self.gap {
            self.check_gap_layout(count, data_len);
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
        for index in usize::from(!self.leaf) + 1..count {
            assert_eq!(
                compare_keys(self.key(index - 1), self.key(index)),
                Ordering::Less,
                "keys {} and {index} out of order",
                index - 1
            );
        }
    }

    fn check_gap_layout(&self, count: usize, data_len: usize) {
        assert!(
            elem_off(count) <= self.data_low,
            "elements run into the data"
        );
        assert_eq!(
            self.data_low + data_len,
            self.bytes().len(),
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
    }
}

impl<B: AsRef<[u8]> + AsMut<[u8]>> PageMut<B> {
    #[inline]
    fn bytes_mut(&mut self) -> &mut [u8] {
        self.buf.as_mut()
    }

    /// An empty leaf (or branch) with page id 0 in `buf`, which holds at least a header.
    pub fn empty(mut buf: B, leaf: bool) -> PageMut<B> {
        let kind = if leaf {
            PageKind::Leaf
        } else {
            PageKind::Branch
        };
        PageHeader::new(Pgid(0), kind, 0, 0).write(buf.as_mut());
        PageMut {
            buf,
            used: PAGE_HEADER_SIZE,
            data_low: PAGE_HEADER_SIZE,
            gap: false,
            leaf,
            inserts: 0,
        }
    }

    /// The image at the start of `buf`: a page [`check_tree_page`] found to be `shape` and
    /// packed (or laid out anew by [`repack_into`]).
    pub fn from_checked(buf: B, shape: &TreePageShape) -> PageMut<B> {
        debug_assert!(
            shape.packed_len() <= buf.as_ref().len(),
            "a page of {} bytes in a buffer of {}",
            shape.packed_len(),
            buf.as_ref().len()
        );
        let image = PageMut {
            buf,
            used: shape.packed_len(),
            data_low: 0,
            gap: false,
            leaf: shape.is_leaf(),
            inserts: 0,
        };
        image.debug_check();
        image
    }

    /// Writes the header's page id and overflow count.
    pub fn write_header(&mut self, id: Pgid, overflow: u32) {
        let buf = self.bytes_mut();
        buf[HEADER_ID..HEADER_ID + 8].copy_from_slice(&id.0.to_le_bytes());
        buf[HEADER_OVERFLOW..HEADER_OVERFLOW + 4].copy_from_slice(&overflow.to_le_bytes());
    }

    /// Moves the image into `buf` as it is laid out (in the gap layout, the data to the end of
    /// `buf`, which is then at least as long as the old buffer; packed, `buf` holds at least
    /// [`PageMut::used`] bytes) and returns the old buffer.
    pub fn move_to(&mut self, mut buf: B) -> B {
        let new_len = buf.as_ref().len();
        if self.gap {
            let count = self.count();
            let old_len = self.bytes().len();
            debug_assert!(new_len >= old_len, "the gap layout moves to larger buffers");
            let shift = new_len - old_len;
            let low = self.data_low;
            let to = buf.as_mut();
            to[..elem_off(count)].copy_from_slice(&self.bytes()[..elem_off(count)]);
            to[low + shift..].copy_from_slice(&self.bytes()[low..]);
            let old = std::mem::replace(&mut self.buf, buf);
            self.shift_pos(0..count, shift as i64);
            self.data_low = low + shift;
            self.debug_check();
            old
        } else {
            debug_assert!(
                self.used <= new_len,
                "the image does not fit {new_len} bytes"
            );
            buf.as_mut()[..self.used].copy_from_slice(&self.bytes()[..self.used]);
            let old = std::mem::replace(&mut self.buf, buf);
            self.debug_check();
            old
        }
    }

    /// Packs the image into `buf` (at least [`PageMut::used`] bytes): its pairs in element
    /// order right after the elements. Returns the old buffer.
    pub fn pack_to(&mut self, mut buf: B) -> B {
        if !self.gap {
            return self.move_to(buf);
        }
        self.write_packed(buf.as_mut());
        let old = std::mem::replace(&mut self.buf, buf);
        self.gap = false;
        self.data_low = 0;
        self.inserts = 0;
        self.debug_check();
        old
    }

    /// Turns an empty image into an empty leaf.
    pub fn make_empty_leaf(&mut self) {
        debug_assert_eq!(self.count(), 0, "only an empty image changes kind");
        let header = PageHeader::read(self.bytes()).expect("an image has a header");
        PageHeader {
            flags: PageKind::Leaf.flags(),
            ..header
        }
        .write(self.bytes_mut());
        self.leaf = true;
        self.used = PAGE_HEADER_SIZE;
        self.gap = false;
    }

    /// Zeroes the bytes after a packed image, so what is written holds nothing stale.
    pub fn zero_tail(&mut self) {
        debug_assert!(!self.gap, "an image in the gap layout: pack it first");
        let used = self.used;
        self.bytes_mut()[used..].fill(0);
    }

    /// Debug builds check the layout after every edit.
    #[inline]
    fn debug_check(&self) {
        if cfg!(debug_assertions) {
            self.check_layout();
        }
    }
}
