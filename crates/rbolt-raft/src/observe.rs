//! [`Observer`]: what the stores report as they work, for an application's metrics and logs.

use crate::Error;
use std::path::Path;
use std::time::Duration;

/// The kind of a durable write of the log file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum LogWrite {
    /// Entries appended.
    Append,
    /// Entries removed after a log id (a new leader overwrote them).
    Truncate,
    /// Entries removed up to a log id (behind a snapshot).
    Purge,
    /// The vote saved.
    Vote,
    /// Only the committed id written.
    Committed,
}

/// Told of every durable write, apply batch and snapshot of a store it is given to
/// ([`crate::LogStore::set_observer`], [`crate::StateMachine::set_observer`]). Every method has
/// an empty default. They are called on the blocking pool right after the work they report,
/// so they must be quick (update a counter, write a log line).
pub trait Observer: Send + Sync + 'static {
    /// A durable commit of the log file (`entries` appended, or 0) took `elapsed`, its two
    /// `fdatasync`s included.
    fn log_written(&self, write: LogWrite, entries: u64, elapsed: Duration) {
        let _ = (write, entries, elapsed);
    }

    /// An apply batch of `entries` entries committed durably in `elapsed`.
    fn applied(&self, entries: u64, elapsed: Duration) {
        let _ = (entries, elapsed);
    }

    /// Entry `index` failed to apply with an error of the entry's own ([`Error::is_entry_error`]);
    /// the machine's [`crate::Machine::refused`] answered for it and nothing it did was kept.
    fn entry_refused(&self, index: u64, error: &Error) {
        let _ = (index, error);
    }

    /// A snapshot up to index `last` was built: `bytes` bytes in `elapsed`.
    fn snapshot_built(&self, last: Option<u64>, bytes: u64, elapsed: Duration) {
        let _ = (last, bytes, elapsed);
    }

    /// A snapshot up to index `last` received from the leader was installed in `elapsed`.
    fn snapshot_installed(&self, last: Option<u64>, elapsed: Duration) {
        let _ = (last, elapsed);
    }

    /// A write to `file` failed for want of space ([`Error::is_no_space`]) before its commit
    /// point, so nothing of it is on disk; this is its `attempt`th failure in a row (from 1).
    /// Return `true` to run the same write again (after freeing space, or after waiting: the
    /// call is on a blocking thread, and may sleep), `false` to fail it.
    ///
    /// The default fails it, and openraft stops the node on a failed storage write. An
    /// application that would rather keep serving reads while the disk is full retries: an
    /// append or an apply that waits here holds back only what comes after it (a waiting
    /// append stalls this node's Raft; a waiting apply, its state machine), nothing committed
    /// is lost, and the write completes once there is room. It is called for appends,
    /// truncations, purges, votes, apply batches, snapshot builds and installs.
    fn no_space(&self, file: &Path, error: &Error, attempt: u32) -> bool {
        let _ = (file, error, attempt);
        false
    }
}

/// Runs `write` (one write to `file` that leaves nothing on disk when it fails for want of
/// space) until it succeeds, fails otherwise, or `observer` declines another attempt.
pub(crate) fn retry_no_space<T>(
    observer: &dyn Observer,
    file: &Path,
    mut write: impl FnMut() -> crate::Result<T>,
) -> crate::Result<T> {
    let mut attempt = 0u32;
    loop {
        match write() {
            Err(error) if error.is_no_space() => {
                attempt = attempt.saturating_add(1);
                if !observer.no_space(file, &error, attempt) {
                    return Err(error);
                }
            }
            done => return done,
        }
    }
}

/// The observer of a store that was given none.
pub(crate) struct NoObserver;

impl Observer for NoObserver {}
