//! rbolt-storage: the file under an rbolt database. Every write, sync, length change and length
//! query the database makes, and the memory mapping it reads through, go through the
//! [`Storage`] trait.
//!
//! Production uses [`FileStorage`], a locked file on disk. The reliability tests use
//! `SimFile` (feature `sim`), an in-memory file whose mapping is a real `mmap` and which also
//! records what has been synced, so it can produce the images a power loss could leave behind
//! (`CrashProfile`) and fail or "crash" at a chosen operation (`FaultPlan`).
//!
//! This crate owns files, mappings, locks and the one database per file claim; nothing above
//! it opens files, maps memory or takes file locks. It knows nothing of pages beyond the boot
//! id a non-durable meta records, and all of rbolt's `unsafe` (mapping a file) is here.
//! Writes reach the file in system calls of at most [`WRITE_BYTES_MAX`] bytes, whatever the
//! caller passes, except that `FileStorage` on 64-bit Linux (ext4, tmpfs) makes a write of
//! pages it has written since the last sync as a copy into a writable mapping of the file:
//! the same write for the page cache, without the system call
//! ([`FileStorage::copied_bytes`]).
//!
//! # Platforms
//!
//! Linux, macOS and the BSDs, from portable calls: std's positioned reads and writes, syncs
//! (`fdatasync` on Linux, `F_FULLFSYNC` on Apple systems, where a plain `fsync` leaves the
//! data in the disk's cache), length changes and advisory locks (`flock`), and memmap2's
//! mapping. Linux adds three calls, each with a portable fallback used elsewhere: `pwritev`
//! (one call for a run of pages; else one call per page), `fallocate` (space that cannot run
//! out under a later write; else a sparse extension), and `memfd_create` for `SimFile` (else
//! an unlinked temporary file). The feature `portable-fallback` makes Linux use the fallbacks,
//! which is how the repository tests them ([`LINUX_CALLS`] says which a build uses).
//!
//! A commit without a sync is trusted after a crash of the process only within the boot that
//! wrote it, which needs the kernel's boot id ([`Storage::boot_id`]): Linux has one; on other
//! systems `FileStorage` has none, and a crash of the process loses such commits (the file
//! opens at the last durable commit, as after a power loss).
//!
//! Windows is not supported: its mappings cannot reach past the end of the file or outlive a
//! shrink of it, which the mapping here relies on (see `docs/ARCHITECTURE.md`); the crate
//! does not build there.

#![warn(missing_docs)]
#[cfg(not(unix))]
compile_error!(
    "rbolt-storage supports Unix-like systems (Linux, macOS, the BSDs); Windows is not \
     supported yet: see the crate documentation's Platforms section"
);

mod fdio;
mod file;
mod mapping;
mod reader_table;
#[cfg(feature = "sim")]
mod sim;
mod write_map;

use std::fmt;
use std::io;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

pub use rbolt_page::BootId;

pub use file::{FileOptions, FileStorage, LockMode, OpenError, sync_parent_dir};
pub use mapping::Mapping;
pub use reader_table::{
    ClaimedSlot, LOCK_FILE_LEN, PUBLISHED_BYTES_MAX, READER_SLOTS, ReaderTable, SlotInfo,
    lock_file_path,
};
#[cfg(feature = "sim")]
pub use sim::{CrashProfile, FaultError, FaultPlan, OpCounts, OpKind, SECTOR_SIZE, SimFile};

/// Whether this build makes the Linux-only calls (`pwritev`, `fallocate`, `memfd_create`):
/// `true` on Linux unless the feature `portable-fallback` is on, `false` elsewhere.
///
/// ```
/// assert_eq!(
///     rbolt_storage::LINUX_CALLS,
///     cfg!(target_os = "linux") && !cfg!(feature = "portable-fallback")
/// );
/// ```
pub const LINUX_CALLS: bool = fdio::LINUX_CALLS;

