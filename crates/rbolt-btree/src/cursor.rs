//! Reading a tree: point lookups and cursors over committed pages and edited nodes alike.

use crate::DEPTH_MAX;
use crate::node::{NODE_TAG, Node, NodeId};
use crate::pages::Pages;
use rbolt_page::{
    BranchPage, Corruption, KeySource, LeafPage, PageKind, Pgid, Reason, Result, child_index,
    compare_keys, lower_bound, search,
};

use smallvec::SmallVec;
use std::cmp::Ordering;

/// Where a tree's root is.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RootRef<'a> {
    /// A committed page.
    Page(Pgid),
    /// The page stored inline in a bucket value.
    Inline(&'a [u8]),
    /// A node of the tree being edited.
    Node(NodeId),
}

/// One key/value pair of a leaf, borrowed from the pages or the transaction: a page's
/// [`LeafEntry`](rbolt_page::LeafEntry), whether it was read from a page or from a node.
pub use rbolt_page::LeafEntry as Entry;

/// A read-only view of one tree: committed pages, plus the nodes a write transaction edited.
/// A node is read through the same page views as a page: its image is one.
#[derive(Clone, Copy, Debug)]
pub struct TreeView<'a> {
    pub(crate) pages: Pages<'a>,
    pub(crate) nodes: &'a [Node],
    pub(crate) root: RootRef<'a>,
}

