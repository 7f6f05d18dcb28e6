//! The one error type of the database.

use rbolt_freelist::FreelistError;
use rbolt_page::{Corruption, Reason};
use std::fmt;
use std::io;
use std::path::PathBuf;

/// What went wrong. Every fallible call of this crate returns it.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// let result = db.update(|tx| {
///     let mut b = tx.create_bucket("b")?;
///     b.put(vec![0u8; rbolt::KEY_SIZE_MAX + 1], "v")
/// });
/// match result {
///     Err(rbolt::Error::KeyTooLarge { len }) => assert_eq!(len, rbolt::KEY_SIZE_MAX + 1),
///     other => panic!("expected KeyTooLarge, got {other:?}"),
/// }
/// // The failed update committed nothing.
/// assert!(db.begin_read()?.bucket("b")?.is_none());
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A key must be at least one byte long.
    #[error("key required: keys are 1 to {max} bytes", max = rbolt_page::KEY_SIZE_MAX)]
    KeyRequired,
    /// A key is longer than `KEY_SIZE_MAX` (32,768 bytes).
    #[error(
        "key too large: {len} bytes, at most {max}; hash or shorten long keys",
        max = rbolt_page::KEY_SIZE_MAX
    )]
    KeyTooLarge {
        /// The key's length.
        len: usize,
    },
    /// A value is longer than `VALUE_SIZE_MAX` (2^31 - 2 bytes).
    #[error(
        "value too large: {len} bytes, at most {max}; store it in pieces under several keys",
        max = rbolt_page::VALUE_SIZE_MAX
    )]
    ValueTooLarge {
        /// The value's length.
        len: usize,
    },
    /// A bucket of that name already exists.
    #[error("bucket already exists (create_bucket_if_not_exists opens it instead)")]
    BucketExists,
    /// No bucket of that name exists.
    #[error("bucket not found (create it with create_bucket, or use create_bucket_if_not_exists)")]
    BucketNotFound,
    /// A bucket name must be at least one byte long.
    #[error(
        "bucket name required: names are 1 to {max} bytes, and the root holds only buckets",
        max = rbolt_page::KEY_SIZE_MAX
    )]
    BucketNameRequired,
    /// The key holds a bucket where a value was expected, or a value where a bucket was.
    #[error(
        "incompatible value: the key holds a bucket where a value was expected or the other way \
         round (delete_bucket removes a bucket, delete a value)"
    )]
    IncompatibleValue,
    /// A bucket move whose source and destination are the same bucket.
    #[error(
        "the source and destination are the same bucket: nothing to move; name another destination"
    )]
    SameBuckets,
    /// A bucket move into the bucket itself or a bucket nested inside it.
    #[error(
        "a bucket cannot be moved into itself or into a bucket nested inside it; choose a \
         destination outside it"
    )]
    MoveIntoSelf,
    /// The top-level bucket is open as a [`BucketMut`](crate::BucketMut) handle of this write
    /// transaction: it cannot be opened a second time, deleted or moved until that handle is
    /// dropped.
    #[error(
        "bucket in use: it is open as a handle of this write transaction; use that handle, or \
         drop it before opening, deleting or moving the bucket again"
    )]
    BucketInUse,
    /// The database was opened read-only.
    #[error("database is read-only: open it without Options::read_only to write")]
    DatabaseReadOnly,
    /// Another process holds the file lock (it has the database open), and the open did not
    /// wait: the default, as with redb and sled. `Options::lock_timeout` asks for a wait.
    ///
    /// A read-only open reads beside a writer of another process (through the reader table in
    /// the lock file `<path>-lock`) and fails only when it cannot: then `beside_writer` says
    /// why (the writer keeps no reader table — Go bbolt, an older rbolt, a directory the lock
    /// file could not be made in —, the lock file is not writable here, every slot is taken).
    #[error(
        "{} is locked by another process that has the database open{}; wait for it with \
         Options::lock_timeout(Some(duration)), or None to wait for ever",
        DisplayPath(.path),
        DisplayBesideWriter(.beside_writer)
    )]
    Locked {
        /// The file.
        path: Option<PathBuf>,
        /// For a read-only open, why it could not read beside the writer (`None` for a
        /// read-write open, which a writer always excludes).
        beside_writer: Option<String>,
    },
    /// The file lock was not obtained within the `Options::lock_timeout` the open asked for.
    #[error(
        "timed out waiting for the file lock on {}: another process still has the database \
         open (a longer Options::lock_timeout waits longer, None for ever)",
        DisplayPath(.path)
    )]
    Timeout {
        /// The file.
        path: Option<PathBuf>,
    },
    /// The file is not a bbolt database (bad magic), or too short to be one.
    #[error(
        "invalid database {}: {reason} (is this the database file? a new database is created \
         only where no file exists)",
        DisplayPath(.path)
    )]
    Invalid {
        /// The file.
        path: Option<PathBuf>,
        /// What makes it invalid.
        reason: String,
    },
    /// The file is a bbolt database of another format version.
    #[error(
        "version mismatch: {}: {reason} (rbolt and bbolt read format version 2)",
        DisplayPath(.path)
    )]
    VersionMismatch {
        /// The file.
        path: Option<PathBuf>,
        /// The version found.
        reason: String,
    },
    /// The newest commit's meta is intact but the file ends before the pages it points to:
    /// the file was truncated from outside (a sound commit grows and syncs the file before it
    /// writes the meta). Opening from the older meta would let the next commit overwrite the
    /// only pointer to the newest data, so the open is refused; set
    /// `Options::fallback_on_truncation` (or run `rbolt surgery revert-meta-page`) to open the
    /// older commit deliberately, e.g. after a power loss with `no_grow_sync`.
    #[error(
        "{} is {actual} bytes, but its newest commit needs {expected}: the file was truncated \
         from outside. Restore the file, or open it with Options::fallback_on_truncation to \
         go back to the older commit (losing the newest)",
        DisplayPath(.path)
    )]
    Truncated {
        /// The file.
        path: Option<PathBuf>,
        /// The bytes the newest meta's high-water mark needs.
        expected: u64,
        /// The file's length.
        actual: u64,
    },
    /// Options that cannot work, refused before any file is touched.
    #[error("invalid options: {reason}")]
    InvalidOptions {
        /// Which option and why.
        reason: String,
    },
    /// The storage is already open as a database (in this process): a second handle would
    /// be a second writer.
    #[error(
        "{} is already open as a database in this process; share that handle instead",
        DisplayPath(.path)
    )]
    StorageInUse {
        /// The file.
        path: Option<PathBuf>,
    },
    /// This thread holds the write transaction already: starting another (`begin_write`,
    /// `update` or `batch` inside `update`) would wait for itself for ever.
    #[error(
        "this thread holds the write transaction already; do the work inside it, or commit or \
         roll it back first"
    )]
    WriteTxOnThisThread,
    /// Stored bytes that do not decode as the type a typed bucket reads them as.
    #[error(
        "a stored key or value does not decode as {type_name}: {reason} (the bucket was written \
         with other types)"
    )]
    Decode {
        /// The type asked for.
        type_name: &'static str,
        /// What is wrong with the bytes.
        reason: String,
    },
    /// A key or value that a typed bucket cannot turn into bytes: a `Json` value serde cannot
    /// write, or whose JSON does not read back as its type. Nothing was written.
    #[error("cannot store a {type_name}: {reason}; nothing was written")]
    Encode {
        /// The type of the key or value.
        type_name: &'static str,
        /// Why it has no bytes.
        reason: String,
    },
    /// Raw page bytes were asked of a handle that can write, or of a read-only handle that
    /// reads beside a writer of another process: only a read-only handle with no writer open
    /// gives them out, since a writer rewrites metas and free pages while readers live.
    #[error(
        "raw page access needs a database opened read-only with no writer open (a writer \
         rewrites free pages and metas meanwhile)"
    )]
    RawAccessNeedsReadOnly,
    /// Both metas fail their checksum.
    #[error(
        "checksum error in {}: {reason} (`rbolt check` and `rbolt surgery` inspect and repair \
         metas)",
        DisplayPath(.path)
    )]
    Checksum {
        /// The file.
        path: Option<PathBuf>,
        /// Which meta and which checksums.
        reason: String,
    },
    /// The database would grow past `Options::max_size`.
    #[error(
        "database reached its maximum size of {max_size} bytes; the transaction was rolled \
         back (raise Options::max_size, or delete data first)"
    )]
    MaxSizeReached {
        /// The limit.
        max_size: u64,
    },
    /// Bytes in the file do not form what they should. (The corruption is in the message,
    /// so it is not also the `source`.)
    #[error("corrupt database: {0} (`rbolt check` lists every problem)")]
    Corruption(Corruption),
    /// The freelist refused an operation (a double free, which means a corrupt file).
    #[error("freelist: {0} (a corrupt file: `rbolt check` lists every problem)")]
    Freelist(FreelistError),
    /// An I/O error on the database file. The message names the operating system's error
    /// (also the `source`), and what to do where something can be done: a full disk, a
    /// read-only file or filesystem, a missing directory, a path that is a directory.
    #[error("I/O error on {}: {source}{}", DisplayPath(.path), io_hint(.source))]
    Io {
        /// The file.
        path: Option<PathBuf>,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// A transaction handed to an async runtime did not run (feature `tokio`:
    /// `Db::update_async` and its siblings): no runtime was running, or it shut down before
    /// the transaction's task started. Nothing was written.
    #[error("the transaction did not run: {reason}; nothing was written")]
    NotRun {
        /// Why.
        reason: &'static str,
    },
    /// An earlier commit failed at or after a sync, so what is on disk is uncertain: the
    /// handle refuses everything until the database is reopened.
    #[error("the database handle is poisoned by a failed commit; reopen the database")]
    Poisoned,
}

