//! Buckets: named trees of keys and values, nested at any depth.

use crate::error::{Error, Result};
use crate::iter::{Cursor, CursorMut, Entry, Iter};
use crate::stats::BucketStats;
use crate::tx::{TxCore, TxShared};
use rbolt_btree::{Delete, Pages, Put, Tree, TreeView};
use rbolt_freelist::Freelist;
use rbolt_page::{
    BucketValue, Corruption, EMPTY_BUCKET_VALUE, KEY_SIZE_MAX, LEAF_FLAG_BUCKET, Pgid, Reason,
    VALUE_SIZE_MAX,
};
use smallvec::SmallVec;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::ops::RangeBounds;

/// A bucket a write transaction opened: its tree, its sequence, and the buckets opened in it.
///
/// Buckets nest without limit (Go bbolt has none), so nothing here recurses over `children`:
/// walks keep explicit stacks, and dropping a chain of thousands of nested states unlinks it
/// level by level.
#[derive(Default)]
pub(crate) struct BucketState {
    pub(crate) tree: Tree,
    pub(crate) sequence: u64,
    pub(crate) children: BTreeMap<Vec<u8>, BucketState>,
    /// This is the placeholder of a top-level bucket whose state a [`BucketMut`] holds: it
    /// cannot be opened, deleted or moved until the handle puts the state back.
    pub(crate) out: bool,
}

impl std::fmt::Debug for BucketState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the children themselves: printing them would recurse as deep as they nest.
        f.debug_struct("BucketState")
            .field("root", &self.tree.root_pgid())
            .field("dirty", &self.tree.is_dirty())
            .field("sequence", &self.sequence)
            .field("children", &self.children.len())
            .field("out", &self.out)
            .finish()
    }
}

impl Drop for BucketState {
    fn drop(&mut self) {
        if self.children.is_empty() {
            // The common case, and the placeholders of held buckets: nothing to unlink, and
            // no stack to allocate.
            return;
        }
        let mut maps = vec![std::mem::take(&mut self.children)];
        while let Some(map) = maps.pop() {
            for (_, mut child) in map {
                if !child.children.is_empty() {
                    maps.push(std::mem::take(&mut child.children));
                }
                // `child` drops here with no children left: no recursion.
            }
        }
    }
}

impl BucketState {
    pub(crate) fn new_empty() -> BucketState {
        BucketState {
            tree: Tree::new(),
            sequence: 0,
            children: BTreeMap::new(),
            out: false,
        }
    }

    /// What stands in the registry for a top-level bucket while a handle holds its state.
    /// Allocates nothing.
    pub(crate) fn placeholder() -> BucketState {
        let mut state = BucketState::new_empty();
        state.out = true;
        state
    }

    pub(crate) fn from_root(root: Pgid, sequence: u64) -> BucketState {
        BucketState {
            tree: Tree::from_page(root),
            sequence,
            children: BTreeMap::new(),
            out: false,
        }
    }

    /// This bucket and every open bucket below it, in no particular order.
    fn each(&self) -> impl Iterator<Item = &BucketState> {
        let mut stack = vec![self];
        std::iter::from_fn(move || {
            let state = stack.pop()?;
            stack.extend(state.children.values());
            Some(state)
        })
    }

    /// Adds the counters of this bucket's tree and every open bucket below it.
    pub(crate) fn add_tree_stats(&self, stats: &mut rbolt_btree::TreeStats) {
        for state in self.each() {
            stats.add(&state.tree.stats());
        }
    }

    /// Whether anything in this bucket or below was edited.
    pub(crate) fn is_changed(&self) -> bool {
        self.each().any(|state| state.tree.is_dirty())
    }

