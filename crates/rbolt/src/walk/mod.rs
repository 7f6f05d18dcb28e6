//! Walks over every page reachable from a meta: trees, nested buckets, overflow spans
//! (`reachable_pages`, `enter_page`, here). `page_set.rs`: `PageSet`, the bit set of pages a
//! walk reached. `buckets.rs`: the public [`Walk`], over a bucket's keys and the buckets
//! nested in it (through cursors, not pages), that copies, exports and dumps use.

mod buckets;
mod page_set;

pub use buckets::{Walk, WalkStep};
pub(crate) use page_set::PageSet;

use crate::error::Result;
use rbolt_btree::{DEPTH_MAX, Pages};
use rbolt_page::{BucketValue, Corruption, LeafPage, Meta, PageKind, PageRef, Pgid, Reason};

/// Every page reachable from `meta`'s root bucket and its freelist, the metas included.
/// A page reached twice is corruption.
pub(crate) fn reachable_pages(pages: Pages<'_>, meta: &Meta) -> Result<PageSet> {
    let mut set = PageSet::new(meta.high_water());
    set.insert(0);
    set.insert(1);
    if meta.has_freelist() {
        let span = pages.page(Pgid(0), meta.freelist_pgid())?;
        let header = PageRef::new(span, meta.freelist_pgid())?.header();
        for id in meta.freelist..=meta.freelist + u64::from(header.overflow) {
            set.insert(id);
        }
    }
    visit_tree(pages, Pgid(0), meta.root_pgid(), &mut set)?;
    Ok(set)
}

/// Enters page `pgid` of a tree walk (`owner` points at it, `depth` levels below the tree's
/// root): checks the depth, reads and marks the page and its overflow in `seen`. A page
/// marked before is corruption: in a sound file every page has one parent.
pub(crate) fn enter_page<'a>(
    pages: Pages<'a>,
    owner: Pgid,
    pgid: Pgid,
    depth: usize,
    seen: &mut PageSet,
) -> Result<PageRef<'a>> {
    if depth >= DEPTH_MAX {
        return Err(Corruption::new(
            pgid,
            Reason::TooDeep {
                depth_max: DEPTH_MAX,
            },
        )
        .into());
    }
    let page = PageRef::new(pages.page(owner, pgid)?, pgid)?;
    for id in pgid.0..=pgid.0 + u64::from(page.header().overflow) {
        if !seen.insert(id) {
            return Err(Corruption::new(Pgid(id), Reason::Other("page is reachable twice")).into());
        }
    }
    Ok(page)
}

/// The error for a tree page that is neither a branch nor a leaf.
pub(crate) fn not_a_tree_page(pgid: Pgid, kind: PageKind) -> crate::error::Error {
    Corruption::new(
        pgid,
        Reason::WrongKind {
            expected: PageKind::Leaf,
            flags: kind.flags(),
        },
    )
    .into()
}

/// A page to visit: who points at it, its id and its depth in its tree.
struct Visit {
    owner: Pgid,
    pgid: Pgid,
    depth: usize,
}

/// Visits every page of the tree at `root` and of the buckets nested in it, iteratively:
/// each page is entered once (a second visit is corruption), so the work is bounded by the
/// pages below the high-water mark however deep buckets nest.
fn visit_tree(pages: Pages<'_>, owner: Pgid, root: Pgid, set: &mut PageSet) -> Result<()> {
    let mut stack = vec![Visit {
        owner,
        pgid: root,
        depth: 0,
    }];
    while let Some(Visit { owner, pgid, depth }) = stack.pop() {
        let page = enter_page(pages, owner, pgid, depth, set)?;
        match page.kind()? {
            PageKind::Branch => {
                let branch = page.branch()?;
                for index in 0..branch.len() {
                    stack.push(Visit {
                        owner: pgid,
                        pgid: branch.child(index)?,
                        depth: depth + 1,
                    });
                }
            }
            PageKind::Leaf => push_buckets(&page.leaf()?, &mut stack)?,
            kind => return Err(not_a_tree_page(pgid, kind)),
        }
    }
    Ok(())
}

/// Queues the root pages of the buckets nested in `leaf` (through inline buckets too).
fn push_buckets(leaf: &LeafPage<'_>, stack: &mut Vec<Visit>) -> Result<()> {
    let mut inline_stack = vec![*leaf];
    while let Some(leaf) = inline_stack.pop() {
        for index in 0..leaf.len() {
            let entry = leaf.entry(index)?;
            if !entry.is_bucket() {
                continue;
            }
            let value = BucketValue::parse(entry.value, leaf.pgid())?;
            match value.inline {
                Some(inline) => inline_stack.push(inline),
                None => stack.push(Visit {
                    owner: leaf.pgid(),
                    pgid: value.header.root_pgid(),
                    depth: 0,
                }),
            }
        }
    }
    Ok(())
}
