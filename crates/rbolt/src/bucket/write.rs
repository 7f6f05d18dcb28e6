//! [`BucketMut`]: a bucket handle of a write transaction, which edits its tree in place.
use crate::engine::context::WriteContext;
use crate::error::{Error, Result};
use crate::iter::{Cursor, CursorMut, Iter};
use rbolt_btree::{Delete, Put};
use rbolt_page::VALUE_SIZE_MAX;
use smallvec::SmallVec;
use std::ops::RangeBounds;

use super::read::Bucket;
use super::state::{BucketState, Registry, check_key, create_child, delete_child, open_child};

/// A bucket of a write transaction, open for reading and writing.
///
/// Several top-level buckets can be open at once, as in bbolt: each handle borrows the
/// transaction immutably and holds its bucket's state itself until it is dropped. A nested
/// handle borrows its parent handle mutably, so under one top-level bucket one handle at a
/// time is open (the borrow checker says which). Opening, deleting or moving a top-level
/// bucket that a live handle holds is [`Error::BucketInUse`](crate::Error::BucketInUse).
/// A handle holds its bucket until it is dropped, not until its last use: drop it (or let
/// its scope end) before reaching the same top-level bucket from the transaction again.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = rbolt::Db::open(dir.path().join("db"))?;
/// let tx = db.begin_write()?;
/// let mut users = tx.create_bucket("users")?;
/// let mut log = tx.create_bucket("log")?; // a second bucket, open beside the first
/// let id = users.next_sequence()?;
/// let mut alice = users.create_bucket("alice")?;
/// alice.put("id", id.to_be_bytes())?;
/// log.put(id.to_be_bytes(), "created alice")?;
/// assert_eq!(alice.get("id")?, Some(&1u64.to_be_bytes()[..]));
/// drop(alice);
/// drop((users, log)); // handles go before the commit
/// tx.commit()?;
/// # Ok::<(), rbolt::Error>(())
/// ```
pub struct BucketMut<'a> {
    pub(crate) tx: &'a WriteContext,
    held: Held<'a>,
}

/// Where a [`BucketMut`]'s state is.
enum Held<'a> {
    /// A top-level bucket: its state, moved out of the transaction's registry (which keeps a
    /// placeholder under `name`) and put back on drop; the handle is the bucket `path` below
    /// it (empty for the top-level bucket itself).
    Top {
        registry: &'a Registry,
        name: SmallVec<[u8; 32]>,
        /// Boxed, so that a handle stays small: nested handles are as large as this enum,
        /// and code that recurses down a deep chain of buckets keeps one per level.
        state: Box<BucketState>,
        path: Vec<Vec<u8>>,
        /// With a non-empty `path`: the state of the bucket at `path`, moved out of `state`
        /// (a placeholder left there) and put back on drop, so that every operation on the
        /// handle reaches it at once instead of walking the path again.
        leaf: Option<Box<BucketState>>,
    },
    /// A bucket below another handle's, or the root bucket for a copy: borrowed.
    Borrowed(&'a mut BucketState),
    /// Only while the handle drops: its top-level state went back to the registry.
    Gone,
}

impl std::fmt::Debug for BucketMut<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BucketMut")
            .field("state", self.state())
            .finish_non_exhaustive()
    }
}

impl Drop for BucketMut<'_> {
    fn drop(&mut self) {
        // A borrowed handle has nothing to put back.
        let Held::Top {
            registry,
            name,
            mut state,
            path,
            mut leaf,
        } = std::mem::replace(&mut self.held, Held::Gone)
        else {
            return;
        };
        if let Some(leaf) = leaf.take() {
            *descend_mut(&mut state, &path) = *leaf;
        }
        // No method of the transaction keeps the registry borrowed while it drops a handle,
        // or runs user code while it is borrowed: this borrow cannot fail.
        let mut root = registry.root.borrow_mut();
        match root.children.get_mut(name.as_slice()) {
            Some(slot) => {
                debug_assert!(slot.held, "a held bucket's placeholder");
                *slot = std::mem::take(&mut *state);
            }
            None => debug_assert!(false, "a held bucket's placeholder is gone"),
        }
        drop(root);
        // The emptied box serves the next top-level handle, in this transaction or the next.
        registry.keep_spare(state);
    }
}

