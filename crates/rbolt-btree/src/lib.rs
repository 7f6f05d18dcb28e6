//! rbolt's B+tree: the tree logic, independent of files.
//!
//! This crate owns how keys are found, ordered, inserted and removed: [`TreeView`] and
//! [`Cursor`] read committed pages (and a write transaction's edited nodes) without allocating;
//! [`Tree`] edits copy-on-write nodes — private copies of page images, edited in place through
//! rbolt-page's `PageMut`, so that no byte offset of the format is computed here —
//! splits them like a B-tree as they outgrow their page, rebalances them after deletes, and
//! hands their images to the allocator as pages at commit. It reads pages through
//! [`PageSource`] / [`Pages`], takes node buffers from an [`Arena`], and obtains page ids and
//! writes pages through [`PageAlloc`]; it does no I/O, holds no locks, and contains no
//! `unsafe`. Buckets, transactions and the freelist are the callers'.
#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod cursor;
mod free;
mod mem;
mod node;
mod pages;
mod rebalance;
mod spill;
mod split;
mod touch;
mod tree;

pub use cursor::{Cursor, ElemRef, Entry, TreeView};
pub use mem::{MemAlloc, MemStore};
pub use node::arena::{Arena, POOL_BUFFERS_MAX};
pub use pages::{MemPages, PageSource, Pages};
/// The most elements a page holds (its header counts them in 16 bits): rbolt-page's
/// `ELEMENT_COUNT_MAX`, which splits respect.
pub use rbolt_page::ELEMENT_COUNT_MAX as PAGE_COUNT_MAX;
pub use rebalance::{REBALANCE_PAGE_DIVISOR, REPACK_FULL_PERCENT};
pub use tree::hazard::{
    GoHazard, branch_hazard, child_hazard, first_key, inline_hazard, tree_hazards,
};
pub use tree::{
    Delete, Direction, FILL_PERCENT_DEFAULT, FILL_PERCENT_MAX, FILL_PERCENT_MIN, MIN_KEYS_PER_PAGE,
    PageAlloc, Put, Tree, TreeStats, Verdict,
};

/// The deepest a tree may be. A descent that goes further is reading a cycle in a corrupt
/// file and stops with an error.
pub const DEPTH_MAX: usize = 64;
