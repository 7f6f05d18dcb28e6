//! The memory a write transaction's trees are made of: page-sized buffers, kept for reuse.
//!
//! An edited node is a private copy of a page image (see `node.rs`), held in a buffer of a
//! whole number of pages. At commit the tree hands each node's buffer to the allocator, which
//! writes it and (in the database) returns single-page buffers through [`Arena::recycle`] for
//! the next transaction; nodes merged away or undone come straight back here. So a
//! transaction that edits pages the previous one also edited allocates nothing for them.

use crate::node::Node;

/// Single-page buffers kept at most (32 MiB of 4 KiB pages): a transaction that edits more
/// pages than this allocates the rest (LMDB keeps every page buffer it ever dirtied).
pub const POOL_BUFFERS_MAX: usize = 8192;
/// Key-prefix arrays kept at most (one per node, see `node.rs`).
const POOL_PREFIXES_MAX: usize = 8192;

/// A pool of single-page buffers for nodes.
#[derive(Debug, Default)]
pub struct Arena {
    /// Buffers of `page_size` bytes; their content is whatever they held last.
    pool: Vec<Box<[u8]>>,
    /// The size of the pooled buffers (0 until the first one comes back).
    page_size: usize,
    /// Emptied key-prefix arrays of nodes, with their capacity.
    prefixes: Vec<Vec<u64>>,
    /// An emptied node list of a tree, with its capacity.
    nodes: Vec<Node>,
}

impl Arena {
    /// An empty pool; allocates nothing until buffers are asked for.
    pub fn new() -> Arena {
        Arena::default()
    }

    /// Pooled buffers.
    pub fn len(&self) -> usize {
        self.pool.len()
    }

    /// Whether no buffer is pooled.
    pub fn is_empty(&self) -> bool {
        self.pool.is_empty()
    }

    /// Keeps the buffers of `buffers` that are one page of `page_size` bytes for reuse (up to
    /// `POOL_BUFFERS_MAX`); others are dropped.
    pub fn recycle(&mut self, page_size: usize, buffers: impl IntoIterator<Item = Box<[u8]>>) {
        for buf in buffers {
            self.give(page_size, buf);
        }
    }

    /// A buffer of exactly `len` bytes (a whole number of pages of `page_size`), from the
    /// pool when it is one page; its content is unspecified.
    pub(crate) fn take(&mut self, page_size: usize, len: usize) -> Box<[u8]> {
        debug_assert!(
            len >= page_size && len.is_multiple_of(page_size),
            "a node buffer of {len} bytes is not a whole number of {page_size}-byte pages"
        );
        if len == page_size
            && page_size == self.page_size
            && let Some(buf) = self.pool.pop()
        {
            debug_assert_eq!(buf.len(), page_size, "a pooled buffer of the wrong size");
            return buf;
        }
        // Garbage, not zeros, in tests: the tree must write every byte it hands to a file.
        let fill = if cfg!(debug_assertions) { 0xA5 } else { 0 };
        vec![fill; len].into_boxed_slice()
    }

    /// An empty key-prefix array for a node, with room from an earlier node if there is one.
    pub(crate) fn take_prefixes(&mut self) -> Vec<u64> {
        self.prefixes.pop().unwrap_or_default()
    }

    /// Takes a node's key-prefix array back for reuse.
    pub(crate) fn give_prefixes(&mut self, mut prefixes: Vec<u64>) {
        if prefixes.capacity() > 0 && self.prefixes.len() < POOL_PREFIXES_MAX {
            prefixes.clear();
            self.prefixes.push(prefixes);
        }
    }

    /// An empty node list for a tree that starts editing, with room from an earlier tree.
    pub(crate) fn take_nodes(&mut self) -> Vec<Node> {
        std::mem::take(&mut self.nodes)
    }

    /// Takes a tree's node list back (its nodes' memory given back or handed on already).
    pub(crate) fn give_nodes(&mut self, mut nodes: Vec<Node>) {
        nodes.clear();
        if nodes.capacity() > self.nodes.capacity() {
            self.nodes = nodes;
        }
    }

    /// A buffer of exactly `len` bytes (as `take`) that starts with `bytes`: from the pool
    /// when it is one page, else allocated and filled without writing it twice.
    pub(crate) fn take_with(&mut self, page_size: usize, len: usize, bytes: &[u8]) -> Box<[u8]> {
        debug_assert!(
            bytes.len() <= len,
            "{} bytes in a buffer of {len}",
            bytes.len()
        );
        if len == page_size && page_size == self.page_size && !self.pool.is_empty() {
            let mut buf = self.take(page_size, len);
            buf[..bytes.len()].copy_from_slice(bytes);
            return buf;
        }
        let fill = if cfg!(debug_assertions) { 0xA5 } else { 0 };
        let mut buf = Vec::with_capacity(len);
        buf.extend_from_slice(bytes);
        buf.resize(len, fill);
        buf.into_boxed_slice()
    }

    /// Takes `buf` back for reuse if it is one page of `page_size` bytes (and there is room).
    pub(crate) fn give(&mut self, page_size: usize, buf: Box<[u8]>) {
        if buf.len() != page_size {
            return;
        }
        if page_size != self.page_size {
            // Buffers of another database's page size are of no use any more.
            self.pool.clear();
            self.page_size = page_size;
        }
        if self.pool.len() < POOL_BUFFERS_MAX {
            self.pool.push(buf);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_come_back_and_sizes_do_not_mix() {
        let mut arena = Arena::new();
        let first = arena.take(512, 512);
        assert_eq!(first.len(), 512);
        let ptr = first.as_ptr();
        arena.give(512, first);
        assert_eq!(arena.len(), 1);
        let again = arena.take(512, 512);
        assert_eq!(again.as_ptr(), ptr, "a pooled buffer is reused");
        // Multi-page buffers are not pooled.
        let big = arena.take(512, 1536);
        assert_eq!(big.len(), 1536);
        arena.give(512, big);
        assert!(arena.is_empty());
        arena.give(512, again);
        assert_eq!(arena.len(), 1);
        // A buffer of another page size is never handed out, and replaces the pool.
        let other = arena.take(4096, 4096);
        assert_eq!(other.len(), 4096);
        assert_eq!(arena.len(), 1);
        arena.recycle(4096, [other]);
        assert_eq!(arena.len(), 1);
        assert_eq!(arena.take(4096, 4096).len(), 4096);
        assert!(arena.is_empty());
    }
}