/// The bucket at `path` below `state`, all of it open.
fn descend_mut<'s>(state: &'s mut BucketState, path: &[Vec<u8>]) -> &'s mut BucketState {
    let mut state = state;
    for name in path {
        state = state
            .children
            .get_mut(name.as_slice())
            .expect("a handle's path stays open while the handle lives");
    }
    state
}

impl<'a> BucketMut<'a> {
    /// A handle on the top-level bucket `name`, whose state `state` was just taken out of
    /// `registry` (a placeholder left in its place).
    pub(crate) fn top(
        tx: &'a WriteContext,
        registry: &'a Registry,
        name: &[u8],
        state: BucketState,
    ) -> BucketMut<'a> {
        BucketMut {
            tx,
            held: Held::Top {
                registry,
                name: SmallVec::from_slice(name),
                state: registry.boxed(state),
                path: Vec::new(),
                leaf: None,
            },
        }
    }

    /// A handle on a borrowed bucket state.
    pub(crate) fn borrowed(tx: &'a WriteContext, state: &'a mut BucketState) -> BucketMut<'a> {
        BucketMut {
            tx,
            held: Held::Borrowed(state),
        }
    }

    /// Moves this handle down the nested buckets `names`, opening them (or creating the
    /// missing ones with `create`) in one walk from where it is, so a path of depth d costs
    /// O(d), not O(d²). `None` when a bucket on the way does not exist.
    pub(crate) fn descend_path<P: AsRef<[u8]>>(
        mut self,
        names: &[P],
        create: bool,
    ) -> Result<Option<Self>> {
        if names.is_empty() {
            return Ok(Some(self));
        }
        let pages = self.tx.pages();
        let tx = self.tx;
        let Held::Top {
            state: top,
            path,
            leaf,
            ..
        } = &mut self.held
        else {
            unreachable!("descend_path is only called on top-level handles")
        };
        // Back into place first: the walk goes on from the bucket at `path` inside `top`.
        if let Some(held) = leaf.take() {
            *descend_mut(top, path) = *held;
        }
        let mut state = descend_mut(top, path);
        for name in names {
            let name = name.as_ref();
            let child = if create {
                let mut core = tx.core.borrow_mut();
                Some(create_child(pages, &mut core, state, name, true)?)
            } else {
                open_child(pages, state, name)?
            };
            match child {
                Some(child) => state = child,
                None => return Ok(None),
            }
        }
        *leaf = Some(Box::new(std::mem::take(state)));
        path.extend(names.iter().map(|name| name.as_ref().to_vec()));
        Ok(Some(self))
    }

    #[inline]
    pub(crate) fn state(&self) -> &BucketState {
        match &self.held {
            Held::Top {
                leaf: Some(leaf), ..
            } => leaf,
            Held::Top { state, .. } => state,
            Held::Borrowed(state) => state,
            Held::Gone => unreachable!("a handle is not used while it drops"),
        }
    }

    #[inline]
    pub(crate) fn state_mut(&mut self) -> &mut BucketState {
        match &mut self.held {
            Held::Top {
                leaf: Some(leaf), ..
            } => leaf,
            Held::Top { state, .. } => state,
            Held::Borrowed(state) => state,
            Held::Gone => unreachable!("a handle is not used while it drops"),
        }
    }
}

