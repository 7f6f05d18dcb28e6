//! The page walker: one iterative depth-first walk, in key order, over every page a tree
//! reaches — branch and leaf pages with their overflow, and the buckets nested in its leaves,
//! inline ones and those with root pages of their own — that check, stats, the reachable-page
//! set and the vacuum's planner share. Each of them is a [`Visitor`]: the walk reads and
//! checks the pages and calls it back; the visitor counts, checks more, or collects.
//!
//! The walk is bounded on any input: it keeps its own stack (no recursion), a tree deeper
//! than `DEPTH_MAX` below its root is damage, and every page is entered once at most — a page
//! reached a second time is damage (in a sound file every page has one parent) — so a cycle,
//! a shared page or a bucket pointing back at an ancestor ends where it starts, and the work
//! is bounded by the pages below the high-water mark however deep buckets nest. What it finds
//! wrong it hands to [`Visitor::damage`] as a [`Damage`], and walks on past the part that is
//! damaged unless the visitor stops it: check records each and goes on, the others stop at
//! the first with its error.

use super::PageSet;
use crate::error::Error;
use rbolt_btree::{DEPTH_MAX, Pages};
use rbolt_page::{
    BranchPage, BucketValue, Corruption, LeafEntry, LeafPage, PageKind, PageRef, Pgid, Reason,
};

/// The keys a page may hold, from `low` (included) to `high` (excluded); `None` is no limit.
/// A branch's element gives its child the range from its own key to the next element's.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct KeyRange<'a> {
    pub(crate) low: Option<&'a [u8]>,
    pub(crate) high: Option<&'a [u8]>,
}

impl<'a> KeyRange<'a> {
    /// No limit: a tree's root.
    pub(crate) const ALL: KeyRange<'static> = KeyRange {
        low: None,
        high: None,
    };

    #[inline]
    pub(crate) fn contains(&self, key: &[u8]) -> bool {
        self.low.is_none_or(|low| key >= low) && self.high.is_none_or(|high| key < high)
    }

    /// The key of element `index` of `branch` and the end of its child's range: the next
    /// element's key, or for the last element the end of `self`, the branch's own range.
    #[inline]
    pub(crate) fn child(
        &self,
        branch: &BranchPage<'a>,
        index: usize,
    ) -> Result<(&'a [u8], Option<&'a [u8]>), Corruption> {
        match (branch.key(index), branch.key(index + 1)) {
            (Ok(key), Ok(next)) => Ok((key, Some(next))),
            (Ok(key), Err(_)) if index + 1 == branch.len() => Ok((key, self.high)),
            (Err(e), _) | (_, Err(e)) => Err(e),
        }
    }
}

/// A tree page the walk entered: below the high-water mark, its header read and checked, its
/// span (the page and its overflow) marked reached; its kind not read yet.
#[derive(Clone, Copy, Debug)]
pub(crate) struct PageAt<'a> {
    pub(crate) page: PageRef<'a>,
    /// The page that points at it: its parent branch, or the leaf whose bucket value names it
    /// as the bucket's root, or for the walk's root the owner the caller gave.
    pub(crate) owner: Pgid,
    /// Its element's index in `owner` when `owner` is its parent branch.
    pub(crate) slot: Option<usize>,
    /// Levels below its tree's root (each nested bucket's tree starts at 0).
    pub(crate) depth: usize,
    /// The keys it may hold, if the visitor asked for ranges ([`Visitor::KEY_RANGES`]); a
    /// tree's root and every page of a visitor that did not ask: [`KeyRange::ALL`].
    pub(crate) range: KeyRange<'a>,
}

impl PageAt<'_> {
    pub(crate) fn pgid(&self) -> Pgid {
        self.page.pgid()
    }

    /// The ids of its span: the page and its overflow pages.
    pub(crate) fn span(&self) -> std::ops::RangeInclusive<u64> {
        let pgid = self.page.pgid().0;
        pgid..=pgid + u64::from(self.page.header().overflow)
    }
}

/// An entry of a leaf the walk reads: of a leaf page, or of a bucket's inline page.
#[derive(Clone, Copy, Debug)]
pub(crate) struct EntryAt<'a> {
    /// The leaf page (for an inline page, the page holding its bucket value).
    pub(crate) pgid: Pgid,
    pub(crate) index: usize,
    pub(crate) entry: LeafEntry<'a>,
    /// The key of the entry before it in the same leaf.
    pub(crate) previous: Option<&'a [u8]>,
    /// The keys the leaf may hold (as [`PageAt::range`]; [`KeyRange::ALL`] in an inline page).
    pub(crate) range: KeyRange<'a>,
}

