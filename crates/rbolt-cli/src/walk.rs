//! Walks over the trees of a mapped snapshot: `check --from-page` (the subtree of one page, the
//! buckets below it included) and the set of reachable pages that `pages` needs when a file
//! keeps no freelist. The whole-file check is the database's own (`ReadTx::check`); this walk
//! reports the same kinds of problems with the same messages.

use crate::raw::RawPages;
use rbolt::CheckError;
use rbolt_page::{
    BucketValue, Corruption, FreelistPage, LeafPage, Meta, PageKind, PageRef, Pgid, Reason,
};

/// Deepest B+tree followed (as the database's own limit): deeper means a cycle.
const TREE_DEPTH_MAX: usize = 64;

/// A set of page ids below a high-water mark, one bit each: 1 Mi pages take 128 KiB.
#[derive(Clone, Debug)]
pub struct PageSet {
    bits: Vec<u64>,
}

impl PageSet {
    /// An empty set for pages below `high_water`.
    pub fn new(high_water: u64) -> PageSet {
        PageSet {
            bits: vec![0; high_water.div_ceil(64) as usize],
        }
    }

    /// Adds `pgid`; returns whether it was new. Ids past the end are ignored.
    pub fn insert(&mut self, pgid: u64) -> bool {
        let Some(word) = self.bits.get_mut((pgid / 64) as usize) else {
            return false;
        };
        let bit = 1u64 << (pgid % 64);
        let new = *word & bit == 0;
        *word |= bit;
        new
    }

    /// Whether `pgid` is in the set.
    pub fn contains(&self, pgid: u64) -> bool {
        self.bits
            .get((pgid / 64) as usize)
            .is_some_and(|word| word & (1u64 << (pgid % 64)) != 0)
    }
}

/// The walk's state: what was reached, what the freelist holds, what went wrong.
pub struct Walker<'a> {
    pages: RawPages<'a>,
    /// Pages reached so far, metas and the freelist's span included.
    pub reachable: PageSet,
    /// The ids the freelist page lists, when the file has one.
    pub freed: Option<PageSet>,
    /// Every problem found, in the order found.
    pub errors: Vec<CheckError>,
}

