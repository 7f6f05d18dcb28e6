//! Readers in other processes: both sides of the reader table in the lock file
//! (`rbolt_storage::ReaderTable`; the protocol is in `docs/guarantees.md`, "Readers in other
//! processes").
//!
//! - The writer publishes its newest meta in the table at open and at every commit
//!   ([`publish`]), counts the txids of live slots among the readers whose pages it keeps
//!   ([`collect_live`]) and never cuts the file below the length a live slot reads
//!   ([`blocks_truncation`]).
//! - A read-only handle beside a writer ([`BesideWriter`]) reads the published meta at each
//!   transaction's start, publishes the txid it reads in a slot of its own, checks that the
//!   meta is still the newest (else starts again), and maps more of the file when it grew.
//!   Slots are claimed once per handle and reused: a transaction's start and end are atomic
//!   stores into the shared mapping, no system call.

use crate::engine::Engine;
use crate::engine::snapshot::{Snapshot, map_size};
use crate::error::{Error, Result};
use rbolt_freelist::Freelist;
use rbolt_page::{MAGIC, Meta, Txid};
use rbolt_storage::{ClaimedSlot, PUBLISHED_BYTES_MAX, ReaderTable, SlotInfo};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// How many times a transaction's start reads the published meta again when the writer
/// published a newer one meanwhile, before it reports the writer as too busy to follow (each
/// try is a few loads and stores; a commit takes microseconds at least).
const BEGIN_TRIES_MAX: usize = 10_000;

/// How long a reader process may hold a snapshot older than the newest before the writer
/// says so ([`warn_long_pins`]), unless [`PIN_WARN_VAR`] says otherwise.
const PIN_WARN_AFTER: Duration = Duration::from_secs(60);

/// The environment variable that replaces [`PIN_WARN_AFTER`]: a whole number of seconds
/// (anything else leaves the default), read once per process.
const PIN_WARN_VAR: &str = "RBOLT_READER_PIN_WARN_SECS";

/// The seconds after which a pinning reader process is reported: [`PIN_WARN_VAR`] when it
/// holds a number, else [`PIN_WARN_AFTER`].
fn pin_warn_after_secs() -> u64 {
    static SECS: OnceLock<u64> = OnceLock::new();
    *SECS.get_or_init(|| {
        std::env::var(PIN_WARN_VAR)
            .ok()
            .and_then(|text| text.trim().parse().ok())
            .unwrap_or(PIN_WARN_AFTER.as_secs())
    })
}

/// The writer's side: publishes `meta` for reader processes, if the storage has a table.
pub(crate) fn publish(engine: &Engine, meta: &Meta) {
    if engine.options.read_only {
        return;
    }
    if let Some(table) = engine.storage.reader_table() {
        table.publish(&meta.to_bytes());
    }
}

/// The writer's side, at its open, before its first write transaction: when live reader
/// processes read snapshots older than the opened meta (they attached to an earlier writer
/// that has closed since), the freelist just loaded lists as free the pages the commits since
/// their snapshots freed, without saying which commit freed which; so every free page is
/// held pending until those readers have moved on to the opened meta or later.
pub(crate) fn hold_for_older_readers(engine: &Engine) -> Result<()> {
    if engine.options.read_only || engine.storage.reader_table().is_none() {
        return Ok(());
    }
    let opened = engine.snapshot().meta.txid();
    let mut writer = engine.lock_writer();
    let mut slots = std::mem::take(&mut writer.slots_scratch);
    let mut txids = Vec::new();
    let live = collect_live(engine, opened, &mut slots, &mut txids);
    writer.slots_scratch = slots;
    live?;
    if opened.0 < 2 || !txids.iter().any(|&txid| txid < opened) {
        return Ok(());
    }
    if let Some(freelist) = writer.freelist.as_mut() {
        freelist
            .pend_free_pages(Txid(opened.0 - 1))
            .map_err(|e| Error::Invalid {
                path: engine.path().map(|p| p.to_path_buf()),
                reason: format!("the freelist could not be held for older readers: {e}"),
            })?;
        engine.counters.freelist_changed(freelist);
    }
    Ok(())
}

