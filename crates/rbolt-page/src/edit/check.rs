//! The strict check a page passes before it becomes an image to edit, and what it finds.

use super::{
    BRANCH_KSIZE, BRANCH_POS, ELEMENT_SIZE, LEAF_KSIZE, LEAF_POS, LEAF_VSIZE, PageMut, elem_off,
    read_u32,
};
use crate::error::{Corruption, Reason, Result};
use crate::layout::PageHeader;
use crate::types::{LEAF_FLAG_BUCKET, PAGE_HEADER_SIZE, PageKind, Pgid};
use crate::view::search::{compare_keys, key_prefix};
use crate::view::{BranchPage, BucketValue, LeafPage};
use core::cmp::Ordering;

/// What [`check_tree_page`] found: the page's kind and entries, the bytes it takes once
/// packed, and whether its data is packed already. Only the check makes one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TreePageShape {
    leaf: bool,
    count: usize,
    packed_len: usize,
    packed: bool,
}

impl TreePageShape {
    /// Whether the page is a leaf (else a branch).
    #[inline]
    pub fn is_leaf(&self) -> bool {
        self.leaf
    }

    /// Number of entries.
    #[inline]
    pub fn len(&self) -> usize {
        self.count
    }

    /// Whether there are no entries.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// Bytes of the page once packed: header, elements, each entry's data once.
    #[inline]
    pub fn packed_len(&self) -> usize {
        self.packed_len
    }

    /// Whether the data already lies in element order right after the elements, each entry's
    /// once (as bbolt writes a page).
    #[inline]
    pub fn is_packed(&self) -> bool {
        self.packed
    }
}

/// How many bytes at the start of leaf or branch page `bytes` its elements use: up to the
/// furthest end of the data they point at, within `bytes` (whatever the elements say: they
/// are checked afterwards, by [`check_tree_page`]). What to copy of a page before checking
/// the copy; the whole slice when it holds no header.
#[inline]
pub fn page_data_end(bytes: &[u8]) -> usize {
    let Some(header) = PageHeader::read(bytes) else {
        return bytes.len();
    };
    let count =
        usize::from(header.count).min(bytes.len().saturating_sub(PAGE_HEADER_SIZE) / ELEMENT_SIZE);
    let leaf = header.kind() == Some(PageKind::Leaf);
    let mut end = elem_off(count);
    for index in 0..count {
        let at = elem_off(index);
        let (pos, len) = if leaf {
            (
                read_u32(bytes, at + LEAF_POS),
                u64::from(read_u32(bytes, at + LEAF_KSIZE))
                    + u64::from(read_u32(bytes, at + LEAF_VSIZE)),
            )
        } else {
            (
                read_u32(bytes, at + BRANCH_POS),
                u64::from(read_u32(bytes, at + BRANCH_KSIZE)),
            )
        };
        let data_end = at as u64 + u64::from(pos) + len;
        end = end.max(data_end.min(bytes.len() as u64) as usize);
    }
    end.min(bytes.len())
}

/// Where the data of a packed leaf or branch page `bytes` ends, read from its last element
/// alone (within `bytes`; the whole slice when it holds no header or is neither kind): what to
/// copy of a page that passed [`check_tree_page`] packed, before [`reread_checked_tree_page`]
/// reads the copy. A page whose promise was broken may have data past this end; the reread
/// then finds its entries not packed up to it and refuses the copy.
#[inline]
pub fn packed_data_end(bytes: &[u8]) -> usize {
    let Some(header) = PageHeader::read(bytes) else {
        return bytes.len();
    };
    let leaf = match header.kind() {
        Some(PageKind::Leaf) => true,
        Some(PageKind::Branch) => false,
        _ => return bytes.len(),
    };
    let count = usize::from(header.count);
    let Some(last) = count.checked_sub(1) else {
        return PAGE_HEADER_SIZE.min(bytes.len());
    };
    let at = elem_off(last);
    if at + ELEMENT_SIZE > bytes.len() {
        return bytes.len();
    }
    let end = if leaf {
        u64::from(read_u32(bytes, at + LEAF_POS))
            + u64::from(read_u32(bytes, at + LEAF_KSIZE))
            + u64::from(read_u32(bytes, at + LEAF_VSIZE))
    } else {
        u64::from(read_u32(bytes, at + BRANCH_POS)) + u64::from(read_u32(bytes, at + BRANCH_KSIZE))
    };
    (at as u64 + end).min(bytes.len() as u64) as usize
}

