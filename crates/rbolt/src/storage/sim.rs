//! [`SimFile`]: a test tool. An in-memory file that the database uses like a real one, and that
//! models durability so tests can produce the images a power loss could leave behind.

use std::fmt;
use std::io;
use std::ops::Range;
use std::os::fd::{AsFd, OwnedFd};
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use memmap2::MmapOptions;
use rustix::fs::MemfdFlags;
use rustix::io::Errno;

use super::{Claim, ClaimFlag, Mapping, Storage, fdio};
use rbolt_page::BootId;

/// The unit a simulated disk writes atomically: a crash keeps or loses each 512-byte sector of
/// an unsynced write as a whole. Sectors are aligned to file offsets, not to the write.
pub const SECTOR_SIZE: u64 = 512;

/// A simulated database file, for tests. **Not for production use.**
///
/// It behaves like a real file for the database: contents live in a `memfd`, so
/// [`map`](Storage::map) is a real shared `mmap` and bytes written after mapping show in it. In
/// addition it models durability, fault injection and crashes:
///
/// - **Durability.** It records every write and length change since the last
///   [`sync_data`](Storage::sync_data) or [`sync_all`](Storage::sync_all); a sync makes them
///   durable. The *durable image* is the file as of the last sync; the *live image* is what
///   reads and the mapping see.
/// - **Crash images.** [`crash_image`](SimFile::crash_image) returns a file a power loss could
///   leave: the durable image plus some of the pending operations, each kept, dropped, torn at
///   sector granularity or partly overwritten with garbage, as a [`CrashProfile`] and a seed
///   choose. [`SimFile::from_image`] reopens such an image (and can crash again during
///   recovery).
/// - **Faults and crash points.** Every storage call is an operation numbered from 0
///   ([`op_count`](SimFile::op_count)); a [`FaultPlan`] makes chosen operations fail, write
///   short, or crash the file: the crashing operation and every later one fail, and crash
///   images then reflect exactly the operations before it.
///
/// `SimFile` is a shared handle: clones see the same file, so a test keeps one while the
/// database owns another.
///
/// ```
/// use rbolt::storage::{CrashProfile, SimFile, Storage};
///
/// let sim = SimFile::new().unwrap();
/// sim.write_all_at(b"durable", 0).unwrap();
/// sim.sync_data().unwrap();
/// sim.write_all_at(b"pending", 0).unwrap();
/// assert_eq!(sim.crash_image(CrashProfile::DropAll, 0), b"durable");
/// assert_eq!(sim.crash_image(CrashProfile::KeepAll, 0), b"pending");
/// ```
#[derive(Clone)]
pub struct SimFile {
    shared: Arc<Shared>,
}

struct Shared {
    /// The live contents. Only this module holds the descriptor (it is close-on-exec and never
    /// handed out), so nothing but `SimFile` ever changes or shrinks the file.
    memfd: OwnedFd,
    /// Held for the whole of each operation, so the live contents, the pending list and the
    /// counters always agree.
    state: Mutex<State>,
    /// Which database has the file open: every clone shares it (see [`Storage::claim`]).
    claim: ClaimFlag,
    /// The simulated machine's boot: a new one for every file made from an image (a power
    /// loss reboots), the same one after a process crash ([`SimFile::after_process_crash`]).
    boot_id: BootId,
}

struct State {
    /// The file as of the last sync; its length is the durable length.
    durable: Vec<u8>,
    /// Writes and length changes since the last sync, oldest first.
    pending: Vec<Pending>,
    /// The kind of every operation so far; its length is the operation count.
    log: Vec<OpKind>,
    counts: OpCounts,
    plan: FaultPlan,
    /// The operation that crashed the file, if one did.
    crashed_at: Option<u64>,
}

#[derive(Clone)]
enum Pending {
    Write { offset: u64, bytes: Vec<u8> },
    Grow { len: u64 },
    Shrink { len: u64 },
}

/// The kinds of [`Storage`] calls a [`SimFile`] counts.
///
/// ```
/// use rbolt::storage::{OpKind, SimFile, Storage};
/// let sim = SimFile::new().unwrap();
/// sim.write_all_at(b"x", 0).unwrap();
/// sim.sync_data().unwrap();
/// sim.len().unwrap();
/// assert_eq!(sim.op_log(), [OpKind::Write, OpKind::SyncData, OpKind::Len]);
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum OpKind {
    /// [`Storage::len`].
    Len,
    /// [`Storage::read_exact_at`].
    Read,
    /// [`Storage::write_all_at`].
    Write,
    /// [`Storage::write_vectored_at`].
    WriteVectored,
    /// [`Storage::sync_data`].
    SyncData,
    /// [`Storage::sync_all`].
    SyncAll,
    /// [`Storage::grow`].
    Grow,
    /// [`Storage::map`].
    Map,
    /// [`Storage::shrink`].
    Shrink,
}

impl OpKind {
    fn is_write(self) -> bool {
        matches!(self, OpKind::Write | OpKind::WriteVectored)
    }
}

