//! Typed buckets: keys and values as Rust types instead of bytes, in the spirit of redb's
//! `TableDefinition` and heed's codecs, on top of the byte API (which stays the primary one).
//!
//! A [`Value`] turns a type into bytes and back, borrowing from the transaction where the type
//! allows (`&str`, `&[u8]`); a [`Key`] is a value whose bytes sort as the values do, so ranges
//! and iteration come out in the type's order (integers are stored big-endian, signed ones
//! with the sign bit flipped; floats in `total_cmp` order). Owned types (`String`, `Vec<u8>`)
//! are copied out of the page. A value that cannot be written is `Error::Encode` and bytes
//! that do not read back are `Error::Decode`; neither panics, and a typed write that fails
//! changes nothing. A [`BucketDef`] names a bucket and its two types once:
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
/// let bytes = <u32 as Value>::to_bytes(&258)?;
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

    /// The bytes that store `value`, or `Error::Encode` when the value has none (a
    /// [`Json`](crate::Json) value that serde cannot write as JSON, say). Typed writes encode
    /// before they touch the bucket, so a failure here changes nothing.
    fn to_bytes<'a>(value: &'a Self::SelfType<'_>) -> Result<Self::Bytes<'a>>
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

fn encode_error<T: Value + ?Sized>(reason: impl Into<String>) -> Error {
    Error::Encode {
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

    fn to_bytes<'a>(value: &'a &[u8]) -> Result<&'a [u8]>
    where
        Self: 'a,
    {
        Ok(value)
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

    fn to_bytes<'a>(value: &'a &str) -> Result<&'a [u8]>
    where
        Self: 'a,
    {
        Ok(value.as_bytes())
    }

    fn from_bytes(bytes: &[u8]) -> Result<&str> {
        std::str::from_utf8(bytes).map_err(|e| decode_error::<&str>(e.to_string()))
    }
}
impl Key for &str {}

/// An owned string: stored as its UTF-8 bytes (as `&str` is, so the two read each other's
/// buckets), sorted as `String` sorts, and copied out of the page when read.
///
/// ```
/// use rbolt::BucketDef;
/// const NOTES: BucketDef<String, String> = BucketDef::new("notes");
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// let title = String::from("groceries");
/// db.update(|tx| tx.open_bucket(NOTES)?.put(&title, "milk, eggs".to_string()))?;
/// let note: Option<String> = db.view(|tx| tx.open_bucket(NOTES)?.unwrap().get(&title))?;
/// assert_eq!(note.as_deref(), Some("milk, eggs")); // owned: it outlives the transaction
/// # Ok::<(), rbolt::Error>(())
/// ```
impl Value for String {
    type SelfType<'a> = String;
    type Bytes<'a>
        = &'a [u8]
    where
        Self: 'a;

    fn to_bytes<'a>(value: &'a String) -> Result<&'a [u8]>
    where
        Self: 'a,
    {
        Ok(value.as_bytes())
    }

    fn from_bytes(bytes: &[u8]) -> Result<String> {
        std::str::from_utf8(bytes)
            .map(str::to_owned)
            .map_err(|e| decode_error::<String>(e.to_string()))
    }
}
impl Key for String {}

/// Owned bytes: stored as they are, copied out of the page when read.
///
/// ```
/// use rbolt::BucketDef;
/// const BLOBS: BucketDef<Vec<u8>, Vec<u8>> = BucketDef::new("blobs");
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| tx.open_bucket(BLOBS)?.put(vec![1, 2], vec![0xFF; 3]))?;
/// let blob = db.view(|tx| tx.open_bucket(BLOBS)?.unwrap().get(vec![1, 2]))?;
/// assert_eq!(blob, Some(vec![0xFF; 3]));
/// # Ok::<(), rbolt::Error>(())
/// ```
impl Value for Vec<u8> {
    type SelfType<'a> = Vec<u8>;
    type Bytes<'a>
        = &'a [u8]
    where
        Self: 'a;

    fn to_bytes<'a>(value: &'a Vec<u8>) -> Result<&'a [u8]>
    where
        Self: 'a,
    {
        Ok(value)
    }

    fn from_bytes(bytes: &[u8]) -> Result<Vec<u8>> {
        Ok(bytes.to_vec())
    }
}
impl Key for Vec<u8> {}

impl<const N: usize> Value for [u8; N] {
    type SelfType<'a> = [u8; N];
    type Bytes<'a>
        = [u8; N]
    where
        Self: 'a;

