//! How [`FileStorage::open`](crate::FileStorage::open) opens and locks a file
//! ([`FileOptions`]), and why it failed ([`OpenError`]).

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// How [`FileStorage::open`](crate::FileStorage::open) opens and locks the file.
///
/// The default opens read-write, creates a missing file with mode `0o600`, and waits for the
/// lock as long as it takes.
///
/// ```
/// use std::time::Duration;
/// use rbolt_storage::FileOptions;
///
/// let options = FileOptions::new().read_only(true).lock_timeout(Some(Duration::from_secs(1)));
/// assert!(options.is_read_only());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileOptions {
    pub(super) read_only: bool,
    pub(super) create: bool,
    pub(super) mode: u32,
    pub(super) lock_timeout: Option<Duration>,
    pub(super) reader_table: bool,
}

impl FileOptions {
    /// Read-write, create with mode `0o600`, wait for the lock forever.
    ///
    /// ```
    /// use rbolt_storage::FileOptions;
    /// let options = FileOptions::new();
    /// assert!(!options.is_read_only());
    /// assert_eq!(options, FileOptions::default());
    /// ```
    pub const fn new() -> FileOptions {
        FileOptions {
            read_only: false,
            create: true,
            mode: 0o600,
            lock_timeout: None,
            reader_table: false,
        }
    }

    /// Open read-only and take a shared lock instead of an exclusive one. A read-only open
    /// never creates the file, whatever [`create`](FileOptions::create) says.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage, Storage};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("file");
    /// let missing = FileStorage::open(&path, FileOptions::new().read_only(true));
    /// assert!(missing.is_err()); // a read-only open never creates the file
    /// std::fs::write(&path, b"data").unwrap();
    /// let a = FileStorage::open(&path, FileOptions::new().read_only(true)).unwrap();
    /// let b = FileStorage::open(&path, FileOptions::new().read_only(true)).unwrap(); // shared
    /// assert_eq!(b.len().unwrap(), 4);
    /// // Writing through a read-only storage is refused, without touching the file.
    /// let error = a.write_all_at(b"x", 0).unwrap_err();
    /// assert_eq!(error.kind(), std::io::ErrorKind::PermissionDenied);
    /// ```
    pub const fn read_only(mut self, read_only: bool) -> FileOptions {
        self.read_only = read_only;
        self
    }

    /// Create the file if it does not exist (read-write opens only).
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("file");
    /// assert!(FileStorage::open(&path, FileOptions::new().create(false)).is_err());
    /// assert!(!path.exists());
    /// FileStorage::open(&path, FileOptions::new()).unwrap(); // creates by default
    /// assert!(path.exists());
    /// ```
    pub const fn create(mut self, create: bool) -> FileOptions {
        self.create = create;
        self
    }

    /// The permission bits of a newly created file, before the umask.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage};
    /// use std::os::unix::fs::PermissionsExt;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("file");
    /// FileStorage::open(&path, FileOptions::new().mode(0o400)).unwrap();
    /// let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    /// assert_eq!(mode & 0o777, 0o400); // the umask only clears bits
    /// ```
    pub const fn mode(mut self, mode: u32) -> FileOptions {
        self.mode = mode;
        self
    }

    /// How long to wait for a lock another process (or another open file in this process)
    /// holds: `None` waits forever, `Some(Duration::ZERO)` tries once.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage, OpenError};
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("file");
    /// let options = FileOptions::new().lock_timeout(Some(Duration::from_secs(1)));
    /// let first = FileStorage::open(&path, options).unwrap();
    /// // Within one process a conflicting open fails at once, whatever the timeout: waiting
    /// // would wait for this process itself.
    /// let second = FileStorage::open(&path, options);
    /// assert!(matches!(second, Err(OpenError::AlreadyOpen { .. })));
    /// drop(first);
    /// assert!(FileStorage::open(&path, options).is_ok());
    /// ```
    pub const fn lock_timeout(mut self, lock_timeout: Option<Duration>) -> FileOptions {
        self.lock_timeout = lock_timeout;
        self
    }

