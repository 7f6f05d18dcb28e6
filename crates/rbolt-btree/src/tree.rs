//! Editing a tree: put and delete on nodes, split, rebalance, spill to pages.

use crate::DEPTH_MAX;
use crate::arena::{Arena, resolve};
use crate::cursor::{Entry, RootRef, TreeView};
use crate::node::{BranchInode, Child, Inodes, LeafInode, Node, NodeId};
use crate::pages::Pages;
use rbolt_page::{
    BranchBuilder, BucketHeader, Corruption, LEAF_FLAG_BUCKET, LeafBuilder, LeafPage,
    PAGE_HEADER_SIZE, PageKind, PageRef, Pgid, Reason, Result, pages_for,
};
use smallvec::SmallVec;

/// Fill percent when none is set: pages are split half full, so random inserts rarely split.
pub const FILL_PERCENT_DEFAULT: f64 = 0.5;
/// The fill percent is clamped to this range when pages are split.
pub const FILL_PERCENT_MIN: f64 = 0.1;
/// See `FILL_PERCENT_MIN`.
pub const FILL_PERCENT_MAX: f64 = 1.0;
/// Every page but a tree's only one holds at least this many keys.
pub const MIN_KEYS_PER_PAGE: usize = 2;
/// The most elements a page can count (its header's count is 16 bits).
pub const PAGE_COUNT_MAX: usize = u16::MAX as usize;
/// A node that grows past this many pages inside a transaction is split at once, so that a
/// transaction inserting many keys stays O(n log n) (Go bbolt splits only at commit).
pub const SPLIT_IN_TX_PAGES: usize = 4;

/// Where the tree obtains pages for what it writes, and returns pages it no longer uses.
pub trait PageAlloc {
    /// The caller's error; corruption found while writing converts into it.
    type Error: From<Corruption>;

    /// Allocates `n_pages` contiguous pages and returns the first id and a buffer of exactly
    /// `n_pages * page_size` bytes in which the tree writes them (its content is unspecified:
    /// the tree writes every byte).
    fn allocate(&mut self, n_pages: usize) -> Result<(Pgid, &mut [u8]), Self::Error>;

    /// Frees page `pgid` and its `overflow` extra pages (pending until no reader sees them).
    fn free(&mut self, pgid: Pgid, overflow: u32) -> Result<(), Self::Error>;
}

/// Where a tree's root is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Root {
    /// A committed page.
    Page(Pgid),
    /// An inline page at a (tagged) position, in the pages or the arena.
    Inline { pos: u64, len: u32 },
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
    /// No entry holds the key.
    NotFound,
    /// The key holds an entry of the other kind; nothing changed.
    KindConflict {
        /// Flags of the entry found.
        flags: u32,
    },
}

/// Where a value is, for reopening a bucket from it without copying.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ValueRef {
    pos: u64,
    len: u32,
    /// The entry's flags.
    pub flags: u32,
}

/// One tree being edited by a write transaction.
///
/// Nodes are made from pages on the way down to what changes (copy-on-write) and live until
/// commit, when [`Tree::rebalance`] and [`Tree::spill`] write them to new pages. Byte content is
/// never copied out of the pages; what the transaction writes lives in its [`Arena`].
#[derive(Debug)]
pub struct Tree {
    root: Root,
    nodes: Vec<Node>,
    fill_percent: f64,
    stats: TreeStats,
    /// The path to the tree's rightmost leaf, kept when the last put appended there: a key
    /// past that leaf's last key goes to the same place, so a sorted load skips the descent.
    /// Every other edit drops it.
    append_hint: Option<(Path, NodeId)>,
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

/// The branch nodes from the root down to a leaf, each with the index of the child taken.
type Path = SmallVec<[(NodeId, usize); 16]>;

/// A piece of a node written to a page: its first key and where it went.
#[derive(Clone, Copy, Debug)]
struct Piece {
    key_pos: u64,
    key_prefix: u64,
    key_len: u32,
    pgid: Pgid,
}

#[cold]
fn too_deep() -> Corruption {
    Corruption::new(
        Pgid(0),
        Reason::TooDeep {
            depth_max: DEPTH_MAX,
        },
    )
}

impl Tree {
    /// A new, empty tree (a single empty leaf, to be written at commit).
    pub fn new() -> Tree {
        Tree {
            root: Root::Node(0),
            nodes: vec![Node::new_leaf()],
            fill_percent: FILL_PERCENT_DEFAULT,
            stats: TreeStats::default(),
            append_hint: None,
        }
    }

    /// The committed tree rooted at page `root`.
    pub fn from_page(root: Pgid) -> Tree {
        Tree {
            root: Root::Page(root),
            nodes: Vec::new(),
            fill_percent: FILL_PERCENT_DEFAULT,
            stats: TreeStats::default(),
            append_hint: None,
        }
    }

