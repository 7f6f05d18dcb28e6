//! The fixed-size records of the format as plain-old-data structs.
//!
//! Every struct is `#[repr(C)]` with no padding, so bytemuck can cast it to and from bytes.
//! The format stores integers in the host's byte order and bbolt runs on little-endian hosts,
//! so these structs are the on-disk bytes exactly on the little-endian hosts we support.
//! Reads never assume alignment: they copy the record out of the byte slice.

use crate::types::{
    BRANCH_ELEMENT_SIZE, BUCKET_HEADER_SIZE, LEAF_ELEMENT_SIZE, META_CHECKSUM_OFFSET, META_SIZE,
    PAGE_HEADER_SIZE, PageKind, Pgid, Txid,
};
use bytemuck::{Pod, Zeroable};

/// The 16 bytes at the start of every page.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct PageHeader {
    /// The page's own id (0 for the page of an inline bucket).
    pub id: u64,
    /// Exactly one of the `FLAG_*` values.
    pub flags: u16,
    /// Number of elements (branch, leaf), or of freelist ids (see `FREELIST_COUNT_OVERFLOW`).
    pub count: u16,
    /// Number of extra pages that follow this one and belong to it.
    pub overflow: u32,
}

/// One element of a branch page: where the key is and which page the child is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct BranchElement {
    /// Offset of the key from the start of this element.
    pub pos: u32,
    /// Key length.
    pub ksize: u32,
    /// The child page.
    pub pgid: u64,
}

/// One element of a leaf page: flags and where the key and the value are.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct LeafElement {
    /// 0, or `LEAF_FLAG_BUCKET` when the value is a bucket.
    pub flags: u32,
    /// Offset of the key from the start of this element; the value follows the key.
    pub pos: u32,
    /// Key length.
    pub ksize: u32,
    /// Value length.
    pub vsize: u32,
}

/// The header at the start of every bucket value, and the root bucket in the meta.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct BucketHeader {
    /// Root page of the bucket's tree, or 0 when the tree is stored inline after this header.
    pub root: u64,
    /// The bucket's sequence number.
    pub sequence: u64,
}

/// The record after the page header of pages 0 and 1.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Pod, Zeroable)]
#[repr(C)]
pub struct Meta {
    /// `MAGIC`.
    pub magic: u32,
    /// `VERSION`.
    pub version: u32,
    /// The page size of the file.
    pub page_size: u32,
    /// Unused by bbolt; preserved.
    pub flags: u32,
    /// The root bucket: its root page holds the top-level bucket names.
    pub root: BucketHeader,
    /// The first page of the freelist, or `PGID_NO_FREELIST`.
    pub freelist: u64,
    /// The high-water mark: one past the last page in use.
    pub pgid: u64,
    /// The transaction that wrote this meta.
    pub txid: u64,
    /// FNV-1a 64 over the 56 bytes before this field.
    pub checksum: u64,
}

const _: () = {
    assert!(size_of::<PageHeader>() == PAGE_HEADER_SIZE);
    assert!(size_of::<BranchElement>() == BRANCH_ELEMENT_SIZE);
    assert!(size_of::<LeafElement>() == LEAF_ELEMENT_SIZE);
    assert!(size_of::<BucketHeader>() == BUCKET_HEADER_SIZE);
    assert!(size_of::<Meta>() == META_SIZE);
    assert!(core::mem::offset_of!(Meta, checksum) == META_CHECKSUM_OFFSET);
};

impl PageHeader {
    /// A header for page `id` of `kind`.
    #[inline]
    pub const fn new(id: Pgid, kind: PageKind, count: u16, overflow: u32) -> PageHeader {
        PageHeader {
            id: id.0,
            flags: kind.flags(),
            count,
            overflow,
        }
    }

    /// Reads the header at the start of `bytes`, or `None` when there are fewer than 16 bytes.
    #[inline]
    pub fn read(bytes: &[u8]) -> Option<PageHeader> {
        let head: &[u8; PAGE_HEADER_SIZE] = bytes.first_chunk()?;
        Some(bytemuck::cast(*head))
    }

    /// Reads only the page id at the start of `bytes`, which may be shorter than a header (a
    /// torn or truncated page), or `None` when there are fewer bytes than the id takes.
    #[inline]
    pub fn read_id(bytes: &[u8]) -> Option<u64> {
        const ID_END: usize = core::mem::offset_of!(PageHeader, id) + size_of::<u64>();
        let id: &[u8; ID_END] = bytes.first_chunk()?;
        Some(u64::from_le_bytes(*id))
    }

