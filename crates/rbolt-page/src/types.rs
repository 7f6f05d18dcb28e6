//! Identifiers, constants and page kinds of bbolt's format version 2.

use core::fmt;

/// A page id: the page's byte offset in the file divided by the page size.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct Pgid(pub u64);

impl Pgid {
    /// The page id `n` pages after this one.
    #[inline]
    #[must_use]
    pub const fn add(self, n: u64) -> Pgid {
        Pgid(self.0 + n)
    }
}

impl fmt::Display for Pgid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// A transaction id. Every committed write transaction has the id of the one before plus one.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
#[repr(transparent)]
pub struct Txid(pub u64);

impl fmt::Display for Txid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// The magic number at the start of every meta.
pub const MAGIC: u32 = 0xED0C_DAED;
/// The file format version this crate reads and writes.
pub const VERSION: u32 = 2;

/// Size of the header at the start of every page.
pub const PAGE_HEADER_SIZE: usize = 16;
/// Size of one element of a branch page.
pub const BRANCH_ELEMENT_SIZE: usize = 16;
/// Size of one element of a leaf page.
pub const LEAF_ELEMENT_SIZE: usize = 16;
/// Size of the meta record that follows the page header on pages 0 and 1.
pub const META_SIZE: usize = 64;
/// Number of meta bytes covered by the checksum (everything before it).
pub const META_CHECKSUM_OFFSET: usize = 56;
/// Size of a bucket header (the start of every bucket value).
pub const BUCKET_HEADER_SIZE: usize = 16;
/// Size of one page id in a freelist page.
pub const PGID_SIZE: usize = 8;

/// The smallest page size this crate accepts in a meta: the smallest page a meta fits in.
/// Go bbolt checks a meta's magic, version and checksum but not its page size, and takes any
/// `Options.PageSize` when it creates a file, powers of two or not; below this a meta page
/// would overlap the next page.
pub const PAGE_SIZE_MIN: u32 = (PAGE_HEADER_SIZE + META_SIZE) as u32;
/// The largest page size this crate accepts in a meta. The field holds up to 4 GiB, and Go
/// bbolt would create such a file, but an empty file is four pages and every commit writes a
/// meta page: past 1 GiB a page is no longer a unit anyone stores data in.
pub const PAGE_SIZE_MAX: u32 = 1 << 30;
/// Page sizes up to this are found by scanning the file for meta 1 when meta 0 is damaged
/// (powers of two are found up to `PAGE_SIZE_MAX` by probing). Go bbolt's own probe stops at
/// 16 MiB too, and only looks at powers of two.
pub const PAGE_SIZE_SCAN_MAX: u32 = 16 * 1024 * 1024;

/// The freelist page id a meta carries when the freelist is not persisted.
pub const PGID_NO_FREELIST: Pgid = Pgid(u64::MAX);

/// The largest key bbolt accepts.
pub const KEY_SIZE_MAX: usize = 32768;
/// The largest value bbolt accepts.
pub const VALUE_SIZE_MAX: usize = (1 << 31) - 2;

/// The most elements a branch or leaf page holds: its header counts them in 16 bits.
pub const ELEMENT_COUNT_MAX: usize = u16::MAX as usize;

/// The freelist page header count meaning "the real count is the first id slot".
pub const FREELIST_COUNT_OVERFLOW: u16 = 0xFFFF;

/// Page header flag of a branch page.
pub const FLAG_BRANCH: u16 = 0x01;
/// Page header flag of a leaf page.
pub const FLAG_LEAF: u16 = 0x02;
/// Page header flag of a meta page.
pub const FLAG_META: u16 = 0x04;
/// Page header flag of a freelist page.
pub const FLAG_FREELIST: u16 = 0x10;

/// Leaf element flag: the value is a bucket (a header, possibly followed by an inline page).
pub const LEAF_FLAG_BUCKET: u32 = 0x01;

/// The kind of a page, from its header flags. Exactly one flag is ever set.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum PageKind {
    /// Interior node of a B+tree: keys and child page ids.
    Branch,
    /// Bottom node of a B+tree: keys and values.
    Leaf,
    /// One of the two meta pages (0 and 1).
    Meta,
    /// The persisted list of free page ids.
    Freelist,
}

impl PageKind {
    /// The kind the header flags name, if they name exactly one.
    #[inline]
    pub const fn from_flags(flags: u16) -> Option<PageKind> {
        match flags {
            FLAG_BRANCH => Some(PageKind::Branch),
            FLAG_LEAF => Some(PageKind::Leaf),
            FLAG_META => Some(PageKind::Meta),
            FLAG_FREELIST => Some(PageKind::Freelist),
            _ => None,
        }
    }

    /// The header flags of this kind.
    #[inline]
    pub const fn flags(self) -> u16 {
        match self {
            PageKind::Branch => FLAG_BRANCH,
            PageKind::Leaf => FLAG_LEAF,
            PageKind::Meta => FLAG_META,
            PageKind::Freelist => FLAG_FREELIST,
        }
    }

    /// The lowercase name bbolt's tools print.
    pub const fn name(self) -> &'static str {
        match self {
            PageKind::Branch => "branch",
            PageKind::Leaf => "leaf",
            PageKind::Meta => "meta",
            PageKind::Freelist => "freelist",
        }
    }
}

impl fmt::Display for PageKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
