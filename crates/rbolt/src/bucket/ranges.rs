//! Deleting many keys at once and taking entries out: [`BucketMut::delete_range`],
//! [`BucketMut::delete_prefix`], [`BucketMut::clear`], [`BucketMut::retain`] and
//! [`BucketMut::try_retain`], [`BucketMut::extract_if`], [`BucketMut::pop_first`] and
//! [`BucketMut::pop_last`].
//!
//! Each is one walk over the leaves it touches (rbolt-btree's `Tree::delete_where`: the path
//! is kept from leaf to leaf, entries are removed where the walk stands, no lookup per key).
//! They act on values only: a nested bucket is never deleted, counted or shown to a
//! predicate (bbolt's `Cursor.Delete` refuses one; delete it with `delete_bucket`). A
//! failure — the caller's closure returning `Err`, a key or value that does not decode in the
//! typed API, a corrupt page met halfway — leaves the bucket exactly as it was before the
//! call: the walk keeps a copy of every node before it first changes it and puts them back.

use super::write::BucketMut;
use crate::engine::context::WriteContext;
use crate::error::{Error, Result};
use rbolt_btree::{Arena, Direction, Verdict};
use rbolt_page::{Corruption, LeafEntry};
use std::ops::{Bound, RangeBounds};

use super::state::prefix_end;

/// What stops a walk early: the engine's error, or the caller's (its closure's, or a decode).
pub(crate) enum Stopped<E> {
    Engine(Error),
    Caller(E),
}

impl<E> From<Corruption> for Stopped<E> {
    fn from(corruption: Corruption) -> Stopped<E> {
        Stopped::Engine(corruption.into())
    }
}

impl<E: From<Error>> Stopped<E> {
    /// The error as the caller's type.
    pub(crate) fn into_caller(self) -> E {
        match self {
            Stopped::Engine(error) => error.into(),
            Stopped::Caller(error) => error,
        }
    }
}

/// What a walk's decision function returns for an entry.
pub(crate) type Decision<E> = std::result::Result<Verdict, Stopped<E>>;

/// A walk's decision function.
pub(crate) type Decide<'d, E> = dyn FnMut(LeafEntry<'_>) -> Decision<E> + 'd;

/// Marks the transaction broken when a walk's closure panics: the walk is then neither done
/// nor undone, so nothing of the transaction may reach the disk (its commit is refused).
struct BreakOnPanic<'t>(&'t WriteContext);

impl Drop for BreakOnPanic<'_> {
    fn drop(&mut self) {
        if std::thread::panicking()
            && let Ok(mut core) = self.0.core.try_borrow_mut()
        {
            core.broken = true;
        }
    }
}

/// Whether `key` lies before the end bound `end`.
pub(crate) fn before_end(key: &[u8], end: Bound<&[u8]>) -> bool {
    match end {
        Bound::Unbounded => true,
        Bound::Included(end) => key <= end,
        Bound::Excluded(end) => key < end,
    }
}

/// A range's bounds as byte slices.
fn bounds_of<'r, K: AsRef<[u8]> + 'r>(
    range: &'r impl RangeBounds<K>,
) -> (Bound<&'r [u8]>, Bound<&'r [u8]>) {
    (
        range.start_bound().map(AsRef::as_ref),
        range.end_bound().map(AsRef::as_ref),
    )
}

