//! Typed, bounds-checked views over page bytes read from disk.
//!
//! A view borrows the bytes of a page's whole span (the page and its overflow pages). Making a
//! view checks the header; reading an element checks that element. Nothing here trusts a byte
//! it has not checked, and nothing panics on any input.

pub(crate) mod search;

use crate::error::{Corruption, Reason, Result};
use crate::layout::{
    BOOT_ID_SIZE, BootId, BranchElement, BucketHeader, LeafElement, Meta, PageHeader,
};
use crate::types::{
    BRANCH_ELEMENT_SIZE, BUCKET_HEADER_SIZE, FLAG_META, FREELIST_COUNT_OVERFLOW, LEAF_ELEMENT_SIZE,
    LEAF_FLAG_BUCKET, MAGIC, META_SIZE, PAGE_HEADER_SIZE, PAGE_SIZE_MAX, PAGE_SIZE_MIN,
    PAGE_SIZE_SCAN_MAX, PGID_NO_FREELIST, PGID_SIZE, PageKind, Pgid, VERSION,
};
use crate::view::search::compare_keys;

/// The number of bytes of a page with `overflow` extra pages, or `None` past `usize`.
#[inline]
pub fn span_len(page_size: usize, overflow: u32) -> Option<usize> {
    page_size.checked_mul(overflow as usize + 1)
}

/// Checks that `pgid` is a page a tree or the freelist may point at: not a meta page, and
/// below the high-water mark.
#[inline]
pub fn check_pgid(what: &'static str, owner: Pgid, pgid: Pgid, high_water: Pgid) -> Result<()> {
    if pgid.0 < 2 || pgid.0 >= high_water.0 {
        return Err(Corruption::new(
            owner,
            Reason::PgidOutOfBounds {
                what,
                pgid: pgid.0,
                high_water: high_water.0,
            },
        ));
    }
    Ok(())
}

/// Checks that a page at `pgid` with `overflow` extra pages ends below the high-water mark.
#[inline]
pub fn check_overflow(pgid: Pgid, overflow: u32, high_water: Pgid) -> Result<()> {
    match pgid.0.checked_add(u64::from(overflow)) {
        Some(last) if last < high_water.0 => Ok(()),
        _ => Err(Corruption::new(
            pgid,
            Reason::OverflowOutOfBounds { overflow },
        )),
    }
}

#[cold]
fn truncated(pgid: Pgid, what: &'static str, need: u64, have: usize) -> Corruption {
    Corruption::new(
        pgid,
        Reason::Truncated {
            what,
            need,
            have: have as u64,
        },
    )
}

/// Any page: its header, checked against the id it was read as, and the bytes of its span.
#[derive(Clone, Copy, Debug)]
pub struct PageRef<'a> {
    bytes: &'a [u8],
    header: PageHeader,
    pgid: Pgid,
}

impl<'a> PageRef<'a> {
    /// The page read as `pgid` from `bytes` (its span, or at least its header). The header must
    /// name `pgid`.
    pub fn new(bytes: &'a [u8], pgid: Pgid) -> Result<PageRef<'a>> {
        let header = PageHeader::read(bytes)
            .ok_or_else(|| truncated(pgid, "page header", PAGE_HEADER_SIZE as u64, bytes.len()))?;
        if header.id != pgid.0 {
            return Err(Corruption::new(
                pgid,
                Reason::IdMismatch { found: header.id },
            ));
        }
        Ok(PageRef {
            bytes,
            header,
            pgid,
        })
    }

    /// The page's header.
    #[inline]
    pub fn header(&self) -> PageHeader {
        self.header
    }

    /// The id the page was read as.
    #[inline]
    pub fn pgid(&self) -> Pgid {
        self.pgid
    }

    /// The bytes given for the page.
    #[inline]
    pub fn bytes(&self) -> &'a [u8] {
        self.bytes
    }

    /// The page's kind, or `UnknownFlags`.
    pub fn kind(&self) -> Result<PageKind> {
        self.header
            .kind()
            .ok_or_else(|| Corruption::new(self.pgid, Reason::UnknownFlags(self.header.flags)))
    }