/// The running system's memory page size (`os.Getpagesize()` in Go: 4096 on x86-64, 16 KiB or
/// 64 KiB on many arm64 kernels). Go bbolt 1.3 falls back to it for a file whose meta 0 it
/// cannot read.
///
/// ```
/// assert!(rbolt_storage::system_page_size().is_power_of_two());
/// ```
pub fn system_page_size() -> usize {
    rustix::param::page_size()
}

/// The most buffers one `pwritev` takes on Linux (`UIO_MAXIOV`);
/// [`Storage::write_vectored_at`] splits longer lists into several calls.
pub const IOV_MAX: usize = 1024;

/// The most bytes one write system call carries. The kernel sizes page-cache folios by the
/// write that creates them, and a later 4 KiB rewrite of a page inside a large folio costs in
/// proportion to the folio (ext4 on Linux 6.x: 38 µs inside a 2 MiB folio, 6.8 µs inside a
/// 64 KiB one, 3.5 µs for a lone page, measured here). Random updates after a bulk load rewrite
/// single pages, so every write is cut into calls of this size, whatever the caller passes (a
/// bulk load's runs of pages, a 64 KiB page, a copy): sequential writes lose little (1.4 GB/s
/// at 64 KiB against 1.65 GB/s at 1 MiB).
pub const WRITE_BYTES_MAX: usize = 64 * 1024;

