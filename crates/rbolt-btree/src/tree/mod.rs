//! Editing a tree: the nodes a write transaction copied from pages, put and delete on them.
//!
//! Splitting is in `split.rs`, rebalancing in `rebalance.rs`, writing at commit in `spill.rs`,
//! freeing in `free.rs`; this file holds the tree, its root, and the descent that makes the
//! nodes of a path.
//!
//! Two invariants keep every node image ordered whatever the file held:
//! - **Ranges.** A node copied from a page is checked to hold only keys between the
//!   separators its ancestors give it (and a page already on the path is a cycle), so every
//!   separator a split or a commit writes into a parent falls between its neighbours.
//! - **The first separator routes nothing.** A branch sends every key below its second
//!   separator to its first child, as LMDB does, so a put of a key smaller than everything on
//!   the leftmost path needs no separator change until spill writes each branch's first
//!   separator from its child. Until then a branch's first key may be stale — when that child
//!   is a node, which spill writes. The separator of a child that is a page is its first key,
//!   as the file had it, and stays so: Go bbolt's writer needs every separator byte-equal to
//!   its child's first key (`hazard.rs`).

pub(crate) mod hazard;
mod sweep;

pub use sweep::{Direction, Verdict};

use crate::DEPTH_MAX;
use crate::cursor::{Entry, RootRef, TreeView};
use crate::node::arena::Arena;
use crate::node::{NODE_TAG, Node, NodeId};
use crate::pages::Pages;
use crate::tree::hazard::Verify;
use rbolt_page::{
    BucketHeader, Corruption, EMPTY_LEAF, LEAF_FLAG_BUCKET, NewEntry, Pgid, Reason, Result,
    compare_keys,
};
use smallvec::SmallVec;
use std::cmp::Ordering;

/// Fill percent reported when none is set (bbolt's default). Unset, a node that overflows
/// its page is split like a B-tree's (see [`Tree::set_fill_percent`]).
pub const FILL_PERCENT_DEFAULT: f64 = 0.5;
/// The fill percent is clamped to this range when pages are split.
pub const FILL_PERCENT_MIN: f64 = 0.1;
/// See `FILL_PERCENT_MIN`.
pub const FILL_PERCENT_MAX: f64 = 1.0;
/// Every branch page made by a split holds at least this many children (a leaf, one entry),
/// so a tree's height grows at most with the logarithm of its size.
pub const MIN_KEYS_PER_PAGE: usize = 2;

/// Where the tree obtains page ids for what it writes, takes the pages it wrote, and returns
/// pages it no longer uses.
pub trait PageAlloc {
    /// The caller's error; corruption found while writing converts into it.
    type Error: From<Corruption>;

    /// Allocates `n_pages` contiguous page ids and returns the first.
    fn allocate(&mut self, n_pages: usize) -> Result<Pgid, Self::Error>;

    /// Takes the image of the pages allocated at `pgid`: exactly their bytes (a whole number
    /// of pages), every byte written by the tree. `arena` is the one the tree takes its
    /// buffers from: an allocator that writes buffers out during this call (the image before
    /// this one, say) gives them back to it, for the nodes still to come; buffers it keeps
    /// longer go back to the same arena when it writes them ([`Arena::give`]).
    fn write(&mut self, pgid: Pgid, buf: Box<[u8]>, arena: &mut Arena) -> Result<(), Self::Error>;

    /// Frees page `pgid` and its `overflow` extra pages (pending until no reader sees them).
    fn free(&mut self, pgid: Pgid, overflow: u32) -> Result<(), Self::Error>;
}

/// Where a tree's root is.
#[derive(Clone, Debug)]
pub(crate) enum Root {
    /// A new tree, empty until its first edit (then a node).
    New,
    /// A committed page.
    Page(Pgid),
    /// An inline page at a position in the pages.
    Inline { pos: u64, len: u32 },
    /// An inline page the tree keeps a copy of (its bucket value lay in an edited node).
    InlineCopy(Box<[u8]>),
    /// A node of this tree.
    Node(NodeId),
}

/// What [`Tree::put`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Put {
    /// The key was new.
    Inserted,
    /// The key held an entry of the same kind, now replaced; its flags.
    Replaced {
        /// Flags of the replaced entry.
        flags: u32,
    },
    /// The key holds an entry of the other kind (a bucket where a value was put, or the other
    /// way round); nothing changed.
    KindConflict {
        /// Flags of the entry found.
        flags: u32,
    },
}

