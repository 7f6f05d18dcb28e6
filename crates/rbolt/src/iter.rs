//! Cursors and iterators over a bucket.

use crate::bucket::{BucketState, entry_of};
use crate::error::{Error, Result};
use crate::tx::TxCore;
use rbolt_btree::{Delete, TreeView};
use rbolt_page::LEAF_FLAG_BUCKET;
use smallvec::SmallVec;
use std::ops::Bound;

/// One entry of a bucket: a key and either a value or a nested bucket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry<'a> {
    key: &'a [u8],
    value: &'a [u8],
    bucket: bool,
}

impl<'a> Entry<'a> {
    pub(crate) fn new(key: &'a [u8], value: &'a [u8], bucket: bool) -> Entry<'a> {
        Entry { key, value, bucket }
    }

    /// The key.
    #[inline]
    pub fn key(&self) -> &'a [u8] {
        self.key
    }

    /// The value, or `None` when the key holds a nested bucket.
    #[inline]
    pub fn value(&self) -> Option<&'a [u8]> {
        (!self.bucket).then_some(self.value)
    }

    /// Whether the key holds a nested bucket.
    #[inline]
    pub fn is_bucket(&self) -> bool {
        self.bucket
    }

    /// The raw stored value: for a nested bucket, its bucket value (header and maybe an
    /// inline page), as bbolt's tools show it.
    #[inline]
    pub fn raw_value(&self) -> &'a [u8] {
        self.value
    }
}

type Moved<'a> = Result<Option<Entry<'a>>>;

/// A position in a bucket that moves in key order. Moving allocates nothing.
///
/// A cursor that ran off either end returns `None` and stays usable: from past the end,
/// `prev` gives the last entry; from before the start, `next` gives the first.
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    inner: rbolt_btree::Cursor<'a>,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(inner: rbolt_btree::Cursor<'a>) -> Cursor<'a> {
        Cursor { inner }
    }

    /// Moves to the first entry.
    pub fn first(&mut self) -> Moved<'a> {
        Ok(self.inner.first()?.map(entry_of))
    }

    /// Moves to the last entry.
    pub fn last(&mut self) -> Moved<'a> {
        Ok(self.inner.last()?.map(entry_of))
    }

    /// Moves to the next entry.
    #[expect(
        clippy::should_implement_trait,
        reason = "fallible and bidirectional; Iter is the Iterator"
    )]
    pub fn next(&mut self) -> Moved<'a> {
        Ok(self.inner.next()?.map(entry_of))
    }

    /// Moves to the previous entry.
    pub fn prev(&mut self) -> Moved<'a> {
        Ok(self.inner.prev()?.map(entry_of))
    }

    /// Moves to the first entry whose key is not less than `key`.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) -> Moved<'a> {
        let key = key.as_ref();
        Ok(self.inner.seek(key)?.map(entry_of))
    }

    /// The entry the cursor is on.
    pub fn current(&self) -> Moved<'a> {
        Ok(self.inner.current()?.map(entry_of))
    }
}

/// A bound of a range, its key kept inline when short.
type KeyBound = Bound<SmallVec<[u8; 32]>>;

/// The entries of a bucket (or a range of them) in key order, from either end. Items are
/// `Result`s: reading a corrupt page ends the iteration with an error.
#[derive(Clone, Debug)]
pub struct Iter<'a> {
    front: rbolt_btree::Cursor<'a>,
    back: rbolt_btree::Cursor<'a>,
    start: KeyBound,
    end: KeyBound,
    front_last: Option<&'a [u8]>,
    back_last: Option<&'a [u8]>,
    done: bool,
}

fn bound_of(bound: Bound<&[u8]>) -> KeyBound {
    bound.map(SmallVec::from_slice)
}

impl<'a> Iter<'a> {
    pub(crate) fn new(view: TreeView<'a>, range: (Bound<&[u8]>, Bound<&[u8]>)) -> Iter<'a> {
        Iter {
            front: view.cursor(),
            back: view.cursor(),
            start: bound_of(range.0),
            end: bound_of(range.1),
            front_last: None,
            back_last: None,
            done: false,
        }
    }

    fn front_step(&mut self) -> rbolt_page::Result<Option<rbolt_btree::Entry<'a>>> {
        if self.front_last.is_some() {
            return self.front.next();
        }
        match &self.start {
            Bound::Unbounded => self.front.first(),
            Bound::Included(key) => self.front.seek(key),
            Bound::Excluded(key) => match self.front.seek(key)? {
                Some(entry) if entry.key == &key[..] => self.front.next(),
                other => Ok(other),
            },
        }
    }