/// The writer's side: appends the txids live reader processes read to `out`. Slots reading
/// the newest meta `newest` or later are taken as they are; older ones are checked for
/// liveness (their lock), and those of processes that exited are cleared.
pub(crate) fn collect_live(
    engine: &Engine,
    newest: Txid,
    scratch: &mut Vec<SlotInfo>,
    out: &mut Vec<Txid>,
) -> Result<()> {
    let Some(table) = engine.storage.reader_table() else {
        return Ok(());
    };
    scratch.clear();
    table
        .live_readers(scratch, newest.0)
        .map_err(|e| Error::io(Some(table.path()), e))?;
    out.extend(scratch.iter().filter_map(|slot| slot.txid.map(Txid)));
    Ok(())
}

/// The writer's side: says (a `WARN` event, once per transaction) which live reader processes
/// have held a snapshot older than `newest` for [`PIN_WARN_AFTER`] (or what [`PIN_WARN_VAR`]
/// says) or longer; `warned` remembers the transactions told of (pid, handle, txid).
pub(crate) fn warn_long_pins(
    engine: &Engine,
    slots: &[SlotInfo],
    newest: Txid,
    warned: &mut Vec<(u32, u64, u64)>,
) {
    let key = |slot: &SlotInfo| slot.txid.map(|txid| (slot.pid, slot.handle, txid));
    warned.retain(|told| slots.iter().any(|slot| key(slot) == Some(*told)));
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    for slot in slots {
        let Some(told @ (pid, _, txid)) = key(slot) else {
            continue;
        };
        let seconds = now.saturating_sub(slot.since);
        if txid < newest.0 && seconds >= pin_warn_after_secs() && !warned.contains(&told) {
            crate::trace::reader_process_pins(engine.path(), pid, txid, seconds, slot.len);
            warned.push(told);
        }
    }
}

/// The writer's side: whether a live reader process reads a snapshot older than `after` or
/// more than `len` bytes of the file, so that cutting the file to `len` must wait. An error
/// reading the table blocks too.
pub(crate) fn blocks_truncation(
    engine: &Engine,
    after: Txid,
    len: u64,
    scratch: &mut Vec<SlotInfo>,
) -> bool {
    let Some(table) = engine.storage.reader_table() else {
        return false;
    };
    scratch.clear();
    if table.live_readers(scratch, u64::MAX).is_err() {
        return true;
    }
    scratch
        .iter()
        .any(|slot| slot.txid.is_some_and(|txid| txid < after.0) || slot.len > len)
}

/// How long a reader waits for a meta the writer has not published yet (a writer opening:
/// its recovery may sync).
const PUBLISHED_WAIT: Duration = Duration::from_secs(10);

/// The meta the writer published in `table`, and its generation, for a file of `page_size`
/// pages; waits while the writer opens.
pub(crate) fn published_meta(table: &ReaderTable, page_size: usize) -> Result<(Meta, u64)> {
    let mut buf = [0u8; PUBLISHED_BYTES_MAX];
    let invalid = |reason: &str| Error::Invalid {
        path: Some(table.path().to_path_buf()),
        reason: format!("the writer's published meta {reason}"),
    };
    let started = Instant::now();
    let (len, generation) = loop {
        match table.read_published(&mut buf) {
            Some(found) => break found,
            None if started.elapsed() < PUBLISHED_WAIT => {
                std::thread::sleep(Duration::from_millis(1));
            }
            None => {
                return Err(invalid(
                    "was not published within 10 s of the writer's open",
                ));
            }
        }
    };
    let meta = Meta::from_bytes(&buf[..len]).ok_or_else(|| invalid("has a wrong length"))?;
    if meta.magic != MAGIC || meta.page_size as usize != page_size || meta.pgid < 2 {
        return Err(invalid("is not a meta of this file"));
    }
    Ok((meta, generation))
}