/// What the walk found wrong. The part of the tree below it is not walked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Damage {
    /// Page `pgid` is `DEPTH_MAX` levels or more below its tree's root.
    TooDeep { pgid: Pgid },
    /// Page `owner` points at `pgid`, a meta page or one at or past the high-water mark.
    OutOfBounds {
        pgid: Pgid,
        owner: Pgid,
        high_water: Pgid,
    },
    /// Page `owner` points at the span starting at `first`, whose page `pgid` the walk had
    /// reached before (the ids of the span before `pgid` are marked reached now).
    ReachedTwice {
        pgid: Pgid,
        owner: Pgid,
        first: Pgid,
    },
    /// A tree page that is neither a branch nor a leaf: its header's flags.
    NotTreePage { pgid: Pgid, flags: u16 },
    /// Bytes that do not decode: a page header, a page's elements, a bucket value.
    Corrupt(Corruption),
}

impl From<Damage> for Corruption {
    /// The corruption each damage is for every user but check, which reports it in its own
    /// terms (`CheckError`): what reading the page for a tree finds.
    fn from(damage: Damage) -> Corruption {
        match damage {
            Damage::TooDeep { pgid } => Corruption::new(
                pgid,
                Reason::TooDeep {
                    depth_max: DEPTH_MAX,
                },
            ),
            Damage::OutOfBounds {
                pgid,
                owner,
                high_water,
            } => Corruption::new(
                owner,
                Reason::PgidOutOfBounds {
                    what: "child",
                    pgid: pgid.0,
                    high_water: high_water.0,
                },
            ),
            Damage::ReachedTwice { pgid, .. } => Corruption::new(pgid, Reason::ReachableTwice),
            Damage::NotTreePage { pgid, flags } => match PageKind::from_flags(flags) {
                Some(kind) => Corruption::new(
                    pgid,
                    Reason::WrongKind {
                        expected: PageKind::Leaf,
                        flags: kind.flags(),
                    },
                ),
                None => Corruption::new(pgid, Reason::UnknownFlags(flags)),
            },
            Damage::Corrupt(corruption) => corruption,
        }
    }
}

impl From<Damage> for Error {
    fn from(damage: Damage) -> Error {
        Corruption::from(damage).into()
    }
}

/// What a walk calls back. Every method but `damage` has a default that lets the walk go on.
/// `Token` is what a visitor carries from a page down to what hangs below it (its children,
/// its entries, the buckets in them): an index of its own, the bucket a page belongs to.
pub(crate) trait Visitor<'a> {
    type Token: Copy;
    type Error;
    /// Whether the walk works out each page's [`KeyRange`] (it reads each branch's keys).
    const KEY_RANGES: bool = false;
    /// Whether the walk calls [`Visitor::entry`] (for every entry of every leaf).
    const ENTRIES: bool = false;

    /// Damage found: `Err` ends the walk with it; `Ok` walks on past it.
    fn damage(&mut self, damage: Damage) -> Result<(), Self::Error>;

    /// A tree page about to be entered (a branch's child, a bucket's root), within the
    /// file's bounds: `true` leaves it out of the walk unread — not checked, not marked as
    /// reached, nothing below it walked. For walks that decide by the id alone, without the
    /// cost of reading the page.
    fn skip(&mut self, _pgid: Pgid, _token: Self::Token) -> bool {
        false
    }

    /// A tree page entered, before its kind is read: returns the token for what hangs below
    /// it, or `None` to leave it there (its kind unread, nothing below it walked).
    fn page(
        &mut self,
        _at: &PageAt<'a>,
        token: Self::Token,
    ) -> Result<Option<Self::Token>, Self::Error> {
        Ok(Some(token))
    }

    /// A branch page, once its children are queued (none is walked yet).
    fn branch(
        &mut self,
        _at: &PageAt<'a>,
        _branch: &BranchPage<'a>,
        _token: Self::Token,
    ) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A leaf page, once its entries are visited (the buckets in them are queued, none is
    /// walked yet).
    fn leaf(
        &mut self,
        _at: &PageAt<'a>,
        _leaf: &LeafPage<'a>,
        _token: Self::Token,
    ) -> Result<(), Self::Error> {
        Ok(())
    }

    /// An entry of a leaf page or an inline page, in key order, if [`Visitor::ENTRIES`].
    fn entry(&mut self, _at: &EntryAt<'a>, _token: Self::Token) -> Result<(), Self::Error> {
        Ok(())
    }

    /// A nested bucket whose value decodes: returns the token for its tree, or `None` to
    /// leave it out of the walk.
    fn bucket(
        &mut self,
        _at: &EntryAt<'a>,
        _value: &BucketValue<'a>,
        token: Self::Token,
    ) -> Result<Option<Self::Token>, Self::Error> {
        Ok(Some(token))
    }
}

