//! Consistency check of a snapshot: every page reachable exactly once, of the right kind, not
//! free; every page below the high-water mark reachable or free; keys in order within and
//! across pages; and what Go bbolt's writer assumes of every page it loads beyond what its own
//! check tests (each separator its child's first key, no empty leaf below a root, no branch
//! with one child, inline pages that name page 0). Reports every problem it finds rather than
//! stopping at the first. `WriteTx::fix_separators` repairs the last kind.

use crate::Result;
use crate::walk::{Damage, EntryAt, PageAt, PageSet, PageWalk, Visitor};
use rbolt_btree::{GoHazard, Pages};
use rbolt_page::{BucketValue, Corruption, FreelistPage, Meta, PageKind, PageRef, Pgid, Reason};
use std::convert::Infallible;
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
///     Ok::<_, rbolt::Error>(())
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
    /// A place where Go bbolt's writer corrupts the file (or panics) on its next write there,
    /// though rbolt and Go's readers read it correctly and Go's `Check` passes it: a separator
    /// that is not its child's first key, an empty leaf below a root, a branch with one child,
    /// an inline page that names a page (see [`GoHazard`] and
    /// [`CheckError::breaks_go_writer`]).
    BreaksGoWriter(GoHazard),
}

/// What every error that [`CheckError::breaks_go_writer`] says yes to means, in words.
const GO_WRITER_HAZARD: &str = "Go bbolt will corrupt this file on its next write here; run \
    `rbolt compact` or `rbolt surgery fix-separators`, or any rbolt write that touches page";

impl CheckError {
    /// Whether this is a place where Go bbolt's writer corrupts the file (or panics) on its
    /// next write there, though the file is sound for rbolt and for Go's readers: a
    /// separator that is not its child's first key, an empty leaf below a root, a branch
    /// with one child, an inline page that names a page. `docs/file-format.md` lists what Go's
    /// writer assumes. Any rbolt write that touches the page named in the message repairs
    /// it, and so do `rbolt compact` and `rbolt surgery fix-separators` (or
    /// [`WriteTx::fix_separators`](crate::WriteTx::fix_separators)) for a whole file.
    ///
    /// ```
    /// let error = rbolt::CheckError::BreaksGoWriter(rbolt::GoHazard::LoneChild {
    ///     pgid: rbolt::page::Pgid(7),
    ///     child: rbolt::page::Pgid(9),
    /// });
    /// assert!(error.breaks_go_writer());
    /// assert!(error.to_string().contains("Go bbolt will corrupt this file"));
    /// ```
    pub fn breaks_go_writer(&self) -> bool {
        matches!(self, CheckError::BreaksGoWriter(_))
    }
}

impl From<GoHazard> for CheckError {
    fn from(hazard: GoHazard) -> CheckError {
        CheckError::BreaksGoWriter(hazard)
    }
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
            CheckError::BreaksGoWriter(hazard) => {
                write!(
                    f,
                    "{hazard}: {GO_WRITER_HAZARD} {}",
                    hazard.page_to_rewrite()
                )
            }
        }
    }
}

impl std::error::Error for CheckError {}

/// The checker: the walk's visitor, which records every problem and lets the walk go on.
struct Checker {
    /// The pages the freelist lists, if the file keeps one.
    freed: Option<PageSet>,
    errors: Vec<CheckError>,
}

/// A walker over the snapshot of `meta` with the metas and the freelist's pages marked
/// reached, and a checker with the freelist (if the file keeps one) loaded.
fn start<'a>(pages: Pages<'a>, meta: &Meta) -> (PageWalk<'a>, Checker) {
    let mut walk = PageWalk::new(pages);
    let mut checker = Checker {
        freed: None,
        errors: Vec::new(),
    };
    walk.mark(0);
    walk.mark(1);
    if meta.has_freelist() {
        checker.load_freelist(&mut walk, pages, meta);
    }
    (walk, checker)
}

