//! Transactions: a read transaction pins a snapshot; the write transaction edits and commits.

use crate::alloc::TxAlloc;
use crate::bucket::{
    Bucket, BucketMut, BucketState, check_name, create_child, delete_child, header_bytes,
    open_child,
};
use crate::db::{Db, Snapshot, Writer, map_size};
use crate::error::{Error, Result};
use crate::iter::{Entry, Iter};
use crate::options::Durability;
use crate::readers::ReaderSlot;
use crate::stats::TxStats;
use crate::storage::Mapping;
use rbolt_btree::{Arena, Pages, Put};
use rbolt_freelist::{AnyFreelist, Freelist};
use rbolt_page::{
    BUCKET_HEADER_SIZE, BucketHeader, Corruption, LEAF_FLAG_BUCKET, Meta, PGID_NO_FREELIST,
    PageHeader, Pgid, Reason, Txid, pages_for, write_meta,
};
use std::sync::atomic::Ordering;
use std::sync::{Arc, MutexGuard};
use std::time::Instant;

/// The pages of a snapshot: the mapping up to its high-water mark.
pub(crate) fn pages_of(map: &Mapping, page_size: usize, high_water: Pgid) -> Pages<'_> {
    Pages::new(map, page_size, high_water).expect("the mapping covers the high-water mark")
}

/// The parts of a write transaction that buckets borrow.
#[derive(Debug)]
pub(crate) struct TxCore {
    pub(crate) map: Arc<Mapping>,
    /// The high-water mark of the snapshot the transaction started from: every page it reads
    /// lies below it.
    pub(crate) high_water: Pgid,
    pub(crate) arena: Arena,
    pub(crate) alloc: TxAlloc,
    /// An operation failed halfway, after a change it could not undo (only a corrupt file or a
    /// bug can cause it): the transaction refuses to commit, so nothing of it reaches the disk.
    pub(crate) broken: bool,
}

impl TxCore {
    pub(crate) fn pages(&self) -> Pages<'_> {
        pages_of(&self.map, self.alloc.page_size, self.high_water)
    }

    pub(crate) fn pages_and_arena(&mut self) -> (Pages<'_>, &mut Arena) {
        (
            pages_of(&self.map, self.alloc.page_size, self.high_water),
            &mut self.arena,
        )
    }

    pub(crate) fn parts(&mut self) -> (Pages<'_>, &mut Arena, &mut TxAlloc) {
        (
            pages_of(&self.map, self.alloc.page_size, self.high_water),
            &mut self.arena,
            &mut self.alloc,
        )
    }
}

/// The open state of the bucket at `path` below `root` (`root` itself for an empty path),
/// opening the buckets on the way; `None` when one of them does not exist.
pub(crate) fn state_at<'s>(
    core: &TxCore,
    root: &'s mut BucketState,
    path: &[&[u8]],
) -> Result<Option<&'s mut BucketState>> {
    let mut state = root;
    for name in path {
        match open_child(core, state, name)? {
            Some(child) => state = child,
            None => return Ok(None),
        }
    }
    Ok(Some(state))
}

/// A read transaction: a consistent snapshot of the database as of one commit, for as long as
/// it lives. Writers go on committing meanwhile; the pages it reads are not reused until it
/// ends. Values it returns borrow from it.
#[derive(Debug)]
pub struct ReadTx<'db> {
    db: &'db Db,
    snapshot: Snapshot,
    slot: Option<ReaderSlot>,
}

impl<'db> ReadTx<'db> {
    pub(crate) fn new(db: &'db Db, snapshot: Snapshot, slot: ReaderSlot) -> ReadTx<'db> {
        ReadTx {
            db,
            snapshot,
            slot: Some(slot),
        }
    }

    /// The database.
    pub fn db(&self) -> &'db Db {
        self.db
    }

    /// The id of the commit this transaction reads.
    pub fn id(&self) -> Txid {
        self.snapshot.meta.txid()
    }

    /// The meta this transaction reads.
    pub fn meta(&self) -> &Meta {
        &self.snapshot.meta
    }

    /// Bytes of the database as of this snapshot (high-water mark times page size).
    pub fn size(&self) -> u64 {
        self.snapshot.meta.pgid * self.db.page_size as u64
    }

