//! Typed buckets: keys and values as Rust types instead of bytes, in the spirit of redb's
//! `TableDefinition` and heed's codecs, on top of the byte API (which stays the primary one).
//!
//! A [`Value`] turns a type into bytes and back, borrowing from the transaction where the type
//! allows (`&str`, `&[u8]`); a [`Key`] is a value whose bytes sort as the values do, so ranges
//! and iteration come out in the type's order (integers are stored big-endian, signed ones
//! with the sign bit flipped; floats in `total_cmp` order). A [`BucketDef`] names a bucket and its two types once:
//!
//! ```
//! use rbolt::{BucketDef, Db};
//!
//! const SCORES: BucketDef<&str, u64> = BucketDef::new("scores");
//!
//! # let dir = tempfile::tempdir().unwrap();
//! let db = Db::open(dir.path().join("db"))?;
//! db.update(|tx| {
//!     let mut scores = tx.open_bucket(SCORES)?;
//!     scores.put("alice", 30)?;
//!     scores.put("bob", 12)?;
//!     Ok::<_, rbolt::Error>(())
//! })?;
//! db.view(|tx| {
//!     let scores = tx.open_bucket(SCORES)?.expect("created above");
//!     assert_eq!(scores.get("alice")?, Some(30));
//!     let all: Vec<(&str, u64)> = scores.iter().collect::<Result<_, _>>()?;
//!     assert_eq!(all, [("alice", 30), ("bob", 12)]);
//!     Ok::<_, rbolt::Error>(())
//! })?;
//! # Ok::<(), rbolt::Error>(())
//! ```

use crate::bucket::{Bucket, BucketMut};
use crate::error::{Error, Result};
use crate::iter::Iter;
use crate::tx::{ReadTx, WriteTx};
use smallvec::SmallVec;
use std::borrow::Borrow;
use std::marker::PhantomData;
use std::ops::{Bound, RangeBounds};

/// A type stored as bytes: how to write it and how to read it back.
///
/// ```
/// use rbolt::Value;
/// // Integers are stored big-endian; a value reads back from its bytes.
/// let bytes = <u32 as Value>::to_bytes(&258);
/// assert_eq!(bytes.as_ref(), [0, 0, 1, 2]);
/// assert_eq!(<u32 as Value>::from_bytes(&[0, 0, 1, 2])?, 258);
/// // Bytes that store no value of the type are a decode error, not a panic.
/// assert!(matches!(<u32 as Value>::from_bytes(&[1, 2]), Err(rbolt::Error::Decode { .. })));
/// assert!(matches!(<&str as Value>::from_bytes(&[0xFF]), Err(rbolt::Error::Decode { .. })));
/// # Ok::<(), rbolt::Error>(())
/// ```
pub trait Value {
    /// What a stored value reads back as; it may borrow from the transaction (`&'a str`).
    type SelfType<'a>;
    /// The bytes of a value: a borrowed slice, or a small owned buffer.
    type Bytes<'a>: AsRef<[u8]>
    where
        Self: 'a;

    /// The bytes that store `value`.
    fn to_bytes<'a>(value: &'a Self::SelfType<'_>) -> Self::Bytes<'a>
    where
        Self: 'a;

    /// The value `bytes` store, or `Error::Decode` when they do not store one.
    fn from_bytes(bytes: &[u8]) -> Result<Self::SelfType<'_>>;

    /// The type's name, for error messages.
    fn type_name() -> &'static str {
        std::any::type_name::<Self>()
    }
}

/// A [`Value`] whose bytes sort (bytewise, as bbolt sorts keys) in the same order as its
/// values, so that ranges and iteration follow the type's order.
///
/// ```
/// use rbolt::BucketDef;
/// const DELTAS: BucketDef<i64, &str> = BucketDef::new("deltas");
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut deltas = tx.open_bucket(DELTAS)?;
///     for n in [5, -1, 0, -300] {
///         deltas.put(n, "x")?;
///     }
///     // Keys come out in the type's order: negative numbers first.
///     let keys: Vec<i64> = deltas.iter().map(|e| e.map(|(k, _)| k)).collect::<Result<_, _>>()?;
///     assert_eq!(keys, [-300, -1, 0, 5]);
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
pub trait Key: Value {}

