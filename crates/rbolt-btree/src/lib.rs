//! rbolt's B+tree: the tree logic, independent of files.
//!
//! This crate owns how keys are found, ordered, inserted and removed: [`TreeView`] and
//! [`Cursor`] read committed pages (and a write transaction's edited nodes) without allocating;
//! [`Tree`] edits copy-on-write nodes, splits them as they grow, rebalances them after
//! deletes, and spills them to new pages at commit. It reads pages through [`PageSource`] /
//! [`Pages`] and obtains page ids and buffers through [`PageAlloc`]; it does no I/O, holds no
//! locks, and contains no `unsafe`. Buckets, transactions and the freelist are the callers'.
#![forbid(unsafe_code)]

mod arena;
mod cursor;
mod mem;
mod node;
mod pages;
mod tree;

pub use arena::Arena;
pub use cursor::{Cursor, ElemRef, Entry, TreeView};
pub use mem::{MemAlloc, MemStore};
pub use pages::{MemPages, PageSource, Pages};
pub use tree::{
    Delete, FILL_PERCENT_DEFAULT, FILL_PERCENT_MAX, FILL_PERCENT_MIN, MIN_KEYS_PER_PAGE,
    PAGE_COUNT_MAX, PageAlloc, Put, SPLIT_IN_TX_PAGES, Tree, TreeStats, ValueRef,
};

/// The deepest a tree may be. A descent that goes further is reading a cycle in a corrupt
/// file and stops with an error.
pub const DEPTH_MAX: usize = 64;
