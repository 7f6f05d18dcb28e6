//! Builders that write pages into caller-provided buffers.
//!
//! The caller computes the size first (`leaf_page_size`, `branch_page_size`,
//! `freelist_page_size`), obtains a buffer of that many pages, then writes into it. Nothing
//! here allocates. Misuse (a buffer too small, more pushes than announced) is a programmer
//! error and panics; these functions never see bytes from disk.

use crate::layout::{BootId, BranchElement, BucketHeader, LeafElement, Meta, PageHeader};
use crate::types::{
    BRANCH_ELEMENT_SIZE, BUCKET_HEADER_SIZE, FREELIST_COUNT_OVERFLOW, LEAF_ELEMENT_SIZE,
    PAGE_HEADER_SIZE, PGID_SIZE, PageKind, Pgid,
};
use crate::view::{META_PAGE_LEN, META_PAGE_READ_LEN};

/// Bytes a leaf page needs for `count` entries whose keys and values total `kv_len` bytes.
#[inline]
pub const fn leaf_page_size(count: usize, kv_len: usize) -> usize {
    PAGE_HEADER_SIZE + count * LEAF_ELEMENT_SIZE + kv_len
}

/// Bytes one leaf entry takes in its page: its element, key and value.
#[inline]
pub const fn leaf_entry_size(key_len: usize, value_len: usize) -> usize {
    LEAF_ELEMENT_SIZE + key_len + value_len
}

/// Bytes a branch page needs for `count` children whose keys total `key_len` bytes.
#[inline]
pub const fn branch_page_size(count: usize, key_len: usize) -> usize {
    PAGE_HEADER_SIZE + count * BRANCH_ELEMENT_SIZE + key_len
}

/// Bytes a leaf or branch page needs for entries that take `entries_len` bytes, each its
/// element and its data (a leaf entry `LEAF_ELEMENT_SIZE` and its key and value, a branch
/// entry `BRANCH_ELEMENT_SIZE` and its key).
#[inline]
pub const fn element_page_size(entries_len: usize) -> usize {
    PAGE_HEADER_SIZE + entries_len
}

/// Bytes a freelist page needs for `count` ids (one slot more from 0xFFFF ids on).
#[inline]
pub const fn freelist_page_size(count: usize) -> usize {
    let slots = if count >= FREELIST_COUNT_OVERFLOW as usize {
        count + 1
    } else {
        count
    };
    PAGE_HEADER_SIZE + slots * PGID_SIZE
}

/// Bytes of an inline bucket value whose leaf page needs `page_len` bytes.
#[inline]
pub const fn inline_bucket_size(page_len: usize) -> usize {
    BUCKET_HEADER_SIZE + page_len
}

/// Number of pages of `page_size` bytes that `len` bytes occupy (at least one).
#[inline]
pub const fn pages_for(len: usize, page_size: usize) -> usize {
    if len == 0 { 1 } else { len.div_ceil(page_size) }
}

/// Writes the header of a leaf or branch page of `count` elements of `element_size` bytes
/// and returns where its data area starts (just past the elements).
///
/// # Panics
/// When `count` exceeds `u16::MAX` or the elements do not fit in `buf`.
fn start_page(
    buf: &mut [u8],
    pgid: Pgid,
    kind: PageKind,
    count: usize,
    element_size: usize,
    overflow: u32,
) -> usize {
    let count16 = u16::try_from(count).expect("page element count exceeds u16::MAX");
    let data = PAGE_HEADER_SIZE + count * element_size;
    assert!(data <= buf.len(), "page buffer too small for its elements");
    PageHeader::new(pgid, kind, count16, overflow).write(buf);
    data
}

/// Writes a leaf page, one entry at a time in key order.
#[derive(Debug)]
pub struct LeafBuilder<'b> {
    buf: &'b mut [u8],
    count: usize,
    index: usize,
    data: usize,
}