/// A [`Key`] whose bytes always have the same length: it can come first in a tuple key,
/// where the next component starts at a known offset.
///
/// ```
/// use rbolt::{BucketDef, FixedWidth};
/// assert_eq!(<u64 as FixedWidth>::WIDTH, 8);
/// // A fixed-width first component makes a tuple key: here (user id, timestamp, event name).
/// const EVENTS: BucketDef<(u32, u64, &str), ()> = BucketDef::new("events");
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut events = tx.open_bucket(EVENTS)?;
///     events.put((2, 10, "login"), ())?;
///     events.put((1, 20, "logout"), ())?;
///     events.put((1, 10, "login"), ())?;
///     let first = events.iter().next().transpose()?.map(|(k, ())| k);
///     assert_eq!(first, Some((1, 10, "login")));
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
pub trait FixedWidth: Key {
    /// The length of every value's bytes.
    const WIDTH: usize;
}

fn decode_error<T: Value + ?Sized>(reason: impl Into<String>) -> Error {
    Error::Decode {
        type_name: T::type_name(),
        reason: reason.into(),
    }
}

impl Value for &[u8] {
    type SelfType<'a> = &'a [u8];
    type Bytes<'a>
        = &'a [u8]
    where
        Self: 'a;

    fn to_bytes<'a>(value: &'a &[u8]) -> &'a [u8]
    where
        Self: 'a,
    {
        value
    }

    fn from_bytes(bytes: &[u8]) -> Result<&[u8]> {
        Ok(bytes)
    }
}
impl Key for &[u8] {}

impl Value for &str {
    type SelfType<'a> = &'a str;
    type Bytes<'a>
        = &'a [u8]
    where
        Self: 'a;

    fn to_bytes<'a>(value: &'a &str) -> &'a [u8]
    where
        Self: 'a,
    {
        value.as_bytes()
    }

    fn from_bytes(bytes: &[u8]) -> Result<&str> {
        std::str::from_utf8(bytes).map_err(|e| decode_error::<&str>(e.to_string()))
    }
}
impl Key for &str {}

impl<const N: usize> Value for [u8; N] {
    type SelfType<'a> = [u8; N];
    type Bytes<'a>
        = [u8; N]
    where
        Self: 'a;

    fn to_bytes<'a>(value: &'a [u8; N]) -> [u8; N]
    where
        Self: 'a,
    {
        *value
    }

    fn from_bytes(bytes: &[u8]) -> Result<[u8; N]> {
        bytes
            .try_into()
            .map_err(|_| decode_error::<[u8; N]>(format!("{} bytes, not {N}", bytes.len())))
    }
}
impl<const N: usize> Key for [u8; N] {}
impl<const N: usize> FixedWidth for [u8; N] {
    const WIDTH: usize = N;
}

impl Value for () {
    type SelfType<'a> = ();
    type Bytes<'a>
        = [u8; 0]
    where
        Self: 'a;

    fn to_bytes<'a>(_: &'a ()) -> [u8; 0]
    where
        Self: 'a,
    {
        []
    }

    fn from_bytes(bytes: &[u8]) -> Result<()> {
        if bytes.is_empty() {
            Ok(())
        } else {
            Err(decode_error::<()>(format!("{} bytes, not 0", bytes.len())))
        }
    }
}
impl Key for () {}

/// `bytes` as the `N` bytes of a `T`, or a decode error that says how many there were.
fn fixed_bytes<T: Value, const N: usize>(bytes: &[u8]) -> Result<[u8; N]> {
    bytes
        .try_into()
        .map_err(|_| decode_error::<T>(format!("{} bytes, not {N}", bytes.len())))
}

/// Big-endian integers: unsigned ones sort as stored; signed ones have their sign bit
/// flipped, so that negative numbers sort before positive ones.
macro_rules! integers {
    ($($ty:ty, $unsigned:ty, $signed:expr);* $(;)?) => {$(
        impl Value for $ty {
            type SelfType<'a> = $ty;
            type Bytes<'a> = [u8; std::mem::size_of::<$ty>()] where Self: 'a;

            fn to_bytes<'a>(value: &'a $ty) -> Self::Bytes<'a> where Self: 'a {
                let bits = *value as $unsigned;
                let bits = if $signed { bits ^ (1 << (<$unsigned>::BITS - 1)) } else { bits };
                bits.to_be_bytes()
            }

            fn from_bytes(bytes: &[u8]) -> Result<$ty> {
                let array = fixed_bytes::<$ty, { std::mem::size_of::<$ty>() }>(bytes)?;
                let bits = <$unsigned>::from_be_bytes(array);
                let bits = if $signed { bits ^ (1 << (<$unsigned>::BITS - 1)) } else { bits };
                Ok(bits as $ty)
            }
        }
        impl Key for $ty {}
        impl FixedWidth for $ty {
            const WIDTH: usize = std::mem::size_of::<$ty>();
        }
    )*};
}

