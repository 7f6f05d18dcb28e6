//! Writing a tree at commit: every edited node to new pages, children before parents.
//!
//! One pass over the edited nodes in post-order, on an explicit stack bounded by
//! `DEPTH_MAX`. Each step is one function: [`Tree::next_child_node`] finds the next edited
//! child to go down to; [`Tree::write_node`] frees the page the node came from, cuts the node
//! if it outgrew its page, and hands each piece's image to the allocator as it is (no
//! encoding: the image is the page); [`Tree::adopt_pieces`] puts the pieces' page ids, and
//! their first keys as separators, in the parent in place of the node; a root cut in pieces
//! gets a new root above them ([`Tree::root_above`]), written in turn.

use crate::DEPTH_MAX;
use crate::node::arena::Arena;
use crate::node::{NODE_TAG, Node, NodeId};
use crate::pages::Pages;
use crate::tree::{PageAlloc, Root, Tree, too_deep};
use rbolt_page::{
    Corruption, NewEntry, PageHeader, Pgid, Reason, branch_page_size, compare_keys, pages_for,
};
use smallvec::SmallVec;
use std::cmp::Ordering;
use std::ops::Range;

/// A node (or a piece of one) written to pages: where, and its first key (in `Tree::scratch`).
#[derive(Clone, Debug)]
pub(crate) struct Piece {
    pgid: Pgid,
    key: Range<usize>,
}

type Written = SmallVec<[Piece; 4]>;

impl Tree {
    /// Writes every node to new pages (children before parents), freeing the pages they were
    /// read from, and returns the new root page. Call [`Tree::rebalance`] first. The tree is
    /// committed afterwards: its root is the page returned.
    pub fn spill<A: PageAlloc>(
        &mut self,
        pages: Pages<'_>,
        arena: &mut Arena,
        alloc: &mut A,
    ) -> Result<Pgid, A::Error> {
        self.append_hint = None;
        self.verify.spill_begins();
        let root = match self.root {
            Root::Page(pgid) => return Ok(pgid),
            Root::Node(id) => id,
            // An unedited inline tree (or a new one) has no page yet: write it as one.
            Root::New | Root::Inline { .. } | Root::InlineCopy(_) => {
                self.materialize_root(pages, arena, None)?
            }
        };
        let mut stack: SmallVec<[(NodeId, usize); 16]> = SmallVec::new();
        stack.push((root, 0));
        let mut written = Written::new();
        let root_pgid = loop {
            let &(id, from) = stack
                .last()
                .expect("the stack holds the node being written");
            if let Some((index, child)) = self.next_child_node(id, from) {
                if stack.len() >= DEPTH_MAX {
                    return Err(too_deep().into());
                }
                stack.last_mut().expect("not empty").1 = index;
                stack.push((child, 0));
                continue;
            }
            stack.pop();
            self.write_node(id, stack.is_empty(), pages, arena, alloc, &mut written)?;
            match stack.last_mut() {
                Some((parent, index)) => {
                    *index += self.adopt_pieces(*parent, *index, &written, arena)?;
                }
                None => {
                    if let [piece] = &written[..] {
                        break piece.pgid;
                    }
                    // The root was cut in pieces: a new root above them, written next.
                    debug_assert!(written.len() > 1, "a root is written, even empty");
                    let id = self.root_above(&written, arena);
                    stack.push((id, 0));
                }
            }
        };
        for node in &mut self.nodes {
            debug_assert!(node.is_gone(), "a node spill did not reach");
            node.recycle(arena);
        }
        arena.give_nodes(std::mem::take(&mut self.nodes));
        arena.give_scratch(std::mem::take(&mut self.scratch));
        self.root = Root::Page(root_pgid);
        Ok(root_pgid)
    }

    /// The first child of branch node `id` at index `from` or after that is a node, with its
    /// index.
    pub(crate) fn next_child_node(&self, id: NodeId, from: usize) -> Option<(usize, NodeId)> {
        let node = &self.nodes[id as usize];
        if node.is_leaf() {
            return None;
        }
        let (index, child) = node.image().next_child_with(from, NODE_TAG)?;
        Some((index, (child & !NODE_TAG) as NodeId))
    }

    /// Writes node `id` (its children written already) to new pages: frees its old page,
    /// cuts it into pieces if it does not fit a page, and hands each piece's image to
    /// `alloc`. `written` receives the pieces (none for an empty node that is not the root;
    /// an empty root is written as an empty leaf).
    fn write_node<A: PageAlloc>(
        &mut self,
        id: NodeId,
        is_root: bool,
        pages: Pages<'_>,
        arena: &mut Arena,
        alloc: &mut A,
        written: &mut Written,
    ) -> Result<(), A::Error> {
        let page_size = pages.page_size();
        written.clear();
        self.scratch.clear();
        let node = &mut self.nodes[id as usize];
        if node.pgid.0 != 0 {
            let (pgid, overflow) = (node.pgid, node.overflow);
            // Cleared first: the page is freed once, whatever happens next.
            node.pgid = Pgid(0);
            alloc.free(pgid, overflow)?;
        }
        if node.count() == 0 {
            if !is_root {
                node.recycle(arena);
                return Ok(());
            }
            if !node.is_leaf() {
                node.make_empty_leaf();
            }
        }
        let mut ids: SmallVec<[NodeId; 4]> = SmallVec::new();
        ids.push(id);
        if !node.fits(0, 0, page_size) {
            ids.extend(self.split_with(id, None, arena));
        }
        for piece in ids {
            let node = &mut self.nodes[piece as usize];
            let n_pages = pages_for(node.used(), page_size);
            node.pack(n_pages * page_size, arena);
            let pgid = alloc.allocate(n_pages)?;
            node.write_header(pgid, (n_pages - 1) as u32);
            node.zero_tail();
            verify_before_write(node, pgid);
            self.verify.check_branch(pages, node, pgid);
            self.verify.wrote(pgid);
            let start = self.scratch.len();
            if node.count() > 0 {
                self.scratch.extend_from_slice(node.key(0));
            }
            written.push(Piece {
                pgid,
                key: start..self.scratch.len(),
            });
            let buf = node.take_buffer(arena);
            alloc.write(pgid, buf, arena)?;
            self.stats.spill += 1;
        }
        Ok(())
    }

