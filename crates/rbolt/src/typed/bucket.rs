//! Typed handles on buckets: [`BucketDef`], the typed views [`TypedBucket`] and
//! [`TypedBucketMut`], and the transaction and bucket methods that open them.

use super::iter::{TypedCursor, TypedIter, encode_bound};
use super::{Key, KeyPart, TupleKey, TupleKey2, Value};
use crate::bucket::{Bucket, BucketMut};
use crate::error::Result;
use crate::tx::{ReadTx, WriteTx};
use smallvec::SmallVec;
use std::borrow::Borrow;
use std::marker::PhantomData;
use std::ops::RangeBounds;

/// A bucket's name and the types of its keys and values, declared once:
/// `const USERS: BucketDef<u64, &str> = BucketDef::new("users");`.
///
/// ```
/// use rbolt::BucketDef;
/// const USERS: BucketDef<u64, &str> = BucketDef::new("users");
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| tx.open_bucket(USERS)?.put(1, "alice"))?;
/// db.view(|tx| {
///     assert_eq!(tx.open_bucket(USERS)?.unwrap().get(1)?, Some("alice"));
///     // The same bucket through the bytes API: the key is the u64's big-endian bytes.
///     let raw = tx.bucket(USERS.name())?.unwrap();
///     assert_eq!(raw.get(1u64.to_be_bytes())?, Some(&b"alice"[..]));
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Debug)]
pub struct BucketDef<K, V> {
    name: &'static str,
    types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> Clone for BucketDef<K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, V> Copy for BucketDef<K, V> {}

impl<K: Key, V: Value> BucketDef<K, V> {
    /// The definition of the top-level bucket `name`.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const COUNTS: BucketDef<&str, u32> = BucketDef::new("counts");
    /// assert_eq!(COUNTS.name(), "counts");
    /// ```
    pub const fn new(name: &'static str) -> BucketDef<K, V> {
        BucketDef {
            name,
            types: PhantomData,
        }
    }

    /// The bucket's name.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const COUNTS: BucketDef<&str, u32> = BucketDef::new("counts");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| tx.open_bucket(COUNTS).map(drop))?;
    /// assert!(db.begin_read()?.bucket(COUNTS.name())?.is_some());
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub const fn name(&self) -> &'static str {
        self.name
    }
}

impl ReadTx<'_> {
    /// The typed top-level bucket `def` names, if it exists.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const COUNTS: BucketDef<&str, u32> = BucketDef::new("counts");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// assert!(db.begin_read()?.open_bucket(COUNTS)?.is_none()); // not created yet
    /// db.update(|tx| tx.open_bucket(COUNTS)?.put("hits", 3))?;
    /// let tx = db.begin_read()?;
    /// assert_eq!(tx.open_bucket(COUNTS)?.unwrap().get("hits")?, Some(3));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn open_bucket<K: Key, V: Value>(
        &self,
        def: BucketDef<K, V>,
    ) -> Result<Option<TypedBucket<'_, K, V>>> {
        Ok(self.bucket(def.name)?.map(TypedBucket::new))
    }
}

impl WriteTx<'_> {
    /// The typed top-level bucket `def` names, created if it does not exist.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const COUNTS: BucketDef<&str, u32> = BucketDef::new("counts");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut counts = tx.open_bucket(COUNTS)?; // created here
    ///     let hits = counts.get("hits")?.unwrap_or(0);
    ///     counts.put("hits", hits + 1)?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.update(|tx| {
    ///     let counts = tx.open_bucket(COUNTS)?; // opened, content and all
    ///     assert_eq!(counts.get("hits")?, Some(1));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn open_bucket<K: Key, V: Value>(
        &self,
        def: BucketDef<K, V>,
    ) -> Result<TypedBucketMut<'_, K, V>> {
        Ok(TypedBucketMut::new(
            self.create_bucket_if_not_exists(def.name)?,
        ))
    }
}

impl<'a> Bucket<'a> {
    /// This bucket, read with keys of type `K` and values of type `V`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut parent = tx.create_bucket("parent")?;
    ///     parent.create_bucket("ids")?.put(7u64.to_be_bytes(), "seven")?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     // A nested bucket has no BucketDef; read it typed from its byte handle.
    ///     let ids = tx.bucket("parent")?.unwrap().bucket("ids")?.unwrap().typed::<u64, &str>();
    ///     assert_eq!(ids.get(7)?, Some("seven"));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn typed<K: Key, V: Value>(self) -> TypedBucket<'a, K, V> {
        TypedBucket::new(self)
    }
}