    /// The tree of a bucket value found at `value` (see [`Tree::get_ref`]), and the bucket's
    /// header. An inline bucket's page is read where it is, not copied.
    pub fn from_bucket_value(
        pages: Pages<'_>,
        arena: &Arena,
        value: ValueRef,
    ) -> Result<(Tree, BucketHeader)> {
        let bytes = resolve(value.pos, value.len as usize, pages.data(), arena);
        let parsed = rbolt_page::BucketValue::parse(bytes, Pgid(0))?;
        let root = match parsed.inline {
            Some(_) => Root::Inline {
                pos: value.pos + rbolt_page::BUCKET_HEADER_SIZE as u64,
                len: value.len - rbolt_page::BUCKET_HEADER_SIZE as u32,
            },
            None => Root::Page(parsed.header.root_pgid()),
        };
        Ok((
            Tree {
                root,
                nodes: Vec::new(),
                fill_percent: FILL_PERCENT_DEFAULT,
                stats: TreeStats::default(),
                append_hint: None,
            },
            parsed.header,
        ))
    }

    /// What the tree did so far.
    pub fn stats(&self) -> TreeStats {
        self.stats
    }

    /// How full split pages are made (clamped to 0.1..=1.0 when used).
    pub fn fill_percent(&self) -> f64 {
        self.fill_percent
    }

    /// Sets how full split pages are made: 1.0 packs sorted loads; 0.5 leaves room for inserts.
    pub fn set_fill_percent(&mut self, fill_percent: f64) {
        self.fill_percent = fill_percent;
    }

    /// Whether the tree was edited (its root is a node): it must be spilled at commit.
    pub fn is_dirty(&self) -> bool {
        matches!(self.root, Root::Node(_))
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
        self.nodes.iter().map(|node| node.size).max().unwrap_or(0)
    }

