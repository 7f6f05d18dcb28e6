//! [`SimFile`]: a test tool. An in-memory file that the database uses like a real one, and that
//! models durability so tests can produce the images a power loss could leave behind.

use std::fmt;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use memmap2::MmapOptions;

use crate::{Claim, ClaimFlag, Mapping, Storage, fdio};
use rbolt_page::BootId;

mod crash;
mod ops;

pub use crash::CrashProfile;
use crash::{SplitMix64, WriteFate, sectors, write_fate};
use ops::Action;
pub use ops::{FaultError, FaultPlan, OpCounts, OpKind};

/// The unit a simulated disk writes atomically: a crash keeps or loses each 512-byte sector of
/// an unsynced write as a whole. Sectors are aligned to file offsets, not to the write.
pub const SECTOR_SIZE: u64 = 512;

/// The grain at which [`FileStorage`](crate::FileStorage) decides whether a write is a copy
/// into its mapping (the system's 4 KiB page).
const COPY_GRAIN: u64 = 4096;

/// A simulated database file, for tests. **Not for production use.**
///
/// It behaves like a real file for the database: contents live in an anonymous file (a
/// `memfd` on Linux, an unlinked temporary file elsewhere), so
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
/// use rbolt_storage::{CrashProfile, SimFile, Storage};
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
    file: File,
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
    /// One bit per [`COPY_GRAIN`] bytes of the file: written since the last sync. A write of
    /// only such bytes is one [`FileStorage`](crate::FileStorage) may make as a copy into a
    /// mapping (where its filesystem allows), which a kill can cut short.
    written: Vec<u64>,
    /// The write the crash stopped, when it is one that may have been such a copy: a crash
    /// of the process can leave any prefix of it ([`SimFile::after_process_crash_torn`]).
    torn: Option<(u64, Vec<u8>)>,
}

#[derive(Clone)]
enum Pending {
    Write { offset: u64, bytes: Vec<u8> },
    Grow { len: u64 },
    Shrink { len: u64 },
}

impl SimFile {
    /// An empty simulated file.
    ///
    /// ```
    /// use rbolt_storage::{SimFile, Storage};
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
    /// use rbolt_storage::{CrashProfile, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"synced", 0).unwrap();
    /// sim.sync_data().unwrap();
    /// // Power loss right now: everything was synced, so every image keeps it.
    /// let image = sim.crash_image(CrashProfile::Garbage, 7);
    /// let reopened = SimFile::from_image(image).unwrap();
    /// let mut buf = [0u8; 6];
    /// reopened.read_exact_at(&mut buf, 0).unwrap();
    /// assert_eq!(&buf, b"synced");
    /// assert_ne!(reopened.boot_id(), sim.boot_id()); // a power loss reboots
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
    /// use rbolt_storage::{CrashProfile, SimFile, Storage};
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

    /// The length of the write the crash stopped, when it was one that
    /// [`FileStorage`](crate::FileStorage) may make as a copy into a writable mapping of the
    /// file: a write (not [`Storage::write_whole_at`]) of bytes all written since the last
    /// sync, counted in 4 KiB blocks. A kill can stop such a copy after any of its bytes;
    /// `None` when the crash stopped no such write.
    ///
    /// ```
    /// use rbolt_storage::{FaultPlan, SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(&[1; 64], 0).unwrap(); // op 0: a first write, a system call
    /// sim.set_fault_plan(FaultPlan::new().crash_at(1));
    /// assert!(sim.write_all_at(&[2; 64], 0).is_err()); // op 1: a rewrite, maybe a copy
    /// assert_eq!(sim.torn_copy_len(), Some(64));
    /// let next = sim.after_process_crash_torn(24).unwrap();
    /// let live = next.live_image().unwrap();
    /// assert_eq!((&live[..24], &live[24..]), (&[2; 24][..], &[1; 40][..]));
    /// ```
    pub fn torn_copy_len(&self) -> Option<usize> {
        self.state().torn.as_ref().map(|(_, bytes)| bytes.len())
    }

    /// Whether a write of `len` bytes at `offset` now (with [`Storage::write_all_at`] or
    /// [`Storage::write_vectored_at`]) is one [`FileStorage`](crate::FileStorage) may make as a
    /// copy into its mapping, which a kill can cut short: every 4 KiB block it touches was
    /// written since the last sync. Not an operation: never fails and is not counted.
    ///
    /// ```
    /// use rbolt_storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// assert!(!sim.would_copy(0, 100));
    /// sim.write_all_at(&[1; 100], 0).unwrap();
    /// assert!(sim.would_copy(0, 100));
    /// assert!(!sim.would_copy(4000, 200)); // reaches into a block not written
    /// sim.sync_data().unwrap();
    /// assert!(!sim.would_copy(0, 100));
    /// ```
    pub fn would_copy(&self, offset: u64, len: usize) -> bool {
        len > 0 && all_written(&self.state().written, offset, offset + len as u64)
    }

