//! The third kind of meta (issue 51): one written by a commit that syncs once, after its pages
//! and its meta, instead of twice. It carries, after bbolt's 64-byte record and within the
//! first 4 KiB block of its page, a tag, the page runs its commit wrote and a digest of their
//! bytes, and a checksum Go bbolt rejects, so that Go opens the other meta. A reader trusts it
//! only when the runs it names still give its digest: its one sync may not have finished
//! before a power loss, and then any of its pages may be missing, torn or garbled.
//!
//! Layout (offsets in the page; see `docs/file-format.md`, "Meta page"):
//!
//! ```text
//!  16  64   bbolt's record; its checksum (page offset 72) is FNV-1a 64 over the record's
//!           first 56 bytes, then page bytes 80..104 + 16·n, XOR "one_sync"
//!  80   4   kind tag "rb1s"
//!  84   2   version (1)
//!  86   2   n: how many runs follow (at least 1)
//!  88  16   digest: the sum modulo 2^128 of run_digest over the runs
//! 104  16·n each run: its first page id (u64), its number of pages (u64)
//! ```

use crate::layout::{FNV_OFFSET_BASIS, fnv1a64_continue};
use crate::types::{META_CHECKSUM_OFFSET, META_SIZE, PAGE_HEADER_SIZE};
use crate::{Meta, PageHeader, PageKind, PagesDigest, Pgid};

/// Where a meta page's tail starts: after the page header and bbolt's record (the view's
/// `META_PAGE_LEN`, which this module sits below).
const META_PAGE_LEN: usize = PAGE_HEADER_SIZE + META_SIZE;

/// The kind tag at the start of a one-sync meta's tail.
pub const ONE_SYNC_TAG: [u8; 4] = *b"rb1s";
/// The version of the one-sync layout this crate writes and reads.
pub const ONE_SYNC_VERSION: u16 = 1;
/// What a one-sync meta's checksum is XORed with (the bytes of "one_sync"): it never passes as
/// a durable meta (Go's) nor as a non-durable one (rbolt's, XOR "nodurabl").
pub const ONE_SYNC_CHECKSUM_MASK: u64 = u64::from_le_bytes(*b"one_sync");
/// Bytes of a one-sync meta before its runs: the page header, the record, the tag, the
/// version, the count and the digest.
pub const ONE_SYNC_HEAD_LEN: usize = META_PAGE_LEN + 24;
/// Bytes of one run in a one-sync meta.
pub const ONE_SYNC_RUN_SIZE: usize = 16;
/// The furthest a one-sync meta reaches into its page: its first 4 KiB block, which one
/// `pwrite` writes whole after a kill (and a power loss tears only at sectors, which the
/// checksum sees).
pub const ONE_SYNC_LEN_MAX: usize = 4096;
/// The most bytes of pages a one-sync meta may name: a reader hashes them all before it trusts
/// the meta, so a damaged run list cannot make an open read the whole file. A bigger commit
/// syncs twice (its second sync costs little beside its writes).
pub const ONE_SYNC_BYTES_MAX: u64 = 32 * 1024 * 1024;

/// A run of pages one commit wrote with one write call: `n_pages` pages from `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PageRun {
    /// Its first page.
    pub start: Pgid,
    /// How many pages it has (at least 1).
    pub n_pages: u64,
}

/// Bytes of a one-sync meta that names `n_runs` runs.
pub const fn one_sync_meta_len(n_runs: usize) -> usize {
    ONE_SYNC_HEAD_LEN + n_runs * ONE_SYNC_RUN_SIZE
}

/// How many runs a one-sync meta at byte `offset` of the file (its slot's) can name on pages of
/// `page_size` bytes: as many as fit both its page and the 4 KiB block it starts in; 0 when
/// not even one does.
pub fn one_sync_runs_max(page_size: usize, offset: u64) -> usize {
    let block = ONE_SYNC_LEN_MAX as u64;
    let room = (page_size as u64).min(block - offset % block) as usize;
    (room.saturating_sub(ONE_SYNC_HEAD_LEN) / ONE_SYNC_RUN_SIZE).min(usize::from(u16::MAX))
}