    /// A read-only view for lookups and cursors.
    pub fn view<'a>(&'a self, pages: Pages<'a>, arena: &'a Arena) -> TreeView<'a> {
        let root = match self.root {
            Root::Page(pgid) => RootRef::Page(pgid),
            Root::Inline { pos, len } => {
                RootRef::Inline(resolve(pos, len as usize, pages.data(), arena))
            }
            Root::Node(id) => RootRef::Node(id),
        };
        TreeView {
            pages,
            arena,
            nodes: &self.nodes,
            root,
        }
    }

    /// The entry holding exactly `key`.
    pub fn get<'a>(
        &'a self,
        pages: Pages<'a>,
        arena: &'a Arena,
        key: &[u8],
    ) -> Result<Option<Entry<'a>>> {
        self.view(pages, arena).get(key)
    }

    /// Where the value of `key` is, for [`Tree::from_bucket_value`].
    pub fn get_ref(&self, pages: Pages<'_>, arena: &Arena, key: &[u8]) -> Result<Option<ValueRef>> {
        let Some(entry) = self.get(pages, arena, key)? else {
            return Ok(None);
        };
        let pos = match pages.position_of(entry.value) {
            Some(offset) => offset,
            None => arena.position_of(entry.value).ok_or_else(|| {
                Corruption::new(Pgid(0), Reason::Other("value lies outside pages and arena"))
            })?,
        };
        Ok(Some(ValueRef {
            pos,
            len: entry.value.len() as u32,
            flags: entry.flags,
        }))
    }

    /// Makes the root a node (so the tree is written at commit even if nothing else changes).
    pub fn touch(&mut self, pages: Pages<'_>, arena: &Arena) -> Result<()> {
        self.materialize_root(pages, arena).map(|_| ())
    }

    fn materialize_root(&mut self, pages: Pages<'_>, arena: &Arena) -> Result<NodeId> {
        match self.root {
            Root::Node(id) => Ok(id),
            Root::Page(pgid) => {
                let id = self.materialize_page(pages, Pgid(0), pgid)?;
                self.root = Root::Node(id);
                Ok(id)
            }
            Root::Inline { pos, len } => {
                let bytes = resolve(pos, len as usize, pages.data(), arena);
                let page = LeafPage::inline(bytes, Pgid(0))?;
                let node = Node::from_leaf(&page, pos, Pgid(0), 0)?;
                self.stats.node_count += 1;
                let id = self.push_node(node);
                self.root = Root::Node(id);
                Ok(id)
            }
        }
    }

    fn push_node(&mut self, node: Node) -> NodeId {
        self.nodes.push(node);
        (self.nodes.len() - 1) as NodeId
    }

    fn materialize_page(&mut self, pages: Pages<'_>, owner: Pgid, pgid: Pgid) -> Result<NodeId> {
        self.stats.node_count += 1;
        let bytes = pages.page(owner, pgid)?;
        let page = PageRef::new(bytes, pgid)?;
        let base = pgid.0 * pages.page_size() as u64;
        let overflow = page.header().overflow;
        let node = match page.header().kind() {
            Some(PageKind::Leaf) => Node::from_leaf(&page.leaf()?, base, pgid, overflow)?,
            Some(PageKind::Branch) => {
                let branch = page.branch()?;
                if branch.is_empty() {
                    return Err(Corruption::new(
                        pgid,
                        Reason::Other("branch page has no children"),
                    ));
                }
                Node::from_branch(&branch, base, overflow)?
            }
            _ => {
                return Err(Corruption::new(
                    pgid,
                    Reason::Other("a tree points at a page that is neither a branch nor a leaf"),
                ));
            }
        };
        Ok(self.push_node(node))
    }

    /// The node of child `index` of branch node `parent`, made from its page if need be.
    fn child_node(&mut self, pages: Pages<'_>, parent: NodeId, index: usize) -> Result<NodeId> {
        let owner = self.nodes[parent as usize].pgid;
        let Inodes::Branch(inodes) = &self.nodes[parent as usize].inodes else {
            unreachable!("child of a leaf node");
        };
        match inodes[index].child {
            Child::Node(id) => Ok(id),
            Child::Page(pgid) => {
                let id = self.materialize_page(pages, owner, pgid)?;
                let Inodes::Branch(inodes) = &mut self.nodes[parent as usize].inodes else {
                    unreachable!();
                };
                inodes[index].child = Child::Node(id);
                Ok(id)
            }
        }
    }

    /// Descends to the leaf where `key` belongs, making nodes of the path; returns the path of
    /// (branch node, child index) pairs and the leaf node.
    fn descend_mut(
        &mut self,
        pages: Pages<'_>,
        arena: &Arena,
        key: &[u8],
    ) -> Result<(Path, NodeId)> {
        let mut path = Path::new();
        let mut id = self.materialize_root(pages, arena)?;
        loop {
            let node = &self.nodes[id as usize];
            if node.is_leaf() {
                return Ok((path, id));
            }
            if node.len() == 0 {
                // Only a corrupt file or a bug leaves an empty branch on a path: make it a leaf.
                let node = &mut self.nodes[id as usize];
                node.inodes = Inodes::Leaf(Vec::new());
                node.size = PAGE_HEADER_SIZE;
                return Ok((path, id));
            }
            if path.len() + 1 >= DEPTH_MAX {
                return Err(too_deep());
            }
            let index = node.child_index(key, pages.data(), arena);
            let child = self.child_node(pages, id, index)?;
            path.push((id, index));
            id = child;
        }
    }

    /// Inserts `key` with `value` (`flags`: 0, or `LEAF_FLAG_BUCKET`), or replaces the entry
    /// holding `key` if it is of the same kind (value or bucket). An entry of the other kind is
    /// left alone and reported as [`Put::KindConflict`].
    pub fn put(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        key: &[u8],
        value: &[u8],
        flags: u32,
    ) -> Result<Put> {
        debug_assert!(!key.is_empty(), "empty key");
        let hint = self.append_hint.take();
        let (path, leaf, index) = match hint {
            Some((path, leaf))
                if self.nodes[leaf as usize].is_after_last(key, pages.data(), arena) =>
            {
                let len = self.nodes[leaf as usize].len();
                (path, leaf, Err(len))
            }
            _ => {
                let (path, leaf) = self.descend_mut(pages, arena, key)?;
                let index = self.nodes[leaf as usize].search(key, pages.data(), arena);
                (path, leaf, index)
            }
        };
        if let Ok(index) = index {
            let Inodes::Leaf(inodes) = &self.nodes[leaf as usize].inodes else {
                unreachable!("descend_mut ends at a leaf");
            };
            let old_flags = inodes[index].flags;
            if (old_flags ^ flags) & LEAF_FLAG_BUCKET != 0 {
                return Ok(Put::KindConflict { flags: old_flags });
            }
        }
        let pos = arena.push(&[key, value]);
        let inode = LeafInode {
            pos,
            prefix: rbolt_page::key_prefix(key),
            ksize: key.len() as u32,
            vsize: value.len() as u32,
            flags,
        };
        let node = &mut self.nodes[leaf as usize];
        let Inodes::Leaf(inodes) = &mut node.inodes else {
            unreachable!("descend_mut ends at a leaf");
        };
        let outcome = match index {
            Ok(index) => {
                let old = std::mem::replace(&mut inodes[index], inode);
                node.size = node.size - old.page_len() + inode.page_len();
                Put::Replaced { flags: old.flags }
            }
            Err(index) => {
                inodes.insert(index, inode);
                node.size += inode.page_len();
                Put::Inserted
            }
        };
        if node.size > SPLIT_IN_TX_PAGES * pages.page_size() && node.len() > MIN_KEYS_PER_PAGE * 2 {
            self.split_up(pages.page_size(), &path, leaf);
        } else if index == Err(node.len() - 1) && self.is_rightmost(&path) {
            self.append_hint = Some((path, leaf));
        }
        Ok(outcome)
    }

    /// Whether every step of `path` takes its branch's last child.
    fn is_rightmost(&self, path: &Path) -> bool {
        path.iter()
            .all(|&(id, index)| index + 1 == self.nodes[id as usize].len())
    }

    /// Deletes the entry holding `key` if it is of the kind `flags` says (value or bucket).
    pub fn delete(
        &mut self,
        pages: Pages<'_>,
        arena: &Arena,
        key: &[u8],
        flags: u32,
    ) -> Result<Delete> {
        self.append_hint = None;
        match self.get(pages, arena, key)? {
            None => return Ok(Delete::NotFound),
            Some(entry) if (entry.flags ^ flags) & LEAF_FLAG_BUCKET != 0 => {
                return Ok(Delete::KindConflict { flags: entry.flags });
            }
            Some(_) => {}
        }
        let (_, leaf) = self.descend_mut(pages, arena, key)?;
        let index = self.nodes[leaf as usize].search(key, pages.data(), arena);
        let Ok(index) = index else {
            return Ok(Delete::NotFound);
        };
        let node = &mut self.nodes[leaf as usize];
        let Inodes::Leaf(inodes) = &mut node.inodes else {
            unreachable!("descend_mut ends at a leaf");
        };
        let old = inodes.remove(index);
        node.size -= old.page_len();
        node.unbalanced = true;
        Ok(Delete::Deleted { flags: old.flags })
    }

    /// Splits an oversized node in two, and its parents as they overflow in turn.
    fn split_up(&mut self, page_size: usize, path: &[(NodeId, usize)], mut id: NodeId) {
        let limit = SPLIT_IN_TX_PAGES * page_size;
        let mut level = path.len();
        loop {
            let node = &mut self.nodes[id as usize];
            if node.size <= limit || node.len() <= MIN_KEYS_PER_PAGE * 2 {
                return;
            }
            let mid = in_tx_split_index(node, page_size, self.fill_percent);
            let (right, right_key) = match &mut node.inodes {
                Inodes::Leaf(inodes) => {
                    let right: Vec<LeafInode> = inodes.split_off(mid);
                    let key = (right[0].pos, right[0].ksize, right[0].prefix);
                    let size =
                        PAGE_HEADER_SIZE + right.iter().map(LeafInode::page_len).sum::<usize>();
                    node.size -= size - PAGE_HEADER_SIZE;
                    (
                        Node {
                            inodes: Inodes::Leaf(right),
                            pgid: Pgid(0),
                            overflow: 0,
                            size,
                            unbalanced: false,
                        },
                        key,
                    )
                }
                Inodes::Branch(inodes) => {
                    let right: Vec<BranchInode> = inodes.split_off(mid);
                    let key = (right[0].pos, right[0].ksize, right[0].prefix);
                    let right = Node::new_branch(right);
                    node.size -= right.size - PAGE_HEADER_SIZE;
                    (right, key)
                }
            };
            let left_key = {
                let node = &self.nodes[id as usize];
                match &node.inodes {
                    Inodes::Leaf(inodes) => (inodes[0].pos, inodes[0].ksize, inodes[0].prefix),
                    Inodes::Branch(inodes) => (inodes[0].pos, inodes[0].ksize, inodes[0].prefix),
                }
            };
            self.stats.split += 1;
            let right_id = self.push_node(right);
            let right_inode = BranchInode {
                pos: right_key.0,
                prefix: right_key.2,
                ksize: right_key.1,
                child: Child::Node(right_id),
            };
            if level == 0 {
                let left_inode = BranchInode {
                    pos: left_key.0,
                    prefix: left_key.2,
                    ksize: left_key.1,
                    child: Child::Node(id),
                };
                let root = self.push_node(Node::new_branch(vec![left_inode, right_inode]));
                self.root = Root::Node(root);
                return;
            }
            level -= 1;
            let (parent, index) = path[level];
            let parent_node = &mut self.nodes[parent as usize];
            let Inodes::Branch(inodes) = &mut parent_node.inodes else {
                unreachable!("a path holds branches");
            };
            inodes.insert(index + 1, right_inode);
            parent_node.size += right_inode.page_len();
            id = parent;
        }
    }

    /// Merges nodes left too small by deletes with a sibling, removes empty ones, and collapses
    /// a root with a single child. Pages of removed nodes are freed.
    pub fn rebalance<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        alloc: &mut A,
    ) -> Result<(), A::Error> {
        self.append_hint = None;
        let Root::Node(root) = self.root else {
            return Ok(());
        };
        let fill = self.fill_percent.clamp(FILL_PERCENT_MIN, FILL_PERCENT_MAX);
        let threshold = (pages.page_size() as f64 * fill) as usize / 2;
        self.rebalance_below(pages, alloc, root, threshold, 0)?;
        // Collapsing a one-child root repeatedly: at most once per level of a valid tree.
        for _ in 0..=DEPTH_MAX {
            let node = &self.nodes[root as usize];
            match &node.inodes {
                Inodes::Branch(inodes) if inodes.len() == 1 => {
                    let child = self.child_node(pages, root, 0)?;
                    let child_node =
                        std::mem::replace(&mut self.nodes[child as usize], Node::new_leaf());
                    let root_node = &mut self.nodes[root as usize];
                    root_node.inodes = child_node.inodes;
                    root_node.size = child_node.size;
                    if child_node.pgid.0 != 0 {
                        alloc.free(child_node.pgid, child_node.overflow)?;
                    }
                }
                Inodes::Branch(inodes) if inodes.is_empty() => {
                    let root_node = &mut self.nodes[root as usize];
                    root_node.inodes = Inodes::Leaf(Vec::new());
                    root_node.size = PAGE_HEADER_SIZE;
                }
                _ => return Ok(()),
            }
        }
        Err(too_deep().into())
    }

    fn rebalance_below<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        alloc: &mut A,
        id: NodeId,
        threshold: usize,
        depth: usize,
    ) -> Result<(), A::Error> {
        if depth >= DEPTH_MAX {
            return Err(too_deep().into());
        }
        let children: SmallVec<[NodeId; 16]> = match &self.nodes[id as usize].inodes {
            Inodes::Leaf(_) => return Ok(()),
            Inodes::Branch(inodes) => inodes
                .iter()
                .filter_map(|inode| match inode.child {
                    Child::Node(child) => Some(child),
                    Child::Page(_) => None,
                })
                .collect(),
        };
        for child in children {
            self.rebalance_below(pages, alloc, child, threshold, depth + 1)?;
        }
        let mut index = 0;
        loop {
            let Inodes::Branch(inodes) = &self.nodes[id as usize].inodes else {
                unreachable!();
            };
            if index >= inodes.len() {
                return Ok(());
            }
            let n_children = inodes.len();
            let Child::Node(child) = inodes[index].child else {
                index += 1;
                continue;
            };
            let child_node = &mut self.nodes[child as usize];
            if !child_node.unbalanced {
                index += 1;
                continue;
            }
            child_node.unbalanced = false;
            if child_node.size > threshold && child_node.len() > child_node.min_keys() {
                index += 1;
                continue;
            }
            if child_node.len() == 0 {
                let (pgid, overflow) = (child_node.pgid, child_node.overflow);
                child_node.pgid = Pgid(0);
                self.remove_child(id, index);
                self.stats.rebalance += 1;
                if pgid.0 != 0 {
                    alloc.free(pgid, overflow)?;
                }
                continue;
            }
            if n_children < 2 {
                index += 1;
                continue;
            }
            let (left_index, right_index) = if index == 0 {
                (0, 1)
            } else {
                (index - 1, index)
            };
            let left = self.child_node(pages, id, left_index)?;
            let right = self.child_node(pages, id, right_index)?;
            if self.nodes[left as usize].is_leaf() != self.nodes[right as usize].is_leaf() {
                return Err(Corruption::new(
                    self.nodes[id as usize].pgid,
                    Reason::Other("sibling pages are of different kinds"),
                )
                .into());
            }
            let right_node = std::mem::replace(&mut self.nodes[right as usize], Node::new_leaf());
            let left_node = &mut self.nodes[left as usize];
            left_node.size += right_node.size - PAGE_HEADER_SIZE;
            match (&mut left_node.inodes, right_node.inodes) {
                (Inodes::Leaf(into), Inodes::Leaf(from)) => into.extend(from),
                (Inodes::Branch(into), Inodes::Branch(from)) => into.extend(from),
                _ => unreachable!("kinds checked above"),
            }
            self.remove_child(id, right_index);
            self.stats.rebalance += 1;
            if right_node.pgid.0 != 0 {
                alloc.free(right_node.pgid, right_node.overflow)?;
            }
            index = left_index + 1;
        }
    }

    /// Removes child `index` of branch node `parent`, marking the parent for rebalancing.
    fn remove_child(&mut self, parent: NodeId, index: usize) {
        let node = &mut self.nodes[parent as usize];
        let Inodes::Branch(inodes) = &mut node.inodes else {
            unreachable!();
        };
        let removed = inodes.remove(index);
        node.size -= removed.page_len();
        node.unbalanced = true;
    }

    /// Writes every node to new pages (children before parents), freeing the pages they were
    /// read from, and returns the new root page. Call [`Tree::rebalance`] first.
    pub fn spill<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        arena: &Arena,
        alloc: &mut A,
    ) -> Result<Pgid, A::Error> {
        self.append_hint = None;
        let root = match self.root {
            Root::Node(id) => id,
            Root::Page(pgid) => return Ok(pgid),
            Root::Inline { .. } => {
                // An unedited inline tree has no pages: materialise and write it as a page.
                self.materialize_root(pages, arena)?
            }
        };
        let mut pieces = self.spill_node(pages, arena, alloc, root, true, 0)?;
        while pieces.len() > 1 {
            let inodes = pieces
                .iter()
                .map(|piece| BranchInode {
                    pos: piece.key_pos,
                    prefix: piece.key_prefix,
                    ksize: piece.key_len,
                    child: Child::Page(piece.pgid),
                })
                .collect();
            let new_root = self.push_node(Node::new_branch(inodes));
            pieces = self.spill_node(pages, arena, alloc, new_root, true, 0)?;
        }
        let pgid = pieces[0].pgid;
        self.root = Root::Page(pgid);
        self.nodes.clear();
        Ok(pgid)
    }

    fn spill_node<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        arena: &Arena,
        alloc: &mut A,
        id: NodeId,
        is_root: bool,
        depth: usize,
    ) -> Result<SmallVec<[Piece; 4]>, A::Error> {
        if depth >= DEPTH_MAX {
            return Err(too_deep().into());
        }
        if let Inodes::Branch(inodes) = &mut self.nodes[id as usize].inodes
            && inodes
                .iter()
                .any(|inode| matches!(inode.child, Child::Node(_)))
        {
            let old = std::mem::take(inodes);
            let mut new = Vec::with_capacity(old.len() + 4);
            for inode in old {
                match inode.child {
                    Child::Page(_) => new.push(inode),
                    Child::Node(child) => {
                        let pieces =
                            self.spill_node(pages, arena, alloc, child, false, depth + 1)?;
                        new.extend(pieces.iter().map(|piece| BranchInode {
                            pos: piece.key_pos,
                            prefix: piece.key_prefix,
                            ksize: piece.key_len,
                            child: Child::Page(piece.pgid),
                        }));
                    }
                }
            }
            let node = &mut self.nodes[id as usize];
            node.size = PAGE_HEADER_SIZE + new.iter().map(BranchInode::page_len).sum::<usize>();
            node.inodes = Inodes::Branch(new);
        }
        let node = &mut self.nodes[id as usize];
        let source = node.pgid;
        if node.pgid.0 != 0 {
            let (pgid, overflow) = (node.pgid, node.overflow);
            node.pgid = Pgid(0);
            alloc.free(pgid, overflow)?;
        }
        let node = &mut self.nodes[id as usize];
        if node.len() == 0 {
            if !is_root {
                return Ok(SmallVec::new());
            }
            // An empty tree is an empty leaf page.
            node.inodes = Inodes::Leaf(Vec::new());
            node.size = PAGE_HEADER_SIZE;
        }
        let node = &self.nodes[id as usize];
        let page_size = pages.page_size();
        let ranges = piece_ranges(node, page_size, self.fill_percent);
        let mut pieces = SmallVec::new();
        let data = pages.data();
        for (start, end) in ranges {
            let (pgid, key_pos, key_len, key_prefix) = match &node.inodes {
                Inodes::Leaf(inodes) => {
                    let slice = &inodes[start..end];
                    let size =
                        PAGE_HEADER_SIZE + slice.iter().map(LeafInode::page_len).sum::<usize>();
                    let n_pages = pages_for(size, page_size);
                    let (pgid, buf) = alloc.allocate(n_pages)?;
                    let mut builder =
                        LeafBuilder::new(buf, pgid, slice.len(), (n_pages - 1) as u32);
                    for inode in slice {
                        builder.push(
                            inode.flags,
                            inode.key(data, arena),
                            inode.value(data, arena),
                        );
                    }
                    let used = builder.finish();
                    buf[used..].fill(0);
                    // Entries read from a corrupt page (unknown flags, keys out of order, a bad
                    // bucket value) must not be written back as if they were sound.
                    if let Err(error) = LeafPage::new(buf, pgid).and_then(|p| p.validate()) {
                        return Err(Corruption::new(source, error.reason).into());
                    }
                    let (key_pos, key_len, key_prefix) = slice
                        .first()
                        .map_or((0, 0, 0), |i| (i.pos, i.ksize, i.prefix));
                    (pgid, key_pos, key_len, key_prefix)
                }
                Inodes::Branch(inodes) => {
                    let slice = &inodes[start..end];
                    let size =
                        PAGE_HEADER_SIZE + slice.iter().map(BranchInode::page_len).sum::<usize>();
                    let n_pages = pages_for(size, page_size);
                    let (pgid, buf) = alloc.allocate(n_pages)?;
                    let mut builder =
                        BranchBuilder::new(buf, pgid, slice.len(), (n_pages - 1) as u32);
                    for inode in slice {
                        let Child::Page(child) = inode.child else {
                            unreachable!("children are spilled first");
                        };
                        builder.push(inode.key(data, arena), child);
                    }
                    let used = builder.finish();
                    buf[used..].fill(0);
                    (pgid, slice[0].pos, slice[0].ksize, slice[0].prefix)
                }
            };
            self.stats.spill += 1;
            pieces.push(Piece {
                key_pos,
                key_prefix,
                key_len,
                pgid,
            });
        }
        self.stats.split += (pieces.len() as u64).saturating_sub(1);
        Ok(pieces)
    }

    /// The bytes the tree would take stored inline in its bucket value, if it may be: its
    /// root is an edited leaf, holds no buckets, and takes at most `size_max` bytes.
    pub fn inline_size(&self, size_max: usize) -> Option<usize> {
        let Root::Node(id) = self.root else {
            return None;
        };
        let node = &self.nodes[id as usize];
        (node.is_leaf() && !node.has_buckets() && node.size <= size_max).then_some(node.size)
    }

    /// Writes the root leaf as an inline page (id 0) into `buf`, exactly `inline_size` bytes.
    pub fn write_inline(&self, pages: Pages<'_>, arena: &Arena, buf: &mut [u8]) {
        let Root::Node(id) = self.root else {
            panic!("write_inline on a tree that is not edited");
        };
        let node = &self.nodes[id as usize];
        let Inodes::Leaf(inodes) = &node.inodes else {
            panic!("write_inline on a branch");
        };
        let data = pages.data();
        let mut builder = LeafBuilder::new(buf, Pgid(0), inodes.len(), 0);
        for inode in inodes {
            builder.push(
                inode.flags,
                inode.key(data, arena),
                inode.value(data, arena),
            );
        }
        let used = builder.finish();
        debug_assert_eq!(used, buf.len(), "inline buffer of the wrong size");
    }

    /// Frees every page of the tree: committed subtrees and the pages edited nodes came from.
    /// Nested buckets' trees are not this tree's: the caller frees them.
    pub fn free_all<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        alloc: &mut A,
    ) -> Result<(), A::Error> {
        self.append_hint = None;
        // A sound tree has fewer pages than the high-water mark; more means pages reached
        // along several paths, which would otherwise make this exponential.
        let mut budget = pages.high_water().0;
        match self.root {
            Root::Page(pgid) => free_page_tree(pages, alloc, Pgid(0), pgid, 0, &mut budget),
            Root::Inline { .. } => Ok(()),
            Root::Node(id) => self.free_node_tree(pages, alloc, id, 0, &mut budget),
        }
    }

    /// Calls `f` with every page [`Tree::free_all`] would free (each id with its overflow),
    /// changing nothing: so a caller can check a whole deletion before it frees anything. A
    /// corrupt page met on the way is an error, and `f` may have been called for some pages.
    pub fn for_each_page(&self, pages: Pages<'_>, mut f: impl FnMut(Pgid, u32)) -> Result<()> {
        let mut budget = pages.high_water().0;
        // Edited nodes and committed pages still to visit, with their owner and depth.
        enum Visit {
            Node(NodeId, usize),
            Page(Pgid, Pgid, usize),
        }
        let mut stack = match self.root {
            Root::Page(pgid) => vec![Visit::Page(Pgid(0), pgid, 0)],
            Root::Inline { .. } => return Ok(()),
            Root::Node(id) => vec![Visit::Node(id, 0)],
        };
        while let Some(visit) = stack.pop() {
            match visit {
                Visit::Node(id, depth) => {
                    if depth >= DEPTH_MAX {
                        return Err(too_deep());
                    }
                    let node = &self.nodes[id as usize];
                    if node.pgid.0 != 0 {
                        f(node.pgid, node.overflow);
                    }
                    if let Inodes::Branch(inodes) = &node.inodes {
                        for inode in inodes {
                            stack.push(match inode.child {
                                Child::Page(pgid) => Visit::Page(node.pgid, pgid, depth + 1),
                                Child::Node(child) => Visit::Node(child, depth + 1),
                            });
                        }
                    }
                }
                Visit::Page(owner, pgid, depth) => {
                    if depth >= DEPTH_MAX {
                        return Err(too_deep());
                    }
                    let page = PageRef::new(pages.page(owner, pgid)?, pgid)?;
                    let overflow = page.header().overflow;
                    let span = u64::from(overflow) + 1;
                    if budget < span {
                        return Err(Corruption::new(
                            pgid,
                            Reason::Other("a tree reaches pages twice"),
                        ));
                    }
                    budget -= span;
                    f(pgid, overflow);
                    match page.header().kind() {
                        Some(PageKind::Leaf) => {}
                        Some(PageKind::Branch) => {
                            let branch = page.branch()?;
                            for index in 0..branch.len() {
                                stack.push(Visit::Page(pgid, branch.child(index)?, depth + 1));
                            }
                        }
                        _ => {
                            return Err(Corruption::new(
                                pgid,
                                Reason::Other(
                                    "a tree points at a page that is neither a branch nor a leaf",
                                ),
                            ));
                        }
                    }
                }
            }
        }
        Ok(())
    }

    fn free_node_tree<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        alloc: &mut A,
        id: NodeId,
        depth: usize,
        budget: &mut u64,
    ) -> Result<(), A::Error> {
        if depth >= DEPTH_MAX {
            return Err(too_deep().into());
        }
        let node = &mut self.nodes[id as usize];
        let owner = node.pgid;
        if node.pgid.0 != 0 {
            let (pgid, overflow) = (node.pgid, node.overflow);
            node.pgid = Pgid(0);
            alloc.free(pgid, overflow)?;
        }
        let children: Vec<Child> = match &self.nodes[id as usize].inodes {
            Inodes::Leaf(_) => return Ok(()),
            Inodes::Branch(inodes) => inodes.iter().map(|inode| inode.child).collect(),
        };
        for child in children {
            match child {
                Child::Page(pgid) => {
                    free_page_tree(pages, alloc, owner, pgid, depth + 1, budget)?;
                }
                Child::Node(child) => {
                    self.free_node_tree(pages, alloc, child, depth + 1, budget)?
                }
            }
        }
        Ok(())
    }
}