/// How many calls of each kind a [`SimFile`] has seen, failed ones included.
///
/// Take two snapshots and subtract with [`since`](OpCounts::since) to count what one step did,
/// e.g. that a durable commit makes exactly two `fdatasync`s.
///
/// ```
/// use rbolt::storage::SimFile;
/// use std::sync::Arc;
/// let sim = SimFile::new().unwrap();
/// let db = rbolt::Db::open_storage(Arc::new(sim.clone()), rbolt::Options::default())?;
/// db.update(|tx| tx.create_bucket("b")?.put("k", "v"))?; // grows the file: an fsync too
/// let before = sim.counts();
/// db.update(|tx| tx.bucket_mut("b")?.unwrap().put("k", "w"))?;
/// let commit = sim.counts().since(before);
/// assert_eq!(commit.sync_data, 2); // a durable commit: data, then the meta
/// assert_eq!(commit.sync_all, 0); // no growth this time
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct OpCounts {
    /// [`Storage::len`] calls.
    pub len: u64,
    /// [`Storage::read_exact_at`] calls.
    pub read: u64,
    /// [`Storage::write_all_at`] calls.
    pub write: u64,
    /// [`Storage::write_vectored_at`] calls.
    pub write_vectored: u64,
    /// [`Storage::sync_data`] calls.
    pub sync_data: u64,
    /// [`Storage::sync_all`] calls.
    pub sync_all: u64,
    /// [`Storage::grow`] calls.
    pub grow: u64,
    /// [`Storage::map`] calls.
    pub map: u64,
    /// [`Storage::shrink`] calls.
    pub shrink: u64,
}

impl OpCounts {
    /// The calls made since `earlier`, a snapshot of the same file.
    ///
    /// ```
    /// use rbolt::storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"a", 0).unwrap();
    /// let earlier = sim.counts();
    /// sim.write_all_at(b"b", 1).unwrap();
    /// sim.sync_data().unwrap();
    /// let step = sim.counts().since(earlier);
    /// assert_eq!((step.write, step.sync_data, step.total()), (1, 1, 2));
    /// ```
    pub fn since(&self, earlier: OpCounts) -> OpCounts {
        OpCounts {
            len: self.len - earlier.len,
            read: self.read - earlier.read,
            write: self.write - earlier.write,
            write_vectored: self.write_vectored - earlier.write_vectored,
            sync_data: self.sync_data - earlier.sync_data,
            sync_all: self.sync_all - earlier.sync_all,
            grow: self.grow - earlier.grow,
            map: self.map - earlier.map,
            shrink: self.shrink - earlier.shrink,
        }
    }

    /// Write calls of either kind.
    ///
    /// ```
    /// use rbolt::storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"a", 0).unwrap();
    /// sim.write_vectored_at(&[b"b", b"c"], 1).unwrap();
    /// assert_eq!(sim.counts().writes(), 2);
    /// ```
    pub fn writes(&self) -> u64 {
        self.write + self.write_vectored
    }

    /// Sync calls of either kind.
    ///
    /// ```
    /// use rbolt::storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.sync_data().unwrap();
    /// sim.sync_all().unwrap();
    /// assert_eq!(sim.counts().syncs(), 2);
    /// ```
    pub fn syncs(&self) -> u64 {
        self.sync_data + self.sync_all
    }

    /// All calls.
    ///
    /// ```
    /// use rbolt::storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"a", 0).unwrap();
    /// sim.len().unwrap();
    /// assert_eq!(sim.counts().total(), 2);
    /// assert_eq!(sim.counts().total(), sim.op_count());
    /// ```
    pub fn total(&self) -> u64 {
        self.len + self.read + self.writes() + self.syncs() + self.grow + self.map + self.shrink
    }

    fn count(&mut self, kind: OpKind) {
        let counter = match kind {
            OpKind::Len => &mut self.len,
            OpKind::Read => &mut self.read,
            OpKind::Write => &mut self.write,
            OpKind::WriteVectored => &mut self.write_vectored,
            OpKind::SyncData => &mut self.sync_data,
            OpKind::SyncAll => &mut self.sync_all,
            OpKind::Grow => &mut self.grow,
            OpKind::Map => &mut self.map,
            OpKind::Shrink => &mut self.shrink,
        };
        *counter += 1;
    }
}

/// The error an injected fault returns; it converts into the [`io::Error`] the real system call
/// would give.
///
/// ```
/// use rbolt::storage::FaultError;
/// let io = std::io::Error::from(FaultError::Io);
/// assert_eq!(io.raw_os_error(), Some(5)); // EIO
/// let full = std::io::Error::from(FaultError::NoSpace);
/// assert_eq!(full.raw_os_error(), Some(28)); // ENOSPC
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FaultError {
    /// `ENOSPC`: the device is full.
    NoSpace,
    /// `EIO`: the device failed.
    Io,
}

impl From<FaultError> for io::Error {
    fn from(error: FaultError) -> io::Error {
        let errno = match error {
            FaultError::NoSpace => Errno::NOSPC,
            FaultError::Io => Errno::IO,
        };
        io::Error::from(errno)
    }
}

/// Which operations of a [`SimFile`] fail, and how.
///
/// Operations are numbered from 0 in call order across all kinds (see
/// [`SimFile::op_count`]): with `n = sim.op_count()`, operation `n` is the next call. When
/// several rules match one operation, a crash wins, then the rule added first.
///
/// ```
/// use rbolt::storage::{FaultError, FaultPlan, SimFile, Storage};
///
/// let sim = SimFile::new().unwrap();
/// sim.set_fault_plan(FaultPlan::new().fail_at(sim.op_count() + 1, FaultError::NoSpace));
/// sim.write_all_at(b"a", 0).unwrap();
/// let error = sim.write_all_at(b"b", 1).unwrap_err();
/// assert_eq!(error.raw_os_error(), Some(28)); // ENOSPC
/// sim.write_all_at(b"c", 2).unwrap();
/// ```
#[derive(Clone, Debug, Default)]
pub struct FaultPlan {
    rules: Vec<Rule>,
}

