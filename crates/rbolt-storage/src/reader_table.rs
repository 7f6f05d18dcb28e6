//! [`ReaderTable`]: the table of read transactions of other processes, in a side lock file
//! (`<database>-lock`) that every process maps shared, as LMDB's lock file holds its reader
//! table.
//!
//! The lock file is not durable state and never affects the database file: the writer
//! rebuilds it at its open when no live process holds a slot. Its layout, little-endian
//! 64-bit words read and written only as atomics:
//!
//! ```text
//! bytes 0..512      header: magic "rboltRT1", version, slot count, the writer's pid (0: no
//!                   writer), the published record's generation (odd while it is written or
//!                   before the writer's first publication), the record's length, the
//!                   device and inode of the database file the writer holds, and at
//!                   byte 64 the record itself (at most PUBLISHED_BYTES_MAX bytes: the meta of
//!                   the writer's newest snapshot)
//! bytes 512..8192   READER_SLOTS slots of 64 bytes: pid, handle id, txid + 1 (0: no
//!                   transaction), the bytes of the file the transaction may read, the Unix
//!                   time its transaction began
//! ```
//!
//! Liveness is the kernel's: the writer holds a write lock on byte 0 for as long as it has
//! the database open, and each reader holds a write lock on the first byte of its slot for as
//! long as its handle lives. Both are open file description locks (`F_OFD_SETLK`, Linux), which
//! the kernel drops when the process exits, SIGKILL included, and which two handles of one
//! process do not share. A slot whose lock is free is dead, whatever its words say: a new
//! reader takes it over by taking the lock, and the writer clears it. The process id is kept
//! for people (`rbolt stats`) and checked only to say whether a live slot's process is seen
//! from here (a child that inherited the descriptor, or another PID namespace, holds the lock
//! of a process id that is not): the lock decides.
//!
//! Only Linux has open file description locks (POSIX record locks belong to the process, and
//! closing any descriptor of the file drops them all), so elsewhere every open of a table
//! fails with [`io::ErrorKind::Unsupported`] and readers keep to the shared `flock`.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::fd::AsFd;
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering, fence};
use std::time::{SystemTime, UNIX_EPOCH};

use memmap2::{MmapOptions, MmapRaw};

/// How many reader slots a lock file holds: one per read transaction open at once in a
/// reader process (a handle reuses its slots from one transaction to the next).
pub const READER_SLOTS: usize = 120;

/// The most bytes [`ReaderTable::publish`] takes: room for a meta and then some.
pub const PUBLISHED_BYTES_MAX: usize = 128;

/// The lock file's length: the header and the slots.
pub const LOCK_FILE_LEN: usize = HEADER_BYTES + READER_SLOTS * SLOT_BYTES;

const MAGIC: u64 = u64::from_le_bytes(*b"rboltRT1");
const VERSION: u64 = 1;
const HEADER_BYTES: usize = 512;
const SLOT_BYTES: usize = 64;
const WORD: usize = 8;

// Header words.
const H_MAGIC: usize = 0;
const H_VERSION: usize = 1;
const H_SLOTS: usize = 2;
const H_WRITER_PID: usize = 3;
const H_GENERATION: usize = 4;
const H_PUBLISHED_LEN: usize = 5;
const H_DB_DEV: usize = 6;
const H_DB_INO: usize = 7;
const H_PUBLISHED: usize = 8;

// Slot words, from the slot's first word.
const S_PID: usize = 0;
const S_HANDLE: usize = 1;
const S_TXID: usize = 2;
const S_LEN: usize = 3;
const S_SINCE: usize = 4;
const SLOT_WORDS: usize = SLOT_BYTES / WORD;

/// How long a writer waits for a writer lock an earlier writer's forked child still holds.
const WRITER_LOCK_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// The byte whose lock the writer holds.
const WRITER_BYTE: u64 = 0;

