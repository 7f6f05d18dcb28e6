//! Rebalancing at commit: nodes that deletes left under a quarter of a page (or with too few
//! entries) are merged into a sibling, empty ones removed, and a root with one child replaced
//! by that child, as bbolt does.
//!
//! One pass over the edited nodes in post-order, on an explicit stack bounded by `DEPTH_MAX`
//! (a node's children are settled before the node looks at them), then
//! [`Tree::collapse_root`]. A merge that makes a node larger than a page is cut again at
//! spill, which spreads the entries over two pages.

use crate::DEPTH_MAX;
use crate::node::arena::Arena;
use crate::node::{NODE_TAG, Node, NodeId};
use crate::pages::Pages;
use crate::tree::{Bound, PageAlloc, Root, Tree, min_count, too_deep};
use rbolt_page::{Corruption, NewEntry, Pgid, Reason, compare_keys, element_page_size};
use smallvec::SmallVec;
use std::cmp::Ordering;

/// A node with fewer bytes than a page divided by this is merged with a sibling (bbolt's
/// threshold, a quarter of a page).
pub const REBALANCE_PAGE_DIVISOR: usize = 4;

/// [`Tree::repack_key`] leaves pages at least this full (percent of a page) alone.
pub const REPACK_FULL_PERCENT: usize = 97;

/// A node on the rebalance stack: its id, the next child to look at, its key bounds.
type Frame = (NodeId, usize, (Bound, Bound));

