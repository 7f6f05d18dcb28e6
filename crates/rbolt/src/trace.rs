//! What the store tells a `tracing` subscriber (feature `tracing`): the events it emits and
//! the span macro for phases of work. Without the feature every function here is empty and
//! inlined and the macros expand to nothing, so the calls cost nothing and need no `cfg`.
//!
//! Every event is emitted with the module path as its target (`rbolt::db`, `rbolt::tx`, ...),
//! so `RUST_LOG=rbolt=debug` style filters select them. Levels: `ERROR` for a poisoned handle,
//! `WARN` for what loses or delays work (an open that falls back to an older commit, a commit
//! slower than `Options::slow_commit_threshold`, a lock wait that gave up), `INFO` for
//! recovery at open, lock waits and file shrinks, `DEBUG` for growth and vacuum steps.

/// Enters a span for the rest of the enclosing block: `trace::phase!("commit.spill");` or
/// with fields, `trace::phase!("commit.write", pages = n);`. DEBUG level, the module path as
/// target. A block holds one phase; phases one after the other each get a block of their own
/// (two in one block nest). Without the `tracing` feature it expands to nothing.
macro_rules! phase {
    ($name:literal $(, $($fields:tt)*)?) => {
        #[cfg(feature = "tracing")]
        let _phase = ::tracing::debug_span!($name $(, $($fields)*)?).entered();
    };
}
pub(crate) use phase;

/// One event with `tracing`'s syntax after the level (`INFO`, `DEBUG`, ...): fields, then a
/// message. An expression of type `()`; without the `tracing` feature an empty block, and its
/// arguments are not evaluated (so a value computed only for an event belongs inside it).
#[cfg_attr(
    not(feature = "tracing"),
    expect(
        unused_macros,
        reason = "without the feature the events' bodies, which use it, are not compiled"
    )
)]
macro_rules! event {
    ($level:ident, $($rest:tt)+) => {{
        #[cfg(feature = "tracing")]
        ::tracing::event!(::tracing::Level::$level, $($rest)+);
    }};
}