/// A level of a cursor's stack: a page, or a node's image.
#[derive(Clone, Copy, Debug)]
enum Level<'a> {
    Leaf(LeafPage<'a>),
    Branch(BranchPage<'a>),
    /// A leaf node: its entries are read as a page's.
    NodeLeaf(LeafPage<'a>),
    /// A branch node: its children may be nodes (`NODE_TAG`), and its first separator
    /// routes nothing (see `tree.rs`).
    NodeBranch(BranchPage<'a>),
}

/// The separators of a branch node after the first, for the binary search.
struct AfterFirst<'p, 'a>(&'p BranchPage<'a>);

impl KeySource for AfterFirst<'_, '_> {
    #[inline]
    fn key_count(&self) -> usize {
        self.0.len().saturating_sub(1)
    }
    #[inline]
    fn key_at(&self, index: usize) -> Result<&[u8]> {
        self.0.key(index + 1)
    }
}

/// In a branch node, the child whose subtree would hold `key`: the first separator left out.
#[inline]
fn node_child_index(page: &BranchPage<'_>, key: &[u8]) -> Result<usize> {
    Ok(match search(&AfterFirst(page), key)? {
        Ok(index) => index + 1,
        Err(index) => index,
    })
}

/// A position on a cursor's path: a page or node, and the index of an element in it.
#[derive(Clone, Copy, Debug)]
pub struct ElemRef<'a> {
    level: Level<'a>,
    index: usize,
}

impl<'a> TreeView<'a> {
    /// The tree whose root is committed page `root`.
    pub fn from_page(pages: Pages<'a>, root: Pgid) -> TreeView<'a> {
        TreeView {
            pages,
            nodes: &[],
            root: RootRef::Page(root),
        }
    }

    /// The tree stored inline in a bucket value (`page` is the bytes after the bucket header).
    pub fn from_inline(pages: Pages<'a>, page: &'a [u8]) -> TreeView<'a> {
        TreeView {
            pages,
            nodes: &[],
            root: RootRef::Inline(page),
        }
    }

    /// The pages the view reads.
    pub fn pages(&self) -> Pages<'a> {
        self.pages
    }

    /// The root's inline page, when the tree is stored inline in its bucket value.
    pub fn root_inline(&self) -> Option<&'a [u8]> {
        match self.root {
            RootRef::Inline(bytes) => Some(bytes),
            RootRef::Page(_) | RootRef::Node(_) => None,
        }
    }

    /// The root page, when the root is a committed page (not inline, not edited).
    pub fn root_pgid(&self) -> Option<Pgid> {
        match self.root {
            RootRef::Page(pgid) => Some(pgid),
            RootRef::Inline(_) | RootRef::Node(_) => None,
        }
    }

    /// Reads committed page `pgid` (a child of `owner`) as a leaf or branch level.
    #[inline]
    fn load(&self, owner: Pgid, pgid: Pgid) -> Result<Level<'a>> {
        let (bytes, header) = self.pages.page_and_header(owner, pgid)?;
        match header.kind() {
            Some(PageKind::Leaf) => Ok(Level::Leaf(LeafPage::from_header(bytes, pgid, header)?)),
            Some(PageKind::Branch) => {
                let branch = BranchPage::from_header(bytes, pgid, header)?;
                if branch.is_empty() {
                    return Err(Corruption::new(pgid, Reason::EmptyBranch));
                }
                Ok(Level::Branch(branch))
            }
            _ => Err(Corruption::new(
                pgid,
                Reason::NotTreePage {
                    flags: header.flags,
                },
            )),
        }
    }

    /// The level of node `id`: its image read as a page.
    #[inline]
    fn node_level(&self, id: NodeId) -> Result<Level<'a>> {
        let node = &self.nodes[id as usize];
        if node.is_leaf() {
            Ok(Level::NodeLeaf(node.image().leaf(node.pgid)?))
        } else {
            Ok(Level::NodeBranch(node.image().branch(node.pgid)?))
        }
    }

    #[inline]
    fn root_level(&self) -> Result<Level<'a>> {
        match self.root {
            RootRef::Page(pgid) => self.load(Pgid(0), pgid),
            RootRef::Inline(bytes) => Ok(Level::Leaf(LeafPage::inline(bytes, Pgid(0))?)),
            RootRef::Node(id) => self.node_level(id),
        }
    }

    /// The child `index` of a branch level.
    #[inline]
    fn child(&self, level: Level<'a>, index: usize) -> Result<Level<'a>> {
        match level {
            Level::Branch(page) => self.load(page.pgid(), page.child(index)?),
            Level::NodeBranch(page) => {
                let child = page.child(index)?;
                if child.0 & NODE_TAG != 0 {
                    self.node_level((child.0 & !NODE_TAG) as NodeId)
                } else {
                    self.load(page.pgid(), child)
                }
            }
            Level::Leaf(_) | Level::NodeLeaf(_) => unreachable!("child of a leaf"),
        }
    }

    /// In a branch level, the child whose subtree would hold `key`.
    #[inline]
    fn child_index(&self, level: Level<'a>, key: &[u8]) -> Result<usize> {
        match level {
            Level::Branch(page) => child_index(&page, key),
            Level::NodeBranch(page) => node_child_index(&page, key),
            Level::Leaf(_) | Level::NodeLeaf(_) => unreachable!("child index in a leaf"),
        }
    }

    #[inline]
    fn is_leaf(&self, level: Level<'a>) -> bool {
        matches!(level, Level::Leaf(_) | Level::NodeLeaf(_))
    }

    #[inline]
    fn count(&self, level: Level<'a>) -> usize {
        match level {
            Level::Leaf(page) | Level::NodeLeaf(page) => page.len(),
            Level::Branch(page) | Level::NodeBranch(page) => page.len(),
        }
    }

    /// The entry at `index` of a leaf level.
    #[inline]
    fn entry(&self, level: Level<'a>, index: usize) -> Result<Entry<'a>> {
        match level {
            Level::Leaf(page) | Level::NodeLeaf(page) => page.entry(index),
            Level::Branch(_) | Level::NodeBranch(_) => unreachable!("entry of a branch"),
        }
    }

    /// Looks `key` up: the entry holding exactly `key`, if any. Allocates nothing.
    pub fn get(&self, key: &[u8]) -> Result<Option<Entry<'a>>> {
        let mut level = self.root_level()?;
        for _ in 0..DEPTH_MAX {
            match level {
                Level::Leaf(page) | Level::NodeLeaf(page) => {
                    return match page.search(key)? {
                        Ok(index) => page.entry(index).map(Some),
                        Err(_) => Ok(None),
                    };
                }
                Level::Branch(page) => {
                    let index = page.child_index(key)?;
                    level = self.load(page.pgid(), page.child(index)?)?;
                }
                Level::NodeBranch(page) => {
                    if page.is_empty() {
                        return Ok(None);
                    }
                    let index = node_child_index(&page, key)?;
                    level = self.child(level, index)?;
                }
            }
        }
        Err(too_deep())
    }

    /// A cursor over this tree, not yet positioned.
    pub fn cursor(&self) -> Cursor<'a> {
        Cursor {
            view: *self,
            stack: SmallVec::new(),
            state: State::Unpositioned,
            last_key: None,
            loads: 0,
            scan_loads: 0,
            scan_direction: None,
            crossed: false,
        }
    }
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

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Unpositioned,
    At,
    BeforeStart,
    AfterEnd,
}