    fn to_bytes<'a>(value: &'a [u8; N]) -> Result<[u8; N]>
    where
        Self: 'a,
    {
        Ok(*value)
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

    fn to_bytes<'a>(_: &'a ()) -> Result<[u8; 0]>
    where
        Self: 'a,
    {
        Ok([])
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

            fn to_bytes<'a>(value: &'a $ty) -> Result<Self::Bytes<'a>> where Self: 'a {
                let bits = *value as $unsigned;
                let bits = if $signed { bits ^ (1 << (<$unsigned>::BITS - 1)) } else { bits };
                Ok(bits.to_be_bytes())
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

            fn to_bytes<'a>(value: &'a $ty) -> Result<Self::Bytes<'a>> where Self: 'a {
                let bits = value.to_bits();
                let sign = 1 << (<$bits>::BITS - 1);
                let bits = if bits & sign != 0 { !bits } else { bits | sign };
                Ok(bits.to_be_bytes())
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

    fn to_bytes<'a>(value: &'a bool) -> Result<[u8; 1]>
    where
        Self: 'a,
    {
        Ok([u8::from(*value)])
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
/// bytes one after the other, so they sort by the first component, then the next. A
/// fixed-width component whose bytes are not `WIDTH` long (a mistaken `FixedWidth` impl)
/// is an encode error: such a key could not be read back.
macro_rules! tuples {
    ($($head:ident),+ ; $last:ident) => {
        impl<$($head: FixedWidth,)+ $last: Value> Value for ($($head,)+ $last,) {
            type SelfType<'a> = ($($head::SelfType<'a>,)+ $last::SelfType<'a>,);
            type Bytes<'a> = SmallVec<[u8; 32]> where Self: 'a;

            #[expect(non_snake_case, reason = "the components are named after their types")]
            fn to_bytes<'a>(value: &'a Self::SelfType<'_>) -> Result<Self::Bytes<'a>>
            where
                Self: 'a,
            {
                let ($($head,)+ $last,) = value;
                let mut bytes = SmallVec::new();
                $(
                    let component = $head::to_bytes($head)?;
                    let component = component.as_ref();
                    if component.len() != $head::WIDTH {
                        return Err(encode_error::<Self>(format!(
                            "a fixed-width component of type {} wrote {} bytes, not its WIDTH {}",
                            $head::type_name(),
                            component.len(),
                            $head::WIDTH
                        )));
                    }
                    bytes.extend_from_slice(component);
                )+
                bytes.extend_from_slice($last::to_bytes($last)?.as_ref());
                Ok(bytes)
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
/// A value JSON cannot hold is `Error::Encode`, never a panic, and nothing is written: a map
/// whose keys are not strings or numbers (serde_json's "key must be a string"), a
/// `Serialize` impl that fails, or JSON that does not read back as `T` (serde_json writes a
/// NaN or infinite float as `null`, which no `f64` reads). Each value is parsed back once
/// before it is stored, so that nothing enters the file that cannot be read; that doubles
/// the cost of encoding.
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

    fn to_bytes<'a>(value: &'a T) -> Result<Vec<u8>>
    where
        Self: 'a,
    {
        let bytes = serde_json::to_vec(value)
            .map_err(|e| encode_error::<Self>(format!("serde_json cannot write it: {e}")))?;
        // What goes into the file must come back out: serde_json writes some values it
        // cannot read as the same type (a NaN float as `null`).
        if let Err(e) = serde_json::from_slice::<T>(&bytes) {
            const SHOWN_MAX: usize = 64;
            let shown = String::from_utf8_lossy(&bytes[..bytes.len().min(SHOWN_MAX)]);
            let more = if bytes.len() > SHOWN_MAX { "..." } else { "" };
            return Err(encode_error::<Self>(format!(
                "serde_json writes it as `{shown}{more}`, which does not read back: {e}"
            )));
        }
        Ok(bytes)
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
        TypedCursor {
            inner: self.bucket.cursor(),
            types: PhantomData,
        }
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

/// A range bound as the key's bytes.
fn encode_bound<'k, K: Key>(bound: Bound<&K::SelfType<'k>>) -> Result<Bound<SmallVec<[u8; 32]>>> {
    Ok(match bound {
        Bound::Included(key) => Bound::Included(SmallVec::from_slice(K::to_bytes(key)?.as_ref())),
        Bound::Excluded(key) => Bound::Excluded(SmallVec::from_slice(K::to_bytes(key)?.as_ref())),
        Bound::Unbounded => Bound::Unbounded,
    })
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
    fn new(inner: Iter<'a>) -> TypedIter<'a, K, V> {
        TypedIter {
            inner: Some(inner),
            failed: None,
            types: PhantomData,
        }
    }

    /// An iterator whose range could not be encoded: it yields that error, then ends.
    fn failed(error: Error) -> TypedIter<'a, K, V> {
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

/// A cursor over a typed bucket ([`TypedBucket::cursor`]): the byte [`Cursor`]'s moves, with
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