    /// The read view of this bucket.
    pub(crate) fn view<'a>(&'a self, pages: Pages<'a>) -> Bucket<'a> {
        Bucket {
            view: self.tree.view(pages),
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

pub(crate) fn check_name(name: &[u8]) -> Result<()> {
    if name.is_empty() {
        return Err(Error::BucketNameRequired);
    }
    if name.len() > KEY_SIZE_MAX {
        return Err(Error::KeyTooLarge { len: name.len() });
    }
    Ok(())
}

/// `BucketInUse` when the child bucket `name` of `state` is held by a handle.
pub(crate) fn check_not_out(state: &BucketState, name: &[u8]) -> Result<()> {
    match state.children.get(name) {
        Some(child) if child.out => Err(Error::BucketInUse),
        _ => Ok(()),
    }
}

/// The child bucket `name` of `state`, opened from its value if not open yet. `None` when
/// there is no such key; `IncompatibleValue` when the key holds a value; `BucketInUse` when a
/// handle holds it.
pub(crate) fn open_child<'s>(
    pages: Pages<'_>,
    state: &'s mut BucketState,
    name: &[u8],
) -> Result<Option<&'s mut BucketState>> {
    check_not_out(state, name)?;
    if !state.children.contains_key(name) {
        let Some(child) = load_child(pages, state, name)? else {
            return Ok(None);
        };
        state.children.insert(name.to_vec(), child);
    }
    Ok(state.children.get_mut(name))
}

/// Reads the child bucket `name` from `state`'s tree (not from its open children).
fn load_child(pages: Pages<'_>, state: &BucketState, name: &[u8]) -> Result<Option<BucketState>> {
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
        out: false,
    }))
}

/// Creates the child bucket `name` of `state` (or opens it, with `if_not_exists`).
pub(crate) fn create_child<'s>(
    pages: Pages<'_>,
    core: &mut TxCore,
    state: &'s mut BucketState,
    name: &[u8],
    if_not_exists: bool,
) -> Result<&'s mut BucketState> {
    check_name(name)?;
    check_not_out(state, name)?;
    match state.tree.get(pages, name)? {
        Some(entry) if entry.is_bucket() => {
            if if_not_exists {
                return open_child(pages, state, name)?.ok_or(Error::BucketNotFound);
            }
            return Err(Error::BucketExists);
        }
        Some(_) => return Err(Error::IncompatibleValue),
        None => {}
    }
    state.tree.put(
        pages,
        &mut core.arena,
        name,
        &EMPTY_BUCKET_VALUE,
        LEAF_FLAG_BUCKET,
    )?;
    state
        .children
        .insert(name.to_vec(), BucketState::new_empty());
    Ok(state.children.get_mut(name).expect("just inserted"))
}

/// Deletes the nested bucket `name` of `state` and frees every page of it and of the
/// buckets nested in it, however they were edited in this transaction.
///
/// In three steps, so that an error leaves the transaction as it was: every page to free is
/// found and checked first (reading only); then the bucket's key is deleted from `state`
/// (which may fail on a corrupt page, before changing anything); then the pages are freed,
/// which the checks made certain to succeed.
pub(crate) fn delete_child(
    tx: &TxShared,
    core: &mut TxCore,
    state: &mut BucketState,
    name: &[u8],
) -> Result<()> {
    check_name(name)?;
    check_not_out(state, name)?;
    let pages = tx.pages();
    match state.tree.get(pages, name)? {
        None => return Err(Error::BucketNotFound),
        Some(entry) if !entry.is_bucket() => return Err(Error::IncompatibleValue),
        Some(_) => {}
    }
    let freed = pages_of_bucket(tx, core, state, name)?;
    state
        .tree
        .delete(pages, &mut core.arena, name, LEAF_FLAG_BUCKET)?;
    let txid = core.alloc.txid;
    for &(pgid, overflow) in &freed {
        if let Err(error) = core.alloc.freelist.free(txid, pgid, overflow) {
            // The checks above rule this out; if it happens anyway, nothing of this
            // transaction may reach the disk.
            debug_assert!(false, "freeing a checked page failed: {error}");
            core.broken = true;
            return Err(error.into());
        }
    }
    state.children.remove(name);
    Ok(())
}