    /// Puts `written` (the pages child `index` of branch `parent` was written to) in the
    /// parent in its place: page ids, and first keys as separators where they changed (the
    /// first key of a child moves with inserts on the leftmost path and with deletes).
    /// Returns the number of entries that now stand where the child was.
    fn adopt_pieces(
        &mut self,
        parent: NodeId,
        index: usize,
        written: &Written,
        arena: &mut Arena,
    ) -> Result<usize, Corruption> {
        let scratch = std::mem::take(&mut self.scratch);
        let result = adopt(
            &mut self.nodes[parent as usize],
            index,
            written,
            &scratch,
            arena,
        );
        self.scratch = scratch;
        result
    }

    /// A new root branch above the pieces of the old root.
    fn root_above(&mut self, written: &Written, arena: &mut Arena) -> NodeId {
        let page_size = arena.page_size();
        let bytes = branch_page_size(
            written.len(),
            written.iter().map(|piece| piece.key.len()).sum::<usize>(),
        );
        let mut root = Node::empty(arena, pages_for(bytes, page_size) * page_size, false);
        for (index, piece) in written.iter().enumerate() {
            root.insert(
                index,
                &NewEntry::Branch {
                    key: &self.scratch[piece.key.clone()],
                    child: piece.pgid.0,
                },
            );
        }
        self.stats.split += written.len() as u64 - 1;
        let id = self.push_node(root);
        self.root = Root::Node(id);
        id
    }
}

/// See [`Tree::adopt_pieces`]; `keys` holds the pieces' first keys.
fn adopt(
    node: &mut Node,
    index: usize,
    written: &Written,
    keys: &[u8],
    arena: &mut Arena,
) -> Result<usize, Corruption> {
    let Some(first) = written.first() else {
        // The child was empty: it is gone.
        node.remove(index);
        return Ok(0);
    };
    let key = |piece: &Piece| &keys[piece.key.clone()];
    // The separators written must keep the branch ordered: they do when every node holds
    // only keys within its parent's range, which copying a page checks. Checked again here,
    // so that a bug ends in an error rather than a page out of order.
    let last = written.last().expect("not empty");
    let after_previous =
        index == 0 || compare_keys(node.key(index - 1), key(first)) == Ordering::Less;
    let before_next =
        index + 1 >= node.count() || compare_keys(key(last), node.key(index + 1)) == Ordering::Less;
    if !after_previous || !before_next {
        debug_assert!(false, "a written child's keys fall outside its range");
        return Err(Corruption::new(node.pgid, Reason::KeyOrder { index }));
    }
    if node.key(index) == key(first) {
        node.set_child(index, first.pgid.0);
    } else {
        node.remove(index);
        let entry = NewEntry::Branch {
            key: key(first),
            child: first.pgid.0,
        };
        node.reserve(node.used() + entry.size(), arena);
        node.insert(index, &entry);
    }
    for (offset, piece) in written.iter().enumerate().skip(1) {
        let entry = NewEntry::Branch {
            key: key(piece),
            child: piece.pgid.0,
        };
        node.reserve(node.used() + entry.size(), arena);
        node.insert(index + offset, &entry);
    }
    Ok(written.len())
}

/// Debug builds and the `verify` feature check every page before it is written, as every
/// page is checked after it is read: entries within the page, keys strictly ascending, leaf
/// flags known and bucket values well formed, branch children all pages (and, in
/// `Verify::check_branch`, what Go bbolt's writer needs of a branch). A failure is a bug in
/// this crate (what it copies from the file was checked when copied), so it panics.
fn verify_before_write(node: &Node, pgid: Pgid) {
    if !cfg!(any(debug_assertions, feature = "verify")) {
        return;
    }
    assert!(
        node.is_packed(),
        "page {pgid} about to be written is not packed"
    );
    node.check_layout();
    let image = node.image();
    let header = PageHeader::read(image.image()).expect("a node image has a header");
    assert_eq!(
        header.id, pgid.0,
        "page {pgid} written with id {}",
        header.id
    );
    let checked = if node.is_leaf() {
        image.leaf(pgid).and_then(|page| page.validate())
    } else {
        image.branch(pgid).and_then(|page| {
            let mut previous: Option<&[u8]> = None;
            for index in 0..page.len() {
                let key = page.key(index)?;
                assert!(
                    previous.is_none_or(|p| compare_keys(p, key) == Ordering::Less),
                    "branch page {pgid}: separator {index} out of order"
                );
                assert_eq!(
                    page.child(index)?.0 & NODE_TAG,
                    0,
                    "branch page {pgid}: child {index} is still a node"
                );
                previous = Some(key);
            }
            Ok(())
        })
    };
    if let Err(error) = checked {
        panic!("page {pgid} about to be written does not validate: {error}");
    }
}
