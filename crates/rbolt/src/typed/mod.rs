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

mod bucket;
mod iter;
mod ranges;

pub use bucket::{BucketDef, TypedBucket, TypedBucketMut};
pub use iter::{TypedCursor, TypedIter};

use crate::error::{Error, Result};
use smallvec::SmallVec;

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
    /// `Json` value that serde cannot write as JSON, say). Typed writes encode
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
///
/// Floats (`f32`, `f64`) sort as [`f64::total_cmp`] orders them, and every float is a key,
/// NaN included: a key is its bytes, so a NaN finds the NaN stored with the same bits
/// (although `NaN != NaN` in Rust), a positive NaN sorts after `∞` and a negative one before
/// `-∞`, and `-0.0` and `0.0` are two keys. (A NaN *value* is refused by [`Json`] only,
/// because JSON has no NaN; as an `f64` value it is stored as it is.)
///
/// ```
/// use rbolt::BucketDef;
/// const READINGS: BucketDef<f64, &str> = BucketDef::new("readings");
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut readings = tx.open_bucket(READINGS)?;
///     for (at, what) in [(f64::NAN, "missing"), (1.5, "ok"), (f64::NEG_INFINITY, "low")] {
///         readings.put(at, what)?;
///     }
///     assert_eq!(readings.get(f64::NAN)?, Some("missing"));
///     let last = readings.iter().next_back().transpose()?.map(|(k, _)| k);
///     assert!(last.is_some_and(f64::is_nan));
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