/// Every page of the nested bucket `name` of `state` and of the buckets nested in it, with
/// its overflow: what deleting it frees. Reads only. Fails on a corrupt page, and on a page
/// that is reached twice, lies outside the file, or is already free or pending, so that
/// freeing the list cannot fail.
fn pages_of_bucket(
    tx: &TxShared,
    core: &TxCore,
    state: &BucketState,
    name: &[u8],
) -> Result<Vec<(Pgid, u32)>> {
    /// A bucket still to walk: open in the transaction, or loaded from its value.
    enum Work<'s> {
        Open(&'s BucketState),
        Loaded(Box<BucketState>),
    }
    let pages = tx.pages();
    let first = match state.children.get(name) {
        Some(open) => Work::Open(open),
        None => Work::Loaded(Box::new(
            load_child(pages, state, name)?.ok_or(Error::BucketNotFound)?,
        )),
    };
    let mut stack = vec![first];
    let mut freed = Vec::new();
    while let Some(work) = stack.pop() {
        // Buckets open in the transaction may have open children, which hold their edits;
        // a bucket loaded from its value has none.
        let (loaded, open): (Option<Box<BucketState>>, Option<&BucketState>) = match work {
            Work::Open(state) => (None, Some(state)),
            Work::Loaded(state) => (Some(state), None),
        };
        let bucket = open.or(loaded.as_deref()).expect("one of the two");
        bucket
            .tree
            .for_each_page(pages, |pgid, overflow| freed.push((pgid, overflow)))?;
        let view = bucket.tree.view(pages);
        let mut cursor = view.cursor();
        let mut entry = cursor.first()?;
        while let Some(e) = entry {
            if e.is_bucket() {
                stack.push(match open.and_then(|open| open.children.get(e.key)) {
                    Some(child) => Work::Open(child),
                    None => Work::Loaded(Box::new(
                        load_child(pages, bucket, e.key)?.ok_or(Error::BucketNotFound)?,
                    )),
                });
            }
            entry = cursor.next()?;
        }
    }
    // Every id once, within the file, not free already.
    let high_water = tx.high_water;
    let mut ids: Vec<u64> = Vec::with_capacity(freed.len());
    for &(pgid, overflow) in &freed {
        let end = pgid.0.checked_add(u64::from(overflow) + 1);
        if pgid.0 < 2 || end.is_none_or(|end| end > high_water.0) {
            return Err(Corruption::new(
                pgid,
                Reason::Other("a bucket page lies outside the file"),
            )
            .into());
        }
        for id in pgid.0..pgid.0 + u64::from(overflow) + 1 {
            if core.alloc.freelist.is_freed(Pgid(id)) {
                return Err(Corruption::new(
                    Pgid(id),
                    Reason::Other("a bucket page is already on the freelist"),
                )
                .into());
            }
            ids.push(id);
        }
    }
    ids.sort_unstable();
    if let Some(pair) = ids.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(
            Corruption::new(Pgid(pair[0]), Reason::Other("page is reachable twice")).into(),
        );
    }
    Ok(freed)
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
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("k", "v")?;
    ///     b.create_bucket("child")?;
    ///     Ok(())
    /// })?;
    /// db.view(|tx| {
    ///     let b = tx.bucket("b")?.unwrap();
    ///     assert_eq!(b.get("k")?, Some(&b"v"[..]));
    ///     assert_eq!(b.get("missing")?, None);
    ///     assert_eq!(b.get("child")?, None); // a nested bucket is not a value
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    #[inline]
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<&'a [u8]>> {
        let key = key.as_ref();
        Ok(match self.view.get(key)? {
            Some(entry) if !entry.is_bucket() => Some(entry.value),
            _ => None,
        })
    }

    /// The nested bucket `name`, if there is one.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut users = tx.create_bucket("users")?;
    ///     users.create_bucket("alice")?.put("age", "42")?;
    ///     users.put("count", "1")?;
    ///     Ok(())
    /// })?;
    /// db.view(|tx| {
    ///     let users = tx.bucket("users")?.unwrap();
    ///     let alice = users.bucket("alice")?.expect("a nested bucket");
    ///     assert_eq!(alice.get("age")?, Some(&b"42"[..]));
    ///     assert!(users.bucket("count")?.is_none()); // a value, not a bucket
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn bucket(&self, name: impl AsRef<[u8]>) -> Result<Option<Bucket<'a>>> {
        let name = name.as_ref();
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
            Some(inline) => TreeView::from_inline(pages, inline.bytes()),
            None => TreeView::from_page(pages, parsed.header.root_pgid()),
        };
        Ok(Bucket {
            view,
            sequence: parsed.header.sequence,
            children: None,
        })
    }

    /// The bucket's sequence number.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.set_sequence(41)?;
    ///     b.next_sequence()?;
    ///     Ok(())
    /// })?;
    /// db.view(|tx| {
    ///     assert_eq!(tx.bucket("b")?.unwrap().sequence(), 42);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The committed root page of the bucket (0 for an inline or edited one).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     tx.create_bucket("small")?.put("k", "v")?; // small enough to live inline
    ///     let mut big = tx.create_bucket("big")?;
    ///     for i in 0u32..1000 {
    ///         big.put(i.to_be_bytes(), [0u8; 100])?;
    ///     }
    ///     Ok(())
    /// })?;
    /// db.view(|tx| {
    ///     assert_eq!(tx.bucket("small")?.unwrap().root(), rbolt::Pgid(0));
    ///     assert!(tx.bucket("big")?.unwrap().root().0 >= 2); // a page of its own
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn root(&self) -> Pgid {
        self.view.root_pgid().unwrap_or(Pgid(0))
    }

    /// A cursor over the bucket's entries, values and nested buckets alike.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("a", "1")?;
    ///     b.put("b", "2")?;
    ///     Ok(())
    /// })?;
    /// db.view(|tx| {
    ///     let mut cursor = tx.bucket("b")?.unwrap().cursor();
    ///     assert_eq!(cursor.last()?.map(|e| e.key()), Some(&b"b"[..]));
    ///     assert_eq!(cursor.prev()?.and_then(|e| e.value()), Some(&b"1"[..]));
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn cursor(&self) -> Cursor<'a> {
        Cursor::new(self.view.cursor())
    }

    /// All entries in key order; double-ended.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for (k, v) in [("b", "2"), ("a", "1"), ("c", "3")] {
    ///         b.put(k, v)?;
    ///     }
    ///     Ok(())
    /// })?;
    /// db.view(|tx| {
    ///     let b = tx.bucket("b")?.unwrap();
    ///     let values: Vec<&[u8]> =
    ///         b.iter().map(|e| e.map(|e| e.value().unwrap())).collect::<Result<_, _>>()?;
    ///     assert_eq!(values, [b"1", b"2", b"3"]);
    ///     let last = b.iter().next_back().transpose()?.map(|e| e.key());
    ///     assert_eq!(last, Some(&b"c"[..]));
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn iter(&self) -> Iter<'a> {
        Iter::new(
            self.view,
            (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
        )
    }

    /// The entries whose keys lie in `range`, in key order; double-ended. The bounds are any
    /// byte strings: `range("a".."c")`, `range(&b"k"[..]..)`, `range(start..=end)`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("letters")?;
    ///     for key in ["a", "b", "c", "d"] {
    ///         b.put(key, "x")?;
    ///     }
    ///     let keys: Vec<&[u8]> = b.range("b".."d").map(|e| e.map(|e| e.key())).collect::<Result<_, _>>()?;
    ///     assert_eq!(keys, [b"b", b"c"]);
    ///     let last: Vec<&[u8]> = b.range("c"..).rev().map(|e| e.map(|e| e.key())).collect::<Result<_, _>>()?;
    ///     assert_eq!(last, [b"d", b"c"]);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn range<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> Iter<'a> {
        Iter::new(
            self.view,
            (
                range.start_bound().map(|k| k.as_ref()),
                range.end_bound().map(|k| k.as_ref()),
            ),
        )
    }

    /// The entries whose keys start with `prefix`, in key order; double-ended.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("users")?;
    ///     for key in ["alice", "al", "bob", "alfred", "albert"] {
    ///         b.put(key, "")?;
    ///     }
    ///     let al: Vec<&[u8]> = b.prefix("al").map(|e| e.map(|e| e.key())).collect::<Result<_, _>>()?;
    ///     assert_eq!(al, [&b"al"[..], b"albert", b"alfred", b"alice"]);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter<'a> {
        let prefix = prefix.as_ref();
        let end = prefix_end(prefix);
        Iter::new(
            self.view,
            (
                std::ops::Bound::Included(prefix),
                match &end {
                    Some(end) => std::ops::Bound::Excluded(end.as_slice()),
                    None => std::ops::Bound::Unbounded,
                },
            ),
        )
    }

    /// A walk over this bucket and every bucket nested in it, depth first in key order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut root = tx.create_bucket("root")?;
    ///     root.put("a", "1")?;
    ///     root.create_bucket("sub")?.put("b", "2")?;
    ///     Ok(())
    /// })?;
    /// db.view(|tx| {
    ///     let mut walk = tx.bucket("root")?.unwrap().walk();
    ///     let mut values = Vec::new();
    ///     while let Some(step) = walk.next_step() {
    ///         if let rbolt::WalkStep::Value { key, .. } = step? {
    ///             values.push((walk.path().len(), key));
    ///         }
    ///     }
    ///     assert_eq!(values, [(0, &b"a"[..]), (1, &b"b"[..])]);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn walk(&self) -> crate::Walk<'a> {
        crate::Walk::new(*self)
    }

    /// Calls `f` with every key and its value (`None` for a nested bucket), in key order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("k", "v")?;
    ///     b.create_bucket("child")?;
    ///     Ok(())
    /// })?;
    /// db.view(|tx| {
    ///     let mut seen = Vec::new();
    ///     tx.bucket("b")?.unwrap().for_each(|key, value| {
    ///         seen.push((key, value));
    ///         Ok(())
    ///     })?;
    ///     assert_eq!(seen, [(&b"child"[..], None), (&b"k"[..], Some(&b"v"[..]))]);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
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
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.create_bucket("x")?;
    ///     b.put("value", "skipped")?;
    ///     b.create_bucket("y")?;
    ///     Ok(())
    /// })?;
    /// db.view(|tx| {
    ///     let mut names = Vec::new();
    ///     tx.bucket("b")?.unwrap().for_each_bucket(|name| {
    ///         names.push(name);
    ///         Ok(())
    ///     })?;
    ///     assert_eq!(names, [b"x", b"y"]);
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
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
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("a", "1")?;
    ///     b.create_bucket("child")?.put("b", "2")?;
    ///     Ok(())
    /// })?;
    /// db.view(|tx| {
    ///     let stats = tx.bucket("b")?.unwrap().stats()?;
    ///     assert_eq!(stats.key_n, 3); // "a", "child" and the child's "b"
    ///     assert_eq!(stats.bucket_n, 2); // the bucket and its child
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn stats(&self) -> Result<BucketStats> {
        crate::stats::bucket_stats(self)
    }
}

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
    pub(crate) tx: &'a TxShared,
    held: Held<'a>,
}