impl Tree {
    /// Merges nodes left too small by deletes with a sibling, removes empty ones, and collapses
    /// a root with a single child. Pages of removed nodes are freed.
    ///
    /// A node whose parent has no other child cannot merge; it stays marked, and once its
    /// parent merged into a sibling of its own, another pass merges it. Each pass merges or
    /// removes a node or ends the loop, so it ends; almost every commit needs one.
    pub fn rebalance<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        alloc: &mut A,
    ) -> Result<(), A::Error> {
        self.append_hint = None;
        let Root::Node(root) = self.root else {
            return Ok(());
        };
        // Only deletes mark nodes: a transaction that only put has nothing to merge.
        while self.nodes.iter().any(|node| node.unbalanced) {
            if self.rebalance_pass(pages, arena, alloc, root)? == 0 {
                break;
            }
        }
        self.collapse_root(pages, arena, alloc, root)
    }

    /// One post-order pass over the edited nodes below `root`: every branch looks at its
    /// marked children once its own subtree is settled. Returns the nodes merged or removed.
    fn rebalance_pass<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        alloc: &mut A,
        root: NodeId,
    ) -> Result<usize, A::Error> {
        let mut changed = 0;
        let mut stack: SmallVec<[Frame; 16]> = SmallVec::new();
        stack.push((root, 0, (None, None)));
        while let Some(&(id, from, bounds)) = stack.last() {
            if let Some((index, child)) = self.next_child_node(id, from) {
                stack.last_mut().expect("not empty").1 = index + 1;
                if !self.nodes[child as usize].is_leaf() {
                    if stack.len() >= DEPTH_MAX {
                        return Err(too_deep().into());
                    }
                    stack.push((child, 0, self.child_bounds(id, index, bounds)));
                }
                continue;
            }
            stack.pop();
            let path: SmallVec<[(NodeId, usize); 16]> =
                stack.iter().map(|&(id, index, _)| (id, index)).collect();
            changed += self.merge_children(pages, arena, alloc, id, bounds, &path)?;
        }
        Ok(changed)
    }

    /// Looks at every child of branch node `id` (bounds `bounds`, ancestors `path`) that
    /// deletes left unbalanced: removes it if empty, else merges it with a sibling if small.
    /// Returns the children merged or removed.
    fn merge_children<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        alloc: &mut A,
        id: NodeId,
        bounds: (Bound, Bound),
        path: &[(NodeId, usize)],
    ) -> Result<usize, A::Error> {
        let page_size = pages.page_size();
        let threshold = page_size / REBALANCE_PAGE_DIVISOR;
        let mut changed = 0;
        let mut index = 0;
        loop {
            let node = &self.nodes[id as usize];
            if node.is_leaf() || index >= node.count() {
                return Ok(changed);
            }
            let n_children = node.count();
            let child = node.child(index);
            if child & NODE_TAG == 0 {
                index += 1;
                continue;
            }
            let child_node = &mut self.nodes[(child & !NODE_TAG) as usize];
            if !child_node.unbalanced {
                index += 1;
                continue;
            }
            if child_node.used() > threshold && child_node.count() > min_count(child_node) {
                child_node.unbalanced = false;
                index += 1;
                continue;
            }
            if child_node.count() == 0 {
                let (pgid, overflow) = (child_node.pgid, child_node.overflow);
                child_node.pgid = Pgid(0);
                child_node.unbalanced = false;
                child_node.recycle(arena);
                self.remove_child(id, index);
                if pgid.0 != 0 {
                    alloc.free(pgid, overflow)?;
                }
                changed += 1;
                continue;
            }
            if n_children < 2 {
                // Stays marked: merged in a later pass, once its parent has siblings' children.
                index += 1;
                continue;
            }
            child_node.unbalanced = false;
            let (left_index, right_index) = if index == 0 {
                (0, 1)
            } else {
                (index - 1, index)
            };
            let bounds_of = |tree: &Tree, i| tree.child_bounds(id, i, bounds);
            let left = self.child_node(
                pages,
                arena,
                id,
                left_index,
                bounds_of(self, left_index),
                path,
                None,
            )?;
            let right = self.child_node(
                pages,
                arena,
                id,
                right_index,
                bounds_of(self, right_index),
                path,
                None,
            )?;
            self.merge(id, left, right, right_index, arena, alloc)?;
            changed += 1;
            // A node merged with an empty sibling can still hold too few entries (a branch
            // one child, which Go's writer cannot rebalance below): it is looked at again,
            // with the parent one child shorter, so this ends.
            let merged = &mut self.nodes[left as usize];
            if merged.count() < min_count(merged) {
                merged.unbalanced = true;
                index = left_index;
            } else {
                index = left_index + 1;
            }
        }
    }

    /// Touches the path to the leaf where `key` belongs (as [`Tree::touch_key`]) and, if that
    /// leaf is less than [`REPACK_FULL_PERCENT`] full, merges into it the siblings that follow
    /// it under the same parent, each also less full than that, while the entries fit in
    /// `bytes_max` bytes. Spill then cuts the merged node into pages (full ones when the
    /// tree's fill percent is 1.0), so a run of sparse leaves becomes fewer, fuller pages: how
    /// a vacuum packs what deletes thinned out. Returns the number of siblings merged; their
    /// pages are freed through `alloc`.
    ///
    /// On an error the tree is valid but may hold some of the merges (each is a complete
    /// edit): the caller rolls the transaction back.
    pub fn repack_key<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        alloc: &mut A,
        key: &[u8],
        bytes_max: usize,
    ) -> Result<usize, A::Error> {
        self.append_hint = None;
        let page_size = pages.page_size();
        let full = page_size * REPACK_FULL_PERCENT / 100;
        let mut undo = self.undo_point();
        let (path, leaf) = match self.descend_mut(pages, arena, key, &mut undo) {
            Ok(found) => found,
            Err(error) => {
                self.undo(undo, arena);
                return Err(error.into());
            }
        };
        let Some((&(parent, index), above)) = path.split_last() else {
            return Ok(0);
        };
        if self.nodes[leaf as usize].used() >= full {
            return Ok(0);
        }
        let mut bounds: (Bound, Bound) = (None, None);
        for &(id, child) in above {
            bounds = self.child_bounds(id, child, bounds);
        }
        let mut merged = 0;
        while index + 1 < self.nodes[parent as usize].count() {
            let right_bounds = self.child_bounds(parent, index + 1, bounds);
            let right =
                self.child_node(pages, arena, parent, index + 1, right_bounds, above, None)?;
            let (left_node, right_node) = (&self.nodes[leaf as usize], &self.nodes[right as usize]);
            if !right_node.is_leaf()
                || right_node.used() >= full
                || element_page_size(left_node.entries_len() + right_node.entries_len()) > bytes_max
            {
                break;
            }
            self.merge(parent, leaf, right, index + 1, arena, alloc)?;
            merged += 1;
        }
        Ok(merged)
    }

    /// Moves every entry of node `right` (child `right_index` of `parent`) to the end of its
    /// left sibling `left`, and removes `right`.
    fn merge<A: PageAlloc>(
        &mut self,
        parent: NodeId,
        left: NodeId,
        right: NodeId,
        right_index: usize,
        arena: &mut Arena,
        alloc: &mut A,
    ) -> Result<(), A::Error> {
        let parent_pgid = self.nodes[parent as usize].pgid;
        let (left_node, right_node) = (&self.nodes[left as usize], &self.nodes[right as usize]);
        if left_node.is_leaf() != right_node.is_leaf() {
            return Err(Corruption::new(
                parent_pgid,
                Reason::Other("sibling pages are of different kinds"),
            )
            .into());
        }
        // Every key on the left sorts before the parent's separator and every key on the
        // right from it on (copying a page checks it): what the merged node needs.
        let leaf = left_node.is_leaf();
        let separator = self.nodes[parent as usize].key(right_index);
        // A branch's first separator routes nothing (and may be stale): compare the others.
        let first = usize::from(!leaf);
        let left_ok = left_node.count() <= first
            || compare_keys(left_node.key(left_node.count() - 1), separator) == Ordering::Less;
        let right_ok = right_node.count() <= first || {
            let order = compare_keys(separator, right_node.key(first));
            if leaf {
                order != Ordering::Greater
            } else {
                order == Ordering::Less
            }
        };
        if !left_ok || !right_ok {
            debug_assert!(false, "siblings' keys cross their separator");
            return Err(
                Corruption::new(parent_pgid, Reason::KeyOrder { index: right_index }).into(),
            );
        }
        self.nodes[left as usize].ensure_packed(arena);
        self.nodes[right as usize].ensure_packed(arena);
        let mut scratch = std::mem::take(&mut self.scratch);
        scratch.clear();
        if !leaf && self.nodes[right as usize].count() > 0 {
            let right_node = &self.nodes[right as usize];
            scratch.extend_from_slice(junction_key(
                self.nodes[parent as usize].key(right_index),
                right_node.key(0),
                (right_node.count() > 1).then(|| right_node.key(1)),
            ));
        }
        let mut right_node = std::mem::replace(&mut self.nodes[right as usize], Node::gone());
        let left_node = &mut self.nodes[left as usize];
        let junction = left_node.count();
        let len =
            element_page_size(left_node.entries_len() + right_node.entries_len()) + scratch.len();
        left_node.reserve(len, arena);
        if !leaf && right_node.count() > 0 {
            // The entries after the first, then the first's child under its key (see
            // `junction_key`): the branch is ordered at every step, and a stale or damaged
            // first key never enters it.
            left_node.append_from(&right_node, 1..right_node.count());
            left_node.insert(
                junction,
                &NewEntry::Branch {
                    key: &scratch,
                    child: right_node.child(0),
                },
            );
        } else {
            left_node.append_from(&right_node, 0..right_node.count());
        }
        self.scratch = scratch;
        right_node.recycle(arena);
        self.remove_child(parent, right_index);
        if right_node.pgid.0 != 0 {
            alloc.free(right_node.pgid, right_node.overflow)?;
        }
        Ok(())
    }

    /// Removes child `index` of branch node `parent`, marking the parent for rebalancing.
    fn remove_child(&mut self, parent: NodeId, index: usize) {
        let node = &mut self.nodes[parent as usize];
        node.remove(index);
        node.unbalanced = true;
        self.stats.rebalance += 1;
    }

    /// While the root is a branch with one child, makes the child the root (the root node
    /// takes the child's image and the child's page is freed); an empty branch root becomes
    /// an empty leaf.
    fn collapse_root<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        alloc: &mut A,
        root: NodeId,
    ) -> Result<(), A::Error> {
        // At most once per level of a valid tree.
        for _ in 0..=DEPTH_MAX {
            let node = &mut self.nodes[root as usize];
            if node.is_leaf() {
                return Ok(());
            }
            match node.count() {
                0 => {
                    node.make_empty_leaf();
                    return Ok(());
                }
                1 => {
                    let child = self.child_node(pages, arena, root, 0, (None, None), &[], None)?;
                    let mut child_node =
                        std::mem::replace(&mut self.nodes[child as usize], Node::gone());
                    self.nodes[root as usize].swap_image(&mut child_node);
                    child_node.recycle(arena);
                    if child_node.pgid.0 != 0 {
                        alloc.free(child_node.pgid, child_node.overflow)?;
                    }
                }
                _ => return Ok(()),
            }
        }
        Err(too_deep().into())
    }
}

/// The separator for the first child of branch `right` once it is merged into its left
/// sibling: `right`'s own first key, which is its first child's first key (or that child is a
/// node, whose separator spill rewrites), as Go bbolt's writer needs every separator to be.
/// The parent's separator for `right` is not: it was `right`'s first key when last written,
/// and rebalancing may have removed that child since. A file written by an older rbolt can
/// hold a first key below the parent's separator (a stale one); the parent's separator is
/// then the nearer bound of the child's keys, and keeps the merged branch ordered. So does it
/// when the first key is not below `right`'s second (`right_second`; a damaged first key, which
/// routes nothing and which the page check does not order): every key of the merged branch
/// must ascend.
fn junction_key<'a>(
    parent_separator: &'a [u8],
    right_first: &'a [u8],
    right_second: Option<&[u8]>,
) -> &'a [u8] {
    let below_second =
        right_second.is_none_or(|second| compare_keys(right_first, second) == Ordering::Less);
    if compare_keys(right_first, parent_separator) == Ordering::Less || !below_second {
        parent_separator
    } else {
        right_first
    }
}
