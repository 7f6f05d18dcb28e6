//! Buckets: named trees of keys and values, nested at any depth.

use crate::error::{Error, Result};
use crate::iter::{Cursor, CursorMut, Entry, Iter};
use crate::stats::BucketStats;
use crate::tx::TxCore;
use rbolt_btree::{Delete, Put, Tree, TreeView};
use rbolt_page::{
    BUCKET_HEADER_SIZE, BucketHeader, BucketValue, KEY_SIZE_MAX, LEAF_FLAG_BUCKET, Pgid,
    VALUE_SIZE_MAX,
};
use std::collections::BTreeMap;
use std::ops::RangeBounds;

/// Deepest nesting of buckets followed. Deeper nesting in a file means a cycle between bucket
/// pages in a corrupt file, and ends in an error instead of a stack overflow.
pub const BUCKET_DEPTH_MAX: usize = 1024;

/// The value of a new, empty bucket: a header (root 0, sequence 0) and an empty inline leaf.
pub(crate) const EMPTY_BUCKET_VALUE: [u8; BUCKET_HEADER_SIZE + rbolt_page::PAGE_HEADER_SIZE] = {
    let mut value = [0u8; BUCKET_HEADER_SIZE + rbolt_page::PAGE_HEADER_SIZE];
    value[BUCKET_HEADER_SIZE + 8] = rbolt_page::FLAG_LEAF as u8;
    value
};

/// A bucket a write transaction opened: its tree, its sequence, and the buckets opened in it.
#[derive(Debug)]
pub(crate) struct BucketState {
    pub(crate) tree: Tree,
    pub(crate) sequence: u64,
    pub(crate) children: BTreeMap<Vec<u8>, BucketState>,
}

impl BucketState {
    pub(crate) fn new_empty() -> BucketState {
        BucketState {
            tree: Tree::new(),
            sequence: 0,
            children: BTreeMap::new(),
        }
    }

    pub(crate) fn from_root(root: Pgid, sequence: u64) -> BucketState {
        BucketState {
            tree: Tree::from_page(root),
            sequence,
            children: BTreeMap::new(),
        }
    }

    /// Adds the counters of this bucket's tree and every open bucket below it.
    pub(crate) fn add_tree_stats(&self, stats: &mut rbolt_btree::TreeStats) {
        stats.add(&self.tree.stats());
        for child in self.children.values() {
            child.add_tree_stats(stats);
        }
    }

    /// Whether anything in this bucket or below was edited.
    pub(crate) fn is_changed(&self) -> bool {
        self.tree.is_dirty() || self.children.values().any(BucketState::is_changed)
    }

    /// The read view of this bucket.
    pub(crate) fn view<'a>(&'a self, core: &'a TxCore) -> Bucket<'a> {
        Bucket {
            view: self.tree.view(core.pages()),
            sequence: self.sequence,
            children: Some(&self.children),
        }
    }
}

fn check_key(key: &[u8]) -> Result<()> {
    if key.is_empty() {
        return Err(Error::KeyRequired);
    }
    if key.len() > KEY_SIZE_MAX {
        return Err(Error::KeyTooLarge { len: key.len() });
    }
    Ok(())
}

fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() {
        return Err(Error::BucketNameRequired);
    }
    if name.len() > KEY_SIZE_MAX {
        return Err(Error::KeyTooLarge { len: name.len() });
    }
    Ok(())
}

/// The child bucket `name` of `state`, opened from its value if not open yet. `None` when
/// there is no such key; `IncompatibleValue` when the key holds a value.
pub(crate) fn open_child<'s>(
    core: &TxCore,
    state: &'s mut BucketState,
    name: &[u8],
) -> Result<Option<&'s mut BucketState>> {
    if !state.children.contains_key(name) {
        let Some(child) = load_child(core, state, name)? else {
            return Ok(None);
        };
        state.children.insert(name.to_vec(), child);
    }
    Ok(state.children.get_mut(name))
}

/// Reads the child bucket `name` from `state`'s tree (not from its open children).
fn load_child(core: &TxCore, state: &BucketState, name: &[u8]) -> Result<Option<BucketState>> {
    let pages = core.pages();
    let Some(entry) = state.tree.get(pages, name)? else {
        return Ok(None);
    };
    if !entry.is_bucket() {
        return Err(Error::IncompatibleValue);
    }
    let (tree, header) = Tree::from_bucket_value(pages, entry.value)?;
    Ok(Some(BucketState {
        tree,
        sequence: header.sequence,
        children: BTreeMap::new(),
    }))
}