/// Where a [`BucketMut`]'s state is.
enum Held<'a> {
    /// A top-level bucket: its state, moved out of the transaction's registry (which keeps a
    /// placeholder under `name`) and put back on drop; the handle is the bucket `path` below
    /// it (empty for the top-level bucket itself).
    Top {
        registry: &'a RefCell<BucketState>,
        name: SmallVec<[u8; 32]>,
        /// Boxed, so that a handle stays small: nested handles are as large as this enum,
        /// and code that recurses down a deep chain of buckets keeps one per level.
        state: Box<BucketState>,
        path: Vec<Vec<u8>>,
    },
    /// A bucket below another handle's, or the root bucket for a copy: borrowed.
    Borrowed(&'a mut BucketState),
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
        if let Held::Top {
            registry,
            name,
            state,
            ..
        } = &mut self.held
        {
            // No method of the transaction keeps the registry borrowed while it drops a
            // handle, or runs user code while it is borrowed: this borrow cannot fail.
            let mut registry = registry.borrow_mut();
            match registry.children.get_mut(name.as_slice()) {
                Some(slot) => {
                    debug_assert!(slot.out, "a held bucket's placeholder");
                    *slot = std::mem::take(&mut **state);
                }
                None => debug_assert!(false, "a held bucket's placeholder is gone"),
            }
        }
    }
}