    /// As [`after_process_crash`](SimFile::after_process_crash), with the copy the crash
    /// stopped ([`torn_copy_len`](SimFile::torn_copy_len)) cut after its first `cut` bytes,
    /// rounded down to a multiple of 8 (a copy moves at least aligned words): those bytes are
    /// in the file, unsynced, and the rest as before. Without such a copy, the same as
    /// `after_process_crash`.
    pub fn after_process_crash_torn(&self, cut: usize) -> io::Result<SimFile> {
        let mut live = self.live_image()?;
        let state = self.state();
        let mut pending = state.pending.clone();
        let durable = state.durable.clone();
        if let Some((offset, bytes)) = &state.torn {
            let cut = (cut.min(bytes.len()) / 8) * 8;
            if cut > 0 {
                apply_write(&mut live, *offset, &bytes[..cut]);
                pending.push(Pending::Write {
                    offset: *offset,
                    bytes: bytes[..cut].to_vec(),
                });
            }
        }
        drop(state);
        SimFile::with_contents(&live, durable, pending, self.shared.boot_id)
    }

    /// The file as this boot sees it after a sync failed (`EIO`): Linux marks the pages it
    /// could not write clean, and may drop them. A dropped page reads back from the disk: as
    /// its old content (the durable image's), or as zeros where it had none (past the durable
    /// end, as a block never written reads). A kept one reads as written, but it is clean: no
    /// later sync writes it unless it is written again, so the durable image keeps the old
    /// bytes (a power loss, or an eviction, shows them). Each 4 KiB page that a pending write
    /// touched is kept or dropped, as a generator seeded with `seed` decides; the length is
    /// the live one. The machine has not rebooted (same [`Storage::boot_id`]): a reopen in the
    /// same boot sees this.
    ///
    /// ```
    /// use rbolt_storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(&[1; 8192], 0).unwrap();
    /// sim.sync_data().unwrap();
    /// sim.write_all_at(&[2; 12288], 0).unwrap(); // the third page is new
    /// let images: Vec<Vec<u8>> = (0..16)
    ///     .map(|seed| sim.after_failed_sync(seed).unwrap().live_image().unwrap())
    ///     .collect();
    /// let seen = |at: usize| images.iter().map(|i| i[at]).collect::<std::collections::HashSet<_>>();
    /// assert_eq!(seen(0), [1, 2].into()); // dropped (old) or kept, page by page
    /// assert_eq!(seen(4096), [1, 2].into());
    /// assert_eq!(seen(8192), [0, 2].into()); // a page the disk never had reads as zeros
    /// // A kept page is clean: a sync does not write it, the disk keeps the old bytes.
    /// let after = sim.after_failed_sync(0).unwrap();
    /// after.sync_data().unwrap();
    /// assert_eq!(after.durable_image()[..8192], [1; 8192][..]);
    /// ```
    pub fn after_failed_sync(&self, seed: u64) -> io::Result<SimFile> {
        let live = self.live_image()?;
        let state = self.state();
        let durable = state.durable.clone();
        let mut touched = Vec::new();
        for op in &state.pending {
            if let Pending::Write { offset, bytes } = op
                && !bytes.is_empty()
            {
                let end = offset + bytes.len() as u64;
                touched.extend(offset / COPY_GRAIN..end.div_ceil(COPY_GRAIN));
            }
        }
        drop(state);
        touched.sort_unstable();
        touched.dedup();
        let mut rng = SplitMix64::new(seed);
        let mut image = live;
        let mut pending = Vec::new();
        for page in touched {
            let start = (page * COPY_GRAIN) as usize;
            let end = (start + COPY_GRAIN as usize).min(image.len());
            if start >= end {
                continue;
            }
            if rng.coin() {
                // Kept, and clean: in the live image only.
            } else {
                for (at, byte) in image[start..end].iter_mut().enumerate() {
                    *byte = durable.get(start + at).copied().unwrap_or(0);
                }
            }
        }
        if image.len() != durable.len() {
            pending.insert(
                0,
                Pending::Grow {
                    len: image.len() as u64,
                },
            );
        }
        SimFile::with_contents(&image, durable, pending, self.shared.boot_id)
    }

