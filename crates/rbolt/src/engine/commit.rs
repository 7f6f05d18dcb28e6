//! The commit of a write transaction, in the phases of bbolt's two-sync protocol: spill the
//! edited buckets into pages, write the freelist, map for growth, write the data (first
//! sync), write the meta (second sync: the commit point), publish to readers.
//!
//! [`WriteTx::commit_inner`] keeps the control flow and every poison decision; each phase is
//! a function of the parts of the transaction it needs and returns what the next one takes.
//! Before the meta write starts, an error rolls the transaction back and leaves the database
//! as it was; from then on the disk may hold the new txid, so an error poisons the handle.

use smallvec::SmallVec;
use std::sync::Arc;
use std::time::{Duration, Instant};

use rbolt_btree::{Arena, Pages, Put, TreeStats};
use rbolt_freelist::Freelist;
use rbolt_page::{
    BucketHeader, Corruption, LEAF_FLAG_BUCKET, META_PAGE_READ_LEN, Meta, PGID_NO_FREELIST,
    PageHeader, Pgid, Reason, Txid, inline_bucket_size, pages_for, write_bucket_header, write_meta,
    write_meta_non_durable,
};

use super::context::Workspace;
use crate::bucket::state::{BucketName, BucketState};
use crate::engine::page_writes::PageWrites;
use crate::engine::snapshot::pages_of;
use crate::engine::snapshot::{Snapshot, map_size};
use crate::engine::{Engine, Writer};
use crate::error::{Error, Result};
use crate::options::Durability;
use crate::stats::TxStats;
use crate::storage::Mapping;
use crate::tx::WriteTx;