#[derive(Clone, Copy, Debug)]
struct Rule {
    /// The operations the rule applies to.
    ops: RuleOps,
    action: Action,
}

#[derive(Clone, Copy, Debug)]
enum RuleOps {
    At(u64),
    From(u64),
    Kind(OpKind),
}

impl RuleOps {
    fn contains(self, op: u64, kind: OpKind) -> bool {
        match self {
            RuleOps::At(at) => op == at,
            RuleOps::From(from) => op >= from,
            RuleOps::Kind(of) => kind == of,
        }
    }
}

#[derive(Clone, Copy, Debug)]
enum Action {
    Fail(FaultError),
    ShortWrite { len: usize, error: FaultError },
    Crash,
}

impl FaultPlan {
    /// A plan with no faults.
    ///
    /// ```
    /// use rbolt::storage::{FaultPlan, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.set_fault_plan(FaultPlan::new()); // no faults: every call goes through
    /// sim.write_all_at(b"a", 0).unwrap();
    /// assert_eq!(sim.len().unwrap(), 1);
    /// ```
    pub fn new() -> FaultPlan {
        FaultPlan::default()
    }

    /// Operation `op` fails with `error` without doing anything.
    ///
    /// ```
    /// use rbolt::storage::{FaultError, FaultPlan, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.set_fault_plan(FaultPlan::new().fail_at(sim.op_count(), FaultError::Io));
    /// assert!(sim.write_all_at(b"lost", 0).is_err()); // the failed write does nothing
    /// sim.write_all_at(b"kept", 4).unwrap();
    /// assert_eq!(sim.live_image().unwrap(), b"\0\0\0\0kept");
    /// ```
    pub fn fail_at(mut self, op: u64, error: FaultError) -> FaultPlan {
        self.rules.push(Rule {
            ops: RuleOps::At(op),
            action: Action::Fail(error),
        });
        self
    }

    /// Operation `op` and every later one fail with `error` without doing anything.
    ///
    /// ```
    /// use rbolt::storage::{FaultError, FaultPlan, SimFile};
    /// use std::sync::Arc;
    /// let sim = SimFile::new().unwrap();
    /// let db = rbolt::Db::open_storage(Arc::new(sim.clone()), rbolt::Options::default())?;
    /// sim.set_fault_plan(FaultPlan::new().fail_from(sim.op_count(), FaultError::NoSpace));
    /// assert!(db.update(|tx| tx.create_bucket("b").map(drop)).is_err());
    /// // The failed commit is not visible.
    /// assert!(db.begin_read()?.bucket("b")?.is_none());
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn fail_from(mut self, op: u64, error: FaultError) -> FaultPlan {
        self.rules.push(Rule {
            ops: RuleOps::From(op),
            action: Action::Fail(error),
        });
        self
    }

    /// Every operation of `kind` fails with `error` without doing anything: to fail, say, only
    /// the fsync that follows growth (the only [`OpKind::SyncAll`] a database makes).
    ///
    /// ```
    /// use rbolt::storage::{FaultError, FaultPlan, OpKind, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.set_fault_plan(FaultPlan::new().fail_kind(OpKind::SyncAll, FaultError::Io));
    /// sim.write_all_at(b"a", 0).unwrap();
    /// sim.sync_data().unwrap(); // another kind: fine
    /// assert!(sim.sync_all().is_err());
    /// ```
    pub fn fail_kind(mut self, kind: OpKind, error: FaultError) -> FaultPlan {
        self.rules.push(Rule {
            ops: RuleOps::Kind(kind),
            action: Action::Fail(error),
        });
        self
    }

    /// If operation `op` is a write, it writes only its first `len` bytes (at most all of
    /// them), which become pending like any write, and then fails with `error`. Any other
    /// operation fails as with [`fail_at`](FaultPlan::fail_at).
    ///
    /// ```
    /// use rbolt::storage::{FaultError, FaultPlan, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.set_fault_plan(FaultPlan::new().short_write_at(sim.op_count(), 3, FaultError::NoSpace));
    /// assert!(sim.write_all_at(b"abcdef", 0).is_err());
    /// assert_eq!(sim.live_image().unwrap(), b"abc"); // the first 3 bytes were written
    /// assert!(sim.has_pending());
    /// ```
    pub fn short_write_at(mut self, op: u64, len: usize, error: FaultError) -> FaultPlan {
        self.rules.push(Rule {
            ops: RuleOps::At(op),
            action: Action::ShortWrite { len, error },
        });
        self
    }

    /// The file crashes at operation `op`: it and every later operation fail without doing
    /// anything, and [`SimFile::crash_image`] reflects exactly the operations before it.
    ///
    /// ```
    /// use rbolt::storage::{CrashProfile, FaultPlan, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"one", 0).unwrap();
    /// sim.set_fault_plan(FaultPlan::new().crash_at(sim.op_count() + 1));
    /// sim.write_all_at(b"two", 3).unwrap();
    /// assert!(sim.write_all_at(b"three", 6).is_err()); // the crash
    /// assert!(sim.sync_data().is_err()); // and everything after it
    /// assert_eq!(sim.crashed_at(), Some(2));
    /// assert_eq!(sim.crash_image(CrashProfile::KeepAll, 0), b"onetwo");
    /// ```
    pub fn crash_at(mut self, op: u64) -> FaultPlan {
        self.rules.push(Rule {
            ops: RuleOps::At(op),
            action: Action::Crash,
        });
        self
    }