integers! {
    u8, u8, false;
    u16, u16, false;
    u32, u32, false;
    u64, u64, false;
    u128, u128, false;
    i8, u8, true;
    i16, u16, true;
    i32, u32, true;
    i64, u64, true;
    i128, u128, true;
}

/// Floating-point numbers, big-endian with their bits arranged so that the bytes sort as
/// `total_cmp` orders the numbers (negative ones have every bit flipped, the others only the
/// sign bit): -∞ < -1.0 < -0.0 < 0.0 < 1.0 < ∞, NaNs at the ends.
macro_rules! floats {
    ($($ty:ty, $bits:ty);* $(;)?) => {$(
        impl Value for $ty {
            type SelfType<'a> = $ty;
            type Bytes<'a> = [u8; std::mem::size_of::<$ty>()] where Self: 'a;

            fn to_bytes<'a>(value: &'a $ty) -> Self::Bytes<'a> where Self: 'a {
                let bits = value.to_bits();
                let sign = 1 << (<$bits>::BITS - 1);
                let bits = if bits & sign != 0 { !bits } else { bits | sign };
                bits.to_be_bytes()
            }

            fn from_bytes(bytes: &[u8]) -> Result<$ty> {
                let array = fixed_bytes::<$ty, { std::mem::size_of::<$ty>() }>(bytes)?;
                let bits = <$bits>::from_be_bytes(array);
                let sign = 1 << (<$bits>::BITS - 1);
                let bits = if bits & sign != 0 { bits & !sign } else { !bits };
                Ok(<$ty>::from_bits(bits))
            }
        }
        impl Key for $ty {}
        impl FixedWidth for $ty {
            const WIDTH: usize = std::mem::size_of::<$ty>();
        }
    )*};
}

floats! {
    f32, u32;
    f64, u64;
}

impl Value for bool {
    type SelfType<'a> = bool;
    type Bytes<'a>
        = [u8; 1]
    where
        Self: 'a;

    fn to_bytes<'a>(value: &'a bool) -> [u8; 1]
    where
        Self: 'a,
    {
        [u8::from(*value)]
    }

    fn from_bytes(bytes: &[u8]) -> Result<bool> {
        match bytes {
            [0] => Ok(false),
            [1] => Ok(true),
            _ => Err(decode_error::<bool>("not one byte of 0 or 1")),
        }
    }
}
impl Key for bool {}
impl FixedWidth for bool {
    const WIDTH: usize = 1;
}

/// Tuples whose components but the last are fixed-width: their bytes are the components'
/// bytes one after the other, so they sort by the first component, then the next.
macro_rules! tuples {
    ($($head:ident),+ ; $last:ident) => {
        impl<$($head: FixedWidth,)+ $last: Value> Value for ($($head,)+ $last,) {
            type SelfType<'a> = ($($head::SelfType<'a>,)+ $last::SelfType<'a>,);
            type Bytes<'a> = SmallVec<[u8; 32]> where Self: 'a;

            #[expect(non_snake_case, reason = "the components are named after their types")]
            fn to_bytes<'a>(value: &'a Self::SelfType<'_>) -> Self::Bytes<'a> where Self: 'a {
                let ($($head,)+ $last,) = value;
                let mut bytes = SmallVec::new();
                $(bytes.extend_from_slice($head::to_bytes($head).as_ref());)+
                bytes.extend_from_slice($last::to_bytes($last).as_ref());
                bytes
            }

            #[expect(non_snake_case, reason = "the components are named after their types")]
            fn from_bytes(bytes: &[u8]) -> Result<Self::SelfType<'_>> {
                let mut rest = bytes;
                $(
                    let Some(($head, tail)) = rest.split_at_checked($head::WIDTH) else {
                        return Err(decode_error::<Self>(format!("{} bytes: too short", bytes.len())));
                    };
                    let $head = $head::from_bytes($head)?;
                    rest = tail;
                )+
                let $last = $last::from_bytes(rest)?;
                Ok(($($head,)+ $last,))
            }
        }
        impl<$($head: FixedWidth,)+ $last: Key> Key for ($($head,)+ $last,) {}
    };
}

tuples!(A; B);
tuples!(A, B; C);
tuples!(A, B, C; D);

/// A value stored as JSON (feature `serde`): any type serde can write and read. Not a key:
/// JSON's bytes do not sort as the values do.
///
/// ```
/// use rbolt::{BucketDef, Json};
/// const TAGS: BucketDef<&str, Json<Vec<String>>> = BucketDef::new("tags");
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// let post_tags = vec!["rust".to_string(), "db".to_string()];
/// db.update(|tx| tx.open_bucket(TAGS)?.put("post-1", &post_tags))?;
/// db.view(|tx| {
///     let tags = tx.open_bucket(TAGS)?.unwrap();
///     assert_eq!(tags.get("post-1")?, Some(post_tags.clone()));
///     assert_eq!(tags.bytes().get("post-1")?, Some(&br#"["rust","db"]"#[..])); // stored as JSON
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
#[cfg(feature = "serde")]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Json<T>(PhantomData<T>);