/// The lock file of the database at `db_path`: its path with `-lock` appended.
///
/// ```
/// use std::path::Path;
/// assert_eq!(
///     rbolt_storage::lock_file_path(Path::new("/srv/app.db")),
///     Path::new("/srv/app.db-lock")
/// );
/// ```
pub fn lock_file_path(db_path: &Path) -> PathBuf {
    let mut name = db_path.as_os_str().to_owned();
    name.push("-lock");
    PathBuf::from(name)
}

/// One slot as a reader of the table sees it ([`ReaderTable::slots`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub struct SlotInfo {
    /// The slot's index in the table.
    pub index: usize,
    /// The process that claimed it.
    pub pid: u32,
    /// The handle (and slot of that handle) in that process.
    pub handle: u64,
    /// The txid its open transaction reads, `None` between transactions.
    pub txid: Option<u64>,
    /// The bytes of the database file that transaction may read.
    pub len: u64,
    /// When that transaction began, in seconds since the Unix epoch.
    pub since: u64,
    /// Whether the process id is seen from here (`kill(pid, 0)`), filled by
    /// [`ReaderTable::slots`] only (`false` elsewhere); the slot's lock, not this, says the
    /// slot is live.
    pub pid_seen: bool,
}

/// A reader table in a lock file, mapped shared (see the module's documentation for the
/// layout and the protocol). Made by [`FileStorage`](crate::FileStorage)'s open: a writer
/// creates or resets it, a read-only open beside a writer attaches to it.
#[derive(Clone, Debug)]
pub struct ReaderTable {
    shared: Arc<Shared>,
}

#[derive(Debug)]
struct Shared {
    file: File,
    path: PathBuf,
    map: MmapRaw,
    /// The slots this open holds: locks of one open file description never conflict with
    /// each other, so the lock alone cannot tell this open's slots from free ones.
    held: Box<[std::sync::atomic::AtomicBool]>,
}

/// Why a read-only open could not attach to a writer's table.
#[derive(Debug)]
pub(crate) struct AttachError(pub(crate) String);

