//! The memory a write transaction's trees are made of: page-sized buffers, kept for reuse.
//!
//! An edited node is a private copy of a page image (see `node.rs`), held in a buffer of a
//! whole number of pages. At commit the tree hands each node's buffer to the allocator, with
//! the arena ([`PageAlloc::write`](crate::PageAlloc::write)), and the allocator gives each one
//! back once it has written it; nodes merged away or undone come straight back here. In the
//! database the arena is the writer's one pool of page buffers: the allocator takes the pages
//! it fills itself (the freelist, the meta) from it too, and the writer keeps it between
//! transactions. So a transaction that edits pages the previous one also edited allocates
//! nothing for them.
//!
//! An arena belongs to one database, whose pages all have one size: it is made with that
//! size, and every buffer it hands out is a whole number of such pages.

use crate::node::Node;
use rbolt_page::{PageSet, Pgid};

/// Single-page buffers kept at most (32 MiB of 4 KiB pages): a transaction that edits more
/// pages than this allocates the rest (LMDB keeps every page buffer it ever dirtied).
pub const POOL_BUFFERS_MAX: usize = 8192;
/// Key-prefix arrays kept at most (one per node, see `node.rs`).
const POOL_PREFIXES_MAX: usize = 8192;

/// A pool of single-page buffers for the pages of one database.
#[derive(Debug)]
pub struct Arena {
    /// Buffers of `page_size` bytes; their content is whatever they held last.
    pool: Vec<Box<[u8]>>,
    /// The page size of the database: of every pooled buffer, and the unit of every buffer
    /// handed out.
    page_size: usize,
    /// Emptied key-prefix arrays of nodes, with their capacity.
    prefixes: Vec<Vec<u64>>,
    /// An emptied node list of a tree, with its capacity.
    nodes: Vec<Node>,
    /// An emptied key scratch of a tree's spill, with its capacity.
    scratch: Vec<u8>,
    /// The pages known to hold a checked tree page: see [`Arena::mark_checked`].
    checked: PageSet,
    /// Pages a commit in progress wrote from nodes, to mark once it is done (see
    /// [`Arena::stage_checked`]); kept with its capacity between commits.
    staged: Vec<Pgid>,
}

impl Arena {
    /// An empty pool for pages of `page_size` bytes; allocates nothing until buffers are
    /// asked for.
    pub fn new(page_size: usize) -> Arena {
        assert!(page_size > 0, "a page size of 0");
        Arena {
            pool: Vec::new(),
            page_size,
            prefixes: Vec::new(),
            nodes: Vec::new(),
            scratch: Vec::new(),
            checked: PageSet::default(),
            staged: Vec::new(),
        }
    }

    /// Notes that a commit in progress writes a node's image, one page, at `pgid`: marked by
    /// [`Arena::mark_staged`] once the commit is done, forgotten by [`Arena::clear_staged`]
    /// (which a commit calls first, so that a failed one's pages are never marked).
    pub fn stage_checked(&mut self, pgid: Pgid) {
        self.staged.push(pgid);
    }

    /// Marks every staged page checked (its write is done) and empties the list.
    pub fn mark_staged(&mut self) {
        for pgid in self.staged.drain(..) {
            self.checked.insert_run(pgid, 1);
        }
    }

    /// Empties the list of staged pages without marking them.
    pub fn clear_staged(&mut self) {
        self.staged.clear();
    }

    /// Remembers that the single page at `pgid` holds a tree page that passed
    /// [`check_tree_page`](rbolt_page::check_tree_page) packed (or that the writer wrote
    /// it from a node): [`Node::from_file_page`] then reads it without the check's costly
    /// parts, so a page pays for the check once per handle, not once per transaction that
    /// copies it. The caller keeps the promise that the bytes stay as they were: it calls
    /// [`Arena::forget_checked`] before it writes over any page, and marks a page it wrote
    /// only once the write is done. The file's lock keeps other writers out. A truncation
    /// needs no call: the pages it cuts off lie past the high-water mark, and a page comes
    /// back below it only by being allocated and written.
    pub fn mark_checked(&mut self, pgid: Pgid) {
        self.checked.insert_run(pgid, 1);
    }

    /// Whether [`Arena::mark_checked`] holds for `pgid`.
    #[inline]
    pub fn is_checked(&self, pgid: Pgid) -> bool {
        self.checked.contains(pgid)
    }

    /// Forgets the marks of the `n_pages` pages from `first` on (`u64::MAX`: of every page
    /// from `first` on): their bytes are about to change.
    pub fn forget_checked(&mut self, first: Pgid, n_pages: u64) {
        self.checked.remove_run(first, n_pages);
    }