impl WriteTx<'_> {
    /// Commits: the phases in order, and the poison decisions between them. On `Err` before
    /// the meta write nothing reached the disk's commit point and [`WriteTx::abort`] rolls
    /// back; from the meta write on, every way out but success poisons the handle.
    pub(crate) fn commit_inner(&mut self) -> Result<()> {
        if self.shared.core.get_mut().broken {
            return Err(Error::Corruption(Corruption::new(
                Pgid(0),
                Reason::Other(
                    "an operation of this transaction failed halfway; it can only be rolled back",
                ),
            )));
        }
        let engine = self.engine;
        let txid = self.shared.core.get_mut().writes.txid();
        // Some commits cannot skip their syncs whatever they ask for (`may_skip_syncs`).
        let durability = self.durability.get();
        let sync = durability != Durability::None
            || !crate::engine::may_skip_syncs(engine.page_size, txid);
        // A one-sync commit's digest covers its own pages only: right after commits without
        // syncs (whose pages it reaches unsynced) it syncs twice.
        let one_sync = durability == Durability::OneSync
            && self.writer.durable.txid == self.base.txid
            && crate::engine::one_sync_runs_max(engine.page_size, txid) > 0;
        // A durable commit keeps its promise that every commit before it is durable even when
        // it changed nothing: after commits without syncs it is written as one anyway.
        let durable_after_unsynced = sync && self.writer.durable.txid != self.base.txid;
        if !self.buckets.root.get_mut().is_changed()
            && !self.commit_unchanged
            && !durable_after_unsynced
        {
            // Nothing changed: nothing to write, no txid used.
            self.abort();
            return Ok(());
        }
        let page_size = engine.page_size;
        self.writer.verify.before(|| engine.snapshot());
        let shared = &mut self.shared;
        let pages = pages_of(&shared.map, page_size, shared.high_water);
        let core = shared.core.get_mut();
        // A commit without syncs lists what it writes for its meta's digest.
        core.writes.digest_writes = !sync;
        // A one-sync commit lists the runs it writes for its meta.
        core.writes.record_runs = one_sync;
        core.writes.runs.clear();
        core.writes.runs_digest = 0;

        // Only this commit's node pages may be marked checked when it is done.
        core.arena.clear_staged();
        // Where the pages go is the allocator's to decide, once, from what kind of commit
        // this is. (A vacuum step that would pass its mark is refused at the allocation that
        // would, before its first write: a big one writes pages out while it spills.)
        core.writes.allocator.choose_strategy(sync, self.shrink);
        let root_pgid = spill(pages, core, self.buckets.root.get_mut(), &mut self.stats)?;
        let mut meta = self.base;
        meta.txid = txid.0;
        meta.root = BucketHeader {
            root: root_pgid.0,
            sequence: self.buckets.root.get_mut().sequence,
        };

        let Workspace { arena, writes, .. } = core;
        // A commit without syncs writes no freelist page: only a crash of this process can
        // bring its meta back, and the open after it rebuilds the freelist by walking the file
        // (`load_freelist`), as for `no_freelist_sync`. That saves writing every free and
        // pending id at every such commit. A one-sync commit writes none either: its meta is
        // one Go rejects, so only rbolt's open reads it, and that open rebuilds the freelist
        // the same way; its cost (every free and pending id, a page or hundreds of them) is
        // what such a commit exists to save. The close, or the open after a crash, writes it
        // with a meta in Go's form.
        let write_page =
            sync && !one_sync && !engine.options.no_freelist_sync && !self.skip_freelist;
        let base = &self.base;
        meta.freelist = write_freelist(pages, writes, arena, base, self.shrink, write_page)?.0;
        if !sync || one_sync {
            // The durable point that must follow has room for its freelist page.
            writes.allocator.ensure_room_for_freelist()?;
        }
        // What a vacuum step's plan meant to move and did not (the freelist page, allocated
        // after the cut is lifted, never counts).
        self.writer.past_cut = writes.allocator.allocated_past_cut();
        meta.pgid = writes.allocator.high_water().0;
        let needed = meta.pgid * page_size as u64;
        let new_map = map_for_growth(engine, &shared.map, needed)?;

        let write_started = Instant::now();
        write_data(writes, arena, needed)?;
        failpoint!("commit::before-data-sync");
        let length_changed = self.writer.length_unsynced || writes.grew_without_sync;
        // The runs are known now: a list the meta page cannot hold means two syncs after all
        // (with a meta in Go's form but no freelist page, which the close writes).
        let meant_one_sync = one_sync;
        let one_sync = one_sync && one_sync_fits(engine.page_size, txid, writes);
        if sync && !one_sync {
            first_sync(engine, length_changed).map_err(|error| poisoned(engine, error))?;
        }
        // From the moment the meta write starts the disk may hold the new txid, so any way out
        // of here but success poisons (an error below, or a panic through `abort`).
        failpoint!("commit::before-meta");
        self.meta_started = true;
        let meta = if one_sync {
            write_one_sync_meta(engine, &meta, writes, length_changed)
        } else {
            let digest = (!sync).then(|| unsynced_digest(&mut self.writer, writes));
            write_meta_page(engine, &meta, digest)
        };
        let meta = meta.map_err(|error| poisoned(engine, error))?;
        self.stats.write_time = write_started.elapsed();
        self.stats.writes = writes.write_calls + 1;

        let old = publish(
            engine,
            &mut self.writer,
            writes,
            new_map,
            &shared.map,
            meta,
            sync,
        );
        self.writer.durable_one_sync = meant_one_sync;
        // The tree pages this commit wrote are in the file as written: checked pages (the
        // arena cleared their old marks before writing).
        arena.mark_staged();
        // The writer's reference to the old mapping goes here; readers still holding it keep
        // it mapped until they end.
        failpoint!("commit::unmap", poison engine);
        drop(old);
        crate::engine::shrink::after_commit(engine, &mut self.writer, &meta, self.shrink);
        // Keep the trees' counters: give_back drops the trees.
        self.stats = self.stats();
        // Only now may a way out leave the handle usable: a panic above (after the commit
        // was published) would otherwise roll back the freelist of a commit that happened
        // and leave the handle to write from it (issue 51: the close's commit in Go's form
        // after a one-sync commit did, and leaked the pages the commit had freed).
        self.meta_started = false;
        self.give_back();
        self.writer.verify.after(|| engine.snapshot());
        Ok(())
    }
}

/// Poisons `db` and passes `error` on: for failures once the disk may hold part of a commit.
fn poisoned(engine: &Engine, error: Error) -> Error {
    engine.poison();
    error
}