/// The file the database lives in: positioned reads and writes, syncs, growth and a read-only
/// mapping.
///
/// Implementations are shared between the writer and any number of readers, so every method
/// takes `&self`. The trait is object safe; the database holds a `Box<dyn Storage>` or an
/// `Arc<dyn Storage>`.
///
/// Errors are plain [`io::Error`]s. A read-only storage answers every method that would change
/// or persist the file with an [`io::ErrorKind::PermissionDenied`] error, without touching it.
///
/// ```
/// use rbolt_storage::{FileOptions, FileStorage, Storage};
/// # let dir = tempfile::tempdir().unwrap();
/// let file = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
/// let storage: Box<dyn Storage> = Box::new(file);
/// assert!(storage.is_empty().unwrap());
/// storage.write_vectored_at(&[b"ab", b"cd"], 2).unwrap(); // extends the file
/// assert_eq!(storage.len().unwrap(), 6);
/// storage.grow(8192).unwrap();
/// assert_eq!(storage.len().unwrap(), 8192);
/// storage.grow(100).unwrap(); // never shrinks
/// assert_eq!(storage.len().unwrap(), 8192);
/// let mut buf = [0u8; 6];
/// storage.read_exact_at(&mut buf, 0).unwrap();
/// assert_eq!(&buf, b"\0\0abcd");
/// assert_eq!(storage.path(), Some(dir.path().join("file").as_path()));
/// ```
pub trait Storage: fmt::Debug + Send + Sync + 'static {
    /// The file's current length in bytes.
    fn len(&self) -> io::Result<u64>;

    /// Whether the file is empty, as a new database file is before it is initialised.
    fn is_empty(&self) -> io::Result<bool> {
        Ok(self.len()? == 0)
    }

    /// Fills `buf` from the file at `offset`.
    ///
    /// Used at open, before a mapping exists, to read the metas. Reading past the end of the
    /// file is an [`io::ErrorKind::UnexpectedEof`] error.
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()>;

    /// Writes all of `buf` at `offset`, in calls of at most [`WRITE_BYTES_MAX`] bytes, looping
    /// on short writes; extends the file if the write ends past its end.
    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// Writes all of `buf` at `offset` so that a crash of the process leaves it whole or not at
    /// all: with one `pwrite`, never as a copy into a mapping, which a kill can stop at any
    /// byte. The kernel copies a `pwrite` into the page cache a memory page at a time and acts
    /// on a kill only between pages, so this holds for a `buf` within one 4 KiB block of the
    /// file. The database writes its metas, its commit points, with it.
    ///
    /// (A power loss can still tear it at the device's sectors: that is what the meta's
    /// checksum is for.)
    fn write_whole_at(&self, buf: &[u8], offset: u64) -> io::Result<()>;

    /// Writes `bufs` back to back from `offset`, as if they were one concatenated buffer.
    ///
    /// This is how a contiguous run of dirty pages is written with `pwritev`: in calls of at
    /// most [`WRITE_BYTES_MAX`] bytes and [`IOV_MAX`] buffers, short writes continued. (A
    /// storage may instead copy the bytes into a writable mapping of the file where that is
    /// the same write and cannot fail, as [`FileStorage`] does for pages written since the
    /// last sync.)
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()>;

    /// Fills `buf` (within one 4 KiB block of the file) with what the device holds at
    /// `offset`, bypassing the page cache; `Ok(false)` when the storage cannot tell (the
    /// default). After a sync that failed, Linux may keep a page it could not write in the
    /// cache, marked clean: reads show the new bytes, no later sync writes them, and the disk
    /// keeps the old ones. The database asks this of the meta it is about to take as durable
    /// at open, and writes it again where the device does not hold it.
    fn read_durable(&self, buf: &mut [u8], offset: u64) -> io::Result<bool> {
        let _ = (buf, offset);
        Ok(false)
    }

    /// Makes the data written so far durable (`fdatasync`), including any length change
    /// needed to read it back.
    fn sync_data(&self) -> io::Result<()>;

    /// Makes the data and all metadata durable (`fsync`); used after growing the file unless
    /// the user asked for `no_grow_sync`.
    fn sync_all(&self) -> io::Result<()>;

    /// Makes the file at least `len` bytes long; never shrinks it.
    ///
    /// The space is allocated, not just promised (`fallocate` where the filesystem supports
    /// it), so later writes below `len` cannot fail with `ENOSPC`.
    fn grow(&self, len: u64) -> io::Result<()>;

    /// Makes the file exactly `len` bytes long when it is longer (`ftruncate`); never grows
    /// it. The database calls it only for bytes past the high-water mark of a meta that is
    /// durable already, and only once no open transaction's snapshot reaches them, since a
    /// page cut off under a mapping raises `SIGBUS` when touched.
    ///
    /// The new length is durable after the next [`sync_data`](Storage::sync_data) or
    /// [`sync_all`](Storage::sync_all); a crash before that may leave either length.
    ///
    /// The default answers [`io::ErrorKind::Unsupported`], and the database then leaves the
    /// file at its length (only the high-water mark comes down); a wrapper around a storage
    /// of this module delegates it.
    fn shrink(&self, len: u64) -> io::Result<()> {
        let _ = len;
        Err(io::Error::new(
            io::ErrorKind::Unsupported,
            "this storage cannot shrink its file",
        ))
    }

    /// Maps the first `len` bytes of the file read-only and shared.
    ///
    /// `len` may exceed the file's length: the extra address space is reserved so the file can
    /// grow into it. Bytes written after mapping, through this storage, show in the mapping.
    ///
    /// The mapping's soundness rests on two promises from the caller (the database):
    /// - it reads only bytes that lie within the file (below its high-water mark); a page
    ///   wholly past the end raises `SIGBUS` when touched;
    /// - it never reads a page through the mapping while that page may be written through this
    ///   storage: pages are rewritten only after every reader that could reach them has ended,
    ///   and the metas are read with [`read_exact_at`](Storage::read_exact_at) at open and
    ///   then kept in memory.
    fn map(&self, len: usize) -> io::Result<Mapping>;

    /// The file's path, for error messages; `None` for storage that has no path.
    fn path(&self) -> Option<&Path>;

    /// The identity of this boot of the operating system whose page cache holds the file's
    /// unsynced writes, or `None` when that cannot be known (the default).
    ///
    /// A commit that skips its syncs (`Durability::None`) writes its meta with this id: a
    /// later open in the same boot finds every page the commit wrote (a process crash keeps
    /// the page cache), while after a reboot — an OS crash or a power loss, which may have
    /// dropped any unsynced write — the id differs and the database opens the last durable
    /// commit instead. With `None` such commits are never trusted after the handle that made
    /// them is gone without closing: a crash of the process loses them too.
    fn boot_id(&self) -> Option<BootId> {
        None
    }

    /// Takes the file for one open database, until the returned [`Claim`] is dropped.
    ///
    /// Two databases open on one file would each believe they are its only writer, and one
    /// would rewrite pages the other's readers are reading. So a database claims its storage
    /// when it opens and keeps the claim until it closes; a second claim of the same file —
    /// through another `Arc` of the same storage, or a clone of a `SimFile` — fails with
    /// [`io::ErrorKind::ResourceBusy`] while the first is held. A claim can only be made by the
    /// storages of this module, so a wrapper around one delegates to it.
    fn claim(&self) -> io::Result<Claim>;

    /// The table of reader processes in the lock file, when this storage has one: the
    /// writer's (it publishes its newest meta there, and keeps every page a live slot's
    /// snapshot reaches), or the one a read-only open beside a writer attached to (its
    /// transactions read the published meta and register in slots). `None` by default.
    fn reader_table(&self) -> Option<&ReaderTable> {
        None
    }
}

