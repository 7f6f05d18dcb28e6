//! Whole-file walks. `page_walk.rs`: the one page walker (`PageWalk`, and the `Visitor` it
//! calls back) that check (`check.rs`), bucket stats (`stats.rs`), the vacuum's planner
//! (`vacuum/plan.rs`) and the reachable-page set here walk the file's pages with.
//! `page_set.rs`: `PageSet`, the bit set of pages a walk reached. `since.rs`: the pages a
//! newer meta reaches, from an older one's, walking only what changed between them. `buckets.rs`: the public
//! [`Walk`], over a bucket's keys and the buckets nested in it (through cursors, not pages),
//! that copies, exports and dumps use.

mod buckets;
mod page_set;
mod page_walk;
mod since;

pub use buckets::{Walk, WalkStep};
pub(crate) use page_set::PageSet;
pub(crate) use page_walk::{Damage, EntryAt, PageAt, PageWalk, Visitor};
pub(crate) use since::reachable_since;

use crate::error::{Error, Result};
use rbolt_btree::Pages;
use rbolt_page::{Meta, PageRef, Pgid};

/// The freelist page of `meta` and its pages (with its overflow), if the file keeps one.
pub(crate) fn freelist_span(pages: Pages<'_>, meta: &Meta) -> Result<Option<(Pgid, u64)>> {
    if !meta.has_freelist() {
        return Ok(None);
    }
    let pgid = meta.freelist_pgid();
    let page = PageRef::new(pages.page(Pgid(0), pgid)?, pgid)?;
    Ok(Some((pgid, u64::from(page.header().overflow) + 1)))
}

/// Every page reachable from `meta`'s root bucket and its freelist, the metas included.
/// A page reached twice is corruption.
pub(crate) fn reachable_pages(pages: Pages<'_>, meta: &Meta) -> Result<PageSet> {
    let mut walk = PageWalk::new(pages);
    walk.mark(0);
    walk.mark(1);
    if let Some((pgid, n_pages)) = freelist_span(pages, meta)? {
        for id in pgid.0..pgid.0 + n_pages {
            walk.mark(id);
        }
    }
    walk.tree(&mut Reach, Pgid(0), meta.root_pgid(), ())?;
    Ok(walk.into_seen())
}

/// The visitor of `reachable_pages`: the walk marks what it reaches; the first damage ends it.
struct Reach;

impl Visitor<'_> for Reach {
    type Token = ();
    type Error = Error;

    fn damage(&mut self, damage: Damage) -> Result<()> {
        Err(damage.into())
    }
}

#[cfg(test)]
mod tests;