    /// The page size of the database the arena serves.
    #[inline]
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// Pooled buffers.
    pub fn len(&self) -> usize {
        self.pool.len()
    }

    /// Whether no buffer is pooled.
    pub fn is_empty(&self) -> bool {
        self.pool.is_empty()
    }

    /// Keeps the buffers of `buffers` that are one page for reuse (up to
    /// `POOL_BUFFERS_MAX`); others are dropped.
    pub fn recycle(&mut self, buffers: impl IntoIterator<Item = Box<[u8]>>) {
        for buf in buffers {
            self.give(buf);
        }
    }

    /// A buffer of exactly `len` bytes (a whole number of pages), from the pool when it is one
    /// page; its content is unspecified.
    pub fn take(&mut self, len: usize) -> Box<[u8]> {
        let page_size = self.page_size;
        debug_assert!(
            len >= page_size && len.is_multiple_of(page_size),
            "a page buffer of {len} bytes is not a whole number of {page_size}-byte pages"
        );
        if len == page_size
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
    pub(crate) fn give_nodes(&mut self, nodes: Vec<Node>) {
        keep_roomier(&mut self.nodes, nodes);
    }

    /// An empty key scratch for a tree that starts editing, with room from an earlier tree.
    pub(crate) fn take_scratch(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.scratch)
    }

    /// Takes a tree's key scratch back.
    pub(crate) fn give_scratch(&mut self, scratch: Vec<u8>) {
        keep_roomier(&mut self.scratch, scratch);
    }

    /// A buffer of exactly `len` bytes (as `take`) that starts with `bytes`: from the pool
    /// when it is one page, else allocated and filled without writing it twice.
    pub(crate) fn take_with(&mut self, len: usize, bytes: &[u8]) -> Box<[u8]> {
        debug_assert!(
            bytes.len() <= len,
            "{} bytes in a buffer of {len}",
            bytes.len()
        );
        if len == self.page_size && !self.pool.is_empty() {
            let mut buf = self.take(len);
            buf[..bytes.len()].copy_from_slice(bytes);
            return buf;
        }
        let fill = if cfg!(debug_assertions) { 0xA5 } else { 0 };
        let mut buf = Vec::with_capacity(len);
        buf.extend_from_slice(bytes);
        buf.resize(len, fill);
        buf.into_boxed_slice()
    }

    /// Takes `buf` back for reuse if it is one page (and there is room); drops it otherwise.
    pub fn give(&mut self, buf: Box<[u8]>) {
        if buf.len() == self.page_size && self.pool.len() < POOL_BUFFERS_MAX {
            self.pool.push(buf);
        }
    }
}

/// Keeps in `kept` whichever of it and `given` has more room, emptied.
fn keep_roomier<T>(kept: &mut Vec<T>, mut given: Vec<T>) {
    given.clear();
    if given.capacity() > kept.capacity() {
        *kept = given;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_page_buffers_come_back_and_others_do_not() {
        let mut arena = Arena::new(512);
        assert_eq!(arena.page_size(), 512);
        let first = arena.take(512);
        assert_eq!(first.len(), 512);
        let ptr = first.as_ptr();
        arena.give(first);
        assert_eq!(arena.len(), 1);
        let again = arena.take(512);
        assert_eq!(again.as_ptr(), ptr, "a pooled buffer is reused");
        // Multi-page buffers are not pooled.
        let big = arena.take(1536);
        assert_eq!(big.len(), 1536);
        arena.give(big);
        assert!(arena.is_empty());
        arena.give(again);
        assert_eq!(arena.len(), 1);
        // A buffer that is not one of its pages is dropped, and never handed out.
        arena.recycle([vec![0u8; 4096].into_boxed_slice(), vec![0u8; 256].into()]);
        assert_eq!(arena.len(), 1);
        assert_eq!(arena.take(512).len(), 512);
        assert!(arena.is_empty());
        // `take_with` starts from the pool too.
        arena.give(vec![0u8; 512].into());
        let filled = arena.take_with(512, b"abc");
        assert!(arena.is_empty());
        assert_eq!(&filled[..3], b"abc");
    }

    #[test]
    fn the_pool_is_capped() {
        let mut arena = Arena::new(64);
        arena.recycle((0..POOL_BUFFERS_MAX + 3).map(|_| vec![0u8; 64].into_boxed_slice()));
        assert_eq!(arena.len(), POOL_BUFFERS_MAX);
    }
}
