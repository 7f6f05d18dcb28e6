//! The engine room: what every transaction borrows. This file is the engine itself — the
//! storage, the published snapshot, the writer lock and its state, the reader registry — and
//! the handle's failure state (poisoning). Beside it:
//! - `snapshot.rs`: the `(meta, mapping)` a reader starts from;
//! - `readers.rs`: the registry of open readers' txids;
//! - `context.rs`: what a write transaction's bucket handles share (pages and workspace);
//! - `page_writes.rs`: the pages a commit writes (their ids from `rbolt_freelist::Allocator`);
//! - `commit.rs`: the commit's six phases;
//! - `shrink.rs`: the deferred truncation of a file whose end was freed;
//! - `verify.rs`: the `_verify` feature's check around every commit;
//! - `batch.rs`: the write queue behind `Db::batch`.
//!
//! The handle ([`crate::Db`], `db.rs`) owns one engine and adds what only the handle needs
//! (the batcher, the storage claim); transactions borrow the engine, never the handle, so the
//! rooms above the engine (transactions, the deferred truncation, batches) never import the
//! handle.

pub(crate) mod batch;
pub(crate) mod commit;
pub(crate) mod context;
pub(crate) mod page_writes;
pub(crate) mod processes;
pub(crate) mod readers;
pub(crate) mod shrink;
pub(crate) mod snapshot;
pub(crate) mod turns;
pub(crate) mod verify;

use crate::engine::readers::Readers;
use crate::engine::snapshot::Snapshot;
use crate::error::{Error, Result};
use crate::options::Options;
use crate::stats::StatCounters;
use crate::storage::Storage;
use crate::trace;
use rbolt_btree::Arena;
use rbolt_freelist::{AnyFreelist, PgidMap};
use rbolt_page::{META_PAGE_READ_LEN, Meta, Txid};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

/// The largest txid a meta may carry: the next commit, and readers' slot values, must not
/// overflow.
pub(crate) const TXID_MAX: u64 = u64::MAX - 2;

/// The state every transaction of one open database shares.
#[derive(Debug)]
pub(crate) struct Engine {
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) options: Options,
    pub(crate) page_size: usize,
    pub(crate) current: RwLock<Snapshot>,
    pub(crate) writer: Mutex<Writer>,
    /// Who waits for `writer` and who had it last: every taking of it goes through
    /// [`Engine::lock_writer`], which takes turns ([`turns`]).
    pub(crate) turns: turns::Turns,
    pub(crate) readers: Readers,
    pub(crate) poisoned: AtomicBool,
    /// The thread that holds the writer (`thread_id`), 0 when none does: a thread asking for
    /// the writer it holds gets an error instead of waiting for itself.
    pub(crate) writer_thread: AtomicU64,
    pub(crate) counters: StatCounters,
    /// Whether `Writer::truncate` holds a truncation, so that a reader ending can do it
    /// without looking at the writer state otherwise.
    pub(crate) truncate_wanted: AtomicBool,
    /// A read-only handle reading beside a writer of another process, through its reader
    /// table (`processes.rs`); `None` otherwise.
    pub(crate) beside_writer: Option<crate::engine::processes::BesideWriter>,
}

/// What only the writer touches, behind the writer lock.
#[derive(Debug)]
pub(crate) struct Writer {
    /// `None` until loaded (a read-only handle loads it only when asked).
    pub(crate) freelist: Option<AnyFreelist>,
    /// The one pool of page buffers: a write transaction takes it for its nodes and pages
    /// and gives it back, with the buffers its commit wrote, when it ends.
    pub(crate) arena: Arena,
    pub(crate) file_len: u64,
    pub(crate) readers_scratch: Vec<Txid>,
    /// The reader table's live slots, read at each write transaction's start.
    pub(crate) slots_scratch: Vec<rbolt_storage::SlotInfo>,
    /// The reader-process transactions already reported as holding old snapshots for long.
    pub(crate) pins_warned: Vec<(u32, u64, u64)>,
    /// The last write transaction's list of dirty pages, emptied: the next one fills it.
    pub(crate) dirty_list: Vec<crate::engine::page_writes::Dirty>,
    /// The last write transaction's spare handle state (`bucket::state::Registry`).
    pub(crate) spare_state: Option<Box<crate::bucket::state::BucketState>>,
    /// The `_verify` feature's state (nothing without it).
    pub(crate) verify: crate::engine::verify::Verify,
    /// A truncation of the file waiting for older readers to end (`shrink.rs`).
    pub(crate) truncate: Option<Truncate>,
    /// The newest meta known to be durable on disk: what a power loss may bring back. Its
    /// pages stay as they are until a newer meta is durable (`release_pending_durable`), and
    /// no commit writes to its slot (`next_txid`). Each of its pages is freed at most once, so
    /// what commits without syncs hold back is at most its pages: a run of them at most about
    /// doubles the file.
    pub(crate) durable: Meta,
    /// Pages the last commit wrote at or past its vacuum step's cut (`Allocator::vacuum_step`'s cut): what the
    /// step's plan meant to move but did not.
    pub(crate) past_cut: u64,
    /// A commit without syncs grew the file: the next durable commit fsyncs its length.
    pub(crate) length_unsynced: bool,
    /// The page extents commits without syncs wrote since `durable` that the newest commit
    /// still reaches, by first page, each with its [`rbolt_page::page_digest`]; and their sum
    /// (modulo 2^128), the [`rbolt_page::PagesDigest`] such a commit's meta carries, which the
    /// open checks before it trusts the meta (`db::open::unsynced_pages_intact`).
    pub(crate) unsynced_pages: PgidMap<u128>,
    pub(crate) unsynced_digest: u128,
    /// The last write transaction's list of written extents' digests, emptied (`PageWrites::written`).
    pub(crate) written_scratch: Vec<(rbolt_page::Pgid, u128)>,
    /// `durable` was written by a one-sync commit (`Durability::OneSync`), in a form Go bbolt
    /// rejects and without a freelist page (or by one that fell back to two syncs, without a
    /// freelist page): the close writes it again in Go's form, with its freelist page (a
    /// commit with two syncs).
    pub(crate) durable_one_sync: bool,
}

