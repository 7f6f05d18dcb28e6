//! The editable, in-memory form of a branch or leaf page.
//!
//! A node made from a page keeps pointing at the page's bytes (positions into the committed
//! pages); only what the transaction writes is copied into the arena.

use crate::arena::{Arena, resolve};
use rbolt_page::{
    BRANCH_ELEMENT_SIZE, BranchPage, LEAF_ELEMENT_SIZE, LEAF_FLAG_BUCKET, LeafPage,
    PAGE_HEADER_SIZE, Pgid, Result, compare_keys, key_prefix,
};
use std::cmp::Ordering;

/// Index of a node in its tree.
pub(crate) type NodeId = u32;

/// A leaf entry: the key at `pos`, the value right after it. `prefix` holds the key's first
/// eight bytes so that most comparisons never touch the key's bytes (a cache miss each).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LeafInode {
    pub pos: u64,
    pub prefix: u64,
    pub ksize: u32,
    pub vsize: u32,
    pub flags: u32,
}

impl LeafInode {
    #[inline]
    pub fn key<'a>(&self, data: &'a [u8], arena: &'a Arena) -> &'a [u8] {
        resolve(self.pos, self.ksize as usize, data, arena)
    }

    #[inline]
    pub fn value<'a>(&self, data: &'a [u8], arena: &'a Arena) -> &'a [u8] {
        resolve(
            self.pos + u64::from(self.ksize),
            self.vsize as usize,
            data,
            arena,
        )
    }

    /// Bytes this entry takes in a page.
    #[inline]
    pub fn page_len(&self) -> usize {
        LEAF_ELEMENT_SIZE + self.ksize as usize + self.vsize as usize
    }
}

/// Where a branch entry's child is: still a committed page, or a node of this tree.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Child {
    Page(Pgid),
    Node(NodeId),
}

/// A branch entry: the separator key at `pos` (first eight bytes in `prefix`) and the child.
#[derive(Clone, Copy, Debug)]
pub(crate) struct BranchInode {
    pub pos: u64,
    pub prefix: u64,
    pub ksize: u32,
    pub child: Child,
}

impl BranchInode {
    #[inline]
    pub fn key<'a>(&self, data: &'a [u8], arena: &'a Arena) -> &'a [u8] {
        resolve(self.pos, self.ksize as usize, data, arena)
    }

    /// Bytes this entry takes in a page.
    #[inline]
    pub fn page_len(&self) -> usize {
        BRANCH_ELEMENT_SIZE + self.ksize as usize
    }
}

/// The entries of a node.
#[derive(Debug)]
pub(crate) enum Inodes {
    Leaf(Vec<LeafInode>),
    Branch(Vec<BranchInode>),
}

/// An editable node.
#[derive(Debug)]
pub(crate) struct Node {
    pub inodes: Inodes,
    /// The committed page this node was read from (0 for a new node); freed when the node is
    /// written elsewhere or removed.
    pub pgid: Pgid,
    /// The overflow count of that page.
    pub overflow: u32,
    /// Bytes the node takes as a page: header, elements, keys (and values).
    pub size: usize,
    /// Entries were deleted: check at commit whether to merge with a sibling.
    pub unbalanced: bool,
}

impl Node {
    pub fn new_leaf() -> Node {
        Node {
            inodes: Inodes::Leaf(Vec::new()),
            pgid: Pgid(0),
            overflow: 0,
            size: PAGE_HEADER_SIZE,
            unbalanced: false,
        }
    }

    pub fn new_branch(inodes: Vec<BranchInode>) -> Node {
        let size = PAGE_HEADER_SIZE + inodes.iter().map(BranchInode::page_len).sum::<usize>();
        Node {
            inodes: Inodes::Branch(inodes),
            pgid: Pgid(0),
            overflow: 0,
            size,
            unbalanced: false,
        }
    }

    /// A node reading a leaf page whose first byte sits at tagged position `base`.
    pub fn from_leaf(page: &LeafPage<'_>, base: u64, pgid: Pgid, overflow: u32) -> Result<Node> {
        let bytes_start = page.bytes().as_ptr() as usize;
        // One spare slot: a node is made from a page to be edited, usually by an insert.
        let mut inodes = Vec::with_capacity(page.len() + 1);
        let mut size = PAGE_HEADER_SIZE;
        for index in 0..page.len() {
            let entry = page.entry(index)?;
            let offset = entry.key.as_ptr() as usize - bytes_start;
            let inode = LeafInode {
                pos: base + offset as u64,
                prefix: key_prefix(entry.key),
                ksize: entry.key.len() as u32,
                vsize: entry.value.len() as u32,
                flags: entry.flags,
            };
            size += inode.page_len();
            inodes.push(inode);
        }
        Ok(Node {
            inodes: Inodes::Leaf(inodes),
            pgid,
            overflow,
            size,
            unbalanced: false,
        })
    }

