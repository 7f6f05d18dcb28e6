//! Cursors and iterators over a bucket.

use crate::bucket::state::BucketState;
use crate::engine::context::WriteContext;
use crate::error::{Error, Result};
use rbolt_btree::{Delete, TreeView};
use rbolt_page::LEAF_FLAG_BUCKET;
use smallvec::SmallVec;
use std::ops::Bound;

/// One entry of a bucket: a key and either a value or a nested bucket.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// # db.update(|tx| {
/// #     let mut b = tx.create_bucket("b")?;
/// #     for key in ["a", "b", "c"] {
/// #         b.put(key, "v")?;
/// #     }
/// #     Ok::<_, rbolt::Error>(())
/// # })?;
/// db.update(|tx| {
///     let mut b = tx.bucket_mut("b")?.unwrap();
///     b.create_bucket("d")?;
///     let entries: Vec<rbolt::Entry<'_>> = b.range("c"..).collect::<Result<_, _>>()?;
///     assert_eq!((entries[0].key(), entries[0].value()), (&b"c"[..], Some(&b"v"[..])));
///     assert_eq!((entries[1].key(), entries[1].value()), (&b"d"[..], None));
///     assert!(entries[1].is_bucket());
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
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
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.view(|tx| {
    ///     let first = tx.bucket("b")?.unwrap().iter().next().transpose()?.unwrap();
    ///     assert_eq!(first.key(), b"a");
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    #[inline]
    pub fn key(&self) -> &'a [u8] {
        self.key
    }

    /// The value, or `None` when the key holds a nested bucket.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut("b")?.unwrap();
    ///     b.create_bucket("nested")?;
    ///     let mut cursor = b.cursor();
    ///     assert_eq!(cursor.seek("a")?.unwrap().value(), Some(&b"v"[..]));
    ///     assert_eq!(cursor.seek("nested")?.unwrap().value(), None);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    #[inline]
    pub fn value(&self) -> Option<&'a [u8]> {
        (!self.bucket).then_some(self.value)
    }

    /// Whether the key holds a nested bucket.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut("b")?.unwrap();
    ///     b.create_bucket("nested")?;
    ///     let buckets = b.iter().filter(|e| e.as_ref().is_ok_and(|e| e.is_bucket())).count();
    ///     assert_eq!(buckets, 1);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    #[inline]
    pub fn is_bucket(&self) -> bool {
        self.bucket
    }

    /// The raw stored value: for a nested bucket, its bucket value (header and maybe an
    /// inline page), as bbolt's tools show it. A nested bucket's value is rewritten at commit,
    /// so inside a write transaction it need not show that transaction's changes to the bucket.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("k", "v")?;
    ///     b.create_bucket("nested")?.set_sequence(7)?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let mut cursor = tx.bucket("b")?.unwrap().cursor();
    ///     // a value's raw value is itself
    ///     assert_eq!(cursor.seek("k")?.unwrap().raw_value(), b"v");
    ///     let nested = cursor.seek("nested")?.unwrap();
    ///     // A bucket's raw value starts with its header: root page id, then sequence
    ///     // (little-endian).
    ///     assert_eq!(&nested.raw_value()[8..16], &7u64.to_le_bytes()[..]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
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
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut b = tx.create_bucket("b")?;
///     for key in ["apple", "banana", "cherry"] {
///         b.put(key, "fruit")?;
///     }
///     Ok::<_, rbolt::Error>(())
/// })?;
/// db.view(|tx| {
///     let mut cursor = tx.bucket("b")?.unwrap().cursor();
///     // `seek` lands on the first key not less than the one asked for.
///     assert_eq!(cursor.seek("b")?.map(|e| e.key()), Some(&b"banana"[..]));
///     assert_eq!(cursor.next()?.map(|e| e.key()), Some(&b"cherry"[..]));
///     assert!(cursor.next()?.is_none()); // off the end, still usable
///     assert_eq!(cursor.prev()?.map(|e| e.key()), Some(&b"cherry"[..]));
///     assert_eq!(cursor.first()?.map(|e| e.key()), Some(&b"apple"[..]));
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Cursor<'a> {
    inner: rbolt_btree::Cursor<'a>,
}