/// Checks a leaf or branch page whole, as a page must be before it is edited: every element
/// inside `bytes`, leaf flags known, keys strictly ascending, bucket values well formed, a
/// branch with children. `key_prefixes` receives every key's [`key_prefix`] in order (for a
/// caller that keeps them). Errors name `owner`.
#[inline]
pub fn check_tree_page(
    bytes: &[u8],
    owner: Pgid,
    key_prefixes: impl FnMut(u64),
) -> Result<TreePageShape> {
    let header = PageHeader::read(bytes).ok_or_else(|| {
        Corruption::new(
            owner,
            Reason::Truncated {
                what: "page header",
                need: PAGE_HEADER_SIZE as u64,
                have: bytes.len() as u64,
            },
        )
    })?;
    match header.kind() {
        Some(PageKind::Leaf) => {
            check_leaf(&LeafPage::from_header(bytes, owner, header)?, key_prefixes)
        }
        Some(PageKind::Branch) => check_branch(
            &BranchPage::from_header(bytes, owner, header)?,
            key_prefixes,
        ),
        _ => Err(Corruption::new(
            owner,
            Reason::NotTreePage {
                flags: header.flags,
            },
        )),
    }
}

/// The shape of a leaf or branch page that passed [`check_tree_page`] packed and whose bytes
/// have not changed since (a writer remembers such pages, see `rbolt_btree::Arena`), read
/// again without the check's costly parts: the key order, the element flags and the bucket
/// values are not looked at again. What is looked at again is what keeps the caller from
/// reading out of bounds: the kind, the element array and each entry's data lying packed
/// inside `bytes`; `None` when any of that fails (the promise was broken: run the check).
/// Unlike the check it reports no key prefixes: a caller that wants them builds them when it
/// searches.
#[inline]
pub fn reread_checked_tree_page(bytes: &[u8]) -> Option<TreePageShape> {
    let header = PageHeader::read(bytes)?;
    let leaf = match header.kind()? {
        PageKind::Leaf => true,
        PageKind::Branch => false,
        _ => return None,
    };
    let count = usize::from(header.count);
    if !leaf && count == 0 {
        return None;
    }
    let elements = bytes.get(PAGE_HEADER_SIZE..elem_off(count))?;
    let data_end = if leaf {
        packed_chain::<true>(elements)?
    } else {
        packed_chain::<false>(elements)?
    };
    (data_end <= bytes.len()).then_some(TreePageShape {
        leaf,
        count,
        packed_len: data_end,
        packed: true,
    })
}

/// Where the data of `elements` (a leaf's or a branch's element array, right after the page
/// header) ends when each entry's data starts where the one before ended, the first right
/// after the array; `None` when one does not. The sizes only add, so once the last entry ends
/// inside the page every key and value lies inside it too.
#[inline]
fn packed_chain<const LEAF: bool>(elements: &[u8]) -> Option<usize> {
    let (pos_at, key_len_at) = if LEAF {
        (LEAF_POS, LEAF_KSIZE)
    } else {
        (BRANCH_POS, BRANCH_KSIZE)
    };
    let mut data_end = elements.len() + PAGE_HEADER_SIZE;
    for (index, element) in elements.chunks_exact(ELEMENT_SIZE).enumerate() {
        let field = |at: usize| -> usize {
            let word: [u8; 4] = element[at..at + 4].try_into().expect("4 bytes");
            u32::from_le_bytes(word) as usize
        };
        if elem_off(index) + field(pos_at) != data_end {
            return None;
        }
        data_end += field(key_len_at);
        if LEAF {
            data_end += field(LEAF_VSIZE);
        }
    }
    Some(data_end)
}

/// What the check learns of a page's keys and their data as it reads them in order: whether
/// they ascend, and whether the data is packed.
struct Walk<'a, F> {
    base: usize,
    count: usize,
    previous: Option<(&'a [u8], u64)>,
    data_len: usize,
    packed: bool,
    key_prefixes: F,
}

impl<'a, F: FnMut(u64)> Walk<'a, F> {
    fn new(bytes: &[u8], count: usize, key_prefixes: F) -> Walk<'a, F> {
        Walk {
            base: bytes.as_ptr() as usize,
            count,
            previous: None,
            data_len: 0,
            packed: true,
            key_prefixes,
        }
    }

    /// The next entry: its key, and its data (`data_len` bytes from the key on); false when
    /// the key does not sort after the one before. Always inlined: it is the loop of every
    /// page copy, and called, it cost the copy a fifth more instructions (cachegrind).
    #[inline(always)]
    fn step(&mut self, key: &'a [u8], data_len: usize) -> bool {
        let prefix = key_prefix(key);
        if !ascending(self.previous, key, prefix) {
            return false;
        }
        self.previous = Some((key, prefix));
        (self.key_prefixes)(prefix);
        // Each entry's data must start where the one before ended for the page to be packed.
        let start = key.as_ptr() as usize - self.base;
        self.packed &= start == elem_off(self.count) + self.data_len;
        self.data_len += data_len;
        true
    }

    fn shape(&self, leaf: bool) -> TreePageShape {
        TreePageShape {
            leaf,
            count: self.count,
            packed_len: elem_off(self.count) + self.data_len,
            packed: self.packed,
        }
    }
}