/// The digest of one run of pages as written (every byte of its pages, in `parts` in order),
/// seeded with its first page id: XXH3-128, as [`page_digest`](crate::page_digest). A one-sync
/// meta's digest is the sum (modulo 2^128) of these over its runs.
///
/// ```
/// use rbolt_page::{Pgid, run_digest};
/// let page = [5u8; 4096];
/// // Parts or a whole: the same bytes give the same digest.
/// assert_eq!(run_digest(Pgid(9), &[&page, &page]), run_digest(Pgid(9), &[&[5u8; 8192]]));
/// assert_ne!(run_digest(Pgid(9), &[&page]), run_digest(Pgid(10), &[&page]));
/// ```
pub fn run_digest(start: Pgid, parts: &[&[u8]]) -> u128 {
    match parts {
        [one] => twox_hash::XxHash3_128::oneshot_with_seed(start.0, one),
        _ => {
            let mut hasher = twox_hash::XxHash3_128::with_seed(start.0);
            for part in parts {
                hasher.write(part);
            }
            hasher.finish_128()
        }
    }
}

/// The one-sync checksum of `meta`'s fields and the tail `tail` (page bytes from 80 to the end
/// of the runs).
fn one_sync_checksum(meta: &Meta, tail: &[u8]) -> u64 {
    let hash = fnv1a64_continue(
        FNV_OFFSET_BASIS,
        &bytemuck::bytes_of(meta)[..META_CHECKSUM_OFFSET],
    );
    fnv1a64_continue(hash, tail) ^ ONE_SYNC_CHECKSUM_MASK
}

/// Writes a one-sync meta page for `meta` into `buf` (at least
/// [`one_sync_meta_len`]`(runs.len())` bytes): the header with id `txid % 2`, the record with
/// the one-sync checksum, then the tag, version, run count, `digest` and `runs`. Returns the
/// meta as written.
///
/// # Panics
/// When `buf` is too short, `runs` is empty or holds more than `u16::MAX` runs (the caller
/// sizes both from [`ONE_SYNC_LEN_MAX`] and the page size).
pub fn write_meta_one_sync(
    buf: &mut [u8],
    meta: &Meta,
    runs: &[PageRun],
    digest: &PagesDigest,
) -> Meta {
    assert!(!runs.is_empty(), "a one-sync meta names at least one run");
    let n_runs = u16::try_from(runs.len()).expect("at most u16::MAX runs");
    let end = one_sync_meta_len(runs.len());
    let tail = &mut buf[META_PAGE_LEN..end];
    tail[0..4].copy_from_slice(&ONE_SYNC_TAG);
    tail[4..6].copy_from_slice(&ONE_SYNC_VERSION.to_le_bytes());
    tail[6..8].copy_from_slice(&n_runs.to_le_bytes());
    tail[8..24].copy_from_slice(digest);
    for (run, out) in runs
        .iter()
        .zip(tail[24..].chunks_exact_mut(ONE_SYNC_RUN_SIZE))
    {
        out[..8].copy_from_slice(&run.start.0.to_le_bytes());
        out[8..].copy_from_slice(&run.n_pages.to_le_bytes());
    }
    let mut meta = *meta;
    meta.checksum = one_sync_checksum(&meta, &buf[META_PAGE_LEN..end]);
    PageHeader::new(Pgid(meta.txid % 2), PageKind::Meta, 0, 0).write(buf);
    buf[PAGE_HEADER_SIZE..META_PAGE_LEN].copy_from_slice(bytemuck::bytes_of(&meta));
    meta
}

/// What a one-sync meta says it wrote: its runs and their digest, borrowed from the meta page.
/// Read by [`OneSyncRecord::read`] from a meta page whose record passed every check but its
/// checksum.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OneSyncRecord<'a> {
    /// The sum of [`run_digest`] over the runs.
    pub digest: PagesDigest,
    /// The runs' bytes: [`ONE_SYNC_RUN_SIZE`] each.
    runs: &'a [u8],
}

impl<'a> OneSyncRecord<'a> {
    /// Reads the tail of the meta page `bytes` (from its start; as many bytes as the caller
    /// read, up to [`ONE_SYNC_LEN_MAX`]) whose record is `meta`, when it is a one-sync meta of
    /// this version whose checksum matches: `None` otherwise (another kind of meta, a torn
    /// one, or a tail that does not fit the page or its first 4 KiB block).
    pub fn read(bytes: &'a [u8], meta: &Meta) -> Option<OneSyncRecord<'a>> {
        let head = bytes.get(META_PAGE_LEN..ONE_SYNC_HEAD_LEN)?;
        if head[0..4] != ONE_SYNC_TAG || u16::from_le_bytes([head[4], head[5]]) != ONE_SYNC_VERSION
        {
            return None;
        }
        let n_runs = usize::from(u16::from_le_bytes([head[6], head[7]]));
        let end = one_sync_meta_len(n_runs);
        let room = (meta.page_size as usize).min(ONE_SYNC_LEN_MAX);
        if n_runs == 0 || end > room {
            return None;
        }
        let tail = bytes.get(META_PAGE_LEN..end)?;
        if one_sync_checksum(meta, tail) != meta.checksum {
            return None;
        }
        let digest: PagesDigest = head[8..24].try_into().expect("16 bytes");
        Some(OneSyncRecord {
            digest,
            runs: &bytes[ONE_SYNC_HEAD_LEN..end],
        })
    }

    /// The runs, as the meta lists them (not yet checked against the file: see
    /// [`OneSyncRecord::runs_plausible`]).
    pub fn runs(&self) -> impl Iterator<Item = PageRun> + 'a {
        self.runs
            .chunks_exact(ONE_SYNC_RUN_SIZE)
            .map(|run| PageRun {
                start: Pgid(u64::from_le_bytes(run[..8].try_into().expect("8 bytes"))),
                n_pages: u64::from_le_bytes(run[8..].try_into().expect("8 bytes")),
            })
    }