impl Default for Tree {
    fn default() -> Tree {
        Tree::new()
    }
}

fn free_page_tree<A: PageAlloc>(
    pages: Pages<'_>,
    alloc: &mut A,
    owner: Pgid,
    pgid: Pgid,
    depth: usize,
    budget: &mut u64,
) -> Result<(), A::Error> {
    if depth >= DEPTH_MAX {
        return Err(too_deep().into());
    }
    let bytes = pages.page(owner, pgid)?;
    let page = PageRef::new(bytes, pgid)?;
    let overflow = page.header().overflow;
    let span = u64::from(overflow) + 1;
    if *budget < span {
        return Err(Corruption::new(pgid, Reason::Other("a tree reaches pages twice")).into());
    }
    *budget -= span;
    match page.header().kind() {
        Some(PageKind::Leaf) => alloc.free(pgid, overflow)?,
        Some(PageKind::Branch) => {
            let branch = page.branch()?;
            alloc.free(pgid, overflow)?;
            for index in 0..branch.len() {
                free_page_tree(pages, alloc, pgid, branch.child(index)?, depth + 1, budget)?;
            }
        }
        _ => {
            return Err(Corruption::new(
                pgid,
                Reason::Other("a tree points at a page that is neither a branch nor a leaf"),
            )
            .into());
        }
    }
    Ok(())
}