/// A [`Key`] that can come before the last component of a tuple key: its bytes in the tuple
/// say where they end, so the next component starts there, and the tuple's bytes still sort
/// as the tuple does. Every [`FixedWidth`] key is one (its bytes as they are). Text and byte
/// strings are too: their bytes, each zero byte written as `00 FF`, then `00 00` — so a
/// shorter string sorts before a longer one it begins, whatever follows it (FoundationDB's
/// tuple layer escapes the same way). `&str` and `&[u8]` components borrow from the page, so
/// they refuse a zero byte (`Error::Encode`; use `String` or `Vec<u8>`, which take it).
///
/// ```
/// use rbolt::BucketDef;
/// // An index: (tag, post id), every id under a tag one prefix scan.
/// const BY_TAG: BucketDef<(&str, u64), ()> = BucketDef::new("by_tag");
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut by_tag = tx.open_bucket(BY_TAG)?;
///     for (tag, id) in [("rust", 7), ("db", 3), ("rust", 2), ("rusty", 1)] {
///         by_tag.put((tag, id), ())?;
///     }
///     let ids: Vec<u64> = by_tag
///         .with_first("rust")
///         .map(|entry| entry.map(|((_, id), ())| id))
///         .collect::<rbolt::Result<_>>()?;
///     assert_eq!(ids, [2, 7]); // not "rusty"'s
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
pub trait KeyPart: Key {
    /// Passes the component's bytes, ending included, to `out` (in one or more pieces).
    fn write_part(value: &Self::SelfType<'_>, out: &mut dyn FnMut(&[u8])) -> Result<()>;

    /// Reads the component at the front of `bytes`: its value, and how many bytes it took.
    fn read_part(bytes: &[u8]) -> Result<(Self::SelfType<'_>, usize)>;
}

/// A tuple key, whose first component can be scanned for alone (see
/// [`TypedBucket::with_first`]).
pub trait TupleKey: Key {
    /// The type of the first component.
    type First: KeyPart;
}

/// A tuple key of three or more components, whose first two can be scanned for together (see
/// [`TypedBucket::with_first_two`]).
pub trait TupleKey2: TupleKey {
    /// The type of the second component.
    type Second: KeyPart;
}

impl<T: FixedWidth> KeyPart for T {
    fn write_part(value: &Self::SelfType<'_>, out: &mut dyn FnMut(&[u8])) -> Result<()> {
        let bytes = T::to_bytes(value)?;
        let bytes = bytes.as_ref();
        if bytes.len() != T::WIDTH {
            return Err(encode_error::<T>(format!(
                "a fixed-width component wrote {} bytes, not its WIDTH {}",
                bytes.len(),
                T::WIDTH
            )));
        }
        out(bytes);
        Ok(())
    }

    fn read_part(bytes: &[u8]) -> Result<(Self::SelfType<'_>, usize)> {
        let Some((part, _)) = bytes.split_at_checked(T::WIDTH) else {
            return Err(decode_error::<T>(format!(
                "{} bytes left for a component of {}: too short",
                bytes.len(),
                T::WIDTH
            )));
        };
        Ok((T::from_bytes(part)?, T::WIDTH))
    }
}

/// The end of a string component in a tuple: `00 00`; a zero byte inside it is `00 FF`.
const PART_END: [u8; 2] = [0, 0];
const PART_ZERO: [u8; 2] = [0, 0xFF];

/// Writes `bytes` escaped and terminated.
fn write_escaped(bytes: &[u8], out: &mut dyn FnMut(&[u8])) {
    let mut pieces = bytes.split(|&b| b == 0);
    if let Some(first) = pieces.next() {
        out(first);
    }
    for piece in pieces {
        out(&PART_ZERO);
        out(piece);
    }
    out(&PART_END);
}

/// Writes `bytes`, which must hold no zero byte, terminated.
fn write_unescaped<T: Value + ?Sized>(bytes: &[u8], out: &mut dyn FnMut(&[u8])) -> Result<()> {
    if bytes.contains(&0) {
        return Err(encode_error::<T>(
            "a zero byte in a borrowed component before a tuple's last: it would be escaped, \
             and could not be read back borrowed (use String or Vec<u8> for it)",
        ));
    }
    out(bytes);
    out(&PART_END);
    Ok(())
}

/// The bytes of an escaped and terminated component at the front of `bytes`, unescaped, and
/// how many bytes it took.
fn read_escaped<T: Value + ?Sized>(bytes: &[u8]) -> Result<(Vec<u8>, usize)> {
    let mut value = Vec::new();
    let mut at = 0;
    loop {
        let Some(zero) = bytes[at..].iter().position(|&b| b == 0) else {
            return Err(decode_error::<T>("a component without its end (00 00)"));
        };
        value.extend_from_slice(&bytes[at..at + zero]);
        match bytes.get(at + zero + 1) {
            Some(0) => return Ok((value, at + zero + 2)),
            Some(0xFF) => value.push(0),
            _ => return Err(decode_error::<T>("a zero byte not followed by 00 or FF")),
        }
        at += zero + 2;
    }
}

/// The bytes of an unescaped and terminated component at the front of `bytes`, and how many
/// bytes it took.
fn read_unescaped<T: Value + ?Sized>(bytes: &[u8]) -> Result<(&[u8], usize)> {
    let Some(zero) = bytes.iter().position(|&b| b == 0) else {
        return Err(decode_error::<T>("a component without its end (00 00)"));
    };
    match bytes.get(zero + 1) {
        Some(0) => Ok((&bytes[..zero], zero + 2)),
        Some(0xFF) => Err(decode_error::<T>(
            "a component with a zero byte, which a borrowed type cannot hold: read it as \
             String or Vec<u8>",
        )),
        _ => Err(decode_error::<T>("a zero byte not followed by 00 or FF")),
    }
}

impl KeyPart for &str {
    fn write_part(value: &&str, out: &mut dyn FnMut(&[u8])) -> Result<()> {
        write_unescaped::<&str>(value.as_bytes(), out)
    }

    fn read_part(bytes: &[u8]) -> Result<(&str, usize)> {
        let (part, used) = read_unescaped::<&str>(bytes)?;
        Ok((<&str>::from_bytes(part)?, used))
    }
}

impl KeyPart for &[u8] {
    fn write_part(value: &&[u8], out: &mut dyn FnMut(&[u8])) -> Result<()> {
        write_unescaped::<&[u8]>(value, out)
    }

    fn read_part(bytes: &[u8]) -> Result<(&[u8], usize)> {
        read_unescaped::<&[u8]>(bytes)
    }
}

impl KeyPart for String {
    fn write_part(value: &String, out: &mut dyn FnMut(&[u8])) -> Result<()> {
        write_escaped(value.as_bytes(), out);
        Ok(())
    }

    fn read_part(bytes: &[u8]) -> Result<(String, usize)> {
        let (part, used) = read_escaped::<String>(bytes)?;
        let text = String::from_utf8(part).map_err(|e| decode_error::<String>(e.to_string()))?;
        Ok((text, used))
    }
}

impl KeyPart for Vec<u8> {
    fn write_part(value: &Vec<u8>, out: &mut dyn FnMut(&[u8])) -> Result<()> {
        write_escaped(value, out);
        Ok(())
    }

    fn read_part(bytes: &[u8]) -> Result<(Vec<u8>, usize)> {
        read_escaped::<Vec<u8>>(bytes)
    }
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

/// Tuples: each component's bytes one after the other, so they sort by the first
/// component, then the next. A component before the last is a [`KeyPart`], whose bytes say
/// where they end: fixed-width components as they are, text and byte strings escaped and
/// terminated. The last component is any [`Value`] (any [`Key`], for a tuple key), as it is.
macro_rules! tuples {
    ($($head:ident),+ ; $last:ident) => {
        impl<$($head: KeyPart,)+ $last: Value> Value for ($($head,)+ $last,) {
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
                    $head::write_part($head, &mut |part| bytes.extend_from_slice(part))?;
                )+
                bytes.extend_from_slice($last::to_bytes($last)?.as_ref());
                Ok(bytes)
            }

            #[expect(non_snake_case, reason = "the components are named after their types")]
            fn from_bytes(bytes: &[u8]) -> Result<Self::SelfType<'_>> {
                let mut rest = bytes;
                $(
                    let ($head, used) = $head::read_part(rest)?;
                    rest = &rest[used..];
                )+
                let $last = $last::from_bytes(rest)?;
                Ok(($($head,)+ $last,))
            }
        }
        impl<$($head: KeyPart,)+ $last: Key> Key for ($($head,)+ $last,) {}
        tuples!(@first $($head),+ ; $last);
        tuples!(@second $($head),+ ; $last);
    };
    (@first $first:ident $(, $head:ident)* ; $last:ident) => {
        impl<$first: KeyPart, $($head: KeyPart,)* $last: Key> TupleKey for ($first, $($head,)* $last,) {
            type First = $first;
        }
    };
    (@second $first:ident, $second:ident $(, $head:ident)* ; $last:ident) => {
        impl<$first: KeyPart, $second: KeyPart, $($head: KeyPart,)* $last: Key> TupleKey2
            for ($first, $second, $($head,)* $last,)
        {
            type Second = $second;
        }
    };
    (@second $first:ident ; $last:ident) => {};
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
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Json<T>(std::marker::PhantomData<T>);

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
                "serde_json writes it as `{shown}{more}`, which does not read back: {e} (JSON \
                 has no NaN or infinity: keep such a float in a field of its own type, as \
                 `f64` values are stored as they are)"
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