pub(crate) fn create_child<'s>(
    core: &mut TxCore,
    state: &'s mut BucketState,
    name: &[u8],
    if_not_exists: bool,
) -> Result<&'s mut BucketState> {
    check_name(name)?;
    let pages = core.pages();
    match state.tree.get(pages, name)? {
        Some(entry) if entry.is_bucket() => {
            if if_not_exists {
                return Ok(open_child(core, state, name)?.expect("the bucket exists"));
            }
            return Err(Error::BucketExists);
        }
        Some(_) => return Err(Error::IncompatibleValue),
        None => {}
    }
    let (pages, arena) = core.pages_and_arena();
    state
        .tree
        .put(pages, arena, name, &EMPTY_BUCKET_VALUE, LEAF_FLAG_BUCKET)?;
    state
        .children
        .insert(name.to_vec(), BucketState::new_empty());
    Ok(state.children.get_mut(name).expect("just inserted"))
}

pub(crate) fn delete_child(core: &mut TxCore, state: &mut BucketState, name: &[u8]) -> Result<()> {
    check_name(name)?;
    let pages = core.pages();
    match state.tree.get(pages, name)? {
        None => return Err(Error::BucketNotFound),
        Some(entry) if !entry.is_bucket() => return Err(Error::IncompatibleValue),
        Some(_) => {}
    }
    let mut child = match state.children.remove(name) {
        Some(child) => child,
        None => load_child(core, state, name)?.ok_or(Error::BucketNotFound)?,
    };
    free_bucket(core, &mut child, 0)?;
    let (pages, arena) = core.pages_and_arena();
    state.tree.delete(pages, arena, name, LEAF_FLAG_BUCKET)?;
    Ok(())
}

/// Frees every page of `bucket` and of every bucket nested in it, however they were edited
/// in this transaction.
fn free_bucket(core: &mut TxCore, bucket: &mut BucketState, depth: usize) -> Result<()> {
    if depth >= BUCKET_DEPTH_MAX {
        return Err(bucket_too_deep());
    }
    let names: Vec<Vec<u8>> = {
        let view = bucket.tree.view(core.pages());
        let mut cursor = view.cursor();
        let mut names = Vec::new();
        let mut entry = cursor.first()?;
        while let Some(e) = entry {
            if e.is_bucket() {
                names.push(e.key.to_vec());
            }
            entry = cursor.next()?;
        }
        names
    };
    for name in names {
        let mut child = match bucket.children.remove(&name) {
            Some(child) => child,
            None => load_child(core, bucket, &name)?.ok_or(Error::BucketNotFound)?,
        };
        free_bucket(core, &mut child, depth + 1)?;
    }
    let (pages, _, alloc) = core.parts();
    bucket.tree.free_all(pages, alloc)
}

pub(crate) fn bucket_too_deep() -> Error {
    Error::Corruption(rbolt_page::Corruption::new(
        Pgid(0),
        rbolt_page::Reason::Other("buckets nest deeper than BUCKET_DEPTH_MAX (a cycle?)"),
    ))
}

/// A bucket read through a transaction: lookups, cursors and iteration, all borrowing from
/// the transaction without copying. Values are borrowed for as long as the bucket handle.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut fruit = tx.create_bucket(b"fruit")?;
///     fruit.put(b"apple", b"red")?;
///     fruit.put(b"pear", b"green")?;
///     Ok(())
/// })?;
/// db.view(|tx| {
///     let fruit = tx.bucket(b"fruit")?.expect("created above");
///     assert_eq!(fruit.get(b"pear")?, Some(&b"green"[..]));
///     let keys: Vec<&[u8]> = fruit.iter().map(|e| e.map(|e| e.key())).collect::<Result<_, _>>()?;
///     assert_eq!(keys, [&b"apple"[..], b"pear"]);
///     Ok(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Bucket<'a> {
    pub(crate) view: TreeView<'a>,
    pub(crate) sequence: u64,
    pub(crate) children: Option<&'a BTreeMap<Vec<u8>, BucketState>>,
}

