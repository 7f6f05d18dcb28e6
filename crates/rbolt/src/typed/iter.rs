//! Typed iteration: [`TypedIter`] over a range of a typed bucket and [`TypedCursor`], both
//! decoding keys and values and skipping nested buckets.

use super::{Key, Value};
use crate::error::{Error, Result};
use crate::iter::Iter;
use smallvec::SmallVec;
use std::borrow::Borrow;
use std::marker::PhantomData;
use std::ops::Bound;

/// A range bound as the key's bytes.
pub(super) fn encode_bound<'k, K: Key>(
    bound: Bound<&K::SelfType<'k>>,
) -> Result<Bound<SmallVec<[u8; 32]>>> {
    Ok(match bound {
        Bound::Included(key) => Bound::Included(SmallVec::from_slice(K::to_bytes(key)?.as_ref())),
        Bound::Excluded(key) => Bound::Excluded(SmallVec::from_slice(K::to_bytes(key)?.as_ref())),
        Bound::Unbounded => Bound::Unbounded,
    })
}

/// Typed keys and values of a bucket, in key order; double-ended. A key or value that does
/// not decode as its type ends the iteration with `Error::Decode`.
///
/// Deleting inside the loop does not compile (the iterator borrows the bucket): use
/// [`TypedBucketMut::retain`](crate::TypedBucketMut::retain),
/// [`TypedBucketMut::extract_if`](crate::TypedBucketMut::extract_if),
/// [`TypedBucketMut::delete_range`](crate::TypedBucketMut::delete_range),
/// [`TypedBucketMut::delete_prefix`](crate::TypedBucketMut::delete_prefix),
/// [`TypedBucketMut::clear`](crate::TypedBucketMut::clear),
/// [`TypedBucketMut::pop_first`](crate::TypedBucketMut::pop_first) or
/// [`TypedBucketMut::pop_last`](crate::TypedBucketMut::pop_last).
///
/// ```
/// use rbolt::BucketDef;
/// const IDS: BucketDef<u32, &str> = BucketDef::new("ids");
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     tx.open_bucket(IDS)?.put(1, "one")?;
///     // A key of the wrong width, written through the bytes API, does not decode as a u32.
///     tx.bucket_mut("ids")?.unwrap().put([0xFF; 2], "bad")?;
///     Ok::<_, rbolt::Error>(())
/// })?;
/// db.view(|tx| {
///     let mut iter = tx.open_bucket(IDS)?.unwrap().iter();
///     assert_eq!(iter.next().transpose()?, Some((1, "one")));
///     assert!(matches!(iter.next(), Some(Err(rbolt::Error::Decode { .. }))));
///     assert!(iter.next().is_none()); // the error ended the iteration
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
pub struct TypedIter<'a, K, V> {
    /// `None` once an error ended the iteration.
    inner: Option<Iter<'a>>,
    /// A bound or prefix that did not encode: the first item, then the end.
    failed: Option<EncodeFailure>,
    types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for TypedIter<'_, K, V> {
    fn clone(&self) -> Self {
        TypedIter {
            inner: self.inner.clone(),
            failed: self.failed.clone(),
            types: PhantomData,
        }
    }
}

impl<K, V> std::fmt::Debug for TypedIter<'_, K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedIter")
            .field("inner", &self.inner)
            .field("failed", &self.failed)
            .finish()
    }
}

/// An `Error::Encode`, kept in a form that can be cloned with its iterator.
#[derive(Clone, Debug)]
struct EncodeFailure {
    type_name: &'static str,
    reason: String,
}

impl<'a, K: Key, V: Value> TypedIter<'a, K, V> {
    pub(super) fn new(inner: Iter<'a>) -> TypedIter<'a, K, V> {
        TypedIter {
            inner: Some(inner),
            failed: None,
            types: PhantomData,
        }
    }

    /// An iterator whose range could not be encoded: it yields that error, then ends.
    pub(super) fn failed(error: Error) -> TypedIter<'a, K, V> {
        let failed = match error {
            Error::Encode { type_name, reason } => EncodeFailure { type_name, reason },
            // `Value::to_bytes` returns `Encode`; another error from a foreign impl is kept
            // as its message.
            other => EncodeFailure {
                type_name: K::type_name(),
                reason: other.to_string(),
            },
        };
        TypedIter {
            inner: None,
            failed: Some(failed),
            types: PhantomData,
        }
    }

    fn step(&mut self, back: bool) -> Option<Result<(K::SelfType<'a>, V::SelfType<'a>)>> {
        if let Some(EncodeFailure { type_name, reason }) = self.failed.take() {
            return Some(Err(Error::Encode { type_name, reason }));
        }
        let inner = self.inner.as_mut()?;
        let item = loop {
            let entry = if back {
                inner.next_back()
            } else {
                inner.next()
            };
            match entry? {
                Ok(entry) if entry.is_bucket() => continue,
                Ok(entry) => break decode::<K, V>(entry),
                Err(error) => break Err(error),
            }
        };
        if item.is_err() {
            self.inner = None;
        }
        Some(item)
    }
}