    /// Whether the runs are a list a commit of `meta` can have written: each of at least one
    /// page, ascending without overlap, past the two metas and below the high-water mark, and
    /// [`ONE_SYNC_BYTES_MAX`] bytes at most in all. A damaged list fails here, before any page
    /// is read.
    pub fn runs_plausible(&self, meta: &Meta) -> bool {
        let mut next = 2u64;
        let mut pages = 0u64;
        for run in self.runs() {
            let Some(end) = run.start.0.checked_add(run.n_pages) else {
                return false;
            };
            if run.n_pages == 0 || run.start.0 < next || end > meta.pgid {
                return false;
            }
            next = end;
            pages += run.n_pages;
        }
        pages.saturating_mul(u64::from(meta.page_size)) <= ONE_SYNC_BYTES_MAX
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{MAGIC, VERSION};

    fn meta() -> Meta {
        Meta {
            magic: MAGIC,
            version: VERSION,
            page_size: 4096,
            flags: 0,
            root: crate::BucketHeader {
                root: 3,
                sequence: 0,
            },
            freelist: 2,
            pgid: 40,
            txid: 7,
            checksum: 0,
        }
    }

    fn runs() -> Vec<PageRun> {
        vec![
            PageRun {
                start: Pgid(4),
                n_pages: 2,
            },
            PageRun {
                start: Pgid(30),
                n_pages: 1,
            },
        ]
    }

    #[test]
    fn a_one_sync_meta_reads_back_and_fails_every_other_check() {
        let mut page = vec![0u8; 4096];
        let written = write_meta_one_sync(&mut page, &meta(), &runs(), &[9u8; 16]);
        let record = OneSyncRecord::read(&page, &written).expect("reads back");
        assert_eq!(record.runs().collect::<Vec<_>>(), runs());
        assert_eq!(record.digest, [9u8; 16]);
        assert!(record.runs_plausible(&written));
        // Go's checksum and the non-durable one both fail.
        assert_ne!(written.checksum, written.compute_checksum());
        assert_ne!(
            written.checksum,
            written.compute_non_durable_checksum(&[0; 16], &[9u8; 16])
        );
        // Any byte of the tail changed: not a one-sync meta.
        for at in META_PAGE_LEN..one_sync_meta_len(2) {
            let mut damaged = page.clone();
            damaged[at] ^= 0x10;
            assert_eq!(OneSyncRecord::read(&damaged, &written), None, "byte {at}");
        }
        // Cut short: not one either.
        assert_eq!(
            OneSyncRecord::read(&page[..one_sync_meta_len(2) - 1], &written),
            None
        );
    }

    #[test]
    fn implausible_runs_are_refused_before_any_page_is_read() {
        let check = |runs: Vec<PageRun>, expected: bool| {
            let mut page = vec![0u8; 4096];
            let mut meta = meta();
            meta = write_meta_one_sync(&mut page, &meta, &runs, &[0; 16]);
            let record = OneSyncRecord::read(&page, &meta).unwrap();
            assert_eq!(record.runs_plausible(&meta), expected, "{runs:?}");
        };
        let run = |start, n_pages| PageRun {
            start: Pgid(start),
            n_pages,
        };
        check(vec![run(2, 38)], true);
        check(vec![run(1, 1)], false); // a meta page
        check(vec![run(39, 2)], false); // past the mark
        check(vec![run(4, 0)], false);
        check(vec![run(8, 1), run(4, 1)], false); // not ascending
        check(vec![run(4, 2), run(5, 1)], false); // overlapping
        check(vec![run(u64::MAX, 2)], false); // wraps
    }
}
