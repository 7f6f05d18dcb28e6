//! The typed face of the deletes by range, prefix and predicate and of taking entries out:
//! bounds and prefixes are encoded before the bucket is touched, and each key and value is
//! decoded before a closure sees it. A key or value that does not decode stops the walk
//! with `Error::Decode` and leaves the bucket exactly as it was (see `bucket/ranges.rs`).
//!
//! A typed value may borrow from the page it is read from (`&str`, `&[u8]`), and an entry
//! taken out is deleted from that page: so `extract_if`, `pop_first` and `pop_last` hand
//! each key and value to a closure that makes of them what the caller keeps.

use super::bucket::TypedBucketMut;
use super::iter::encode_bound;
use super::{Key, Value};
use crate::bucket::ranges::{Decision, Stopped, before_end};
use crate::error::{Error, Result};
use rbolt_btree::{Direction, Verdict};
use rbolt_page::LeafEntry;
use std::borrow::Borrow;
use std::ops::{Bound, RangeBounds};

/// A key and value decoded, or the error that stops the walk (as the caller's error type).
fn decode<'e, K: Key, V: Value, E: From<Error>>(
    entry: &LeafEntry<'e>,
) -> std::result::Result<(K::SelfType<'e>, V::SelfType<'e>), Stopped<E>> {
    let caller = |error: Error| Stopped::Caller(E::from(error));
    let key = K::from_bytes(entry.key).map_err(caller)?;
    let value = V::from_bytes(entry.value).map_err(caller)?;
    Ok((key, value))
}