impl BucketMut<'_> {
    /// The walk every method here makes: from `start` in `direction`, `decide` says what to
    /// do with each entry (nested buckets included, which it must keep). While it runs, the
    /// transaction's node arena is out of its workspace (a fresh one stands in), so that a
    /// closure may use the transaction's other bucket handles; the tree is exactly as before
    /// when it fails. A closure that panics leaves the walk half done: the transaction then
    /// refuses to commit.
    pub(crate) fn delete_where<E>(
        &mut self,
        start: Bound<&[u8]>,
        direction: Direction,
        decide: &mut Decide<'_, E>,
    ) -> std::result::Result<u64, Stopped<E>> {
        let tx = self.tx;
        let pages = tx.pages();
        let stand_in = Arena::new(tx.page_size);
        let mut arena = std::mem::replace(&mut tx.core.borrow_mut().arena, stand_in);
        let guard = BreakOnPanic(tx);
        let walked = self
            .state_mut()
            .tree
            .delete_where(pages, &mut arena, start, direction, decide);
        // What the stand-in holds (buffers of the other buckets' edits) is dropped with it.
        drop(std::mem::replace(&mut tx.core.borrow_mut().arena, arena));
        drop(guard);
        walked
    }

    /// Deletes every key in `range` that holds a value and returns how many. Nested buckets
    /// in the range stay (see `delete_bucket`). One walk over the range's leaves; a range
    /// whose start lies after its end deletes nothing.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut log = tx.create_bucket("log")?;
    ///     for i in 0u64..100 {
    ///         log.put(i.to_be_bytes(), "entry")?;
    ///     }
    ///     // Drop everything below 90.
    ///     assert_eq!(log.delete_range(..90u64.to_be_bytes())?, 90);
    ///     assert_eq!(log.iter().count(), 10);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn delete_range<K: AsRef<[u8]>>(&mut self, range: impl RangeBounds<K>) -> Result<u64> {
        let (start, end) = bounds_of(&range);
        self.delete_bounds(start, end)
    }

    /// [`BucketMut::delete_range`] between two byte bounds.
    pub(crate) fn delete_bounds(&mut self, start: Bound<&[u8]>, end: Bound<&[u8]>) -> Result<u64> {
        let mut decide = |entry: LeafEntry<'_>| -> Decision<Error> {
            Ok(if !before_end(entry.key, end) {
                Verdict::Stop
            } else if entry.is_bucket() {
                Verdict::Keep
            } else {
                Verdict::Delete
            })
        };
        self.delete_where::<Error>(start, Direction::Forward, &mut decide)
            .map_err(Stopped::into_caller)
    }

    /// Deletes every key that starts with `prefix` and holds a value; returns how many.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("sessions")?;
    ///     for key in ["alice/1", "alice/2", "bob/1"] {
    ///         b.put(key, "token")?;
    ///     }
    ///     assert_eq!(b.delete_prefix("alice/")?, 2);
    ///     assert_eq!(b.get("bob/1")?, Some(&b"token"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn delete_prefix(&mut self, prefix: impl AsRef<[u8]>) -> Result<u64> {
        let prefix = prefix.as_ref();
        let end = prefix_end(prefix);
        let end = match &end {
            Some(end) => Bound::Excluded(end.as_slice()),
            None => Bound::Unbounded,
        };
        self.delete_bounds(Bound::Included(prefix), end)
    }

    /// Deletes every key that holds a value; returns how many. Nested buckets stay: a bucket
    /// with none is empty afterwards.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("cache")?;
    ///     b.put("a", "1")?;
    ///     b.put("b", "2")?;
    ///     b.create_bucket("nested")?;
    ///     assert_eq!(b.clear()?, 2);
    ///     // Only the nested bucket is left.
    ///     assert_eq!(b.iter().count(), 1);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn clear(&mut self) -> Result<u64> {
        self.delete_bounds(Bound::Unbounded, Bound::Unbounded)
    }

    /// Keeps the keys and values for which `keep` returns true and deletes the others, in one
    /// walk in key order; returns how many were deleted. Nested buckets are not shown to
    /// `keep` and stay. This is the iterate-and-delete loop that does not compile with
    /// [`BucketMut::iter`] (the iterator borrows the bucket).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("jobs")?;
    ///     for (key, state) in [("1", "done"), ("2", "queued"), ("3", "done")] {
    ///         b.put(key, state)?;
    ///     }
    ///     assert_eq!(b.retain(|_, state| state != b"done")?, 2);
    ///     assert_eq!(b.get("2")?, Some(&b"queued"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn retain(&mut self, mut keep: impl FnMut(&[u8], &[u8]) -> bool) -> Result<u64> {
        self.try_retain(|key, value| Ok::<_, Error>(keep(key, value)))
    }

    /// [`BucketMut::retain`] with a fallible `keep`: when it returns `Err`, the walk stops and
    /// the bucket is exactly as it was before the call (the deletes already made are undone);
    /// the error is returned. (When a closure of these methods panics instead, the walk is
    /// left half done and the transaction refuses to commit: it can only be rolled back.)
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for key in ["a", "b", "c"] {
    ///         b.put(key, "x")?;
    ///     }
    ///     let failed = b.try_retain(|key, _| {
    ///         if key == b"c" { Err(rbolt::Error::IncompatibleValue) } else { Ok(false) }
    ///     });
    ///     assert!(failed.is_err());
    ///     // "a" and "b" were deleted before "c" failed, and are back.
    ///     assert_eq!(b.iter().count(), 3);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn try_retain<E: From<Error>>(
        &mut self,
        mut keep: impl FnMut(&[u8], &[u8]) -> std::result::Result<bool, E>,
    ) -> std::result::Result<u64, E> {
        let mut decide = |entry: LeafEntry<'_>| -> Decision<E> {
            if entry.is_bucket() {
                return Ok(Verdict::Keep);
            }
            match keep(entry.key, entry.value) {
                Ok(true) => Ok(Verdict::Keep),
                Ok(false) => Ok(Verdict::Delete),
                Err(error) => Err(Stopped::Caller(error)),
            }
        };
        self.delete_where(Bound::Unbounded, Direction::Forward, &mut decide)
            .map_err(Stopped::into_caller)
    }

    /// Takes out the keys and values in `range` for which `pred` returns true: deletes them
    /// and returns them in key order, in one walk. Nested buckets are not shown to `pred` and
    /// stay. The entries are collected into a vector (an iterator would have to borrow the
    /// bucket it deletes from).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut queue = tx.create_bucket("queue")?;
    ///     for (key, value) in [("1", "a"), ("2", "skip"), ("3", "c"), ("4", "d")] {
    ///         queue.put(key, value)?;
    ///     }
    ///     let taken = queue.extract_if("1".."4", |_, value| value != b"skip")?;
    ///     assert_eq!(taken, [(b"1".to_vec(), b"a".to_vec()), (b"3".to_vec(), b"c".to_vec())]);
    ///     assert_eq!(queue.iter().count(), 2); // "2" and "4"
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn extract_if<K: AsRef<[u8]>>(
        &mut self,
        range: impl RangeBounds<K>,
        mut pred: impl FnMut(&[u8], &[u8]) -> bool,
    ) -> Result<Vec<(Vec<u8>, Vec<u8>)>> {
        let (start, end) = bounds_of(&range);
        let mut taken = Vec::new();
        let mut decide = |entry: LeafEntry<'_>| -> Decision<Error> {
            Ok(if !before_end(entry.key, end) {
                Verdict::Stop
            } else if entry.is_bucket() || !pred(entry.key, entry.value) {
                Verdict::Keep
            } else {
                taken.push((entry.key.to_vec(), entry.value.to_vec()));
                Verdict::Delete
            })
        };
        self.delete_where::<Error>(start, Direction::Forward, &mut decide)
            .map_err(Stopped::into_caller)?;
        Ok(taken)
    }

    /// Deletes the first key (in key order) that holds a value and returns it with its value;
    /// `None` when there is none. Nested buckets are passed over. Leaves emptied in this
    /// transaction are merged away only at commit, so a pop walks past them: to take out many
    /// entries at once, [`BucketMut::extract_if`] or [`BucketMut::delete_range`] is one walk.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut queue = tx.create_bucket("queue")?;
    ///     queue.put(2u64.to_be_bytes(), "second")?;
    ///     queue.put(1u64.to_be_bytes(), "first")?;
    ///     let (key, value) = queue.pop_first()?.unwrap();
    ///     assert_eq!((key.as_slice(), value.as_slice()), (&1u64.to_be_bytes()[..], &b"first"[..]));
    ///     assert_eq!(queue.iter().count(), 1);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn pop_first(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.pop(Direction::Forward)
    }

    /// Deletes the last key (in key order) that holds a value and returns it with its value;
    /// `None` when there is none. Nested buckets are passed over.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut stack = tx.create_bucket("stack")?;
    ///     stack.put("a", "1")?;
    ///     stack.put("b", "2")?;
    ///     assert_eq!(stack.pop_last()?, Some((b"b".to_vec(), b"2".to_vec())));
    ///     assert_eq!(stack.pop_last()?, Some((b"a".to_vec(), b"1".to_vec())));
    ///     assert_eq!(stack.pop_last()?, None);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn pop_last(&mut self) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        self.pop(Direction::Backward)
    }

    fn pop(&mut self, direction: Direction) -> Result<Option<(Vec<u8>, Vec<u8>)>> {
        let mut popped = None;
        let mut decide = |entry: LeafEntry<'_>| -> Decision<Error> {
            if entry.is_bucket() {
                return Ok(Verdict::Keep);
            }
            popped = Some((entry.key.to_vec(), entry.value.to_vec()));
            Ok(Verdict::DeleteAndStop)
        };
        self.delete_where::<Error>(Bound::Unbounded, direction, &mut decide)
            .map_err(Stopped::into_caller)?;
        Ok(popped)
    }
}
