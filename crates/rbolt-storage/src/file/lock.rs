//! The locks an open takes: the database file's `flock` (exclusive for the writer, shared for
//! readers), and for a read-only open beside a writer, a slot of the writer's reader table
//! instead ([`LockMode`](crate::LockMode)).

use std::fs::{File, TryLockError};
use std::io;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::Path;
use std::thread;
use std::time::{Duration, Instant};

use super::{FileOptions, OpenError};
use crate::reader_table::{AttachError, ReaderTable};

/// How long [`FileStorage::open`](crate::FileStorage::open) sleeps between attempts to take a contended lock.
const LOCK_RETRY_INTERVAL: Duration = Duration::from_millis(50);

/// How an open shares its file with other processes ([`FileStorage::lock_mode`](crate::FileStorage::lock_mode)).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LockMode {
    /// The exclusive `flock`, and a reader table in the lock file: reader processes may read
    /// beside this writer.
    Writer,
    /// The exclusive `flock` only (no lock file asked for, or it could not be made): every
    /// other open of the file waits for this one to close.
    WriterWithoutReaderTable,
    /// The shared `flock` of a read-only open: any number of readers, no writer.
    Shared,
    /// No `flock`: a read-only open reading beside a live writer through its reader table.
    BesideWriter,
}

impl std::fmt::Display for LockMode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            LockMode::Writer => "writer (exclusive file lock, reader table in the lock file)",
            LockMode::WriterWithoutReaderTable => {
                "writer (exclusive file lock, no reader table: readers in other processes wait)"
            }
            LockMode::Shared => "reader (shared file lock: no writer can open meanwhile)",
            LockMode::BesideWriter => "reader beside a live writer (a slot in its reader table)",
        })
    }
}

/// Takes the lock `options` asks for (see [`FileOptions::readers_beside_writer`]).
pub(super) fn lock_for(
    file: &File,
    path: &Path,
    options: &FileOptions,
) -> Result<(LockMode, Option<ReaderTable>), OpenError> {
    let timeout = options.lock_timeout;
    let db_file = file
        .metadata()
        .map(|m| (m.dev(), m.ino()))
        .map_err(|source| OpenError::Open {
            path: path.to_owned(),
            source,
        })?;
    if !options.read_only {
        lock(file, path, true, timeout)?;
        if !options.reader_table {
            return Ok((LockMode::WriterWithoutReaderTable, None));
        }
        let mode = file
            .metadata()
            .map_or(options.mode, |m| m.permissions().mode() & 0o777);
        return Ok(match ReaderTable::open_for_writer(path, mode, db_file) {
            Ok(table) => (LockMode::Writer, Some(table)),
            Err(_) => (LockMode::WriterWithoutReaderTable, None),
        });
    }
    if !options.reader_table {
        lock(file, path, false, timeout)?;
        return Ok((LockMode::Shared, None));
    }
    let attached = match try_lock_shared(file, path)? {
        true => return Ok((LockMode::Shared, None)),
        false => ReaderTable::open_for_reader(path, db_file),
    };
    let reason = match attached {
        Ok(table) => return Ok((LockMode::BesideWriter, Some(table))),
        Err(AttachError(reason)) => reason,
    };
    // The writer may have closed meanwhile: then the shared lock is free.
    if try_lock_shared(file, path)? {
        return Ok((LockMode::Shared, None));
    }
    if timeout == Some(Duration::ZERO) {
        return Err(OpenError::HeldByWriter {
            path: path.to_owned(),
            reason,
        });
    }
    lock(file, path, false, timeout)?;
    Ok((LockMode::Shared, None))
}

/// One attempt at the shared `flock`: `false` when a writer holds the file.
fn try_lock_shared(file: &File, path: &Path) -> Result<bool, OpenError> {
    match file.try_lock_shared() {
        Ok(()) => Ok(true),
        Err(TryLockError::WouldBlock) => Ok(false),
        Err(TryLockError::Error(source)) => Err(OpenError::Lock {
            path: path.to_owned(),
            source,
        }),
    }
}

/// Takes the advisory lock on `file` (std's `File::lock`: `flock` on Linux and the BSDs,
/// macOS included), waiting as `timeout` says.
fn lock(
    file: &File,
    path: &Path,
    exclusive: bool,
    timeout: Option<Duration>,
) -> Result<(), OpenError> {
    let lock_error = |source: io::Error| OpenError::Lock {
        path: path.to_owned(),
        source,
    };
    let Some(timeout) = timeout else {
        // Waiting forever: let the kernel wake us when the lock is released rather than poll.
        let locked = if exclusive {
            file.lock()
        } else {
            file.lock_shared()
        };
        return locked.map_err(lock_error);
    };
    let start = Instant::now();
    loop {
        let attempt = if exclusive {
            file.try_lock()
        } else {
            file.try_lock_shared()
        };
        match attempt {
            Ok(()) => return Ok(()),
            Err(TryLockError::WouldBlock) => {}
            Err(TryLockError::Error(error)) => return Err(lock_error(error)),
        }
        let waited = start.elapsed();
        if waited >= timeout {
            return Err(OpenError::LockTimeout {
                path: path.to_owned(),
                timeout,
            });
        }
        // The last sleep is cut short so that the final attempt happens at the deadline.
        thread::sleep(LOCK_RETRY_INTERVAL.min(timeout - waited));
    }
}