/// Phase 1, spill: merges nodes left small by deletes and writes every edited bucket into
/// pages, children before parents, then the root bucket; returns the root bucket's root page
/// and adds the trees' counters and times to `stats`.
fn spill(
    pages: Pages<'_>,
    core: &mut Workspace,
    root: &mut BucketState,
    stats: &mut TxStats,
) -> Result<Pgid> {
    crate::trace::phase!("commit.spill");
    let started = Instant::now();
    failpoint!("commit::before-spill");
    let mut spilled = Spilled::default();
    spill_buckets(pages, core, root, &mut spilled)?;
    let Workspace { arena, writes, .. } = core;
    let rebalance_started = Instant::now();
    root.tree.rebalance(pages, arena, writes)?;
    spilled.rebalance_time += rebalance_started.elapsed();
    let root_pgid = match root.tree.root_pgid() {
        Some(pgid) if !root.tree.is_dirty() => pgid,
        _ => root.tree.spill(pages, arena, writes)?,
    };
    // The nested buckets' states are gone from the root now: keep their counters.
    stats.node_count += spilled.trees.node_count;
    stats.split += spilled.trees.split;
    stats.rebalance += spilled.trees.rebalance;
    stats.spill += spilled.trees.spill;
    stats.rebalance_time = spilled.rebalance_time;
    stats.spill_time = started.elapsed().saturating_sub(spilled.rebalance_time);
    Ok(root_pgid)
}

/// What writing the nested buckets did: their trees' counters and the time spent rebalancing.
#[derive(Default)]
struct Spilled {
    trees: TreeStats,
    rebalance_time: Duration,
}

/// Rebalances and writes every edited bucket below `root`, each after the buckets nested in
/// it, and puts each one's new value in its parent: inline when small enough, else a header
/// pointing at its new root page. Iterative: buckets nest without limit.
fn spill_buckets(
    pages: Pages<'_>,
    core: &mut Workspace,
    root: &mut BucketState,
    spilled: &mut Spilled,
) -> Result<()> {
    /// A bucket whose nested buckets are being written: its name in its parent, its state,
    /// and the nested buckets still to write.
    struct Pending {
        name: BucketName,
        state: BucketState,
        rest: std::collections::btree_map::IntoIter<BucketName, BucketState>,
    }
    let mut root_rest = std::mem::take(&mut root.children).into_iter();
    // Inline for a few levels of nested buckets: a commit's walk allocates nothing.
    let mut stack: SmallVec<[Pending; 4]> = SmallVec::new();
    loop {
        let next = match stack.last_mut() {
            Some(pending) => pending.rest.next(),
            None => root_rest.next(),
        };
        if let Some((name, mut state)) = next {
            let rest = std::mem::take(&mut state.children).into_iter();
            stack.push(Pending { name, state, rest });
            continue;
        }
        let Some(mut done) = stack.pop() else {
            return Ok(());
        };
        let parent = match stack.last_mut() {
            Some(pending) => &mut pending.state,
            None => &mut *root,
        };
        spill_bucket(pages, core, &done.name, &mut done.state, parent, spilled)?;
        spilled.trees.add(&done.state.tree.stats());
    }
}

/// Rebalances and writes the bucket `child` (whose nested buckets are written already) and
/// puts its new value under `name` in `parent`'s tree.
fn spill_bucket(
    pages: Pages<'_>,
    core: &mut Workspace,
    name: &[u8],
    child: &mut BucketState,
    parent: &mut BucketState,
    spilled: &mut Spilled,
) -> Result<()> {
    let inline_max = core.writes.page_size / 4;
    let Workspace { arena, writes, .. } = core;
    let rebalance_started = Instant::now();
    child.tree.rebalance(pages, arena, writes)?;
    spilled.rebalance_time += rebalance_started.elapsed();
    if !child.tree.is_dirty() {
        return Ok(());
    }
    // A spilled child's value is its 16-byte header, kept on the stack; only an inline one
    // (its whole tree in the value) needs a buffer.
    let mut inline_value = Vec::new();
    let header_value;
    let value: &[u8] = match child.tree.inline_size(inline_max) {
        Some(size) => {
            child.tree.free_all(pages, writes)?;
            inline_value.resize(inline_bucket_size(size), 0u8);
            let header = BucketHeader::new(Pgid(0), child.sequence);
            child
                .tree
                .write_inline(write_bucket_header(&mut inline_value, header));
            &inline_value
        }
        None => {
            let root = child.tree.spill(pages, arena, writes)?;
            header_value = BucketHeader::new(root, child.sequence).to_bytes();
            &header_value
        }
    };
    let outcome = parent
        .tree
        .put(pages, arena, name, value, LEAF_FLAG_BUCKET)?;
    debug_assert!(
        matches!(outcome, Put::Replaced { .. }),
        "a child bucket's key holds a bucket"
    );
    Ok(())
}