/// What kind of [`Error`] an error is, without its details: for matching and comparing
/// (`Error` holds an `io::Error`, which cannot be compared).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = rbolt::Db::open(dir.path().join("db"))?;
/// let error = db.update(|tx| tx.create_bucket(b"").map(drop)).unwrap_err();
/// assert_eq!(error.kind(), rbolt::ErrorKind::BucketNameRequired);
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorKind {
    /// [`Error::KeyRequired`].
    KeyRequired,
    /// [`Error::KeyTooLarge`].
    KeyTooLarge,
    /// [`Error::ValueTooLarge`].
    ValueTooLarge,
    /// [`Error::BucketExists`].
    BucketExists,
    /// [`Error::BucketNotFound`].
    BucketNotFound,
    /// [`Error::BucketNameRequired`].
    BucketNameRequired,
    /// [`Error::IncompatibleValue`].
    IncompatibleValue,
    /// [`Error::SameBuckets`].
    SameBuckets,
    /// [`Error::MoveIntoSelf`].
    MoveIntoSelf,
    /// [`Error::BucketInUse`].
    BucketInUse,
    /// [`Error::DatabaseReadOnly`].
    DatabaseReadOnly,
    /// [`Error::Locked`].
    Locked,
    /// [`Error::Timeout`].
    Timeout,
    /// [`Error::Invalid`].
    Invalid,
    /// [`Error::VersionMismatch`].
    VersionMismatch,
    /// [`Error::Truncated`].
    Truncated,
    /// [`Error::InvalidOptions`].
    InvalidOptions,
    /// [`Error::StorageInUse`].
    StorageInUse,
    /// [`Error::WriteTxOnThisThread`].
    WriteTxOnThisThread,
    /// [`Error::Decode`].
    Decode,
    /// [`Error::Encode`].
    Encode,
    /// [`Error::RawAccessNeedsReadOnly`].
    RawAccessNeedsReadOnly,
    /// [`Error::Checksum`].
    Checksum,
    /// [`Error::MaxSizeReached`].
    MaxSizeReached,
    /// [`Error::Corruption`].
    Corruption,
    /// [`Error::Freelist`].
    Freelist,
    /// [`Error::Io`].
    Io,
    /// [`Error::NotRun`].
    NotRun,
    /// [`Error::Poisoned`].
    Poisoned,
}