#[inline]
fn check_leaf(page: &LeafPage<'_>, key_prefixes: impl FnMut(u64)) -> Result<TreePageShape> {
    let owner = page.pgid();
    let mut walk = Walk::new(page.bytes(), page.len(), key_prefixes);
    for index in 0..page.len() {
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
        if !walk.step(entry.key, entry.key.len() + entry.value.len()) {
            return Err(Corruption::new(owner, Reason::KeyOrder { index }));
        }
        if entry.is_bucket() {
            BucketValue::parse(entry.value, owner)?;
        }
    }
    Ok(walk.shape(true))
}

#[inline]
fn check_branch(page: &BranchPage<'_>, key_prefixes: impl FnMut(u64)) -> Result<TreePageShape> {
    let owner = page.pgid();
    if page.is_empty() {
        return Err(Corruption::new(owner, Reason::EmptyBranch));
    }
    let mut walk = Walk::new(page.bytes(), page.len(), key_prefixes);
    for index in 0..page.len() {
        let key = page.key(index)?;
        if !walk.step(key, key.len()) {
            return Err(Corruption::new(owner, Reason::KeyOrder { index }));
        }
    }
    Ok(walk.shape(false))
}

/// Whether `key` (prefix `prefix`) sorts strictly after `previous` (a key and its prefix), or
/// comes first: by the prefixes, and by the keys on a tie.
#[inline]
fn ascending(previous: Option<(&[u8], u64)>, key: &[u8], prefix: u64) -> bool {
    match previous {
        Some((previous, previous_prefix)) => match previous_prefix.cmp(&prefix) {
            Ordering::Less => true,
            Ordering::Greater => false,
            Ordering::Equal => compare_keys(previous, key) == Ordering::Less,
        },
        None => true,
    }
}

/// Lays the page `bytes`, which [`check_tree_page`] found to be `shape`, out anew in `out`
/// (at least `shape.packed_len()` bytes): its header and elements, then each entry's data in
/// element order. Entries that share bytes (a corrupt page can say so) are copied apart.
pub fn repack_into(bytes: &[u8], shape: &TreePageShape, out: &mut [u8]) {
    let source = PageMut {
        buf: bytes,
        used: shape.packed_len,
        data_low: 0,
        // Any layout whose elements point at their data: the gap layout's rules are the
        // loosest.
        gap: true,
        leaf: shape.leaf,
        inserts: 0,
    };
    source.write_packed(out);
}

/// The digest of one page extent (a page and its overflow pages, as written): XXH3-128 of its
/// bytes up to where a leaf's or branch's data ends ([`packed_data_end`](crate::packed_data_end):
/// the zeros after it are never read, and a page of another kind counts whole), seeded with
/// its page id, so that the same bytes at another id count differently.
///
/// ```
/// use rbolt_page::{Pgid, page_digest};
/// let page = [7u8; 4096];
/// assert_eq!(page_digest(Pgid(3), &page), page_digest(Pgid(3), &page));
/// assert_ne!(page_digest(Pgid(3), &page), page_digest(Pgid(4), &page));
/// assert_ne!(page_digest(Pgid(3), &page), page_digest(Pgid(3), &[7u8; 4095]));
/// ```
pub fn page_digest(pgid: crate::Pgid, bytes: &[u8]) -> u128 {
    let used = &bytes[..packed_data_end(bytes)];
    twox_hash::XxHash3_128::oneshot_with_seed(pgid.0, used)
}

impl LeafPage<'_> {
    /// Checks every entry: within the span, known flags, keys strictly ascending, bucket values
    /// well formed (the strict check, [`check_tree_page`](crate::check_tree_page)). Reading
    /// does not need this; `check` and tests do.
    pub fn validate(&self) -> Result<()> {
        check_tree_page(self.bytes(), self.pgid(), |_| {}).map(|_| ())
    }

    /// Bytes the page uses as bbolt's statistics count them (`LeafInuse`): the header, then up
    /// to the end of the last entry's value, read from the last element alone — where a packed
    /// page's data ends ([`packed_data_end`](crate::packed_data_end)); the header alone for an
    /// empty page.
    pub fn in_use_len(&self) -> usize {
        packed_data_end(self.bytes())
    }
}

impl BranchPage<'_> {
    /// Bytes the page uses as bbolt's statistics count them (`BranchInuse`): the header, then
    /// up to the end of the last element's key, read from the last element alone — where a
    /// packed page's data ends ([`packed_data_end`](crate::packed_data_end)).
    pub fn in_use_len(&self) -> usize {
        packed_data_end(self.bytes())
    }
}