impl<'a> Cursor<'a> {
    pub(crate) fn new(inner: rbolt_btree::Cursor<'a>) -> Cursor<'a> {
        Cursor { inner }
    }

    /// Moves to the first entry.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.view(|tx| {
    ///     let mut cursor = tx.bucket("b")?.unwrap().cursor();
    ///     assert_eq!(cursor.first()?.map(|e| e.key()), Some(&b"a"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn first(&mut self) -> Moved<'a> {
        Ok(self.inner.first()?.map(entry_of))
    }

    /// Moves to the last entry.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.view(|tx| {
    ///     let mut cursor = tx.bucket("b")?.unwrap().cursor();
    ///     assert_eq!(cursor.last()?.map(|e| e.key()), Some(&b"c"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn last(&mut self) -> Moved<'a> {
        Ok(self.inner.last()?.map(entry_of))
    }

    /// Moves to the next entry.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.view(|tx| {
    ///     let mut cursor = tx.bucket("b")?.unwrap().cursor();
    ///     // a fresh cursor starts before the first
    ///     assert_eq!(cursor.next()?.map(|e| e.key()), Some(&b"a"[..]));
    ///     assert_eq!(cursor.next()?.map(|e| e.key()), Some(&b"b"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    #[expect(
        clippy::should_implement_trait,
        reason = "fallible and bidirectional; Iter is the Iterator"
    )]
    pub fn next(&mut self) -> Moved<'a> {
        Ok(self.inner.next()?.map(entry_of))
    }

    /// Moves to the previous entry.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.view(|tx| {
    ///     let mut cursor = tx.bucket("b")?.unwrap().cursor();
    ///     cursor.last()?;
    ///     assert_eq!(cursor.prev()?.map(|e| e.key()), Some(&b"b"[..]));
    ///     cursor.first()?;
    ///     assert_eq!(cursor.prev()?, None); // before the start
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn prev(&mut self) -> Moved<'a> {
        Ok(self.inner.prev()?.map(entry_of))
    }

    /// Moves to the first entry whose key is not less than `key`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.view(|tx| {
    ///     let mut cursor = tx.bucket("b")?.unwrap().cursor();
    ///     assert_eq!(cursor.seek("b")?.map(|e| e.key()), Some(&b"b"[..])); // exact
    ///     assert_eq!(cursor.seek("bb")?.map(|e| e.key()), Some(&b"c"[..])); // the next key up
    ///     assert_eq!(cursor.seek("z")?, None); // past the last
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn seek(&mut self, key: impl AsRef<[u8]>) -> Moved<'a> {
        let key = key.as_ref();
        Ok(self.inner.seek(key)?.map(entry_of))
    }

    /// The entry the cursor is on.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.view(|tx| {
    ///     let mut cursor = tx.bucket("b")?.unwrap().cursor();
    ///     cursor.seek("b")?;
    ///     assert_eq!(cursor.current()?.map(|e| e.key()), Some(&b"b"[..])); // does not move
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn current(&self) -> Moved<'a> {
        Ok(self.inner.current()?.map(entry_of))
    }
}

/// A bound of a range, its key kept inline when short.
type KeyBound = Bound<SmallVec<[u8; 32]>>;