    /// The page as a leaf.
    pub fn leaf(&self) -> Result<LeafPage<'a>> {
        LeafPage::from_header(self.bytes, self.pgid, self.header)
    }

    /// The page as a branch.
    pub fn branch(&self) -> Result<BranchPage<'a>> {
        BranchPage::from_header(self.bytes, self.pgid, self.header)
    }

    /// The page as a freelist.
    pub fn freelist(&self) -> Result<FreelistPage<'a>> {
        FreelistPage::from_header(self.bytes, self.pgid, self.header)
    }

    /// The page as a meta page: checks magic, version and checksum.
    pub fn meta(&self) -> Result<Meta> {
        expect_kind(self.pgid, self.header, PageKind::Meta)?;
        read_meta_record(self.bytes, self.pgid)
    }
}

#[inline]
fn expect_kind(pgid: Pgid, header: PageHeader, expected: PageKind) -> Result<()> {
    if header.flags != expected.flags() {
        return Err(Corruption::new(
            pgid,
            Reason::WrongKind {
                expected,
                flags: header.flags,
            },
        ));
    }
    Ok(())
}

/// Splits off the element array of a branch or leaf page, checking the count fits.
#[inline]
fn element_array(bytes: &[u8], pgid: Pgid, count: u16) -> Result<&[[u8; 16]]> {
    let count = usize::from(count);
    let elements = bytes.get(PAGE_HEADER_SIZE..).unwrap_or_default();
    let (chunks, _) = elements.as_chunks::<16>();
    chunks.get(..count).ok_or_else(|| {
        Corruption::new(
            pgid,
            Reason::CountTooLarge {
                count: count as u64,
                capacity: chunks.len() as u64,
            },
        )
    })
}

/// The accessors leaf and branch pages share: construction from a read header, the id, the
/// span, the element count and the raw elements.
macro_rules! element_page_accessors {
    ($page:ident, $element:ty, $kind:expr, $element_size:expr, $what:literal, $name:literal, $key_doc:literal) => {
        #[inline]
        #[doc = concat!("The ", $name, " page whose header the caller already read from `bytes` (and")]
        /// checked names `pgid`): checks the kind and that the elements fit.
        pub fn from_header(bytes: &'a [u8], pgid: Pgid, header: PageHeader) -> Result<$page<'a>> {
            expect_kind(pgid, header, $kind)?;
            let elems = element_array(bytes, pgid, header.count)?;
            Ok($page { pgid, bytes, elems })
        }

        /// The page id it was read as (for a leaf stored inline in a bucket value, its owner).
        #[inline]
        pub fn pgid(&self) -> Pgid {
            self.pgid
        }

        /// The bytes of the page's span.
        #[inline]
        pub fn bytes(&self) -> &'a [u8] {
            self.bytes
        }

        #[doc = concat!("Number of ", $what, ".")]
        #[inline]
        pub fn len(&self) -> usize {
            self.elems.len()
        }

        #[doc = concat!("Whether there are no ", $what, ".")]
        #[inline]
        pub fn is_empty(&self) -> bool {
            self.elems.is_empty()
        }

        /// The raw element `index`.
        #[inline]
        pub fn element(&self, index: usize) -> Option<$element> {
            self.elems.get(index).map(|raw| bytemuck::cast(*raw))
        }

        #[inline]
        fn element_or_err(&self, index: usize) -> Result<$element> {
            self.element(index).ok_or_else(|| {
                Corruption::new(
                    self.pgid,
                    Reason::Other(concat!($name, " element index out of range")),
                )
            })
        }

        #[doc = $key_doc]
        #[inline]
        pub fn key(&self, index: usize) -> Result<&'a [u8]> {
            let elem = self.element_or_err(index)?;
            let start = PAGE_HEADER_SIZE + index * $element_size + elem.pos as usize;
            let end = start + elem.ksize as usize;
            self.bytes
                .get(start..end)
                .ok_or_else(|| self.out_of_bounds(index, end))
        }

        #[cold]
        fn out_of_bounds(&self, index: usize, end: usize) -> Corruption {
            Corruption::new(
                self.pgid,
                Reason::ElementOutOfBounds {
                    index,
                    end: end as u64,
                    span: self.bytes.len() as u64,
                },
            )
        }
    };
}

/// A leaf page: sorted keys with their values (or bucket values).
#[derive(Clone, Copy, Debug)]
pub struct LeafPage<'a> {
    pgid: Pgid,
    bytes: &'a [u8],
    elems: &'a [[u8; LEAF_ELEMENT_SIZE]],
}

