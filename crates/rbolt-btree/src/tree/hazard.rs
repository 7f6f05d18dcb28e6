//! What Go bbolt's writer assumes of the pages it loads, beyond what its `Check` tests, and a
//! walk that finds where a committed tree breaks it.
//!
//! Go's writer finds a node in its parent by the node's first key as it was loaded
//! (`node.read` keeps `inodes[0].key`): spill puts the node's new page into the parent with
//! `parent.put(oldKey, ...)`, which replaces an element only on an exact key match and
//! otherwise inserts one, and rebalance removes a node with `parent.del(key)`, which does
//! nothing without an exact match. So a separator that is not byte-equal to its child's first
//! key makes Go insert a second separator for the child, or leave a pointer to a page it
//! freed. A leaf below a root with no entries has no first key to find it by, and a branch
//! with one child makes Go's rebalance assert ("parent must have at least 2 children"). An
//! inline bucket's page whose header names a page id is freed by that id when Go writes the
//! bucket out to pages. `docs/file-format.md` lists
//! every rule with where Go relies on it; this module is where rbolt tests them.

use crate::DEPTH_MAX;
use crate::node::Node;
use crate::node::arena::Arena;
use crate::pages::Pages;
use crate::tree::{Root, Tree, too_deep};
use rbolt_page::{
    BranchPage, BucketHeader, BucketValue, LeafPage, PageHeader, PageKind, PageRef, Pgid, Result,
};
use std::collections::HashSet;
use std::fmt;

/// One place where committed pages break an assumption Go bbolt's writer makes of the pages
/// it loads. Go bbolt reads such a file correctly and its `Check` passes it; its next write
/// there corrupts the file (or panics).
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum GoHazard {
    /// Element `index` of branch page `pgid` has the key `separator`, but the child page it
    /// points to starts with `first_key`.
    Separator {
        /// The branch page.
        pgid: Pgid,
        /// The element.
        index: usize,
        /// The child page.
        child: Pgid,
        /// The element's key.
        separator: Vec<u8>,
        /// The child page's first key.
        first_key: Vec<u8>,
    },
    /// Leaf page `pgid`, below its tree's root (element `index` of branch `parent`), holds no
    /// entries.
    EmptyPage {
        /// The empty page.
        pgid: Pgid,
        /// The branch pointing to it.
        parent: Pgid,
        /// The element of `parent` that does.
        index: usize,
    },
    /// Branch page `pgid` has a single child.
    LoneChild {
        /// The branch page.
        pgid: Pgid,
        /// Its only child.
        child: Pgid,
    },
    /// The inline bucket in element `index` of leaf page `pgid` has a page header naming page
    /// `id` (an inline page is page 0).
    InlinePageId {
        /// The leaf holding the bucket value.
        pgid: Pgid,
        /// The element.
        index: usize,
        /// The id in the inline page's header.
        id: u64,
    },
}

impl GoHazard {
    /// The page a write must touch to repair the hazard: the child a separator points to (its
    /// rewrite puts its first key in the parent), else the page itself.
    pub fn page_to_rewrite(&self) -> Pgid {
        match self {
            GoHazard::Separator { child, .. } => *child,
            other => other.pgid(),
        }
    }

    /// The page whose elements say what Go must not meet (the branch of a separator, the
    /// empty page itself, the leaf holding an inline bucket).
    pub fn pgid(&self) -> Pgid {
        match self {
            GoHazard::Separator { pgid, .. }
            | GoHazard::EmptyPage { pgid, .. }
            | GoHazard::LoneChild { pgid, .. }
            | GoHazard::InlinePageId { pgid, .. } => *pgid,
        }
    }
}

/// Lowercase hex of a key, shortened past 40 bytes (keys reach 32 KiB).
pub(crate) fn short_hex(key: &[u8]) -> String {
    const SHOWN_MAX: usize = 40;
    let mut text = String::with_capacity(2 * key.len().min(SHOWN_MAX) + 16);
    for byte in key.iter().take(SHOWN_MAX) {
        text.push_str(&format!("{byte:02x}"));
    }
    if key.len() > SHOWN_MAX {
        text.push_str(&format!("... ({} bytes)", key.len()));
    }
    text
}