/// The entries of a bucket (or a range of them) in key order, from either end. Items are
/// `Result`s: reading a corrupt page ends the iteration with an error.
///
/// Deleting inside the loop does not compile: the iterator borrows the bucket. To delete
/// what a loop would pick, use [`BucketMut::retain`](crate::BucketMut::retain) or
/// [`BucketMut::try_retain`](crate::BucketMut::try_retain) (by predicate),
/// [`BucketMut::extract_if`](crate::BucketMut::extract_if) (and get the entries),
/// [`BucketMut::delete_range`](crate::BucketMut::delete_range),
/// [`BucketMut::delete_prefix`](crate::BucketMut::delete_prefix),
/// [`BucketMut::clear`](crate::BucketMut::clear), or
/// [`BucketMut::pop_first`](crate::BucketMut::pop_first) and
/// [`BucketMut::pop_last`](crate::BucketMut::pop_last): each is one walk over the leaves it
/// touches, and changes nothing when it fails. A [`CursorMut`] deletes where it stands too.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// # db.update(|tx| {
/// #     let mut b = tx.create_bucket("b")?;
/// #     for key in ["a", "b", "c"] {
/// #         b.put(key, "v")?;
/// #     }
/// #     Ok::<_, rbolt::Error>(())
/// # })?;
/// db.view(|tx| {
///     let b = tx.bucket("b")?.unwrap();
///     let mut iter = b.iter();
///     assert_eq!(iter.next().transpose()?.map(|e| e.key()), Some(&b"a"[..]));
///     assert_eq!(iter.next_back().transpose()?.map(|e| e.key()), Some(&b"c"[..]));
///     // The two ends meet in the middle: each entry comes out once.
///     assert_eq!(iter.next().transpose()?.map(|e| e.key()), Some(&b"b"[..]));
///     assert!(iter.next_back().is_none());
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
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

impl<'a> Iter<'a> {
    /// One step from the front or the back: the next entry unless the two ends have met or
    /// the range ends; an error ends the iteration after it is returned.
    #[inline]
    fn step(&mut self, back: bool) -> Option<Result<Entry<'a>>> {
        if self.done {
            return None;
        }
        let step = if back {
            self.back_step()
        } else {
            self.front_step()
        };
        match step {
            Err(error) => {
                self.done = true;
                Some(Err(error.into()))
            }
            Ok(None) => {
                self.done = true;
                None
            }
            Ok(Some(entry)) => {
                let inside = if back {
                    self.after_start(entry.key)
                        && self.front_last.is_none_or(|front| entry.key > front)
                } else {
                    self.before_end(entry.key) && self.back_last.is_none_or(|back| entry.key < back)
                };
                if !inside {
                    self.done = true;
                    return None;
                }
                if back {
                    self.back_last = Some(entry.key);
                } else {
                    self.front_last = Some(entry.key);
                }
                Some(Ok(entry_of(entry)))
            }
        }
    }
}

impl<'a> Iterator for Iter<'a> {
    type Item = Result<Entry<'a>>;

    fn next(&mut self) -> Option<Self::Item> {
        self.step(false)
    }
}

impl DoubleEndedIterator for Iter<'_> {
    fn next_back(&mut self) -> Option<Self::Item> {
        self.step(true)
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
/// `delete`, `next` gives the entry after the deleted one and `prev` the one before. Each move
/// looks its key up again; to delete a range, a prefix or by predicate, the one-walk
/// [`BucketMut::delete_range`](crate::BucketMut::delete_range),
/// [`BucketMut::delete_prefix`](crate::BucketMut::delete_prefix),
/// [`BucketMut::retain`](crate::BucketMut::retain) and
/// [`BucketMut::extract_if`](crate::BucketMut::extract_if) are faster, and a failure in them
/// changes nothing.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut log = tx.create_bucket("log")?;
///     for i in 0..10u32 {
///         log.put(i.to_be_bytes(), "entry")?;
///     }
///     // Delete every entry below 4 while walking forwards.
///     let mut cursor = log.cursor_mut();
///     let mut entry = cursor.first()?.map(|e| e.key().to_vec());
///     while let Some(key) = entry {
///         if key.as_slice() >= &4u32.to_be_bytes()[..] {
///             break;
///         }
///         cursor.delete()?;
///         entry = cursor.next()?.map(|e| e.key().to_vec());
///     }
///     drop(cursor);
///     assert_eq!(log.iter().count(), 6);
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Debug)]
pub struct CursorMut<'a> {
    tx: &'a WriteContext,
    state: &'a mut BucketState,
    position: Position,
}

