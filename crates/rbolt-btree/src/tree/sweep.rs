//! Deleting many entries in one pass: [`Tree::delete_where`] walks the leaves from a start
//! key in either direction, asks a closure about each entry, and removes the ones it names,
//! leaf by leaf, on one path kept from leaf to leaf (no descent per key).
//!
//! A leaf is copied into a node to be read, as a put's descent copies it; a leaf (or branch)
//! the walk copied and left unchanged is dropped again as the walk leaves it and its parent's
//! link put back, so only what changed is written at commit. Before the walk first changes a
//! node that existed before it, it keeps a copy: when the closure fails, or a corrupt page is
//! met halfway, the tree is put back exactly as it was (those copies, the root, the nodes
//! made since, the counters), and the caller's error is returned.

use super::{Bound as KeyBound, Path, Root, Tree, TreeStats, too_deep};
use crate::DEPTH_MAX;
use crate::node::arena::Arena;
use crate::node::{NODE_TAG, Node, NodeId};
use crate::pages::Pages;
use rbolt_page::{Corruption, LEAF_FLAG_BUCKET, LeafEntry, Reason, Result as PageResult};
use smallvec::SmallVec;
use std::ops::Bound;

/// What [`Tree::delete_where`]'s closure says of an entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Keep the entry and go on.
    Keep,
    /// Delete the entry and go on.
    Delete,
    /// Delete the entry and stop.
    DeleteAndStop,
    /// Keep the entry and stop (the walk left the range).
    Stop,
}

impl Verdict {
    #[inline]
    fn deletes(self) -> bool {
        matches!(self, Verdict::Delete | Verdict::DeleteAndStop)
    }

    #[inline]
    fn stops(self) -> bool {
        matches!(self, Verdict::Stop | Verdict::DeleteAndStop)
    }
}

/// Which way [`Tree::delete_where`] walks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Ascending keys, from the start bound up.
    Forward,
    /// Descending keys, from the start bound down.
    Backward,
}

/// What puts a tree back as it was before a walk.
struct Savepoint {
    root: Root,
    nodes_len: usize,
    stats: TreeStats,
    /// Copies of nodes that existed before the walk, each taken before the walk first changed
    /// the node.
    saved: Vec<(NodeId, Node)>,
    /// Which of those nodes have a copy, by id (empty until the first copy).
    copied: Vec<bool>,
}

/// A branch on the walk's path, beside its `(node, child index)` in the [`Path`].
#[derive(Clone, Copy)]
struct Marks {
    bounds: (KeyBound, KeyBound),
    /// The walk made the node from its page.
    fresh: bool,
    /// Something below the node was deleted.
    changed: bool,
}

/// Where the walk starts in the leaf it reaches first: the start bound, then nothing.
type Start<'k> = Option<Bound<&'k [u8]>>;