impl ReaderTable {
    /// The writer's table: opens or creates the lock file beside `db_path` with `mode`, takes
    /// the writer's lock, and resets the slots when no live process holds one (else keeps
    /// them and repairs a damaged header). The published record is marked unavailable until
    /// the writer's first [`publish`](ReaderTable::publish). `db_file` is the database
    /// file's device and inode, kept in the header so that readers of another file of the
    /// same name (the database replaced by a rename while this writer runs) do not attach.
    ///
    /// The lock file is opened without following a symbolic link and must be a regular
    /// file: else the writer would extend, chmod and write into whatever the link names.
    pub(crate) fn open_for_writer(
        db_path: &Path,
        mode: u32,
        db_file: (u64, u64),
    ) -> io::Result<ReaderTable> {
        let path = lock_file_path(db_path);
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .mode(mode)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)?;
        regular_file(&file, &path)?;
        // The umask may have cleared bits the database file has: readers that may read it
        // must be able to write their slots.
        file.set_permissions(std::fs::Permissions::from_mode(mode))?;
        // Allocated, not sparse: a store into a hole of a shared mapping on a full filesystem
        // (a full tmpfs) raises SIGBUS where the allocation fails with ENOSPC, and the writer
        // then runs without a table. Without `fallocate` (the portable storage) the missing
        // bytes are written as zeros, which allocates them too; `set_len` would leave a hole.
        if !crate::fdio::allocate_in_place(&file, LOCK_FILE_LEN as u64)? {
            let len = file.metadata()?.len();
            if len < LOCK_FILE_LEN as u64 {
                let zeros = vec![0u8; LOCK_FILE_LEN - len as usize];
                std::os::unix::fs::FileExt::write_all_at(&file, &zeros, len)?;
            }
        }
        let table = ReaderTable::map(file, path)?;
        table.take_writer_lock()?;
        let slots_free = ofd::try_lock(&table.shared.file, HEADER_BYTES as u64, 0)?;
        if slots_free {
            table.reset_slots();
            ofd::unlock(&table.shared.file, HEADER_BYTES as u64, 0)?;
        }
        table.word(H_DB_DEV).store(db_file.0, Ordering::SeqCst);
        table.word(H_DB_INO).store(db_file.1, Ordering::SeqCst);
        table.write_header();
        table
            .word(H_WRITER_PID)
            .store(u64::from(std::process::id()), Ordering::SeqCst);
        Ok(table)
    }

    /// Takes the writer's lock on byte 0. The caller holds the database's exclusive `flock`,
    /// so no other writer is open: a lock held anyway is the previous writer's descriptor in
    /// a process forked from it (between its fork and its exec, or for good without exec), so
    /// it is waited for a little, then given up on (the writer runs without a table).
    fn take_writer_lock(&self) -> io::Result<()> {
        let start = std::time::Instant::now();
        while !ofd::try_lock(&self.shared.file, WRITER_BYTE, 1)? {
            if start.elapsed() > WRITER_LOCK_WAIT {
                return Err(io::Error::new(
                    io::ErrorKind::ResourceBusy,
                    "a process forked from an earlier writer holds the lock file's writer lock",
                ));
            }
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        Ok(())
    }

    /// A reader's table beside a live writer: fails with the reason when the lock file is
    /// missing, cannot be opened for writing, is damaged, no rbolt writer holds it, or its
    /// writer holds another file than `db_file` (device and inode of the reader's database
    /// file: the name was given to another file while that writer ran).
    pub(crate) fn open_for_reader(
        db_path: &Path,
        db_file: (u64, u64),
    ) -> Result<ReaderTable, AttachError> {
        let path = lock_file_path(db_path);
        let why = |what: &str, error: io::Error| {
            AttachError(format!("{what} {}: {error}", path.display()))
        };
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
            .open(&path)
            .map_err(|e| why("cannot open the lock file", e))?;
        regular_file(&file, &path).map_err(|e| why("cannot use", e))?;
        let len = file.metadata().map_err(|e| why("cannot stat", e))?.len();
        if len < LOCK_FILE_LEN as u64 {
            return Err(AttachError(format!(
                "the lock file {} is {len} bytes, not {LOCK_FILE_LEN}",
                path.display()
            )));
        }
        let table = ReaderTable::map(file, path.clone()).map_err(|e| why("cannot map", e))?;
        let writer_there = ofd::is_locked(&table.shared.file, WRITER_BYTE, 1)
            .map_err(|e| why("cannot test the writer's lock on", e))?;
        if !writer_there {
            return Err(AttachError(format!(
                "no rbolt writer holds the lock file {}",
                path.display()
            )));
        }
        if !table.header_valid() {
            return Err(AttachError(format!(
                "the lock file {} has no valid header",
                path.display()
            )));
        }
        let writers_file = (
            table.word(H_DB_DEV).load(Ordering::SeqCst),
            table.word(H_DB_INO).load(Ordering::SeqCst),
        );
        if writers_file != db_file {
            return Err(AttachError(format!(
                "the writer holding the lock file {} has another file open than {} \
                 (replaced while it runs)",
                path.display(),
                db_path.display()
            )));
        }
        Ok(table)
    }

    fn map(file: File, path: PathBuf) -> io::Result<ReaderTable> {
        let map = MmapOptions::new().len(LOCK_FILE_LEN).map_raw(&file)?;
        Ok(ReaderTable {
            shared: Arc::new(Shared {
                file,
                path,
                map,
                held: (0..READER_SLOTS).map(|_| Default::default()).collect(),
            }),
        })
    }

    /// The lock file's path.
    pub fn path(&self) -> &Path {
        &self.shared.path
    }

    /// Word `index` of the lock file.
    fn word(&self, index: usize) -> &AtomicU64 {
        assert!(
            index < LOCK_FILE_LEN / WORD,
            "word {index} is past the lock file"
        );
        let base = self.shared.map.as_ptr().cast::<AtomicU64>();
        // SAFETY: the mapping is LOCK_FILE_LEN bytes of a file at least that long (checked
        // before mapping; nothing that follows the protocol shrinks it), page-aligned, so
        // word `index` (bounds-checked above) is an aligned, in-bounds 8-byte location that
        // stays mapped as long as `self.shared` lives, which the returned reference borrows.
        // AtomicU64 has u64's size and alignment, and every process that shares the mapping
        // reads and writes these words only with atomic operations, so no non-atomic access
        // races with them. No `&`/`&mut [u8]` is ever made over this mapping (it is a raw
        // mapping), so nothing else aliases the word.
        unsafe { &*base.add(index) }
    }

    fn slot_word(&self, slot: usize, word: usize) -> &AtomicU64 {
        debug_assert!(
            slot < READER_SLOTS && word < SLOT_WORDS,
            "slot word out of range"
        );
        self.word((HEADER_BYTES + slot * SLOT_BYTES) / WORD + word)
    }

    fn header_valid(&self) -> bool {
        self.word(H_MAGIC).load(Ordering::Acquire) == MAGIC
            && self.word(H_VERSION).load(Ordering::Acquire) == VERSION
            && self.word(H_SLOTS).load(Ordering::Acquire) == READER_SLOTS as u64
    }

    fn write_header(&self) {
        let generation = self.word(H_GENERATION).load(Ordering::Acquire);
        // Odd: unavailable until the first publication. Never reset to an older value, so a
        // reader comparing generations cannot mistake a new record for the one it read.
        self.word(H_GENERATION)
            .store(generation | 1, Ordering::SeqCst);
        self.word(H_VERSION).store(VERSION, Ordering::Release);
        self.word(H_SLOTS)
            .store(READER_SLOTS as u64, Ordering::Release);
        self.word(H_MAGIC).store(MAGIC, Ordering::Release);
    }

    fn reset_slots(&self) {
        for slot in 0..READER_SLOTS {
            for word in 0..SLOT_WORDS {
                self.slot_word(slot, word).store(0, Ordering::Relaxed);
            }
        }
        fence(Ordering::SeqCst);
    }

    /// Publishes `record` (the writer's newest meta) for readers, as a seqlock: the generation
    /// is odd while the words change and even after, so a reader that sees the same even
    /// generation before and after its copy has a whole record.
    ///
    /// # Panics
    /// If `record` is longer than [`PUBLISHED_BYTES_MAX`].
    pub fn publish(&self, record: &[u8]) {
        assert!(
            record.len() <= PUBLISHED_BYTES_MAX,
            "published record too long"
        );
        let generation = self.word(H_GENERATION);
        let odd = generation.load(Ordering::Acquire) | 1;
        generation.store(odd, Ordering::Relaxed);
        fence(Ordering::Release);
        self.word(H_PUBLISHED_LEN)
            .store(record.len() as u64, Ordering::Relaxed);
        for (index, chunk) in record.chunks(WORD).enumerate() {
            let mut bytes = [0u8; WORD];
            bytes[..chunk.len()].copy_from_slice(chunk);
            self.word(H_PUBLISHED + index)
                .store(u64::from_le_bytes(bytes), Ordering::Relaxed);
        }
        // SeqCst: ordered before the writer's later scans of the slots (see `generation`).
        generation.store(odd + 1, Ordering::SeqCst);
    }

    /// Copies the published record into `buf` and returns its length and generation, or
    /// `None` when none is available (no publication since the writer opened, or the writer
    /// is writing it: a few stores, spun over for a while first).
    pub fn read_published(&self, buf: &mut [u8; PUBLISHED_BYTES_MAX]) -> Option<(usize, u64)> {
        let generation = self.word(H_GENERATION);
        for _ in 0..10_000 {
            let before = generation.load(Ordering::Acquire);
            if before % 2 == 1 {
                std::hint::spin_loop();
                continue;
            }
            let len = (self.word(H_PUBLISHED_LEN).load(Ordering::Relaxed) as usize)
                .min(PUBLISHED_BYTES_MAX);
            for (index, chunk) in buf[..len].chunks_mut(WORD).enumerate() {
                let word = self.word(H_PUBLISHED + index).load(Ordering::Relaxed);
                chunk.copy_from_slice(&word.to_le_bytes()[..chunk.len()]);
            }
            fence(Ordering::Acquire);
            if generation.load(Ordering::Relaxed) == before {
                return Some((len, before));
            }
        }
        None
    }

    /// The published record's generation now. A reader publishes its txid in its slot, then
    /// compares this with the generation it read the record at: the same means the writer had
    /// not published a newer record when the slot was written, so the writer's next scan of
    /// the slots (after any newer publication, both sequentially consistent) sees it.
    pub fn generation(&self) -> u64 {
        self.word(H_GENERATION).load(Ordering::SeqCst)
    }

    /// The writer's process id, 0 when the writer has closed.
    pub fn writer_pid(&self) -> u32 {
        self.word(H_WRITER_PID).load(Ordering::Acquire) as u32
    }

    /// Marks the writer gone (its close), before its locks are released.
    pub(crate) fn writer_closed(&self) {
        self.word(H_WRITER_PID).store(0, Ordering::SeqCst);
    }

    /// Claims a free slot for handle `handle` of this process: the first whose lock can be
    /// taken (its owner, if any, has exited). Fails with [`io::ErrorKind::ResourceBusy`] when
    /// every slot is held.
    pub fn claim_slot(&self, handle: u64) -> io::Result<ClaimedSlot> {
        for index in 0..READER_SLOTS {
            let held = &self.shared.held[index];
            if held.swap(true, Ordering::AcqRel) {
                continue;
            }
            match ofd::try_lock(&self.shared.file, slot_lock_byte(index), 1) {
                Ok(true) => {}
                Ok(false) => {
                    held.store(false, Ordering::Release);
                    continue;
                }
                Err(error) => {
                    held.store(false, Ordering::Release);
                    return Err(error);
                }
            }
            self.slot_word(index, S_TXID).store(0, Ordering::SeqCst);
            self.slot_word(index, S_LEN).store(0, Ordering::Relaxed);
            self.slot_word(index, S_SINCE).store(0, Ordering::Relaxed);
            self.slot_word(index, S_HANDLE)
                .store(handle, Ordering::Relaxed);
            self.slot_word(index, S_PID)
                .store(u64::from(std::process::id()), Ordering::SeqCst);
            return Ok(ClaimedSlot {
                table: self.clone(),
                index,
            });
        }
        Err(io::Error::new(
            io::ErrorKind::ResourceBusy,
            format!(
                "all {READER_SLOTS} reader slots of {} are held",
                self.shared.path.display()
            ),
        ))
    }

    /// The slots of readers in a transaction (the writer's view), appended to `out`. A slot
    /// reading a txid below `check_below` is checked (one system call): when its lock is free,
    /// it belonged to a process that exited, and is cleared instead. Slots at `check_below` or
    /// later are taken as they are, live or not: the writer passes its newest txid, and such a
    /// slot pins nothing yet, so the steady state costs no system call.
    pub fn live_readers(&self, out: &mut Vec<SlotInfo>, check_below: u64) -> io::Result<()> {
        for index in 0..READER_SLOTS {
            let value = self.slot_word(index, S_TXID).load(Ordering::SeqCst);
            if value == 0 {
                continue;
            }
            if value > check_below {
                out.push(self.slot_info(index));
                continue;
            }
            if let Some(info) = self.live_slot(index)? {
                out.push(info);
            }
        }
        Ok(())
    }

    /// Slot `index` if its lock is held; else clears it (under its lock) and returns `None`.
    fn live_slot(&self, index: usize) -> io::Result<Option<SlotInfo>> {
        let byte = slot_lock_byte(index);
        if ofd::try_lock(&self.shared.file, byte, 1)? {
            for word in 0..SLOT_WORDS {
                self.slot_word(index, word).store(0, Ordering::SeqCst);
            }
            ofd::unlock(&self.shared.file, byte, 1)?;
            return Ok(None);
        }
        Ok(Some(self.slot_info(index)))
    }

    fn slot_info(&self, index: usize) -> SlotInfo {
        let load = |word| self.slot_word(index, word).load(Ordering::SeqCst);
        let pid = load(S_PID) as u32;
        SlotInfo {
            index,
            pid,
            handle: load(S_HANDLE),
            txid: load(S_TXID).checked_sub(1),
            len: load(S_LEN),
            since: load(S_SINCE),
            pid_seen: false,
        }
    }

    /// Every slot held by a live process (this one's included), in a transaction or not (for
    /// `rbolt stats`). Takes no slot over and clears none.
    pub fn slots(&self) -> io::Result<Vec<SlotInfo>> {
        let mut slots = Vec::new();
        for index in 0..READER_SLOTS {
            if self.slot_word(index, S_PID).load(Ordering::SeqCst) == 0 {
                continue;
            }
            // This open's own locks never conflict with it: `held` says which are its own.
            let own = self.shared.held[index].load(Ordering::Acquire);
            if own || ofd::is_locked(&self.shared.file, slot_lock_byte(index), 1)? {
                let mut info = self.slot_info(index);
                info.pid_seen = pid_seen(info.pid);
                slots.push(info);
            }
        }
        Ok(slots)
    }
}

