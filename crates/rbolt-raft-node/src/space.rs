//! Space: the backend quota (`--quota-backend-bytes`), the space reserve a full disk gives
//! back (`--space-reserve-bytes`), and the cluster-wide NOSPACE alarm.
//!
//! A full disk must not stop the cluster: replicas have equal disks, so the entry that fills
//! one fills all of them, and a node that exits on it would crash-loop on the same entry at
//! every restart. So:
//!
//! - **Nothing fails on a full disk.** A store write that fails for want of space changed
//!   nothing (rbolt grows a file, and writes its pages, before its commit point); the stores
//!   ask [`Space::no_space`] ([`rbolt_raft::Observer::no_space`]) and run it again. The first
//!   time, the node deletes its space reserve ([`RESERVE_FILE`], a file of zeros written while
//!   there was room, CockroachDB's "ballast"), which gives the write room at once; after that
//!   it waits, backing off to [`RETRY_WAIT_MAX`], until there is room. Nothing committed is
//!   lost: a waiting append or apply completes when space returns. Reads of the applied state
//!   go on meanwhile.
//! - **The alarm stops what fills the disk.** A member whose store is over its quota, or
//!   that ran out of space, or whose disk has less free than twice its reserve (so the reserve
//!   cannot be put back), raises its NOSPACE alarm through the log ([`crate::kv::Request::RaiseAlarm`],
//!   [`crate::alarm::watch`] checks every [`CHECK_EVERY`]). From that entry on every replica refuses puts
//!   (`507`, naming the alarm) and serves reads and deletes, which the reserve's room lets
//!   through even on a disk that was full.
//! - **An operator clears it.** After freeing space (deleting keys, `POST
//!   /maintenance/vacuum` to give the room back to the filesystem, or a larger disk), `POST
//!   /maintenance/alarms/disarm` proposes [`crate::kv::Request::DisarmAlarms`]; a member still short of
//!   space raises its alarm again within a check. The reserve is written again once the disk
//!   has room for it twice over.
//!
//! The quota is on the bytes the state file uses (its pages in use), as etcd's is on its
//! backend; the reserve is on the disk, whatever else fills it.

use crate::kv::KvStateMachine;
use crate::observe::Metrics;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The space reserve, in the data directory.
pub const RESERVE_FILE: &str = "space-reserve";
/// The size of the space reserve unless `--space-reserve-bytes` says otherwise: room for a
/// growth of the state file (rbolt grows a file by at most 16 MiB at a time) and the deletes
/// and alarms that follow a full disk, several times over.
pub const SPACE_RESERVE_BYTES_DEFAULT: u64 = 64 << 20;
/// How often a node checks its quota and its disk.
pub const CHECK_EVERY: Duration = Duration::from_millis(500);
/// The longest a store write waits between attempts on a full disk.
pub const RETRY_WAIT_MAX: Duration = Duration::from_secs(2);
/// Free bytes that count as room on a disk again, for a node without a reserve.
pub const ROOM_BYTES_MIN: u64 = 64 << 20;
/// How long raising an alarm may take (a leader whose own disk is full may not answer).
pub const RAISE_TIMEOUT: Duration = Duration::from_secs(5);
/// The reserve is written in chunks of this many bytes.
const RESERVE_CHUNK_BYTES: usize = 1 << 20;
/// How often a node still short of space logs that it is.
const WARN_EVERY: Duration = crate::observe::WARN_EVERY;

