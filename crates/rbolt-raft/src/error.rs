//! The crate's error type and its conversion into the `io::Error` openraft's traits return.

use std::io;
use std::path::PathBuf;

/// What went wrong in the log store or the state machine.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// rbolt refused or failed an operation.
    #[error(transparent)]
    Rbolt(#[from] rbolt::Error),
    /// A value could not be encoded.
    #[error("encoding {what}")]
    Encode {
        /// What was being encoded.
        what: &'static str,
        /// The encoder's error.
        #[source]
        source: rmp_serde::encode::Error,
    },
    /// A stored value could not be decoded: the file was written by something else, or it is
    /// corrupt.
    #[error("decoding {what}")]
    Decode {
        /// What was being decoded.
        what: &'static str,
        /// The decoder's error.
        #[source]
        source: rmp_serde::decode::Error,
    },
    /// The stored data contradicts itself or a request would break an invariant (a hole in
    /// the log, a key that is not the entry's index, a snapshot that is not what it claims).
    #[error("{0}")]
    Invalid(String),
    /// A stored log entry fails its checksum (or is too short to hold one): the file was
    /// damaged after it was written. The node must not replay it: recover the node from its
    /// peers (a new, empty data directory catches up from the leader).
    #[error("{}: log entry {index} is damaged: {reason}", .file.display())]
    Damaged {
        /// The log file.
        file: PathBuf,
        /// The entry's index.
        index: u64,
        /// What is wrong with it.
        reason: String,
    },
    /// A file operation outside rbolt (snapshot files, renames, directory syncs) failed.
    #[error("I/O error on {}", .path.display())]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// The operating system's error.
        #[source]
        source: io::Error,
    },
    /// The directory holds a restore that did not finish (a crash part way through
    /// [`crate::restore`]; its marker file [`crate::RESTORING_FILE`] is there): it is not a
    /// node. Run the same restore again (it starts over) or delete the directory.
    #[error(
        "{}: a restore into this directory did not finish (the marker {} is there): it is not \
         a node; run the same restore command again, which starts over, or delete the directory",
        .dir.display(),
        .marker.display()
    )]
    RestoreUnfinished {
        /// The directory.
        dir: PathBuf,
        /// The marker file in it.
        marker: PathBuf,
    },
    /// The blocking task running an rbolt call panicked or was cancelled.
    #[error("blocking task failed")]
    Join(#[source] io::Error),
}

/// The crate's result type.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn io(path: impl Into<PathBuf>) -> impl FnOnce(io::Error) -> Error {
        let path = path.into();
        move |source| Error::Io { path, source }
    }

    pub(crate) fn invalid(reason: impl Into<String>) -> Error {
        Error::Invalid(reason.into())
    }

    /// Whether this error belongs to the entry being applied rather than to the node: the
    /// same entry fails the same way on every replica (a key or value rbolt refuses, a bucket
    /// that is or is not there, a payload the application cannot use), so recording it as the
    /// entry's result keeps the replicas equal. Every other error (I/O, a poisoned or corrupt
    /// file, a failed task) is the node's storage failing.
    pub fn is_entry_error(&self) -> bool {
        use rbolt::ErrorKind as Kind;
        match self {
            Error::Rbolt(e) => matches!(
                e.kind(),
                Kind::KeyRequired
                    | Kind::KeyTooLarge
                    | Kind::ValueTooLarge
                    | Kind::BucketExists
                    | Kind::BucketNotFound
                    | Kind::BucketNameRequired
                    | Kind::IncompatibleValue
                    | Kind::SameBuckets
                    | Kind::MoveIntoSelf
            ),
            Error::Encode { .. } | Error::Decode { .. } | Error::Invalid(_) => true,
            Error::Damaged { .. }
            | Error::Io { .. }
            | Error::Join(_)
            | Error::RestoreUnfinished { .. } => false,
        }
    }
}

/// `ENOSPC` and `EDQUOT` on Linux (errno 28 and 122): older kernels' and filesystems' codes
/// that `io::ErrorKind` may not map to `StorageFull` or `QuotaExceeded`.
const NO_SPACE_ERRNOS: [i32; 2] = [28, 122];

/// Whether `error` says the disk or the user's quota is full.
fn io_is_no_space(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded
    ) || error
        .raw_os_error()
        .is_some_and(|code| NO_SPACE_ERRNOS.contains(&code))
}

impl Error {
    /// Whether this error is a full disk (`ENOSPC`), a full quota (`EDQUOT`) or an rbolt file
    /// at its `Options::max_size`: the write failed before its commit point (rbolt grows a
    /// file, and writes its pages, before the first sync), so the same write may succeed once
    /// there is room. The stores ask their [`crate::Observer::no_space`] whether to try again.
    pub fn is_no_space(&self) -> bool {
        match self {
            Error::Rbolt(rbolt::Error::Io { source, .. }) | Error::Io { source, .. } => {
                io_is_no_space(source)
            }
            Error::Rbolt(rbolt::Error::MaxSizeReached { .. }) => true,
            _ => false,
        }
    }
}

impl From<Error> for io::Error {
    fn from(error: Error) -> io::Error {
        let kind = match &error {
            Error::Decode { .. }
            | Error::Invalid(_)
            | Error::Damaged { .. }
            | Error::RestoreUnfinished { .. } => io::ErrorKind::InvalidData,
            Error::Io { source, .. } => source.kind(),
            _ => io::ErrorKind::Other,
        };
        io::Error::new(kind, error)
    }
}