/// A position in a tree that moves in key order.
///
/// The path from the root to the current leaf lives in a `SmallVec` of 16 levels: moving
/// allocates nothing for trees up to 16 levels deep. A cursor that ran off either end returns
/// `None` and stays usable: from past the end, `prev` gives the last entry; from before the
/// start, `next` gives the first.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    view: TreeView<'a>,
    stack: SmallVec<[ElemRef<'a>; 16]>,
    state: State,
    /// The key returned last, to catch a corrupt file that leads a scan back to keys it
    /// already passed (two branches sharing a child, a cycle off the descent path).
    last_key: Option<&'a [u8]>,
    /// Pages loaded by the move under way: a move of a sound tree loads fewer pages than the
    /// file holds, so more means shared or cyclic pages (say, 2^50 paths to empty leaves).
    loads: u64,
    /// Pages loaded since the cursor was last positioned (`first`, `last`, `seek`) or turned:
    /// a scan of a sound tree in one direction loads each page once, so more than the file
    /// holds means it is going round (a cycle whose leaves' keys happen to go up where the
    /// scan crosses them, which the key check cannot see).
    scan_loads: u64,
    /// The direction of the scan `scan_loads` counts.
    scan_direction: Option<Ordering>,
    /// The move under way left the leaf it started on. Only such a move can go back to keys
    /// already passed; a step inside one leaf goes to the next index, and a leaf's own key
    /// order is `check`'s and page validation's to find. So only these steps compare keys.
    crossed: bool,
}