/// One entry of a leaf page.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LeafEntry<'a> {
    /// 0, or `LEAF_FLAG_BUCKET`.
    pub flags: u32,
    /// The key.
    pub key: &'a [u8],
    /// The value (a bucket value when `flags` has `LEAF_FLAG_BUCKET`).
    pub value: &'a [u8],
}

impl LeafEntry<'_> {
    /// Whether the value is a bucket.
    #[inline]
    pub fn is_bucket(&self) -> bool {
        self.flags & LEAF_FLAG_BUCKET != 0
    }
}

impl<'a> LeafPage<'a> {
    /// The leaf page read as `pgid` from the bytes of its span.
    pub fn new(bytes: &'a [u8], pgid: Pgid) -> Result<LeafPage<'a>> {
        PageRef::new(bytes, pgid)?.leaf()
    }

    /// The leaf page stored inline in a bucket value (its header id is not checked).
    /// `owner` names the page holding the value, for errors.
    pub fn inline(bytes: &'a [u8], owner: Pgid) -> Result<LeafPage<'a>> {
        let header = PageHeader::read(bytes).ok_or_else(|| {
            truncated(
                owner,
                "inline page header",
                PAGE_HEADER_SIZE as u64,
                bytes.len(),
            )
        })?;
        LeafPage::from_header(bytes, owner, header)
    }

    element_page_accessors!(
        LeafPage,
        LeafElement,
        PageKind::Leaf,
        LEAF_ELEMENT_SIZE,
        "entries",
        "leaf",
        "The key of entry `index`."
    );

    /// The value of entry `index`.
    #[inline]
    pub fn value(&self, index: usize) -> Result<&'a [u8]> {
        let elem = self.element_or_err(index)?;
        let start =
            PAGE_HEADER_SIZE + index * LEAF_ELEMENT_SIZE + elem.pos as usize + elem.ksize as usize;
        let end = start + elem.vsize as usize;
        self.bytes
            .get(start..end)
            .ok_or_else(|| self.out_of_bounds(index, end))
    }

    /// Entry `index`: flags, key and value.
    #[inline]
    pub fn entry(&self, index: usize) -> Result<LeafEntry<'a>> {
        let elem = self.element_or_err(index)?;
        let key_start = PAGE_HEADER_SIZE + index * LEAF_ELEMENT_SIZE + elem.pos as usize;
        let key_end = key_start + elem.ksize as usize;
        let value_end = key_end + elem.vsize as usize;
        let kv = self
            .bytes
            .get(key_start..value_end)
            .ok_or_else(|| self.out_of_bounds(index, value_end))?;
        let (key, value) = kv.split_at(elem.ksize as usize);
        Ok(LeafEntry {
            flags: elem.flags,
            key,
            value,
        })
    }

    /// The entries in page order, each read as by `entry`.
    pub fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = Result<LeafEntry<'a>>> + ExactSizeIterator + 'a {
        let page = *self;
        (0..self.len()).map(move |index| page.entry(index))
    }

    /// Exact-match search: `Ok(index)` of `key`, or `Err(index)` where it would be inserted.
    #[inline]
    pub fn search(&self, key: &[u8]) -> Result<core::result::Result<usize, usize>> {
        crate::view::search::search(self, key)
    }

    /// Number of bytes the page uses: header, elements, keys and values.
    pub fn payload_len(&self) -> Result<usize> {
        let mut end = PAGE_HEADER_SIZE + self.len() * LEAF_ELEMENT_SIZE;
        for index in 0..self.len() {
            let elem = self.element_or_err(index)?;
            let value_end = PAGE_HEADER_SIZE
                + index * LEAF_ELEMENT_SIZE
                + elem.pos as usize
                + elem.ksize as usize
                + elem.vsize as usize;
            end = end.max(value_end);
        }
        Ok(end)
    }
}

/// A branch page: sorted separator keys with their child pages.
#[derive(Clone, Copy, Debug)]
pub struct BranchPage<'a> {
    pgid: Pgid,
    bytes: &'a [u8],
    elems: &'a [[u8; BRANCH_ELEMENT_SIZE]],
}