impl<'a> Bucket<'a> {
    /// The value of `key`; `None` when absent or when `key` holds a nested bucket.
    #[inline]
    pub fn get(&self, key: &[u8]) -> Result<Option<&'a [u8]>> {
        Ok(match self.view.get(key)? {
            Some(entry) if !entry.is_bucket() => Some(entry.value),
            _ => None,
        })
    }

    /// The nested bucket `name`, if there is one.
    pub fn bucket(&self, name: &[u8]) -> Result<Option<Bucket<'a>>> {
        if let Some(children) = self.children
            && let Some(child) = children.get(name)
        {
            return Ok(Some(Bucket {
                view: child.tree.view(self.view.pages()),
                sequence: child.sequence,
                children: Some(&child.children),
            }));
        }
        let Some(entry) = self.view.get(name)? else {
            return Ok(None);
        };
        if !entry.is_bucket() {
            return Ok(None);
        }
        Ok(Some(Bucket::from_value(self.view.pages(), entry.value)?))
    }

    /// The bucket whose value is `value`, read from `pages`.
    pub(crate) fn from_value(pages: rbolt_btree::Pages<'a>, value: &'a [u8]) -> Result<Bucket<'a>> {
        let parsed = BucketValue::parse(value, Pgid(0))?;
        let view = match parsed.inline {
            Some(_) => TreeView::from_inline(pages, &value[BUCKET_HEADER_SIZE..]),
            None => TreeView::from_page(pages, parsed.header.root_pgid()),
        };
        Ok(Bucket {
            view,
            sequence: parsed.header.sequence,
            children: None,
        })
    }

    /// The bucket's sequence number.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The committed root page of the bucket (0 for an inline or edited one).
    pub fn root(&self) -> Pgid {
        self.view.root_pgid().unwrap_or(Pgid(0))
    }

    /// A cursor over the bucket's entries, values and nested buckets alike.
    pub fn cursor(&self) -> Cursor<'a> {
        Cursor::new(self.view.cursor())
    }

    /// All entries in key order; double-ended.
    pub fn iter(&self) -> Iter<'a> {
        Iter::new(
            self.view,
            (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
        )
    }

    /// The entries whose keys lie in `range`, in key order; double-ended.
    pub fn range<'k>(&self, range: impl RangeBounds<&'k [u8]>) -> Iter<'a> {
        Iter::new(
            self.view,
            (
                range.start_bound().map(|k| *k),
                range.end_bound().map(|k| *k),
            ),
        )
    }

    /// Calls `f` with every key and its value (`None` for a nested bucket), in key order.
    pub fn for_each(
        &self,
        mut f: impl FnMut(&'a [u8], Option<&'a [u8]>) -> Result<()>,
    ) -> Result<()> {
        for entry in self.iter() {
            let entry = entry?;
            f(entry.key(), entry.value())?;
        }
        Ok(())
    }

    /// Calls `f` with the name of every nested bucket, in key order.
    pub fn for_each_bucket(&self, mut f: impl FnMut(&'a [u8]) -> Result<()>) -> Result<()> {
        for entry in self.iter() {
            let entry = entry?;
            if entry.is_bucket() {
                f(entry.key())?;
            }
        }
        Ok(())
    }

    /// Page and key counts of this bucket and every bucket nested in it (bbolt's
    /// `Bucket.Stats`).
    pub fn stats(&self) -> Result<BucketStats> {
        crate::stats::bucket_stats(self)
    }
}

/// A bucket of a write transaction, open for writing. Borrows the transaction mutably: one
/// handle at a time, nested handles borrow their parent.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = rbolt::Db::open(dir.path().join("db"))?;
/// let mut tx = db.begin_write()?;
/// let mut users = tx.create_bucket(b"users")?;
/// let id = users.next_sequence()?;
/// let mut alice = users.create_bucket(b"alice")?;
/// alice.put(b"id", &id.to_be_bytes())?;
/// assert_eq!(alice.get(b"id")?, Some(&1u64.to_be_bytes()[..]));
/// tx.commit()?;
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Debug)]
pub struct BucketMut<'a> {
    pub(crate) core: &'a mut TxCore,
    pub(crate) state: &'a mut BucketState,
}