    /// The committed pages of this snapshot.
    pub(crate) fn pages(&self) -> Pages<'_> {
        pages_of(
            &self.snapshot.map,
            self.db.page_size,
            self.snapshot.meta.high_water(),
        )
    }

    /// The bytes of this snapshot's pages, page `n` at `n * page_size`, up to its high-water
    /// mark: for tools that read pages directly (`rbolt pages`, `rbolt check --from-page`).
    ///
    /// Only a read-only handle gives them out ([`Error::RawAccessNeedsReadOnly`] otherwise):
    /// a writer rewrites the metas and reuses free pages while readers live, which is sound
    /// for the pages a snapshot reaches but not for raw bytes borrowed from anywhere. On a
    /// read-only handle no writer exists (the shared file lock keeps them out), so nothing
    /// below the high-water mark changes while the bytes are borrowed.
    pub fn raw_pages(&self) -> Result<&[u8]> {
        if !self.db.is_read_only() {
            return Err(Error::RawAccessNeedsReadOnly);
        }
        let len = self.snapshot.meta.pgid * self.db.page_size as u64;
        Ok(&self.snapshot.map[..len as usize])
    }

    /// The root bucket, whose entries are the top-level buckets.
    pub fn root(&self) -> Bucket<'_> {
        let meta = &self.snapshot.meta;
        Bucket {
            view: rbolt_btree::TreeView::from_page(self.pages(), meta.root_pgid()),
            sequence: meta.root.sequence,
            children: None,
        }
    }

    /// The top-level bucket `name`, if it exists.
    pub fn bucket(&self, name: impl AsRef<[u8]>) -> Result<Option<Bucket<'_>>> {
        let name = name.as_ref();
        self.root().bucket(name)
    }

    /// The top-level buckets, by name in order.
    pub fn buckets(&self) -> Iter<'_> {
        self.root().iter()
    }

    /// Calls `f` with the name and bucket of every top-level bucket, in order.
    pub fn for_each(&self, mut f: impl FnMut(&[u8], Bucket<'_>) -> Result<()>) -> Result<()> {
        let root = self.root();
        for entry in root.iter() {
            let entry: Entry<'_> = entry?;
            if let Some(bucket) = root.bucket(entry.key())? {
                f(entry.key(), bucket)?;
            }
        }
        Ok(())
    }

    /// Checks the snapshot's consistency: every page reachable once, of the right kind and
    /// not free; every page below the high-water mark reachable or free; keys in order.
    /// Returns every problem found (none for a sound file). Never panics on a corrupt file.
    pub fn check(&self) -> Vec<crate::CheckError> {
        crate::check::check(self.pages(), &self.snapshot.meta)
    }

    /// Checks the tree at page `root` and every bucket below it as [`ReadTx::check`] does,
    /// but not the whole file (bbolt's `check --from-page`): for looking at one damaged
    /// subtree.
    pub fn check_from(&self, root: Pgid) -> Vec<crate::CheckError> {
        crate::check::check_from(self.pages(), &self.snapshot.meta, root)
    }

    /// The free pages of this snapshot, ascending: the ids its freelist page lists (pending
    /// ones included), or, in a file that keeps no freelist, every page below the high-water
    /// mark that nothing reaches.
    pub fn free_page_ids(&self) -> Result<Vec<Pgid>> {
        let meta = &self.snapshot.meta;
        let pages = self.pages();
        if meta.has_freelist() {
            let span = pages.page(Pgid(0), meta.freelist_pgid())?;
            let page = rbolt_page::FreelistPage::new(span, meta.freelist_pgid())?;
            let mut ids: Vec<Pgid> = page.iter().collect();
            ids.sort_unstable();
            if let Some(id) = ids.iter().find(|id| id.0 < 2 || **id >= meta.high_water()) {
                return Err(Corruption::new(
                    meta.freelist_pgid(),
                    Reason::Other(if id.0 < 2 {
                        "the freelist lists a meta page"
                    } else {
                        "the freelist lists a page past the high-water mark"
                    }),
                )
                .into());
            }
            ids.dedup();
            return Ok(ids);
        }
        let reachable = crate::walk::reachable_pages(pages, meta)?;
        Ok((2..meta.pgid)
            .filter(|&id| !reachable.contains(id))
            .map(Pgid)
            .collect())
    }
}