/// Phase 2, the freelist: frees the old freelist page, lowers the high-water mark past free
/// pages at the end of the file when `shrink` (a vacuum step, or `auto_shrink`), and queues a
/// new freelist page (in a buffer from `arena`) when `write_page`; returns its id, or
/// [`PGID_NO_FREELIST`].
fn write_freelist(
    pages: Pages<'_>,
    writes: &mut PageWrites,
    arena: &mut Arena,
    base: &Meta,
    shrink: bool,
    write_page: bool,
) -> Result<Pgid> {
    crate::trace::phase!("commit.freelist");
    failpoint!("commit::before-freelist");
    let txid: Txid = writes.txid();
    // What the spill took ahead of need goes back; the freelist page may land anywhere below
    // the limits (it is the last page written).
    writes.allocator.end_spill();
    if base.freelist != PGID_NO_FREELIST.0 {
        let old = base.freelist_pgid();
        let span = pages.page(Pgid(0), old)?;
        let overflow = PageHeader::read(span).map_or(0, |h| h.overflow);
        writes.freelist().free(txid, old, overflow)?;
    }
    if shrink {
        // Free pages at the end of the file leave the freelist and the file's mapped extent,
        // before the freelist page is sized (see `vacuum`).
        writes.allocator.trim_tail();
    }
    if !write_page {
        return Ok(PGID_NO_FREELIST);
    }
    let n_pages = pages_for(writes.freelist().write_size(), writes.page_size);
    let (pgid, mut buf) = writes.allocate_buffer(n_pages, arena)?;
    let used = writes
        .freelist()
        .write_into(&mut buf, pgid, (n_pages - 1) as u32);
    buf[used..].fill(0);
    writes.push(pgid, buf);
    Ok(pgid)
}

/// Phase 3, map for growth: a mapping long enough for readers of the new state when the
/// current one is not, made before anything is durable so that a failure still rolls back.
fn map_for_growth(engine: &Engine, current: &Mapping, needed: u64) -> Result<Option<Arc<Mapping>>> {
    if needed <= current.len() as u64 {
        return Ok(None);
    }
    crate::trace::phase!("commit.map", needed);
    failpoint!("commit::remap");
    let len = map_size(needed).ok_or_else(|| {
        Error::io(
            engine.storage.path(),
            std::io::Error::new(
                std::io::ErrorKind::OutOfMemory,
                "the file would outgrow the address space",
            ),
        )
    })?;
    let map = engine
        .storage
        .map(len)
        .map_err(|e| Error::io(engine.storage.path(), e))?;
    let _ = map.advise_random();
    Ok(Some(Arc::new(map)))
}

/// Phase 4, the data: grows the file to `needed` bytes and writes every queued page, giving
/// the buffers back to `arena`.
fn write_data(writes: &mut PageWrites, arena: &mut Arena, needed: u64) -> Result<()> {
    crate::trace::phase!("commit.write_data", needed);
    failpoint!("commit::before-grow");
    writes.ensure_file_len(needed)?;
    failpoint!("commit::before-write");
    writes.flush(arena)
}

/// The first sync, of the data: an `fsync` when the file's length changed since the last
/// one (`length_changed`), else an `fdatasync`.
fn first_sync(engine: &Engine, length_changed: bool) -> Result<()> {
    crate::trace::phase!("commit.sync_data", length_changed);
    let synced = if length_changed {
        engine.storage.sync_all()
    } else {
        engine.storage.sync_data()
    };
    synced.map_err(|e| Error::io(engine.storage.path(), e))
}

/// The digest a commit without syncs writes in its meta: of the page extents written since the
/// last durable meta that this commit's tree reaches (see [`rbolt_page::PagesDigest`]). The
/// writer's list of them follows the commit: the extents it freed leave, those it wrote come
/// in. Called once the meta write has begun (an error from there on poisons the handle, so
/// the list never holds a commit that did not happen).
fn unsynced_digest(writer: &mut Writer, writes: &mut PageWrites) -> rbolt_page::PagesDigest {
    let mut sum = writer.unsynced_digest;
    let txid = writes.txid();
    for (pgid, _) in writes.freelist().pending().spans_freed_by(txid) {
        if let Some(digest) = writer.unsynced_pages.remove(&pgid) {
            sum = sum.wrapping_sub(digest);
        }
    }
    for (pgid, digest) in writes.written.drain(..) {
        if let Some(old) = writer.unsynced_pages.insert(pgid, digest) {
            sum = sum.wrapping_sub(old);
        }
        sum = sum.wrapping_add(digest);
    }
    writer.unsynced_digest = sum;
    sum.to_le_bytes()
}