/// What [`Tree::delete`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Delete {
    /// The entry was deleted; its flags.
    Deleted {
        /// Flags of the deleted entry.
        flags: u32,
    },
    /// No entry holds the key; nothing changed.
    NotFound,
    /// The key holds an entry of the other kind; nothing changed.
    KindConflict {
        /// Flags of the entry found.
        flags: u32,
    },
}

/// What a tree did in a transaction (bbolt's per-transaction node counters).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TreeStats {
    /// Nodes made from pages (or inline pages) to be edited.
    pub node_count: u64,
    /// Nodes split, inside the transaction or at spill.
    pub split: u64,
    /// Nodes merged into a sibling or removed by rebalancing.
    pub rebalance: u64,
    /// Pages (or runs of pages) written by spill.
    pub spill: u64,
}

impl TreeStats {
    /// Adds `other`'s counts.
    pub fn add(&mut self, other: &TreeStats) {
        self.node_count += other.node_count;
        self.split += other.split;
        self.rebalance += other.rebalance;
        self.spill += other.spill;
    }
}

/// The branch nodes from the root down to a node, each with the index of the child taken.
pub(crate) type Path = SmallVec<[(NodeId, usize); 16]>;

/// A key bound: separator `index` of node `id`, or none (the tree's end).
pub(crate) type Bound = Option<(NodeId, usize)>;

/// What an edit that fails (or finds nothing to do) undoes: nodes made from pages on the way
/// down, and the one link from the existing tree to the first of them.
pub(crate) struct Undo {
    nodes_len: usize,
    node_count: u64,
    link: Option<Link>,
}

enum Link {
    Root(Root),
    Child {
        parent: NodeId,
        index: usize,
        child: u64,
    },
}

/// One tree being edited by a write transaction.
///
/// Nodes are copied from pages on the way down to what changes (copy-on-write), edited in
/// place, and live until commit, when [`Tree::rebalance`] and [`Tree::spill`] hand them to the
/// allocator as pages. See the module documentation for the invariants.
#[derive(Debug)]
pub struct Tree {
    pub(crate) root: Root,
    pub(crate) nodes: Vec<Node>,
    pub(crate) fill_percent: Option<f64>,
    pub(crate) stats: TreeStats,
    /// The path to the tree's rightmost leaf, kept when the last put appended there: a key
    /// past that leaf's last key goes to the same place, so a sorted load skips the descent.
    /// Every other edit drops it.
    pub(crate) append_hint: Option<(Path, NodeId)>,
    /// Separator keys copied out of nodes while another node is edited.
    pub(crate) scratch: Vec<u8>,
    /// What debug builds and the `verify` feature check page images against before they are
    /// written (empty otherwise).
    pub(crate) verify: Verify,
}

#[cold]
pub(crate) fn too_deep() -> Corruption {
    Corruption::new(
        Pgid(0),
        Reason::TooDeep {
            depth_max: DEPTH_MAX,
        },
    )
}

impl Tree {
    fn with_root(root: Root) -> Tree {
        Tree {
            root,
            nodes: Vec::new(),
            fill_percent: None,
            stats: TreeStats::default(),
            append_hint: None,
            scratch: Vec::new(),
            verify: Verify::default(),
        }
    }

    /// A new, empty tree (an empty leaf, to be written at commit).
    pub fn new() -> Tree {
        Tree::with_root(Root::New)
    }

    /// The committed tree rooted at page `root`.
    pub fn from_page(root: Pgid) -> Tree {
        Tree::with_root(Root::Page(root))
    }

    /// The tree of the bucket value `value` (a value read from `pages` or from an edited
    /// tree), and the bucket's header. An inline bucket's page is read where it is when it
    /// lies in `pages`, and copied when it lies in an edited node (which later edits move).
    pub fn from_bucket_value(pages: Pages<'_>, value: &[u8]) -> Result<(Tree, BucketHeader)> {
        let parsed = rbolt_page::BucketValue::parse(value, Pgid(0))?;
        let root = match parsed.inline {
            Some(inline) => {
                let page = inline.bytes();
                match pages.position_of(page) {
                    Some(pos) => Root::Inline {
                        pos,
                        len: page.len() as u32,
                    },
                    None => Root::InlineCopy(page.into()),
                }
            }
            None => Root::Page(parsed.header.root_pgid()),
        };
        Ok((Tree::with_root(root), parsed.header))
    }

