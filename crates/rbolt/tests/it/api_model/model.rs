//! The model the API test compares with: nested buckets as ordered maps, and what each call of
//! the public API must return on it, error variant included. Pure functions, no database.
//!
//! Where issue 12 is silent about which of two errors comes first, the order here is the one
//! of the facade's code (crates/rbolt/src/tx.rs and bucket.rs) as of this test's writing.

use rbolt::{Error, KEY_SIZE_MAX, VALUE_SIZE_MAX};
pub use rbolt_fixtures::{Bucket as Model, Item};
use std::collections::VecDeque;
use std::fmt;
use std::ops::Bound;

/// A bucket's path: top-level name, then nested names.
pub type Path = Vec<Vec<u8>>;

/// Bytes that print short: failure reports stay readable with 32 KiB keys in them.
#[derive(Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Bytes(pub Vec<u8>);

impl fmt::Debug for Bytes {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        const SHOWN_MAX: usize = 24;
        let shown = &self.0[..self.0.len().min(SHOWN_MAX)];
        write!(f, "\"{}\"", shown.escape_ascii())?;
        if self.0.len() > SHOWN_MAX {
            write!(f, "..({} bytes)", self.0.len())?;
        }
        Ok(())
    }
}

/// An entry as the API shows it: a key and its value, or `None` for a nested bucket.
pub type Ent = (Bytes, Option<Bytes>);

pub fn ent_of(entry: &rbolt::Entry<'_>) -> Ent {
    (
        Bytes(entry.key().to_vec()),
        entry.value().map(|v| Bytes(v.to_vec())),
    )
}

pub fn model_ent(key: &[u8], item: &Item) -> Ent {
    let value = match item {
        Item::Value(value) => Some(Bytes(value.clone())),
        Item::Bucket(_) => None,
    };
    (Bytes(key.to_vec()), value)
}

/// An error, comparable: the variant and the fields that say which limit was passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ErrKind {
    KeyRequired,
    KeyTooLarge {
        len: usize,
    },
    ValueTooLarge {
        len: usize,
    },
    BucketExists,
    BucketNotFound,
    BucketNameRequired,
    IncompatibleValue,
    SameBuckets,
    MoveIntoSelf,
    BucketInUse,
    DatabaseReadOnly,
    MaxSizeReached {
        max_size: u64,
    },
    StorageInUse,
    WriteTxOnThisThread,
    /// Any other error: never expected by the model, so it always fails a comparison.
    Other(String),
}

impl ErrKind {
    pub fn of(error: &Error) -> ErrKind {
        match error {
            Error::KeyRequired => ErrKind::KeyRequired,
            Error::KeyTooLarge { len } => ErrKind::KeyTooLarge { len: *len },
            Error::ValueTooLarge { len } => ErrKind::ValueTooLarge { len: *len },
            Error::BucketExists => ErrKind::BucketExists,
            Error::BucketNotFound => ErrKind::BucketNotFound,
            Error::BucketNameRequired => ErrKind::BucketNameRequired,
            Error::IncompatibleValue => ErrKind::IncompatibleValue,
            Error::SameBuckets => ErrKind::SameBuckets,
            Error::MoveIntoSelf => ErrKind::MoveIntoSelf,
            Error::BucketInUse => ErrKind::BucketInUse,
            Error::DatabaseReadOnly => ErrKind::DatabaseReadOnly,
            Error::MaxSizeReached { max_size } => ErrKind::MaxSizeReached {
                max_size: *max_size,
            },
            Error::StorageInUse { .. } => ErrKind::StorageInUse,
            Error::WriteTxOnThisThread => ErrKind::WriteTxOnThisThread,
            other => ErrKind::Other(format!("{other:?}")),
        }
    }

    /// The variant's name, for the summary.
    pub fn name(&self) -> &'static str {
        match self {
            ErrKind::KeyRequired => "KeyRequired",
            ErrKind::KeyTooLarge { .. } => "KeyTooLarge",
            ErrKind::ValueTooLarge { .. } => "ValueTooLarge",
            ErrKind::BucketExists => "BucketExists",
            ErrKind::BucketNotFound => "BucketNotFound",
            ErrKind::BucketNameRequired => "BucketNameRequired",
            ErrKind::IncompatibleValue => "IncompatibleValue",
            ErrKind::SameBuckets => "SameBuckets",
            ErrKind::MoveIntoSelf => "MoveIntoSelf",
            ErrKind::BucketInUse => "BucketInUse",
            ErrKind::DatabaseReadOnly => "DatabaseReadOnly",
            ErrKind::MaxSizeReached { .. } => "MaxSizeReached",
            ErrKind::StorageInUse => "StorageInUse",
            ErrKind::WriteTxOnThisThread => "WriteTxOnThisThread",
            ErrKind::Other(_) => "Other",
        }
    }
}