#[cfg(feature = "serde")]
impl<T: serde::Serialize + serde::de::DeserializeOwned> Value for Json<T> {
    type SelfType<'a> = T;
    type Bytes<'a>
        = Vec<u8>
    where
        Self: 'a;

    fn to_bytes<'a>(value: &'a T) -> Vec<u8>
    where
        Self: 'a,
    {
        // Serialising to memory fails only for types whose `Serialize` fails: a bug in them.
        serde_json::to_vec(value).unwrap_or_else(|e| panic!("serialising a value: {e}"))
    }

    fn from_bytes(bytes: &[u8]) -> Result<T> {
        serde_json::from_slice(bytes).map_err(|e| decode_error::<Self>(e.to_string()))
    }

    fn type_name() -> &'static str {
        std::any::type_name::<T>()
    }
}

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
#[derive(Clone, Copy, Debug)]
pub struct TypedBucket<'a, K, V> {
    bucket: Bucket<'a>,
    types: PhantomData<fn() -> (K, V)>,
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
        match self.bucket.get(K::to_bytes(key.borrow()))? {
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
        let start = encode_bound::<K>(range.start_bound());
        let end = encode_bound::<K>(range.end_bound());
        TypedIter::new(self.bucket.range::<&[u8]>((
            start.as_ref().map(AsRef::as_ref),
            end.as_ref().map(AsRef::as_ref),
        )))
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
#[derive(Debug)]
pub struct TypedBucketMut<'a, K, V> {
    bucket: BucketMut<'a>,
    types: PhantomData<fn() -> (K, V)>,
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
        match self.bucket.get(K::to_bytes(key.borrow()))? {
            Some(bytes) => V::from_bytes(bytes).map(Some),
            None => Ok(None),
        }
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
        self.bucket
            .put(K::to_bytes(key.borrow()), V::to_bytes(value.borrow()))
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
        self.bucket.delete(K::to_bytes(key.borrow()))
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
        TypedIter::new(self.bucket.iter())
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
        let start = encode_bound::<K>(range.start_bound());
        let end = encode_bound::<K>(range.end_bound());
        TypedIter::new(self.bucket.range::<&[u8]>((
            start.as_ref().map(AsRef::as_ref),
            end.as_ref().map(AsRef::as_ref),
        )))
    }
}

/// A range bound as the key's bytes.
fn encode_bound<'k, K: Key>(bound: Bound<&K::SelfType<'k>>) -> Bound<SmallVec<[u8; 32]>> {
    bound.map(|key| SmallVec::from_slice(K::to_bytes(key).as_ref()))
}

/// Typed keys and values of a bucket, in key order; double-ended. A key or value that does
/// not decode as its type ends the iteration with `Error::Decode`.
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
#[derive(Clone, Debug)]
pub struct TypedIter<'a, K, V> {
    inner: Iter<'a>,
    types: PhantomData<fn() -> (K, V)>,
}

impl<'a, K: Key, V: Value> TypedIter<'a, K, V> {
    fn new(inner: Iter<'a>) -> TypedIter<'a, K, V> {
        TypedIter {
            inner,
            types: PhantomData,
        }
    }

    fn decode(entry: crate::Entry<'a>) -> Result<(K::SelfType<'a>, V::SelfType<'a>)> {
        let value = entry.value().expect("nested buckets are skipped");
        Ok((K::from_bytes(entry.key())?, V::from_bytes(value)?))
    }
}

impl<'a, K: Key, V: Value> Iterator for TypedIter<'a, K, V> {
    type Item = Result<(K::SelfType<'a>, V::SelfType<'a>)>;

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            match self.inner.next()? {
                Err(error) => return Some(Err(error)),
                Ok(entry) if entry.is_bucket() => continue,
                Ok(entry) => return Some(Self::decode(entry)),
            }
        }
    }
}

impl<K: Key, V: Value> DoubleEndedIterator for TypedIter<'_, K, V> {
    fn next_back(&mut self) -> Option<Self::Item> {
        loop {
            match self.inner.next_back()? {
                Err(error) => return Some(Err(error)),
                Ok(entry) if entry.is_bucket() => continue,
                Ok(entry) => return Some(Self::decode(entry)),
            }
        }
    }
}

impl<K: Key, V: Value> std::iter::FusedIterator for TypedIter<'_, K, V> {}