impl<'a> Walker<'a> {
    /// A walker over `pages` that knows `meta`'s freelist.
    pub fn new(pages: RawPages<'a>, meta: &Meta) -> Walker<'a> {
        let high_water = pages.high_water();
        let mut walker = Walker {
            pages,
            reachable: PageSet::new(high_water),
            freed: None,
            errors: Vec::new(),
        };
        walker.reachable.insert(0);
        walker.reachable.insert(1);
        if meta.has_freelist() {
            walker.load_freelist(meta.freelist_pgid());
        }
        walker
    }

    fn corrupt(&mut self, corruption: Corruption) {
        self.errors.push(CheckError::Corrupt(corruption));
    }

    fn load_freelist(&mut self, pgid: Pgid) {
        let span = match self.pages.span(Pgid(0), pgid) {
            Ok(span) => span,
            Err(e) => return self.corrupt(e),
        };
        let page = match FreelistPage::new(span, pgid) {
            Ok(page) => page,
            Err(e) => return self.corrupt(e),
        };
        let overflow = PageRef::new(span, pgid).map_or(0, |p| p.header().overflow);
        for id in pgid.0..=pgid.0 + u64::from(overflow) {
            self.reachable.insert(id);
        }
        let mut freed = PageSet::new(self.pages.high_water());
        for id in page.iter() {
            if id.0 < 2 || id.0 >= self.pages.high_water() {
                self.errors.push(CheckError::OutOfBounds {
                    pgid: id,
                    parent: pgid,
                });
            } else if !freed.insert(id.0) {
                self.errors.push(CheckError::AlreadyFreed { pgid: id });
            }
        }
        self.freed = Some(freed);
    }

    /// Walks the tree at `pgid` (referred to by `parent`), whose keys must lie in
    /// `low..high`, and every bucket below it.
    pub fn tree(
        &mut self,
        parent: Pgid,
        pgid: Pgid,
        low: Option<&[u8]>,
        high: Option<&[u8]>,
        depth: usize,
        bucket_depth: usize,
    ) {
        if depth >= TREE_DEPTH_MAX {
            return self.corrupt(Corruption::new(
                pgid,
                Reason::TooDeep {
                    depth_max: TREE_DEPTH_MAX,
                },
            ));
        }
        if pgid.0 < 2 || pgid.0 >= self.pages.high_water() {
            return self.errors.push(CheckError::OutOfBounds { pgid, parent });
        }
        let span = match self.pages.span(parent, pgid) {
            Ok(span) => span,
            Err(e) => return self.corrupt(e),
        };
        let page = match PageRef::new(span, pgid) {
            Ok(page) => page,
            Err(e) => return self.corrupt(e),
        };
        let header = page.header();
        for id in pgid.0..=pgid.0 + u64::from(header.overflow) {
            if !self.reachable.insert(id) {
                return self.errors.push(CheckError::MultipleReferences {
                    pgid: Pgid(id),
                    parent,
                });
            }
            if self.freed.as_ref().is_some_and(|f| f.contains(id)) {
                self.errors
                    .push(CheckError::ReachableFreed { pgid: Pgid(id) });
            }
        }
        match header.kind() {
            Some(PageKind::Branch) => {
                let branch = match page.branch() {
                    Ok(branch) => branch,
                    Err(e) => return self.corrupt(e),
                };
                if branch.is_empty() {
                    return self.corrupt(Corruption::new(pgid, Reason::Other("empty branch page")));
                }
                for index in 0..branch.len() {
                    let key = match branch.key(index) {
                        Ok(key) => key,
                        Err(e) => return self.corrupt(e),
                    };
                    let next = if index + 1 == branch.len() {
                        high
                    } else {
                        match branch.key(index + 1) {
                            Ok(next) => Some(next),
                            Err(e) => return self.corrupt(e),
                        }
                    };
                    if !in_range(key, low, high) || next.is_some_and(|n| n <= key) {
                        self.errors.push(CheckError::KeyOrder { pgid, index });
                    }
                    let child = match branch.child(index) {
                        Ok(child) => child,
                        Err(e) => return self.corrupt(e),
                    };
                    self.tree(pgid, child, Some(key), next, depth + 1, bucket_depth);
                }
            }
            Some(PageKind::Leaf) => match page.leaf() {
                Ok(leaf) => self.leaf(&leaf, low, high, bucket_depth),
                Err(e) => self.corrupt(e),
            },
            _ => self.errors.push(CheckError::InvalidType {
                pgid,
                flags: header.flags,
            }),
        }
    }

    fn leaf(
        &mut self,
        leaf: &LeafPage<'_>,
        low: Option<&[u8]>,
        high: Option<&[u8]>,
        bucket_depth: usize,
    ) {
        let pgid = leaf.pgid();
        let mut previous: Option<&[u8]> = None;
        for index in 0..leaf.len() {
            let entry = match leaf.entry(index) {
                Ok(entry) => entry,
                Err(e) => return self.corrupt(e),
            };
            if !in_range(entry.key, low, high) || previous.is_some_and(|p| p >= entry.key) {
                self.errors.push(CheckError::KeyOrder { pgid, index });
            }
            previous = Some(entry.key);
            if !entry.is_bucket() {
                continue;
            }
            if bucket_depth >= rbolt::BUCKET_DEPTH_MAX {
                return self.corrupt(Corruption::new(
                    pgid,
                    Reason::Other("buckets nest too deep"),
                ));
            }
            match BucketValue::parse(entry.value, pgid) {
                Err(e) => self.corrupt(e),
                Ok(BucketValue {
                    inline: Some(inline),
                    ..
                }) => self.leaf(&inline, None, None, bucket_depth + 1),
                Ok(value) => self.tree(
                    pgid,
                    value.header.root_pgid(),
                    None,
                    None,
                    0,
                    bucket_depth + 1,
                ),
            }
        }
    }
}

fn in_range(key: &[u8], low: Option<&[u8]>, high: Option<&[u8]>) -> bool {
    low.is_none_or(|low| key >= low) && high.is_none_or(|high| key < high)
}
