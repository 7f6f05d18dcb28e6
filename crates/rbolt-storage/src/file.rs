//! [`FileStorage`]: the database file on disk, locked for the life of the handle.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use memmap2::MmapOptions;

use crate::reader_table::ReaderTable;
use crate::write_map::WriteMap;
use crate::{Claim, ClaimFlag, Mapping, Storage, fdio, read_only_error};
use rbolt_page::BootId;

mod lock;
mod options;

pub use lock::LockMode;
use lock::lock_for;
pub use options::{FileOptions, OpenError};

/// The database file on disk: the production [`Storage`].
///
/// The file carries an advisory `flock` for as long as the `FileStorage` lives: exclusive for
/// read-write, shared for read-only, so one process writes and any number read, as long as
/// every process cooperates by taking the lock.
///
/// ```
/// use rbolt_storage::{FileOptions, FileStorage, Storage};
/// # let dir = tempfile::tempdir().unwrap();
/// let storage = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
/// storage.write_all_at(b"hello", 0).unwrap();
/// storage.sync_data().unwrap();
/// let mut buf = [0u8; 5];
/// storage.read_exact_at(&mut buf, 0).unwrap();
/// assert_eq!(&buf, b"hello");
/// let map = storage.map(4096).unwrap(); // may be longer than the file
/// assert_eq!(&map[..5], b"hello");
/// ```
#[derive(Debug)]
pub struct FileStorage {
    file: File,
    path: PathBuf,
    read_only: bool,
    /// Serialises [`grow`](Storage::grow): between reading the length and extending the file,
    /// another grow to a larger length must not run, or the `ftruncate` fallback could shrink
    /// the file back.
    grow_lock: Mutex<()>,
    /// Rewrites of cached pages as copies into a writable mapping (see `WriteMap`). Taken
    /// after `grow_lock` where both are.
    write_map: Mutex<WriteMap>,
    /// Which database has the file open (see [`Storage::claim`]).
    claim: ClaimFlag,
    /// The lock this open holds, and how readers of other processes coexist with it.
    lock_mode: LockMode,
    /// The reader table in the lock file: the writer's, or the one a reader attached to.
    table: Option<ReaderTable>,
    /// This open's entry in the process's table of open files.
    _registered: Registered,
}

/// The files this process has open through `FileStorage`, by device and inode, with how:
/// `flock` locks of two descriptors of one process exclude each other as those of two
/// processes do, so a second read-write open in the same process would wait for itself.
static OPEN_FILES: Mutex<Vec<OpenFile>> = Mutex::new(Vec::new());

#[derive(Debug)]
struct OpenFile {
    dev: u64,
    ino: u64,
    readers: usize,
    writer: bool,
}

/// An entry in `OPEN_FILES`, removed when dropped.
#[derive(Debug)]
struct Registered {
    dev: u64,
    ino: u64,
    writer: bool,
}

impl Registered {
    /// Registers an open of `file`, unless the process has it open in a way that conflicts.
    fn new(file: &File, path: &Path, writer: bool) -> Result<Registered, OpenError> {
        let stat = file.metadata().map_err(|source| OpenError::Open {
            path: path.to_owned(),
            source,
        })?;
        let (dev, ino) = (stat.dev(), stat.ino());
        let mut open = OPEN_FILES.lock().unwrap_or_else(PoisonError::into_inner);
        match open.iter_mut().find(|f| f.dev == dev && f.ino == ino) {
            Some(entry) if writer || entry.writer => {
                return Err(OpenError::AlreadyOpen {
                    path: path.to_owned(),
                });
            }
            Some(entry) => entry.readers += 1,
            None => open.push(OpenFile {
                dev,
                ino,
                readers: usize::from(!writer),
                writer,
            }),
        }
        Ok(Registered { dev, ino, writer })
    }
}

impl Drop for Registered {
    fn drop(&mut self) {
        let mut open = OPEN_FILES.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(index) = open
            .iter()
            .position(|f| f.dev == self.dev && f.ino == self.ino)
        {
            let entry = &mut open[index];
            if self.writer {
                entry.writer = false;
            } else {
                entry.readers -= 1;
            }
            if !entry.writer && entry.readers == 0 {
                open.swap_remove(index);
            }
        }
    }
}

impl Drop for FileStorage {
    /// Releases the lock before the descriptor closes. Closing alone is not enough: a process
    /// that another thread of ours forked holds a copy of every descriptor until it execs (or
    /// for good, without exec), and an `flock` lock lasts until its last copy closes, so the
    /// file would still look locked to the next open, here or in another process. An unlock
    /// through any copy releases the lock for all of them.
    fn drop(&mut self) {
        // The writer leaves its table before its `flock`: the next writer must find the
        // table's writer lock free once it holds the file.
        if let Some(table) = self.table.take()
            && !self.read_only
        {
            table.writer_closed();
        }
        if self.lock_mode == LockMode::BesideWriter {
            return; // no flock taken
        }
        // Nothing to do on failure: the close that follows releases it as it always could.
        let _ = self.file.unlock();
    }
}