impl<'a> Cursor<'a> {
    /// The view this cursor reads.
    pub fn view(&self) -> &TreeView<'a> {
        &self.view
    }

    /// Moves to the first entry.
    pub fn first(&mut self) -> Result<Option<Entry<'a>>> {
        self.last_key = None;
        self.turn(None);
        let moved = self.first_inner();
        self.settled(moved, None)
    }

    /// Moves to the last entry.
    pub fn last(&mut self) -> Result<Option<Entry<'a>>> {
        self.last_key = None;
        self.turn(None);
        let moved = self.last_inner();
        self.settled(moved, None)
    }

    /// Moves to the first entry whose key is not less than `key`.
    pub fn seek(&mut self, key: &[u8]) -> Result<Option<Entry<'a>>> {
        self.last_key = None;
        self.turn(None);
        let moved = self.seek_inner(key);
        self.settled(moved, None)
    }

    /// Moves to the next entry.
    #[expect(
        clippy::should_implement_trait,
        reason = "fallible, and a Cursor also moves backwards"
    )]
    pub fn next(&mut self) -> Result<Option<Entry<'a>>> {
        if self.scan_direction != Some(Ordering::Greater) {
            self.turn(Some(Ordering::Greater));
        }
        let moved = self.next_inner();
        self.settled(moved, Some(Ordering::Greater))
    }

    /// Moves to the previous entry.
    pub fn prev(&mut self) -> Result<Option<Entry<'a>>> {
        if self.scan_direction != Some(Ordering::Less) {
            self.turn(Some(Ordering::Less));
        }
        let moved = self.prev_inner();
        self.settled(moved, Some(Ordering::Less))
    }

    /// Starts counting a new scan's pages, in `direction` (`None`: a positioning move).
    #[inline]
    fn turn(&mut self, direction: Option<Ordering>) {
        self.scan_loads = 0;
        self.scan_direction = direction;
    }

    /// Loads child `index` of `level`, counting it against the move's page budget.
    #[inline]
    fn load_child(&mut self, level: Level<'a>, index: usize) -> Result<Level<'a>> {
        let child = self.view.child(level, index)?;
        // Edited nodes are the transaction's own and sound; only pages from the file count.
        if matches!(child, Level::Leaf(_) | Level::Branch(_)) {
            self.loads += 1;
            if self.loads > self.view.pages.high_water().0 + DEPTH_MAX as u64 {
                return Err(Corruption::new(
                    Pgid(0),
                    Reason::Other(
                        "a move loaded more pages than the file holds (shared or cyclic pages)",
                    ),
                ));
            }
        }
        Ok(child)
    }

    /// Checks a move: a step to another leaf must go strictly past the key returned before it
    /// (in a corrupt file it may not), and after any error the cursor starts over rather than
    /// sit on a half-built path.
    #[inline]
    fn settled(
        &mut self,
        moved: Result<Option<Entry<'a>>>,
        direction: Option<Ordering>,
    ) -> Result<Option<Entry<'a>>> {
        // A scan (the moves after positioning, one way) loads every page once at most: it
        // has gone round if it loaded more than the file holds. Counted when a move ends, so
        // that a move going round a cycle by itself ends in `TooDeep` first.
        self.scan_loads += std::mem::take(&mut self.loads);
        let scanned_round = direction.is_some()
            && self.scan_loads > self.view.pages.high_water().0
            && matches!(moved, Ok(Some(_)));
        let moved = if scanned_round {
            Err(Corruption::new(
                Pgid(0),
                Reason::Other("a scan loaded more pages than the file holds (cyclic pages)"),
            ))
        } else {
            moved
        };
        let crossed = std::mem::take(&mut self.crossed);
        let checked = match (moved, direction, self.last_key) {
            (Ok(Some(entry)), Some(direction), Some(last))
                if crossed && compare_keys(entry.key, last) != direction =>
            {
                // Keys out of order across pages: shared or cyclic pages in a corrupt file.
                Err(Corruption::new(Pgid(0), Reason::KeyOrder { index: 0 }))
            }
            (moved, _, _) => moved,
        };
        match &checked {
            Ok(Some(entry)) => self.last_key = Some(entry.key),
            // Off an end: the next move starts over from that end.
            Ok(None) => self.last_key = None,
            Err(_) => {
                self.stack.clear();
                self.state = State::Unpositioned;
                self.last_key = None;
            }
        }
        checked
    }

    fn first_inner(&mut self) -> Result<Option<Entry<'a>>> {
        self.stack.clear();
        let root = self.view.root_level()?;
        self.stack.push(ElemRef {
            level: root,
            index: 0,
        });
        self.descend_first()?;
        self.settle_forward()
    }

    /// Moves to the last entry.
    fn last_inner(&mut self) -> Result<Option<Entry<'a>>> {
        self.stack.clear();
        let root = self.view.root_level()?;
        let count = self.view.count(root);
        self.stack.push(ElemRef {
            level: root,
            index: count.saturating_sub(1),
        });
        self.descend_last()?;
        self.settle_backward()
    }

    /// Moves to the first entry whose key is not less than `key`.
    fn seek_inner(&mut self, key: &[u8]) -> Result<Option<Entry<'a>>> {
        self.stack.clear();
        let mut level = self.view.root_level()?;
        loop {
            if self.stack.len() >= DEPTH_MAX {
                return Err(too_deep());
            }
            if self.view.is_leaf(level) {
                let index = match level {
                    Level::Leaf(page) | Level::NodeLeaf(page) => lower_bound(&page, key)?,
                    Level::Branch(_) | Level::NodeBranch(_) => unreachable!(),
                };
                self.stack.push(ElemRef { level, index });
                break;
            }
            let index = if self.view.count(level) == 0 {
                0
            } else {
                self.view.child_index(level, key)?
            };
            self.stack.push(ElemRef { level, index });
            if self.view.count(level) == 0 {
                break;
            }
            level = self.load_child(level, index)?;
        }
        self.settle_forward()
    }

    /// Moves to the next entry.
    fn next_inner(&mut self) -> Result<Option<Entry<'a>>> {
        match self.state {
            State::Unpositioned | State::BeforeStart => self.first_inner(),
            State::AfterEnd => Ok(None),
            State::At => {
                if let Some(top) = self.stack.last_mut() {
                    top.index += 1;
                    // The common step: the next entry of the same leaf page.
                    if let Level::Leaf(page) | Level::NodeLeaf(page) = &top.level
                        && top.index < page.len()
                    {
                        return page.entry(top.index).map(Some);
                    }
                }
                self.settle_forward()
            }
        }
    }

    /// Moves to the previous entry.
    fn prev_inner(&mut self) -> Result<Option<Entry<'a>>> {
        match self.state {
            State::Unpositioned | State::AfterEnd => self.last_inner(),
            State::BeforeStart => Ok(None),
            State::At => {
                // The common step: the previous entry of the same leaf page.
                if let Some(top) = self.stack.last_mut()
                    && let Level::Leaf(page) | Level::NodeLeaf(page) = &top.level
                    && top.index > 0
                    && top.index <= page.len()
                {
                    top.index -= 1;
                    return page.entry(top.index).map(Some);
                }
                self.step_back()
            }
        }
    }

    /// The entry the cursor is on.
    pub fn current(&self) -> Result<Option<Entry<'a>>> {
        if self.state != State::At {
            return Ok(None);
        }
        let top = self.stack[self.stack.len() - 1];
        self.view.entry(top.level, top.index).map(Some)
    }

    /// The cursor's path from the root, for callers that edit what it points at.
    pub fn path(&self) -> &[ElemRef<'a>] {
        &self.stack
    }

    /// From a leaf index that may be past its leaf's end (or on an empty leaf), moves forward
    /// to the first real entry, or past the end.
    fn settle_forward(&mut self) -> Result<Option<Entry<'a>>> {
        loop {
            let top = self.stack[self.stack.len() - 1];
            if top.index < self.view.count(top.level) && self.view.is_leaf(top.level) {
                self.state = State::At;
                return self.view.entry(top.level, top.index).map(Some);
            }
            // Climb to the deepest level with a next element.
            self.crossed = true;
            loop {
                self.stack.pop();
                let Some(parent) = self.stack.last_mut() else {
                    self.state = State::AfterEnd;
                    return Ok(None);
                };
                if parent.index + 1 < self.view.count(parent.level) {
                    parent.index += 1;
                    break;
                }
            }
            self.descend_first()?;
        }
    }

    /// From the current element, moves back to the previous real entry, or before the start.
    fn step_back(&mut self) -> Result<Option<Entry<'a>>> {
        loop {
            // Climb to the deepest level with a previous element.
            loop {
                let Some(top) = self.stack.last_mut() else {
                    self.state = State::BeforeStart;
                    return Ok(None);
                };
                if top.index > 0 {
                    top.index -= 1;
                    break;
                }
                self.crossed = true;
                self.stack.pop();
            }
            self.descend_last()?;
            if let Some(entry) = self.settle_backward_once()? {
                return Ok(Some(entry));
            }
        }
    }

    /// After descending to a last element: the entry there, or keep stepping back over empty
    /// leaves.
    fn settle_backward(&mut self) -> Result<Option<Entry<'a>>> {
        if let Some(entry) = self.settle_backward_once()? {
            return Ok(Some(entry));
        }
        self.step_back()
    }

    fn settle_backward_once(&mut self) -> Result<Option<Entry<'a>>> {
        let top = self.stack[self.stack.len() - 1];
        if top.index < self.view.count(top.level) && self.view.is_leaf(top.level) {
            self.state = State::At;
            return self.view.entry(top.level, top.index).map(Some);
        }
        // An empty leaf (or empty branch): step back from it.
        if let Some(top) = self.stack.last_mut() {
            top.index = 0;
        }
        self.state = State::BeforeStart;
        Ok(None)
    }

    /// Descends from the top level's current element to the first leaf element below it.
    fn descend_first(&mut self) -> Result<()> {
        self.descend(End::First)
    }

    /// Descends from the top level's current element to the last leaf element below it.
    fn descend_last(&mut self) -> Result<()> {
        self.descend(End::Last)
    }

    /// Descends from the top level's current element to the leaf element at `end` below it.
    #[inline]
    fn descend(&mut self, end: End) -> Result<()> {
        loop {
            let top = self.stack[self.stack.len() - 1];
            if self.view.is_leaf(top.level) || self.view.count(top.level) == 0 {
                return Ok(());
            }
            if self.stack.len() >= DEPTH_MAX {
                return Err(too_deep());
            }
            let child = self.load_child(top.level, top.index)?;
            let index = match end {
                End::First => 0,
                End::Last => self.view.count(child).saturating_sub(1),
            };
            self.stack.push(ElemRef {
                level: child,
                index,
            });
        }
    }
}

/// Which end of a subtree a descent goes to.
#[derive(Clone, Copy)]
enum End {
    First,
    Last,
}
