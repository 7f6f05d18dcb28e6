//! The one error this crate returns: bytes from disk that do not form a valid page.

use crate::types::{PageKind, Pgid};
use core::fmt;

/// Bytes read from disk do not form what they should. Names the page and says what is wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("page {pgid}: {reason}")]
pub struct Corruption {
    /// The page the bad bytes belong to (for an inline bucket page, the page holding its value,
    /// or 0 where that is unknown).
    pub pgid: Pgid,
    /// What is wrong.
    pub reason: Reason,
}

impl Corruption {
    /// A corruption of page `pgid`.
    #[cold]
    pub fn new(pgid: Pgid, reason: Reason) -> Corruption {
        Corruption { pgid, reason }
    }
}

/// What is wrong with a page. `Display` gives one clear sentence fragment.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum Reason {
    /// Fewer bytes than the structure needs.
    Truncated {
        /// What the structure being read is.
        what: &'static str,
        /// Bytes needed.
        need: u64,
        /// Bytes available.
        have: u64,
    },
    /// The header names another page id than the one it was read as.
    IdMismatch {
        /// The id in the header.
        found: u64,
    },
    /// Header flags that name no page kind.
    UnknownFlags(u16),
    /// A page of another kind than the one expected.
    WrongKind {
        /// The kind the reader expected.
        expected: PageKind,
        /// The header flags found.
        flags: u16,
    },
    /// The element count does not fit in the page.
    CountTooLarge {
        /// The count in the header.
        count: u64,
        /// How many fit.
        capacity: u64,
    },
    /// An element's key or value lies outside the page.
    ElementOutOfBounds {
        /// The element index.
        index: usize,
        /// End offset of the key or value, relative to the page start.
        end: u64,
        /// The page span in bytes.
        span: u64,
    },
    /// The overflow count makes the page run past the high-water mark or past addressable size.
    OverflowOutOfBounds {
        /// The overflow count in the header.
        overflow: u32,
    },
    /// A page id (child, root, freelist, overflow end) at or past the high-water mark, or 0/1.
    PgidOutOfBounds {
        /// What the id is.
        what: &'static str,
        /// The id.
        pgid: u64,
        /// The high-water mark.
        high_water: u64,
    },
    /// The meta does not start with the magic number: not a bbolt file, or a wiped meta.
    BadMagic(u32),
    /// The meta's version is not 2.
    BadVersion(u32),
    /// The meta's checksum does not match its contents.
    BadChecksum {
        /// The checksum stored in the meta.
        stored: u64,
        /// The checksum of the stored fields.
        computed: u64,
    },
    /// The meta's page size is not a power of two within bounds.
    BadPageSize(u32),
    /// The meta's high-water mark lies past the end of the file.
    HighWaterPastEnd {
        /// The high-water mark in pages.
        high_water: u64,
        /// The file length in bytes.
        file_len: u64,
    },
    /// A leaf element with flags this format does not define.
    UnknownElementFlags {
        /// The element index.
        index: usize,
        /// The flags found.
        flags: u32,
    },
    /// Keys out of order.
    KeyOrder {
        /// Index of the key that is not greater than the one before it.
        index: usize,
    },
    /// A branch page without a single child: a tree page that routes nowhere.
    EmptyBranch,
    /// A tree points at a page that is neither a branch nor a leaf.
    NotTreePage {
        /// The header flags found.
        flags: u16,
    },
    /// A bucket value whose root is a page carries bytes after its header (only an inline
    /// bucket's value holds a page there).
    BucketValueTrailingBytes {
        /// The bytes after the header.
        len: u64,
    },
    /// A tree deeper than the descent limit, which in a valid file means a cycle.
    TooDeep {
        /// The limit.
        depth_max: usize,
    },
    /// A page two references lead to: the pages do not form a tree.
    ReachableTwice,
    /// A page in use is on the freelist too.
    ReachableAndFree,
    /// A page that lies outside the file's pages in use (at or past the high-water mark, or a
    /// meta page) where a page of a tree must be.
    OutsideTheFile {
        /// What the page is.
        what: &'static str,
    },
    /// An entry flagged as a bucket whose value does not open as one.
    NotABucket,
    /// A bucket reached again below itself: the buckets form a cycle.
    BucketCycle,
    /// No meta page of the file can be read.
    NoMeta,
    /// A meta written without a sync before the last reboot, with no durable meta beside it.
    NoDurableMeta,
    /// A meta whose txid is at its largest value: no commit can follow it.
    TxidAtMax,
    /// Anything else, said in words.
    Other(&'static str),
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Reason::Truncated { what, need, have } => {
                write!(f, "{what} needs {need} bytes but only {have} are there")
            }
            Reason::IdMismatch { found } => write!(f, "header names page {found}"),
            Reason::UnknownFlags(flags) => write!(f, "unknown page flags {flags:#06x}"),
            Reason::WrongKind { expected, flags } => match PageKind::from_flags(*flags) {
                Some(kind) => write!(f, "expected a {expected} page, found a {kind} page"),
                None => write!(f, "expected a {expected} page, found flags {flags:#06x}"),
            },
            Reason::CountTooLarge { count, capacity } => {
                write!(f, "element count {count} does not fit (at most {capacity})")
            }
            Reason::ElementOutOfBounds { index, end, span } => write!(
                f,
                "element {index} ends at byte {end}, past the page's {span} bytes"
            ),
            Reason::OverflowOutOfBounds { overflow } => {
                write!(
                    f,
                    "overflow of {overflow} pages runs past the high-water mark"
                )
            }
            Reason::PgidOutOfBounds {
                what,
                pgid,
                high_water,
            } => write!(
                f,
                "{what} page id {pgid} is out of bounds (high-water mark {high_water})"
            ),
            Reason::BadMagic(magic) => write!(f, "invalid magic {magic:#010x}: not a bbolt file"),
            Reason::BadVersion(version) => {
                write!(f, "format version {version}, expected {}", crate::VERSION)
            }
            Reason::BadChecksum { stored, computed } => write!(
                f,
                "meta checksum {stored:#018x} does not match its contents ({computed:#018x})"
            ),
            Reason::BadPageSize(size) => write!(
                f,
                "page size {size} is outside the {}..={} bytes a page can be",
                crate::PAGE_SIZE_MIN,
                crate::PAGE_SIZE_MAX
            ),
            Reason::HighWaterPastEnd {
                high_water,
                file_len,
            } => write!(
                f,
                "high-water mark {high_water} lies past the end of the {file_len}-byte file"
            ),
            Reason::UnknownElementFlags { index, flags } => {
                write!(f, "element {index} has unknown flags {flags:#x}")
            }
            Reason::KeyOrder { index } => {
                write!(f, "key {index} is not greater than the key before it")
            }
            Reason::EmptyBranch => f.write_str("branch page has no children"),
            Reason::NotTreePage { flags } => match PageKind::from_flags(*flags) {
                Some(kind) => write!(f, "expected a branch or leaf page, found a {kind} page"),
                None => write!(
                    f,
                    "expected a branch or leaf page, found flags {flags:#06x}"
                ),
            },
            Reason::BucketValueTrailingBytes { len } => {
                write!(f, "bucket value with a root page has {len} trailing bytes")
            }
            Reason::TooDeep { depth_max } => write!(
                f,
                "tree is deeper than {depth_max} levels (a cycle between pages?)"
            ),
            Reason::ReachableTwice => f.write_str("page is reachable twice"),
            Reason::ReachableAndFree => f.write_str("page is in use and on the freelist"),
            Reason::OutsideTheFile { what } => {
                write!(f, "{what} lies outside the file's pages in use")
            }
            Reason::NotABucket => f.write_str("a bucket entry that does not open as a bucket"),
            Reason::BucketCycle => {
                f.write_str("a bucket's root page is reached twice (the buckets form a cycle)")
            }
            Reason::NoMeta => f.write_str("no meta found"),
            Reason::NoDurableMeta => f.write_str(
                "written without a sync before the last reboot, and no durable meta is left",
            ),
            Reason::TxidAtMax => f.write_str("txid at its largest value"),
            Reason::Other(text) => f.write_str(text),
        }
    }
}

/// The result of every decode in this crate.
pub type Result<T, E = Corruption> = core::result::Result<T, E>;