/// Defines each event function twice: emitting with the `tracing` feature, and empty and
/// inlined (its arguments unused) without it.
macro_rules! events {
    ($($(#[$doc:meta])* fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $body:block)*) => {$(
        $(#[$doc])*
        #[cfg(feature = "tracing")]
        pub(crate) fn $name($($arg: $ty),*) $body

        $(#[$doc])*
        #[cfg(not(feature = "tracing"))]
        #[inline(always)]
        pub(crate) fn $name($($arg: $ty),*) {
            let _ = ($($arg,)*);
        }
    )*};
}

use crate::stats::TxStats;
use std::path::Path;
use std::time::{Duration, Instant};

/// The path of a database for an event's field (`-` for a storage without one).
#[cfg(feature = "tracing")]
fn path_of(path: Option<&Path>) -> std::path::Display<'_> {
    path.unwrap_or(Path::new("-")).display()
}

events! {
    /// `Db::open_with` found the file locked by another process and waits as the options ask.
    fn lock_wait_started(path: &Path, lock_timeout: Option<Duration>) {
        event!(
            INFO,
            path = %path.display(),
            ?lock_timeout,
            "another process holds the file lock; waiting for it (Options::lock_timeout)"
        );
    }

    /// The wait for the file lock ended: `error` is what ended it, if it failed.
    fn lock_wait_ended(path: &Path, started: Instant, error: Option<&dyn std::error::Error>) {
        let waited = started.elapsed();
        match error {
            None => event!(INFO, path = %path.display(), ?waited, "got the file lock"),
            Some(error) => event!(
                WARN,
                path = %path.display(),
                ?waited,
                %error,
                "gave up waiting for the file lock"
            ),
        }
    }

    /// Recovery at open: the file's creation had been cut short (no commit in it yet), so it
    /// is initialised again.
    fn recovered_interrupted_creation(path: Option<&Path>, file_len: u64) {
        event!(
            INFO,
            path = %path_of(path),
            file_len,
            "the file's creation was interrupted before its first commit; initialising it again"
        );
    }

    /// Recovery at open: one meta cannot be opened (`why`), so the file opens from the
    /// other, the commit `txid`; when the unusable one was newer, its commit is lost.
    fn recovered_older_meta(path: Option<&Path>, txid: u64, why: &str) {
        event!(
            WARN,
            path = %path_of(path),
            txid,
            why,
            "one meta cannot be opened; opening the commit the other holds"
        );
    }

    /// Recovery at open: the newest commit was made without syncs by a process that did not
    /// close the file; it is made durable now.
    fn recovered_unsynced(path: Option<&Path>, txid: u64) {
        event!(
            INFO,
            path = %path_of(path),
            txid,
            "the last writer ended without closing after commits without syncs; making them durable"
        );
    }

    /// Opening a file whose meta names no freelist page: the freelist is rebuilt by walking
    /// every reachable page.
    fn freelist_rebuilt(path: Option<&Path>, txid: u64) {
        event!(
            INFO,
            path = %path_of(path),
            txid,
            "the file keeps no freelist page; rebuilding the freelist by walking the file"
        );
    }

    /// A commit ended: growth of the file, and a commit slower than the options' threshold.
    fn committed(
        path: Option<&Path>,
        slow_commit_threshold: Option<Duration>,
        stats: &TxStats,
        txid: u64,
        file_len_before: u64,
        file_len: u64,
    ) {
        let path = path_of(path);
        if file_len > file_len_before {
            event!(DEBUG, %path, txid, from = file_len_before, to = file_len, "the file grew");
        }
        if slow_commit_threshold.is_some_and(|slow| stats.commit_time >= slow) {
            event!(
                WARN,
                %path,
                txid,
                commit_time = ?stats.commit_time,
                spill_time = ?stats.spill_time,
                rebalance_time = ?stats.rebalance_time,
                write_time = ?stats.write_time,
                writes = stats.writes,
                "a slow commit (Options::slow_commit_threshold)"
            );
        }
    }

    /// A reader process (issue 50) has read the snapshot `txid` for `seconds`: the pages the
    /// writer freed since stay unused, and the file is not cut below what it reads, until it
    /// ends. Once per transaction.
    fn reader_process_pins(path: Option<&Path>, pid: u32, txid: u64, seconds: u64, len: u64) {
        event!(
            WARN,
            path = %path_of(path),
            pid,
            txid,
            seconds,
            len,
            "a reader process has held an old snapshot for long: the pages freed since stay \
             unused and the file is not cut below what it reads until it ends"
        );
    }

    /// A writer opened without a reader table (its lock file could not be made: a read-only
    /// directory, a system without open file description locks): read-only opens in other
    /// processes wait for it to close, as before issue 50.
    fn no_reader_table(path: &Path) {
        event!(
            INFO,
            path = %path.display(),
            "opened without a reader table (the lock file could not be made): readers in \
             other processes wait for this writer to close"
        );
    }

    /// The file was cut to `to` bytes (auto-shrink or a vacuum).
    fn shrunk(path: Option<&Path>, from: u64, to: u64) {
        event!(INFO, path = %path_of(path), from, to, "the file shrank");
    }

    /// A vacuum step ended (`committed`: whether it changed anything).
    fn vacuum_step(
        path: Option<&Path>,
        committed: bool,
        pages_moved: u64,
        pages_merged: u64,
        high_water: u64,
        pages_to_go: u64,
    ) {
        event!(
            DEBUG,
            path = %path_of(path),
            committed,
            pages_moved,
            pages_merged,
            high_water,
            pages_to_go,
            "a vacuum step"
        );
    }

    /// A vacuum ended.
    fn vacuum_done(path: Option<&Path>, steps: u64, file_len_before: u64, file_len: u64) {
        event!(
            INFO,
            path = %path_of(path),
            steps,
            file_len_before,
            file_len,
            "the vacuum is done"
        );
    }

    /// The handle is poisoned: what is on disk is uncertain until the file is opened again.
    fn poisoned(path: Option<&Path>) {
        event!(
            ERROR,
            path = %path_of(path),
            "a commit or sync failed at or after a sync: the handle refuses everything until the \
             database is reopened"
        );
    }
}