impl<'a> BranchPage<'a> {
    /// The branch page read as `pgid` from the bytes of its span.
    pub fn new(bytes: &'a [u8], pgid: Pgid) -> Result<BranchPage<'a>> {
        PageRef::new(bytes, pgid)?.branch()
    }

    element_page_accessors!(
        BranchPage,
        BranchElement,
        PageKind::Branch,
        BRANCH_ELEMENT_SIZE,
        "children",
        "branch",
        "The separator key of child `index`: the smallest key in that child's subtree."
    );

    /// The page id of child `index` (unchecked against the high-water mark: see `check_pgid`).
    #[inline]
    pub fn child(&self, index: usize) -> Result<Pgid> {
        Ok(Pgid(self.element_or_err(index)?.pgid))
    }

    /// The separator keys and child pages in page order, each read as by `key` and `child`.
    pub fn iter(
        &self,
    ) -> impl DoubleEndedIterator<Item = Result<(&'a [u8], Pgid)>> + ExactSizeIterator + 'a {
        let page = *self;
        (0..self.len()).map(move |index| Ok((page.key(index)?, page.child(index)?)))
    }

    /// Exact-match search: `Ok(index)` of `key`, or `Err(index)` where it would be inserted.
    #[inline]
    pub fn search(&self, key: &[u8]) -> Result<core::result::Result<usize, usize>> {
        crate::view::search::search(self, key)
    }

    /// The child whose subtree would hold `key`.
    #[inline]
    pub fn child_index(&self, key: &[u8]) -> Result<usize> {
        crate::view::search::child_index(self, key)
    }

    /// Checks every element: keys within the span and strictly ascending, children not meta
    /// pages and below `high_water`.
    pub fn validate(&self, high_water: Pgid) -> Result<()> {
        if self.is_empty() {
            return Err(Corruption::new(self.pgid, Reason::EmptyBranch));
        }
        let mut previous: Option<&[u8]> = None;
        for index in 0..self.len() {
            let key = self.key(index)?;
            if previous.is_some_and(|prev| compare_keys(prev, key).is_ge()) {
                return Err(Corruption::new(self.pgid, Reason::KeyOrder { index }));
            }
            check_pgid("child", self.pgid, self.child(index)?, high_water)?;
            previous = Some(key);
        }
        Ok(())
    }

    /// Number of bytes the page uses: header, elements and keys.
    pub fn payload_len(&self) -> Result<usize> {
        let mut end = PAGE_HEADER_SIZE + self.len() * BRANCH_ELEMENT_SIZE;
        for index in 0..self.len() {
            let elem = self.element_or_err(index)?;
            let key_end = PAGE_HEADER_SIZE
                + index * BRANCH_ELEMENT_SIZE
                + elem.pos as usize
                + elem.ksize as usize;
            end = end.max(key_end);
        }
        Ok(end)
    }
}

/// A freelist page: a sorted list of page ids that are free (or pending) at the time it was
/// written.
#[derive(Clone, Copy, Debug)]
pub struct FreelistPage<'a> {
    pgid: Pgid,
    ids: &'a [[u8; PGID_SIZE]],
    extended_count: bool,
}

impl<'a> FreelistPage<'a> {
    /// The freelist page read as `pgid` from the bytes of its span.
    pub fn new(bytes: &'a [u8], pgid: Pgid) -> Result<FreelistPage<'a>> {
        PageRef::new(bytes, pgid)?.freelist()
    }

    fn from_header(bytes: &'a [u8], pgid: Pgid, header: PageHeader) -> Result<FreelistPage<'a>> {
        expect_kind(pgid, header, PageKind::Freelist)?;
        let body = bytes.get(PAGE_HEADER_SIZE..).unwrap_or_default();
        let (slots, _) = body.as_chunks::<PGID_SIZE>();
        let (count, first, extended_count) = if header.count == FREELIST_COUNT_OVERFLOW {
            let Some(first) = slots.first() else {
                return Err(truncated(
                    pgid,
                    "freelist count",
                    (PAGE_HEADER_SIZE + PGID_SIZE) as u64,
                    bytes.len(),
                ));
            };
            (u64::from_le_bytes(*first), 1, true)
        } else {
            (u64::from(header.count), 0, false)
        };
        let capacity = (slots.len() - first) as u64;
        if count > capacity {
            return Err(Corruption::new(
                pgid,
                Reason::CountTooLarge { count, capacity },
            ));
        }
        let ids = &slots[first..first + count as usize];
        Ok(FreelistPage {
            pgid,
            ids,
            extended_count,
        })
    }

    /// The page id it was read as.
    #[inline]
    pub fn pgid(&self) -> Pgid {
        self.pgid
    }

    /// Number of ids.
    #[inline]
    pub fn len(&self) -> usize {
        self.ids.len()
    }

    /// Whether there are no ids.
    #[inline]
    pub fn is_empty(&self) -> bool {
        self.ids.is_empty()
    }

    /// Whether the count is stored in the first id slot (the count reached 0xFFFF).
    #[inline]
    pub fn has_extended_count(&self) -> bool {
        self.extended_count
    }

    /// Id `index`.
    #[inline]
    pub fn get(&self, index: usize) -> Option<Pgid> {
        self.ids
            .get(index)
            .map(|raw| Pgid(u64::from_le_bytes(*raw)))
    }

    /// The ids in page order.
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = Pgid> + ExactSizeIterator + 'a {
        self.ids.iter().map(|raw| Pgid(u64::from_le_bytes(*raw)))
    }

    /// Number of bytes the page uses: the header, the count slot when the count is stored
    /// there, and the ids.
    pub fn payload_len(&self) -> usize {
        PAGE_HEADER_SIZE + (self.len() + usize::from(self.extended_count)) * PGID_SIZE
    }

    /// Checks the ids: strictly ascending, none a meta page, all below `high_water`.
    pub fn validate(&self, high_water: Pgid) -> Result<()> {
        let mut previous = Pgid(1);
        for (index, id) in self.iter().enumerate() {
            check_pgid("free", self.pgid, id, high_water)?;
            if id <= previous && index > 0 {
                return Err(Corruption::new(
                    self.pgid,
                    Reason::Other("freelist ids are not strictly ascending"),
                ));
            }
            previous = id;
        }
        Ok(())
    }
}

/// Reads the meta record of page `pgid` (0 or 1) from the page's bytes and checks its magic,
/// version and checksum. Does not check the fields against each other: see `Meta::validate_fields`.
pub fn read_meta(bytes: &[u8], pgid: Pgid) -> Result<Meta> {
    PageRef::new(bytes, pgid)?.meta()
}

fn read_meta_record(bytes: &[u8], pgid: Pgid) -> Result<Meta> {
    let raw: &[u8; META_SIZE] = bytes
        .get(PAGE_HEADER_SIZE..)
        .and_then(|rest| rest.first_chunk())
        .ok_or_else(|| {
            truncated(
                pgid,
                "meta",
                (PAGE_HEADER_SIZE + META_SIZE) as u64,
                bytes.len(),
            )
        })?;
    let meta: Meta = bytemuck::cast(*raw);
    meta.validate(pgid)?;
    Ok(meta)
}

impl Meta {
    /// Reads the meta record after the page header in `bytes` without checking anything but
    /// the length: for tools that show broken metas.
    pub fn read_unchecked(bytes: &[u8]) -> Option<Meta> {
        let raw: &[u8; META_SIZE] = bytes.get(PAGE_HEADER_SIZE..)?.first_chunk()?;
        Some(bytemuck::cast(*raw))
    }