/// Phase 5, the meta: writes `meta` (with its checksum; a non-durable one, the commit of a
/// transaction without syncs, with this boot's id and `digest`) to its slot, then, for a
/// durable commit, the second sync: the commit point. Returns the meta as written.
fn write_meta_page(
    engine: &Engine,
    meta: &Meta,
    digest: Option<rbolt_page::PagesDigest>,
) -> Result<Meta> {
    let sync = digest.is_none();
    crate::trace::phase!("commit.write_meta", sync);
    let mut head = [0u8; META_PAGE_READ_LEN];
    let meta = match digest {
        None => write_meta(&mut head, meta),
        Some(digest) => {
            // Trusted after a crash only in this boot (see `Storage::boot_id`); without a boot
            // id, never: such a commit then survives only a clean close.
            let boot_id = engine.storage.boot_id().unwrap_or_default();
            write_meta_non_durable(&mut head, meta, &boot_id, &digest)
        }
    };
    write_meta_head(engine, &head, meta.txid)?;
    failpoint!("commit::before-meta-sync", poison engine);
    if sync {
        engine
            .storage
            .sync_data()
            .map_err(|e| Error::io(engine.storage.path(), e))?;
    }
    failpoint!("commit::after-meta-sync", poison engine);
    Ok(meta)
}

/// Whether the runs a one-sync commit `txid` wrote (`writes.runs`, put in page order here)
/// fit its meta: at least one, no more than its slot has room for, and at most
/// [`rbolt_page::ONE_SYNC_BYTES_MAX`] bytes of pages (what an open hashes before it trusts
/// the meta).
fn one_sync_fits(page_size: usize, txid: Txid, writes: &mut PageWrites) -> bool {
    // Runs of several flushes (a big commit writes out as it spills) come in no order.
    writes.runs.sort_unstable_by_key(|run| run.start);
    let pages: u64 = writes.runs.iter().map(|run| run.n_pages).sum();
    !writes.runs.is_empty()
        && writes.runs.len() <= crate::engine::one_sync_runs_max(page_size, txid)
        && pages.saturating_mul(page_size as u64) <= rbolt_page::ONE_SYNC_BYTES_MAX
}

/// Phase 5 of a one-sync commit: writes its meta (the runs `writes` wrote and their digest,
/// see [`rbolt_page::write_meta_one_sync`]) to its slot, then the commit's one sync: an
/// `fsync` when the file's length changed (`length_changed`), else an `fdatasync`. Returns
/// the meta as written.
fn write_one_sync_meta(
    engine: &Engine,
    meta: &Meta,
    writes: &PageWrites,
    length_changed: bool,
) -> Result<Meta> {
    crate::trace::phase!("commit.write_meta", one_sync = true);
    let mut head = [0u8; rbolt_page::ONE_SYNC_LEN_MAX];
    let digest = writes.runs_digest.to_le_bytes();
    let meta = rbolt_page::write_meta_one_sync(&mut head, meta, &writes.runs, &digest);
    let len = rbolt_page::one_sync_meta_len(writes.runs.len());
    write_meta_head(engine, &head[..len], meta.txid)?;
    failpoint!("commit::before-meta-sync", poison engine);
    first_sync(engine, length_changed)?;
    failpoint!("commit::after-meta-sync", poison engine);
    Ok(meta)
}

/// Writes `head`, the start of a meta page for `txid`, to its slot (`txid % 2`). Only these
/// bytes, which lie in the page's first sector, change from one meta to the next: the rest of
/// a meta page is zeros from the file's creation on (rbolt's and Go's), and no reader looks
/// at it. So a commit writes a few dozen bytes for its meta where a whole page would be 4 KiB
/// more per commit (LMDB writes its meta's fields the same way).
///
/// With one `pwrite`, never a copy into a mapping: every commit without syncs since the last
/// durable one writes this same slot, so a meta a kill cut short would lose all of them, not
/// only the commit in flight.
fn write_meta_head(engine: &Engine, head: &[u8], txid: u64) -> Result<()> {
    let offset = (txid % 2) * engine.page_size as u64;
    // Never into the next page: on pages smaller than the head (a durable meta needs only its
    // first `META_PAGE_LEN` bytes; non-durable ones are not written there, `may_skip_syncs`).
    let len = head.len().min(engine.page_size);
    engine
        .storage
        .write_whole_at(&head[..len], offset)
        .map_err(|e| Error::io(engine.storage.path(), e))
}