impl FileStorage {
    /// Opens (creating if asked) and locks the file at `path`.
    ///
    /// Waits for a contended lock as [`FileOptions::lock_timeout`] says, retrying every 50 ms,
    /// and returns [`OpenError::LockTimeout`] when the wait runs out.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage, Storage};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let storage = FileStorage::open(dir.path().join("db"), FileOptions::new()).unwrap();
    /// assert!(storage.is_empty().unwrap()); // created empty
    /// // A second open of the same file waits for the lock; with a zero timeout, it gives up.
    /// let once = FileOptions::new().lock_timeout(Some(std::time::Duration::ZERO));
    /// assert!(FileStorage::open(dir.path().join("db"), once).is_err());
    /// ```
    pub fn open(path: impl AsRef<Path>, options: FileOptions) -> Result<FileStorage, OpenError> {
        let path = path.as_ref();
        let open_error = |source: io::Error| OpenError::Open {
            path: path.to_owned(),
            source,
        };
        // std opens with CLOEXEC: a child process must not inherit the descriptor, or it would
        // keep the lock (and the file) alive after this handle is dropped.
        let mut open = OpenOptions::new();
        open.read(true).write(!options.read_only).mode(options.mode);
        let create = options.create && !options.read_only;
        let (file, created) = open_or_create(path, create, |create_new| {
            open.clone().create_new(create_new).open(path)
        })
        .map_err(open_error)?;
        if created {
            // A new file's name is durable only once its directory is synced; a crash before
            // that could lose the file after its first commits were acknowledged.
            sync_parent_dir(path).map_err(open_error)?;
        }
        // Before the lock: a conflict within this process fails at once instead of waiting.
        let registered = Registered::new(&file, path, !options.read_only)?;
        let (lock_mode, table) = lock_for(&file, path, &options)?;
        let write_map = Mutex::new(WriteMap::new(&file, !options.read_only));
        Ok(FileStorage {
            write_map,
            file,
            path: path.to_owned(),
            read_only: options.read_only,
            grow_lock: Mutex::new(()),
            claim: ClaimFlag::default(),
            lock_mode,
            table,
            _registered: registered,
        })
    }

    /// The lock this open holds, and so how it shares the file with other processes.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage, LockMode};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("db");
    /// drop(FileStorage::open(&path, FileOptions::new()).unwrap());
    /// let reader = FileStorage::open(&path, FileOptions::new().read_only(true)).unwrap();
    /// assert_eq!(reader.lock_mode(), LockMode::Shared);
    /// ```
    pub fn lock_mode(&self) -> LockMode {
        self.lock_mode
    }

    /// Whether the file was opened read-only.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("file");
    /// assert!(!FileStorage::open(&path, FileOptions::new()).unwrap().is_read_only());
    /// let read_only = FileStorage::open(&path, FileOptions::new().read_only(true)).unwrap();
    /// assert!(read_only.is_read_only());
    /// ```
    pub fn is_read_only(&self) -> bool {
        self.read_only
    }

    /// Cuts the file to zero bytes, to write it anew: for a copy that replaces whatever was
    /// at its path. Only after the lock is taken, so a file another handle has open (a
    /// database, say) is never cut.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage, Storage};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("file");
    /// std::fs::write(&path, b"old contents").unwrap();
    /// let storage = FileStorage::open(&path, FileOptions::new()).unwrap();
    /// storage.clear().unwrap();
    /// assert_eq!(storage.len().unwrap(), 0);
    /// ```
    pub fn clear(&self) -> io::Result<()> {
        self.check_writable("truncate")?;
        // As `shrink` does: under the grow lock, and no copy until the file has grown again.
        let _serialised = self
            .grow_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        let mut write_map = self.write_map();
        write_map.cut_to(0);
        self.file.set_len(0)
    }