/// Bytes entry `index` of `node` takes in a page.
#[inline]
fn elem_len(node: &Node, index: usize) -> usize {
    match &node.inodes {
        Inodes::Leaf(inodes) => inodes[index].page_len(),
        Inodes::Branch(inodes) => inodes[index].page_len(),
    }
}

/// Where a node that outgrew `SPLIT_IN_TX_PAGES` is cut in two inside a transaction: at the
/// boundary between two of the pages spill would write it as, the one nearest its middle. The
/// left node then spills into exactly those pages; a cut anywhere else leaves a part-filled
/// page behind at every split (an append-only load at fill percent 1.0 wrote half again as
/// many pages as it needed when nodes were cut at their byte middle). Falls back to the middle
/// when spill would write the node as one piece (a few entries with large values).
fn in_tx_split_index(node: &Node, page_size: usize, fill_percent: f64) -> usize {
    let count = node.len();
    let half = (node.size - PAGE_HEADER_SIZE) / 2;
    let ranges = piece_ranges(node, page_size, fill_percent);
    let mut best: Option<(usize, usize)> = None;
    let mut before = 0;
    for &(start, end) in &ranges[..ranges.len() - 1] {
        before += (start..end)
            .map(|index| elem_len(node, index))
            .sum::<usize>();
        let distance = before.abs_diff(half);
        if best.is_none_or(|(_, nearest)| distance < nearest) {
            best = Some((end, distance));
        }
    }
    if let Some((cut, _)) = best {
        return cut;
    }
    let mut total = 0;
    let mut mid = count / 2;
    for index in 0..count {
        let len = elem_len(node, index);
        if total + len > half && index >= MIN_KEYS_PER_PAGE {
            mid = index;
            break;
        }
        total += len;
    }
    mid.clamp(MIN_KEYS_PER_PAGE, count - MIN_KEYS_PER_PAGE)
}