    fn action_for(&self, op: u64, kind: OpKind) -> Option<Action> {
        let mut matching = self.rules.iter().filter(|rule| rule.ops.contains(op, kind));
        if matching
            .clone()
            .any(|rule| matches!(rule.action, Action::Crash))
        {
            return Some(Action::Crash);
        }
        matching.next().map(|rule| rule.action)
    }
}

/// Which unsynced operations survive in a [`SimFile::crash_image`].
///
/// Pending operations are decided one by one, oldest first, with a seeded RNG, and the
/// survivors are applied to the durable image in their original order. A write that survives
/// at all (even with no sector kept) extends the image to its end, as if the file's size had
/// reached the disk before its data; the sectors it did not keep read as the durable image had
/// them, or as zeros past the durable end. A surviving growth extends the image to its length;
/// a dropped one leaves the file shorter than later metadata may expect.
///
/// ```
/// use rbolt::storage::{CrashProfile, SimFile, Storage};
/// let sim = SimFile::new().unwrap();
/// sim.write_all_at(&[1u8; 1024], 0).unwrap();
/// sim.sync_data().unwrap();
/// sim.write_all_at(&[2u8; 1024], 0).unwrap(); // two sectors, unsynced
/// for profile in CrashProfile::ALL {
///     for seed in 0..8 {
///         let image = sim.crash_image(profile, seed);
///         assert_eq!(image.len(), 1024);
///         if profile != CrashProfile::Garbage {
///             // Each sector is whole: old or new, never a mix within it.
///             for sector in image.chunks(512) {
///                 assert!(sector.iter().all(|&b| b == 1) || sector.iter().all(|&b| b == 2));
///             }
///         }
///     }
/// }
/// assert_eq!(sim.crash_image(CrashProfile::Torn, 3), sim.crash_image(CrashProfile::Torn, 3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CrashProfile {
    /// Every pending operation survives: the image is the live file, as if it had been synced.
    KeepAll,
    /// No pending operation survives: the image is the durable file.
    DropAll,
    /// Each pending operation survives whole or is dropped whole, with even odds.
    Random,
    /// Each pending write is kept, dropped, torn to a prefix of its sectors, or torn to a
    /// random subset of its sectors, with even odds; each length change is kept or dropped.
    Torn,
    /// As [`Torn`](CrashProfile::Torn), and in addition half of the writes have some of their
    /// sectors filled with random bytes, as a device losing power mid-sector can leave them.
    Garbage,
}

impl CrashProfile {
    /// Whether a crash image keeps an unsynced change of the file's length (a growth or a
    /// truncation): always, never, or by a coin.
    fn keeps_length_change(self, rng: &mut SplitMix64) -> bool {
        match self {
            CrashProfile::KeepAll => true,
            CrashProfile::DropAll => false,
            CrashProfile::Random | CrashProfile::Torn | CrashProfile::Garbage => rng.coin(),
        }
    }

    /// Every profile, for tests that loop over all of them.
    pub const ALL: [CrashProfile; 5] = [
        CrashProfile::KeepAll,
        CrashProfile::DropAll,
        CrashProfile::Random,
        CrashProfile::Torn,
        CrashProfile::Garbage,
    ];
}

/// What a crash does to one pending write.
enum WriteFate {
    Keep,
    Drop,
    /// Some sectors are kept, some dropped (`false`), some replaced by garbage (`None`).
    Sectors(Vec<Option<bool>>),
}

impl SimFile {
    /// An empty simulated file.
    ///
    /// ```
    /// use rbolt::storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// assert_eq!(sim.len().unwrap(), 0);
    /// assert!(!sim.has_pending());
    /// ```
    pub fn new() -> io::Result<SimFile> {
        SimFile::from_image(Vec::new())
    }