    /// The header's bytes, as `write` writes them (usable in constants).
    pub const fn to_bytes(&self) -> [u8; PAGE_HEADER_SIZE] {
        let mut out = [0u8; PAGE_HEADER_SIZE];
        put_bytes(
            &mut out,
            core::mem::offset_of!(PageHeader, id),
            &self.id.to_le_bytes(),
        );
        put_bytes(
            &mut out,
            core::mem::offset_of!(PageHeader, flags),
            &self.flags.to_le_bytes(),
        );
        put_bytes(
            &mut out,
            core::mem::offset_of!(PageHeader, count),
            &self.count.to_le_bytes(),
        );
        put_bytes(
            &mut out,
            core::mem::offset_of!(PageHeader, overflow),
            &self.overflow.to_le_bytes(),
        );
        out
    }

    /// Writes the header to the start of `buf`.
    #[inline]
    pub fn write(&self, buf: &mut [u8]) {
        buf[..PAGE_HEADER_SIZE].copy_from_slice(bytemuck::bytes_of(self));
    }

    /// The page's kind, if its flags name one.
    #[inline]
    pub fn kind(&self) -> Option<PageKind> {
        PageKind::from_flags(self.flags)
    }

    /// The page's id.
    #[inline]
    pub fn pgid(&self) -> Pgid {
        Pgid(self.id)
    }
}

impl BucketHeader {
    /// The header of a bucket whose tree's root is page `root` (0: stored inline after the
    /// header) with sequence number `sequence`.
    #[inline]
    pub const fn new(root: Pgid, sequence: u64) -> BucketHeader {
        BucketHeader {
            root: root.0,
            sequence,
        }
    }

    /// Reads the header at the start of `bytes`, or `None` when there are fewer than 16 bytes.
    #[inline]
    pub fn read(bytes: &[u8]) -> Option<BucketHeader> {
        let head: &[u8; BUCKET_HEADER_SIZE] = bytes.first_chunk()?;
        Some(bytemuck::cast(*head))
    }

    /// A bucket value's header and the bytes after it (an inline bucket's page), or `None`
    /// when the value is shorter than a header. Checks nothing else: see `BucketValue::parse`.
    #[inline]
    pub fn split(value: &[u8]) -> Option<(BucketHeader, &[u8])> {
        let (head, rest) = value.split_first_chunk::<BUCKET_HEADER_SIZE>()?;
        Some((bytemuck::cast(*head), rest))
    }

    /// Writes the header to the start of `buf`.
    #[inline]
    pub fn write(&self, buf: &mut [u8]) {
        buf[..BUCKET_HEADER_SIZE].copy_from_slice(bytemuck::bytes_of(self));
    }

    /// The header's bytes: the value of a bucket whose tree is a page.
    #[inline]
    pub fn to_bytes(&self) -> [u8; BUCKET_HEADER_SIZE] {
        bytemuck::cast(*self)
    }

    /// The root page id (0 for an inline bucket).
    #[inline]
    pub fn root_pgid(&self) -> Pgid {
        Pgid(self.root)
    }
}

impl Meta {
    /// FNV-1a 64 over the fields before the checksum.
    pub fn compute_checksum(&self) -> u64 {
        fnv1a64(&bytemuck::bytes_of(self)[..META_CHECKSUM_OFFSET])
    }

    /// The checksum of a non-durable meta (one written by a commit that did not sync): FNV-1a
    /// 64 over the fields before the checksum and then `boot_id`, XOR
    /// [`NON_DURABLE_CHECKSUM_MASK`]. The two checksums of the same fields differ (short of a
    /// 2^-64 coincidence), so Go bbolt, which knows only the plain one, takes such a meta for a
    /// torn one and opens the other, durable meta.
    ///
    /// The checksum covers `digest` too, the [`PagesDigest`] the meta carries after the boot id.
    pub fn compute_non_durable_checksum(&self, boot_id: &BootId, digest: &PagesDigest) -> u64 {
        let mut hash = fnv1a64_continue(
            FNV_OFFSET_BASIS,
            &bytemuck::bytes_of(self)[..META_CHECKSUM_OFFSET],
        );
        hash = fnv1a64_continue(hash, boot_id);
        hash = fnv1a64_continue(hash, digest);
        hash ^ NON_DURABLE_CHECKSUM_MASK
    }