    /// What the tree did so far.
    pub fn stats(&self) -> TreeStats {
        self.stats
    }

    /// The fill percent set with [`Tree::set_fill_percent`], or `FILL_PERCENT_DEFAULT`.
    pub fn fill_percent(&self) -> f64 {
        self.fill_percent.unwrap_or(FILL_PERCENT_DEFAULT)
    }

    /// Sets how full a split leaves pages: a node that outgrows its page keeps this fraction
    /// of a page (clamped to 0.1..=1.0) and the rest moves to a new node, as bbolt cuts
    /// pages; 1.0 packs a sorted load. Unset, the tree splits like a B-tree: at the byte
    /// middle, so random inserts leave pages about 69% full, or, when a node is filled in
    /// ascending order, at the append point, so a sorted load leaves full pages.
    pub fn set_fill_percent(&mut self, fill_percent: f64) {
        self.fill_percent = Some(fill_percent);
    }

    /// Whether the tree was edited (or is new): it must be spilled at commit.
    pub fn is_dirty(&self) -> bool {
        matches!(self.root, Root::Node(_) | Root::New)
    }

    /// The committed root page, when the tree is neither edited nor inline.
    pub fn root_pgid(&self) -> Option<Pgid> {
        match self.root {
            Root::Page(pgid) => Some(pgid),
            _ => None,
        }
    }

    /// Diagnostics: the size in page bytes of the largest edited node.
    pub fn largest_node_len(&self) -> usize {
        self.nodes.iter().map(Node::used).max().unwrap_or(0)
    }

    /// Drops the tree and keeps its nodes' memory in `arena` for the next one (a tree dropped
    /// otherwise frees it): for a transaction rolled back.
    pub fn recycle(mut self, arena: &mut Arena) {
        for node in &mut self.nodes {
            if !node.is_gone() {
                node.recycle(arena);
            }
        }
        arena.give_nodes(std::mem::take(&mut self.nodes));
    }

    /// A read-only view for lookups and cursors.
    pub fn view<'a>(&'a self, pages: Pages<'a>) -> TreeView<'a> {
        let root = match &self.root {
            Root::New => RootRef::Inline(&EMPTY_LEAF),
            Root::Page(pgid) => RootRef::Page(*pgid),
            Root::Inline { pos, len } => {
                let start = *pos as usize;
                RootRef::Inline(&pages.data()[start..start + *len as usize])
            }
            Root::InlineCopy(page) => RootRef::Inline(page),
            Root::Node(id) => RootRef::Node(*id),
        };
        TreeView {
            pages,
            nodes: &self.nodes,
            root,
        }
    }

    /// The entry holding exactly `key`.
    pub fn get<'a>(&'a self, pages: Pages<'a>, key: &[u8]) -> Result<Option<Entry<'a>>> {
        self.view(pages).get(key)
    }

    /// Makes the root a node (so the tree is written at commit even if nothing else changes).
    pub fn touch(&mut self, pages: Pages<'_>, arena: &mut Arena) -> Result<()> {
        self.materialize_root(pages, arena, None).map(|_| ())
    }

    /// Makes nodes of every page on the path from the root to the leaf where `key` belongs,
    /// changing nothing else: at commit those pages are written to newly allocated pages and
    /// the old ones freed, as after an edit there. `key` need not be in the tree (the path is
    /// the one a put of it would take). This is how a vacuum moves a page: it touches the
    /// path through it, and the allocator hands out low page ids. On an error the tree is
    /// exactly as before.
    pub fn touch_key(&mut self, pages: Pages<'_>, arena: &mut Arena, key: &[u8]) -> Result<()> {
        self.append_hint = None;
        let mut undo = self.undo_point();
        match self.descend_mut(pages, arena, key, &mut undo) {
            Ok(_) => Ok(()),
            Err(error) => {
                self.undo(undo, arena);
                Err(error)
            }
        }
    }

    // ---- Making nodes ----------------------------------------------------------------------

    pub(crate) fn push_node(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        debug_assert!(self.nodes.len() <= u32::MAX as usize, "more nodes than ids");
        (self.nodes.len() - 1) as NodeId
    }