impl From<Corruption> for Error {
    fn from(corruption: Corruption) -> Error {
        Error::Corruption(corruption)
    }
}

/// What to do about an I/O error of `kind`, as the end of a message (empty when the error's
/// own words are all there is to say).
fn io_hint(error: &io::Error) -> &'static str {
    match error.kind() {
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => {
            "; the disk is full: free space (or move the database), then retry; nothing of the \
             failed transaction was kept"
        }
        io::ErrorKind::ReadOnlyFilesystem => {
            "; the filesystem is read-only: to read the database, open it with \
             Options::read_only(true)"
        }
        io::ErrorKind::PermissionDenied => {
            "; this process may not write the file or its directory: to read the database, \
             open it with Options::read_only(true), or fix the permissions"
        }
        io::ErrorKind::NotFound => {
            "; a database is created in an existing directory, and never through a symbolic \
             link to a missing file: create the directory (or the link's target) first (or, \
             for a read-only open, name an existing file)"
        }
        io::ErrorKind::IsADirectory => "; the path is a directory: name a file inside it",
        _ => "",
    }
}

impl From<FreelistError> for Error {
    fn from(error: FreelistError) -> Error {
        match error {
            FreelistError::Corruption(corruption) => Error::Corruption(corruption),
            FreelistError::MaxSizeReached { max_size }
            | FreelistError::MarkReached { max_size, .. } => Error::MaxSizeReached { max_size },
            other => Error::Freelist(other),
        }
    }
}