    /// Whether processes may read beside a writer through a reader table in the lock file
    /// `<path>-lock` ([`ReaderTable`]; Linux only). Off by default, so that copies and tools
    /// that open files of their own make no lock file.
    ///
    /// - A read-write open creates the lock file (with the database file's permissions),
    ///   resets it when no live reader holds a slot, and marks itself its writer; when the lock
    ///   file cannot be made (a read-only directory, another system) it opens as before, and
    ///   [`FileStorage::lock_mode`] says [`LockMode::WriterWithoutReaderTable`].
    /// - A read-only open takes the shared `flock` when it can, as before
    ///   ([`LockMode::Shared`]): no writer is there, and none (rbolt's or Go bbolt's) can come
    ///   while it is held. When a writer holds the file exclusively, it takes no `flock` and
    ///   attaches to the writer's reader table instead ([`LockMode::BesideWriter`]); when it
    ///   cannot (no rbolt writer with a table: Go bbolt, an older rbolt, a read-only
    ///   directory), it waits for the `flock` as the lock timeout says, and a zero timeout
    ///   fails with [`OpenError::HeldByWriter`], which says why.
    ///
    /// [`ReaderTable`]: crate::ReaderTable
    /// [`FileStorage::lock_mode`]: crate::FileStorage::lock_mode
    /// [`LockMode::WriterWithoutReaderTable`]: crate::LockMode::WriterWithoutReaderTable
    /// [`LockMode::Shared`]: crate::LockMode::Shared
    /// [`LockMode::BesideWriter`]: crate::LockMode::BesideWriter
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage, LockMode};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("db");
    /// let options = FileOptions::new().readers_beside_writer(true);
    /// let writer = FileStorage::open(&path, options).unwrap();
    /// # if cfg!(target_os = "linux") {
    /// assert_eq!(writer.lock_mode(), LockMode::Writer);
    /// assert!(dir.path().join("db-lock").exists());
    /// # }
    /// ```
    pub const fn readers_beside_writer(mut self, on: bool) -> FileOptions {
        self.reader_table = on;
        self
    }

    /// Whether the file is opened read-only.
    ///
    /// ```
    /// use rbolt_storage::FileOptions;
    /// assert!(FileOptions::new().read_only(true).is_read_only());
    /// assert!(!FileOptions::new().is_read_only());
    /// ```
    pub const fn is_read_only(&self) -> bool {
        self.read_only
    }
}

impl Default for FileOptions {
    fn default() -> FileOptions {
        FileOptions::new()
    }
}

/// Why [`FileStorage::open`](crate::FileStorage::open) failed.
///
/// ```
/// use rbolt_storage::{FileOptions, FileStorage, OpenError};
/// # let dir = tempfile::tempdir().unwrap();
/// let missing = dir.path().join("no-such-dir").join("file");
/// match FileStorage::open(&missing, FileOptions::new()) {
///     Err(OpenError::Open { path, source }) => {
///         assert_eq!(path, missing);
///         assert_eq!(source.kind(), std::io::ErrorKind::NotFound);
///     }
///     other => panic!("expected an open error, got {other:?}"),
/// }
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum OpenError {
    /// The file could not be opened (or created).
    #[error("cannot open {}", path.display())]
    Open {
        /// The file.
        path: PathBuf,
        /// What `open` reported.
        #[source]
        source: io::Error,
    },
    /// Taking the lock failed for a reason other than contention.
    #[error("cannot lock {}", path.display())]
    Lock {
        /// The file.
        path: PathBuf,
        /// What `flock` reported.
        #[source]
        source: io::Error,
    },
    /// The file is open already in this process in a way that excludes this open (a
    /// read-write open excludes every other; read-only opens share). Waiting for the lock
    /// would wait for this process itself, so it fails at once, whatever the timeout.
    #[error("{} is already open in this process; share that handle", path.display())]
    AlreadyOpen {
        /// The file.
        path: PathBuf,
    },
    /// A writer holds the file, and this read-only open, which does not wait, could not read
    /// beside it ([`FileOptions::readers_beside_writer`]): `reason` says why (no rbolt writer
    /// with a reader table, a lock file it cannot write, every slot taken).
    #[error(
        "{} is held by a writer and this read-only open cannot read beside it ({reason}); it \
         needs the shared file lock, which the writer holds until it closes",
        path.display()
    )]
    HeldByWriter {
        /// The file.
        path: PathBuf,
        /// Why the open could not attach to the writer's reader table.
        reason: String,
    },
    /// Another holder kept the lock for longer than the lock timeout.
    #[error("timed out after {timeout:?} waiting for the lock on {}", path.display())]
    LockTimeout {
        /// The file.
        path: PathBuf,
        /// The timeout that ran out.
        timeout: Duration,
    },
}

impl OpenError {
    /// Whether this is [`OpenError::LockTimeout`]: the file is in use elsewhere.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage, OpenError};
    /// use std::time::Duration;
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("file");
    /// let timeout = OpenError::LockTimeout {
    ///     path: path.clone(),
    ///     timeout: Duration::from_secs(1),
    /// };
    /// assert!(timeout.is_lock_timeout());
    /// assert_eq!(std::io::Error::from(timeout).kind(), std::io::ErrorKind::TimedOut);
    /// let _held = FileStorage::open(&path, FileOptions::new()).unwrap();
    /// let busy = FileStorage::open(&path, FileOptions::new()).unwrap_err();
    /// assert!(!busy.is_lock_timeout()); // held in this process: `AlreadyOpen`, not a timeout
    /// ```
    pub fn is_lock_timeout(&self) -> bool {
        matches!(self, OpenError::LockTimeout { .. })
    }
}

impl From<OpenError> for io::Error {
    /// Keeps the original error kind, and reports a lock timeout as
    /// [`io::ErrorKind::TimedOut`].
    fn from(error: OpenError) -> io::Error {
        let kind = match &error {
            OpenError::Open { source, .. } | OpenError::Lock { source, .. } => source.kind(),
            OpenError::AlreadyOpen { .. } | OpenError::HeldByWriter { .. } => {
                io::ErrorKind::ResourceBusy
            }
            OpenError::LockTimeout { .. } => io::ErrorKind::TimedOut,
        };
        io::Error::new(kind, error)
    }
}