/// A read-only handle's state beside a live writer: its table and the slots it holds.
#[derive(Debug)]
pub(crate) struct BesideWriter {
    table: ReaderTable,
    /// This handle's number in its process, written in its slots.
    handle: u64,
    /// Slots claimed and free for the next transaction.
    idle: Mutex<Vec<ClaimedSlot>>,
}

impl BesideWriter {
    /// The state of a read-only handle whose storage attached to a writer's table.
    pub(crate) fn new(table: ReaderTable) -> BesideWriter {
        static HANDLES: AtomicU64 = AtomicU64::new(1);
        BesideWriter {
            table,
            handle: HANDLES.fetch_add(1, Ordering::Relaxed),
            idle: Mutex::new(Vec::new()),
        }
    }

    /// A slot for a transaction: one this handle holds already, or a new one (the one
    /// system call, on the first transaction of a handle and when more run at once).
    fn take_slot(&self) -> Result<ClaimedSlot> {
        let reused = self
            .idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .pop();
        match reused {
            Some(slot) => Ok(slot),
            None => self
                .table
                .claim_slot(self.handle)
                .map_err(|e| Error::io(Some(self.table.path()), e)),
        }
    }

    /// A transaction ended: its slot pins nothing and waits for the next one.
    pub(crate) fn give_back(&self, slot: ClaimedSlot) {
        slot.end();
        self.idle
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(slot);
    }

    /// The published meta and its generation.
    fn read_meta(&self, engine: &Engine) -> Result<(Meta, u64)> {
        published_meta(&self.table, engine.page_size)
    }

    /// Starts a read transaction beside the writer: the newest published meta, registered in
    /// a slot before the writer can free what it reaches, and a mapping that covers it.
    pub(crate) fn begin(&self, engine: &Engine) -> Result<(Snapshot, ClaimedSlot)> {
        let slot = self.take_slot()?;
        match self.register(engine, &slot) {
            Ok(meta) => Ok((self.snapshot_for(engine, meta)?, slot)),
            Err(error) => {
                self.give_back(slot);
                Err(error)
            }
        }
    }

    /// LMDB's pattern: read the meta, publish its txid and length in the slot, then check the
    /// writer published nothing newer meanwhile; if it did, it may have freed (for its next
    /// transaction) pages this meta reaches before it could see the slot, so start again.
    fn register(&self, engine: &Engine, slot: &ClaimedSlot) -> Result<Meta> {
        for _ in 0..BEGIN_TRIES_MAX {
            let (meta, generation) = self.read_meta(engine)?;
            // The race's window: a test pauses here while the writer commits.
            failpoint!("processes::before-slot");
            let len = meta.pgid.saturating_mul(engine.page_size as u64);
            slot.begin(meta.txid, len);
            if self.table.generation() == generation {
                return Ok(meta);
            }
        }
        Err(Error::Invalid {
            path: Some(self.table.path().to_path_buf()),
            reason: "the writer published a newer meta at every one of 10,000 tries".into(),
        })
    }

    /// The snapshot of `meta`: the handle's mapping, or a larger one when the file grew past
    /// it (kept for the transactions after).
    fn snapshot_for(&self, engine: &Engine, meta: Meta) -> Result<Snapshot> {
        let needed = meta.pgid.saturating_mul(engine.page_size as u64);
        {
            // The common case, the meta the handle's last transaction read: no write lock.
            let current = engine
                .current
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if current.meta == meta && current.map.len() as u64 >= needed {
                return Ok(current.clone());
            }
        }
        let mut current = engine
            .current
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        if (current.map.len() as u64) < needed {
            let len = map_size(needed).ok_or_else(|| Error::Invalid {
                path: engine.path().map(|p| p.to_path_buf()),
                reason: "the mapping this file needs does not fit in the address space".into(),
            })?;
            let map = engine
                .storage
                .map(len)
                .map_err(|e| Error::io(engine.path(), e))?;
            let _ = map.advise_random();
            current.map = Arc::new(map);
        }
        current.meta = meta;
        Ok(current.clone())
    }
}