impl Tree {
    /// Walks the tree's entries from `start` in `direction`, asking `decide` about each one
    /// (nested buckets included, which it may only keep: a bucket entry is never deleted here)
    /// and deleting those it says to, until it says stop or the tree ends; returns how many it
    /// deleted. Each page on the way is read once. When `decide` fails or a page is corrupt,
    /// the tree is exactly as before the call and the error is returned; when nothing is
    /// deleted it is exactly as before too.
    pub fn delete_where<E: From<Corruption>>(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        start: Bound<&[u8]>,
        direction: Direction,
        decide: &mut dyn FnMut(LeafEntry<'_>) -> Result<Verdict, E>,
    ) -> Result<u64, E> {
        self.append_hint = None;
        let mut save = Savepoint {
            root: self.root.clone(),
            nodes_len: self.nodes.len(),
            stats: self.stats,
            saved: Vec::new(),
            copied: Vec::new(),
        };
        match self.sweep(pages, arena, start, direction, decide, &mut save) {
            Ok(0) => {
                self.roll_back(save, arena);
                Ok(0)
            }
            Ok(deleted) => {
                for (_, mut copy) in save.saved {
                    copy.recycle(arena);
                }
                Ok(deleted)
            }
            Err(error) => {
                self.roll_back(save, arena);
                Err(error)
            }
        }
    }

    /// The walk of [`Tree::delete_where`]: down to the first leaf, then from leaf to leaf
    /// along the path, each branch's next child taken when a subtree is done.
    fn sweep<E: From<Corruption>>(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        start: Bound<&[u8]>,
        direction: Direction,
        decide: &mut dyn FnMut(LeafEntry<'_>) -> Result<Verdict, E>,
        save: &mut Savepoint,
    ) -> Result<u64, E> {
        let fresh = !matches!(self.root, Root::Node(_));
        let mut id = self.materialize_root(pages, arena, None)?;
        let mut path = Path::new();
        let mut marks: SmallVec<[Marks; 16]> = SmallVec::new();
        let mut level = Marks {
            bounds: (None, None),
            fresh,
            changed: false,
        };
        let mut first: Start<'_> = Some(start);
        let mut deleted = 0;
        loop {
            // Down to a leaf, by the start key the first time and along the edge after.
            while !self.nodes[id as usize].is_leaf() {
                let index = self.first_child(id, first, direction)?;
                if path.len() + 1 >= DEPTH_MAX {
                    return Err(too_deep().into());
                }
                path.push((id, index));
                marks.push(level);
                (id, level) = self.step_down(pages, arena, &path, &marks, save)?;
            }
            let (n, stop) = self.sweep_leaf(id, first.take(), direction, decide, save, arena)?;
            deleted += n;
            level.changed = n > 0;
            self.leave(id, level, path.last().copied(), arena);
            let mut changed = level.changed;
            // Up to the first branch with a child left in the walk's direction.
            loop {
                let (Some(top), Some(top_marks)) = (path.last_mut(), marks.last_mut()) else {
                    return Ok(deleted);
                };
                top_marks.changed |= changed;
                let count = self.nodes[top.0 as usize].count();
                let next = match direction {
                    Direction::Forward => Some(top.1 + 1).filter(|&next| next < count),
                    Direction::Backward => top.1.checked_sub(1),
                };
                if let (Some(next), false) = (next, stop) {
                    top.1 = next;
                    break;
                }
                let (branch, above) = (*top, *top_marks);
                path.pop();
                marks.pop();
                self.leave(branch.0, above, path.last().copied(), arena);
                changed = above.changed;
            }
            (id, level) = self.step_down(pages, arena, &path, &marks, save)?;
        }
    }

    /// The child of branch `id` the walk goes down first: where the start key lies, or the
    /// edge in the walk's direction.
    fn first_child(&self, id: NodeId, first: Start<'_>, direction: Direction) -> PageResult<usize> {
        let node = &self.nodes[id as usize];
        let count = node.count();
        if count == 0 {
            // Pages with no children are refused when copied; only a bug leaves one here.
            debug_assert!(false, "an empty branch node on a path");
            return Err(Corruption::new(node.pgid, Reason::EmptyBranch));
        }
        Ok(match (first, direction) {
            (Some(Bound::Included(key) | Bound::Excluded(key)), _) => node.child_index(key),
            (_, Direction::Forward) => 0,
            (_, Direction::Backward) => count - 1,
        })
    }

    /// The child the path's last branch points at, made a node (its parent copied first if
    /// that changes a node older than the walk), with its marks.
    fn step_down(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        path: &Path,
        marks: &[Marks],
        save: &mut Savepoint,
    ) -> PageResult<(NodeId, Marks)> {
        let (parent, index) = *path.last().expect("a step down from a branch");
        let above = marks.last().expect("marks beside the path");
        let bounds = self.child_bounds(parent, index, above.bounds);
        let fresh = self.nodes[parent as usize].child(index) & NODE_TAG == 0;
        if fresh {
            self.keep_copy(save, parent, arena);
        }
        let ancestors = &path[..path.len() - 1];
        let id = self.child_node(pages, arena, parent, index, bounds, ancestors, None)?;
        let marks = Marks {
            bounds,
            fresh,
            changed: false,
        };
        Ok((id, marks))
    }

    /// Asks `decide` about the entries of leaf `id` from `first` (or its edge) on, deleting
    /// those it names; returns how many, and whether it said stop.
    fn sweep_leaf<E>(
        &mut self,
        id: NodeId,
        first: Start<'_>,
        direction: Direction,
        decide: &mut dyn FnMut(LeafEntry<'_>) -> Result<Verdict, E>,
        save: &mut Savepoint,
        arena: &mut Arena,
    ) -> Result<(u64, bool), E> {
        let node = &self.nodes[id as usize];
        // Forward: the next entry to ask about. Backward: one past it.
        let mut index = match (first, direction) {
            (None | Some(Bound::Unbounded), Direction::Forward) => 0,
            (None | Some(Bound::Unbounded), Direction::Backward) => node.count(),
            (Some(Bound::Included(key)), Direction::Forward) => {
                node.search(key).unwrap_or_else(|i| i)
            }
            (Some(Bound::Excluded(key)), Direction::Forward) => match node.search(key) {
                Ok(found) => found + 1,
                Err(next) => next,
            },
            (Some(Bound::Included(key)), Direction::Backward) => match node.search(key) {
                Ok(found) => found + 1,
                Err(next) => next,
            },
            (Some(Bound::Excluded(key)), Direction::Backward) => {
                node.search(key).unwrap_or_else(|i| i)
            }
        };
        let mut deleted = 0;
        loop {
            let at = match direction {
                Direction::Forward if index < self.nodes[id as usize].count() => index,
                Direction::Backward if index > 0 => index - 1,
                _ => return Ok((deleted, false)),
            };
            let node = &self.nodes[id as usize];
            let flags = node.flags(at);
            let entry = LeafEntry {
                flags,
                key: node.key(at),
                value: node.value(at),
            };
            let verdict = decide(entry)?;
            let bucket = flags & LEAF_FLAG_BUCKET != 0;
            debug_assert!(
                !(bucket && verdict.deletes()),
                "delete_where deletes no bucket"
            );
            if verdict.deletes() && !bucket {
                self.keep_copy(save, id, arena);
                let node = &mut self.nodes[id as usize];
                node.remove(at);
                node.unbalanced = true;
                deleted += 1;
            } else if direction == Direction::Forward {
                index += 1;
            }
            if direction == Direction::Backward {
                index -= 1;
            }
            if verdict.stops() {
                return Ok((deleted, true));
            }
        }
    }

    /// Leaves node `id`: one the walk made and did not change is dropped (the last node made)
    /// and its parent points at its page again. The root stays: a walk that deleted nothing
    /// rolls back.
    fn leave(
        &mut self,
        id: NodeId,
        marks: Marks,
        parent: Option<(NodeId, usize)>,
        arena: &mut Arena,
    ) {
        let Some((parent, index)) = parent else {
            return;
        };
        if !marks.fresh || marks.changed {
            return;
        }
        if id as usize + 1 != self.nodes.len() {
            // The walk leaves a node after all the nodes it made below it, which it dropped
            // unless it changed them (and then this one changed too). Kept, the node is a
            // faithful copy of its page: written at commit, it changes nothing.
            debug_assert!(
                false,
                "an unchanged node the walk made is the last one made"
            );
            return;
        }
        let Some(mut node) = self.nodes.pop() else {
            return;
        };
        let pgid = node.pgid;
        node.recycle(arena);
        self.nodes[parent as usize].set_child(index, pgid.0);
        self.stats.node_count -= 1;
    }

    /// Copies node `id` into `save` before the walk first changes it, if it is older than
    /// the walk.
    fn keep_copy(&mut self, save: &mut Savepoint, id: NodeId, arena: &mut Arena) {
        let index = id as usize;
        if index >= save.nodes_len {
            return;
        }
        if save.copied.is_empty() {
            save.copied = vec![false; save.nodes_len];
        }
        if save.copied[index] {
            return;
        }
        save.copied[index] = true;
        let copy = self.nodes[index].duplicate(arena);
        save.saved.push((id, copy));
    }

    /// Puts the tree back as it was when `save` was taken.
    fn roll_back(&mut self, save: Savepoint, arena: &mut Arena) {
        for (id, copy) in save.saved {
            let mut changed = std::mem::replace(&mut self.nodes[id as usize], copy);
            changed.recycle(arena);
        }
        for mut node in self.nodes.drain(save.nodes_len..) {
            if !node.is_gone() {
                node.recycle(arena);
            }
        }
        self.root = save.root;
        self.stats = save.stats;
    }
}