    /// A node reading a branch page whose first byte sits at position `base`.
    pub fn from_branch(page: &BranchPage<'_>, base: u64, overflow: u32) -> Result<Node> {
        let bytes_start = page.bytes().as_ptr() as usize;
        let mut inodes = Vec::with_capacity(page.len());
        let mut size = PAGE_HEADER_SIZE;
        for index in 0..page.len() {
            let key = page.key(index)?;
            let offset = key.as_ptr() as usize - bytes_start;
            let inode = BranchInode {
                pos: base + offset as u64,
                prefix: key_prefix(key),
                ksize: key.len() as u32,
                child: Child::Page(page.child(index)?),
            };
            size += inode.page_len();
            inodes.push(inode);
        }
        Ok(Node {
            inodes: Inodes::Branch(inodes),
            pgid: page.pgid(),
            overflow,
            size,
            unbalanced: false,
        })
    }

    #[inline]
    pub fn is_leaf(&self) -> bool {
        matches!(self.inodes, Inodes::Leaf(_))
    }

    #[inline]
    pub fn len(&self) -> usize {
        match &self.inodes {
            Inodes::Leaf(inodes) => inodes.len(),
            Inodes::Branch(inodes) => inodes.len(),
        }
    }

    /// The fewest entries a node keeps before it is merged.
    #[inline]
    pub fn min_keys(&self) -> usize {
        if self.is_leaf() { 1 } else { 2 }
    }

    /// Whether any entry holds a bucket.
    pub fn has_buckets(&self) -> bool {
        match &self.inodes {
            Inodes::Leaf(inodes) => inodes.iter().any(|i| i.flags & LEAF_FLAG_BUCKET != 0),
            Inodes::Branch(_) => false,
        }
    }
}

/// Binary search over `count` entries by `order(index)` (the entry's order relative to the
/// key sought), stopping at the first equal entry.
#[inline]
fn search_by(
    count: usize,
    mut order: impl FnMut(usize) -> Ordering,
) -> core::result::Result<usize, usize> {
    let (mut low, mut high) = (0, count);
    while low < high {
        let mid = low + (high - low) / 2;
        match order(mid) {
            Ordering::Less => low = mid + 1,
            Ordering::Greater => high = mid,
            Ordering::Equal => return Ok(mid),
        }
    }
    Err(low)
}

impl Node {
    /// Exact-match search: `Ok(index)` of `key`, or `Err(index)` where it would go. Compares
    /// prefixes first and reads key bytes only when they tie.
    #[inline]
    pub fn search(
        &self,
        key: &[u8],
        data: &[u8],
        arena: &Arena,
    ) -> core::result::Result<usize, usize> {
        let prefix = key_prefix(key);
        match &self.inodes {
            Inodes::Leaf(inodes) => search_by(inodes.len(), |index| {
                let inode = &inodes[index];
                inode
                    .prefix
                    .cmp(&prefix)
                    .then_with(|| compare_keys(inode.key(data, arena), key))
            }),
            Inodes::Branch(inodes) => search_by(inodes.len(), |index| {
                let inode = &inodes[index];
                inode
                    .prefix
                    .cmp(&prefix)
                    .then_with(|| compare_keys(inode.key(data, arena), key))
            }),
        }
    }

    /// Whether `key` sorts after every key of this leaf node (false for an empty one).
    #[inline]
    pub fn is_after_last(&self, key: &[u8], data: &[u8], arena: &Arena) -> bool {
        let Inodes::Leaf(inodes) = &self.inodes else {
            return false;
        };
        inodes.last().is_some_and(|last| {
            last.prefix
                .cmp(&key_prefix(key))
                .then_with(|| compare_keys(last.key(data, arena), key))
                == Ordering::Less
        })
    }

    /// The index of the first key not less than `key`.
    #[inline]
    pub fn lower_bound(&self, key: &[u8], data: &[u8], arena: &Arena) -> usize {
        match self.search(key, data, arena) {
            Ok(index) | Err(index) => index,
        }
    }

    /// In a branch, the child whose subtree would hold `key`.
    #[inline]
    pub fn child_index(&self, key: &[u8], data: &[u8], arena: &Arena) -> usize {
        match self.search(key, data, arena) {
            Ok(index) => index,
            Err(index) => index.saturating_sub(1),
        }
    }
}