/// Fails unless `file` is a regular file (not a FIFO, a device or a directory).
fn regular_file(file: &File, path: &Path) -> io::Result<()> {
    if file.metadata()?.file_type().is_file() {
        return Ok(());
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidInput,
        format!("the lock file {} is not a regular file", path.display()),
    ))
}

/// The byte of the lock file whose lock marks slot `index` live.
fn slot_lock_byte(index: usize) -> u64 {
    (HEADER_BYTES + index * SLOT_BYTES) as u64
}

/// Whether process `pid` exists as seen from here.
fn pid_seen(pid: u32) -> bool {
    let Some(pid) = rustix::process::Pid::from_raw(pid as i32) else {
        return false;
    };
    match rustix::process::test_kill_process(pid) {
        Ok(()) => true,
        // It exists, and belongs to someone else.
        Err(error) => error == rustix::io::Errno::PERM,
    }
}

/// A slot this process holds in a [`ReaderTable`]: its lock is held until it is dropped. A
/// read transaction publishes the txid it reads with [`begin`](ClaimedSlot::begin) and clears
/// it with [`end`](ClaimedSlot::end), atomic stores into the shared mapping, no system call.
#[derive(Debug)]
pub struct ClaimedSlot {
    table: ReaderTable,
    index: usize,
}