    /// A simulated file whose durable and live contents are `image`, e.g. one returned by
    /// [`crash_image`](SimFile::crash_image), to reopen the database after a crash.
    ///
    /// ```
    /// use rbolt::storage::{CrashProfile, SimFile};
    /// use std::sync::Arc;
    /// let sim = SimFile::new().unwrap();
    /// let db = rbolt::Db::open_storage(Arc::new(sim.clone()), rbolt::Options::default())?;
    /// db.update(|tx| tx.create_bucket("b")?.put("k", "v"))?;
    /// // Power loss right now: every commit so far was synced, so every image keeps it.
    /// let image = sim.crash_image(CrashProfile::Garbage, 7);
    /// drop(db);
    /// let reopened = SimFile::from_image(image).unwrap();
    /// let db = rbolt::Db::open_storage(Arc::new(reopened), rbolt::Options::default())?;
    /// assert_eq!(db.begin_read()?.bucket("b")?.unwrap().get("k")?, Some(&b"v"[..]));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn from_image(image: impl Into<Vec<u8>>) -> io::Result<SimFile> {
        let image = image.into();
        SimFile::with_contents(&image, image.clone(), Vec::new(), new_boot_id())
    }

    /// The file as the next process finds it after this one was killed (`SIGKILL`, a panic
    /// that aborts): the page cache survives a process, so every write is there, unsynced
    /// ones too, and the machine has not rebooted (same [`Storage::boot_id`]); what a later
    /// power loss could still lose stays pending. The database that had it open may still be
    /// alive (a test keeps it from closing cleanly by opening this copy instead); the copy has
    /// a claim, counters and fault plan of its own.
    ///
    /// ```
    /// use rbolt::storage::{CrashProfile, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"synced", 0).unwrap();
    /// sim.sync_data().unwrap();
    /// sim.write_all_at(b"SYNCED", 0).unwrap();
    /// let next = sim.after_process_crash().unwrap();
    /// assert_eq!(next.live_image().unwrap(), b"SYNCED");
    /// assert_eq!(next.boot_id(), sim.boot_id());
    /// assert_eq!(next.crash_image(CrashProfile::DropAll, 0), b"synced"); // still unsynced
    /// ```
    pub fn after_process_crash(&self) -> io::Result<SimFile> {
        let live = self.live_image()?;
        let state = self.state();
        let pending = state.pending.clone();
        let durable = state.durable.clone();
        drop(state);
        SimFile::with_contents(&live, durable, pending, self.shared.boot_id)
    }

    fn with_contents(
        live: &[u8],
        durable: Vec<u8>,
        pending: Vec<Pending>,
        boot_id: BootId,
    ) -> io::Result<SimFile> {
        let memfd = rustix::fs::memfd_create("rbolt-simfile", MemfdFlags::CLOEXEC)?;
        fdio::write_all_at(memfd.as_fd(), live, 0)?;
        let state = State {
            durable,
            pending,
            log: Vec::new(),
            counts: OpCounts::default(),
            plan: FaultPlan::new(),
            crashed_at: None,
        };
        Ok(SimFile {
            shared: Arc::new(Shared {
                memfd,
                state: Mutex::new(state),
                claim: ClaimFlag::default(),
                boot_id,
            }),
        })
    }

    /// The number of storage operations so far, failed ones included; the next operation has
    /// this number.
    ///
    /// ```
    /// use rbolt::storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// assert_eq!(sim.op_count(), 0);
    /// sim.len().unwrap();
    /// let _ = sim.read_exact_at(&mut [0u8; 1], 0); // fails (past the end), still counted
    /// assert_eq!(sim.op_count(), 2);
    /// ```
    pub fn op_count(&self) -> u64 {
        self.state().log.len() as u64
    }

    /// The kind of every operation so far, indexed by operation number: to find, say, the
    /// number of the last sync before some event, and crash there.
    ///
    /// ```
    /// use rbolt::storage::{FaultPlan, OpKind, SimFile};
    /// use std::sync::Arc;
    /// let sim = SimFile::new().unwrap();
    /// let db = rbolt::Db::open_storage(Arc::new(sim.clone()), rbolt::Options::default())?;
    /// db.update(|tx| tx.create_bucket("b").map(drop))?;
    /// // Crash at the last sync of that commit (the one after the meta write).
    /// let last_sync = sim.op_log().iter().rposition(|&k| k == OpKind::SyncData).unwrap() as u64;
    /// assert!(last_sync > 0);
    /// drop(db);
    /// let sim = SimFile::new().unwrap();
    /// sim.set_fault_plan(FaultPlan::new().crash_at(last_sync));
    /// let db = rbolt::Db::open_storage(Arc::new(sim.clone()), rbolt::Options::default())?;
    /// assert!(db.update(|tx| tx.create_bucket("b").map(drop)).is_err());
    /// assert_eq!(sim.crashed_at(), Some(last_sync));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn op_log(&self) -> Vec<OpKind> {
        self.state().log.clone()
    }

    /// Calls made so far, per kind.
    ///
    /// ```
    /// use rbolt::storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.grow(4096).unwrap();
    /// sim.map(4096).unwrap();
    /// let counts = sim.counts();
    /// assert_eq!((counts.grow, counts.map, counts.write), (1, 1, 0));
    /// ```
    pub fn counts(&self) -> OpCounts {
        self.state().counts
    }

    /// Replaces the fault plan. Operation numbers in it are absolute (compare with
    /// [`op_count`](SimFile::op_count)). A crash that already happened stays.
    ///
    /// ```
    /// use rbolt::storage::{FaultError, FaultPlan, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.set_fault_plan(FaultPlan::new().fail_from(0, FaultError::Io));
    /// assert!(sim.len().is_err());
    /// sim.set_fault_plan(FaultPlan::new()); // replaces the plan
    /// assert!(sim.len().is_ok());
    /// ```
    pub fn set_fault_plan(&self, plan: FaultPlan) {
        self.state().plan = plan;
    }

    /// Crashes the file now: every later operation fails, as with a
    /// [`FaultPlan::crash_at`] the next operation.
    ///
    /// ```
    /// use rbolt::storage::{CrashProfile, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"synced", 0).unwrap();
    /// sim.sync_data().unwrap();
    /// sim.write_all_at(b"pending", 6).unwrap();
    /// sim.crash();
    /// assert!(sim.sync_data().is_err()); // too late
    /// assert_eq!(sim.crash_image(CrashProfile::DropAll, 0), b"synced");
    /// ```
    pub fn crash(&self) {
        let mut state = self.state();
        let next = state.log.len() as u64;
        state.crashed_at.get_or_insert(next);
    }

    /// The operation at which the file crashed, if it did.
    ///
    /// ```
    /// use rbolt::storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// assert_eq!(sim.crashed_at(), None);
    /// sim.len().unwrap();
    /// sim.crash();
    /// assert_eq!(sim.crashed_at(), Some(1)); // the next operation would have been number 1
    /// ```
    pub fn crashed_at(&self) -> Option<u64> {
        self.state().crashed_at
    }

    /// The file as of the last sync (not an operation: never fails and is not counted).
    ///
    /// ```
    /// use rbolt::storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"a", 0).unwrap();
    /// assert_eq!(sim.durable_image(), b"");
    /// sim.sync_data().unwrap();
    /// assert_eq!(sim.durable_image(), b"a");
    /// ```
    pub fn durable_image(&self) -> Vec<u8> {
        self.state().durable.clone()
    }

    /// The file as reads and the mapping see it (not an operation: never fails and is not
    /// counted, even after a crash).
    ///
    /// ```
    /// use rbolt::storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"unsynced", 0).unwrap();
    /// assert_eq!(sim.live_image().unwrap(), b"unsynced");
    /// assert_eq!(sim.durable_image(), b"");
    /// ```
    pub fn live_image(&self) -> io::Result<Vec<u8>> {
        let _state = self.state();
        let fd = self.shared.memfd.as_fd();
        let mut image = vec![0; usize::try_from(fdio::len(fd)?).map_err(io::Error::other)?];
        fdio::read_exact_at(fd, &mut image, 0)?;
        Ok(image)
    }

    /// Whether there are writes or length changes that no sync has made durable.
    ///
    /// ```
    /// use rbolt::storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.grow(4096).unwrap(); // a length change is pending too
    /// assert!(sim.has_pending());
    /// sim.sync_all().unwrap();
    /// assert!(!sim.has_pending());
    /// ```
    pub fn has_pending(&self) -> bool {
        !self.state().pending.is_empty()
    }

    /// A file image a power loss now could leave behind: the durable image plus the pending
    /// operations that survive under `profile`, decided by a RNG seeded with `seed`.
    ///
    /// The same pending operations, profile and seed always give the same image. After a
    /// crash, the image reflects the operations before the crash only.
    ///
    /// ```
    /// use rbolt::storage::{CrashProfile, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"old!", 0).unwrap();
    /// sim.sync_data().unwrap();
    /// sim.write_all_at(b"new!", 0).unwrap();
    /// let seen: std::collections::HashSet<Vec<u8>> =
    ///     (0..32).map(|seed| sim.crash_image(CrashProfile::Random, seed)).collect();
    /// // Whole or dropped, with even odds: over 32 seeds both turn up, and nothing else.
    /// let expected: std::collections::HashSet<Vec<u8>> =
    ///     [b"old!".to_vec(), b"new!".to_vec()].into();
    /// assert_eq!(seen, expected);
    /// ```
    pub fn crash_image(&self, profile: CrashProfile, seed: u64) -> Vec<u8> {
        let state = self.state();
        let mut rng = SplitMix64::new(seed);
        let mut image = state.durable.clone();
        for op in &state.pending {
            match op {
                Pending::Grow { len } => {
                    let keep = profile.keeps_length_change(&mut rng);
                    if keep {
                        extend(&mut image, *len);
                    }
                }
                Pending::Shrink { len } => {
                    let keep = profile.keeps_length_change(&mut rng);
                    if keep {
                        image.truncate(*len as usize);
                    }
                }
                Pending::Write { offset, bytes } => {
                    let end = *offset + bytes.len() as u64;
                    let n_sectors = (end.div_ceil(SECTOR_SIZE) - offset / SECTOR_SIZE) as usize;
                    match write_fate(profile, n_sectors, &mut rng) {
                        WriteFate::Drop => {}
                        WriteFate::Keep => apply_write(&mut image, *offset, bytes),
                        WriteFate::Sectors(fates) => {
                            extend(&mut image, *offset + bytes.len() as u64);
                            debug_assert_eq!(fates.len(), n_sectors, "one fate per sector");
                            for (range, fate) in sectors(*offset, bytes.len()).zip(fates) {
                                let target = &mut image[range.start as usize..range.end as usize];
                                match fate {
                                    Some(true) => {
                                        let start = (range.start - offset) as usize;
                                        target.copy_from_slice(&bytes[start..start + target.len()]);
                                    }
                                    Some(false) => {}
                                    None => rng.fill(target),
                                }
                            }
                        }
                    }
                }
            }
        }
        image
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A test that panicked mid-operation leaves the state as consistent as the operation
        // got; other handles may still want to inspect it.
        self.shared
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Numbers and counts an operation of `kind` and decides its fault. `Ok(None)`: run it
    /// normally; `Ok(Some(..))`: a write that must stop after `len` bytes and then fail.
    fn begin(&self, state: &mut State, kind: OpKind) -> io::Result<Option<(usize, FaultError)>> {
        let op = state.log.len() as u64;
        state.log.push(kind);
        state.counts.count(kind);
        if let Some(crashed_at) = state.crashed_at {
            return Err(crashed(op, crashed_at));
        }
        match state.plan.action_for(op, kind) {
            None => Ok(None),
            Some(Action::Crash) => {
                state.crashed_at = Some(op);
                Err(crashed(op, op))
            }
            Some(Action::Fail(error)) => Err(error.into()),
            Some(Action::ShortWrite { len, error }) if kind.is_write() => Ok(Some((len, error))),
            Some(Action::ShortWrite { error, .. }) => Err(error.into()),
        }
    }

    /// Writes `bytes` at `offset` to the live file and records it as pending.
    fn write(&self, state: &mut State, bytes: &[u8], offset: u64) -> io::Result<()> {
        fdio::write_all_at(self.shared.memfd.as_fd(), bytes, offset)?;
        if !bytes.is_empty() {
            state.pending.push(Pending::Write {
                offset,
                bytes: bytes.to_vec(),
            });
        }
        Ok(())
    }

    fn sync(&self, kind: OpKind) -> io::Result<()> {
        let mut state = self.state();
        self.begin(&mut state, kind)?;
        let State {
            durable, pending, ..
        } = &mut *state;
        for op in pending.drain(..) {
            match op {
                Pending::Write { offset, bytes } => apply_write(durable, offset, &bytes),
                Pending::Grow { len } => extend(durable, len),
                Pending::Shrink { len } => durable.truncate(len as usize),
            }
        }
        debug_assert_eq!(
            Some(durable.len() as u64),
            fdio::len(self.shared.memfd.as_fd()).ok(),
            "after a sync the durable image must be the live file"
        );
        Ok(())
    }
}