impl<'a> BucketMut<'a> {
    /// This bucket, read and written with keys of type `K` and values of type `V`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut parent = tx.create_bucket("parent")?;
    ///     let mut scores = parent.create_bucket("scores")?.typed::<&str, f64>();
    ///     scores.put("half", 0.5)?;
    ///     assert_eq!(scores.get("half")?, Some(0.5));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn typed<K: Key, V: Value>(self) -> TypedBucketMut<'a, K, V> {
        TypedBucketMut::new(self)
    }
}

/// A bucket read with typed keys and values (see [`BucketDef`]). Values borrow from the
/// transaction where their type does.
///
/// ```
/// use rbolt::BucketDef;
/// const NAMES: BucketDef<u32, &str> = BucketDef::new("names");
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| tx.open_bucket(NAMES)?.put(1, "one"))?;
/// let tx = db.begin_read()?;
/// let names = tx.open_bucket(NAMES)?.unwrap();
/// let one: &str = names.get(1)?.unwrap(); // borrowed from the transaction, not copied
/// assert_eq!(one, "one");
/// # Ok::<(), rbolt::Error>(())
/// ```
pub struct TypedBucket<'a, K, V> {
    bucket: Bucket<'a>,
    types: PhantomData<fn() -> (K, V)>,
}

// By hand: a derive would ask `K` and `V` (markers, never stored) to be `Clone` and `Debug`.
impl<K, V> Clone for TypedBucket<'_, K, V> {
    fn clone(&self) -> Self {
        *self
    }
}

impl<K, V> Copy for TypedBucket<'_, K, V> {}

impl<K, V> std::fmt::Debug for TypedBucket<'_, K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedBucket")
            .field("bucket", &self.bucket)
            .finish()
    }
}

impl<'a, K: Key, V: Value> TypedBucket<'a, K, V> {
    fn new(bucket: Bucket<'a>) -> TypedBucket<'a, K, V> {
        TypedBucket {
            bucket,
            types: PhantomData,
        }
    }

    /// The bytes API of the same bucket.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const NAMES: BucketDef<u32, &str> = BucketDef::new("names");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| tx.open_bucket(NAMES)?.put(1, "one"))?;
    /// db.view(|tx| {
    ///     let names = tx.open_bucket(NAMES)?.unwrap();
    ///     assert_eq!(names.bytes().get(1u32.to_be_bytes())?, Some(&b"one"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn bytes(&self) -> Bucket<'a> {
        self.bucket
    }