    /// Checks magic, version and checksum, in that order (bbolt's order).
    pub fn validate(&self, pgid: Pgid) -> Result<()> {
        if self.magic != MAGIC {
            return Err(Corruption::new(pgid, Reason::BadMagic(self.magic)));
        }
        if self.version != VERSION {
            return Err(Corruption::new(pgid, Reason::BadVersion(self.version)));
        }
        let computed = self.compute_checksum();
        if self.checksum != computed {
            return Err(Corruption::new(
                pgid,
                Reason::BadChecksum {
                    stored: self.checksum,
                    computed,
                },
            ));
        }
        Ok(())
    }

    /// Checks the fields against each other and the file: the page size is in bounds (any
    /// size, as Go bbolt writes, not only powers of two), the root and freelist pages lie
    /// between the metas and the high-water mark, and the high-water mark lies within a file of
    /// `file_len` bytes (checked last: `Reason::HighWaterPastEnd` means every other field is
    /// sound).
    pub fn validate_fields(&self, pgid: Pgid, file_len: u64) -> Result<()> {
        let page_size = self.page_size;
        if !(PAGE_SIZE_MIN..=PAGE_SIZE_MAX).contains(&page_size) {
            return Err(Corruption::new(pgid, Reason::BadPageSize(page_size)));
        }
        let high_water = self.high_water();
        check_pgid("root", pgid, self.root_pgid(), high_water)?;
        if self.freelist != PGID_NO_FREELIST.0 {
            check_pgid("freelist", pgid, self.freelist_pgid(), high_water)?;
        }
        let needed = u128::from(self.pgid) * u128::from(page_size);
        if needed > u128::from(file_len) {
            return Err(Corruption::new(
                pgid,
                Reason::HighWaterPastEnd {
                    high_water: self.pgid,
                    file_len,
                },
            ));
        }
        Ok(())
    }
}

/// Bytes of a meta page that hold everything the meta has: the page header and the record.
pub const META_PAGE_LEN: usize = PAGE_HEADER_SIZE + META_SIZE;

/// Bytes of a meta page that hold everything a meta of either durability has: the page header,
/// the record and, for a non-durable meta, the boot id that wrote it and the digest of the
/// pages written since the last durable meta.
pub const META_PAGE_READ_LEN: usize = META_PAGE_LEN + BOOT_ID_SIZE + crate::PAGES_DIGEST_SIZE;

/// Whether a meta was written by a commit that synced (every meta Go bbolt writes) or by one that
/// did not, in the boot it names (see [`write_meta_non_durable`](crate::write_meta_non_durable)).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum MetaDurability {
    /// Written after the data it points at was synced: whole after any crash.
    Durable,
    /// Written without syncs, in the boot `boot_id`: whole only while that boot lasts, and
    /// only while the pages written since the last durable meta still sum to `digest`.
    NonDurable {
        /// The boot the meta was written in (`/proc/sys/kernel/random/boot_id` on Linux).
        boot_id: BootId,
        /// The sum of the digests of the page extents written since the last durable meta
        /// that this meta reaches (see [`page_digest`](crate::page_digest)).
        digest: crate::PagesDigest,
    },
    /// Written by a commit that synced once, after its pages and this meta: whole only while
    /// the runs its [`OneSyncRecord`](crate::OneSyncRecord) names still give its digest (the
    /// sync may not have finished before a power loss).
    OneSync,
}

/// Reads the meta page at the start of `bytes` (page `pgid`) of either durability: as
/// [`read_meta`], and a checksum that matches the non-durable variant over the boot id after the
/// record makes it [`MetaDurability::NonDurable`], and a one-sync tail whose checksum matches
/// ([`OneSyncRecord::read`](crate::OneSyncRecord::read); pass up to
/// [`ONE_SYNC_LEN_MAX`](crate::ONE_SYNC_LEN_MAX) bytes to see one) makes it
/// [`MetaDurability::OneSync`]. A checksum that matches none is the plain checksum's error.
pub fn read_meta_page(bytes: &[u8], pgid: Pgid) -> Result<(Meta, MetaDurability)> {
    let error = match read_meta(bytes, pgid) {
        Ok(meta) => return Ok((meta, MetaDurability::Durable)),
        Err(error) => error,
    };
    if !matches!(error.reason, Reason::BadChecksum { .. }) {
        return Err(error);
    }
    let Some(meta) = Meta::read_unchecked(bytes) else {
        return Err(error);
    };
    if crate::OneSyncRecord::read(bytes, &meta).is_some() {
        return Ok((meta, MetaDurability::OneSync));
    }
    let Some(tail) = bytes.get(META_PAGE_LEN..META_PAGE_READ_LEN) else {
        return Err(error);
    };
    let (boot_id, digest) = tail.split_at(BOOT_ID_SIZE);
    let boot_id: BootId = boot_id.try_into().expect("16 bytes");
    let digest: crate::PagesDigest = digest.try_into().expect("16 bytes");
    if meta.checksum != meta.compute_non_durable_checksum(&boot_id, &digest) {
        return Err(error);
    }
    Ok((meta, MetaDurability::NonDurable { boot_id, digest }))
}

/// Bytes read per step while scanning for meta 1.
const SCAN_CHUNK_BYTES: usize = 1 << 20;

/// Finds meta 1 when meta 0 cannot tell the page size (it is torn or damaged): a page at
/// offset `n` whose header says page 1, meta, and whose intact meta names `n` as the page
/// size. Probes every power of two in `PAGE_SIZE_MIN..=PAGE_SIZE_MAX` first, then scans every
/// offset up to `PAGE_SIZE_SCAN_MAX` (Go bbolt writes page sizes that are not powers of two).
///
/// `read_at(buf, offset)` fills `buf` from the file at `offset`; it is the caller's I/O (this
/// crate does none), and is only asked for bytes below `file_len`.
pub fn find_meta1<E>(
    file_len: u64,
    mut read_at: impl FnMut(&mut [u8], u64) -> std::result::Result<(), E>,
) -> std::result::Result<Option<Meta>, E> {
    // Meta 1 of a durable kind: Go's, or a one-sync meta (its tail up to 4 KiB on).
    let meta_at = |bytes: &[u8], offset: u64| {
        let header = PageHeader::read(bytes)?;
        if header.id != 1 || header.flags != FLAG_META {
            return None;
        }
        match read_meta_page(bytes, Pgid(1)) {
            Ok((meta, MetaDurability::Durable | MetaDurability::OneSync)) => {
                Some(meta).filter(|meta| u64::from(meta.page_size) == offset)
            }
            _ => None,
        }
    };
    let overlap = crate::ONE_SYNC_LEN_MAX;
    let mut buf = [0u8; crate::ONE_SYNC_LEN_MAX];
    let powers = (0..u32::BITS)
        .map(|shift| 1u32 << shift)
        .filter(|size| (PAGE_SIZE_MIN..=PAGE_SIZE_MAX).contains(size));
    for offset in powers.map(u64::from) {
        if offset + META_PAGE_LEN as u64 > file_len {
            break;
        }
        let len = ((file_len - offset) as usize).min(buf.len());
        read_at(&mut buf[..len], offset)?;
        if let Some(meta) = meta_at(&buf[..len], offset) {
            return Ok(Some(meta));
        }
    }
    // Candidates up to the largest page size scanned; bytes past it for a meta's tail.
    let Some(last_start) = file_len
        .checked_sub(META_PAGE_LEN as u64)
        .map(|last| last.min(u64::from(PAGE_SIZE_SCAN_MAX)))
    else {
        return Ok(None);
    };
    let end = file_len.min(u64::from(PAGE_SIZE_SCAN_MAX) + overlap as u64);
    let mut offset = u64::from(PAGE_SIZE_MIN);
    // No larger than what is left to scan: a small file gets a small buffer.
    let chunk_len = (end.saturating_sub(offset) as usize).min(SCAN_CHUNK_BYTES + overlap);
    let mut chunk = vec![0u8; chunk_len];
    while offset <= last_start {
        let len = ((end - offset) as usize).min(chunk.len());
        read_at(&mut chunk[..len], offset)?;
        // The last start here: in the file's last chunk, any a meta fits after; else one
        // whose 4 KiB tail is in this chunk (the next chunk starts after it).
        let starts = if offset + len as u64 == end {
            len - META_PAGE_LEN
        } else {
            len - overlap
        };
        for start in 0..=starts {
            let at = offset + start as u64;
            if at > last_start {
                break;
            }
            let bytes = &chunk[start..(start + overlap).min(len)];
            if let Some(meta) = meta_at(bytes, at) {
                return Ok(Some(meta));
            }
        }
        offset += starts as u64 + 1;
    }
    Ok(None)
}

/// A bucket value: its header and, for an inline bucket, the leaf page that follows it.
#[derive(Clone, Copy, Debug)]
pub struct BucketValue<'a> {
    /// The header.
    pub header: BucketHeader,
    /// The inline root page, when `header.root` is 0.
    pub inline: Option<LeafPage<'a>>,
}

impl<'a> BucketValue<'a> {
    /// Parses a bucket value stored in page `owner`.
    pub fn parse(value: &'a [u8], owner: Pgid) -> Result<BucketValue<'a>> {
        let header = BucketHeader::read(value).ok_or_else(|| {
            truncated(
                owner,
                "bucket header",
                BUCKET_HEADER_SIZE as u64,
                value.len(),
            )
        })?;
        let rest = &value[BUCKET_HEADER_SIZE..];
        if header.root == 0 {
            let inline = LeafPage::inline(rest, owner)?;
            Ok(BucketValue {
                header,
                inline: Some(inline),
            })
        } else if !rest.is_empty() {
            Err(Corruption::new(
                owner,
                Reason::BucketValueTrailingBytes {
                    len: rest.len() as u64,
                },
            ))
        } else {
            Ok(BucketValue {
                header,
                inline: None,
            })
        }
    }
}