/// A key and value entry decoded as `K` and `V` (the caller skipped nested buckets).
fn decode<'a, K: Key, V: Value>(
    entry: crate::Entry<'a>,
) -> Result<(K::SelfType<'a>, V::SelfType<'a>)> {
    Ok((
        K::from_bytes(entry.key())?,
        V::from_bytes(entry.raw_value())?,
    ))
}

impl<'a, K: Key, V: Value> Iterator for TypedIter<'a, K, V> {
    type Item = Result<(K::SelfType<'a>, V::SelfType<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}

impl<K: Key, V: Value> DoubleEndedIterator for TypedIter<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(true)
    }
}

impl<K: Key, V: Value> std::iter::FusedIterator for TypedIter<'_, K, V> {}

/// A cursor over a typed bucket ([`TypedBucket::cursor`](crate::TypedBucket::cursor)): the byte [`Cursor`]'s moves, with
/// keys and values decoded and nested buckets skipped. Like it, a cursor that ran off either
/// end returns `None` and stays usable. A key or value that does not decode is
/// `Error::Decode`, and the cursor stays on that entry.
///
/// [`Cursor`]: crate::Cursor
///
/// ```
/// use rbolt::BucketDef;
/// const LOG: BucketDef<u64, &str> = BucketDef::new("log");
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut log = tx.open_bucket(LOG)?;
///     for (i, line) in [(1, "boot"), (2, "ready"), (3, "stop")] {
///         log.put(i, line)?;
///     }
///     log.bytes().create_bucket("archive")?; // skipped by the cursor
///     Ok::<_, rbolt::Error>(())
/// })?;
/// let tx = db.begin_read()?;
/// let mut cursor = tx.open_bucket(LOG)?.unwrap().cursor();
/// assert_eq!(cursor.last()?, Some((3, "stop")));
/// assert_eq!(cursor.prev()?, Some((2, "ready")));
/// assert_eq!(cursor.first()?, Some((1, "boot")));
/// assert_eq!(cursor.prev()?, None); // before the start, still usable
/// assert_eq!(cursor.next()?, Some((1, "boot")));
/// # Ok::<(), rbolt::Error>(())
/// ```
pub struct TypedCursor<'a, K, V> {
    inner: crate::Cursor<'a>,
    types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for TypedCursor<'_, K, V> {
    fn clone(&self) -> Self {
        TypedCursor {
            inner: self.inner.clone(),
            types: PhantomData,
        }
    }
}

impl<K, V> std::fmt::Debug for TypedCursor<'_, K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedCursor")
            .field("inner", &self.inner)
            .finish()
    }
}

/// What a typed cursor's move gives: the entry it moved to, if any.
type TypedMoved<'a, K, V> =
    Result<Option<(<K as Value>::SelfType<'a>, <V as Value>::SelfType<'a>)>>;

impl<'a, K: Key, V: Value> TypedCursor<'a, K, V> {
    pub(super) fn new(inner: crate::Cursor<'a>) -> TypedCursor<'a, K, V> {
        TypedCursor {
            inner,
            types: PhantomData,
        }
    }

    /// Moves to the first entry.
    pub fn first(&mut self) -> TypedMoved<'a, K, V> {
        let entry = self.inner.first()?;
        self.settle(entry, false)
    }

    /// Moves to the last entry.
    pub fn last(&mut self) -> TypedMoved<'a, K, V> {
        let entry = self.inner.last()?;
        self.settle(entry, true)
    }

    /// Moves to the next entry.
    #[expect(
        clippy::should_implement_trait,
        reason = "fallible and bidirectional; TypedIter is the Iterator"
    )]
    pub fn next(&mut self) -> TypedMoved<'a, K, V> {
        let entry = self.inner.next()?;
        self.settle(entry, false)
    }

    /// Moves to the previous entry.
    pub fn prev(&mut self) -> TypedMoved<'a, K, V> {
        let entry = self.inner.prev()?;
        self.settle(entry, true)
    }

    /// Moves to the first entry whose key is `key` or comes after it. A key that does not
    /// encode is `Error::Encode`, and the cursor does not move.
    pub fn seek<'k>(&mut self, key: impl Borrow<K::SelfType<'k>>) -> TypedMoved<'a, K, V> {
        let key = K::to_bytes(key.borrow())?;
        let entry = self.inner.seek(key)?;
        self.settle(entry, false)
    }

    /// From the entry a move landed on, steps past nested buckets (backwards when `back`)
    /// and decodes the first key and value found.
    fn settle(&mut self, mut entry: Option<crate::Entry<'a>>, back: bool) -> TypedMoved<'a, K, V> {
        loop {
            match entry {
                None => return Ok(None),
                Some(found) if found.is_bucket() => {
                    entry = if back {
                        self.inner.prev()?
                    } else {
                        self.inner.next()?
                    };
                }
                Some(found) => return decode::<K, V>(found).map(Some),
            }
        }
    }
}