impl ClaimedSlot {
    /// Publishes that a transaction reads `txid` and may read the first `len` bytes of the
    /// database file. The caller then checks that the record it read `txid` from is still
    /// the newest ([`ReaderTable::generation`]), and begins again if not.
    pub fn begin(&self, txid: u64, len: u64) {
        let since = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_secs());
        self.table
            .slot_word(self.index, S_SINCE)
            .store(since, Ordering::Relaxed);
        self.table
            .slot_word(self.index, S_LEN)
            .store(len, Ordering::SeqCst);
        self.table
            .slot_word(self.index, S_TXID)
            .store(txid + 1, Ordering::SeqCst);
    }

    /// The transaction ended: the slot pins nothing.
    pub fn end(&self) {
        self.table
            .slot_word(self.index, S_TXID)
            .store(0, Ordering::SeqCst);
    }

    /// The slot's index in the table.
    pub fn index(&self) -> usize {
        self.index
    }

    /// The table the slot is in.
    pub fn table(&self) -> &ReaderTable {
        &self.table
    }
}

impl Drop for ClaimedSlot {
    fn drop(&mut self) {
        for word in [S_TXID, S_PID] {
            self.table
                .slot_word(self.index, word)
                .store(0, Ordering::SeqCst);
        }
        // A failed unlock is undone by the close of the lock file (the table's last clone).
        let _ = ofd::unlock(&self.table.shared.file, slot_lock_byte(self.index), 1);
        self.table.shared.held[self.index].store(false, Ordering::Release);
    }
}