    fn back_step(&mut self) -> rbolt_page::Result<Option<rbolt_btree::Entry<'a>>> {
        if self.back_last.is_some() {
            return self.back.prev();
        }
        match &self.end {
            Bound::Unbounded => self.back.last(),
            Bound::Included(key) => match self.back.seek(key)? {
                None => self.back.prev(),
                Some(entry) if entry.key > &key[..] => self.back.prev(),
                found => Ok(found),
            },
            Bound::Excluded(key) => match self.back.seek(key)? {
                None => self.back.prev(),
                Some(_) => self.back.prev(),
            },
        }
    }

    fn before_end(&self, key: &[u8]) -> bool {
        match &self.end {
            Bound::Unbounded => true,
            Bound::Included(end) => key <= &end[..],
            Bound::Excluded(end) => key < &end[..],
        }
    }

    fn after_start(&self, key: &[u8]) -> bool {
        match &self.start {
            Bound::Unbounded => true,
            Bound::Included(start) => key >= &start[..],
            Bound::Excluded(start) => key > &start[..],
        }
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = Result<Entry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.front_step() {
            Err(error) => {
                self.done = true;
                Some(Err(error.into()))
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Ok(Some(entry)) => {
                if !self.before_end(entry.key)
                    || self.back_last.is_some_and(|back| entry.key >= back)
                {
                    self.done = true;
                    return None;
                }
                self.front_last = Some(entry.key);
                Some(Ok(entry_of(entry)))
            }
        }
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        if self.done {
            return None;
        }
        match self.back_step() {
            Err(error) => {
                self.done = true;
                Some(Err(error.into()))
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Ok(Some(entry)) => {
                if !self.after_start(entry.key)
                    || self.front_last.is_some_and(|front| entry.key <= front)
                {
                    self.done = true;
                    return None;
                }
                self.back_last = Some(entry.key);
                Some(Ok(entry_of(entry)))
            }
        }
    }
}

impl std::iter::FusedIterator for Iter<'_> {}

/// Where a [`CursorMut`] is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Position {
    Unpositioned,
    At(Vec<u8>),
    BeforeStart,
    AfterEnd,
}

/// A cursor over a bucket of a write transaction that can delete the entry it is on.
///
/// It remembers its key, not a path, so it stays valid across its own deletes: after
/// `delete`, `next` gives the entry after the deleted one and `prev` the one before.
#[derive(Debug)]
pub struct CursorMut<'a> {
    core: &'a mut TxCore,
    state: &'a mut BucketState,
    position: Position,
}

impl<'a> CursorMut<'a> {
    pub(crate) fn new(core: &'a mut TxCore, state: &'a mut BucketState) -> CursorMut<'a> {
        CursorMut {
            core,
            state,
            position: Position::Unpositioned,
        }
    }

    fn settle(&mut self, found: Option<(Vec<u8>, bool)>, forward: bool) {
        self.position = match found {
            Some((key, _)) => Position::At(key),
            None if forward => Position::AfterEnd,
            None => Position::BeforeStart,
        };
    }

    fn current_entry(&self) -> Moved<'_> {
        let Position::At(key) = &self.position else {
            return Ok(None);
        };
        let view = self.state.tree.view(self.core.pages());
        Ok(view.get(key)?.map(entry_of))
    }

    /// Runs a movement on a fresh cursor positioned as this one, and records where it ends.
    fn moved(
        &mut self,
        forward: bool,
        step: impl for<'c> FnOnce(
            &mut rbolt_btree::Cursor<'c>,
            &Position,
        ) -> rbolt_page::Result<Option<rbolt_btree::Entry<'c>>>,
    ) -> Moved<'_> {
        let found = {
            let view = self.state.tree.view(self.core.pages());
            let mut cursor = view.cursor();
            step(&mut cursor, &self.position)?.map(|e| (e.key.to_vec(), e.is_bucket()))
        };
        self.settle(found, forward);
        self.current_entry()
    }

    /// Moves to the first entry.
    pub fn first(&mut self) -> Moved<'_> {
        self.moved(true, |c, _| c.first())
    }

    /// Moves to the last entry.
    pub fn last(&mut self) -> Moved<'_> {
        self.moved(false, |c, _| c.last())
    }

    /// Moves to the first entry whose key is not less than `key`.
    pub fn seek(&mut self, key: impl AsRef<[u8]>) -> Moved<'_> {
        let key = key.as_ref();
        self.moved(true, |c, _| c.seek(key))
    }

    /// Moves to the next entry (the entry after a deleted one, after `delete`).
    #[expect(
        clippy::should_implement_trait,
        reason = "fallible and bidirectional; Iter is the Iterator"
    )]
    pub fn next(&mut self) -> Moved<'_> {
        self.moved(true, |c, position| match position {
            Position::Unpositioned | Position::BeforeStart => c.first(),
            Position::AfterEnd => Ok(None),
            Position::At(key) => match c.seek(key)? {
                Some(entry) if entry.key == &key[..] => c.next(),
                other => Ok(other),
            },
        })
    }

    /// Moves to the previous entry.
    pub fn prev(&mut self) -> Moved<'_> {
        self.moved(false, |c, position| match position {
            Position::Unpositioned | Position::AfterEnd => c.last(),
            Position::BeforeStart => Ok(None),
            Position::At(key) => {
                c.seek(key)?;
                c.prev()
            }
        })
    }

    /// The entry the cursor is on (`None` after `delete` until it moves).
    pub fn current(&self) -> Moved<'_> {
        self.current_entry()
    }

    /// Deletes the entry the cursor is on. A nested bucket gives `IncompatibleValue` (use
    /// `delete_bucket`); a cursor on no entry gives `Ok(false)`.
    pub fn delete(&mut self) -> Result<bool> {
        let Position::At(key) = &self.position else {
            return Ok(false);
        };
        let (pages, arena) = self.core.pages_and_arena();
        match self.state.tree.delete(pages, arena, key, 0)? {
            Delete::Deleted { .. } => Ok(true),
            Delete::NotFound => Ok(false),
            Delete::KindConflict { flags } => {
                debug_assert!(flags & LEAF_FLAG_BUCKET != 0);
                Err(Error::IncompatibleValue)
            }
        }
    }
}