/// Checks the snapshot of `meta` read through `pages`.
pub(crate) fn check(pages: Pages<'_>, meta: &Meta) -> Vec<CheckError> {
    let (mut walk, mut checker) = start(pages, meta);
    let Ok(()) = walk.tree(&mut checker, Pgid(0), meta.root_pgid(), ());
    if let Some(freed) = &checker.freed {
        for pgid in 2..meta.high_water().0 {
            if !walk.seen().contains(pgid) && !freed.contains(pgid) {
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
    let (mut walk, mut checker) = start(pages, meta);
    let Ok(()) = walk.tree(&mut checker, Pgid(0), root, ());
    checker.errors
}

impl Checker {
    fn corrupt(&mut self, corruption: Corruption) {
        self.errors.push(CheckError::Corrupt(corruption));
    }

    fn freed(&self, pgid: u64) -> bool {
        self.freed.as_ref().is_some_and(|f| f.contains(pgid))
    }

    fn load_freelist(&mut self, walk: &mut PageWalk<'_>, pages: Pages<'_>, meta: &Meta) {
        let (pgid, high_water) = (meta.freelist_pgid(), meta.high_water());
        let span = match pages.page(Pgid(0), pgid) {
            Ok(span) => span,
            Err(e) => return self.corrupt(e),
        };
        let page = match FreelistPage::new(span, pgid) {
            Ok(page) => page,
            Err(e) => return self.corrupt(e),
        };
        let overflow = PageRef::new(span, pgid).map_or(0, |p| p.header().overflow);
        for id in pgid.0..=pgid.0 + u64::from(overflow) {
            walk.mark(id);
        }
        let mut freed = PageSet::new(high_water);
        for id in page.iter() {
            if id.0 < 2 || id >= high_water {
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

    /// What check asks of a branch page beyond what the walk does, before the walk goes
    /// below it: children, Go's writer's needs, keys in order within the page and within its
    /// range. Whether the walk goes on below it.
    fn branch_page(&mut self, at: &PageAt<'_>) -> bool {
        let pgid = at.pgid();
        let branch = match at.page.branch() {
            Ok(branch) => branch,
            Err(e) => {
                self.corrupt(e);
                return false;
            }
        };
        if branch.is_empty() {
            self.corrupt(Corruption::new(pgid, Reason::EmptyBranch));
            return false;
        }
        match rbolt_btree::branch_hazard(&branch) {
            Ok(hazard) => self.errors.extend(hazard.map(CheckError::from)),
            Err(e) => {
                self.corrupt(e);
                return false;
            }
        }
        for index in 0..branch.len() {
            let (key, next) = match at.range.child(&branch, index) {
                Ok(bounds) => bounds,
                Err(e) => {
                    self.corrupt(e);
                    return false;
                }
            };
            if !at.range.contains(key) || next.is_some_and(|n| n <= key) {
                self.errors.push(CheckError::KeyOrder { pgid, index });
            }
        }
        true
    }
}

impl<'a> Visitor<'a> for Checker {
    type Token = ();
    type Error = Infallible;
    const KEY_RANGES: bool = true;
    const ENTRIES: bool = true;

    fn damage(&mut self, damage: Damage) -> Result<(), Infallible> {
        match damage {
            Damage::OutOfBounds { pgid, owner, .. } => {
                self.errors.push(CheckError::OutOfBounds {
                    pgid,
                    parent: owner,
                });
            }
            Damage::ReachedTwice { pgid, owner, first } => {
                // The ids of the span before it were reached now: free ones are reported.
                for id in first.0..pgid.0 {
                    if self.freed(id) {
                        self.errors
                            .push(CheckError::ReachableFreed { pgid: Pgid(id) });
                    }
                }
                self.errors.push(CheckError::MultipleReferences {
                    pgid,
                    parent: owner,
                });
            }
            Damage::NotTreePage { pgid, flags } => {
                self.errors.push(CheckError::InvalidType { pgid, flags });
            }
            damage @ (Damage::TooDeep { .. } | Damage::Corrupt(_)) => self.corrupt(damage.into()),
        }
        Ok(())
    }

    fn page(&mut self, at: &PageAt<'a>, (): ()) -> Result<Option<()>, Infallible> {
        for id in at.span() {
            if self.freed(id) {
                self.errors
                    .push(CheckError::ReachableFreed { pgid: Pgid(id) });
            }
        }
        if let (Some(index), Some(separator)) = (at.slot, at.range.low) {
            match rbolt_btree::child_hazard(at.owner, index, separator, &at.page) {
                Ok(hazard) => self.errors.extend(hazard.map(CheckError::from)),
                Err(e) => {
                    self.corrupt(e);
                    return Ok(None);
                }
            }
        }
        let below = at.page.header().kind() != Some(PageKind::Branch) || self.branch_page(at);
        Ok(below.then_some(()))
    }

    // Inlined: it runs for every entry of the file.
    #[inline]
    fn entry(&mut self, at: &EntryAt<'a>, (): ()) -> Result<(), Infallible> {
        let key = at.entry.key;
        if !at.range.contains(key) || at.previous.is_some_and(|p| p >= key) {
            self.errors.push(CheckError::KeyOrder {
                pgid: at.pgid,
                index: at.index,
            });
        }
        Ok(())
    }

    fn bucket(
        &mut self,
        at: &EntryAt<'a>,
        value: &BucketValue<'a>,
        (): (),
    ) -> Result<Option<()>, Infallible> {
        if value.inline.is_some() {
            let hazard = rbolt_btree::inline_hazard(at.pgid, at.index, at.entry.value);
            self.errors.extend(hazard.map(CheckError::from));
        }
        Ok(Some(()))
    }
}
