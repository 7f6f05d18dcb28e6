//! The one error type of this crate.

use rbolt_page::{Corruption, Pgid, Txid};

/// What went wrong in a freelist operation. An operation that returns an error has changed
/// nothing.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum FreelistError {
    /// Page 0 or 1 is a meta page and can never be free.
    #[error("page {pgid} is a meta page and can never be free")]
    MetaPage {
        /// The id given.
        pgid: Pgid,
    },
    /// A page (or one of its overflow pages) is already free or pending: a double free.
    #[error("page {pgid} is already free or pending")]
    AlreadyFreed {
        /// The lowest id of the span that is already free or pending.
        pgid: Pgid,
    },
    /// A transaction frees a page it allocated itself. The caller should have handed the page
    /// back to its own pool; pending it would let a reader see a page that was never committed.
    #[error("transaction {txid} frees page {pgid}, which it allocated itself")]
    OwnAllocation {
        /// The freeing (and allocating) transaction.
        txid: Txid,
        /// The page being freed.
        pgid: Pgid,
    },
    /// A page id plus its overflow count does not fit in a page id.
    #[error("page {pgid} with {overflow} overflow pages runs past the largest page id")]
    SpanTooLong {
        /// The first page.
        pgid: Pgid,
        /// The overflow count.
        overflow: u32,
    },
    /// The same id appears twice in a list of free ids given to `rebuild`.
    #[error("page {pgid} is listed twice")]
    Duplicate {
        /// The repeated id.
        pgid: Pgid,
    },
    /// An allocation would take pages past the file's size limit. Nothing was taken.
    #[error("the database would grow past its size limit of {max_size} bytes")]
    MaxSizeReached {
        /// The limit in bytes.
        max_size: u64,
    },
    /// An allocation would take pages past the high-water mark a vacuum step may not pass.
    /// Nothing was taken.
    #[error("the commit would raise the high-water mark past page {mark}")]
    MarkReached {
        /// The mark.
        mark: Pgid,
        /// The mark in bytes.
        max_size: u64,
    },
    /// A freelist page read from disk is not valid.
    #[error(transparent)]
    Corruption(#[from] Corruption),
}