impl Error {
    /// The kind of error, for matching and comparing.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// use rbolt::ErrorKind;
    /// let error = db.update(|tx| tx.delete_bucket("missing")).unwrap_err();
    /// assert_eq!(error.kind(), ErrorKind::BucketNotFound);
    /// let error = db.update(|tx| tx.create_bucket("b")?.put("", "v")).unwrap_err();
    /// assert_eq!(error.kind(), ErrorKind::KeyRequired);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn kind(&self) -> ErrorKind {
        match self {
            Error::KeyRequired => ErrorKind::KeyRequired,
            Error::KeyTooLarge { .. } => ErrorKind::KeyTooLarge,
            Error::ValueTooLarge { .. } => ErrorKind::ValueTooLarge,
            Error::BucketExists => ErrorKind::BucketExists,
            Error::BucketNotFound => ErrorKind::BucketNotFound,
            Error::BucketNameRequired => ErrorKind::BucketNameRequired,
            Error::IncompatibleValue => ErrorKind::IncompatibleValue,
            Error::SameBuckets => ErrorKind::SameBuckets,
            Error::MoveIntoSelf => ErrorKind::MoveIntoSelf,
            Error::BucketInUse => ErrorKind::BucketInUse,
            Error::DatabaseReadOnly => ErrorKind::DatabaseReadOnly,
            Error::Locked { .. } => ErrorKind::Locked,
            Error::Timeout { .. } => ErrorKind::Timeout,
            Error::Invalid { .. } => ErrorKind::Invalid,
            Error::VersionMismatch { .. } => ErrorKind::VersionMismatch,
            Error::Truncated { .. } => ErrorKind::Truncated,
            Error::InvalidOptions { .. } => ErrorKind::InvalidOptions,
            Error::StorageInUse { .. } => ErrorKind::StorageInUse,
            Error::WriteTxOnThisThread => ErrorKind::WriteTxOnThisThread,
            Error::Decode { .. } => ErrorKind::Decode,
            Error::Encode { .. } => ErrorKind::Encode,
            Error::RawAccessNeedsReadOnly => ErrorKind::RawAccessNeedsReadOnly,
            Error::Checksum { .. } => ErrorKind::Checksum,
            Error::MaxSizeReached { .. } => ErrorKind::MaxSizeReached,
            Error::Corruption(_) => ErrorKind::Corruption,
            Error::Freelist(_) => ErrorKind::Freelist,
            Error::Io { .. } => ErrorKind::Io,
            Error::NotRun { .. } => ErrorKind::NotRun,
            Error::Poisoned => ErrorKind::Poisoned,
        }
    }

    /// An I/O error on `path`.
    pub(crate) fn io(path: Option<&std::path::Path>, source: io::Error) -> Error {
        Error::Io {
            path: path.map(PathBuf::from),
            source,
        }
    }

    /// The error for a meta that failed validation, by bbolt's classes.
    pub(crate) fn from_meta(path: Option<&std::path::Path>, corruption: Corruption) -> Error {
        let path = path.map(PathBuf::from);
        let reason = corruption.to_string();
        match corruption.reason {
            Reason::BadMagic(_) | Reason::Truncated { .. } => Error::Invalid { path, reason },
            Reason::BadVersion(_) => Error::VersionMismatch { path, reason },
            Reason::BadChecksum { .. } => Error::Checksum { path, reason },
            _ => Error::Corruption(corruption),
        }
    }
}