    /// The meta's bytes as the format lays them out: for a copy kept outside the file (the
    /// reader table's published meta, which other processes read back with
    /// [`Meta::from_bytes`]).
    ///
    /// ```
    /// use rbolt_page::Meta;
    /// let meta = Meta { txid: 7, pgid: 9, ..Meta::default() };
    /// assert_eq!(Meta::from_bytes(&meta.to_bytes()), Some(meta));
    /// assert_eq!(Meta::from_bytes(&[0u8; 3]), None);
    /// ```
    pub fn to_bytes(&self) -> [u8; META_SIZE] {
        bytemuck::cast(*self)
    }

    /// A meta from the bytes [`Meta::to_bytes`] made; `None` when they are not `META_SIZE`
    /// bytes long. Checks nothing else.
    pub fn from_bytes(bytes: &[u8]) -> Option<Meta> {
        (bytes.len() == META_SIZE).then(|| bytemuck::pod_read_unaligned(bytes))
    }

    /// The root bucket's root page.
    #[inline]
    pub fn root_pgid(&self) -> Pgid {
        Pgid(self.root.root)
    }

    /// The freelist page (`PGID_NO_FREELIST` when not persisted).
    #[inline]
    pub fn freelist_pgid(&self) -> Pgid {
        Pgid(self.freelist)
    }

    /// The high-water mark.
    #[inline]
    pub fn high_water(&self) -> Pgid {
        Pgid(self.pgid)
    }

    /// The transaction that wrote this meta.
    #[inline]
    pub fn txid(&self) -> Txid {
        Txid(self.txid)
    }

    /// Whether the freelist is persisted in the file.
    #[inline]
    pub fn has_freelist(&self) -> bool {
        self.freelist != crate::PGID_NO_FREELIST.0
    }
}

/// Copies `bytes` into `out` at `at`, in a constant.
const fn put_bytes(out: &mut [u8], at: usize, bytes: &[u8]) {
    let mut index = 0;
    while index < bytes.len() {
        out[at + index] = bytes[index];
        index += 1;
    }
}

/// The identity of one run of the operating system (Linux's
/// `/proc/sys/kernel/random/boot_id`): a non-durable meta records the boot that wrote it, since
/// its data pages are only known to be whole while that boot's page cache holds them.
pub type BootId = [u8; BOOT_ID_SIZE];

/// Bytes of a [`BootId`].
pub const BOOT_ID_SIZE: usize = 16;

/// What a non-durable meta says of the pages its commits wrote: the sum, modulo 2^128, of
/// [`page_digest`](crate::page_digest) over every page extent that the meta's tree reaches and
/// the last durable meta's does not (the pages written since that durable meta),
/// little-endian. At open, rbolt
/// trusts the meta only when the file's pages give the same sum: so pages that changed after
/// the commits wrote them — another writer reusing them (Go bbolt, which takes the durable
/// meta's free pages), or pages a failed sync let the kernel drop — are seen, and the open
/// falls back to the durable meta.
pub type PagesDigest = [u8; PAGES_DIGEST_SIZE];

/// Bytes of a [`PagesDigest`].
pub const PAGES_DIGEST_SIZE: usize = 16;

/// What a non-durable meta's checksum is XORed with (the bytes of "nodurabl"), so that it never
/// passes as a durable meta.
pub const NON_DURABLE_CHECKSUM_MASK: u64 = u64::from_le_bytes(*b"nodurabl");

pub(crate) const FNV_OFFSET_BASIS: u64 = 0xcbf2_9ce4_8422_2325;

/// FNV-1a, 64-bit: the meta checksum.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    fnv1a64_continue(FNV_OFFSET_BASIS, bytes)
}

/// FNV-1a 64 of `bytes` continued from `hash` (the hash of what came before them).
pub(crate) fn fnv1a64_continue(mut hash: u64, bytes: &[u8]) -> u64 {
    const PRIME: u64 = 0x0000_0100_0000_01b3;
    for &byte in bytes {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(PRIME);
    }
    hash
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fnv1a64_matches_reference_vectors() {
        // Vectors from the FNV reference (draft-eastlake-fnv).
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
        assert_eq!(fnv1a64(b"foobar"), 0x8594_4171_f739_67e8);
    }

    #[test]
    fn header_round_trips_through_unaligned_bytes() {
        let header = PageHeader::new(Pgid(0x0102_0304_0506_0708), PageKind::Leaf, 7, 3);
        let mut buf = [0u8; 17];
        header.write(&mut buf[1..]);
        assert_eq!(PageHeader::read(&buf[1..]), Some(header));
        assert_eq!(PageHeader::read(&buf[..15]), None);
    }
}