/// Phase 6, publish: the writer's state follows the commit (its durable meta, the file's
/// length, the freelist's pending ids), and the new state becomes the snapshot readers start
/// from, on the new mapping if the commit made one (locked into memory first under
/// `Options::mlock` when the file grew or was remapped). Returns the old snapshot, for the
/// caller to drop.
fn publish(
    engine: &Engine,
    writer: &mut Writer,
    writes: &mut PageWrites,
    new_map: Option<Arc<Mapping>>,
    current: &Arc<Mapping>,
    meta: Meta,
    synced: bool,
) -> Snapshot {
    crate::trace::phase!("commit.publish");
    if synced {
        writer.became_durable(meta);
        writer.length_unsynced = false;
    } else {
        writer.length_unsynced |= writes.grew_without_sync;
    }
    let txid = writes.txid();
    writes.freelist().commit(txid);
    let grew = writer.file_len < writes.file_len;
    writer.file_len = writes.file_len;
    let remapped = new_map.is_some();
    let map = new_map.unwrap_or_else(|| current.clone());
    if engine.options.mlock && (grew || remapped) {
        // Best effort: the commit is durable already, and bbolt also only logs this.
        let _ = map.lock(writes.file_len as usize);
    }
    let mut snapshot = engine
        .current
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let before = std::mem::replace(&mut *snapshot, Snapshot { meta, map });
    drop(snapshot);
    // After the snapshot of this process: a reader of either kind that starts from now on
    // reads this meta, and the writer's next scan of the reader table follows this store.
    crate::engine::processes::publish(engine, &meta);
    before
}

/// Writes `meta`, whose pages are durable already, as a durable meta into its slot and syncs
/// it; it becomes the durable meta (recovery at open makes a commit made without syncs durable
/// this way). A failure poisons the handle: the slot may hold either meta, or neither (then the
/// other slot's durable meta opens).
pub(crate) fn write_durable_meta(engine: &Engine, writer: &mut Writer, meta: &Meta) -> Result<()> {
    let mut head = [0u8; META_PAGE_READ_LEN];
    let written = rbolt_page::write_meta(&mut head, meta);
    write_meta_head(engine, &head, meta.txid).inspect_err(|_| engine.poison())?;
    engine.sync_or_poison()?;
    writer.became_durable(written);
    crate::engine::shrink::after_durable(engine, writer);
    Ok(())
}

#[cfg(test)]
mod tests {
    use crate::storage::{SimFile, Storage};
    use crate::{Db, Error, Options};
    use std::sync::Arc;

    /// Issue 46, finding 8: a vacuum step may not pass its high-water mark (its `mark`), and
    /// one that would was refused only after its spill, which writes its pages out once they
    /// reach 8 MiB (and grows the file for them). Now the allocation that would pass the mark
    /// fails, before anything is written.
    #[test]
    fn a_commit_held_below_a_mark_is_refused_before_it_writes() {
        let sim = SimFile::new().unwrap();
        let db = Db::open_storage(Arc::new(sim.clone()), Options::default()).unwrap();
        db.update(|tx| tx.create_bucket("b")?.put("k", "v"))
            .unwrap();
        let (writes, len) = (sim.counts().writes(), sim.len().unwrap());
        let mut tx = db.begin_write().unwrap();
        let mark = tx.base.high_water();
        tx.allocator_mut().vacuum_step(&[], None, mark);
        let value = vec![7u8; 4000];
        let mut b = tx.bucket_mut("b").unwrap().unwrap();
        for i in 0..4000u32 {
            b.put(i.to_be_bytes(), &value).unwrap();
        }
        drop(b);
        assert!(matches!(tx.commit(), Err(Error::MaxSizeReached { .. })));
        assert_eq!(sim.counts().writes(), writes, "the refused commit wrote");
        assert_eq!(sim.len().unwrap(), len, "the refused commit grew the file");
        let keys = db.view(|tx| Ok::<_, Error>(tx.bucket("b")?.unwrap().iter().count()));
        assert_eq!(keys.unwrap(), 1);
    }
}