/// A facade result with a comparable error.
pub fn res<T>(result: rbolt::Result<T>) -> Result<T, ErrKind> {
    result.map_err(|e| ErrKind::of(&e))
}

/// Why a call chosen to fail fails. Every class must occur in a run (see `mod.rs`), so that
/// the test cannot pass without trying each.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Class {
    EmptyName,
    NameTooLarge,
    EmptyKey,
    KeyTooLarge,
    ValueTooLarge,
    MissingBucket,
    ExistingBucket,
    ValueWhereBucket,
    BucketWhereValue,
    PathThroughValue,
    RootNotWritable,
    CursorDeleteBucket,
    MoveEmptyPath,
    MoveOntoItself,
    MoveIntoOwnChild,
    MoveNewNameEmpty,
    MoveNewNameTooLarge,
    MoveMissingSource,
    MoveSourceIsValue,
    MoveMissingParent,
    MoveParentIsValue,
    MoveOntoExisting,
    MoveOntoValue,
    MaxSizeReached,
    ReadOnly,
    CallbackError,
    ClosureError,
    BatchCallError,
    SecondHandle,
    /// A top-level bucket reached while a handle holds it.
    BucketInUse,
    /// `Db::sync` on the thread that holds the write transaction (it would wait for itself).
    SyncOnWriterThread,
}

impl Class {
    pub const ALL: &[Class] = &[
        Class::EmptyName,
        Class::NameTooLarge,
        Class::EmptyKey,
        Class::KeyTooLarge,
        Class::ValueTooLarge,
        Class::MissingBucket,
        Class::ExistingBucket,
        Class::ValueWhereBucket,
        Class::BucketWhereValue,
        Class::PathThroughValue,
        Class::RootNotWritable,
        Class::CursorDeleteBucket,
        Class::MoveEmptyPath,
        Class::MoveOntoItself,
        Class::MoveIntoOwnChild,
        Class::MoveNewNameEmpty,
        Class::MoveNewNameTooLarge,
        Class::MoveMissingSource,
        Class::MoveSourceIsValue,
        Class::MoveMissingParent,
        Class::MoveParentIsValue,
        Class::MoveOntoExisting,
        Class::MoveOntoValue,
        Class::MaxSizeReached,
        Class::ReadOnly,
        Class::CallbackError,
        Class::ClosureError,
        Class::BatchCallError,
        Class::SecondHandle,
        Class::BucketInUse,
        Class::SyncOnWriterThread,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Class::EmptyName => "empty-name",
            Class::NameTooLarge => "name-too-large",
            Class::EmptyKey => "empty-key",
            Class::KeyTooLarge => "key-too-large",
            Class::ValueTooLarge => "value-too-large",
            Class::MissingBucket => "missing-bucket",
            Class::ExistingBucket => "existing-bucket",
            Class::ValueWhereBucket => "value-where-bucket",
            Class::BucketWhereValue => "bucket-where-value",
            Class::PathThroughValue => "path-through-value",
            Class::RootNotWritable => "root-not-writable",
            Class::CursorDeleteBucket => "cursor-delete-bucket",
            Class::MoveEmptyPath => "move-empty-path",
            Class::MoveOntoItself => "move-onto-itself",
            Class::MoveIntoOwnChild => "move-into-own-child",
            Class::MoveNewNameEmpty => "move-new-name-empty",
            Class::MoveNewNameTooLarge => "move-new-name-too-large",
            Class::MoveMissingSource => "move-missing-source",
            Class::MoveSourceIsValue => "move-source-is-value",
            Class::MoveMissingParent => "move-missing-parent",
            Class::MoveParentIsValue => "move-parent-is-value",
            Class::MoveOntoExisting => "move-onto-existing",
            Class::MoveOntoValue => "move-onto-value",
            Class::MaxSizeReached => "max-size-reached",
            Class::ReadOnly => "read-only",
            Class::CallbackError => "callback-error",
            Class::ClosureError => "closure-error",
            Class::BatchCallError => "batch-call-error",
            Class::SecondHandle => "second-handle",
            Class::BucketInUse => "bucket-in-use",
            Class::SyncOnWriterThread => "sync-on-writer-thread",
        }
    }
}