impl Drop for ReadTx<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.db.readers.leave(slot);
            crate::vacuum::after_reader(self.db);
        }
    }
}

/// The write transaction: edits buckets in memory and writes them on [`WriteTx::commit`].
/// Dropping it, or [`WriteTx::rollback`], discards every change. There is one at a time.
pub struct WriteTx<'db> {
    db: &'db Db,
    writer: MutexGuard<'db, Writer>,
    base: Meta,
    core: TxCore,
    root: BucketState,
    on_commit: Vec<Box<dyn FnOnce() + 'db>>,
    stats: TxStats,
    ended: bool,
    /// The meta write has started and the new state is not yet published.
    meta_started: bool,
    /// Whether the commit syncs.
    durability: Durability,
    /// Write a new meta (and freelist) even if no bucket changed.
    pub(crate) force: bool,
    /// Lower the high-water mark past free pages at the end of the file, and cut the file
    /// when no reader needs its tail (a vacuum step; `Options::auto_shrink` does it always).
    pub(crate) shrink: bool,
}

impl std::fmt::Debug for WriteTx<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteTx")
            .field("txid", &self.core.alloc.txid)
            .field("base", &self.base)
            .finish_non_exhaustive()
    }
}

impl<'db> WriteTx<'db> {
    pub(crate) fn new(
        db: &'db Db,
        mut writer: MutexGuard<'db, Writer>,
        snapshot: Snapshot,
    ) -> WriteTx<'db> {
        let meta = snapshot.meta;
        let freelist = writer
            .freelist
            .take()
            .expect("a writable database has its freelist loaded");
        let mut arena = std::mem::take(&mut writer.arena);
        // The page buffers the last commit wrote become this transaction's nodes; the emptied
        // list keeps its room for the buffers this one writes.
        let mut pool = std::mem::take(&mut writer.pool);
        arena.recycle(db.page_size, pool.drain(..));
        let alloc = TxAlloc::new(
            Txid(meta.txid + 1),
            db.page_size,
            freelist,
            meta.high_water(),
            pool,
            db.storage.clone(),
            writer.file_len,
            &db.options,
        );
        WriteTx {
            db,
            writer,
            base: meta,
            core: TxCore {
                map: snapshot.map,
                high_water: meta.high_water(),
                arena,
                alloc,
                broken: false,
            },
            root: BucketState::from_root(meta.root_pgid(), meta.root.sequence),
            on_commit: Vec::new(),
            stats: TxStats::default(),
            ended: false,
            meta_started: false,
            durability: if db.options.no_sync {
                Durability::None
            } else {
                Durability::Immediate
            },
            force: false,
            shrink: db.options.auto_shrink,
        }
    }

    /// The database.
    pub fn db(&self) -> &'db Db {
        self.db
    }

    /// The id this transaction commits as.
    pub fn id(&self) -> Txid {
        self.core.alloc.txid
    }

    /// The root bucket as a read view (its entries are the top-level buckets).
    pub fn root(&self) -> Bucket<'_> {
        self.root.view(&self.core)
    }

    /// The top-level bucket `name` as a read view.
    pub fn bucket(&self, name: impl AsRef<[u8]>) -> Result<Option<Bucket<'_>>> {
        let name = name.as_ref();
        self.root().bucket(name)
    }

    /// The top-level buckets, by name in order.
    pub fn buckets(&self) -> Iter<'_> {
        self.root().iter()
    }

    /// The top-level bucket `name`, open for writing; `None` if there is none.
    pub fn bucket_mut(&mut self, name: impl AsRef<[u8]>) -> Result<Option<BucketMut<'_>>> {
        let name = name.as_ref();
        let core = &mut self.core;
        Ok(open_child(core, &mut self.root, name)?.map(|state| BucketMut { core, state }))
    }

    /// The bucket at `path` (top-level name, then nested names), open for writing; `None`
    /// when a bucket on the path does not exist. An empty path is `BucketNameRequired`: the
    /// root bucket holds only buckets and is changed through them (as in bbolt).
    pub fn bucket_path_mut<P: AsRef<[u8]>>(&mut self, path: &[P]) -> Result<Option<BucketMut<'_>>> {
        let path: smallvec::SmallVec<[&[u8]; 8]> = path.iter().map(AsRef::as_ref).collect();
        let path = path.as_slice();
        if path.is_empty() {
            return Err(Error::BucketNameRequired);
        }
        let core = &mut self.core;
        Ok(state_at(core, &mut self.root, path)?.map(|state| BucketMut { core, state }))
    }

    /// The bucket at `path` (top-level name, then nested names), open for writing, creating
    /// every bucket on the path that does not exist yet (like `mkdir -p`), in one walk down.
    /// An empty path is `BucketNameRequired`; a name on the path that holds a value is
    /// `IncompatibleValue`. An error leaves the buckets created before it in place; they are
    /// part of the transaction like any other edit.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| tx.create_bucket_path(&[b"a", b"b", b"c"])?.put(b"k", b"v"))?;
    /// db.view(|tx| {
    ///     let c = tx.bucket(b"a")?.unwrap().bucket(b"b")?.unwrap().bucket(b"c")?.unwrap();
    ///     assert_eq!(c.get(b"k")?, Some(&b"v"[..]));
    ///     Ok(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn create_bucket_path<P: AsRef<[u8]>>(&mut self, path: &[P]) -> Result<BucketMut<'_>> {
        let path: smallvec::SmallVec<[&[u8]; 8]> = path.iter().map(AsRef::as_ref).collect();
        let path = path.as_slice();
        if path.is_empty() {
            return Err(Error::BucketNameRequired);
        }
        let core = &mut self.core;
        let mut state = &mut self.root;
        for name in path {
            state = create_child(core, state, name, true)?;
        }
        Ok(BucketMut { core, state })
    }

    /// The bucket at `path`, the root bucket for an empty path: for copies that must carry
    /// whatever a source file holds.
    pub(crate) fn bucket_at(&mut self, path: &[&[u8]]) -> Result<Option<BucketMut<'_>>> {
        let core = &mut self.core;
        Ok(state_at(core, &mut self.root, path)?.map(|state| BucketMut { core, state }))
    }

    /// For the vacuum: the committed pages this transaction started from, the meta they
    /// belong to, and the freelist (whose free set no reader can see).
    pub(crate) fn vacuum_view(&self) -> (Pages<'_>, &Meta, &AnyFreelist) {
        (self.core.pages(), &self.base, &self.core.alloc.freelist)
    }

    /// Sets the root bucket's sequence, which only files of other tools use.
    pub(crate) fn set_root_sequence(&mut self, sequence: u64) {
        self.root.sequence = sequence;
        self.force = true;
    }

    /// Creates the top-level bucket `name`.
    pub fn create_bucket(&mut self, name: impl AsRef<[u8]>) -> Result<BucketMut<'_>> {
        let name = name.as_ref();
        let core = &mut self.core;
        let state = create_child(core, &mut self.root, name, false)?;
        Ok(BucketMut { core, state })
    }

    /// Creates the top-level bucket `name` unless it exists, and returns it.
    pub fn create_bucket_if_not_exists(&mut self, name: impl AsRef<[u8]>) -> Result<BucketMut<'_>> {
        let name = name.as_ref();
        let core = &mut self.core;
        let state = create_child(core, &mut self.root, name, true)?;
        Ok(BucketMut { core, state })
    }

    /// Deletes the top-level bucket `name` and everything in it, freeing all their pages.
    pub fn delete_bucket(&mut self, name: impl AsRef<[u8]>) -> Result<()> {
        let name = name.as_ref();
        delete_child(&mut self.core, &mut self.root, name)
    }

    /// Moves the bucket at path `from` to path `to` (both: top-level name, then nested
    /// names; the last name is the bucket's name there, so a move can also rename). The
    /// destination's parent must exist and `to` must be free; the new name is checked as
    /// `create_bucket` checks one. The bucket keeps what this transaction wrote in it. An
    /// error changes nothing.
    pub fn move_bucket<F: AsRef<[u8]>, T: AsRef<[u8]>>(
        &mut self,
        from: &[F],
        to: &[T],
    ) -> Result<()> {
        let from: smallvec::SmallVec<[&[u8]; 8]> = from.iter().map(AsRef::as_ref).collect();
        let from = from.as_slice();
        let to: smallvec::SmallVec<[&[u8]; 8]> = to.iter().map(AsRef::as_ref).collect();
        let to = to.as_slice();
        let (Some((name, from_parent)), Some((new_name, to_parent))) =
            (from.split_last(), to.split_last())
        else {
            return Err(Error::BucketNameRequired);
        };
        if from == to {
            return Err(Error::SameBuckets);
        }
        if to.len() > from.len() && to[..from.len()] == *from {
            return Err(Error::MoveIntoSelf);
        }
        check_name(new_name)?;
        // Check both ends before changing either: the source is a bucket, the destination's
        // parent exists and the new name is free.
        let value = {
            let parent =
                state_at(&self.core, &mut self.root, from_parent)?.ok_or(Error::BucketNotFound)?;
            let entry = parent
                .tree
                .get(self.core.pages(), name)?
                .ok_or(Error::BucketNotFound)?;
            if !entry.is_bucket() {
                return Err(Error::IncompatibleValue);
            }
            entry.value.to_vec()
        };
        {
            let parent =
                state_at(&self.core, &mut self.root, to_parent)?.ok_or(Error::BucketNotFound)?;
            match parent.tree.get(self.core.pages(), new_name)? {
                Some(entry) if entry.is_bucket() => return Err(Error::BucketExists),
                Some(_) => return Err(Error::IncompatibleValue),
                None => {}
            }
        }
        // Insert at the destination first: if that fails nothing has changed. Then remove the
        // source; if that fails, take the insert back (its path is edited now, so that
        // cannot read a page and fail).
        {
            let parent = state_at(&self.core, &mut self.root, to_parent)?.expect("checked");
            let (pages, arena) = self.core.pages_and_arena();
            let outcome = parent
                .tree
                .put(pages, arena, new_name, &value, LEAF_FLAG_BUCKET)?;
            debug_assert_eq!(outcome, Put::Inserted);
        }
        let removed = {
            let parent = state_at(&self.core, &mut self.root, from_parent)?.expect("checked");
            let (pages, arena) = self.core.pages_and_arena();
            parent.tree.delete(pages, arena, name, LEAF_FLAG_BUCKET)
        };
        if let Err(error) = removed {
            let error = Error::from(error);
            let parent = state_at(&self.core, &mut self.root, to_parent)?.expect("checked");
            let (pages, arena) = self.core.pages_and_arena();
            if parent
                .tree
                .delete(pages, arena, new_name, LEAF_FLAG_BUCKET)
                .is_err()
            {
                self.core.broken = true;
            }
            return Err(error);
        }
        // The bucket's open state, with this transaction's edits, moves along.
        let from_state = state_at(&self.core, &mut self.root, from_parent)?.expect("checked");
        if let Some(state) = from_state.children.remove(*name) {
            let to_state = state_at(&self.core, &mut self.root, to_parent)?.expect("checked");
            to_state.children.insert(new_name.to_vec(), state);
        }
        Ok(())
    }

    /// Sets how this transaction's commit reaches the disk; the default is
    /// `Durability::Immediate`, or `Durability::None` when the database was opened with
    /// `Options::no_sync`. A bulk load can make its commits `None` and end with one
    /// `Immediate` commit or [`Db::sync`](crate::Db::sync), with no reopen.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use rbolt::Durability;
    /// let db = rbolt::Db::open(dir.path().join("db"))?;
    /// for chunk in 0..10u32 {
    ///     let mut tx = db.begin_write()?;
    ///     tx.set_durability(Durability::None);
    ///     let mut b = tx.create_bucket_if_not_exists(b"load")?;
    ///     for i in 0..100u32 {
    ///         b.put(&(chunk * 100 + i).to_be_bytes(), b"row")?;
    ///     }
    ///     tx.commit()?;
    /// }
    /// db.sync()?; // everything above is durable from here on
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn set_durability(&mut self, durability: Durability) {
        self.durability = durability;
    }

    /// How this transaction's commit will reach the disk.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// Registers `f` to run after this transaction commits successfully.
    pub fn on_commit(&mut self, f: impl FnOnce() + 'db) {
        self.on_commit.push(Box::new(f));
    }

    /// The transaction's counters so far.
    pub fn stats(&self) -> TxStats {
        let mut stats = self.stats.clone();
        stats.page_count = self.core.alloc.pages_allocated;
        stats.page_alloc = self.core.alloc.pages_allocated * self.db.page_size as u64;
        let mut trees = rbolt_btree::TreeStats::default();
        self.root.add_tree_stats(&mut trees);
        stats.node_count += trees.node_count;
        stats.split += trees.split;
        stats.rebalance += trees.rebalance;
        stats.spill += trees.spill;
        stats
    }

    /// Discards every change.
    pub fn rollback(mut self) {
        self.abort();
    }

    /// Writes every change and makes it durable: dirty pages, then an fdatasync, then the
    /// meta, then an fdatasync (none with `no_sync`). On error nothing of this transaction is
    /// visible; an error at or after the first sync poisons the handle. The `on_commit` hooks
    /// run after the writer is released, so a hook may start a write transaction.
    pub fn commit(mut self) -> Result<()> {
        let started = Instant::now();
        match self.commit_inner() {
            Ok(()) => {
                self.stats.commit_time = started.elapsed();
                self.db.counters.tx_committed(&self.stats());
                self.ended = true;
                let hooks = std::mem::take(&mut self.on_commit);
                drop(self);
                for f in hooks {
                    f();
                }
                Ok(())
            }
            Err(error) => {
                self.abort();
                Err(error)
            }
        }
    }

    fn commit_inner(&mut self) -> Result<()> {
        if self.core.broken {
            return Err(Error::Corruption(Corruption::new(
                Pgid(0),
                Reason::Other(
                    "an operation of this transaction failed halfway; it can only be rolled back",
                ),
            )));
        }
        if !self.root.is_changed() && !self.force {
            // Nothing changed: nothing to write, no txid used.
            self.abort();
            return Ok(());
        }
        let db = self.db;
        let page_size = db.page_size;
        let txid = self.core.alloc.txid;
        self.writer.verify.before(db);
        let sync = self.durability == Durability::Immediate;
        if sync && db.unsynced.load(Ordering::Acquire) {
            // Commits made without syncs come first: made durable before this one reuses any
            // page they freed, so that a crash during this commit finds them whole.
            db.storage.sync_data().map_err(|e| {
                db.poison();
                Error::io(db.storage.path(), e)
            })?;
            db.unsynced.store(false, Ordering::Release);
        }

        // Merge nodes left small by deletes and write every edited bucket, children before
        // parents, then the root bucket.
        let spill_started = Instant::now();
        failpoint!("commit::before-spill");
        let mut spilled = Spilled::default();
        spill_buckets(&mut self.core, &mut self.root, &mut spilled)?;
        let root_pgid = {
            let (pages, arena, alloc) = self.core.parts();
            let rebalance_started = Instant::now();
            self.root.tree.rebalance(pages, arena, alloc)?;
            spilled.rebalance_time += rebalance_started.elapsed();
            match self.root.tree.root_pgid() {
                Some(pgid) if !self.root.tree.is_dirty() => pgid,
                _ => self.root.tree.spill(pages, arena, alloc)?,
            }
        };
        // The nested buckets' states are gone from the root now: keep their counters.
        self.stats.node_count += spilled.trees.node_count;
        self.stats.split += spilled.trees.split;
        self.stats.rebalance += spilled.trees.rebalance;
        self.stats.spill += spilled.trees.spill;
        self.stats.rebalance_time = spilled.rebalance_time;
        self.stats.spill_time = spill_started
            .elapsed()
            .saturating_sub(spilled.rebalance_time);

        let mut meta = self.base;
        meta.txid = txid.0;
        meta.root = BucketHeader {
            root: root_pgid.0,
            sequence: self.root.sequence,
        };

        // The old freelist page is freed; a new one is written unless the user opted out.
        failpoint!("commit::before-freelist");
        let alloc = &mut self.core.alloc;
        if self.base.freelist != PGID_NO_FREELIST.0 {
            let old = self.base.freelist_pgid();
            let span =
                pages_of(&self.core.map, page_size, self.core.high_water).page(Pgid(0), old)?;
            let overflow = PageHeader::read(span).map_or(0, |h| h.overflow);
            alloc.freelist.free(txid, old, overflow)?;
        }
        if self.shrink {
            // Free pages at the end of the file leave the freelist and the file's mapped
            // extent, before the freelist page is sized (see `vacuum`).
            alloc.next = alloc.freelist.trim_tail(txid, alloc.next);
        }
        if db.options.no_freelist_sync {
            meta.freelist = PGID_NO_FREELIST.0;
        } else {
            let n_pages = pages_for(alloc.freelist.write_size(), page_size);
            let (pgid, mut buf) = alloc.allocate_buffer(n_pages)?;
            let used = alloc
                .freelist
                .write_into(&mut buf, pgid, (n_pages - 1) as u32);
            buf[used..].fill(0);
            alloc.push(pgid, buf);
            meta.freelist = pgid.0;
        }
        meta.pgid = alloc.next.0;

        // A mapping for readers of the new state, made before anything is durable so that a
        // failure still rolls back cleanly.
        let needed = meta.pgid * page_size as u64;
        let new_map = if needed > self.core.map.len() as u64 {
            failpoint!("commit::remap");
            let len = map_size(needed).ok_or_else(|| {
                Error::io(
                    db.storage.path(),
                    std::io::Error::new(
                        std::io::ErrorKind::OutOfMemory,
                        "the file would outgrow the address space",
                    ),
                )
            })?;
            let map = db
                .storage
                .map(len)
                .map_err(|e| Error::io(db.storage.path(), e))?;
            let _ = map.advise_random();
            Some(Arc::new(map))
        } else {
            None
        };

        // Data pages, then the first sync.
        let write_started = Instant::now();
        failpoint!("commit::before-grow");
        alloc.ensure_file_len(needed)?;
        failpoint!("commit::before-write");
        alloc.flush()?;
        failpoint!("commit::before-data-sync");
        if sync {
            db.storage.sync_data().map_err(|e| {
                db.poison();
                Error::io(db.storage.path(), e)
            })?;
        }
        // The meta, then the second sync: the commit point. From the moment the meta write
        // starts the disk may hold the new txid, so any way out of here but success poisons
        // (an error below, or a panic through `abort`).
        let mut meta_page = vec![0u8; page_size];
        let meta = write_meta(&mut meta_page, &meta);
        let meta_offset = (meta.txid % 2) * page_size as u64;
        failpoint!("commit::before-meta");
        self.meta_started = true;
        db.storage
            .write_all_at(&meta_page, meta_offset)
            .map_err(|e| {
                db.poison();
                Error::io(db.storage.path(), e)
            })?;
        failpoint!("commit::before-meta-sync", poison db);
        if sync {
            db.storage.sync_data().map_err(|e| {
                db.poison();
                Error::io(db.storage.path(), e)
            })?;
        }
        failpoint!("commit::after-meta-sync", poison db);
        self.stats.write_time = write_started.elapsed();
        self.stats.writes = alloc.writes + 1;

        // Committed: publish to readers and hand the writer state back.
        if !sync {
            db.unsynced.store(true, Ordering::Release);
        }
        alloc.freelist.commit(txid);
        let grew = self.writer.file_len < alloc.file_len;
        let remapped = new_map.is_some();
        let map = new_map.unwrap_or_else(|| self.core.map.clone());
        if db.options.mlock && (grew || remapped) {
            // Best effort: the commit is durable already, and bbolt also only logs this.
            let _ = map.lock(alloc.file_len as usize);
        }
        self.writer.file_len = alloc.file_len;
        let old = {
            let mut current = db
                .current
                .write()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            std::mem::replace(&mut *current, Snapshot { meta, map })
        };
        self.meta_started = false;
        // The writer's reference to the old mapping goes here; readers still holding it keep
        // it mapped until they end.
        failpoint!("commit::unmap", poison db);
        drop(old);
        crate::vacuum::after_commit(db, &mut self.writer, &meta, self.shrink);
        // Keep the trees' counters: give_back drops the trees.
        self.stats = self.stats();
        self.give_back();
        self.writer.verify.after(db);
        Ok(())
    }

    /// Returns the freelist, buffers and arena to the writer state.
    fn give_back(&mut self) {
        self.ended = true;
        self.db
            .writer_thread
            .store(0, std::sync::atomic::Ordering::Release);
        let alloc = &mut self.core.alloc;
        alloc.recycle();
        self.db.counters.freelist_changed(&alloc.freelist);
        let kind = alloc.freelist.kind();
        let freelist = std::mem::replace(&mut alloc.freelist, AnyFreelist::new(kind));
        self.writer.freelist = Some(freelist);
        self.writer.pool = std::mem::take(&mut alloc.pool);
        self.writer.arena = std::mem::take(&mut self.core.arena);
        self.root = BucketState::new_empty();
    }

    /// Undoes this transaction's freelist changes and ends it.
    fn abort(&mut self) {
        if self.ended {
            return;
        }
        if self.meta_started || self.core.alloc.sync_failed {
            // The meta write began (the disk may hold this commit) or a sync failed (the
            // kernel may have dropped pages): what is on disk is unknown.
            self.db.poison();
        }
        let txid = self.core.alloc.txid;
        self.core.alloc.freelist.rollback(txid);
        self.give_back();
    }
}