    /// The bytes this handle has written as copies into a writable mapping of the file
    /// rather than with write system calls, since it opened.
    ///
    /// On 64-bit Linux, on ext4 and tmpfs, a write of pages already written since the last
    /// sync (a commit without a sync rewriting the pages an earlier one wrote) is made as a
    /// copy: for the page cache, and so for what a power loss can leave behind, it is the same
    /// as a `pwrite`, at a third of its cost (the module `write_map` of this crate's source
    /// says what else differs: a kill may tear a copy, and a failing filesystem raises
    /// `SIGBUS`). Tools that count a process's written bytes from its system calls (`wchar`
    /// in `/proc/PID/io`) do not see these bytes; this count adds them.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage, Storage};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let storage = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
    /// storage.grow(8192).unwrap();
    /// storage.write_all_at(&[1; 4096], 0).unwrap(); // a pwrite
    /// storage.write_all_at(&[2; 4096], 0).unwrap(); // before a sync: a copy, where supported
    /// assert!(matches!(storage.copied_bytes(), 0 | 4096));
    /// storage.sync_data().unwrap();
    /// let before = storage.copied_bytes();
    /// storage.write_all_at(&[3; 4096], 0).unwrap(); // clean after the sync: a pwrite again
    /// assert_eq!(storage.copied_bytes(), before);
    /// ```
    pub fn copied_bytes(&self) -> u64 {
        self.write_map().copied_bytes()
    }

    /// Whether this handle writes a page written again before a sync as a copy into a
    /// mapping ([`copied_bytes`](FileStorage::copied_bytes)): opened read-write, on Linux
    /// (64-bit, 4 KiB pages, without the feature `portable-fallback`), on ext4 or tmpfs.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("file");
    /// let writer = FileStorage::open(&path, FileOptions::new()).unwrap();
    /// drop(writer);
    /// let reader = FileStorage::open(&path, FileOptions::new().read_only(true)).unwrap();
    /// assert!(!reader.copies_rewrites());
    /// ```
    pub fn copies_rewrites(&self) -> bool {
        self.write_map().enabled()
    }

    /// The state of writes through the mapping, locked.
    fn write_map(&self) -> std::sync::MutexGuard<'_, WriteMap> {
        self.write_map
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    fn check_writable(&self, op: &str) -> io::Result<()> {
        if self.read_only {
            Err(read_only_error(op))
        } else {
            Ok(())
        }
    }
}

/// Opens the file at `path` with `open(false)`, or, when it is missing and `create` says so,
/// creates it with `open(true)` (`O_EXCL`): `(file, true)` when this call created it, so
/// that the directory entry is made durable by the one who made it. Another process may win
/// the race to create it: then it opens what that one created.
fn open_or_create(
    path: &Path,
    create: bool,
    open: impl Fn(bool) -> io::Result<File>,
) -> io::Result<(File, bool)> {
    loop {
        match open(false) {
            Ok(file) => return Ok((file, false)),
            Err(error) if create && error.kind() == io::ErrorKind::NotFound => {}
            Err(error) => return Err(error),
        }
        match open(true) {
            Ok(file) => return Ok((file, true)),
            // A symbolic link to a missing file: `O_EXCL` never follows a link, so it finds
            // the name taken while the open finds no file, forever. Open it once more (its
            // target may have been made meanwhile), and fail with that open's `NotFound`.
            Err(error)
                if error.kind() == io::ErrorKind::AlreadyExists
                    && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_symlink()) =>
            {
                return open(false).map(|file| (file, false)).map_err(|error| {
                    if error.kind() == io::ErrorKind::NotFound {
                        io::Error::new(error.kind(), "a symbolic link to a missing file")
                    } else {
                        error
                    }
                });
            }
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(error),
        }
    }
}

/// Syncs the directory holding `path`, so that a name just created in it survives a crash.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let path = dir.path().join("new-file");
/// std::fs::write(&path, b"data").unwrap();
/// // The file's name is durable once its directory is synced.
/// rbolt_storage::sync_parent_dir(&path).unwrap();
/// // A path with no directory part means the current directory.
/// rbolt_storage::sync_parent_dir(std::path::Path::new("relative-name")).unwrap();
/// ```
pub fn sync_parent_dir(path: &Path) -> io::Result<()> {
    let parent = match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    };
    // Read-only and a directory: Unix systems let a directory be opened and synced so.
    let dir = File::open(parent)?;
    if !dir.metadata()?.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::NotADirectory,
            format!("{} is not a directory", parent.display()),
        ));
    }
    dir.sync_all()
}