/// What the model says a call returns: its value, or the error and why.
pub type Expect<T> = Result<T, (ErrKind, Class)>;

pub fn bucket_at<'m>(model: &'m Model, path: &[Vec<u8>]) -> Option<&'m Model> {
    let mut bucket = model;
    for name in path {
        bucket = match bucket.entries.get(name)? {
            Item::Bucket(child) => child,
            Item::Value(_) => return None,
        };
    }
    Some(bucket)
}

/// The bucket at `path`, which exists.
pub fn bucket_at_mut<'m>(model: &'m mut Model, path: &[Vec<u8>]) -> &'m mut Model {
    let mut bucket = model;
    for name in path {
        bucket = match bucket.entries.get_mut(name) {
            Some(Item::Bucket(child)) => child,
            _ => panic!("the model has no bucket at {path:?}"),
        };
    }
    bucket
}

/// `WriteTx::bucket_path_mut(path)` (and the same path walked with `bucket_mut`): the root is
/// not writable; a missing name ends the walk with `None`; a value on the way is the wrong
/// kind.
pub fn expect_access<'m>(model: &'m Model, path: &[Vec<u8>]) -> Expect<Option<&'m Model>> {
    if path.is_empty() {
        return Err((ErrKind::BucketNameRequired, Class::RootNotWritable));
    }
    let mut bucket = model;
    for name in path {
        bucket = match bucket.entries.get(name) {
            None => return Ok(None),
            Some(Item::Value(_)) => {
                return Err((ErrKind::IncompatibleValue, Class::PathThroughValue));
            }
            Some(Item::Bucket(child)) => child,
        };
    }
    Ok(Some(bucket))
}

pub fn check_name(name: &[u8]) -> Expect<()> {
    if name.is_empty() {
        return Err((ErrKind::BucketNameRequired, Class::EmptyName));
    }
    if name.len() > KEY_SIZE_MAX {
        return Err((
            ErrKind::KeyTooLarge { len: name.len() },
            Class::NameTooLarge,
        ));
    }
    Ok(())
}

pub fn check_key(key: &[u8]) -> Expect<()> {
    if key.is_empty() {
        return Err((ErrKind::KeyRequired, Class::EmptyKey));
    }
    if key.len() > KEY_SIZE_MAX {
        return Err((ErrKind::KeyTooLarge { len: key.len() }, Class::KeyTooLarge));
    }
    Ok(())
}

/// `create_bucket` (or `create_bucket_if_not_exists`) of `name` in `parent`: whether a new
/// bucket is made.
pub fn expect_create(parent: &Model, name: &[u8], if_not_exists: bool) -> Expect<bool> {
    check_name(name)?;
    match parent.entries.get(name) {
        Some(Item::Bucket(_)) if if_not_exists => Ok(false),
        Some(Item::Bucket(_)) => Err((ErrKind::BucketExists, Class::ExistingBucket)),
        Some(Item::Value(_)) => Err((ErrKind::IncompatibleValue, Class::ValueWhereBucket)),
        None => Ok(true),
    }
}

/// `create_bucket_path`: every name is checked first, then the part of the path that exists
/// (a value on it is `IncompatibleValue`); what is missing is created.
pub fn expect_create_path(model: &Model, path: &[Vec<u8>]) -> Expect<()> {
    if path.is_empty() {
        return Err((ErrKind::BucketNameRequired, Class::EmptyName));
    }
    for name in path {
        check_name(name)?;
    }
    let mut level = model;
    for name in path {
        match level.entries.get(name) {
            Some(Item::Bucket(child)) => level = child,
            Some(Item::Value(_)) => {
                return Err((ErrKind::IncompatibleValue, Class::ValueWhereBucket));
            }
            None => return Ok(()),
        }
    }
    Ok(())
}

pub fn expect_delete_bucket(parent: &Model, name: &[u8]) -> Expect<()> {
    check_name(name)?;
    match parent.entries.get(name) {
        Some(Item::Bucket(_)) => Ok(()),
        Some(Item::Value(_)) => Err((ErrKind::IncompatibleValue, Class::ValueWhereBucket)),
        None => Err((ErrKind::BucketNotFound, Class::MissingBucket)),
    }
}