/// A reference the walk has yet to follow.
enum Pending<'a, T> {
    /// A tree page: a branch's child or a bucket's root.
    Page(PendingPage<'a, T>),
    /// A bucket's inline page.
    Inline { leaf: LeafPage<'a>, token: T },
}

/// A tree page the walk has yet to enter: what [`PageAt`] will say of it.
struct PendingPage<'a, T> {
    owner: Pgid,
    pgid: Pgid,
    slot: Option<usize>,
    depth: usize,
    range: KeyRange<'a>,
    token: T,
}

/// The walker: the pages it reads, and the set of pages it has reached, which one walk's
/// trees share (so a page two trees reach is reached twice) and which outlives the walks.
pub(crate) struct PageWalk<'a> {
    pages: Pages<'a>,
    seen: PageSet,
}

impl<'a> PageWalk<'a> {
    /// A walker over `pages` that has reached nothing yet.
    pub(crate) fn new(pages: Pages<'a>) -> PageWalk<'a> {
        PageWalk {
            pages,
            seen: PageSet::new(pages.high_water()),
        }
    }

    /// Marks page `pgid` reached, for pages that are not in a tree (the metas, the freelist).
    pub(crate) fn mark(&mut self, pgid: u64) {
        self.seen.insert(pgid);
    }

    /// The pages reached so far.
    pub(crate) fn seen(&self) -> &PageSet {
        &self.seen
    }

    pub(crate) fn into_seen(self) -> PageSet {
        self.seen
    }

    /// Walks the tree at page `root`, which page `owner` points at, and every bucket nested in
    /// it, depth first in key order (a nested bucket right after the leaf that holds it),
    /// calling `visitor` back with `token` for the root.
    pub(crate) fn tree<V: Visitor<'a>>(
        &mut self,
        visitor: &mut V,
        owner: Pgid,
        root: Pgid,
        token: V::Token,
    ) -> Result<(), V::Error> {
        let mut stack = vec![Pending::Page(PendingPage {
            owner,
            pgid: root,
            slot: None,
            depth: 0,
            range: KeyRange::ALL,
            token,
        })];
        while let Some(pending) = stack.pop() {
            match pending {
                Pending::Page(page) => self.enter(visitor, &mut stack, page)?,
                Pending::Inline { leaf, token } => {
                    entries(visitor, &mut stack, &leaf, KeyRange::ALL, token)?;
                }
            }
        }
        Ok(())
    }