impl Storage for FileStorage {
    fn len(&self) -> io::Result<u64> {
        fdio::len(&self.file)
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        fdio::read_exact_at(&self.file, buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_writable("write")?;
        self.write_map().write(&self.file, &[buf], offset, || {
            fdio::write_all_at(&self.file, buf, offset)
        })
    }

    fn read_durable(&self, buf: &mut [u8], offset: u64) -> io::Result<bool> {
        fdio::read_durable(&self.path, buf, offset)
    }

    fn write_whole_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.check_writable("write")?;
        // Never through the write map: a copy can be cut short by a kill.
        fdio::write_all_at(&self.file, buf, offset)
    }

    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.check_writable("write")?;
        self.write_map().write(&self.file, bufs, offset, || {
            fdio::write_vectored_at(&self.file, bufs, offset)
        })
    }

    fn sync_data(&self) -> io::Result<()> {
        self.check_writable("sync")?;
        // Before the sync and not during it: a page written meanwhile is only copied into
        // with a fault more.
        self.write_map().synced();
        self.file.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.check_writable("sync")?;
        // Before the sync and not during it: a page written meanwhile is only copied into
        // with a fault more.
        self.write_map().synced();
        self.file.sync_all()
    }

    fn grow(&self, len: u64) -> io::Result<()> {
        self.check_writable("grow")?;
        let _serialised = self
            .grow_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if fdio::len(&self.file)? >= len {
            return Ok(());
        }
        if fdio::allocate(&self.file, len)? {
            self.write_map().allocated_to(len);
        }
        Ok(())
    }

    fn shrink(&self, len: u64) -> io::Result<()> {
        self.check_writable("shrink")?;
        // Under the grow lock: a grow between reading the length and cutting it must not be
        // undone.
        let _serialised = self
            .grow_lock
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        if fdio::len(&self.file)? <= len {
            return Ok(());
        }
        // No copy into the mapping may reach past the new end (it would raise SIGBUS): the
        // bound comes down first, and stays locked until the file is cut.
        let mut write_map = self.write_map();
        write_map.cut_to(len);
        self.file.set_len(len)
    }

    fn map(&self, len: usize) -> io::Result<Mapping> {
        // SAFETY: memmap2 requires that the mapped file is not modified or truncated in ways
        // that break the `&[u8]` the mapping hands out, for as long as the mapping lives.
        // - Truncation: this FileStorage holds an flock (exclusive for the writer, shared for
        //   readers) for its whole life, so no cooperating process changes the file; or, in
        //   `LockMode::BesideWriter`, it holds a slot of the writer's reader table, where the
        //   database publishes the length each of its transactions reads, and the writer
        //   never cuts the file below the length a live slot names (nor reuses a page a live
        //   slot's snapshot reaches) — the same promise the writer keeps to its own readers. The
        //   database itself shrinks the file (`shrink`) only past the high-water mark of every
        //   snapshot a live transaction holds (see `vacuum::truncate_if_unseen`), so no byte
        //   any transaction reads leaves the file while its mapping exists; bytes beyond are
        //   reserved address space that nothing touches, as below.
        // - Bytes past the end: `len` may reach past the end of the file (reserved address
        //   space). The database only reads bytes below its high-water mark, which is within
        //   the file, so it never touches a page past the end, which would raise SIGBUS.
        // - Changes to the contents: the only writer is the database, through this storage,
        //   and it never rewrites a page that a live transaction can read (copy-on-write; a
        //   page is reused only after every reader that could see it has ended), so the bytes
        //   a reader reads do not change under it. The `&[u8]` over the whole mapping does
        //   span pages the writer is rewriting (freed pages, the metas) without reading them;
        //   like every mmap-backed store, we rely on a change to bytes that are never loaded
        //   being unobservable, even though they sit behind a shared slice.
        // Caveat: advisory locks bind only processes that take them. A process that ignores
        // the lock and truncates or rewrites the file can still make readers see torn data or
        // be killed by SIGBUS; no mapping-based store can prevent that.
        let mmap = unsafe { MmapOptions::new().len(len).map(&self.file)? };
        Ok(Mapping::new(mmap))
    }

    fn path(&self) -> Option<&Path> {
        Some(&self.path)
    }

    fn reader_table(&self) -> Option<&ReaderTable> {
        self.table.as_ref()
    }

    fn claim(&self) -> io::Result<Claim> {
        self.claim.claim()
    }

    fn boot_id(&self) -> Option<BootId> {
        kernel_boot_id()
    }
}

/// This boot's id as the kernel gives it (Linux: a random UUID made at every boot), read once.
/// `None` where there is none to read: non-durable commits are then not trusted after a crash.
fn kernel_boot_id() -> Option<BootId> {
    static BOOT_ID: std::sync::OnceLock<Option<BootId>> = std::sync::OnceLock::new();
    *BOOT_ID.get_or_init(|| {
        let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
        parse_uuid(text.trim())
    })
}

/// The 16 bytes of a UUID in its text form (`8-4-4-4-12` hex digits).
fn parse_uuid(text: &str) -> Option<BootId> {
    let digits: Vec<u8> = text.bytes().filter(|&b| b != b'-').collect();
    if digits.len() != 32 || text.len() != 36 {
        return None;
    }
    let mut id = [0u8; 16];
    for (byte, pair) in id.iter_mut().zip(digits.chunks_exact(2)) {
        let pair = std::str::from_utf8(pair).ok()?;
        *byte = u8::from_str_radix(pair, 16).ok()?;
    }
    Some(id)
}