/// How spill cuts a node into pages, by bbolt's rules: a node that fits in a page or has at
/// most four entries stays whole; otherwise pieces are filled up to `fill_percent` of a page,
/// each with at least two entries and at most `PAGE_COUNT_MAX`.
fn piece_ranges(node: &Node, page_size: usize, fill_percent: f64) -> SmallVec<[(usize, usize); 4]> {
    let threshold =
        (page_size as f64 * fill_percent.clamp(FILL_PERCENT_MIN, FILL_PERCENT_MAX)) as usize;
    let count = node.len();
    let elem_len = |index: usize| elem_len(node, index);
    let mut ranges = SmallVec::new();
    let mut start = 0;
    let mut remaining_size = node.size;
    loop {
        let remaining = count - start;
        if remaining <= MIN_KEYS_PER_PAGE * 2
            || (remaining_size < page_size && remaining <= PAGE_COUNT_MAX)
        {
            ranges.push((start, count));
            return ranges;
        }
        let mut size = PAGE_HEADER_SIZE;
        let mut split = 0;
        for offset in 0..remaining - MIN_KEYS_PER_PAGE {
            split = offset;
            let len = elem_len(start + offset);
            if offset >= MIN_KEYS_PER_PAGE && (size + len > threshold || offset >= PAGE_COUNT_MAX) {
                break;
            }
            size += len;
        }
        let moved: usize = (start..start + split).map(elem_len).sum();
        ranges.push((start, start + split));
        remaining_size -= moved;
        start += split;
    }
}