impl<K: Key, V: Value> TypedBucketMut<'_, K, V> {
    /// Deletes every key in `range` and returns how many; see [`BucketMut::delete_range`](
    /// crate::BucketMut::delete_range). Keys are not decoded: a key of another type in the
    /// range is deleted too.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const LOG: BucketDef<u64, &str> = BucketDef::new("log");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut log = tx.open_bucket(LOG)?;
    ///     for i in 0..100 {
    ///         log.put(i, "entry")?;
    ///     }
    ///     assert_eq!(log.delete_range(..90)?, 90); // keep the newest ten
    ///     assert_eq!(log.first()?, Some((90, "entry")));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn delete_range<'k, R: RangeBounds<K::SelfType<'k>>>(&mut self, range: R) -> Result<u64> {
        // Both bounds encoded before the bucket is touched.
        let start = encode_bound::<K>(range.start_bound())?;
        let end = encode_bound::<K>(range.end_bound())?;
        let start = start.as_ref().map(|key| key.as_slice());
        let end = end.as_ref().map(|key| key.as_slice());
        self.bytes().delete_bounds(start, end)
    }

    /// Deletes every key whose bytes start with the bytes of `prefix`; returns how many. See
    /// [`TypedBucket::prefix`](crate::TypedBucket::prefix) for what a prefix takes.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const FILES: BucketDef<String, u64> = BucketDef::new("files");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut files = tx.open_bucket(FILES)?;
    ///     for path in ["/tmp/a", "/tmp/b", "/usr/c"] {
    ///         files.put(path.to_string(), 1)?;
    ///     }
    ///     assert_eq!(files.delete_prefix("/tmp/".to_string())?, 2);
    ///     assert_eq!(files.len()?, 1);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn delete_prefix<'k>(&mut self, prefix: impl Borrow<K::SelfType<'k>>) -> Result<u64> {
        let prefix = K::to_bytes(prefix.borrow())?;
        self.bytes().delete_prefix(prefix)
    }

    /// Deletes every key that holds a value; returns how many. Nested buckets stay.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const CACHE: BucketDef<&str, &[u8]> = BucketDef::new("cache");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut cache = tx.open_bucket(CACHE)?;
    ///     cache.put("a", &b"1"[..])?;
    ///     cache.put("b", &b"2"[..])?;
    ///     assert_eq!(cache.clear()?, 2);
    ///     assert!(cache.is_empty()?);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn clear(&mut self) -> Result<u64> {
        self.bytes().clear()
    }

    /// Keeps the entries for which `keep` returns true and deletes the others, in one walk in
    /// key order; returns how many were deleted. A key or value that does not decode is
    /// `Error::Decode`, and then nothing is deleted (the deletes made before it are undone).
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const STOCK: BucketDef<&str, u32> = BucketDef::new("stock");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut stock = tx.open_bucket(STOCK)?;
    ///     for (item, n) in [("apples", 0), ("pears", 4), ("plums", 0)] {
    ///         stock.put(item, n)?;
    ///     }
    ///     assert_eq!(stock.retain(|_, n| n > 0)?, 2); // sold out: gone
    ///     assert_eq!(stock.iter().collect::<Result<Vec<_>, _>>()?, [("pears", 4)]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn retain(
        &mut self,
        mut keep: impl FnMut(K::SelfType<'_>, V::SelfType<'_>) -> bool,
    ) -> Result<u64> {
        self.try_retain(|key, value| Ok::<_, Error>(keep(key, value)))
    }

    /// [`TypedBucketMut::retain`] with a fallible `keep`: when it returns `Err` (or an entry
    /// does not decode), the walk stops, the bucket is exactly as it was before the call, and
    /// the error is returned.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const AGES: BucketDef<&str, u32> = BucketDef::new("ages");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut ages = tx.open_bucket(AGES)?;
    ///     for (name, age) in [("al", 5), ("bob", 200), ("cy", 40)] {
    ///         ages.put(name, age)?;
    ///     }
    ///     // An age over 150 is an error: "al", under 18 and before it, stays too.
    ///     let checked = ages.try_retain(|_, age| {
    ///         if age > 150 { Err(rbolt::Error::IncompatibleValue) } else { Ok(age >= 18) }
    ///     });
    ///     assert!(checked.is_err());
    ///     assert_eq!(ages.len()?, 3);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn try_retain<E: From<Error>>(
        &mut self,
        mut keep: impl FnMut(K::SelfType<'_>, V::SelfType<'_>) -> std::result::Result<bool, E>,
    ) -> std::result::Result<u64, E> {
        let mut decide = |entry: LeafEntry<'_>| -> Decision<E> {
            if entry.is_bucket() {
                return Ok(Verdict::Keep);
            }
            let (key, value) = decode::<K, V, E>(&entry)?;
            match keep(key, value) {
                Ok(true) => Ok(Verdict::Keep),
                Ok(false) => Ok(Verdict::Delete),
                Err(error) => Err(Stopped::Caller(error)),
            }
        };
        self.bytes()
            .delete_where(Bound::Unbounded, Direction::Forward, &mut decide)
            .map_err(Stopped::into_caller)
    }

    /// Takes out the entries in `range` for which `pred` returns true: deletes them, in one
    /// walk in key order, and returns what `take` makes of each (a key or value may borrow
    /// from the page it is deleted from, so `take` turns it into what the caller keeps). A key
    /// or value in the range that does not decode is `Error::Decode`, and then nothing is
    /// deleted. The results are collected into a vector: an iterator would have to borrow
    /// the bucket it deletes from.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const JOBS: BucketDef<u64, &str> = BucketDef::new("jobs");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut jobs = tx.open_bucket(JOBS)?;
    ///     for (id, state) in [(1, "done"), (2, "queued"), (3, "done"), (9, "done")] {
    ///         jobs.put(id, state)?;
    ///     }
    ///     let done = jobs.extract_if(..5, |_, state| *state == "done", |id, _| id)?;
    ///     assert_eq!(done, [1, 3]);
    ///     assert_eq!(jobs.len()?, 2); // 2 and 9
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn extract_if<'k, R: RangeBounds<K::SelfType<'k>>, T>(
        &mut self,
        range: R,
        mut pred: impl FnMut(&K::SelfType<'_>, &V::SelfType<'_>) -> bool,
        mut take: impl FnMut(K::SelfType<'_>, V::SelfType<'_>) -> T,
    ) -> Result<Vec<T>> {
        let start = encode_bound::<K>(range.start_bound())?;
        let end = encode_bound::<K>(range.end_bound())?;
        let (start, end) = (
            start.as_ref().map(|key| key.as_slice()),
            end.as_ref().map(|key| key.as_slice()),
        );
        let mut taken = Vec::new();
        let mut decide = |entry: LeafEntry<'_>| -> Decision<Error> {
            if !before_end(entry.key, end) {
                return Ok(Verdict::Stop);
            }
            if entry.is_bucket() {
                return Ok(Verdict::Keep);
            }
            let (key, value) = decode::<K, V, Error>(&entry)?;
            if !pred(&key, &value) {
                return Ok(Verdict::Keep);
            }
            taken.push(take(key, value));
            Ok(Verdict::Delete)
        };
        self.bytes()
            .delete_where(start, Direction::Forward, &mut decide)
            .map_err(Stopped::into_caller)?;
        Ok(taken)
    }

    /// Deletes the entry with the smallest key and returns what `take` makes of it; `None`
    /// when the bucket holds no value. A first entry that does not decode is
    /// `Error::Decode`, and then nothing is deleted. To take out many entries in one
    /// transaction, [`TypedBucketMut::extract_if`] is one walk where pops are one each (see
    /// [`BucketMut::pop_first`](crate::BucketMut::pop_first)).
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const QUEUE: BucketDef<u64, &str> = BucketDef::new("queue");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut queue = tx.open_bucket(QUEUE)?;
    ///     queue.put(2, "second")?;
    ///     queue.put(1, "first")?;
    ///     let job = queue.pop_first(|id, job| (id, job.to_string()))?;
    ///     assert_eq!(job, Some((1, "first".to_string())));
    ///     assert_eq!(queue.len()?, 1);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn pop_first<T>(
        &mut self,
        take: impl FnOnce(K::SelfType<'_>, V::SelfType<'_>) -> T,
    ) -> Result<Option<T>> {
        self.pop(Direction::Forward, take)
    }

    /// Deletes the entry with the largest key and returns what `take` makes of it; `None`
    /// when the bucket holds no value. See [`TypedBucketMut::pop_first`].
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const STACK: BucketDef<u32, u32> = BucketDef::new("stack");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut stack = tx.open_bucket(STACK)?;
    ///     stack.put(1, 10)?;
    ///     stack.put(2, 20)?;
    ///     assert_eq!(stack.pop_last(|_, value| value)?, Some(20));
    ///     assert_eq!(stack.pop_last(|_, value| value)?, Some(10));
    ///     assert_eq!(stack.pop_last(|_, value| value)?, None);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn pop_last<T>(
        &mut self,
        take: impl FnOnce(K::SelfType<'_>, V::SelfType<'_>) -> T,
    ) -> Result<Option<T>> {
        self.pop(Direction::Backward, take)
    }

    fn pop<T>(
        &mut self,
        direction: Direction,
        take: impl FnOnce(K::SelfType<'_>, V::SelfType<'_>) -> T,
    ) -> Result<Option<T>> {
        let mut take = Some(take);
        let mut popped = None;
        let mut decide = |entry: LeafEntry<'_>| -> Decision<Error> {
            if entry.is_bucket() {
                return Ok(Verdict::Keep);
            }
            let (key, value) = decode::<K, V, Error>(&entry)?;
            if let Some(take) = take.take() {
                popped = Some(take(key, value));
            }
            Ok(Verdict::DeleteAndStop)
        };
        self.bytes()
            .delete_where(Bound::Unbounded, direction, &mut decide)
            .map_err(Stopped::into_caller)?;
        Ok(popped)
    }
}