impl BucketMut<'_> {
    /// The bucket as a read view (lookups, cursors, iteration).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// fn count(bucket: rbolt::Bucket<'_>) -> rbolt::Result<usize> {
    ///     bucket.iter().try_fold(0, |n, e| e.map(|_| n + 1))
    /// }
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("a", "1")?;
    ///     b.put("b", "2")?;
    ///     assert_eq!(count(b.as_bucket())?, 2); // read-side code works on a write handle too
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn as_bucket(&self) -> Bucket<'_> {
        self.state().view(self.tx.pages())
    }

    /// The value of `key`; `None` when absent or when `key` holds a nested bucket.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("k", "v")?;
    ///     assert_eq!(b.get("k")?, Some(&b"v"[..])); // sees this transaction's writes
    ///     assert_eq!(b.get("other")?, None);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<&[u8]>> {
        let key = key.as_ref();
        self.as_bucket().get(key)
    }

    /// Sets `key` to `value`. A key holding a nested bucket gives `IncompatibleValue`. Keys
    /// and values are any bytes (`&str`, `&[u8]`, arrays, `Vec<u8>`).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("name", "rbolt")?;
    ///     b.put(7u64.to_be_bytes(), vec![1, 2, 3])?; // big-endian ids sort numerically
    ///     b.put("name", "replaced")?;
    ///     assert_eq!(b.get("name")?, Some(&b"replaced"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn put(&mut self, key: impl AsRef<[u8]>, value: impl AsRef<[u8]>) -> Result<()> {
        let key = key.as_ref();
        let value = value.as_ref();
        check_key(key)?;
        if value.len() > VALUE_SIZE_MAX {
            return Err(Error::ValueTooLarge { len: value.len() });
        }
        let pages = self.tx.pages();
        let tx = self.tx;
        let mut core = tx.core.borrow_mut();
        match self
            .state_mut()
            .tree
            .put(pages, &mut core.arena, key, value, 0)?
        {
            Put::KindConflict { .. } => Err(Error::IncompatibleValue),
            Put::Inserted | Put::Replaced { .. } => Ok(()),
        }
    }

    /// Deletes `key`; returns whether it was there. A key holding a nested bucket gives
    /// `IncompatibleValue` (use `delete_bucket`).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("k", "v")?;
    ///     assert!(b.delete("k")?); // it was there
    ///     assert!(!b.delete("k")?); // not any more
    ///     b.create_bucket("child")?;
    ///     assert!(matches!(b.delete("child"), Err(rbolt::Error::IncompatibleValue)));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn delete(&mut self, key: impl AsRef<[u8]>) -> Result<bool> {
        let key = key.as_ref();
        check_key(key)?;
        let pages = self.tx.pages();
        let tx = self.tx;
        let mut core = tx.core.borrow_mut();
        match self
            .state_mut()
            .tree
            .delete(pages, &mut core.arena, key, 0)?
        {
            Delete::KindConflict { .. } => Err(Error::IncompatibleValue),
            Delete::Deleted { .. } => Ok(true),
            Delete::NotFound => Ok(false),
        }
    }

    /// The nested bucket `name` as a read view.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.create_bucket("child")?.put("k", "v")?;
    ///     let child = b.bucket("child")?.expect("created above");
    ///     assert_eq!(child.get("k")?, Some(&b"v"[..]));
    ///     assert!(b.bucket("missing")?.is_none());
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn bucket(&self, name: impl AsRef<[u8]>) -> Result<Option<Bucket<'_>>> {
        let name = name.as_ref();
        self.as_bucket().bucket(name)
    }

    /// The nested bucket `name`, open for writing; it borrows this handle. `None` when there
    /// is no such bucket; `IncompatibleValue` when `name` holds a value.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.create_bucket("child")?;
    ///     b.put("value", "x")?;
    ///     b.bucket_mut("child")?.expect("created above").put("k", "v")?;
    ///     assert_eq!(b.bucket("child")?.unwrap().get("k")?, Some(&b"v"[..]));
    ///     assert!(b.bucket_mut("missing")?.is_none());
    ///     assert!(matches!(b.bucket_mut("value"), Err(rbolt::Error::IncompatibleValue)));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn bucket_mut(&mut self, name: impl AsRef<[u8]>) -> Result<Option<BucketMut<'_>>> {
        let name = name.as_ref();
        let tx = self.tx;
        let state = open_child(tx.pages(), self.state_mut(), name)?;
        Ok(state.map(|state| BucketMut::borrowed(tx, state)))
    }

    /// Creates the nested bucket `name`: `BucketExists` if it exists, `IncompatibleValue` if
    /// `name` holds a value.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.create_bucket("child")?.put("k", "v")?;
    ///     assert!(matches!(b.create_bucket("child"), Err(rbolt::Error::BucketExists)));
    ///     b.put("value", "x")?;
    ///     assert!(matches!(b.create_bucket("value"), Err(rbolt::Error::IncompatibleValue)));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn create_bucket(&mut self, name: impl AsRef<[u8]>) -> Result<BucketMut<'_>> {
        self.create(name.as_ref(), false)
    }

    /// Creates the nested bucket `name` unless it exists, and returns it.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.create_bucket_if_not_exists("child")?.put("k", "v")?;
    ///     // The second call opens the bucket the first made, content and all.
    ///     let child = b.create_bucket_if_not_exists("child")?;
    ///     assert_eq!(child.get("k")?, Some(&b"v"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn create_bucket_if_not_exists(&mut self, name: impl AsRef<[u8]>) -> Result<BucketMut<'_>> {
        self.create(name.as_ref(), true)
    }

    fn create(&mut self, name: &[u8], if_not_exists: bool) -> Result<BucketMut<'_>> {
        let tx = self.tx;
        let mut core = tx.core.borrow_mut();
        let state = create_child(tx.pages(), &mut core, self.state_mut(), name, if_not_exists)?;
        Ok(BucketMut::borrowed(tx, state))
    }

    /// Deletes the nested bucket `name` and everything in it, freeing all their pages.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.create_bucket("child")?.create_bucket("grandchild")?;
    ///     b.delete_bucket("child")?; // and everything below it
    ///     assert!(b.bucket("child")?.is_none());
    ///     assert!(matches!(b.delete_bucket("child"), Err(rbolt::Error::BucketNotFound)));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn delete_bucket(&mut self, name: impl AsRef<[u8]>) -> Result<()> {
        let name = name.as_ref();
        let tx = self.tx;
        let mut core = tx.core.borrow_mut();
        delete_child(tx, &mut core, self.state_mut(), name)
    }

    /// The bucket's sequence number.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     assert_eq!(b.sequence(), 0); // a new bucket starts at 0
    ///     b.next_sequence()?;
    ///     assert_eq!(b.sequence(), 1);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn sequence(&self) -> u64 {
        self.state().sequence
    }

    /// Sets the bucket's sequence number.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.set_sequence(1000)?;
    ///     assert_eq!(b.next_sequence()?, 1001);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     assert_eq!(tx.bucket("b")?.unwrap().sequence(), 1001); // committed with the bucket
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn set_sequence(&mut self, sequence: u64) -> Result<()> {
        let pages = self.tx.pages();
        let tx = self.tx;
        let mut core = tx.core.borrow_mut();
        let state = self.state_mut();
        state.tree.touch(pages, &mut core.arena)?;
        state.sequence = sequence;
        Ok(())
    }

    /// Increments the bucket's sequence number and returns the new value (1 the first time):
    /// a cheap source of unique ids.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut users = tx.create_bucket("users")?;
    ///     for name in ["alice", "bob"] {
    ///         let id = users.next_sequence()?;
    ///         users.put(id.to_be_bytes(), name)?;
    ///     }
    ///     assert_eq!(users.get(2u64.to_be_bytes())?, Some(&b"bob"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn next_sequence(&mut self) -> Result<u64> {
        let next = self.state().sequence.wrapping_add(1);
        self.set_sequence(next)?;
        Ok(next)
    }

    /// How full split pages are made at commit (default 0.5; 1.0 packs appends).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let b = tx.create_bucket("b")?;
    ///     assert_eq!(b.fill_percent(), 0.5);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn fill_percent(&self) -> f64 {
        self.state().tree.fill_percent()
    }

    /// Sets how full split pages are made at commit for this transaction (clamped to
    /// 0.1..=1.0 when used).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut log = tx.create_bucket("log")?;
    ///     log.set_fill_percent(1.0); // keys only ever append: pack pages full
    ///     assert_eq!(log.fill_percent(), 1.0);
    ///     for i in 0u64..1000 {
    ///         log.put(i.to_be_bytes(), [0u8; 32])?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// // The setting lasts for one transaction; the next one starts from the default.
    /// db.update(|tx| {
    ///     assert_eq!(tx.bucket_mut("log")?.unwrap().fill_percent(), 0.5);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn set_fill_percent(&mut self, fill_percent: f64) {
        self.state_mut().tree.set_fill_percent(fill_percent);
    }

    /// A read cursor over the bucket.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("a", "1")?;
    ///     b.put("c", "3")?;
    ///     let mut cursor = b.cursor();
    ///     assert_eq!(cursor.seek("b")?.map(|e| e.key()), Some(&b"c"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn cursor(&self) -> Cursor<'_> {
        self.as_bucket().cursor()
    }

    /// A cursor that can delete the entry it is on.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for (k, v) in [("a", "keep"), ("b", "drop"), ("c", "keep")] {
    ///         b.put(k, v)?;
    ///     }
    ///     let mut cursor = b.cursor_mut();
    ///     let mut entry = cursor.first()?.map(|e| e.value() == Some(b"drop"));
    ///     while let Some(drop) = entry {
    ///         if drop {
    ///             cursor.delete()?;
    ///         }
    ///         entry = cursor.next()?.map(|e| e.value() == Some(b"drop"));
    ///     }
    ///     assert_eq!(b.get("b")?, None);
    ///     assert_eq!(b.get("c")?, Some(&b"keep"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn cursor_mut(&mut self) -> CursorMut<'_> {
        let tx = self.tx;
        CursorMut::new(tx, self.state_mut())
    }

    /// All entries in key order. The iterator borrows the bucket, so a loop over it cannot
    /// delete: see [`Iter`] for the methods that do (`retain`, `extract_if`, `delete_range`,
    /// `delete_prefix`, `clear`, `pop_first`, `pop_last`).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("x", "1")?;
    ///     b.put("y", "2")?;
    ///     let keys: Vec<&[u8]> =
    ///         b.iter().rev().map(|e| e.map(|e| e.key())).collect::<Result<_, _>>()?;
    ///     assert_eq!(keys, [b"y", b"x"]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn iter(&self) -> Iter<'_> {
        self.as_bucket().iter()
    }

    /// The entries whose keys lie in `range` (see [`Bucket::range`]).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for i in 0u64..10 {
    ///         b.put(i.to_be_bytes(), "")?;
    ///     }
    ///     let (lo, hi) = (3u64.to_be_bytes(), 5u64.to_be_bytes());
    ///     assert_eq!(b.range(lo..=hi).count(), 3);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn range<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> Iter<'_> {
        self.as_bucket().range(range)
    }

    /// The entries whose keys start with `prefix` (see [`Bucket::prefix`]).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for key in ["log/1", "log/2", "meta"] {
    ///         b.put(key, "")?;
    ///     }
    ///     assert_eq!(b.prefix("log/").count(), 2);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter<'_> {
        self.as_bucket().prefix(prefix)
    }
}

#[cfg(test)]
mod tests {
    /// A handle is small: nested handles are kept one per level by code that recurses down
    /// a chain of buckets (a bucket state inline would make each level's frame hundreds of
    /// bytes larger).
    #[test]
    fn a_handle_is_a_few_words() {
        assert!(
            size_of::<super::BucketMut<'_>>() <= 96,
            "{}",
            size_of::<super::BucketMut<'_>>()
        );
    }
}