#[cfg(test)]
mod tests {
    use super::{
        FileOptions, FileStorage, OpenError, kernel_boot_id, open_or_create, parse_uuid,
        sync_parent_dir,
    };
    use crate::Storage;
    use std::os::unix::fs::MetadataExt;
    use std::path::Path;

    const PAGE: usize = 4096;

    /// Whether this test's files take copies into the mapping: on 64-bit Linux with 4 KiB pages
    /// (without the portable fallback) on ext4 or tmpfs, as the directory's filesystem says.
    /// The tests check the copies there, and that there are none elsewhere.
    fn copies_expected(dir: &Path) -> bool {
        #[cfg(target_os = "linux")]
        {
            #[allow(
                clippy::unnecessary_cast,
                reason = "the field's type differs between architectures"
            )]
            let kind = rustix::fs::statfs(dir).unwrap().f_type as u64;
            crate::LINUX_CALLS
                && cfg!(target_pointer_width = "64")
                && rustix::param::page_size() == PAGE
                && matches!(kind, 0xEF53 | 0x0102_1994)
        }
        #[cfg(not(target_os = "linux"))]
        {
            let _ = dir;
            false
        }
    }

    fn copies(storage: &FileStorage) -> u64 {
        storage.write_map().copies()
    }

    fn read(storage: &FileStorage, offset: u64, len: usize) -> Vec<u8> {
        let mut buf = vec![0; len];
        storage.read_exact_at(&mut buf, offset).unwrap();
        buf
    }

    /// The filesystems the tests run on: the temporary directory's, and tmpfs where there is
    /// one.
    fn dirs() -> Vec<tempfile::TempDir> {
        let mut dirs = vec![tempfile::tempdir().unwrap()];
        if Path::new("/dev/shm").is_dir()
            && let Ok(dir) = tempfile::tempdir_in("/dev/shm")
        {
            dirs.push(dir);
        }
        dirs
    }

    #[test]
    fn rewrites_before_a_sync_are_copies_that_every_reader_of_the_file_sees() {
        for dir in dirs() {
            let expect = copies_expected(dir.path());
            let path = dir.path().join("file");
            let storage = FileStorage::open(&path, FileOptions::new()).unwrap();
            storage.grow(16 * PAGE as u64).unwrap();
            let map = storage.map(1 << 20).unwrap();
            // The first write of a page is a system call; its rewrite before a sync a copy.
            storage.write_all_at(&[1; PAGE], 3 * PAGE as u64).unwrap();
            assert_eq!(copies(&storage), 0);
            storage.write_all_at(&[2; PAGE], 3 * PAGE as u64).unwrap();
            assert_eq!(copies(&storage), u64::from(expect), "{dir:?}");
            // A run with a page not yet written is a system call; written again, a copy.
            let run: [&[u8]; 2] = [&[3; PAGE], &[4; PAGE]];
            storage.write_vectored_at(&run, 3 * PAGE as u64).unwrap();
            assert_eq!(copies(&storage), u64::from(expect));
            let run: [&[u8]; 2] = [&[5; PAGE], &[6; 100]];
            storage.write_vectored_at(&run, 3 * PAGE as u64).unwrap();
            assert_eq!(copies(&storage), 2 * u64::from(expect));
            // Whichever way it went, the file, its mapping and another handle read the same.
            let mut want = vec![5u8; PAGE];
            want.extend_from_slice(&[6; 100]);
            want.extend_from_slice(&[4; PAGE - 100]);
            assert_eq!(read(&storage, 3 * PAGE as u64, 2 * PAGE), want);
            assert_eq!(&map[3 * PAGE..5 * PAGE], &want[..]);
            let other = std::fs::read(&path).unwrap();
            assert_eq!(&other[3 * PAGE..5 * PAGE], &want[..]);
            assert_eq!(storage.len().unwrap(), 16 * PAGE as u64);
            // After a sync the pages are clean: the next write is a system call again.
            storage.sync_data().unwrap();
            storage.write_all_at(&[7; PAGE], 3 * PAGE as u64).unwrap();
            assert_eq!(copies(&storage), 2 * u64::from(expect));
            assert_eq!(&map[3 * PAGE..4 * PAGE], &[7; PAGE][..]);
            // So does `sync_all`.
            storage.write_all_at(&[7; PAGE], 3 * PAGE as u64).unwrap();
            assert_eq!(copies(&storage), 3 * u64::from(expect));
            storage.sync_all().unwrap();
            storage.write_all_at(&[7; PAGE], 3 * PAGE as u64).unwrap();
            assert_eq!(copies(&storage), 3 * u64::from(expect));
            // Past the end of the file: a system call, which extends it.
            storage.write_all_at(&[8; PAGE], 20 * PAGE as u64).unwrap();
            storage
                .write_all_at(&[9; 10], 21 * PAGE as u64 - 10)
                .unwrap();
            assert_eq!(storage.len().unwrap(), 21 * PAGE as u64);
            // The second lies inside the (now allocated) file on a dirty page: a copy.
            assert_eq!(copies(&storage), 4 * u64::from(expect));
            assert_eq!(read(&storage, 21 * PAGE as u64 - 10, 10), [9; 10]);
        }
    }

    #[test]
    fn no_copy_reaches_past_a_shrink_and_copies_resume_after_growth() {
        for dir in dirs() {
            let expect = u64::from(copies_expected(dir.path()));
            let storage = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
            storage.grow(16 * PAGE as u64).unwrap();
            for round in 0..2u8 {
                for page in 0..16u64 {
                    storage
                        .write_all_at(&[round; PAGE], page * PAGE as u64)
                        .unwrap();
                }
            }
            assert_eq!(copies(&storage), 16 * expect);
            // Cut to 8 pages. A partial write of page 12 extends the file into it and makes it
            // dirty again; the whole page must still not be a copy (most of it lies past the
            // end, where a copy would be lost or raise SIGBUS): the write extends the file.
            storage.shrink(8 * PAGE as u64).unwrap();
            storage.write_all_at(&[9; 100], 12 * PAGE as u64).unwrap();
            assert_eq!(storage.len().unwrap(), 12 * PAGE as u64 + 100);
            storage.write_all_at(&[9; PAGE], 12 * PAGE as u64).unwrap();
            assert_eq!(copies(&storage), 16 * expect);
            assert_eq!(storage.len().unwrap(), 13 * PAGE as u64);
            assert_eq!(read(&storage, 12 * PAGE as u64, PAGE), [9; PAGE]);
            assert_eq!(read(&storage, 10 * PAGE as u64, PAGE), [0; PAGE]); // a hole now
            // Below the cut, pages stay dirty: copies.
            storage.write_all_at(&[10; PAGE], 2 * PAGE as u64).unwrap();
            assert_eq!(copies(&storage), 17 * expect);
            // Grown back (allocated), page 12 is dirty and inside: a copy again.
            storage.grow(16 * PAGE as u64).unwrap();
            storage.write_all_at(&[11; PAGE], 12 * PAGE as u64).unwrap();
            assert_eq!(copies(&storage), 18 * expect);
            assert_eq!(read(&storage, 12 * PAGE as u64, PAGE), [11; PAGE]);
            // Cut to nothing and written anew: nothing of the old pages counts.
            storage.clear().unwrap();
            storage.write_all_at(&[12; PAGE], 0).unwrap();
            assert_eq!(copies(&storage), 18 * expect);
            assert_eq!(storage.len().unwrap(), PAGE as u64);
        }
    }

    #[test]
    fn a_sparse_file_is_allocated_before_its_first_copy_and_large_files_remap() {
        for dir in dirs() {
            let expect = u64::from(copies_expected(dir.path()));
            let path = dir.path().join("file");
            // Grown as Go grows a file: a sparse extension, no blocks behind it.
            let len = 40u64 << 20;
            std::fs::File::create(&path).unwrap().set_len(len).unwrap();
            let storage = FileStorage::open(&path, FileOptions::new()).unwrap();
            let far = 33u64 << 20; // past the first mapping's reach
            for offset in [PAGE as u64, far] {
                storage.write_all_at(&[1; PAGE], offset).unwrap();
                storage.write_all_at(&[2; PAGE], offset).unwrap();
                assert_eq!(read(&storage, offset, PAGE), [2; PAGE]);
            }
            assert_eq!(copies(&storage), 2 * expect);
            if expect == 1 && !dir.path().starts_with("/dev/shm") {
                // Blocks were allocated for the whole file before the first copy.
                let blocks = std::fs::metadata(&path).unwrap().blocks();
                assert!(blocks * 512 >= len, "{blocks} blocks for {len} bytes");
            }
            assert_eq!(storage.len().unwrap(), len);
        }
    }

    #[test]
    fn a_read_only_file_is_never_copied_into() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        std::fs::write(&path, [0u8; PAGE]).unwrap();
        let storage = FileStorage::open(&path, FileOptions::new().read_only(true)).unwrap();
        // Refused before the write map (a read-only handle's never copies), twice over.
        assert!(storage.write_all_at(&[1; PAGE], 0).is_err());
        assert!(storage.write_all_at(&[1; PAGE], 0).is_err());
        assert!(!storage.copies_rewrites());
        assert_eq!(copies(&storage), 0);
        assert_eq!(std::fs::read(&path).unwrap(), [0u8; PAGE]);
    }

    #[test]
    fn boot_ids_parse_from_the_kernels_text_and_nothing_else() {
        let id = parse_uuid("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0").unwrap();
        assert_eq!(id[0], 0x0f);
        assert_eq!(id[15], 0xf0);
        for bad in [
            "",
            "0f1e2d3c4b5a69788796a5b4c3d2e1f0",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1fz",
            "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f",
        ] {
            assert_eq!(parse_uuid(bad), None, "{bad:?}");
        }
        // On Linux the kernel has one, and it stays the same for the whole boot.
        if cfg!(target_os = "linux") {
            assert!(kernel_boot_id().is_some());
            assert_eq!(kernel_boot_id(), kernel_boot_id());
        }
    }

    /// A process forked by another thread holds copies of our descriptors until it execs: the
    /// lock of a storage that was closed meanwhile must not live on in them, or a reopen right
    /// after a close fails for no process that has the file open.
    #[test]
    fn file_storage_lock_ends_at_drop_though_a_forked_process_holds_a_copy() {
        use std::os::unix::process::CommandExt;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let storage = FileStorage::open(&path, FileOptions::new()).unwrap();
        let forked = dir.path().join("forked");
        let marker = std::ffi::CString::new(forked.as_os_str().as_encoded_bytes()).unwrap();
        let spawner = std::thread::spawn(move || {
            let mut command = std::process::Command::new("true");
            // SAFETY: between fork and exec the closure only makes two system calls, open and
            // nanosleep, which are async-signal-safe, on memory prepared before the fork; it
            // allocates nothing and takes no lock.
            unsafe {
                command.pre_exec(move || {
                    let flags = rustix::fs::OFlags::CREATE | rustix::fs::OFlags::WRONLY;
                    rustix::fs::open(marker.as_c_str(), flags, rustix::fs::Mode::RUSR)?;
                    std::thread::sleep(std::time::Duration::from_millis(500));
                    Ok(())
                });
            }
            command.status()
        });
        // Once the marker exists, the child holds a copy of the locked descriptor and keeps it
        // until its exec, half a second later.
        let start = std::time::Instant::now();
        while !forked.exists() {
            assert!(
                start.elapsed() < std::time::Duration::from_secs(10),
                "the child never forked"
            );
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
        drop(storage);
        let reopened = FileStorage::open(
            &path,
            FileOptions::new().lock_timeout(Some(std::time::Duration::ZERO)),
        );
        assert!(
            reopened.is_ok(),
            "the closed storage's lock lived on in the forked child: {:?}",
            reopened.err()
        );
        let status = spawner.join().unwrap().unwrap();
        assert!(status.success(), "{status}");
    }

    /// The process's table of open files counts readers: with one of two readers closed, the
    /// file is still open in this process, and a writer's open fails at once as `AlreadyOpen`
    /// (not after waiting for its own process's shared lock).
    #[test]
    fn a_file_stays_open_in_the_process_until_its_last_reader_closes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        drop(FileStorage::open(&path, FileOptions::new()).unwrap());
        let read_only = FileOptions::new().read_only(true);
        let first = FileStorage::open(&path, read_only).unwrap();
        let second = FileStorage::open(&path, read_only).unwrap();
        drop(first);
        let once = FileOptions::new().lock_timeout(Some(std::time::Duration::ZERO));
        let writer = FileStorage::open(&path, once);
        assert!(
            matches!(writer, Err(OpenError::AlreadyOpen { .. })),
            "{:?}",
            writer.map(|_| ())
        );
        drop(second);
        assert!(FileStorage::open(&path, once).is_ok());
    }

    /// A writer with a reader table marks it closed (writer pid 0) when it closes, so that a
    /// reader attached beside it sees it gone.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_writer_marks_its_reader_table_closed_when_it_closes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let writer =
            FileStorage::open(&path, FileOptions::new().readers_beside_writer(true)).unwrap();
        assert_eq!(writer.lock_mode(), super::LockMode::Writer);
        let stat = std::fs::metadata(&path).unwrap();
        let reader = crate::ReaderTable::open_for_reader(&path, (stat.dev(), stat.ino())).unwrap();
        assert_eq!(reader.writer_pid(), std::process::id());
        let table = writer.reader_table().map(crate::ReaderTable::path);
        assert_eq!(table, Some(crate::lock_file_path(&path).as_path()));
        drop(writer);
        assert_eq!(reader.writer_pid(), 0);
    }

    /// Another process may create the file between this open's `NotFound` and its `O_EXCL`
    /// create: the create's `AlreadyExists` then means "open what the other one made".
    #[test]
    fn a_file_another_process_created_first_is_opened_not_an_error() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        let calls = std::cell::RefCell::new(Vec::new());
        let (file, created) = open_or_create(&path, true, |create_new| {
            calls.borrow_mut().push(create_new);
            if calls.borrow().len() == 2 {
                std::fs::write(&path, b"theirs").unwrap(); // the other process, first
            }
            std::fs::OpenOptions::new()
                .read(true)
                .write(true)
                .create_new(create_new)
                .open(&path)
        })
        .unwrap();
        assert!(!created);
        assert_eq!(*calls.borrow(), [false, true, false]);
        assert_eq!(std::io::read_to_string(file).unwrap(), "theirs");
    }

    /// The other process may also remove the file it made before this open finds it: the
    /// open then goes round again, and creates it. (Only a symbolic link to nothing stops
    /// the loop at a taken name.)
    #[test]
    fn a_file_made_and_removed_in_the_race_is_created_on_the_next_round() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        let calls = std::cell::RefCell::new(Vec::new());
        let (_file, created) = open_or_create(&path, true, |create_new| {
            calls.borrow_mut().push(create_new);
            let round = calls.borrow().len();
            match round {
                1 | 3 => Err(std::io::ErrorKind::NotFound.into()),
                2 => Err(std::io::ErrorKind::AlreadyExists.into()),
                _ => std::fs::File::create_new(&path),
            }
        })
        .unwrap();
        assert!(created);
        assert_eq!(*calls.borrow(), [false, true, false, true]);
    }

    /// A create that fails for another reason than a name taken fails the open with its own
    /// error, at once.
    #[test]
    fn a_create_that_fails_otherwise_fails_the_open_with_its_error() {
        let calls = std::cell::RefCell::new(Vec::new());
        let error = open_or_create(std::path::Path::new("file"), true, |create_new| {
            calls.borrow_mut().push(create_new);
            let kind = if create_new {
                std::io::ErrorKind::PermissionDenied
            } else {
                std::io::ErrorKind::NotFound
            };
            Err(kind.into())
        })
        .unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied);
        assert_eq!(*calls.borrow(), [false, true]);
    }

    /// A symbolic link to a missing file: the open fails with `NotFound` (it used to spin
    /// forever, the open finding no file and the `O_EXCL` create finding the name taken), and
    /// nothing is created through the link.
    #[test]
    fn an_open_of_a_symbolic_link_to_nothing_fails_instead_of_spinning() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let target = dir.path().join("missing");
        std::os::unix::fs::symlink(&target, &path).unwrap();
        match FileStorage::open(&path, FileOptions::new()) {
            Err(OpenError::Open { source, .. }) => {
                assert_eq!(source.kind(), std::io::ErrorKind::NotFound, "{source}");
            }
            other => panic!("{:?}", other.map(|_| ())),
        }
        assert!(!target.exists());
        // Once the target exists, the link opens it.
        std::fs::write(&target, b"").unwrap();
        assert!(FileStorage::open(&path, FileOptions::new()).is_ok());
    }

    /// The directory synced is the path's own parent: a missing one, or a file in its place,
    /// is an error, not a sync of another directory.
    #[test]
    fn sync_parent_dir_syncs_the_paths_parent_or_says_why_it_cannot() {
        let dir = tempfile::tempdir().unwrap();
        sync_parent_dir(&dir.path().join("new")).unwrap();
        let missing = sync_parent_dir(&dir.path().join("missing/new")).unwrap_err();
        assert_eq!(missing.kind(), std::io::ErrorKind::NotFound, "{missing}");
        let file = dir.path().join("file");
        std::fs::write(&file, b"").unwrap();
        let not_dir = sync_parent_dir(&file.join("new")).unwrap_err();
        assert_eq!(
            not_dir.kind(),
            std::io::ErrorKind::NotADirectory,
            "{not_dir}"
        );
    }

    /// On Linux a file storage names the kernel's boot id, as
    /// /proc/sys/kernel/random/boot_id gives it.
    #[cfg(target_os = "linux")]
    #[test]
    fn a_file_storage_names_the_kernels_boot_id() {
        let text = std::fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap();
        let id = parse_uuid(text.trim()).unwrap();
        assert_ne!(id, [0; 16]);
        assert_eq!(kernel_boot_id(), Some(id));
        let dir = tempfile::tempdir().unwrap();
        let storage = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
        assert_eq!(storage.boot_id(), Some(id));
    }
}