impl Writer {
    /// The writer state of a database just opened at `durable`, `file_len` bytes long (its
    /// pages of `durable.page_size` bytes).
    pub(crate) fn new(freelist: Option<AnyFreelist>, file_len: u64, durable: Meta) -> Writer {
        Writer {
            freelist,
            arena: Arena::new(durable.page_size as usize),
            file_len,
            readers_scratch: Vec::new(),
            slots_scratch: Vec::new(),
            pins_warned: Vec::new(),
            dirty_list: Vec::new(),
            spare_state: None,
            verify: Default::default(),
            truncate: None,
            durable,
            past_cut: 0,
            length_unsynced: false,
            unsynced_pages: PgidMap::default(),
            unsynced_digest: 0,
            written_scratch: Vec::new(),
            durable_one_sync: false,
        }
    }

    /// `meta` is durable on disk now: what commits without syncs wrote before it is part of
    /// it.
    pub(crate) fn became_durable(&mut self, meta: Meta) {
        self.durable = meta;
        self.durable_one_sync = false;
        self.unsynced_pages.clear();
        self.unsynced_digest = 0;
    }
}

/// A truncation of the file waiting for older readers to end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Truncate {
    /// The length to cut the file to: at least the high-water mark of every commit since
    /// `after`, times the page size.
    pub(crate) len: u64,
    /// The commit that lowered the mark: readers of older snapshots may reach past `len`.
    pub(crate) after: Txid,
}

/// The id of the commit after `newest`, given the newest durable meta `durable`: the next
/// number, unless its slot (`txid % 2`) is `durable`'s, which a crash may still need — then
/// the one after. So commits that do not sync never overwrite the last durable meta, and Go
/// bbolt, which writes its next meta to slot `(txid + 1) % 2`, overwrites theirs.
pub(crate) fn next_txid(newest: Txid, durable: Txid) -> Txid {
    let next = newest.0 + 1;
    if newest != durable && next % 2 == durable.0 % 2 {
        Txid(next + 1)
    } else {
        Txid(next)
    }
}

/// Whether the commit `txid` may skip its syncs on a file of `page_size`-byte pages, writing a
/// non-durable meta (`META_PAGE_READ_LEN` bytes) to slot `txid % 2`; when not, it is made a
/// durable commit. It may when:
/// - the slot is 1, or the pages are the system's page size. Go bbolt 1.3 (Debian's, and
///   etcd 3.5's) takes the page size from meta 0 alone and, when meta 0 fails its checksum (as
///   a non-durable meta does, on purpose), tries the system's page size instead
///   (`os.Getpagesize()`: 4096 on x86-64, 16 KiB or 64 KiB on many arm64 kernels). So on a
///   file whose pages are another size, slot 0 holds only durable metas: a commit without
///   syncs that would land there (the first after a durable one in slot 1) syncs instead, and
///   those after it land in slot 1. (A file left so by a crash and moved to a system of
///   another page size before rbolt opens it again is the one case Go 1.3 then refuses.)
/// - the meta fits its page and lies within one 4 KiB block of the file, so that its one
///   `pwrite` is whole after a kill (see `Storage::write_whole_at`).
pub(crate) fn may_skip_syncs(page_size: usize, txid: Txid) -> bool {
    let slot = txid.0 % 2;
    let offset = slot * page_size as u64;
    (slot == 1 || page_size == rbolt_storage::system_page_size())
        && page_size >= META_PAGE_READ_LEN
        && offset % 4096 + META_PAGE_READ_LEN as u64 <= 4096
}