/// Open file description locks on byte ranges (`len` 0: to the end of the file).
#[cfg(target_os = "linux")]
mod ofd {
    use super::*;

    fn fcntl(file: &File, command: libc::c_int, lock: &mut libc::flock) -> io::Result<()> {
        use std::os::fd::AsRawFd;
        let fd = file.as_fd().as_raw_fd();
        // SAFETY: `fd` is an open descriptor borrowed from `file` for the call, and `lock` is
        // a valid, exclusively borrowed `struct flock` that F_OFD_SETLK/F_OFD_GETLK read (and
        // GETLK writes) and do not keep.
        let result = unsafe { libc::fcntl(fd, command, lock as *mut libc::flock) };
        if result == -1 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    }

    fn flock(kind: libc::c_int, start: u64, len: u64) -> libc::flock {
        // SAFETY: `struct flock` is plain integers, for which all zeros is a valid value.
        let mut lock: libc::flock = unsafe { std::mem::zeroed() };
        lock.l_type = kind as libc::c_short;
        lock.l_whence = libc::SEEK_SET as libc::c_short;
        lock.l_start = start as libc::off_t;
        lock.l_len = len as libc::off_t;
        lock
    }

    /// Takes a write lock on the range without waiting; `false` when another holds it.
    pub(super) fn try_lock(file: &File, start: u64, len: u64) -> io::Result<bool> {
        let mut lock = flock(libc::F_WRLCK, start, len);
        match fcntl(file, libc::F_OFD_SETLK, &mut lock) {
            Ok(()) => Ok(true),
            Err(error)
                if matches!(
                    error.raw_os_error(),
                    Some(libc::EAGAIN) | Some(libc::EACCES)
                ) =>
            {
                Ok(false)
            }
            Err(error) => Err(error),
        }
    }