/// The bucket at `path` below `state`, all of it open.
fn descend<'s>(state: &'s BucketState, path: &[Vec<u8>]) -> &'s BucketState {
    let mut state = state;
    for name in path {
        state = state
            .children
            .get(name.as_slice())
            .expect("a handle's path stays open while the handle lives");
    }
    state
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
        tx: &'a TxShared,
        registry: &'a RefCell<BucketState>,
        name: &[u8],
        state: BucketState,
    ) -> BucketMut<'a> {
        BucketMut {
            tx,
            held: Held::Top {
                registry,
                name: SmallVec::from_slice(name),
                state: Box::new(state),
                path: Vec::new(),
            },
        }
    }

    /// A handle on a borrowed bucket state.
    pub(crate) fn borrowed(tx: &'a TxShared, state: &'a mut BucketState) -> BucketMut<'a> {
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
        let pages = self.tx.pages();
        let tx = self.tx;
        let mut state = self.state_mut();
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
        match &mut self.held {
            Held::Top { path, .. } => path.extend(names.iter().map(|name| name.as_ref().to_vec())),
            Held::Borrowed(_) => unreachable!("descend_path is only called on top-level handles"),
        }
        Ok(Some(self))
    }

    pub(crate) fn state(&self) -> &BucketState {
        match &self.held {
            Held::Top { state, path, .. } => descend(state, path),
            Held::Borrowed(state) => state,
        }
    }

    pub(crate) fn state_mut(&mut self) -> &mut BucketState {
        match &mut self.held {
            Held::Top { state, path, .. } => descend_mut(state, path),
            Held::Borrowed(state) => state,
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
    ///     Ok(())
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
    ///     Ok(())
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
    ///     Ok(())
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
    ///     Ok(())
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
    ///     Ok(())
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
    ///     Ok(())
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
    ///     Ok(())
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
    ///     Ok(())
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
    ///     Ok(())
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
    ///     Ok(())
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
    ///     Ok(())
    /// })?;
    /// db.view(|tx| {
    ///     assert_eq!(tx.bucket("b")?.unwrap().sequence(), 1001); // committed with the bucket
    ///     Ok(())
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
    ///     Ok(())
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
    ///     Ok(())
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
    ///     Ok(())
    /// })?;
    /// // The setting lasts for one transaction; the next one starts from the default.
    /// db.update(|tx| {
    ///     assert_eq!(tx.bucket_mut("log")?.unwrap().fill_percent(), 0.5);
    ///     Ok(())
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
    ///     Ok(())
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
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn cursor_mut(&mut self) -> CursorMut<'_> {
        let tx = self.tx;
        CursorMut::new(tx, self.state_mut())
    }

    /// All entries in key order.
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
    ///     Ok(())
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
    ///     Ok(())
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
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter<'_> {
        self.as_bucket().prefix(prefix)
    }

    /// Page and key counts of this bucket and its nested buckets.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("a", "1")?;
    ///     b.put("b", "2")?;
    ///     assert_eq!(b.stats()?.key_n, 2); // counts this transaction's writes
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn stats(&self) -> Result<BucketStats> {
        self.as_bucket().stats()
    }
}

/// An entry of a bucket: a key and either its value or a nested bucket.
pub(crate) fn entry_of(entry: rbolt_btree::Entry<'_>) -> Entry<'_> {
    Entry::new(entry.key, entry.value, entry.is_bucket())
}

/// The smallest key after every key that starts with `prefix`: the prefix with its last byte
/// that is not 0xFF incremented and what follows dropped; `None` when there is no such key
/// (the prefix is all 0xFF, or empty).
fn prefix_end(prefix: &[u8]) -> Option<smallvec::SmallVec<[u8; 32]>> {
    let last = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut end = smallvec::SmallVec::from_slice(&prefix[..=last]);
    end[last] += 1;
    Some(end)
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