impl<'b> LeafBuilder<'b> {
    /// Starts a leaf page with `count` entries in `buf` (its whole span), writing the header.
    ///
    /// # Panics
    /// When `count` exceeds `u16::MAX` or the elements do not fit in `buf`.
    pub fn new(buf: &'b mut [u8], pgid: Pgid, count: usize, overflow: u32) -> LeafBuilder<'b> {
        let data = start_page(
            buf,
            pgid,
            PageKind::Leaf,
            count,
            LEAF_ELEMENT_SIZE,
            overflow,
        );
        LeafBuilder {
            buf,
            count,
            index: 0,
            data,
        }
    }

    /// Appends the next entry (keys must come in ascending order).
    ///
    /// # Panics
    /// When more entries are pushed than announced or they do not fit.
    #[inline]
    pub fn push(&mut self, flags: u32, key: &[u8], value: &[u8]) {
        self.push_with(flags, key, value.len())
            .copy_from_slice(value);
    }

    /// Reserves the next entry's value of `value_len` bytes and returns it to be filled in
    /// (for bucket values, written in place).
    #[inline]
    pub fn push_with(&mut self, flags: u32, key: &[u8], value_len: usize) -> &mut [u8] {
        assert!(self.index < self.count, "more leaf entries than announced");
        let elem_offset = PAGE_HEADER_SIZE + self.index * LEAF_ELEMENT_SIZE;
        let elem = LeafElement {
            flags,
            pos: (self.data - elem_offset) as u32,
            ksize: key.len() as u32,
            vsize: value_len as u32,
        };
        self.buf[elem_offset..elem_offset + LEAF_ELEMENT_SIZE]
            .copy_from_slice(bytemuck::bytes_of(&elem));
        let key_end = self.data + key.len();
        self.buf[self.data..key_end].copy_from_slice(key);
        let value_end = key_end + value_len;
        self.data = value_end;
        self.index += 1;
        &mut self.buf[key_end..value_end]
    }

    /// Finishes the page and returns the number of bytes written.
    pub fn finish(self) -> usize {
        debug_assert_eq!(self.index, self.count, "fewer leaf entries than announced");
        self.data
    }
}

/// Writes a branch page, one child at a time in key order.
#[derive(Debug)]
pub struct BranchBuilder<'b> {
    buf: &'b mut [u8],
    count: usize,
    index: usize,
    data: usize,
}

