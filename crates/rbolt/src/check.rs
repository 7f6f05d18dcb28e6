//! Consistency check of a snapshot: every page reachable exactly once, of the right kind, not
//! free; every page below the high-water mark reachable or free; keys in order within and
//! across pages. Reports every problem it finds rather than stopping at the first.

use crate::walk::PageSet;
use rbolt_btree::{DEPTH_MAX, Pages};
use rbolt_page::{
    BucketValue, Corruption, FreelistPage, LeafPage, Meta, PageKind, PageRef, Pgid, Reason,
};
use std::fmt;

/// One inconsistency `check` found.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("db");
/// let db = rbolt::Db::open(&path)?;
/// db.update(|tx| {
///     let mut b = tx.create_bucket("b")?;
///     for i in 0u32..2000 {
///         b.put(i.to_be_bytes(), [0u8; 64])?;
///     }
///     Ok(())
/// })?;
/// let (root, page_size) = (db.begin_read()?.bucket("b")?.unwrap().root(), db.page_size());
/// db.close()?;
/// // Damage the bucket's root page: its page header's flags (bytes 8..10) say no known kind.
/// let mut file = std::fs::read(&path).unwrap();
/// let at = root.0 as usize * page_size + 8;
/// file[at..at + 2].copy_from_slice(&0xEEEEu16.to_le_bytes());
/// std::fs::write(&path, &file).unwrap();
/// let db = rbolt::Db::open_with(&path, rbolt::Options::default().read_only(true))?;
/// let errors = db.begin_read()?.check();
/// let expected = rbolt::CheckError::InvalidType { pgid: root, flags: 0xEEEE };
/// assert!(errors.contains(&expected), "{errors:?}");
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum CheckError {
    /// A page id at or past the high-water mark (or a meta page) is referenced.
    OutOfBounds {
        /// The id referenced.
        pgid: Pgid,
        /// The page referring to it (0 for a bucket's root reference from a meta).
        parent: Pgid,
    },
    /// A page is reachable along two paths.
    MultipleReferences {
        /// The page.
        pgid: Pgid,
        /// The second page referring to it.
        parent: Pgid,
    },
    /// A reachable page is on the freelist.
    ReachableFreed {
        /// The page.
        pgid: Pgid,
    },
    /// A page below the high-water mark is neither reachable nor free (a leak).
    UnreachableUnfreed {
        /// The page.
        pgid: Pgid,
    },
    /// A page on the freelist twice.
    AlreadyFreed {
        /// The page.
        pgid: Pgid,
    },
    /// A tree page that is not a branch or leaf page.
    InvalidType {
        /// The page.
        pgid: Pgid,
        /// Its header flags.
        flags: u16,
    },
    /// A key out of order: within a page, or outside the range its parent gives it.
    KeyOrder {
        /// The page.
        pgid: Pgid,
        /// The element index.
        index: usize,
    },
    /// Bytes that do not decode.
    Corrupt(Corruption),
}

impl fmt::Display for CheckError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            CheckError::OutOfBounds { pgid, parent } => {
                write!(f, "page {pgid}: out of bounds (parent={parent})")
            }
            CheckError::MultipleReferences { pgid, parent } => {
                write!(f, "page {pgid}: multiple references (parent={parent})")
            }
            CheckError::ReachableFreed { pgid } => write!(f, "page {pgid}: reachable freed"),
            CheckError::UnreachableUnfreed { pgid } => {
                write!(f, "page {pgid}: unreachable unfreed")
            }
            CheckError::AlreadyFreed { pgid } => write!(f, "page {pgid}: already freed"),
            CheckError::InvalidType { pgid, flags } => match PageKind::from_flags(*flags) {
                Some(kind) => write!(f, "page {pgid}: invalid type: {kind}"),
                None => write!(f, "page {pgid}: invalid type: unknown<{flags:02x}>"),
            },
            CheckError::KeyOrder { pgid, index } => write!(
                f,
                "page {pgid}: key {index} is out of order within the page or its parent's range"
            ),
            CheckError::Corrupt(corruption) => write!(f, "{corruption}"),
        }
    }
}

impl std::error::Error for CheckError {}

struct Checker<'a> {
    pages: Pages<'a>,
    high_water: Pgid,
    reachable: PageSet,
    freed: Option<PageSet>,
    errors: Vec<CheckError>,
}

impl<'a> Checker<'a> {
    /// A checker of the snapshot of `meta`, with the metas marked reachable and the freelist
    /// (if the file keeps one) loaded.
    fn new(pages: Pages<'a>, meta: &Meta) -> Checker<'a> {
        let high_water = meta.high_water();
        let mut checker = Checker {
            pages,
            high_water,
            reachable: PageSet::new(high_water),
            freed: None,
            errors: Vec::new(),
        };
        checker.reachable.insert(0);
        checker.reachable.insert(1);
        if meta.has_freelist() {
            checker.load_freelist(meta.freelist_pgid());
        }
        checker
    }
}

/// Checks the snapshot of `meta` read through `pages`.
pub(crate) fn check(pages: Pages<'_>, meta: &Meta) -> Vec<CheckError> {
    let high_water = meta.high_water();
    let mut checker = Checker::new(pages, meta);
    checker.tree(Pgid(0), meta.root_pgid(), None, None);
    if let Some(freed) = &checker.freed {
        for pgid in 2..high_water.0 {
            if !checker.reachable.contains(pgid) && !freed.contains(pgid) {
                checker
                    .errors
                    .push(CheckError::UnreachableUnfreed { pgid: Pgid(pgid) });
            }
        }
    }
    checker.errors
}

/// Checks the tree at page `root` of the snapshot of `meta` and every bucket below it, as
/// `check` does, without the whole-file test for unreachable pages (bbolt's
/// `check --from-page`).
pub(crate) fn check_from(pages: Pages<'_>, meta: &Meta, root: Pgid) -> Vec<CheckError> {
    let mut checker = Checker::new(pages, meta);
    checker.tree(Pgid(0), root, None, None);
    checker.errors
}

impl Checker<'_> {
    fn corrupt(&mut self, corruption: Corruption) {
        self.errors.push(CheckError::Corrupt(corruption));
    }