    fn with_contents(
        live: &[u8],
        durable: Vec<u8>,
        pending: Vec<Pending>,
        boot_id: BootId,
    ) -> io::Result<SimFile> {
        let file = fdio::anonymous_file()?;
        fdio::write_all_at(&file, live, 0)?;
        let state = State {
            durable,
            pending,
            log: Vec::new(),
            counts: OpCounts::default(),
            plan: FaultPlan::new(),
            crashed_at: None,
            written: Vec::new(),
            torn: None,
        };
        Ok(SimFile {
            shared: Arc::new(Shared {
                file,
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
    /// use rbolt_storage::{SimFile, Storage};
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
    /// use rbolt_storage::{FaultPlan, OpKind, SimFile, Storage};
    /// let run = |sim: &SimFile| -> std::io::Result<()> {
    ///     sim.write_all_at(b"pages", 4096)?;
    ///     sim.sync_data()?;
    ///     sim.write_all_at(b"meta", 0)?;
    ///     sim.sync_data()
    /// };
    /// let reference = SimFile::new().unwrap();
    /// run(&reference).unwrap();
    /// // Crash the same run at its last sync (the one after the meta write).
    /// let log = reference.op_log();
    /// let last_sync = log.iter().rposition(|&k| k == OpKind::SyncData).unwrap() as u64;
    /// let sim = SimFile::new().unwrap();
    /// sim.set_fault_plan(FaultPlan::new().crash_at(last_sync));
    /// assert!(run(&sim).is_err());
    /// assert_eq!(sim.crashed_at(), Some(last_sync));
    /// ```
    pub fn op_log(&self) -> Vec<OpKind> {
        self.state().log.clone()
    }

    /// Calls made so far, per kind.
    ///
    /// ```
    /// use rbolt_storage::{SimFile, Storage};
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
    /// use rbolt_storage::{FaultError, FaultPlan, SimFile, Storage};
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
    /// use rbolt_storage::{CrashProfile, SimFile, Storage};
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
    /// use rbolt_storage::{SimFile, Storage};
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
    /// use rbolt_storage::{SimFile, Storage};
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
    /// use rbolt_storage::{SimFile, Storage};
    /// let sim = SimFile::new().unwrap();
    /// sim.write_all_at(b"unsynced", 0).unwrap();
    /// assert_eq!(sim.live_image().unwrap(), b"unsynced");
    /// assert_eq!(sim.durable_image(), b"");
    /// ```
    pub fn live_image(&self) -> io::Result<Vec<u8>> {
        let _state = self.state();
        let fd = &self.shared.file;
        let mut image = vec![0; usize::try_from(fdio::len(fd)?).map_err(io::Error::other)?];
        fdio::read_exact_at(fd, &mut image, 0)?;
        Ok(image)
    }

    /// Whether there are writes or length changes that no sync has made durable.
    ///
    /// ```
    /// use rbolt_storage::{SimFile, Storage};
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
    /// use rbolt_storage::{CrashProfile, SimFile, Storage};
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

    /// Numbers a write of `bytes` at `offset` (see `begin`); when the crash stops it and
    /// `may_copy` (not a whole write) and every byte it covers was written since the last sync,
    /// remembers it as the copy a kill may have cut short.
    fn begin_write(
        &self,
        state: &mut State,
        kind: OpKind,
        bytes: &[u8],
        offset: u64,
        may_copy: bool,
    ) -> io::Result<Option<(usize, FaultError)>> {
        let op = state.log.len() as u64;
        let began = self.begin(state, kind);
        if began.is_err()
            && state.crashed_at == Some(op)
            && may_copy
            && !bytes.is_empty()
            && all_written(&state.written, offset, offset + bytes.len() as u64)
        {
            state.torn = Some((offset, bytes.to_vec()));
        }
        began
    }

    /// Writes `bytes` at `offset` to the live file and records it as pending.
    fn write(&self, state: &mut State, bytes: &[u8], offset: u64) -> io::Result<()> {
        fdio::write_all_at(&self.shared.file, bytes, offset)?;
        if !bytes.is_empty() {
            mark_written(&mut state.written, offset, offset + bytes.len() as u64);
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
        state.written.clear();
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
            fdio::len(&self.shared.file).ok(),
            "after a sync the durable image must be the live file"
        );
        Ok(())
    }
}

impl Storage for SimFile {
    fn len(&self) -> io::Result<u64> {
        let mut state = self.state();
        self.begin(&mut state, OpKind::Len)?;
        fdio::len(&self.shared.file)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        let mut state = self.state();
        self.begin(&mut state, OpKind::Read)?;
        fdio::read_exact_at(&self.shared.file, buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut state = self.state();
        match self.begin_write(&mut state, OpKind::Write, buf, offset, true)? {
            None => self.write(&mut state, buf, offset),
            Some((len, error)) => {
                self.write(&mut state, &buf[..len.min(buf.len())], offset)?;
                Err(error.into())
            }
        }
    }

    /// The durable image's bytes: what the simulated device holds. Not counted as an
    /// operation (it is not one of the database's storage calls that a fault plan numbers).
    fn read_durable(&self, buf: &mut [u8], offset: u64) -> io::Result<bool> {
        let state = self.state();
        for (at, byte) in buf.iter_mut().enumerate() {
            *byte = state
                .durable
                .get(offset as usize + at)
                .copied()
                .unwrap_or(0);
        }
        Ok(true)
    }

    fn write_whole_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        let mut state = self.state();
        match self.begin_write(&mut state, OpKind::Write, buf, offset, false)? {
            None => self.write(&mut state, buf, offset),
            // One `pwrite` within a 4 KiB block of the file cannot stop part-way: the kernel
            // copies it into one cached page, and fails it (ENOSPC, EIO) before the copy or
            // not at all. A short write there fails whole.
            Some((_, error)) => Err(error.into()),
        }
    }

    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        let mut state = self.state();
        // Recorded as one pending write: it is one call, and a crash tears it by sector anyway.
        let bytes = bufs.concat();
        let short = self.begin_write(&mut state, OpKind::WriteVectored, &bytes, offset, true)?;
        match short {
            None => {
                // The live file takes the same pwritev path as FileStorage.
                fdio::write_vectored_at(&self.shared.file, bufs, offset)?;
                if !bytes.is_empty() {
                    mark_written(&mut state.written, offset, offset + bytes.len() as u64);
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
        let fd = &self.shared.file;
        if fdio::len(fd)? < len {
            fd.set_len(len)?;
            state.pending.push(Pending::Grow { len });
        }
        Ok(())
    }

    fn shrink(&self, len: u64) -> io::Result<()> {
        let mut state = self.state();
        self.begin(&mut state, OpKind::Shrink)?;
        let fd = &self.shared.file;
        if fdio::len(fd)? > len {
            fd.set_len(len)?;
            // What lies past the cut is gone from the page cache: no copy goes there.
            let kept = len.div_ceil(COPY_GRAIN);
            state.written.truncate(kept.div_ceil(64) as usize);
            if let Some(last) = state.written.last_mut()
                && !kept.is_multiple_of(64)
            {
                *last &= (1 << (kept % 64)) - 1;
            }
            state.pending.push(Pending::Shrink { len });
        }
        Ok(())
    }

    fn map(&self, len: usize) -> io::Result<Mapping> {
        let mut state = self.state();
        self.begin(&mut state, OpKind::Map)?;
        // SAFETY: memmap2 requires that the mapped file is not truncated or changed in ways
        // that break the `&[u8]` it hands out while the mapping lives. The anonymous file is
        // private to this SimFile: it is created close-on-exec (a memfd, or a temporary file
        // with mode 0o600 unlinked right after its creation), never handed out, and only this module
        // changes it, by writes on behalf of the database, by `grow`, which only extends it,
        // and by `shrink`, which the database calls only past the high-water mark of every
        // snapshot a live transaction reads (as with FileStorage); a crash or `from_image`
        // leaves it alone (a new image gets a new file). So no byte a transaction reads
        // leaves the file while the mapping lives. As with
        // FileStorage, `len` may reach past the end of the file, and the database reads only
        // below its high-water mark, within the file, so it never touches a page past the end
        // (SIGBUS); and it never rewrites a page a live reader can see.
        let mmap = unsafe { MmapOptions::new().len(len).map(&self.shared.file)? };
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

/// Extends `image` with zeros to at least `len` bytes; never shrinks it.
fn extend(image: &mut Vec<u8>, len: u64) {
    let len = len as usize;
    if image.len() < len {
        image.resize(len, 0);
    }
}

/// Whether every [`COPY_GRAIN`] of `[offset, end)` is marked in `written`.
fn all_written(written: &[u64], offset: u64, end: u64) -> bool {
    (offset / COPY_GRAIN..end.div_ceil(COPY_GRAIN)).all(|grain| {
        written
            .get((grain / 64) as usize)
            .is_some_and(|word| word & (1 << (grain % 64)) != 0)
    })
}

/// Marks every [`COPY_GRAIN`] of `[offset, end)` in `written`.
fn mark_written(written: &mut Vec<u64>, offset: u64, end: u64) {
    let last = end.div_ceil(COPY_GRAIN);
    let words = last.div_ceil(64) as usize;
    if written.len() < words {
        written.resize(words, 0);
    }
    for grain in offset / COPY_GRAIN..last {
        written[(grain / 64) as usize] |= 1 << (grain % 64);
    }
}

fn apply_write(image: &mut Vec<u8>, offset: u64, bytes: &[u8]) {
    let start = offset as usize;
    extend(image, (start + bytes.len()) as u64);
    image[start..start + bytes.len()].copy_from_slice(bytes);
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