    /// Enters page `pgid`: checks its depth and id, reads its header, marks its span, and
    /// hands it to the visitor, then queues what hangs below it.
    fn enter<V: Visitor<'a>>(
        &mut self,
        visitor: &mut V,
        stack: &mut Vec<Pending<'a, V::Token>>,
        pending: PendingPage<'a, V::Token>,
    ) -> Result<(), V::Error> {
        let PendingPage {
            owner,
            pgid,
            slot,
            depth,
            range,
            token,
        } = pending;
        if depth >= DEPTH_MAX {
            return visitor.damage(Damage::TooDeep { pgid });
        }
        let high_water = self.pages.high_water();
        if pgid.0 < 2 || pgid >= high_water {
            return visitor.damage(Damage::OutOfBounds {
                pgid,
                owner,
                high_water,
            });
        }
        if visitor.skip(pgid, token) {
            return Ok(());
        }
        let page = match self
            .pages
            .page(owner, pgid)
            .and_then(|span| PageRef::new(span, pgid))
        {
            Ok(page) => page,
            Err(e) => return visitor.damage(Damage::Corrupt(e)),
        };
        let header = page.header();
        // Below the high-water mark: `Pages::page` checked the overflow.
        for id in pgid.0..=pgid.0 + u64::from(header.overflow) {
            if !self.seen.insert(id) {
                return visitor.damage(Damage::ReachedTwice {
                    pgid: Pgid(id),
                    owner,
                    first: pgid,
                });
            }
        }
        let at = PageAt {
            page,
            owner,
            slot,
            depth,
            range,
        };
        let Some(token) = visitor.page(&at, token)? else {
            return Ok(());
        };
        match header.kind() {
            Some(PageKind::Branch) => {
                let branch = match page.branch() {
                    Ok(branch) => branch,
                    Err(e) => return visitor.damage(Damage::Corrupt(e)),
                };
                let queued = stack.len();
                for index in 0..branch.len() {
                    let child = branch.child(index).and_then(|child| {
                        if !V::KEY_RANGES {
                            return Ok((child, KeyRange::ALL));
                        }
                        let (low, high) = range.child(&branch, index)?;
                        Ok((
                            child,
                            KeyRange {
                                low: Some(low),
                                high,
                            },
                        ))
                    });
                    let (child, range) = match child {
                        Ok(child) => child,
                        Err(e) => {
                            stack.truncate(queued);
                            return visitor.damage(Damage::Corrupt(e));
                        }
                    };
                    stack.push(Pending::Page(PendingPage {
                        owner: pgid,
                        pgid: child,
                        slot: Some(index),
                        depth: depth + 1,
                        range,
                        token,
                    }));
                }
                // Popped in key order.
                stack[queued..].reverse();
                visitor.branch(&at, &branch, token)
            }
            Some(PageKind::Leaf) => {
                let leaf = match page.leaf() {
                    Ok(leaf) => leaf,
                    Err(e) => return visitor.damage(Damage::Corrupt(e)),
                };
                if entries(visitor, stack, &leaf, range, token)? {
                    visitor.leaf(&at, &leaf, token)?;
                }
                Ok(())
            }
            _ => visitor.damage(Damage::NotTreePage {
                pgid,
                flags: header.flags,
            }),
        }
    }
}

/// Visits the entries of `leaf` (a page's, or an inline page's) in order and queues the
/// buckets in them, to be walked in key order. Returns whether every entry decoded: an entry
/// that does not ends the leaf, and none of its buckets is walked.
fn entries<'a, V: Visitor<'a>>(
    visitor: &mut V,
    stack: &mut Vec<Pending<'a, V::Token>>,
    leaf: &LeafPage<'a>,
    range: KeyRange<'a>,
    token: V::Token,
) -> Result<bool, V::Error> {
    let queued = stack.len();
    let mut previous = None;
    for index in 0..leaf.len() {
        let entry = match leaf.entry(index) {
            Ok(entry) => entry,
            Err(e) => {
                stack.truncate(queued);
                visitor.damage(Damage::Corrupt(e))?;
                return Ok(false);
            }
        };
        let previous = previous.replace(entry.key);
        // This loop runs for every entry of the file: nothing more for a plain one, unless
        // the visitor asked to see it.
        if !V::ENTRIES && !entry.is_bucket() {
            continue;
        }
        let at = || EntryAt {
            pgid: leaf.pgid(),
            index,
            entry,
            previous,
            range,
        };
        if V::ENTRIES {
            // Its own copy, which the compiler keeps in registers.
            visitor.entry(&at(), token)?;
        }
        if !entry.is_bucket() {
            continue;
        }
        let at = at();
        let value = match BucketValue::parse(entry.value, leaf.pgid()) {
            Ok(value) => value,
            Err(e) => {
                visitor.damage(Damage::Corrupt(e))?;
                continue;
            }
        };
        let Some(token) = visitor.bucket(&at, &value, token)? else {
            continue;
        };
        stack.push(match value.inline {
            Some(inline) => Pending::Inline {
                leaf: inline,
                token,
            },
            None => Pending::Page(PendingPage {
                owner: leaf.pgid(),
                pgid: value.header.root_pgid(),
                slot: None,
                depth: 0,
                range: KeyRange::ALL,
                token,
            }),
        });
    }
    // Popped in key order.
    stack[queued..].reverse();
    Ok(true)
}