/// Shows an optional path, or that the storage has none.
struct DisplayPath<'a>(&'a Option<PathBuf>);

impl fmt::Display for DisplayPath<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(path) => write!(f, "{}", path.display()),
            None => f.write_str("<in-memory storage>"),
        }
    }
}

/// Why a read-only open could not read beside a writer, when it could not.
struct DisplayBesideWriter<'a>(&'a Option<String>);

impl fmt::Display for DisplayBesideWriter<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            Some(reason) => write!(
                f,
                ", and this read-only open cannot read beside it ({reason}), so it needs the \
                 shared file lock"
            ),
            None => Ok(()),
        }
    }
}

/// The result of every fallible call of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::{Error, FreelistError, io};
    use rbolt_page::{Corruption, Pgid, Reason};
    use std::path::PathBuf;

    fn path() -> Option<PathBuf> {
        Some(PathBuf::from("/data/app.db"))
    }

    fn io_error(kind: io::ErrorKind) -> Error {
        Error::Io {
            path: path(),
            source: io::Error::from(kind),
        }
    }

    /// Every variant once, with what its message must name: its cause and, where something
    /// can be done, what to do.
    fn every_error() -> Vec<(Error, &'static [&'static str])> {
        let text = || "something".to_owned();
        vec![
            (Error::KeyRequired, &["key required", "1 to"]),
            (
                Error::KeyTooLarge { len: 40_000 },
                &["40000", "hash or shorten"],
            ),
            (
                Error::ValueTooLarge { len: 1 << 31 },
                &["value too large", "pieces"],
            ),
            (
                Error::BucketExists,
                &["already exists", "create_bucket_if_not_exists"],
            ),
            (Error::BucketNotFound, &["not found", "create_bucket"]),
            (Error::BucketNameRequired, &["name required", "1 to"]),
            (
                Error::IncompatibleValue,
                &["holds a bucket", "delete_bucket"],
            ),
            (Error::SameBuckets, &["same bucket", "another destination"]),
            (Error::MoveIntoSelf, &["into itself", "outside it"]),
            (Error::BucketInUse, &["open as a handle", "drop it"]),
            (
                Error::DatabaseReadOnly,
                &["read-only", "without Options::read_only"],
            ),
            (
                Error::Locked {
                    path: path(),
                    beside_writer: None,
                },
                &["/data/app.db", "lock_timeout"],
            ),
            (
                Error::Locked {
                    path: path(),
                    beside_writer: Some("no rbolt writer holds the lock file".into()),
                },
                &[
                    "/data/app.db",
                    "cannot read beside it (no rbolt writer",
                    "lock_timeout",
                ],
            ),
            (
                Error::Timeout { path: path() },
                &["timed out", "lock_timeout"],
            ),
            (
                Error::Invalid {
                    path: path(),
                    reason: text(),
                },
                &["something", "database file"],
            ),
            (
                Error::VersionMismatch {
                    path: path(),
                    reason: text(),
                },
                &["something", "version 2"],
            ),
            (
                Error::Truncated {
                    path: path(),
                    expected: 8192,
                    actual: 4096,
                },
                &["truncated", "fallback_on_truncation"],
            ),
            (
                Error::InvalidOptions { reason: text() },
                &["invalid options: something"],
            ),
            (
                Error::StorageInUse { path: path() },
                &["already open", "share that handle"],
            ),
            (
                Error::WriteTxOnThisThread,
                &["holds the write transaction", "commit or"],
            ),
            (
                Error::Decode {
                    type_name: "u64",
                    reason: text(),
                },
                &["u64", "something", "other types"],
            ),
            (
                Error::Encode {
                    type_name: "Json",
                    reason: text(),
                },
                &["Json", "something", "nothing was written"],
            ),
            (Error::RawAccessNeedsReadOnly, &["read-only"]),
            (
                Error::Checksum {
                    path: path(),
                    reason: text(),
                },
                &["something", "rbolt check"],
            ),
            (
                Error::MaxSizeReached { max_size: 1 << 20 },
                &["1048576", "raise Options::max_size"],
            ),
            (
                Error::Corruption(Corruption::new(Pgid(7), Reason::KeyOrder { index: 2 })),
                &["page 7", "rbolt check"],
            ),
            (
                Error::Freelist(FreelistError::AlreadyFreed { pgid: Pgid(9) }),
                &["page 9", "rbolt check"],
            ),
            (
                io_error(io::ErrorKind::StorageFull),
                &["/data/app.db", "disk is full", "free space"],
            ),
            (
                io_error(io::ErrorKind::ReadOnlyFilesystem),
                &["read-only", "Options::read_only(true)"],
            ),
            (
                io_error(io::ErrorKind::PermissionDenied),
                &["permission", "Options::read_only(true)"],
            ),
            (
                io_error(io::ErrorKind::NotFound),
                &["not found", "create the directory"],
            ),
            (
                io_error(io::ErrorKind::IsADirectory),
                &["directory", "name a file"],
            ),
            (
                io_error(io::ErrorKind::QuotaExceeded),
                &["quota", "free space"],
            ),
            (
                Error::NotRun {
                    reason: "no runtime",
                },
                &["no runtime", "nothing was written"],
            ),
            (Error::Poisoned, &["poisoned", "reopen"]),
        ]
    }

    /// The table below names every variant: a new one fails to compile here until it is in it.
    fn covered(error: &Error) {
        match error {
            Error::KeyRequired
            | Error::KeyTooLarge { .. }
            | Error::ValueTooLarge { .. }
            | Error::BucketExists
            | Error::BucketNotFound
            | Error::BucketNameRequired
            | Error::IncompatibleValue
            | Error::SameBuckets
            | Error::MoveIntoSelf
            | Error::BucketInUse
            | Error::DatabaseReadOnly
            | Error::Locked { .. }
            | Error::Timeout { .. }
            | Error::Invalid { .. }
            | Error::VersionMismatch { .. }
            | Error::Truncated { .. }
            | Error::InvalidOptions { .. }
            | Error::StorageInUse { .. }
            | Error::WriteTxOnThisThread
            | Error::Decode { .. }
            | Error::Encode { .. }
            | Error::RawAccessNeedsReadOnly
            | Error::Checksum { .. }
            | Error::MaxSizeReached { .. }
            | Error::Corruption(_)
            | Error::Freelist(_)
            | Error::Io { .. }
            | Error::NotRun { .. }
            | Error::Poisoned => {}
        }
    }

    /// Every error's message names its cause and, where one exists, what to do; the kinds
    /// of `io::Error` a user meets most each say what to do too.
    #[test]
    fn every_error_says_why_and_what_to_do() {
        let errors = every_error();
        let mut kinds: Vec<_> = errors.iter().map(|(e, _)| e.kind()).collect();
        kinds.dedup();
        assert_eq!(kinds.len(), 29, "one entry per variant (Io several times)");
        for (error, parts) in &errors {
            covered(error);
            let message = error.to_string();
            for part in *parts {
                assert!(
                    message.to_lowercase().contains(&part.to_lowercase()),
                    "{message:?} does not say {part:?}"
                );
            }
        }
    }
}