impl Drop for WriteTx<'_> {
    fn drop(&mut self) {
        self.abort();
    }
}

/// What writing the nested buckets did: their trees' counters and the time spent rebalancing.
#[derive(Default)]
struct Spilled {
    trees: rbolt_btree::TreeStats,
    rebalance_time: std::time::Duration,
}

/// Rebalances and writes every edited bucket below `root`, each after the buckets nested in
/// it, and puts each one's new value in its parent: inline when small enough, else a header
/// pointing at its new root page. Iterative: buckets nest without limit.
fn spill_buckets(core: &mut TxCore, root: &mut BucketState, spilled: &mut Spilled) -> Result<()> {
    /// A bucket whose nested buckets are being written: its name in its parent, its state,
    /// and the nested buckets still to write.
    struct Frame {
        name: Vec<u8>,
        state: BucketState,
        rest: std::collections::btree_map::IntoIter<Vec<u8>, BucketState>,
    }
    let mut root_rest = std::mem::take(&mut root.children).into_iter();
    let mut stack: Vec<Frame> = Vec::new();
    loop {
        let next = match stack.last_mut() {
            Some(frame) => frame.rest.next(),
            None => root_rest.next(),
        };
        if let Some((name, mut state)) = next {
            let rest = std::mem::take(&mut state.children).into_iter();
            stack.push(Frame { name, state, rest });
            continue;
        }
        let Some(mut done) = stack.pop() else {
            return Ok(());
        };
        let parent = match stack.last_mut() {
            Some(frame) => &mut frame.state,
            None => &mut *root,
        };
        spill_bucket(core, &done.name, &mut done.state, parent, spilled)?;
        spilled.trees.add(&done.state.tree.stats());
    }
}