/// Proof that one open database owns a storage's file; dropping it gives the file up. Made
/// only by [`Storage::claim`] of this module's storages.
///
/// ```
/// use rbolt_storage::{FileOptions, FileStorage, Storage};
/// # let dir = tempfile::tempdir().unwrap();
/// let storage = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
/// let claim = storage.claim().unwrap();
/// let second = storage.claim().unwrap_err();
/// assert_eq!(second.kind(), std::io::ErrorKind::ResourceBusy);
/// drop(claim); // gives the file up
/// assert!(storage.claim().is_ok());
/// ```
#[derive(Debug)]
pub struct Claim {
    owned: Arc<AtomicBool>,
}

/// The flag behind [`Storage::claim`]: one per file, shared by every handle on that file.
#[derive(Debug, Default)]
pub(crate) struct ClaimFlag {
    owned: Arc<AtomicBool>,
}

impl ClaimFlag {
    /// Claims the file, or fails if a database already holds it.
    pub(crate) fn claim(&self) -> io::Result<Claim> {
        match self
            .owned
            .compare_exchange(false, true, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => Ok(Claim {
                owned: self.owned.clone(),
            }),
            Err(_) => Err(io::Error::new(
                io::ErrorKind::ResourceBusy,
                "the storage is already open as a database",
            )),
        }
    }
}

impl Drop for Claim {
    fn drop(&mut self) {
        self.owned.store(false, Ordering::Release);
    }
}

/// The error a read-only storage returns for `op` instead of touching the file.
fn read_only_error(op: &str) -> io::Error {
    io::Error::new(
        io::ErrorKind::PermissionDenied,
        format!("cannot {op}: the storage was opened read-only"),
    )
}

/// An [`io::Write`] onto a storage from its start: what is written is gathered into writes of
/// [`WRITE_BYTES_MAX`] bytes, so that a copy made of many small writes (a backup, page by page)
/// costs few system calls. Call [`flush`](io::Write::flush) at the end; syncing is the
/// caller's.
///
/// ```
/// use rbolt_storage::{SimFile, Storage, StorageWriter};
/// use std::io::Write;
/// let sim = SimFile::new().unwrap();
/// let mut writer = StorageWriter::new(&sim);
/// for _ in 0..100 {
///     writer.write_all(&[7u8; 1000]).unwrap();
/// }
/// writer.flush().unwrap();
/// assert_eq!(sim.len().unwrap(), 100_000);
/// assert_eq!(sim.counts().writes(), 2); // 64 KiB, then the rest
/// ```
pub struct StorageWriter<'s> {
    storage: &'s dyn Storage,
    buf: Vec<u8>,
    offset: u64,
}

impl<'s> StorageWriter<'s> {
    /// A writer onto `storage`, from offset 0.
    pub fn new(storage: &'s dyn Storage) -> StorageWriter<'s> {
        StorageWriter {
            storage,
            buf: Vec::with_capacity(WRITE_BYTES_MAX),
            offset: 0,
        }
    }
}

impl fmt::Debug for StorageWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StorageWriter")
            .field("offset", &self.offset)
            .field("buffered", &self.buf.len())
            .finish_non_exhaustive()
    }
}