    /// A point to undo to: see [`Tree::undo`].
    pub(crate) fn undo_point(&self) -> Undo {
        Undo {
            nodes_len: self.nodes.len(),
            node_count: self.stats.node_count,
            link: None,
        }
    }

    /// Forgets the nodes made since `undo` was taken and restores the link to them, so the
    /// tree is exactly as it was then (nodes edited since are not undone: callers undo only
    /// descents that edited nothing).
    pub(crate) fn undo(&mut self, undo: Undo, arena: &mut Arena) {
        for mut node in self.nodes.drain(undo.nodes_len..) {
            node.recycle(arena);
        }
        match undo.link {
            Some(Link::Root(root)) => self.root = root,
            Some(Link::Child {
                parent,
                index,
                child,
            }) => self.nodes[parent as usize].set_child(index, child),
            None => {}
        }
        self.stats.node_count = undo.node_count;
    }

    /// The root as a node, made from its page (or inline page) if need be.
    pub(crate) fn materialize_root(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        undo: Option<&mut Undo>,
    ) -> Result<NodeId> {
        debug_assert_eq!(
            pages.page_size(),
            arena.page_size(),
            "an arena of another database's pages"
        );
        if self.nodes.capacity() == 0 {
            self.nodes = arena.take_nodes();
        }
        if self.scratch.capacity() == 0 {
            self.scratch = arena.take_scratch();
        }
        let node = match &self.root {
            Root::Node(id) => return Ok(*id),
            Root::New => {
                let page_size = arena.page_size();
                Node::empty(arena, page_size, true)
            }
            Root::Page(pgid) => {
                let (bytes, header) = pages.page_and_header(Pgid(0), *pgid)?;
                let mut node = Node::from_file_page(bytes, *pgid, arena)?;
                node.overflow = header.overflow;
                self.verify.loaded(pages, &node);
                self.stats.node_count += 1;
                node
            }
            Root::Inline { pos, len } => {
                let start = *pos as usize;
                let bytes = &pages.data()[start..start + *len as usize];
                self.stats.node_count += 1;
                Node::from_page(bytes, Pgid(0), Pgid(0), arena)?
            }
            Root::InlineCopy(bytes) => {
                self.stats.node_count += 1;
                Node::from_page(bytes, Pgid(0), Pgid(0), arena)?
            }
        };
        let id = self.push_node(node);
        let old = std::mem::replace(&mut self.root, Root::Node(id));
        if let Some(undo) = undo {
            debug_assert!(
                undo.link.is_none(),
                "the root is the first link of a descent"
            );
            undo.link = Some(Link::Root(old));
        }
        Ok(id)
    }