impl fmt::Display for GoHazard {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GoHazard::Separator {
                pgid,
                index,
                child,
                separator,
                first_key,
            } => write!(
                f,
                "page {pgid}: element {index} has the key {} but its child page {child} starts \
                 with {}",
                short_hex(separator),
                short_hex(first_key)
            ),
            GoHazard::EmptyPage {
                pgid,
                parent,
                index,
            } => write!(
                f,
                "page {pgid}: an empty leaf below its tree's root (element {index} of page \
                 {parent})"
            ),
            GoHazard::LoneChild { pgid, child } => {
                write!(f, "page {pgid}: a branch with one child (page {child})")
            }
            GoHazard::InlinePageId { pgid, index, id } => write!(
                f,
                "page {pgid}: the inline bucket of element {index} has a page header naming \
                 page {id}, not 0"
            ),
        }
    }
}

/// The first key of a leaf or branch page, `None` when it has no elements.
pub fn first_key<'a>(page: &PageRef<'a>) -> Result<Option<&'a [u8]>> {
    match page.kind()? {
        PageKind::Leaf => {
            let leaf = page.leaf()?;
            if leaf.is_empty() {
                Ok(None)
            } else {
                leaf.key(0).map(Some)
            }
        }
        PageKind::Branch => {
            let branch = page.branch()?;
            if branch.is_empty() {
                Ok(None)
            } else {
                branch.key(0).map(Some)
            }
        }
        _ => Ok(None),
    }
}

/// What Go's writer needs of the child page `child` that element `index` of branch page
/// `branch` (with key `separator`) points to: a first key equal to the separator, and an
/// entry at least if it is a leaf (an empty branch is corrupt, not only a hazard: checks
/// report it as corruption).
pub fn child_hazard(
    branch: Pgid,
    index: usize,
    separator: &[u8],
    child: &PageRef<'_>,
) -> Result<Option<GoHazard>> {
    match first_key(child)? {
        Some(first) if first == separator => Ok(None),
        Some(first) => Ok(Some(GoHazard::Separator {
            pgid: branch,
            index,
            child: child.pgid(),
            separator: separator.to_vec(),
            first_key: first.to_vec(),
        })),
        None if child.kind()? == PageKind::Leaf => Ok(Some(GoHazard::EmptyPage {
            pgid: child.pgid(),
            parent: branch,
            index,
        })),
        None => Ok(None),
    }
}

/// What Go's writer needs of branch page `branch` itself: two children at least.
pub fn branch_hazard(branch: &BranchPage<'_>) -> Result<Option<GoHazard>> {
    if branch.len() != 1 {
        return Ok(None);
    }
    Ok(Some(GoHazard::LoneChild {
        pgid: branch.pgid(),
        child: branch.child(0)?,
    }))
}

/// What Go's writer needs of the inline bucket in element `index` of leaf page `pgid`, whose
/// value `value` holds an inline page: that page's header names page 0.
pub fn inline_hazard(pgid: Pgid, index: usize, value: &[u8]) -> Option<GoHazard> {
    let (_, page) = BucketHeader::split(value)?;
    let id = PageHeader::read(page)?.id;
    (id != 0).then_some(GoHazard::InlinePageId { pgid, index, id })
}

/// The hazards of the inline buckets of leaf page `leaf`.
fn leaf_hazards(leaf: &LeafPage<'_>, out: &mut Vec<GoHazard>) -> Result<()> {
    for index in 0..leaf.len() {
        let entry = leaf.entry(index)?;
        if entry.is_bucket()
            && BucketValue::parse(entry.value, leaf.pgid())?
                .inline
                .is_some()
        {
            out.extend(inline_hazard(leaf.pgid(), index, entry.value));
        }
    }
    Ok(())
}