impl Storage for SimFile {
    fn len(&self) -> io::Result<u64> {
        let mut state = self.state();
        self.begin(&mut state, OpKind::Len)?;
        fdio::len(self.shared.memfd.as_fd())
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut state = self.state();
        self.begin(&mut state, OpKind::Read)?;
        fdio::read_exact_at(self.shared.memfd.as_fd(), buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut state = self.state();
        match self.begin(&mut state, OpKind::Write)? {
            None => self.write(&mut state, buf, offset),
            Some((len, error)) => {
                self.write(&mut state, &buf[..len.min(buf.len())], offset)?;
                Err(error.into())
            }
        }
    }

    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let mut state = self.state();
        let short = self.begin(&mut state, OpKind::WriteVectored)?;
        // Recorded as one pending write: it is one call, and a crash tears it by sector anyway.
        let bytes = bufs.concat();
        match short {
            None => {
                // The live file takes the same pwritev path as FileStorage.
                fdio::write_vectored_at(self.shared.memfd.as_fd(), bufs, offset)?;
                if !bytes.is_empty() {
                    state.pending.push(Pending::Write { offset, bytes });
                }
                Ok(())
            }
            Some((len, error)) => {
                self.write(&mut state, &bytes[..len.min(bytes.len())], offset)?;
                Err(error.into())
            }
        }
    }