impl BucketMut<'_> {
    /// The bucket as a read view (lookups, cursors, iteration).
    pub fn as_bucket(&self) -> Bucket<'_> {
        self.state.view(self.core)
    }

    /// The value of `key`; `None` when absent or when `key` holds a nested bucket.
    pub fn get(&self, key: &[u8]) -> Result<Option<&[u8]>> {
        self.as_bucket().get(key)
    }

    /// Sets `key` to `value`. A key holding a nested bucket gives `IncompatibleValue`.
    pub fn put(&mut self, key: &[u8], value: &[u8]) -> Result<()> {
        check_key(key)?;
        if value.len() > VALUE_SIZE_MAX {
            return Err(Error::ValueTooLarge { len: value.len() });
        }
        let (pages, arena) = self.core.pages_and_arena();
        match self.state.tree.put(pages, arena, key, value, 0)? {
            Put::KindConflict { .. } => Err(Error::IncompatibleValue),
            Put::Inserted | Put::Replaced { .. } => Ok(()),
        }
    }

    /// Deletes `key`; returns whether it was there. A key holding a nested bucket gives
    /// `IncompatibleValue` (use `delete_bucket`).
    pub fn delete(&mut self, key: &[u8]) -> Result<bool> {
        check_key(key)?;
        let (pages, arena) = self.core.pages_and_arena();
        match self.state.tree.delete(pages, arena, key, 0)? {
            Delete::KindConflict { .. } => Err(Error::IncompatibleValue),
            Delete::Deleted { .. } => Ok(true),
            Delete::NotFound => Ok(false),
        }
    }

    /// The nested bucket `name` as a read view.
    pub fn bucket(&self, name: &[u8]) -> Result<Option<Bucket<'_>>> {
        self.as_bucket().bucket(name)
    }

    /// The nested bucket `name`, open for writing. `None` when there is no such bucket;
    /// `IncompatibleValue` when `name` holds a value.
    pub fn bucket_mut(&mut self, name: &[u8]) -> Result<Option<BucketMut<'_>>> {
        let core = &mut *self.core;
        let state = open_child(core, self.state, name)?;
        Ok(state.map(|state| BucketMut { core, state }))
    }

    /// Creates the nested bucket `name`: `BucketExists` if it exists, `IncompatibleValue` if
    /// `name` holds a value.
    pub fn create_bucket(&mut self, name: &[u8]) -> Result<BucketMut<'_>> {
        let core = &mut *self.core;
        let state = create_child(core, self.state, name, false)?;
        Ok(BucketMut { core, state })
    }

    /// Creates the nested bucket `name` unless it exists, and returns it.
    pub fn create_bucket_if_not_exists(&mut self, name: &[u8]) -> Result<BucketMut<'_>> {
        let core = &mut *self.core;
        let state = create_child(core, self.state, name, true)?;
        Ok(BucketMut { core, state })
    }

    /// Deletes the nested bucket `name` and everything in it, freeing all their pages.
    pub fn delete_bucket(&mut self, name: &[u8]) -> Result<()> {
        delete_child(self.core, self.state, name)
    }

    /// The bucket's sequence number.
    pub fn sequence(&self) -> u64 {
        self.state.sequence
    }

    /// Sets the bucket's sequence number.
    pub fn set_sequence(&mut self, sequence: u64) -> Result<()> {
        let (pages, arena) = self.core.pages_and_arena();
        self.state.tree.touch(pages, arena)?;
        self.state.sequence = sequence;
        Ok(())
    }

    /// Increments the bucket's sequence number and returns the new value (1 the first time):
    /// a cheap source of unique ids.
    pub fn next_sequence(&mut self) -> Result<u64> {
        let next = self.state.sequence.wrapping_add(1);
        self.set_sequence(next)?;
        Ok(next)
    }

    /// How full split pages are made at commit (default 0.5; 1.0 packs appends).
    pub fn fill_percent(&self) -> f64 {
        self.state.tree.fill_percent()
    }

    /// Sets how full split pages are made at commit for this transaction (clamped to
    /// 0.1..=1.0 when used).
    pub fn set_fill_percent(&mut self, fill_percent: f64) {
        self.state.tree.set_fill_percent(fill_percent);
    }

    /// A read cursor over the bucket.
    pub fn cursor(&self) -> Cursor<'_> {
        self.as_bucket().cursor()
    }

    /// A cursor that can delete the entry it is on.
    pub fn cursor_mut(&mut self) -> CursorMut<'_> {
        CursorMut::new(self.core, self.state)
    }

    /// All entries in key order.
    pub fn iter(&self) -> Iter<'_> {
        self.as_bucket().iter()
    }

    /// The entries whose keys lie in `range`.
    pub fn range<'k>(&self, range: impl RangeBounds<&'k [u8]>) -> Iter<'_> {
        self.as_bucket().range(range)
    }

    /// Page and key counts of this bucket and its nested buckets.
    pub fn stats(&self) -> Result<BucketStats> {
        self.as_bucket().stats()
    }
}

/// An entry of a bucket: a key and either its value or a nested bucket.
pub(crate) fn entry_of(entry: rbolt_btree::Entry<'_>) -> Entry<'_> {
    Entry::new(entry.key, entry.value, entry.is_bucket())
}

/// The bucket header of a bucket value.
pub(crate) fn header_bytes(root: Pgid, sequence: u64) -> [u8; BUCKET_HEADER_SIZE] {
    let mut bytes = [0u8; BUCKET_HEADER_SIZE];
    BucketHeader {
        root: root.0,
        sequence,
    }
    .write(&mut bytes);
    bytes
}