/// Walks the committed tree at page `root` (one tree: the buckets nested in its leaves are
/// trees of their own) and appends every hazard for Go's writer to `out`. Iterative and
/// bounded by `DEPTH_MAX`; a page that does not decode ends the walk with its error.
pub fn tree_hazards(pages: Pages<'_>, root: Pgid, out: &mut Vec<GoHazard>) -> Result<()> {
    let mut stack: Vec<(Pgid, Pgid, usize)> = vec![(Pgid(0), root, 0)];
    while let Some((owner, pgid, depth)) = stack.pop() {
        if depth >= DEPTH_MAX {
            return Err(too_deep());
        }
        let page = PageRef::new(pages.page(owner, pgid)?, pgid)?;
        match page.kind()? {
            PageKind::Leaf => leaf_hazards(&page.leaf()?, out)?,
            PageKind::Branch => {
                let branch = page.branch()?;
                out.extend(branch_hazard(&branch)?);
                for index in (0..branch.len()).rev() {
                    let child_pgid = branch.child(index)?;
                    let child = PageRef::new(pages.page(pgid, child_pgid)?, child_pgid)?;
                    if let Some(hazard) = child_hazard(pgid, index, branch.key(index)?, &child)? {
                        out.push(hazard);
                    }
                    stack.push((pgid, child_pgid, depth + 1));
                }
            }
            _ => {
                return Err(rbolt_page::Corruption::new(
                    pgid,
                    rbolt_page::Reason::NotTreePage {
                        flags: page.header().flags,
                    },
                ));
            }
        }
    }
    Ok(())
}

/// Whether debug builds or the `verify` feature check images before they are written.
const VERIFY: bool = cfg!(any(debug_assertions, feature = "verify"));

/// What debug builds and the `verify` feature remember of the pages a tree loaded and wrote,
/// to check every branch image against Go's rules before it is written: each separator its
/// child's first key and two children at least, except where a page the tree loaded broke
/// the rule already (a file of an older rbolt version) and no edit reached that place. Empty,
/// and never filled, in other builds.
#[derive(Debug, Default)]
pub(crate) struct Verify {
    /// Children whose separator was not their first key in the branch page they were loaded
    /// with.
    inherited_stale: HashSet<u64>,
    /// A branch page with one child was loaded.
    inherited_lone: bool,
    /// The pages written by the spill under way: a branch's child among them was adopted
    /// with the first key it was written with (see `spill.rs`), nothing to read back.
    written: HashSet<u64>,
}

impl Verify {
    /// Notes what `node`, just copied from its page, breaks already.
    pub(crate) fn loaded(&mut self, pages: Pages<'_>, node: &Node) {
        if !VERIFY || node.is_leaf() {
            return;
        }
        self.inherited_lone |= node.count() == 1;
        for index in 0..node.count() {
            let child = Pgid(node.child(index));
            let first = pages
                .page(node.pgid, child)
                .and_then(|bytes| PageRef::new(bytes, child))
                .and_then(|page| first_key(&page).map(|key| key.map(<[u8]>::to_vec)));
            if !matches!(first, Ok(Some(first)) if first == node.key(index)) {
                self.inherited_stale.insert(child.0);
            }
        }
    }

    /// A spill begins: nothing of it is written yet.
    pub(crate) fn spill_begins(&mut self) {
        self.written.clear();
    }

    /// A node was written as page `pgid`.
    pub(crate) fn wrote(&mut self, pgid: Pgid) {
        if VERIFY {
            self.written.insert(pgid.0);
        }
    }

    /// Panics unless branch `node`, about to be written as page `pgid`, keeps Go's rules:
    /// every separator of a child that is a page of `pages` is that page's first key, and it
    /// has two children. (A child written by this spill took its separator from the page
    /// image written.)
    pub(crate) fn check_branch(&self, pages: Pages<'_>, node: &Node, pgid: Pgid) {
        if !VERIFY || node.is_leaf() {
            return;
        }
        assert!(
            node.count() >= 2 || self.inherited_lone,
            "branch page {pgid} about to be written has {} children (Go bbolt's writer needs two)",
            node.count()
        );
        for index in 0..node.count() {
            let child = node.child(index);
            let separator = node.key(index);
            if self.written.contains(&child) || self.inherited_stale.contains(&child) {
                continue;
            }
            let page = pages
                .page(pgid, Pgid(child))
                .and_then(|bytes| PageRef::new(bytes, Pgid(child)));
            let first = match page.and_then(|page| first_key(&page)) {
                Ok(Some(first)) => first,
                // An empty page (the file's own, which check reports) or one that does not
                // decode (an error where it is read): nothing to compare.
                _ => continue,
            };
            assert!(
                separator == first,
                "branch page {pgid} about to be written: element {index} has the key {} but its \
                 child page {child} starts with {} (Go bbolt's writer needs them equal)",
                short_hex(separator),
                short_hex(first)
            );
        }
    }
}

