//! bbolt's on-disk page format, version 2: typed views over page bytes, builders that write
//! pages into caller-provided buffers, and [`PageMut`], a leaf or branch page image edited in
//! place.
//!
//! This crate is the one home of the byte layout of every page kind (branch, leaf, meta,
//! freelist, overflow spans and inline bucket pages): the layers above ask its views, builders,
//! mutator and size functions and never compute an offset. It also owns the meta checksum and
//! binary search over sorted keys. It does no I/O, knows nothing of transactions or files, and
//! its reads and edits allocate nothing. Every decode of bytes from disk is bounds-checked and
//! returns [`Corruption`] naming the page; no input makes it panic or read out of bounds (a
//! misused builder or mutator, a programmer error, panics). It contains no `unsafe`: bytemuck
//! does the casts.
//!
//! ```
//! use rbolt_page::{LeafBuilder, LeafPage, Pgid, leaf_page_size};
//!
//! let entries: [(&[u8], &[u8]); 2] = [(b"apple", b"red"), (b"pear", b"green")];
//! let kv_len: usize = entries.iter().map(|(k, v)| k.len() + v.len()).sum();
//! let mut page = vec![0u8; 4096];
//! assert!(leaf_page_size(entries.len(), kv_len) <= page.len());
//! let mut builder = LeafBuilder::new(&mut page, Pgid(7), entries.len(), 0);
//! for (key, value) in entries {
//!     builder.push(0, key, value);
//! }
//! builder.finish();
//!
//! let leaf = LeafPage::new(&page, Pgid(7)).unwrap();
//! assert_eq!(leaf.search(b"pear").unwrap(), Ok(1));
//! assert_eq!(leaf.value(1).unwrap(), b"green");
//! assert!(LeafPage::new(&page, Pgid(8)).is_err()); // the header names page 7
//! ```
#![warn(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(not(target_endian = "little"))]
compile_error!(
    "rbolt reads and writes bbolt's little-endian format and supports little-endian hosts only"
);
#[cfg(not(target_pointer_width = "64"))]
compile_error!("rbolt supports 64-bit hosts only");

mod build;
mod edit;
mod error;
mod layout;
mod one_sync;
mod page_set;
mod types;
mod view;

pub use build::{
    BranchBuilder, EMPTY_BUCKET_VALUE, EMPTY_DB_PAGES, EMPTY_LEAF, LeafBuilder, branch_page_size,
    element_page_size, empty_db_prefixes, freelist_page_size, inline_bucket_size, leaf_entry_size,
    leaf_page_size, pages_for, pgid_slots, set_pgid_slot, write_bucket_header, write_empty_db,
    write_freelist, write_freelist_header, write_meta, write_meta_in_slot, write_meta_non_durable,
    write_pgid,
};
pub use edit::{
    NewEntry, PACKED_INSERTS_MAX, PageMut, TreePageShape, check_tree_page, packed_data_end,
    page_data_end, page_digest, repack_into, reread_checked_tree_page,
};
pub use error::{Corruption, Reason, Result};
pub use layout::{
    BOOT_ID_SIZE, BootId, BranchElement, BucketHeader, LeafElement, Meta,
    NON_DURABLE_CHECKSUM_MASK, PAGES_DIGEST_SIZE, PageHeader, PagesDigest, fnv1a64,
};
pub use one_sync::{
    ONE_SYNC_BYTES_MAX, ONE_SYNC_CHECKSUM_MASK, ONE_SYNC_HEAD_LEN, ONE_SYNC_LEN_MAX,
    ONE_SYNC_RUN_SIZE, ONE_SYNC_TAG, ONE_SYNC_VERSION, OneSyncRecord, PageRun, one_sync_meta_len,
    one_sync_runs_max, run_digest, write_meta_one_sync,
};
pub use page_set::{PageSet, PageSetIds};
pub use types::*;
pub use view::search::{KeySource, child_index, compare_keys, key_prefix, lower_bound, search};
pub use view::{
    BranchPage, BucketValue, FreelistPage, LeafEntry, LeafPage, META_PAGE_LEN, META_PAGE_READ_LEN,
    MetaDurability, PageRef, check_overflow, check_pgid, find_meta1, read_meta, read_meta_page,
    span_len,
};