pub fn expect_put(bucket: &Model, key: &[u8], value_len: usize) -> Expect<()> {
    check_key(key)?;
    if value_len > VALUE_SIZE_MAX {
        return Err((
            ErrKind::ValueTooLarge { len: value_len },
            Class::ValueTooLarge,
        ));
    }
    match bucket.entries.get(key) {
        Some(Item::Bucket(_)) => Err((ErrKind::IncompatibleValue, Class::BucketWhereValue)),
        _ => Ok(()),
    }
}

/// `delete(key)`: whether a value was there.
pub fn expect_delete(bucket: &Model, key: &[u8]) -> Expect<bool> {
    check_key(key)?;
    match bucket.entries.get(key) {
        Some(Item::Bucket(_)) => Err((ErrKind::IncompatibleValue, Class::BucketWhereValue)),
        Some(Item::Value(_)) => Ok(true),
        None => Ok(false),
    }
}

/// `get(key)`: the value, or `None` for a missing key and for a nested bucket.
pub fn expect_get(bucket: &Model, key: &[u8]) -> Option<Bytes> {
    match bucket.entries.get(key) {
        Some(Item::Value(value)) => Some(Bytes(value.clone())),
        _ => None,
    }
}

/// Where a move fails, in the order the facade checks. `None` in a walk means a missing
/// bucket, `Err` a value on the way.
fn walk<'m>(model: &'m Model, path: &[Vec<u8>]) -> Result<Option<&'m Model>, ()> {
    let mut bucket = model;
    for name in path {
        bucket = match bucket.entries.get(name) {
            None => return Ok(None),
            Some(Item::Value(_)) => return Err(()),
            Some(Item::Bucket(child)) => child,
        };
    }
    Ok(Some(bucket))
}

/// `WriteTx::move_bucket(from, to)`.
pub fn expect_move(model: &Model, from: &[Vec<u8>], to: &[Vec<u8>]) -> Expect<()> {
    let (Some((name, from_parent)), Some((new_name, to_parent))) =
        (from.split_last(), to.split_last())
    else {
        return Err((ErrKind::BucketNameRequired, Class::MoveEmptyPath));
    };
    if from == to {
        return Err((ErrKind::SameBuckets, Class::MoveOntoItself));
    }
    if to.len() > from.len() && to[..from.len()] == *from {
        return Err((ErrKind::MoveIntoSelf, Class::MoveIntoOwnChild));
    }
    check_name(new_name).map_err(|(kind, class)| {
        let class = if class == Class::EmptyName {
            Class::MoveNewNameEmpty
        } else {
            Class::MoveNewNameTooLarge
        };
        (kind, class)
    })?;
    let source_parent = match walk(model, from_parent) {
        Err(()) => return Err((ErrKind::IncompatibleValue, Class::MoveSourceIsValue)),
        Ok(None) => return Err((ErrKind::BucketNotFound, Class::MoveMissingSource)),
        Ok(Some(parent)) => parent,
    };
    match source_parent.entries.get(name) {
        None => return Err((ErrKind::BucketNotFound, Class::MoveMissingSource)),
        Some(Item::Value(_)) => {
            return Err((ErrKind::IncompatibleValue, Class::MoveSourceIsValue));
        }
        Some(Item::Bucket(_)) => {}
    }
    let dest_parent = match walk(model, to_parent) {
        Err(()) => return Err((ErrKind::IncompatibleValue, Class::MoveParentIsValue)),
        Ok(None) => return Err((ErrKind::BucketNotFound, Class::MoveMissingParent)),
        Ok(Some(parent)) => parent,
    };
    match dest_parent.entries.get(new_name) {
        Some(Item::Bucket(_)) => Err((ErrKind::BucketExists, Class::MoveOntoExisting)),
        Some(Item::Value(_)) => Err((ErrKind::IncompatibleValue, Class::MoveOntoValue)),
        None => Ok(()),
    }
}

/// Applies a move `expect_move` allowed.
pub fn do_move(model: &mut Model, from: &[Vec<u8>], to: &[Vec<u8>]) {
    let (name, from_parent) = from.split_last().expect("a checked move");
    let (new_name, to_parent) = to.split_last().expect("a checked move");
    let item = bucket_at_mut(model, from_parent)
        .entries
        .remove(name)
        .expect("a checked move");
    bucket_at_mut(model, to_parent)
        .entries
        .insert(new_name.clone(), item);
}

/// `Bucket::stats().key_n`: entries of this bucket and of every bucket nested in it.
pub fn key_n(bucket: &Model) -> usize {
    let mut n = 0;
    let mut stack = vec![bucket];
    while let Some(bucket) = stack.pop() {
        n += bucket.entries.len();
        stack.extend(bucket.entries.values().filter_map(|item| match item {
            Item::Bucket(child) => Some(child),
            Item::Value(_) => None,
        }));
    }
    n
}