impl Tree {
    /// Makes nodes of every page of this committed tree that Go bbolt's writer could not
    /// continue (see the module documentation), and of the paths to them, so that the commit
    /// rewrites them by its rules: spill writes every separator of a node's child from the
    /// child's first key, rebalancing merges a branch with one child into a sibling and
    /// removes an empty leaf (nodes copied from such pages are marked for it), and an inline
    /// page is written as page 0. A branch with one child whose parent has one child too is
    /// left with one child until the next run. Returns the number of places found; 0 for a
    /// tree edited already (it is not walked).
    ///
    /// Reads every branch page of the tree and the first key of every page. On an error the
    /// tree is valid but may hold some of the paths (each unchanged): the caller rolls back.
    pub fn fix_separators(&mut self, pages: Pages<'_>, arena: &mut Arena) -> Result<usize> {
        let root = match &self.root {
            Root::Page(pgid) => *pgid,
            Root::Inline { pos, len } => {
                let start = *pos as usize;
                let page = &pages.data()[start..start + *len as usize];
                return self.fix_inline_page_id(PageHeader::read_id(page), pages, arena);
            }
            Root::InlineCopy(page) => {
                return self.fix_inline_page_id(PageHeader::read_id(page), pages, arena);
            }
            Root::New | Root::Node(_) => return Ok(0),
        };
        let routes = hazard_routes(pages, root)?;
        for route in &routes {
            let mut undo = self.undo_point();
            if let Err(error) = self.descend_mut(pages, arena, route, &mut undo) {
                self.undo(undo, arena);
                return Err(error);
            }
        }
        Ok(routes.len())
    }

    /// Touches an inline root whose page header's id (`id`, if the page holds one) names a
    /// page.
    fn fix_inline_page_id(
        &mut self,
        id: Option<u64>,
        pages: Pages<'_>,
        arena: &mut Arena,
    ) -> Result<usize> {
        if id.is_none_or(|id| id == 0) {
            return Ok(0);
        }
        self.touch(pages, arena)?;
        Ok(1)
    }
}

/// For every place in the committed tree at `root` that Go's writer could not continue, a key
/// whose descent reaches the page to rewrite: the page a separator points to, an empty leaf,
/// a branch with one child. A child after the first is reached by its separator (which a
/// branch copied from a page is checked to hold within its range), the first child by its
/// parent's route, the root by the empty key.
fn hazard_routes(pages: Pages<'_>, root: Pgid) -> Result<Vec<Vec<u8>>> {
    let mut routes = Vec::new();
    let mut stack: Vec<(Pgid, Pgid, usize, Vec<u8>)> = vec![(Pgid(0), root, 0, Vec::new())];
    while let Some((owner, pgid, depth, route)) = stack.pop() {
        if depth >= DEPTH_MAX {
            return Err(too_deep());
        }
        let page = PageRef::new(pages.page(owner, pgid)?, pgid)?;
        if page.kind()? != PageKind::Branch {
            continue;
        }
        let branch = page.branch()?;
        if branch_hazard(&branch)?.is_some() {
            routes.push(route.clone());
        }
        for index in 0..branch.len() {
            let child_pgid = branch.child(index)?;
            let child = PageRef::new(pages.page(pgid, child_pgid)?, child_pgid)?;
            let child_route = if index == 0 {
                route.clone()
            } else {
                branch.key(index)?.to_vec()
            };
            if child_hazard(pgid, index, branch.key(index)?, &child)?.is_some() {
                routes.push(child_route.clone());
            }
            if child.kind()? == PageKind::Branch {
                stack.push((pgid, child_pgid, depth + 1, child_route));
            }
        }
    }
    Ok(routes)
}