    pub(super) fn unlock(file: &File, start: u64, len: u64) -> io::Result<()> {
        let mut lock = flock(libc::F_UNLCK, start, len);
        fcntl(file, libc::F_OFD_SETLK, &mut lock)
    }

    /// Whether another open file description holds a lock on the range.
    pub(super) fn is_locked(file: &File, start: u64, len: u64) -> io::Result<bool> {
        let mut lock = flock(libc::F_WRLCK, start, len);
        fcntl(file, libc::F_OFD_GETLK, &mut lock)?;
        Ok(lock.l_type != libc::F_UNLCK as libc::c_short)
    }
}

/// Without open file description locks, no table: readers keep to the shared `flock`.
#[cfg(not(target_os = "linux"))]
mod ofd {
    use super::*;

    fn unsupported() -> io::Error {
        io::Error::new(
            io::ErrorKind::Unsupported,
            "reader processes beside a writer need open file description locks (Linux)",
        )
    }

    pub(super) fn try_lock(_: &File, _: u64, _: u64) -> io::Result<bool> {
        Err(unsupported())
    }

    pub(super) fn unlock(_: &File, _: u64, _: u64) -> io::Result<()> {
        Err(unsupported())
    }

    pub(super) fn is_locked(_: &File, _: u64, _: u64) -> io::Result<bool> {
        Err(unsupported())
    }
}

#[cfg(test)]
mod tests;
