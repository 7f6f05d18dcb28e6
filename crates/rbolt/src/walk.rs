//! Walks over every page reachable from a meta: trees, nested buckets, overflow spans.

use crate::bucket::BUCKET_DEPTH_MAX;
use crate::error::Result;
use rbolt_btree::{DEPTH_MAX, Pages};
use rbolt_page::{BucketValue, Corruption, LeafPage, Meta, PageKind, PageRef, Pgid, Reason};

/// A set of page ids below a high-water mark, one bit each.
#[derive(Clone, Debug)]
pub(crate) struct PageSet {
    bits: Vec<u64>,
}

impl PageSet {
    pub(crate) fn new(high_water: Pgid) -> PageSet {
        PageSet {
            bits: vec![0; (high_water.0 as usize).div_ceil(64)],
        }
    }

    /// Adds `pgid`; returns whether it was new. Ids past the high-water mark are ignored.
    pub(crate) fn insert(&mut self, pgid: u64) -> bool {
        let Some(word) = self.bits.get_mut((pgid / 64) as usize) else {
            return false;
        };
        let bit = 1u64 << (pgid % 64);
        let new = *word & bit == 0;
        *word |= bit;
        new
    }

    pub(crate) fn contains(&self, pgid: u64) -> bool {
        self.bits
            .get((pgid / 64) as usize)
            .is_some_and(|word| word & (1u64 << (pgid % 64)) != 0)
    }
}

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
    visit_tree(pages, Pgid(0), meta.root_pgid(), &mut set, 0, 0)?;
    Ok(set)
}

fn twice(pgid: Pgid) -> Corruption {
    Corruption::new(pgid, Reason::Other("page is reachable twice"))
}

fn visit_tree(
    pages: Pages<'_>,
    owner: Pgid,
    pgid: Pgid,
    set: &mut PageSet,
    depth: usize,
    bucket_depth: usize,
) -> Result<()> {
    if depth >= DEPTH_MAX {
        return Err(Corruption::new(
            pgid,
            Reason::TooDeep {
                depth_max: DEPTH_MAX,
            },
        )
        .into());
    }
    let span = pages.page(owner, pgid)?;
    let page = PageRef::new(span, pgid)?;
    for id in pgid.0..=pgid.0 + u64::from(page.header().overflow) {
        if !set.insert(id) {
            return Err(twice(Pgid(id)).into());
        }
    }
    match page.kind()? {
        PageKind::Branch => {
            let branch = page.branch()?;
            for index in 0..branch.len() {
                visit_tree(
                    pages,
                    pgid,
                    branch.child(index)?,
                    set,
                    depth + 1,
                    bucket_depth,
                )?;
            }
            Ok(())
        }
        PageKind::Leaf => visit_buckets(pages, &page.leaf()?, set, bucket_depth),
        kind => Err(Corruption::new(
            pgid,
            Reason::WrongKind {
                expected: PageKind::Leaf,
                flags: kind.flags(),
            },
        )
        .into()),
    }
}

fn visit_buckets(
    pages: Pages<'_>,
    leaf: &LeafPage<'_>,
    set: &mut PageSet,
    bucket_depth: usize,
) -> Result<()> {
    for index in 0..leaf.len() {
        let entry = leaf.entry(index)?;
        if !entry.is_bucket() {
            continue;
        }
        if bucket_depth >= BUCKET_DEPTH_MAX {
            return Err(crate::bucket::bucket_too_deep());
        }
        let value = BucketValue::parse(entry.value, leaf.pgid())?;
        match value.inline {
            Some(inline) => visit_buckets(pages, &inline, set, bucket_depth + 1)?,
            None => visit_tree(
                pages,
                leaf.pgid(),
                value.header.root_pgid(),
                set,
                0,
                bucket_depth + 1,
            )?,
        }
    }
    Ok(())
}