/// Rebalances and writes the bucket `child` (whose nested buckets are written already) and
/// puts its new value under `name` in `parent`'s tree.
fn spill_bucket(
    core: &mut TxCore,
    name: &[u8],
    child: &mut BucketState,
    parent: &mut BucketState,
    spilled: &mut Spilled,
) -> Result<()> {
    let inline_max = core.alloc.page_size / 4;
    let (pages, arena, alloc) = core.parts();
    let rebalance_started = Instant::now();
    child.tree.rebalance(pages, arena, alloc)?;
    spilled.rebalance_time += rebalance_started.elapsed();
    if !child.tree.is_dirty() {
        return Ok(());
    }
    let value = match child.tree.inline_size(inline_max) {
        Some(size) => {
            child.tree.free_all(pages, alloc)?;
            let mut value = vec![0u8; BUCKET_HEADER_SIZE + size];
            value[..BUCKET_HEADER_SIZE].copy_from_slice(&header_bytes(Pgid(0), child.sequence));
            child.tree.write_inline(&mut value[BUCKET_HEADER_SIZE..]);
            value
        }
        None => {
            let root = child.tree.spill(pages, arena, alloc)?;
            header_bytes(root, child.sequence).to_vec()
        }
    };
    let outcome = parent
        .tree
        .put(pages, arena, name, &value, LEAF_FLAG_BUCKET)?;
    debug_assert!(
        matches!(outcome, Put::Replaced { .. }),
        "a child bucket's key holds a bucket"
    );
    Ok(())
}