    /// The value of `key`, if there is one.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const AGES: BucketDef<&str, u8> = BucketDef::new("ages");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     tx.open_bucket(AGES)?.put("alice", 42)?;
    ///     // written through the bytes API
    ///     tx.bucket_mut("ages")?.unwrap().put("bob", "not a u8")?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let ages = tx.open_bucket(AGES)?.unwrap();
    ///     assert_eq!(ages.get("alice")?, Some(42));
    ///     assert_eq!(ages.get("carol")?, None);
    ///     assert!(matches!(ages.get("bob"), Err(rbolt::Error::Decode { .. })));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn get<'k>(&self, key: impl Borrow<K::SelfType<'k>>) -> Result<Option<V::SelfType<'a>>> {
        match self.bucket.get(K::to_bytes(key.borrow())?)? {
            Some(bytes) => V::from_bytes(bytes).map(Some),
            None => Ok(None),
        }
    }

    /// Every key and value in key order (nested buckets are skipped); double-ended.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const SQUARES: BucketDef<u16, u32> = BucketDef::new("squares");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut squares = tx.open_bucket(SQUARES)?;
    ///     for n in [3u16, 1, 300] {
    ///         squares.put(n, u32::from(n) * u32::from(n))?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let squares = tx.open_bucket(SQUARES)?.unwrap();
    ///     let all: Vec<(u16, u32)> = squares.iter().collect::<Result<_, _>>()?;
    ///     assert_eq!(all, [(1, 1), (3, 9), (300, 90000)]); // numeric order, not text order
    ///     assert_eq!(squares.iter().next_back().transpose()?, Some((300, 90000)));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn iter(&self) -> TypedIter<'a, K, V> {
        TypedIter::new(self.bucket.iter())
    }

    /// The keys and values whose keys lie in `range`, in key order; double-ended.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const TEMPS: BucketDef<i32, f32> = BucketDef::new("temps");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut temps = tx.open_bucket(TEMPS)?;
    ///     for day in -3..=3 {
    ///         temps.put(day, day as f32 * 1.5)?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let temps = tx.open_bucket(TEMPS)?.unwrap();
    ///     let days: Vec<i32> =
    ///         temps.range(-1..2).map(|e| e.map(|(d, _)| d)).collect::<Result<_, _>>()?;
    ///     assert_eq!(days, [-1, 0, 1]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn range<'k, R: RangeBounds<K::SelfType<'k>>>(&self, range: R) -> TypedIter<'a, K, V> {
        let bounds = encode_bound::<K>(range.start_bound())
            .and_then(|start| Ok((start, encode_bound::<K>(range.end_bound())?)));
        match bounds {
            Ok((start, end)) => TypedIter::new(self.bucket.range::<&[u8]>((
                start.as_ref().map(AsRef::as_ref),
                end.as_ref().map(AsRef::as_ref),
            ))),
            Err(error) => TypedIter::failed(error),
        }
    }

    /// The keys and values whose keys' bytes start with the bytes of `prefix`, in key order;
    /// double-ended. For text keys that is a text prefix; for a tuple key ending in text,
    /// the leading components and a prefix of the text. (A prefix of a tuple's leading
    /// components alone is a [`range`](TypedBucket::range): `(7, "")..(8, "")`.)
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const USERS: BucketDef<&str, u32> = BucketDef::new("users");
    /// const TAGS: BucketDef<(u32, &str), ()> = BucketDef::new("tags");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut users = tx.open_bucket(USERS)?;
    ///     for (i, name) in ["alice", "al", "bob", "alfred"].into_iter().enumerate() {
    ///         users.put(name, i as u32)?;
    ///     }
    ///     let mut tags = tx.open_bucket(TAGS)?;
    ///     for (post, tag) in [(1, "rust"), (1, "rbolt"), (1, "go"), (2, "rust")] {
    ///         tags.put((post, tag), ())?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let users = tx.open_bucket(USERS)?.unwrap();
    ///     let al: Vec<(&str, u32)> = users.prefix("al").collect::<Result<_, _>>()?;
    ///     assert_eq!(al, [("al", 1), ("alfred", 3), ("alice", 0)]);
    ///     let tags = tx.open_bucket(TAGS)?.unwrap();
    ///     let r: Vec<((u32, &str), ())> = tags.prefix((1, "r")).collect::<Result<_, _>>()?;
    ///     assert_eq!(r, [((1, "rbolt"), ()), ((1, "rust"), ())]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn prefix<'k>(&self, prefix: impl Borrow<K::SelfType<'k>>) -> TypedIter<'a, K, V> {
        match K::to_bytes(prefix.borrow()) {
            Ok(bytes) => TypedIter::new(self.bucket.prefix(bytes)),
            Err(error) => TypedIter::failed(error),
        }
    }

    /// The keys and values whose tuple keys begin with the component `first`, in key order;
    /// double-ended: "every id under tag T" for a `(tag, id)` key. A component's bytes say
    /// where they end ([`KeyPart`]), so `"rust"` does not take `"rusty"`'s keys. See
    /// [`KeyPart`] for an example.
    pub fn with_first<'k>(
        &self,
        first: impl Borrow<<K::First as Value>::SelfType<'k>>,
    ) -> TypedIter<'a, K, V>
    where
        K: TupleKey,
    {
        let mut bytes: SmallVec<[u8; 32]> = SmallVec::new();
        match K::First::write_part(first.borrow(), &mut |part| bytes.extend_from_slice(part)) {
            Ok(()) => TypedIter::new(self.bucket.prefix(bytes)),
            Err(error) => TypedIter::failed(error),
        }
    }

    /// The keys and values whose tuple keys (of three or more components) begin with the
    /// components `first` and `second`, in key order; one prefix scan, as
    /// [`with_first`](TypedBucket::with_first): every `day` under `(user, year)` for a
    /// `(user, year, day)` key.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const VISITS: BucketDef<(&str, u16, u16), u32> = BucketDef::new("visits");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut visits = tx.open_bucket(VISITS)?;
    ///     for (user, year, day, n) in [("ada", 2025, 40, 1), ("ada", 2026, 3, 2), ("ada", 2026, 9, 5)] {
    ///         visits.put((user, year, day), n)?;
    ///     }
    ///     let days: Vec<(u16, u32)> = visits
    ///         .with_first_two("ada", 2026)
    ///         .map(|entry| entry.map(|((_, _, day), n)| (day, n)))
    ///         .collect::<rbolt::Result<_>>()?;
    ///     assert_eq!(days, [(3, 2), (9, 5)]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn with_first_two<'k>(
        &self,
        first: impl Borrow<<K::First as Value>::SelfType<'k>>,
        second: impl Borrow<<K::Second as Value>::SelfType<'k>>,
    ) -> TypedIter<'a, K, V>
    where
        K: TupleKey2,
    {
        let mut bytes: SmallVec<[u8; 32]> = SmallVec::new();
        let mut out = |part: &[u8]| bytes.extend_from_slice(part);
        let written = K::First::write_part(first.borrow(), &mut out)
            .and_then(|()| K::Second::write_part(second.borrow(), &mut out));
        match written {
            Ok(()) => TypedIter::new(self.bucket.prefix(bytes)),
            Err(error) => TypedIter::failed(error),
        }
    }

    /// The entry with the smallest key, if the bucket holds one (nested buckets are skipped).
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const QUEUE: BucketDef<u64, &str> = BucketDef::new("queue");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut queue = tx.open_bucket(QUEUE)?;
    ///     assert_eq!(queue.first()?, None);
    ///     for (at, job) in [(30, "later"), (10, "now"), (20, "soon")] {
    ///         queue.put(at, job)?;
    ///     }
    ///     assert_eq!(queue.first()?, Some((10, "now")));
    ///     assert_eq!(queue.last()?, Some((30, "later")));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn first(&self) -> Result<Option<(K::SelfType<'a>, V::SelfType<'a>)>> {
        self.iter().next().transpose()
    }

    /// The entry with the largest key, if the bucket holds one (nested buckets are skipped);
    /// see [`first`](TypedBucket::first).
    pub fn last(&self) -> Result<Option<(K::SelfType<'a>, V::SelfType<'a>)>> {
        self.iter().next_back().transpose()
    }

    /// How many keys hold values (nested buckets are not counted). bbolt's format keeps no
    /// count, so this walks every leaf of the bucket: O(n), as `iter().count()`, but without
    /// decoding anything.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const SEEN: BucketDef<u32, ()> = BucketDef::new("seen");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut seen = tx.open_bucket(SEEN)?;
    ///     assert!(seen.is_empty()?);
    ///     for id in [3, 1, 3, 2] {
    ///         seen.put(id, ())?;
    ///     }
    ///     seen.bytes().create_bucket("nested")?; // not counted
    ///     assert_eq!(seen.len()?, 3);
    ///     assert!(!seen.is_empty()?);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn len(&self) -> Result<u64> {
        let mut n = 0;
        for entry in self.bucket.iter() {
            n += u64::from(!entry?.is_bucket());
        }
        Ok(n)
    }

    /// Whether no key holds a value (nested buckets aside); stops at the first value.
    pub fn is_empty(&self) -> Result<bool> {
        for entry in self.bucket.iter() {
            if !entry?.is_bucket() {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// A typed cursor over the bucket: `seek`, `first`, `last`, `next`, `prev`.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const PRICES: BucketDef<u32, f64> = BucketDef::new("prices");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut prices = tx.open_bucket(PRICES)?;
    ///     for (day, price) in [(1, 9.5), (4, 10.0), (9, 8.25)] {
    ///         prices.put(day, price)?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let prices = tx.open_bucket(PRICES)?.unwrap();
    ///     let mut cursor = prices.cursor();
    ///     // The first entry at or after day 2.
    ///     assert_eq!(cursor.seek(2)?, Some((4, 10.0)));
    ///     assert_eq!(cursor.next()?, Some((9, 8.25)));
    ///     assert_eq!(cursor.next()?, None); // past the end, still usable
    ///     assert_eq!(cursor.prev()?, Some((9, 8.25)));
    ///     assert_eq!(cursor.seek(10)?, None); // nothing at or after day 10
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn cursor(&self) -> TypedCursor<'a, K, V> {
        TypedCursor::new(self.bucket.cursor())
    }
}

/// A bucket of a write transaction with typed keys and values (see [`BucketDef`]).
///
/// ```
/// use rbolt::BucketDef;
/// const STOCK: BucketDef<&str, u32> = BucketDef::new("stock");
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut stock = tx.open_bucket(STOCK)?;
///     stock.put("apples", 10)?;
///     let left = stock.get("apples")?.unwrap() - 3;
///     stock.put("apples", left)?;
///     assert_eq!(stock.get("apples")?, Some(7));
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
pub struct TypedBucketMut<'a, K, V> {
    bucket: BucketMut<'a>,
    types: PhantomData<fn() -> (K, V)>,
}