    fn sync_data(&self) -> io::Result<()> {
        self.sync(OpKind::SyncData)
    }

    fn sync_all(&self) -> io::Result<()> {
        self.sync(OpKind::SyncAll)
    }

    fn grow(&self, len: u64) -> io::Result<()> {
        let mut state = self.state();
        self.begin(&mut state, OpKind::Grow)?;
        let fd = self.shared.memfd.as_fd();
        if fdio::len(fd)? < len {
            fdio::retry_on_interrupt(|| rustix::fs::ftruncate(fd, len))?;
            state.pending.push(Pending::Grow { len });
        }
        Ok(())
    }

    fn shrink(&self, len: u64) -> io::Result<()> {
        let mut state = self.state();
        self.begin(&mut state, OpKind::Shrink)?;
        let fd = self.shared.memfd.as_fd();
        if fdio::len(fd)? > len {
            fdio::retry_on_interrupt(|| rustix::fs::ftruncate(fd, len))?;
            state.pending.push(Pending::Shrink { len });
        }
        Ok(())
    }

    fn map(&self, len: usize) -> io::Result<Mapping> {
        let mut state = self.state();
        self.begin(&mut state, OpKind::Map)?;
        // SAFETY: memmap2 requires that the mapped file is not truncated or changed in ways
        // that break the `&[u8]` it hands out while the mapping lives. The memfd is private to
        // this SimFile: it is created close-on-exec, never handed out, and only this module
        // changes it, by writes on behalf of the database, by `grow`, which only extends it,
        // and by `shrink`, which the database calls only past the high-water mark of every
        // snapshot a live transaction reads (as with FileStorage); a crash or `from_image`
        // leaves it alone (a new image gets a new memfd). So no byte a transaction reads
        // leaves the file while the mapping lives. As with
        // FileStorage, `len` may reach past the end of the file, and the database reads only
        // below its high-water mark, within the file, so it never touches a page past the end
        // (SIGBUS); and it never rewrites a page a live reader can see.
        let mmap = unsafe { MmapOptions::new().len(len).map(&self.shared.memfd)? };
        Ok(Mapping::new(mmap))
    }

    fn path(&self) -> Option<&Path> {
        None
    }

    fn claim(&self) -> io::Result<Claim> {
        self.shared.claim.claim()
    }

    fn boot_id(&self) -> Option<BootId> {
        Some(self.shared.boot_id)
    }
}

/// A boot id no other simulated file of this process has: a counter, and the process id so
/// that files of different processes differ too.
fn new_boot_id() -> BootId {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut id = [0u8; 16];
    id[..8].copy_from_slice(&n.to_le_bytes());
    id[8..12].copy_from_slice(&std::process::id().to_le_bytes());
    id[12..].copy_from_slice(b"sim!");
    id
}

impl fmt::Debug for SimFile {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.state();
        f.debug_struct("SimFile")
            .field("durable_len", &state.durable.len())
            .field("pending", &state.pending.len())
            .field("op_count", &state.log.len())
            .field("crashed_at", &state.crashed_at)
            .finish_non_exhaustive()
    }
}

fn crashed(op: u64, crashed_at: u64) -> io::Error {
    io::Error::other(format!(
        "SimFile: operation {op} failed: the file crashed at operation {crashed_at}"
    ))
}