/// `Bucket::stats().bucket_n`: this bucket and every bucket nested in it.
pub fn bucket_n(bucket: &Model) -> usize {
    1 + bucket.bucket_count()
}

/// Levels of buckets below `bucket` (0: no nested bucket).
pub fn height(bucket: &Model) -> usize {
    let mut deepest = 0;
    let mut stack = vec![(bucket, 0usize)];
    while let Some((bucket, depth)) = stack.pop() {
        deepest = deepest.max(depth);
        for item in bucket.entries.values() {
            if let Item::Bucket(child) = item {
                stack.push((child, depth + 1));
            }
        }
    }
    deepest
}

/// Where a cursor is, as the facade's cursors define it.
#[derive(Clone, Debug)]
enum Position {
    Unpositioned,
    At(Vec<u8>),
    BeforeStart,
    AfterEnd,
}

/// A cursor over the model: off an end it stays usable (`prev` from past the end gives the
/// last entry); on a key that was deleted under it, `next` and `prev` go to its neighbours.
#[derive(Clone, Debug)]
pub struct CursorModel {
    position: Position,
}

impl CursorModel {
    pub fn new() -> CursorModel {
        CursorModel {
            position: Position::Unpositioned,
        }
    }

    fn settle<'m>(&mut self, found: Option<(&'m Vec<u8>, &'m Item)>, forward: bool) -> Option<Ent> {
        match found {
            Some((key, item)) => {
                self.position = Position::At(key.clone());
                Some(model_ent(key, item))
            }
            None => {
                self.position = if forward {
                    Position::AfterEnd
                } else {
                    Position::BeforeStart
                };
                None
            }
        }
    }

    pub fn first(&mut self, bucket: &Model) -> Option<Ent> {
        self.settle(bucket.entries.iter().next(), true)
    }

    pub fn last(&mut self, bucket: &Model) -> Option<Ent> {
        self.settle(bucket.entries.iter().next_back(), false)
    }

    pub fn seek(&mut self, bucket: &Model, key: &[u8]) -> Option<Ent> {
        let found = bucket
            .entries
            .range::<[u8], _>((Bound::Included(key), Bound::Unbounded))
            .next();
        self.settle(found, true)
    }

    pub fn next(&mut self, bucket: &Model) -> Option<Ent> {
        match &self.position {
            Position::Unpositioned | Position::BeforeStart => self.first(bucket),
            Position::AfterEnd => None,
            Position::At(key) => {
                let found = bucket
                    .entries
                    .range::<[u8], _>((Bound::Excluded(key.as_slice()), Bound::Unbounded))
                    .next();
                self.settle(found, true)
            }
        }
    }

    pub fn prev(&mut self, bucket: &Model) -> Option<Ent> {
        match &self.position {
            Position::Unpositioned | Position::AfterEnd => self.last(bucket),
            Position::BeforeStart => None,
            Position::At(key) => {
                let found = bucket
                    .entries
                    .range::<[u8], _>((Bound::Unbounded, Bound::Excluded(key.as_slice())))
                    .next_back();
                self.settle(found, false)
            }
        }
    }

    pub fn current(&self, bucket: &Model) -> Option<Ent> {
        match &self.position {
            Position::At(key) => bucket.entries.get(key).map(|item| model_ent(key, item)),
            _ => None,
        }
    }

    /// The key the cursor is on, if any (a deleted key included).
    pub fn key(&self) -> Option<&[u8]> {
        match &self.position {
            Position::At(key) => Some(key),
            _ => None,
        }
    }
}

/// The entries of `bucket` within the bounds, in order (empty when start lies past end).
pub fn range_entries(bucket: &Model, start: Bound<&[u8]>, end: Bound<&[u8]>) -> VecDeque<Ent> {
    let after_start = |key: &[u8]| match start {
        Bound::Unbounded => true,
        Bound::Included(s) => key >= s,
        Bound::Excluded(s) => key > s,
    };
    let before_end = |key: &[u8]| match end {
        Bound::Unbounded => true,
        Bound::Included(e) => key <= e,
        Bound::Excluded(e) => key < e,
    };
    bucket
        .entries
        .iter()
        .filter(|(key, _)| after_start(key) && before_end(key))
        .map(|(key, item)| model_ent(key, item))
        .collect()
}