impl<K, V> std::fmt::Debug for TypedBucketMut<'_, K, V> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TypedBucketMut")
            .field("bucket", &self.bucket)
            .finish()
    }
}

impl<'a, K: Key, V: Value> TypedBucketMut<'a, K, V> {
    fn new(bucket: BucketMut<'a>) -> TypedBucketMut<'a, K, V> {
        TypedBucketMut {
            bucket,
            types: PhantomData,
        }
    }

    /// The bytes API of the same bucket.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const STOCK: BucketDef<&str, u32> = BucketDef::new("stock");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut stock = tx.open_bucket(STOCK)?;
    ///     // What the typed API does not cover, such as the sequence, the bytes API does.
    ///     let id = stock.bytes().next_sequence()?;
    ///     stock.put("next-id", id as u32)?;
    ///     assert_eq!(stock.get("next-id")?, Some(1));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn bytes(&mut self) -> &mut BucketMut<'a> {
        &mut self.bucket
    }

    /// The bucket as a typed read view.
    ///
    /// ```
    /// use rbolt::{BucketDef, TypedBucket};
    /// const STOCK: BucketDef<&str, u32> = BucketDef::new("stock");
    /// fn total(bucket: TypedBucket<'_, &str, u32>) -> rbolt::Result<u32> {
    ///     bucket.iter().try_fold(0, |sum, e| e.map(|(_, n)| sum + n))
    /// }
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut stock = tx.open_bucket(STOCK)?;
    ///     stock.put("apples", 10)?;
    ///     stock.put("pears", 5)?;
    ///     assert_eq!(total(stock.as_typed_bucket())?, 15);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn as_typed_bucket(&self) -> TypedBucket<'_, K, V> {
        TypedBucket::new(self.bucket.as_bucket())
    }

    /// The value of `key`, if there is one.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const FLAGS: BucketDef<&str, bool> = BucketDef::new("flags");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut flags = tx.open_bucket(FLAGS)?;
    ///     flags.put("dark-mode", true)?;
    ///     assert_eq!(flags.get("dark-mode")?, Some(true));
    ///     assert_eq!(flags.get("beta")?, None);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn get<'k>(&self, key: impl Borrow<K::SelfType<'k>>) -> Result<Option<V::SelfType<'_>>> {
        self.as_typed_bucket().get(key)
    }

    /// Sets `key` to `value`.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const POINTS: BucketDef<(u8, u8), &str> = BucketDef::new("points");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut points = tx.open_bucket(POINTS)?;
    ///     points.put((1, 2), "a")?;
    ///     points.put((1, 2), "b")?; // replaces
    ///     assert_eq!(points.get((1, 2))?, Some("b"));
    ///     assert_eq!(points.iter().count(), 1);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn put<'k, 'v>(
        &mut self,
        key: impl Borrow<K::SelfType<'k>>,
        value: impl Borrow<V::SelfType<'v>>,
    ) -> Result<()> {
        // Both encoded before the bucket is touched: a value that cannot be written changes
        // nothing.
        let key = K::to_bytes(key.borrow())?;
        let value = V::to_bytes(value.borrow())?;
        self.bucket.put(key, value)
    }

    /// Deletes `key`; returns whether it was there.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const SESSIONS: BucketDef<u64, &str> = BucketDef::new("sessions");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut sessions = tx.open_bucket(SESSIONS)?;
    ///     sessions.put(7, "alice")?;
    ///     assert!(sessions.delete(7)?);
    ///     assert!(!sessions.delete(7)?); // already gone
    ///     assert_eq!(sessions.get(7)?, None);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn delete<'k>(&mut self, key: impl Borrow<K::SelfType<'k>>) -> Result<bool> {
        let key = K::to_bytes(key.borrow())?;
        self.bucket.delete(key)
    }

    /// Every key and value in key order (nested buckets are skipped); double-ended.
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const WORDS: BucketDef<&str, u32> = BucketDef::new("words");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut words = tx.open_bucket(WORDS)?;
    ///     words.put("b", 2)?;
    ///     words.put("a", 1)?;
    ///     words.bytes().create_bucket("nested")?; // skipped by the typed iterator
    ///     let all: Vec<(&str, u32)> = words.iter().collect::<Result<_, _>>()?;
    ///     assert_eq!(all, [("a", 1), ("b", 2)]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn iter(&self) -> TypedIter<'_, K, V> {
        self.as_typed_bucket().iter()
    }

    /// The keys and values whose keys lie in `range`, in key order; double-ended.
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
    ///     let newest: Vec<u64> =
    ///         log.range(97..).rev().map(|e| e.map(|(i, _)| i)).collect::<Result<_, _>>()?;
    ///     assert_eq!(newest, [99, 98, 97]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn range<'k, R: RangeBounds<K::SelfType<'k>>>(&self, range: R) -> TypedIter<'_, K, V> {
        self.as_typed_bucket().range(range)
    }

    /// The keys and values whose keys' bytes start with the bytes of `prefix`; see
    /// [`TypedBucket::prefix`].
    ///
    /// ```
    /// use rbolt::BucketDef;
    /// const PATHS: BucketDef<String, u64> = BucketDef::new("paths");
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut paths = tx.open_bucket(PATHS)?;
    ///     for (path, size) in [("/etc/hosts", 1), ("/etc/passwd", 2), ("/usr/bin", 3)] {
    ///         paths.put(path.to_string(), size)?;
    ///     }
    ///     let etc = paths.prefix("/etc/".to_string()).map(|e| e.map(|(_, size)| size));
    ///     assert_eq!(etc.sum::<rbolt::Result<u64>>()?, 3);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn prefix<'k>(&self, prefix: impl Borrow<K::SelfType<'k>>) -> TypedIter<'_, K, V> {
        self.as_typed_bucket().prefix(prefix)
    }

    /// The keys and values whose tuple keys begin with the component `first`; see
    /// [`TypedBucket::with_first`].
    pub fn with_first<'k>(
        &self,
        first: impl Borrow<<K::First as Value>::SelfType<'k>>,
    ) -> TypedIter<'_, K, V>
    where
        K: TupleKey,
    {
        self.as_typed_bucket().with_first(first)
    }

    /// The keys and values whose tuple keys begin with the components `first` and `second`;
    /// see [`TypedBucket::with_first_two`].
    pub fn with_first_two<'k>(
        &self,
        first: impl Borrow<<K::First as Value>::SelfType<'k>>,
        second: impl Borrow<<K::Second as Value>::SelfType<'k>>,
    ) -> TypedIter<'_, K, V>
    where
        K: TupleKey2,
    {
        self.as_typed_bucket().with_first_two(first, second)
    }

    /// The entry with the smallest key; see [`TypedBucket::first`].
    pub fn first(&self) -> Result<Option<(K::SelfType<'_>, V::SelfType<'_>)>> {
        self.as_typed_bucket().first()
    }

    /// The entry with the largest key; see [`TypedBucket::last`].
    pub fn last(&self) -> Result<Option<(K::SelfType<'_>, V::SelfType<'_>)>> {
        self.as_typed_bucket().last()
    }

    /// How many keys hold values; see [`TypedBucket::len`].
    pub fn len(&self) -> Result<u64> {
        self.as_typed_bucket().len()
    }

    /// Whether no key holds a value; see [`TypedBucket::is_empty`].
    pub fn is_empty(&self) -> Result<bool> {
        self.as_typed_bucket().is_empty()
    }

    /// A typed cursor over the bucket as it is now; see [`TypedBucket::cursor`].
    pub fn cursor(&self) -> TypedCursor<'_, K, V> {
        self.as_typed_bucket().cursor()
    }
}
