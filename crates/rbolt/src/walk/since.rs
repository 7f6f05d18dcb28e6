//! The pages a newer meta reaches, found from an older one's by walking only what changed
//! between them: the open after a crash with commits made without syncs (`db/open.rs`), which
//! walked every page of the file (293 ms at 10M keys; issue 52).
//!
//! Copy-on-write makes it possible: a commit writes a page only at an id that was free, or
//! past the mark, in every meta a crash may bring back, and rewrites every page above a page
//! it writes. So a page of the newer tree that the older meta holds in use is the same page
//! with the same subtree in both, and the newer walk stops there ("kept"); what it walks are
//! the pages written since ("written"). The older walk then stops at kept pages and walks
//! the rest: the pages the commits since replaced ("replaced"). A subtree moved to another
//! parent without being rewritten (a merge of branches) is kept: the older walk finds it below
//! a replaced page.

use super::{Damage, PageAt, PageSet, PageWalk, Visitor, freelist_span};
use crate::error::{Error, Result};
use rbolt_btree::Pages;
use rbolt_freelist::{AnyFreelist, Freelist};
use rbolt_page::{Meta, Pgid};

/// What [`reachable_since`] found.
pub(crate) struct Since {
    /// Every page `newer` reaches (metas and freelist included), and perhaps pages the older
    /// meta held neither free nor reachable (a leak stays one).
    pub(crate) reachable: PageSet,
    /// The first pages of the extents written since the older meta that `newer` reaches,
    /// ascending.
    pub(crate) written: Vec<Pgid>,
}

/// The pages `newer` (over `pages`) reaches, from `older` (over `older_pages`), whose free and
/// pending pages are `free_before`, walking only what the commits between them changed.
pub(crate) fn reachable_since(
    pages: Pages<'_>,
    newer: &Meta,
    older_pages: Pages<'_>,
    older: &Meta,
    free_before: &AnyFreelist,
) -> Result<Since> {
    // The older meta's free and pending pages, one bit each: the walks ask of every child
    // of every page they enter.
    let mut free = PageSet::new(older.high_water());
    for pgid in free_before.free_ids().chain(free_before.pending().ids()) {
        free.insert(pgid.0);
    }
    let mut newer_side = Newer {
        older_mark: older.pgid,
        free: &free,
        written: Vec::new(),
        kept: PageSet::new(older.high_water()),
    };
    PageWalk::new(pages).tree(&mut newer_side, Pgid(0), newer.root_pgid(), ())?;
    let mut older_side = Older {
        kept: &newer_side.kept,
        replaced: Vec::new(),
    };
    PageWalk::new(older_pages).tree(&mut older_side, Pgid(0), older.root_pgid(), ())?;
    let mut reachable = PageSet::new(newer.high_water());
    // In use in the older meta: below its mark and not on its freelist (and below the newer
    // mark: nothing past it is reachable).
    reachable.fill_below(older.pgid.min(newer.pgid));
    for pgid in free.ids() {
        reachable.remove(pgid.0);
    }
    let older_freelist = freelist_span(older_pages, older)?;
    for (first, n_pages) in older_side.replaced.iter().copied().chain(older_freelist) {
        for id in first.0..first.0 + n_pages {
            reachable.remove(id);
        }
    }
    for (first, n_pages) in newer_side
        .written
        .iter()
        .copied()
        .chain(freelist_span(pages, newer)?)
    {
        for id in first.0..first.0 + n_pages {
            reachable.insert(id);
        }
    }
    reachable.insert(0);
    reachable.insert(1);
    let mut written: Vec<Pgid> = newer_side.written.iter().map(|&(first, _)| first).collect();
    written.sort_unstable();
    Ok(Since { reachable, written })
}

/// The newer tree's side: walks into the pages written since the older meta, stops at the
/// others without reading them.
struct Newer<'f> {
    older_mark: u64,
    free: &'f PageSet,
    written: Vec<(Pgid, u64)>,
    kept: PageSet,
}

impl<'a> Visitor<'a> for Newer<'_> {
    type Token = ();
    type Error = Error;

    fn damage(&mut self, damage: Damage) -> Result<()> {
        Err(damage.into())
    }

    fn skip(&mut self, pgid: Pgid, (): ()) -> bool {
        let written = pgid.0 >= self.older_mark || self.free.contains(pgid.0);
        if !written {
            self.kept.insert(pgid.0);
        }
        !written
    }

    fn page(&mut self, at: &PageAt<'a>, (): ()) -> Result<Option<()>> {
        let span = at.span();
        self.written
            .push((at.pgid(), span.end() - span.start() + 1));
        Ok(Some(()))
    }
}

/// The older tree's side: stops at the pages the newer tree kept (without reading them),
/// walks into the others.
struct Older<'k> {
    kept: &'k PageSet,
    replaced: Vec<(Pgid, u64)>,
}

impl<'a> Visitor<'a> for Older<'_> {
    type Token = ();
    type Error = Error;

    fn damage(&mut self, damage: Damage) -> Result<()> {
        Err(damage.into())
    }

    fn skip(&mut self, pgid: Pgid, (): ()) -> bool {
        self.kept.contains(pgid.0)
    }

    fn page(&mut self, at: &PageAt<'a>, (): ()) -> Result<Option<()>> {
        let span = at.span();
        self.replaced
            .push((at.pgid(), span.end() - span.start() + 1));
        Ok(Some(()))
    }
}