impl io::Write for StorageWriter<'_> {
    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        let take = bytes.len().min(WRITE_BYTES_MAX - self.buf.len());
        self.buf.extend_from_slice(&bytes[..take]);
        if self.buf.len() == WRITE_BYTES_MAX {
            self.flush()?;
        }
        Ok(take)
    }

    fn flush(&mut self) -> io::Result<()> {
        if !self.buf.is_empty() {
            self.storage.write_all_at(&self.buf, self.offset)?;
            self.offset += self.buf.len() as u64;
            self.buf.clear();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::io::{self, Write as _};
    use std::path::Path;

    use super::{
        BootId, Claim, FileOptions, FileStorage, Mapping, Storage, StorageWriter, system_page_size,
    };

    /// A storage that implements only the trait's required methods (delegated to a file), so
    /// that the provided ones run as a storage outside this crate would get them.
    #[derive(Debug)]
    struct Minimal(FileStorage);

    impl Storage for Minimal {
        fn len(&self) -> io::Result<u64> {
            self.0.len()
        }
        fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
            self.0.read_exact_at(buf, offset)
        }
        fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            self.0.write_all_at(buf, offset)
        }
        fn write_whole_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
            self.0.write_whole_at(buf, offset)
        }
        fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
            self.0.write_vectored_at(bufs, offset)
        }
        fn sync_data(&self) -> io::Result<()> {
            self.0.sync_data()
        }
        fn sync_all(&self) -> io::Result<()> {
            self.0.sync_all()
        }
        fn grow(&self, len: u64) -> io::Result<()> {
            self.0.grow(len)
        }
        fn map(&self, len: usize) -> io::Result<Mapping> {
            self.0.map(len)
        }
        fn path(&self) -> Option<&Path> {
            self.0.path()
        }
        fn claim(&self) -> io::Result<Claim> {
            self.0.claim()
        }
    }

    fn minimal() -> (tempfile::TempDir, Minimal) {
        let dir = tempfile::tempdir().unwrap();
        let file = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
        (dir, Minimal(file))
    }

    #[test]
    fn the_system_page_is_at_least_4_kib_and_a_power_of_two() {
        // Every system the crate builds on has pages of 4 KiB or more.
        let size = system_page_size();
        assert!(size >= 4096 && size.is_power_of_two(), "{size}");
    }

    #[test]
    fn is_empty_says_whether_the_file_has_a_byte() {
        let (_dir, storage) = minimal();
        assert!(storage.is_empty().unwrap());
        storage.write_all_at(b"x", 0).unwrap();
        assert!(!storage.is_empty().unwrap());
    }

    /// The provided methods: no durable read (the buffer untouched), no shrink (the file
    /// untouched), no boot id, no reader table.
    #[test]
    fn a_storage_without_the_optional_methods_cannot_read_durably_shrink_or_name_a_boot() {
        let (_dir, storage) = minimal();
        storage.write_all_at(&[7; 8192], 0).unwrap();
        let mut buf = [1u8; 16];
        assert!(!storage.read_durable(&mut buf, 0).unwrap());
        assert_eq!(buf, [1; 16]);
        let error = storage.shrink(4096).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::Unsupported);
        assert_eq!(storage.len().unwrap(), 8192);
        assert_eq!(storage.boot_id(), None::<BootId>);
        assert!(storage.reader_table().is_none());
    }

    #[test]
    fn a_storage_writer_shows_its_offset_and_what_it_buffers() {
        let (_dir, storage) = minimal();
        let mut writer = StorageWriter::new(&storage);
        writer.write_all(&[1; 100]).unwrap();
        writer.flush().unwrap();
        writer.write_all(&[2; 10]).unwrap();
        let shown = format!("{writer:?}");
        assert_eq!(shown, "StorageWriter { offset: 100, buffered: 10, .. }");
    }
}