    /// The node of child `index` of branch node `parent`, made from its page if need be and
    /// checked to hold only keys within `low..high` (see the module documentation); `path`
    /// holds the nodes above, whose pages it must not be (a cycle in a corrupt file).
    #[expect(
        clippy::too_many_arguments,
        reason = "one step down: the link, its bounds, the path above and the undo record"
    )]
    pub(crate) fn child_node(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        parent: NodeId,
        index: usize,
        (low, high): (Bound, Bound),
        path: &[(NodeId, usize)],
        undo: Option<&mut Undo>,
    ) -> Result<NodeId> {
        let child = self.nodes[parent as usize].child(index);
        if child & NODE_TAG != 0 {
            return Ok((child & !NODE_TAG) as NodeId);
        }
        let pgid = Pgid(child);
        let owner = self.nodes[parent as usize].pgid;
        if owner == pgid
            || path
                .iter()
                .any(|&(id, _)| self.nodes[id as usize].pgid == pgid)
        {
            // A page that is its own ancestor: a descent would go round until DEPTH_MAX.
            return Err(too_deep());
        }
        let (bytes, header) = pages.page_and_header(owner, pgid)?;
        let mut node = Node::from_file_page(bytes, pgid, arena)?;
        node.overflow = header.overflow;
        if let Err(error) = self.check_range(&node, pgid, low, high) {
            node.recycle(arena);
            return Err(error);
        }
        // A page Go's writer cannot continue (an empty leaf, a branch with one child: files of
        // older rbolt versions) is merged or removed at commit, as after a delete there.
        if node.count() < min_count(&node) {
            node.unbalanced = true;
        }
        self.verify.loaded(pages, &node);
        self.stats.node_count += 1;
        let id = self.push_node(node);
        if let Some(undo) = undo
            && undo.link.is_none()
            && (parent as usize) < undo.nodes_len
        {
            undo.link = Some(Link::Child {
                parent,
                index,
                child,
            });
        }
        self.nodes[parent as usize].set_child(index, NODE_TAG | u64::from(id));
        Ok(id)
    }

    /// The key of a bound.
    #[inline]
    pub(crate) fn bound_key(&self, bound: Bound) -> Option<&[u8]> {
        bound.map(|(id, index)| self.nodes[id as usize].key(index))
    }

    /// Checks that `node` (copied from page `pgid`) holds only keys in `low..high`: a leaf's
    /// keys, a branch's separators after the first (which routes nothing).
    fn check_range(&self, node: &Node, pgid: Pgid, low: Bound, high: Bound) -> Result<()> {
        let count = node.count();
        let first = usize::from(!node.is_leaf());
        if count <= first {
            return Ok(());
        }
        if let Some(low) = self.bound_key(low)
            && compare_keys(node.key(first), low) == Ordering::Less
        {
            return Err(Corruption::new(pgid, Reason::KeyOrder { index: first }));
        }
        if let Some(high) = self.bound_key(high)
            && compare_keys(node.key(count - 1), high) != Ordering::Less
        {
            return Err(Corruption::new(pgid, Reason::KeyOrder { index: count - 1 }));
        }
        Ok(())
    }

    /// The bounds of child `index` of `parent`, whose own bounds are `bounds`.
    #[inline]
    pub(crate) fn child_bounds(
        &self,
        parent: NodeId,
        index: usize,
        (low, high): (Bound, Bound),
    ) -> (Bound, Bound) {
        let count = self.nodes[parent as usize].count();
        let low = if index >= 1 {
            Some((parent, index))
        } else {
            low
        };
        let high = if index + 1 < count {
            Some((parent, index + 1))
        } else {
            high
        };
        (low, high)
    }

    /// Descends to the leaf where `key` belongs, making nodes of the path; returns the path of
    /// (branch node, child index) pairs and the leaf node. On error the nodes it made stay
    /// (recorded in `undo`).
    pub(crate) fn descend_mut(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        key: &[u8],
        undo: &mut Undo,
    ) -> Result<(Path, NodeId)> {
        let mut path = Path::new();
        let mut id = self.materialize_root(pages, arena, Some(undo))?;
        let mut bounds: (Bound, Bound) = (None, None);
        loop {
            let node = &self.nodes[id as usize];
            if node.is_leaf() {
                return Ok((path, id));
            }
            if node.count() == 0 {
                // Pages with no children are refused when copied; only a bug leaves one here.
                debug_assert!(false, "an empty branch node on a path");
                return Err(Corruption::new(node.pgid, Reason::EmptyBranch));
            }
            if path.len() + 1 >= DEPTH_MAX {
                return Err(too_deep());
            }
            let index = node.child_index(key);
            bounds = self.child_bounds(id, index, bounds);
            let child = self.child_node(pages, arena, id, index, bounds, &path, Some(undo))?;
            path.push((id, index));
            id = child;
        }
    }

    // ---- Put and delete --------------------------------------------------------------------

    /// Inserts `key` with `value` (`flags`: 0, or `LEAF_FLAG_BUCKET`), or replaces the entry
    /// holding `key` if it is of the same kind (value or bucket). An entry of the other kind is
    /// left alone and reported as [`Put::KindConflict`]. On an error (a corrupt page on the
    /// way) and on a conflict the tree is exactly as before.
    pub fn put(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        key: &[u8],
        value: &[u8],
        flags: u32,
    ) -> Result<Put> {
        debug_assert!(!key.is_empty(), "empty key");
        let page_size = pages.page_size();
        let entry = NewEntry::Leaf { flags, key, value };
        // A sorted load appends to the same leaf put after put: the hint stays where it is
        // (a path is a few hundred bytes to move) until the leaf splits.
        if let Some((_, leaf)) = &self.append_hint
            && self.nodes[*leaf as usize].is_after_last(key)
        {
            let leaf = *leaf;
            let node = &mut self.nodes[leaf as usize];
            let count = node.count();
            if node.fits(entry.size(), 1, page_size) {
                node.insert(count, &entry);
                node.appended = true;
            } else if let Some((path, _)) = self.append_hint.take() {
                self.insert_entry(&path, leaf, count, &entry, arena);
            }
            return Ok(Put::Inserted);
        }
        self.append_hint = None;
        let mut undo = self.undo_point();
        let (path, leaf) = match self.descend_mut(pages, arena, key, &mut undo) {
            Ok(found) => found,
            Err(error) => {
                self.undo(undo, arena);
                return Err(error);
            }
        };
        let index = self.nodes[leaf as usize].search(key);
        match index {
            Ok(index) => {
                let node = &mut self.nodes[leaf as usize];
                let old_flags = node.flags(index);
                if (old_flags ^ flags) & LEAF_FLAG_BUCKET != 0 {
                    self.undo(undo, arena);
                    return Ok(Put::KindConflict { flags: old_flags });
                }
                let old_len = node.value(index).len();
                if value.len() <= old_len || node.fits(value.len() - old_len, 0, page_size) {
                    node.set_value(index, flags, value);
                } else {
                    // A longer value that does not fit: out and in again, splitting if need be.
                    node.remove(index);
                    self.insert_entry(&path, leaf, index, &entry, arena);
                }
                Ok(Put::Replaced { flags: old_flags })
            }
            Err(index) => {
                let at_end = index == self.nodes[leaf as usize].count();
                let split = self.insert_entry(&path, leaf, index, &entry, arena);
                if !split && at_end && self.is_rightmost(&path) {
                    self.append_hint = Some((path, leaf));
                }
                Ok(Put::Inserted)
            }
        }
    }

    /// Whether every step of `path` takes its branch's last child.
    fn is_rightmost(&self, path: &[(NodeId, usize)]) -> bool {
        path.iter()
            .all(|&(id, index)| index + 1 == self.nodes[id as usize].count())
    }

    /// Deletes the entry holding `key` if it is of the kind `flags` says (value or bucket). On
    /// an error, when nothing is found, and on a conflict the tree is exactly as before.
    pub fn delete(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        key: &[u8],
        flags: u32,
    ) -> Result<Delete> {
        self.append_hint = None;
        let mut undo = self.undo_point();
        let leaf = match self.descend_mut(pages, arena, key, &mut undo) {
            Ok((_, leaf)) => leaf,
            Err(error) => {
                self.undo(undo, arena);
                return Err(error);
            }
        };
        let node = &mut self.nodes[leaf as usize];
        let Ok(index) = node.search(key) else {
            self.undo(undo, arena);
            return Ok(Delete::NotFound);
        };
        let old_flags = node.flags(index);
        if (old_flags ^ flags) & LEAF_FLAG_BUCKET != 0 {
            self.undo(undo, arena);
            return Ok(Delete::KindConflict { flags: old_flags });
        }
        node.remove(index);
        node.unbalanced = true;
        Ok(Delete::Deleted { flags: old_flags })
    }

    // ---- Inline buckets --------------------------------------------------------------------

    /// The bytes the tree would take stored inline in its bucket value, if it may be: its
    /// root is an edited leaf, holds no buckets, and takes at most `size_max` bytes.
    pub fn inline_size(&self, size_max: usize) -> Option<usize> {
        let size = match self.root {
            Root::New => EMPTY_LEAF.len(),
            Root::Node(id) => {
                let node = &self.nodes[id as usize];
                if !node.is_leaf() || node.has_buckets() {
                    return None;
                }
                node.used()
            }
            _ => return None,
        };
        (size <= size_max).then_some(size)
    }

    /// Writes the root leaf as an inline page (id 0) into `buf`, exactly `inline_size` bytes.
    ///
    /// # Panics
    /// When the tree has no edited leaf root or `buf` is not `inline_size` bytes long.
    pub fn write_inline(&self, buf: &mut [u8]) {
        match self.root {
            Root::New => buf.copy_from_slice(&EMPTY_LEAF),
            Root::Node(id) => {
                let node = &self.nodes[id as usize];
                assert!(node.is_leaf(), "write_inline on a branch");
                node.write_inline(buf);
            }
            _ => panic!("write_inline on a tree that is not edited"),
        }
    }
}

impl Default for Tree {
    fn default() -> Tree {
        Tree::new()
    }
}

/// The fewest entries a page below a root may hold for Go bbolt's writer (its `minKeys`): a
/// leaf one, a branch two children.
pub(crate) fn min_count(node: &Node) -> usize {
    if node.is_leaf() { 1 } else { MIN_KEYS_PER_PAGE }
}