/// A node's view of its space (see the module's docs).
pub struct Space {
    dir: PathBuf,
    /// `--quota-backend-bytes` (0: none).
    pub quota_bytes: u64,
    /// `--space-reserve-bytes` (0: none).
    pub reserve_bytes: u64,
    metrics: Arc<Metrics>,
    /// Why the last store write failed for want of space, while no write has succeeded since.
    full: Mutex<Option<String>>,
    /// Set when the node stops: a write waiting for space then fails instead.
    stopping: AtomicBool,
    /// When a wait for space was last logged.
    warned: Mutex<Option<Instant>>,
    /// What the last check ([`crate::alarm::watch`]) found: why this member is short of space.
    last_shortage: Mutex<Option<String>>,
    /// Woken when a store write finds no space, so that [`crate::alarm::watch`] checks at once.
    pub(crate) short: tokio::sync::Notify,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Gives `file` `len` bytes of disk: `fallocate` where the filesystem has it (no data
/// written, so a 64 MiB reserve costs nothing at start), else zeros written.
fn allocate(mut file: &std::fs::File, len: u64) -> std::io::Result<()> {
    #[cfg(target_os = "linux")]
    match rustix::fs::fallocate(file, rustix::fs::FallocateFlags::empty(), 0, len) {
        Ok(()) => return Ok(()),
        Err(e) if e == rustix::io::Errno::OPNOTSUPP => {}
        Err(e) => return Err(e.into()),
    }
    let zeros = vec![0u8; RESERVE_CHUNK_BYTES];
    let mut left = len;
    while left > 0 {
        let n = left.min(RESERVE_CHUNK_BYTES as u64) as usize;
        file.write_all(&zeros[..n])?;
        left -= n as u64;
    }
    Ok(())
}

/// Bytes free to this process on the filesystem of `dir`.
pub fn free_bytes(dir: &Path) -> std::io::Result<u64> {
    let stat = rustix::fs::statvfs(dir)?;
    Ok(stat.f_bavail.saturating_mul(stat.f_frsize))
}

/// The bytes the pages in use of `state`'s state file take (not the file's length: free
/// pages inside it are reused before it grows).
pub fn in_use_bytes(state: &KvStateMachine) -> rbolt_raft::Result<u64> {
    let db = state.db();
    let high_water = db.begin_read()?.meta().pgid;
    let stats = db.stats();
    let free = (stats.free_page_n + stats.pending_page_n) as u64;
    Ok(high_water.saturating_sub(free) * db.page_size() as u64)
}

impl Space {
    /// The space of the node whose data directory is `dir`.
    pub fn new(dir: &Path, quota_bytes: u64, reserve_bytes: u64, metrics: Arc<Metrics>) -> Space {
        metrics.quota_backend_bytes.set(quota_bytes as i64);
        Space {
            dir: dir.to_path_buf(),
            quota_bytes,
            reserve_bytes,
            metrics,
            full: Mutex::new(None),
            stopping: AtomicBool::new(false),
            warned: Mutex::new(None),
            last_shortage: Mutex::new(None),
            short: tokio::sync::Notify::new(),
        }
    }

    fn reserve_path(&self) -> PathBuf {
        self.dir.join(RESERVE_FILE)
    }

    /// Whether the reserve is in place.
    pub fn reserve_present(&self) -> bool {
        self.reserve_bytes == 0 || self.reserve_path().exists()
    }

    /// Writes the reserve if it is missing and the disk has room for it twice over (so that
    /// writing it does not itself fill the disk); returns whether it is in place.
    pub fn ensure_reserve(&self) -> bool {
        if self.reserve_present() {
            return true;
        }
        let free = free_bytes(&self.dir).unwrap_or(0);
        if free < self.reserve_bytes.saturating_mul(2) {
            return false;
        }
        let tmp = self
            .dir
            .join(format!("{RESERVE_FILE}{}", rbolt_raft::TMP_SUFFIX));
        let written = (|| {
            // Not synced: a reserve a crash loses is written again at the next start, and a
            // sync would stall the disk the stores are syncing on.
            let file = std::fs::File::create(&tmp)?;
            allocate(&file, self.reserve_bytes)?;
            std::fs::rename(&tmp, self.reserve_path())
        })();
        match written {
            Ok(()) => {
                tracing::info!(
                    bytes = self.reserve_bytes,
                    "space reserve written: a full disk gives it back to the stores"
                );
                true
            }
            Err(e) => {
                let _ = std::fs::remove_file(&tmp);
                tracing::warn!(error = %e, "writing the space reserve");
                false
            }
        }
    }

    /// Deletes the reserve; returns whether there was one.
    fn release_reserve(&self) -> bool {
        if self.reserve_bytes == 0 {
            return false;
        }
        match std::fs::remove_file(self.reserve_path()) {
            Ok(()) => {
                tracing::error!(
                    bytes = self.reserve_bytes,
                    "the disk is full: the space reserve is given back to the stores, and this \
                     node raises the NOSPACE alarm (puts are refused cluster-wide until an \
                     operator frees space and disarms it)"
                );
                true
            }
            Err(_) => false,
        }
    }

    /// A store write to `file` failed for want of space (attempt `attempt` in a row): wakes
    /// [`watch`] to raise the alarm, gives back the reserve the first time, else waits; answers
    /// whether to try again (always, unless the node is stopping).
    ///
    /// A write of a temporary file (a snapshot being built or installed: a copy of the whole
    /// state) waits until the disk has room again ([`Space::has_room`]) before it tries again:
    /// each attempt would fill what the log and the applies need, then give it back.
    pub fn no_space(&self, file: &Path, error: &rbolt_raft::Error, attempt: u32) -> bool {
        let reason = format!("a write to {} found no space: {error}", file.display());
        self.metrics.storage_full.set(1);
        self.metrics.no_space_errors.inc();
        *lock(&self.full) = Some(reason.clone());
        self.short.notify_one();
        if self.stopping.load(Ordering::Relaxed) {
            return false;
        }
        if self.release_reserve() {
            return true;
        }
        {
            let mut warned = lock(&self.warned);
            if warned.is_none_or(|at| at.elapsed() >= WARN_EVERY) {
                tracing::error!(%reason, attempt, "waiting for space: nothing committed is lost; free space on this node's disk");
                *warned = Some(Instant::now());
            }
        }
        let copy = file
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(rbolt_raft::TMP_SUFFIX));
        if copy {
            while !self.has_room() {
                if self.stopping.load(Ordering::Relaxed) {
                    return false;
                }
                std::thread::sleep(RETRY_WAIT_MAX);
            }
            return !self.stopping.load(Ordering::Relaxed);
        }
        let wait = Duration::from_millis(50)
            .saturating_mul(1 << attempt.min(6))
            .min(RETRY_WAIT_MAX);
        std::thread::sleep(wait);
        !self.stopping.load(Ordering::Relaxed)
    }

    /// Whether the disk has room again: twice the reserve free (or [`ROOM_BYTES_MIN`]
    /// without a reserve).
    pub fn has_room(&self) -> bool {
        let needed = if self.reserve_bytes == 0 {
            ROOM_BYTES_MIN
        } else {
            self.reserve_bytes.saturating_mul(2)
        };
        free_bytes(&self.dir).is_ok_and(|free| free >= needed)
    }

    /// A store write succeeded.
    pub fn wrote(&self) {
        let mut full = lock(&self.full);
        if full.is_some() {
            *full = None;
            self.metrics.storage_full.set(0);
            tracing::info!("a store write succeeded again after the disk was full");
        }
    }

    /// The node is stopping: writes waiting for space fail.
    pub fn stop(&self) {
        self.stopping.store(true, Ordering::Relaxed);
    }

    /// Why this member is short of space now, if it is: its store over its quota, a store
    /// write that found no space, or too little free on its disk to put its reserve back.
    pub fn shortage(&self, state: &KvStateMachine) -> Option<String> {
        if let Some(full) = lock(&self.full).clone() {
            return Some(full);
        }
        if self.quota_bytes > 0 {
            match in_use_bytes(state) {
                Ok(used) if used > self.quota_bytes => {
                    return Some(format!(
                        "the store uses {used} bytes, over its quota of {} bytes \
                         (--quota-backend-bytes)",
                        self.quota_bytes
                    ));
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "reading the store's size"),
            }
        }
        if !self.reserve_present() {
            let free = free_bytes(&self.dir).unwrap_or(0);
            if free < self.reserve_bytes.saturating_mul(2) {
                return Some(format!(
                    "{free} bytes free on the disk of {}, less than twice the space reserve of \
                     {} bytes (--space-reserve-bytes), which is not in place",
                    self.dir.display(),
                    self.reserve_bytes
                ));
            }
        }
        None
    }

    /// One check of this node's space ([`crate::alarm::watch`] runs it every
    /// [`CHECK_EVERY`]): puts the reserve back when there is room for it, updates the gauges,
    /// and finds and keeps what this node is short of (see [`Space::shortage`]).
    pub fn check(&self, state: &KvStateMachine) -> Option<String> {
        self.ensure_reserve();
        self.update_metrics(state);
        let shortage = self.shortage(state);
        lock(&self.last_shortage).clone_from(&shortage);
        shortage
    }

    /// What the last check found (see [`Space::shortage`]), without touching the disk.
    pub fn last_shortage(&self) -> Option<String> {
        lock(&self.last_shortage).clone()
    }

    /// Sets the gauges read at a scrape.
    pub fn update_metrics(&self, state: &KvStateMachine) {
        if let Ok(used) = in_use_bytes(state) {
            self.metrics.store_in_use_bytes.set(used as i64);
        }
        if let Ok(free) = free_bytes(&self.dir) {
            self.metrics.disk_free_bytes.set(free as i64);
        }
    }
}

/// Feeds the stores' reports into the metrics and the log, and lets a full disk wait for
/// space instead of stopping the node (see the module's docs).
pub struct StoreObserver {
    /// The node's metrics.
    pub metrics: Arc<Metrics>,
    /// The node's space.
    pub space: Arc<Space>,
}

impl rbolt_raft::Observer for StoreObserver {
    fn log_written(&self, _write: rbolt_raft::LogWrite, _entries: u64, elapsed: Duration) {
        self.metrics.fsync_seconds.observe(elapsed.as_secs_f64());
        self.space.wrote();
    }

    fn applied(&self, _entries: u64, elapsed: Duration) {
        self.metrics.apply_seconds.observe(elapsed.as_secs_f64());
        self.space.wrote();
    }

    fn no_space(&self, file: &Path, error: &rbolt_raft::Error, attempt: u32) -> bool {
        self.space.no_space(file, error, attempt)
    }

    fn entry_refused(&self, index: u64, error: &rbolt_raft::Error) {
        self.metrics.entries_refused.inc();
        tracing::error!(index, %error, "a committed entry could not be applied; it is answered as refused on every node and changes nothing");
    }

    fn snapshot_built(&self, last: Option<u64>, bytes: u64, elapsed: Duration) {
        self.metrics
            .snapshots
            .get_or_create(&vec![("kind", "built")])
            .inc();
        tracing::info!(last_index = ?last, bytes, elapsed_ms = elapsed.as_millis() as u64, "snapshot built");
    }

    fn snapshot_installed(&self, last: Option<u64>, elapsed: Duration) {
        self.metrics
            .snapshots
            .get_or_create(&vec![("kind", "installed")])
            .inc();
        tracing::info!(last_index = ?last, elapsed_ms = elapsed.as_millis() as u64, "snapshot installed from the leader");
    }
}