/// Decides what a crash under `profile` does to a pending write covering `n_sectors` sectors.
fn write_fate(profile: CrashProfile, n_sectors: usize, rng: &mut SplitMix64) -> WriteFate {
    let torn = |rng: &mut SplitMix64| -> WriteFate {
        match rng.below(4) {
            0 => WriteFate::Keep,
            1 => WriteFate::Drop,
            2 => {
                // A prefix of the sectors reached the disk: a write cut off in the middle.
                let kept = rng.below(n_sectors as u64) as usize;
                WriteFate::Sectors((0..n_sectors).map(|sector| Some(sector < kept)).collect())
            }
            _ => WriteFate::Sectors((0..n_sectors).map(|_| Some(rng.coin())).collect()),
        }
    };
    match profile {
        CrashProfile::KeepAll => WriteFate::Keep,
        CrashProfile::DropAll => WriteFate::Drop,
        CrashProfile::Random => {
            if rng.coin() {
                WriteFate::Keep
            } else {
                WriteFate::Drop
            }
        }
        CrashProfile::Torn => torn(rng),
        CrashProfile::Garbage => {
            let fate = torn(rng);
            if !rng.coin() {
                return fate;
            }
            let mut sectors = match fate {
                WriteFate::Keep => vec![Some(true); n_sectors],
                WriteFate::Drop => vec![Some(false); n_sectors],
                WriteFate::Sectors(sectors) => sectors,
            };
            // At least one sector is garbage, so a garbage write never looks clean.
            let first = rng.below(n_sectors as u64) as usize;
            sectors[first] = None;
            for sector in &mut sectors {
                if rng.below(4) == 0 {
                    *sector = None;
                }
            }
            WriteFate::Sectors(sectors)
        }
    }
}

/// The sector-aligned pieces of the write `[offset, offset + len)`: whole sectors, except where
/// the write starts or ends inside one.
fn sectors(offset: u64, len: usize) -> impl Iterator<Item = Range<u64>> {
    let end = offset + len as u64;
    let first_sector = offset / SECTOR_SIZE;
    let end_sector = end.div_ceil(SECTOR_SIZE);
    (first_sector..end_sector).map(move |sector| {
        (sector * SECTOR_SIZE).max(offset)..((sector + 1) * SECTOR_SIZE).min(end)
    })
}

/// Extends `image` with zeros to at least `len` bytes; never shrinks it.
fn extend(image: &mut Vec<u8>, len: u64) {
    let len = len as usize;
    if image.len() < len {
        image.resize(len, 0);
    }
}

fn apply_write(image: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let start = offset as usize;
    extend(image, (start + bytes.len()) as u64);
    image[start..start + bytes.len()].copy_from_slice(bytes);
}

/// SplitMix64 (Steele, Lea and Flood): a tiny, well-mixed generator; crash images only need
/// reproducible choices, not cryptographic ones. It is the one copy outside `rbolt-testkit`'s
/// `rng` on purpose: this is library code (the `sim` feature ships in the crate), and a
/// library crate must not link a test-support crate.
struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`; the modulo bias is irrelevant for the small `n` used here.
    fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0, "below(0) has no possible result");
        self.next_u64() % n
    }

    fn coin(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let random = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&random[..chunk.len()]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sectors_split_at_absolute_sector_boundaries() {
        let check = |offset: u64, len: usize, expected: &[(u64, u64)]| {
            let actual: Vec<(u64, u64)> = sectors(offset, len).map(|r| (r.start, r.end)).collect();
            assert_eq!(actual, expected, "offset {offset}, len {len}");
        };
        check(0, 0, &[]);
        check(0, 512, &[(0, 512)]);
        check(0, 1024, &[(0, 512), (512, 1024)]);
        check(100, 10, &[(100, 110)]);
        check(500, 600, &[(500, 512), (512, 1024), (1024, 1100)]);
        check(
            4096,
            4096,
            &(8..16)
                .map(|s| (s * 512, (s + 1) * 512))
                .collect::<Vec<_>>(),
        );
    }

    #[test]
    fn splitmix_is_reproducible_and_spread() {
        let mut a = SplitMix64::new(42);
        let mut b = SplitMix64::new(42);
        let from_a: Vec<u64> = (0..100).map(|_| a.next_u64()).collect();
        let from_b: Vec<u64> = (0..100).map(|_| b.next_u64()).collect();
        assert_eq!(from_a, from_b);
        let mut rng = SplitMix64::new(7);
        let mut seen = [0u32; 4];
        for _ in 0..4000 {
            seen[rng.below(4) as usize] += 1;
        }
        assert!(
            seen.iter().all(|&n| (800..1200).contains(&n)),
            "uneven draws: {seen:?}"
        );
    }

    #[test]
    fn fault_plan_prefers_crash_then_first_rule() {
        let plan = FaultPlan::new()
            .fail_from(3, FaultError::Io)
            .fail_at(5, FaultError::NoSpace)
            .crash_at(7);
        assert!(plan.action_for(2, OpKind::Write).is_none());
        assert!(matches!(
            plan.action_for(5, OpKind::Write),
            Some(Action::Fail(FaultError::Io))
        ));
        assert!(matches!(
            plan.action_for(7, OpKind::Write),
            Some(Action::Crash)
        ));
        assert!(matches!(
            plan.action_for(8, OpKind::Write),
            Some(Action::Fail(FaultError::Io))
        ));
    }
}