impl<'b> BranchBuilder<'b> {
    /// Starts a branch page with `count` children in `buf` (its whole span), writing the header.
    ///
    /// # Panics
    /// When `count` exceeds `u16::MAX` or the elements do not fit in `buf`.
    pub fn new(buf: &'b mut [u8], pgid: Pgid, count: usize, overflow: u32) -> BranchBuilder<'b> {
        let data = start_page(
            buf,
            pgid,
            PageKind::Branch,
            count,
            BRANCH_ELEMENT_SIZE,
            overflow,
        );
        BranchBuilder {
            buf,
            count,
            index: 0,
            data,
        }
    }

    /// Appends the next child with its separator key.
    ///
    /// # Panics
    /// When more children are pushed than announced or they do not fit.
    #[inline]
    pub fn push(&mut self, key: &[u8], child: Pgid) {
        assert!(
            self.index < self.count,
            "more branch children than announced"
        );
        let elem_offset = PAGE_HEADER_SIZE + self.index * BRANCH_ELEMENT_SIZE;
        let elem = BranchElement {
            pos: (self.data - elem_offset) as u32,
            ksize: key.len() as u32,
            pgid: child.0,
        };
        self.buf[elem_offset..elem_offset + BRANCH_ELEMENT_SIZE]
            .copy_from_slice(bytemuck::bytes_of(&elem));
        let key_end = self.data + key.len();
        self.buf[self.data..key_end].copy_from_slice(key);
        self.data = key_end;
        self.index += 1;
    }

    /// Finishes the page and returns the number of bytes written.
    pub fn finish(self) -> usize {
        debug_assert_eq!(
            self.index, self.count,
            "fewer branch children than announced"
        );
        self.data
    }
}

/// Writes a freelist page header for `count` ids and returns the id slots (exactly
/// `count * 8` bytes) for the caller to fill in ascending order with `write_pgid`.
///
/// # Panics
/// When the ids do not fit in `buf`.
pub fn write_freelist_header(buf: &mut [u8], pgid: Pgid, count: usize, overflow: u32) -> &mut [u8] {
    let size = freelist_page_size(count);
    assert!(size <= buf.len(), "freelist page buffer too small");
    let extended = count >= FREELIST_COUNT_OVERFLOW as usize;
    let header_count = if extended {
        FREELIST_COUNT_OVERFLOW
    } else {
        count as u16
    };
    PageHeader::new(pgid, PageKind::Freelist, header_count, overflow).write(buf);
    let mut start = PAGE_HEADER_SIZE;
    if extended {
        buf[start..start + PGID_SIZE].copy_from_slice(&(count as u64).to_le_bytes());
        start += PGID_SIZE;
    }
    &mut buf[start..size]
}

/// Writes `pgid` into slot `index` of the id slots `write_freelist_header` returned.
#[inline]
pub fn write_pgid(slots: &mut [u8], index: usize, pgid: Pgid) {
    let start = index * PGID_SIZE;
    slots[start..start + PGID_SIZE].copy_from_slice(&pgid.0.to_le_bytes());
}

/// The id slots `write_freelist_header` returned, one array a slot, for a writer that fills
/// them in order with [`set_pgid_slot`]; `None` when `slots` is not a whole number of slots.
#[inline]
pub fn pgid_slots(slots: &mut [u8]) -> Option<&mut [[u8; PGID_SIZE]]> {
    let (whole, rest) = slots.as_chunks_mut::<PGID_SIZE>();
    rest.is_empty().then_some(whole)
}

/// Writes `pgid` into one slot of [`pgid_slots`].
#[inline]
pub fn set_pgid_slot(slot: &mut [u8; PGID_SIZE], pgid: Pgid) {
    *slot = pgid.0.to_le_bytes();
}

/// Writes a whole freelist page of `ids` (ascending) and returns the bytes written.
pub fn write_freelist(
    buf: &mut [u8],
    pgid: Pgid,
    overflow: u32,
    ids: impl ExactSizeIterator<Item = Pgid>,
) -> usize {
    let count = ids.len();
    let slots = write_freelist_header(buf, pgid, count, overflow);
    let mut written = 0;
    for (index, id) in ids.enumerate() {
        write_pgid(slots, index, id);
        written += 1;
    }
    assert_eq!(written, count, "freelist iterator lied about its length");
    freelist_page_size(count)
}

/// Writes a meta page for `meta` into `buf` (at least 80 bytes): the header with id
/// `txid % 2`, and the meta with its checksum computed. Returns the meta as written.
pub fn write_meta(buf: &mut [u8], meta: &Meta) -> Meta {
    write_meta_in_slot(buf, meta, meta.txid % 2)
}

/// Writes a durable meta page for `meta` into `buf` as meta page `slot` (0 or 1), whatever its
/// txid: as [`write_meta`], for tools that rewrite a file's metas by hand (the CLI's
/// `surgery`). Returns the meta as written, its checksum computed.
pub fn write_meta_in_slot(buf: &mut [u8], meta: &Meta, slot: u64) -> Meta {
    let mut meta = *meta;
    meta.checksum = meta.compute_checksum();
    PageHeader::new(Pgid(slot), PageKind::Meta, 0, 0).write(buf);
    buf[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + crate::META_SIZE]
        .copy_from_slice(bytemuck::bytes_of(&meta));
    meta
}

/// Writes a non-durable meta page for `meta` into `buf` (at least [`META_PAGE_READ_LEN`]
/// bytes): as [`write_meta`], but with the checksum of [`Meta::compute_non_durable_checksum`]
/// and `boot_id` and `digest` (of the pages written since the last durable meta, see
/// [`PagesDigest`](crate::PagesDigest)) right after the record, in the page's first sector
/// with it, so that a torn write cannot keep one without the other. Returns the meta as
/// written.
///
/// Such a meta is rbolt's own: a commit that skipped its syncs writes it, so that a process
/// that crashes keeps the commit (the page cache survives it), while a power loss, which may
/// have dropped its data pages, cannot bring it back: after a reboot the boot id differs and
/// rbolt opens the durable meta in the other slot. Go bbolt sees a bad checksum and does too.
pub fn write_meta_non_durable(
    buf: &mut [u8],
    meta: &Meta,
    boot_id: &BootId,
    digest: &crate::PagesDigest,
) -> Meta {
    let mut meta = *meta;
    meta.checksum = meta.compute_non_durable_checksum(boot_id, digest);
    PageHeader::new(Pgid(meta.txid % 2), PageKind::Meta, 0, 0).write(buf);
    buf[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + crate::META_SIZE]
        .copy_from_slice(bytemuck::bytes_of(&meta));
    let digest_at = META_PAGE_LEN + crate::BOOT_ID_SIZE;
    buf[META_PAGE_LEN..digest_at].copy_from_slice(boot_id);
    buf[digest_at..META_PAGE_READ_LEN].copy_from_slice(digest);
    meta
}

/// Pages an empty database takes: two metas, an empty freelist, an empty root leaf.
pub const EMPTY_DB_PAGES: usize = 4;

/// The start of each of the four pages of a new, empty database (what Go bbolt's `init`
/// writes): metas with txids 0 and 1 on pages 0 and 1, the empty freelist on page 2, the empty
/// root leaf on page 3, high-water mark 4. Every other byte of the four pages is zero.
///
/// # Panics
/// When `page_size` cannot hold a meta page.
pub fn empty_db_prefixes(page_size: usize) -> [[u8; META_PAGE_LEN]; EMPTY_DB_PAGES] {
    assert!(
        page_size >= META_PAGE_LEN,
        "page size {page_size} cannot hold a meta page"
    );
    let mut pages = [[0u8; META_PAGE_LEN]; EMPTY_DB_PAGES];
    for txid in 0..2u64 {
        let meta = Meta {
            magic: crate::MAGIC,
            version: crate::VERSION,
            page_size: page_size as u32,
            flags: 0,
            root: BucketHeader {
                root: 3,
                sequence: 0,
            },
            freelist: 2,
            pgid: EMPTY_DB_PAGES as u64,
            txid,
            checksum: 0,
        };
        write_meta(&mut pages[txid as usize], &meta);
    }
    write_freelist(&mut pages[2], Pgid(2), 0, std::iter::empty());
    LeafBuilder::new(&mut pages[3], Pgid(3), 0, 0).finish();
    pages
}

/// Writes the image of a new, empty database into `buf` (exactly `EMPTY_DB_PAGES` pages of
/// `page_size` bytes): the [`empty_db_prefixes`], zeros elsewhere.
///
/// # Panics
/// When `buf` is not exactly four pages long or `page_size` cannot hold a meta page.
pub fn write_empty_db(buf: &mut [u8], page_size: usize) {
    assert_eq!(
        buf.len(),
        EMPTY_DB_PAGES * page_size,
        "an empty database is four pages"
    );
    buf.fill(0);
    for (index, prefix) in empty_db_prefixes(page_size).iter().enumerate() {
        let start = index * page_size;
        buf[start..start + META_PAGE_LEN].copy_from_slice(prefix);
    }
}

/// Writes the header of a bucket value into `buf` and returns the bytes after it, where an
/// inline bucket's page goes (`buf` is `inline_bucket_size(page_len)` bytes for one).
///
/// # Panics
/// When `buf` is shorter than a bucket header.
#[inline]
pub fn write_bucket_header(buf: &mut [u8], header: BucketHeader) -> &mut [u8] {
    header.write(buf);
    &mut buf[BUCKET_HEADER_SIZE..]
}

/// The image of an empty leaf page with page id 0: a new tree's root until its first edit,
/// and the inline page of a new bucket.
pub const EMPTY_LEAF: [u8; PAGE_HEADER_SIZE] =
    PageHeader::new(Pgid(0), PageKind::Leaf, 0, 0).to_bytes();

/// The value of a new, empty bucket: a header (root 0, sequence 0) and an empty inline leaf.
pub const EMPTY_BUCKET_VALUE: [u8; inline_bucket_size(EMPTY_LEAF.len())] = {
    let mut value = [0u8; inline_bucket_size(EMPTY_LEAF.len())];
    // The header is all zeros: root 0 (inline), sequence 0.
    let mut index = 0;
    while index < EMPTY_LEAF.len() {
        value[BUCKET_HEADER_SIZE + index] = EMPTY_LEAF[index];
        index += 1;
    }
    value
};
