//! Transactions: a read transaction pins a snapshot; the write transaction edits and commits.

use crate::alloc::TxAlloc;
use crate::bucket::{
    Bucket, BucketMut, BucketState, create_child, delete_child, header_bytes, open_child,
};
use crate::db::{Db, Snapshot, Writer, map_size};
use crate::error::{Error, Result};
use crate::iter::{Entry, Iter};
use crate::readers::ReaderSlot;
use crate::stats::TxStats;
use crate::storage::Mapping;
use rbolt_btree::{Arena, Pages, Put};
use rbolt_freelist::{AnyFreelist, Freelist};
use rbolt_page::{
    BUCKET_HEADER_SIZE, BucketHeader, LEAF_FLAG_BUCKET, Meta, PGID_NO_FREELIST, PageHeader, Pgid,
    Txid, pages_for, write_meta,
};
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
    pub fn pages(&self) -> Pages<'_> {
        pages_of(
            &self.snapshot.map,
            self.db.page_size,
            self.snapshot.meta.high_water(),
        )
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
    pub fn bucket(&self, name: &[u8]) -> Result<Option<Bucket<'_>>> {
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
}

impl Drop for ReadTx<'_> {
    fn drop(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.db.readers.leave(slot);
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
    /// Write a new meta (and freelist) even if no bucket changed.
    pub(crate) force: bool,
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
        // The page buffers the last commit wrote become this transaction's nodes.
        arena.recycle(db.page_size, std::mem::take(&mut writer.pool));
        let pool = Vec::new();
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
            },
            root: BucketState::from_root(meta.root_pgid(), meta.root.sequence),
            on_commit: Vec::new(),
            stats: TxStats::default(),
            ended: false,
            force: false,
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

    /// The pages of the snapshot this transaction started from.
    pub fn pages(&self) -> Pages<'_> {
        self.core.pages()
    }

    /// The root bucket as a read view (its entries are the top-level buckets).
    pub fn root(&self) -> Bucket<'_> {
        self.root.view(&self.core)
    }

    /// The top-level bucket `name` as a read view.
    pub fn bucket(&self, name: &[u8]) -> Result<Option<Bucket<'_>>> {
        self.root().bucket(name)
    }

    /// The top-level buckets, by name in order.
    pub fn buckets(&self) -> Iter<'_> {
        self.root().iter()
    }

    /// The top-level bucket `name`, open for writing; `None` if there is none.
    pub fn bucket_mut(&mut self, name: &[u8]) -> Result<Option<BucketMut<'_>>> {
        let core = &mut self.core;
        Ok(open_child(core, &mut self.root, name)?.map(|state| BucketMut { core, state }))
    }

    /// The bucket at `path` (top-level name, then nested names), open for writing.
    pub fn bucket_path_mut(&mut self, path: &[&[u8]]) -> Result<Option<BucketMut<'_>>> {
        let core = &mut self.core;
        let mut state = &mut self.root;
        for name in path {
            match open_child(core, state, name)? {
                Some(child) => state = child,
                None => return Ok(None),
            }
        }
        Ok(Some(BucketMut { core, state }))
    }

    /// Creates the top-level bucket `name`.
    pub fn create_bucket(&mut self, name: &[u8]) -> Result<BucketMut<'_>> {
        let core = &mut self.core;
        let state = create_child(core, &mut self.root, name, false)?;
        Ok(BucketMut { core, state })
    }

    /// Creates the top-level bucket `name` unless it exists, and returns it.
    pub fn create_bucket_if_not_exists(&mut self, name: &[u8]) -> Result<BucketMut<'_>> {
        let core = &mut self.core;
        let state = create_child(core, &mut self.root, name, true)?;
        Ok(BucketMut { core, state })
    }

    /// Deletes the top-level bucket `name` and everything in it, freeing all their pages.
    pub fn delete_bucket(&mut self, name: &[u8]) -> Result<()> {
        delete_child(&mut self.core, &mut self.root, name)
    }

    /// Moves the bucket at path `from` to path `to` (both: top-level name, then nested
    /// names; the last name is the bucket's name there, so a move can also rename). The
    /// destination's parent must exist and `to` must be free.
    pub fn move_bucket(&mut self, from: &[&[u8]], to: &[&[u8]]) -> Result<()> {
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
        if new_name.is_empty() {
            return Err(Error::BucketNameRequired);
        }
        // Take the bucket out of its parent: its value bytes, and its state if open.
        let (value, state) = {
            let parent = self
                .bucket_path_mut(from_parent)?
                .ok_or(Error::BucketNotFound)?;
            let pages = parent.core.pages();
            let entry = parent
                .state
                .tree
                .get(pages, name)?
                .ok_or(Error::BucketNotFound)?;
            if !entry.is_bucket() {
                return Err(Error::IncompatibleValue);
            }
            let value = entry.value.to_vec();
            (value, parent.state.children.remove(*name))
        };
        {
            let parent = self
                .bucket_path_mut(to_parent)?
                .ok_or(Error::BucketNotFound)?;
            let pages = parent.core.pages();
            match parent.state.tree.get(pages, new_name)? {
                Some(entry) if entry.is_bucket() => return Err(Error::BucketExists),
                Some(_) => return Err(Error::IncompatibleValue),
                None => {}
            }
        }
        // Both ends are checked: now change them.
        {
            let parent = self.bucket_path_mut(from_parent)?.expect("checked above");
            let (pages, arena) = parent.core.pages_and_arena();
            parent
                .state
                .tree
                .delete(pages, arena, name, LEAF_FLAG_BUCKET)?;
        }
        let parent = self.bucket_path_mut(to_parent)?.expect("checked above");
        let (pages, arena) = parent.core.pages_and_arena();
        let outcome = parent
            .state
            .tree
            .put(pages, arena, new_name, &value, LEAF_FLAG_BUCKET)?;
        debug_assert_eq!(outcome, Put::Inserted);
        if let Some(state) = state {
            parent.state.children.insert(new_name.to_vec(), state);
        }
        Ok(())
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
    /// visible; an error at or after the first sync poisons the handle.
    pub fn commit(mut self) -> Result<()> {
        let started = Instant::now();
        let result = self.commit_inner();
        match result {
            Ok(()) => {
                self.stats.commit_time = started.elapsed();
                self.db.counters.tx_committed(&self.stats());
                self.ended = true;
                for f in std::mem::take(&mut self.on_commit) {
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
        if !self.root.is_changed() && !self.force {
            // Nothing changed: nothing to write, no txid used.
            self.abort();
            return Ok(());
        }
        let db = self.db;
        let page_size = db.page_size;
        let txid = self.core.alloc.txid;
        self.writer.verify.before(db);

        // Merge nodes left small by deletes, then write children before parents.
        let rebalance_started = Instant::now();
        rebalance_all(&mut self.core, &mut self.root, 0)?;
        self.stats.rebalance_time = rebalance_started.elapsed();
        let spill_started = Instant::now();
        failpoint!("commit::before-spill");
        spill_children(&mut self.core, &mut self.root, 0)?;
        let root_pgid = match self.root.tree.root_pgid() {
            Some(pgid) if !self.root.tree.is_dirty() => pgid,
            _ => {
                let (pages, arena, alloc) = self.core.parts();
                self.root.tree.spill(pages, arena, alloc)?
            }
        };
        self.stats.spill_time = spill_started.elapsed();

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
            let map = db
                .storage
                .map(map_size(needed, page_size))
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
        if !db.options.no_sync {
            db.storage.sync_data().map_err(|e| {
                db.poison();
                Error::io(db.storage.path(), e)
            })?;
        }
        // The meta, then the second sync: the commit point.
        let mut meta_page = vec![0u8; page_size];
        let meta = write_meta(&mut meta_page, &meta);
        let meta_offset = (meta.txid % 2) * page_size as u64;
        failpoint!("commit::before-meta");
        db.storage
            .write_all_at(&meta_page, meta_offset)
            .map_err(|e| {
                db.poison();
                Error::io(db.storage.path(), e)
            })?;
        failpoint!("commit::before-meta-sync", poison db);
        if !db.options.no_sync {
            db.storage.sync_data().map_err(|e| {
                db.poison();
                Error::io(db.storage.path(), e)
            })?;
        }
        failpoint!("commit::after-meta-sync", poison db);
        self.stats.write_time = write_started.elapsed();
        self.stats.writes = alloc.writes + 1;

        // Committed: publish to readers and hand the writer state back.
        alloc.freelist.commit(txid);
        let map = new_map.unwrap_or_else(|| self.core.map.clone());
        if db.options.mlock && self.writer.file_len < alloc.file_len {
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
        // The writer's reference to the old mapping goes here; readers still holding it keep
        // it mapped until they end.
        failpoint!("commit::unmap", poison db);
        drop(old);
        // Keep the trees' counters: give_back drops the trees.
        self.stats = self.stats();
        self.give_back();
        self.writer.verify.after(db);
        Ok(())
    }

    /// Returns the freelist, buffers and arena to the writer state.
    fn give_back(&mut self) {
        self.ended = true;
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

/// Rebalances every open bucket, children first.
fn rebalance_all(core: &mut TxCore, state: &mut BucketState, depth: usize) -> Result<()> {
    if depth >= crate::bucket::BUCKET_DEPTH_MAX {
        return Err(crate::bucket::bucket_too_deep());
    }
    for child in state.children.values_mut() {
        rebalance_all(core, child, depth + 1)?;
    }
    let (pages, arena, alloc) = core.parts();
    state.tree.rebalance(pages, arena, alloc)
}

/// Writes every edited child bucket of `state` (their children first) and puts its new value
/// in `state`'s tree: inline when small enough, else a header pointing at its new root page.
fn spill_children(core: &mut TxCore, state: &mut BucketState, depth: usize) -> Result<()> {
    if depth >= crate::bucket::BUCKET_DEPTH_MAX {
        return Err(crate::bucket::bucket_too_deep());
    }
    let inline_max = core.alloc.page_size / 4;
    for (name, child) in state.children.iter_mut() {
        spill_children(core, child, depth + 1)?;
        if !child.tree.is_dirty() {
            continue;
        }
        let (pages, arena, alloc) = core.parts();
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
        let outcome = state
            .tree
            .put(pages, arena, name, &value, LEAF_FLAG_BUCKET)?;
        debug_assert!(
            matches!(outcome, Put::Replaced { .. }),
            "a child bucket's key holds a bucket"
        );
    }
    Ok(())
}