/// How many page runs the meta of a one-sync commit `txid` may name on a file of
/// `page_size`-byte pages: 0 where such a meta may not go (then the commit syncs twice). The
/// rules of [`may_skip_syncs`] for where a meta Go cannot read may go, and room for the runs
/// in the page and in the 4 KiB block the meta starts in (see `rbolt_page::one_sync_runs_max`).
pub(crate) fn one_sync_runs_max(page_size: usize, txid: Txid) -> usize {
    let slot = txid.0 % 2;
    if slot == 0 && page_size != rbolt_storage::system_page_size() {
        return 0;
    }
    rbolt_page::one_sync_runs_max(page_size, slot * page_size as u64)
}

impl Engine {
    /// The engine of a database just opened at `snapshot`.
    pub(crate) fn new(
        storage: Arc<dyn Storage>,
        options: Options,
        page_size: usize,
        snapshot: Snapshot,
        writer: Writer,
        counters: StatCounters,
    ) -> Engine {
        debug_assert_eq!(
            writer.arena.page_size(),
            page_size,
            "the writer's arena is for pages of another size"
        );
        let beside_writer = match storage.reader_table() {
            Some(table) if options.read_only => {
                Some(crate::engine::processes::BesideWriter::new(table.clone()))
            }
            _ => None,
        };
        Engine {
            beside_writer,
            storage,
            options,
            page_size,
            current: RwLock::new(snapshot),
            writer: Mutex::new(writer),
            turns: turns::Turns::default(),
            readers: Readers::new(),
            poisoned: AtomicBool::new(false),
            writer_thread: AtomicU64::new(0),
            counters,
            truncate_wanted: AtomicBool::new(false),
        }
    }

    /// The file's path, if it has one.
    pub(crate) fn path(&self) -> Option<&Path> {
        self.storage.path()
    }

    pub(crate) fn check_poisoned(&self) -> Result<()> {
        if self.poisoned.load(Ordering::Acquire) {
            return Err(Error::Poisoned);
        }
        Ok(())
    }

    pub(crate) fn poison(&self) {
        if !self.poisoned.swap(true, Ordering::AcqRel) {
            trace::poisoned(self.storage.path());
        }
    }

    /// Fails if this thread holds the writer: waiting for it would wait for ever.
    pub(crate) fn check_not_writer(&self) -> Result<()> {
        if self.writer_thread.load(Ordering::Acquire) == thread_id() {
            return Err(Error::WriteTxOnThisThread);
        }
        Ok(())
    }

    /// The committed snapshot readers start from.
    pub(crate) fn snapshot(&self) -> Snapshot {
        self.current
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }

    /// The writer state, waiting for the write transaction under way to end.
    pub(crate) fn lock_writer(&self) -> MutexGuard<'_, Writer> {
        self.turns.lock(&self.writer)
    }

    /// An fdatasync; a failure poisons the handle (see [`crate::Db::sync`]).
    pub(crate) fn sync_or_poison(&self) -> Result<()> {
        self.storage.sync_data().map_err(|e| {
            self.poison();
            Error::io(self.storage.path(), e)
        })
    }
}

/// A number for the calling thread, never 0 (which means "no thread").
pub(crate) fn thread_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    thread_local! {
        static ID: u64 = NEXT.fetch_add(1, Ordering::Relaxed);
    }
    ID.with(|id| *id)
}

#[cfg(test)]
mod tests {
    use crate::{Db, Error};

    /// The writer's pool holds what one transaction uses, not what its transactions have used
    /// in all: a steady run of durable commits (each writing its leaves, a branch, a freelist
    /// page and a meta) leaves it the size it was.
    #[test]
    fn steady_commits_keep_the_pool_one_size() {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let commit = |round: u32| {
            db.update(|tx| {
                let mut b = tx.create_bucket_if_not_exists("b")?;
                for i in 0..500u32 {
                    b.put(i.to_be_bytes(), [round as u8; 64])?;
                }
                Ok::<_, Error>(())
            })
            .unwrap();
        };
        for round in 0..4 {
            commit(round);
        }
        let pooled = db.engine.lock_writer().arena.len();
        assert!(pooled > 10, "the commits' pages are pooled: {pooled}");
        for round in 4..40 {
            commit(round);
        }
        assert_eq!(db.engine.lock_writer().arena.len(), pooled);
    }
}