    fn load_freelist(&mut self, pgid: Pgid) {
        let span = match self.pages.page(Pgid(0), pgid) {
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
        let mut freed = PageSet::new(self.high_water);
        for id in page.iter() {
            if id.0 < 2 || id >= self.high_water {
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

    /// Checks the tree at `pgid` whose keys must lie in `low..high`, and every bucket nested
    /// in it. Iterative, with an explicit stack: the work is bounded by the pages reachable
    /// (each is entered once), however deep buckets nest.
    fn tree<'a>(&mut self, parent: Pgid, pgid: Pgid, low: Option<&'a [u8]>, high: Option<&'a [u8]>)
    where
        Self: 'a,
    {
        let mut stack: Vec<Visit<'a>> = vec![Visit::Page {
            parent,
            pgid,
            low,
            high,
            depth: 0,
        }];
        while let Some(visit) = stack.pop() {
            match visit {
                Visit::Page {
                    parent,
                    pgid,
                    low,
                    high,
                    depth,
                } => self.page(&mut stack, parent, pgid, low, high, depth),
                Visit::Leaf { leaf, low, high } => self.leaf(&mut stack, &leaf, low, high),
            }
        }
    }

    fn page<'a>(
        &mut self,
        stack: &mut Vec<Visit<'a>>,
        parent: Pgid,
        pgid: Pgid,
        low: Option<&'a [u8]>,
        high: Option<&'a [u8]>,
        depth: usize,
    ) where
        Self: 'a,
    {
        if depth >= DEPTH_MAX {
            return self.corrupt(Corruption::new(
                pgid,
                Reason::TooDeep {
                    depth_max: DEPTH_MAX,
                },
            ));
        }
        if pgid.0 < 2 || pgid >= self.high_water {
            return self.errors.push(CheckError::OutOfBounds { pgid, parent });
        }
        let pages: Pages<'a> = self.pages;
        let span = match pages.page(parent, pgid) {
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
                self.errors.push(CheckError::MultipleReferences {
                    pgid: Pgid(id),
                    parent,
                });
                return;
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
                let mut children = Vec::with_capacity(branch.len());
                for index in 0..branch.len() {
                    let (key, next) = match (branch.key(index), branch.key(index + 1)) {
                        (Ok(key), Ok(next)) => (key, Some(next)),
                        (Ok(key), Err(_)) if index + 1 == branch.len() => (key, high),
                        (Err(e), _) | (_, Err(e)) => return self.corrupt(e),
                    };
                    if !in_range(key, low, high) || next.is_some_and(|n| n <= key) {
                        self.errors.push(CheckError::KeyOrder { pgid, index });
                    }
                    let child = match branch.child(index) {
                        Ok(child) => child,
                        Err(e) => return self.corrupt(e),
                    };
                    children.push(Visit::Page {
                        parent: pgid,
                        pgid: child,
                        low: Some(key),
                        high: next,
                        depth: depth + 1,
                    });
                }
                // Popped in key order.
                stack.extend(children.into_iter().rev());
            }
            Some(PageKind::Leaf) => match page.leaf() {
                Ok(leaf) => stack.push(Visit::Leaf { leaf, low, high }),
                Err(e) => self.corrupt(e),
            },
            _ => self.errors.push(CheckError::InvalidType {
                pgid,
                flags: header.flags,
            }),
        }
    }

    fn leaf<'a>(
        &mut self,
        stack: &mut Vec<Visit<'a>>,
        leaf: &LeafPage<'a>,
        low: Option<&'a [u8]>,
        high: Option<&'a [u8]>,
    ) {
        let pgid = leaf.pgid();
        let mut previous: Option<&[u8]> = None;
        let mut nested = Vec::new();
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
            match BucketValue::parse(entry.value, pgid) {
                Err(e) => self.corrupt(e),
                Ok(BucketValue {
                    inline: Some(inline),
                    ..
                }) => nested.push(Visit::Leaf {
                    leaf: inline,
                    low: None,
                    high: None,
                }),
                Ok(value) => nested.push(Visit::Page {
                    parent: pgid,
                    pgid: value.header.root_pgid(),
                    low: None,
                    high: None,
                    depth: 0,
                }),
            }
        }
        stack.extend(nested.into_iter().rev());
    }
}

/// Work left for the checker: a page to enter, or a leaf's entries to check.
enum Visit<'a> {
    Page {
        parent: Pgid,
        pgid: Pgid,
        low: Option<&'a [u8]>,
        high: Option<&'a [u8]>,
        depth: usize,
    },
    Leaf {
        leaf: LeafPage<'a>,
        low: Option<&'a [u8]>,
        high: Option<&'a [u8]>,
    },
}

fn in_range(key: &[u8], low: Option<&[u8]>, high: Option<&[u8]>) -> bool {
    low.is_none_or(|low| key >= low) && high.is_none_or(|high| key < high)
}
