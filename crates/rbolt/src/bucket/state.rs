//! The state of an open bucket in a write transaction (its tree, sequence and the nested
//! buckets opened below it), and the operations on it that bucket handles and the transaction
//! share: opening, creating and deleting a child, checking names and keys.

use crate::engine::context::{Workspace, WriteContext};
use crate::error::{Error, Result};
use rbolt_btree::{Pages, Tree};
use rbolt_freelist::Freelist;
use rbolt_page::{Corruption, EMPTY_BUCKET_VALUE, KEY_SIZE_MAX, LEAF_FLAG_BUCKET, Pgid, Reason};
use smallvec::SmallVec;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;

/// The name of an open child bucket: inline up to 32 bytes, so opening a bucket by a short
/// name (nearly every name) does not allocate.
pub(crate) type BucketName = SmallVec<[u8; 32]>;

/// A bucket a write transaction opened: its tree, its sequence, and the buckets opened in it.
///
/// Buckets nest without limit (Go bbolt has none), so nothing here recurses over `children`:
/// walks keep explicit stacks, and dropping a chain of thousands of nested states unlinks it
/// level by level.
#[derive(Default)]
pub(crate) struct BucketState {
    pub(crate) tree: Tree,
    pub(crate) sequence: u64,
    pub(crate) children: BTreeMap<BucketName, BucketState>,
    /// This is the placeholder of a top-level bucket whose state a [`BucketMut`] holds: it
    /// cannot be opened, deleted or moved until the handle puts the state back.
    pub(crate) held: bool,
}

/// The root bucket of a write transaction with the registry of open buckets below it (a
/// top-level bucket held by a [`BucketMut`] has a placeholder there), and an emptied box for
/// a top-level handle's state: kept from the last handle dropped and handed from one write
/// transaction to the next through the writer, so that opening a top-level bucket does not
/// allocate. One reference reaches both, which keeps a handle a few words.
pub(crate) struct Registry {
    pub(crate) root: RefCell<BucketState>,
    spare: Cell<Option<Box<BucketState>>>,
}

impl Registry {
    pub(crate) fn new(root: BucketState, spare: Option<Box<BucketState>>) -> Registry {
        Registry {
            root: RefCell::new(root),
            spare: Cell::new(spare),
        }
    }

    /// `state` in a box, the spare one when there is one.
    pub(crate) fn boxed(&self, state: BucketState) -> Box<BucketState> {
        match self.spare.take() {
            Some(mut spare) => {
                *spare = state;
                spare
            }
            None => Box::new(state),
        }
    }

    /// Keeps an emptied box for the next [`Registry::boxed`].
    pub(crate) fn keep_spare(&self, spare: Box<BucketState>) {
        self.spare.set(Some(spare));
    }

    /// The spare box, to hand to the next write transaction.
    pub(crate) fn take_spare(&self) -> Option<Box<BucketState>> {
        self.spare.take()
    }
}

impl std::fmt::Debug for Registry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Registry")
            .field("root", &self.root)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for BucketState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Not the children themselves: printing them would recurse as deep as they nest.
        f.debug_struct("BucketState")
            .field("root", &self.tree.root_pgid())
            .field("dirty", &self.tree.is_dirty())
            .field("sequence", &self.sequence)
            .field("children", &self.children.len())
            .field("held", &self.held)
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
            held: false,
        }
    }

    /// What stands in the registry for a top-level bucket while a handle holds its state.
    /// Allocates nothing.
    pub(crate) fn placeholder() -> BucketState {
        let mut state = BucketState::new_empty();
        state.held = true;
        state
    }

    pub(crate) fn from_root(root: Pgid, sequence: u64) -> BucketState {
        BucketState {
            tree: Tree::from_page(root),
            sequence,
            children: BTreeMap::new(),
            held: false,
        }
    }

    /// This bucket and every open bucket below it, in no particular order.
    fn each(&self) -> impl Iterator<Item = &BucketState> {
        // Inline for the few buckets a transaction opens, so a commit's walks allocate nothing.
        let mut stack: SmallVec<[&BucketState; 8]> = SmallVec::new();
        stack.push(self);
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
}

pub(crate) fn check_key(key: &[u8]) -> Result<()> {
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
pub(crate) fn check_not_held(state: &BucketState, name: &[u8]) -> Result<()> {
    match state.children.get(name) {
        Some(child) if child.held => Err(Error::BucketInUse),
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
    check_not_held(state, name)?;
    if !state.children.contains_key(name) {
        let Some(child) = load_child(pages, state, name)? else {
            return Ok(None);
        };
        state.children.insert(BucketName::from_slice(name), child);
    }
    Ok(state.children.get_mut(name))
}

/// Reads the child bucket `name` from `state`'s tree (not from its open children).
pub(crate) fn load_child(
    pages: Pages<'_>,
    state: &BucketState,
    name: &[u8],
) -> Result<Option<BucketState>> {
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
        held: false,
    }))
}

/// Creates the child bucket `name` of `state` (or opens it, with `if_not_exists`).
pub(crate) fn create_child<'s>(
    pages: Pages<'_>,
    core: &mut Workspace,
    state: &'s mut BucketState,
    name: &[u8],
    if_not_exists: bool,
) -> Result<&'s mut BucketState> {
    check_name(name)?;
    check_not_held(state, name)?;
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
        .insert(BucketName::from_slice(name), BucketState::new_empty());
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
    tx: &WriteContext,
    core: &mut Workspace,
    state: &mut BucketState,
    name: &[u8],
) -> Result<()> {
    check_name(name)?;
    check_not_held(state, name)?;
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
    let txid = core.writes.txid();
    for &(pgid, overflow) in &freed {
        if let Err(error) = core.writes.freelist().free(txid, pgid, overflow) {
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
pub(crate) fn pages_of_bucket(
    tx: &WriteContext,
    core: &Workspace,
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
                Reason::OutsideTheFile {
                    what: "a bucket page",
                },
            )
            .into());
        }
        for id in pgid.0..pgid.0 + u64::from(overflow) + 1 {
            if core.writes.allocator.free_set().is_freed(Pgid(id)) {
                return Err(Corruption::new(Pgid(id), Reason::ReachableAndFree).into());
            }
            ids.push(id);
        }
    }
    ids.sort_unstable();
    if let Some(pair) = ids.windows(2).find(|pair| pair[0] == pair[1]) {
        return Err(Corruption::new(Pgid(pair[0]), Reason::ReachableTwice).into());
    }
    Ok(freed)
}

/// The smallest key after every key that starts with `prefix`: the prefix with its last byte
/// that is not 0xFF incremented and what follows dropped; `None` when there is no such key
/// (the prefix is all 0xFF, or empty).
pub(crate) fn prefix_end(prefix: &[u8]) -> Option<smallvec::SmallVec<[u8; 32]>> {
    let last = prefix.iter().rposition(|&b| b != 0xFF)?;
    let mut end = smallvec::SmallVec::from_slice(&prefix[..=last]);
    end[last] += 1;
    Some(end)
}

/// The open state of the bucket at `path` below `root` (`root` itself for an empty path),
/// opening the buckets on the way; `None` when one of them does not exist.
pub(crate) fn state_at<'s>(
    pages: Pages<'_>,
    root: &'s mut BucketState,
    path: &[&[u8]],
) -> Result<Option<&'s mut BucketState>> {
    let mut state = root;
    for name in path {
        match open_child(pages, state, name)? {
            Some(child) => state = child,
            None => return Ok(None),
        }
    }
    Ok(Some(state))
}