impl<'a> CursorMut<'a> {
    pub(crate) fn new(tx: &'a WriteContext, state: &'a mut BucketState) -> CursorMut<'a> {
        CursorMut {
            tx,
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
        let view = self.state.tree.view(self.tx.pages());
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
            let view = self.state.tree.view(self.tx.pages());
            let mut cursor = view.cursor();
            step(&mut cursor, &self.position)?.map(|e| (e.key.to_vec(), e.is_bucket()))
        };
        self.settle(found, forward);
        self.current_entry()
    }

    /// Moves to the first entry.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut("b")?.unwrap();
    ///     let mut cursor = b.cursor_mut();
    ///     assert_eq!(cursor.first()?.map(|e| e.key()), Some(&b"a"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn first(&mut self) -> Moved<'_> {
        self.moved(true, |c, _| c.first())
    }

    /// Moves to the last entry.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut("b")?.unwrap();
    ///     let mut cursor = b.cursor_mut();
    ///     assert_eq!(cursor.last()?.map(|e| e.key()), Some(&b"c"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn last(&mut self) -> Moved<'_> {
        self.moved(false, |c, _| c.last())
    }

    /// Moves to the first entry whose key is not less than `key`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut("b")?.unwrap();
    ///     let mut cursor = b.cursor_mut();
    ///     assert_eq!(cursor.seek("bb")?.map(|e| e.key()), Some(&b"c"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn seek(&mut self, key: impl AsRef<[u8]>) -> Moved<'_> {
        let key = key.as_ref();
        self.moved(true, |c, _| c.seek(key))
    }

    /// Moves to the next entry (the entry after a deleted one, after `delete`).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut("b")?.unwrap();
    ///     let mut cursor = b.cursor_mut();
    ///     cursor.seek("b")?;
    ///     cursor.delete()?;
    ///     // the entry after the deleted one
    ///     assert_eq!(cursor.next()?.map(|e| e.key()), Some(&b"c"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
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
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut("b")?.unwrap();
    ///     let mut cursor = b.cursor_mut();
    ///     cursor.seek("b")?;
    ///     cursor.delete()?;
    ///     // the entry before the deleted one
    ///     assert_eq!(cursor.prev()?.map(|e| e.key()), Some(&b"a"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
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
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut("b")?.unwrap();
    ///     let mut cursor = b.cursor_mut();
    ///     cursor.seek("b")?;
    ///     assert_eq!(cursor.current()?.map(|e| e.key()), Some(&b"b"[..]));
    ///     cursor.delete()?;
    ///     assert_eq!(cursor.current()?, None); // gone until the cursor moves
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn current(&self) -> Moved<'_> {
        self.current_entry()
    }

    /// Deletes the entry the cursor is on. A nested bucket gives `IncompatibleValue` (use
    /// `delete_bucket`); a cursor on no entry gives `Ok(false)`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| {
    /// #     let mut b = tx.create_bucket("b")?;
    /// #     for key in ["a", "b", "c"] {
    /// #         b.put(key, "v")?;
    /// #     }
    /// #     Ok::<_, rbolt::Error>(())
    /// # })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut("b")?.unwrap();
    ///     let mut cursor = b.cursor_mut();
    ///     assert!(!cursor.delete()?); // not on an entry yet
    ///     cursor.first()?;
    ///     assert!(cursor.delete()?);
    ///     drop(cursor);
    ///     assert_eq!(b.get("a")?, None);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn delete(&mut self) -> Result<bool> {
        let Position::At(key) = &self.position else {
            return Ok(false);
        };
        let mut core = self.tx.core.borrow_mut();
        match self
            .state
            .tree
            .delete(self.tx.pages(), &mut core.arena, key, 0)?
        {
            Delete::Deleted { .. } => Ok(true),
            Delete::NotFound => Ok(false),
            Delete::KindConflict { flags } => {
                debug_assert!(flags & LEAF_FLAG_BUCKET != 0);
                Err(Error::IncompatibleValue)
            }
        }
    }
}

/// An entry of a bucket: a key and either its value or a nested bucket.
pub(crate) fn entry_of(entry: rbolt_btree::Entry<'_>) -> Entry<'_> {
    Entry::new(entry.key, entry.value, entry.is_bucket())
}
