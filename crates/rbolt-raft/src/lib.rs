//! rbolt-raft: rbolt as a durable [openraft] log store and state machine, so that a
//! key/value store that outgrew one machine runs replicated under Raft.
//!
//! This crate implements openraft's storage traits — [`RaftLogReader`], [`RaftLogStorage`],
//! [`RaftStateMachine`] and [`RaftSnapshotBuilder`] from `openraft::storage` — on rbolt files.
//! The application supplies a [`Machine`]: what a log entry does inside an rbolt write
//! transaction. It owns no network and no Raft logic; it must not write to rbolt files it did
//! not open, and nothing in it is `unsafe`.
//!
//! # Layout
//!
//! Two rbolt files, so that a long snapshot never stalls log appends (each file has its own
//! writer) and a snapshot is one consistent copy of one file:
//!
//! - **The log** ([`LogStore`], `log.db` under [`open`]'s directory): bucket `raft_log` maps
//!   each entry's index, 8 bytes big-endian so key order is log order, to the entry behind a
//!   CRC-32 of its index and bytes, checked on every read, so a damaged file is
//!   [`Error::Damaged`] naming the entry, never a different entry replayed
//!   ([`LogStore::verify`] checks them all); bucket `raft_meta` holds the vote, the last
//!   purged log id and the committed log id.
//! - **The state machine** ([`StateMachine`], `state.db`): bucket `sm_meta` holds the last
//!   applied log id and the last membership, beside the application's own buckets.
//! - **The snapshot** (`snapshot.db`): a copy of `state.db` made by `ReadTx::write_to`, so it
//!   is itself an rbolt file that opens, checks and reads like any other. It is a file of its
//!   own because openraft asks for the last built or installed snapshot
//!   (`get_current_snapshot`) while `state.db` moves on with every apply; a handle on it
//!   keeps reading the same snapshot after a newer one replaces the name. The price is disk:
//!   a second copy of the state at rest, and while a snapshot is being installed, up to two
//!   more.
//!
//! Values are MessagePack with field names ([`rmp_serde`]): compact, and self-describing, so
//! any serde type an application puts in its log entries round-trips (serde attributes such as
//! `skip_serializing_if`, `flatten` and `untagged` need that; bincode-like formats break them).
//! Both meta buckets carry a `format` key; a file of another format is refused at open.
//!
//! # One bad entry never stops a node
//!
//! An entry is committed before any replica applies it, so an entry that cannot be applied
//! would fail on every replica and at every restart. [`Machine::refused`] answers for an
//! entry whose apply failed with an error of its own ([`Error::is_entry_error`]): the entry
//! changes nothing, its client hears the refusal, and the rest of the batch applies. Only a
//! failure of the node's storage fails `apply`, which openraft treats as fatal. Applications
//! should still validate requests before proposing them; this is the last line.
//!
//! # A full disk
//!
//! A write that fails for want of space ([`Error::is_no_space`]: `ENOSPC`, `EDQUOT`, an rbolt
//! file at its `max_size`) failed before rbolt's commit point, so it changed nothing; the
//! stores then ask [`Observer::no_space`] whether to run it again, and do while it says so
//! (by default it does not, and openraft stops the node as on any storage failure). An
//! application that frees space or waits there keeps its node up through a full disk: the
//! append, apply batch or snapshot that waits completes once there is room, in order, and
//! nothing committed is lost. Replicas have equal disks, so without this the entry that fills
//! one disk stops every node, and again at every restart.
//!
//! # Backups
//!
//! [`StateMachine::backup_to`] writes one consistent copy of the state file; [`check_backup`]
//! checks one, and [`restore`] seeds a new node's directory from it (the backup's data as its
//! state and snapshot, under a new membership, the log purged up to the backup's last applied
//! id), so a new cluster can start from the last state of one that lost its majority.
//!
//! # Durability
//!
//! Each write is one rbolt commit, durable (two `fdatasync`s) before the call returns, which is
//! what openraft's storage contract asks:
//!
//! - Creating: [`open`] creates missing directories one at a time, syncing each one's parent,
//!   and builds each new file under a temporary name (buckets and format key included), syncs
//!   it, links it to its name and syncs the directory. A process killed during its first start
//!   leaves either no file or a whole one, and the next start goes on from there.
//! - `save_vote`: the vote is on disk before it returns.
//! - `append`: all its entries in one commit; openraft's completion callback is called only
//!   once that commit is durable, and an append that would not follow the last entry (or the
//!   purge point) is refused, so the log never has a hole.
//! - `truncate_after` and `purge`: one commit each, so no reader and no crash ever sees a hole.
//!   `purge` records the purge point in the same commit.
//! - `save_committed`: kept in memory and written with the next commit of the log (see
//!   [`LogStore`] for why that is safe).
//! - `apply`: each batch of entries commits, with its last applied log id and membership,
//!   before any client hears back; durably, unless [`StateMachine::set_sync_every`] lets the
//!   batches commit without syncs, which the log's durable entries then stand in for (a power
//!   loss reopens the state file at its last durable commit, and openraft applies the
//!   committed entries after it again).
//! - Building a snapshot reads the last applied id and membership in the same read transaction
//!   whose `write_to` streams the file, then syncs it and renames it into place.
//! - Installing a snapshot writes it to a temporary file and syncs it, verifies it (opens it,
//!   requires `ReadTx::check` to find nothing, reads its `sm_meta` and compares it with the
//!   snapshot's meta), renames it into place, replaces the state file the same way, syncs the
//!   directory after each rename, and reopens. A crash leaves the old state or the new one,
//!   never a half-installed snapshot; leftover temporary files are deleted at open.
//!
//! # Threads
//!
//! openraft's storage traits are async; rbolt is blocking. Every rbolt call runs on the async
//! runtime's blocking pool (`spawn_blocking` of the configured `AsyncRuntime`): a durable
//! commit waits for two `fdatasync`s (milliseconds on real disks), and a read of the memory map
//! can fault on disk; either would otherwise stall the executor thread that also drives
//! heartbeats and elections. The hop costs microseconds. A blocking `begin_write` cannot pile
//! up either: openraft serializes the log store's writes and the state machine's writes, and
//! each file has only that one writer.
//!
//! # Costs
//!
//! Each append, truncation, purge, vote and apply batch waits for its own two `fdatasync`s:
//! rbolt makes a commit visible and durable in one step, so an append cannot return (entries
//! readable) before its flush and report the flush later, which openraft would allow. Building
//! a snapshot copies the whole state file.
//!
//! # Version
//!
//! Built on openraft `=0.10.0-alpha.37`, pinned exactly. The 0.10 line is where openraft is
//! developed (0.9 gets fixes only) and where these traits have their current shape (`IOFlushed`
//! callbacks, `truncate_after`, a streamed `apply` with per-entry responders, snapshot data as
//! an associated type of the state machine); its alphas still change those signatures, so a
//! caret requirement would let `cargo update` break the build. Move the pin deliberately, and
//! run this crate's tests, openraft's storage suite among them, when you do.
//!
//! # Putting it together
//!
//! ```no_run
//! use openraft::EntryPayload;
//! use openraft::network::NetSnapshot;
//! use openraft::type_config::alias::EntryOf;
//! use openraft::{Raft, RaftNetworkFactory};
//!
//! // Entries carry "key=value"; the response is empty.
//! openraft::declare_raft_types!(pub Config: D = String, R = ());
//!
//! struct Kv;
//!
//! impl rbolt_raft::Machine<Config> for Kv {
//!     fn apply(&self, tx: &mut rbolt::WriteTx<'_>, entry: &EntryOf<Config>) -> rbolt_raft::Result<()> {
//!         if let EntryPayload::Normal(pair) = &entry.payload {
//!             let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
//!             tx.create_bucket_if_not_exists(b"kv")?.put(key.as_bytes(), value.as_bytes())?;
//!         }
//!         Ok(())
//!     }
//! }
//!
//! async fn run<N>(network: N) -> Result<(), Box<dyn std::error::Error>>
//! where
//!     N: RaftNetworkFactory<Config>,
//!     N::Network: NetSnapshot<Config, SnapshotData = std::fs::File>,
//! {
//!     let (log, state) = rbolt_raft::open::<Config, _>("node-1", Kv)?;
//!     let reads = state.clone();
//!     let config = std::sync::Arc::new(openraft::Config::default().validate()?);
//!     let raft = Raft::new(1, config, network, log, state).await?;
//!     // Write through the leader; read any replica's state file.
//!     raft.client_write("colour=blue".to_owned()).await?;
//!     let colour = reads.view(|tx| {
//!         let Some(kv) = tx.bucket(b"kv")? else { return Ok(None) };
//!         Ok(kv.get(b"colour")?.map(<[u8]>::to_vec))
//!     })?;
//!     # let _ = colour;
//!     Ok(())
//! }
//! ```
//!
//! `examples/kv_cluster` runs three such nodes over an in-process network; the
//! `rbolt-raft-node` crate runs each as its own process, with Raft and clients over HTTP.
//!
//! [`RaftLogReader`]: openraft::storage::RaftLogReader
//! [`RaftLogStorage`]: openraft::storage::RaftLogStorage
//! [`RaftStateMachine`]: openraft::storage::RaftStateMachine
//! [`RaftSnapshotBuilder`]: openraft::storage::RaftSnapshotBuilder

#![warn(missing_docs)]
#![forbid(unsafe_code)]

mod codec;
mod error;
mod files;
mod log_store;
mod observe;
mod restore;
mod state_machine;

pub use error::{Error, Result};
pub use files::{RESTORING_FILE, TMP_SUFFIX};
pub use log_store::{
    LIMITED_READ_BYTES_MAX, LOG_BUCKET, LOG_META_BUCKET, LogCounters, LogReader, LogStore,
};
pub use observe::{LogWrite, Observer};
pub use restore::{RESTORE_CRASH_POINTS, check_backup, restore, restore_with};
pub use state_machine::{
    APPLY_BATCH_ENTRIES_MAX, ApplyCounters, Machine, SM_META_BUCKET, SNAPSHOT_FILE, STATE_FILE,
    SnapshotBuilder, StateMachine,
};

use openraft::RaftTypeConfig;
use std::path::Path;
use std::time::Duration;

/// The log file in [`open`]'s directory.
pub const LOG_FILE: &str = "log.db";

/// How long opening a file waits for another handle to release its lock, by default.
pub const LOCK_TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);

/// The rbolt options this crate opens files with by default: rbolt's defaults, durable
/// commits, and a [`LOCK_TIMEOUT_DEFAULT`] lock wait so that reopening a node whose old
/// handles are still closing waits briefly instead of failing at once (rbolt's default).
///
/// No reader table (`readers_beside_writer(false)`): the node builds its files under
/// temporary names and renames them into place, and a lock file would be left behind under
/// the temporary name; readers of a live node's files in other processes are not offered yet
/// (issue 50 covers `rbolt`'s own opens).
pub fn rbolt_options() -> rbolt::Options {
    rbolt::Options::default()
        .lock_timeout(Some(LOCK_TIMEOUT_DEFAULT))
        .readers_beside_writer(false)
}

/// Opens (creating if missing) a node's storage in directory `dir`: the log in [`LOG_FILE`]
/// and the state machine, with `machine`, in [`STATE_FILE`] and [`SNAPSHOT_FILE`]. A directory
/// that holds a [`restore`] that did not finish is refused ([`Error::RestoreUnfinished`]).
///
/// The directory, its missing parents and the files are made durable as they are created
/// (see "Durability" above), so a crash during the first start leaves a directory that opens.
pub fn open<C: RaftTypeConfig, M: Machine<C>>(
    dir: impl AsRef<Path>,
    machine: M,
) -> Result<(LogStore<C>, StateMachine<C, M>)> {
    let dir = dir.as_ref();
    let state = StateMachine::open(dir, machine)?;
    let log = LogStore::open(dir.join(LOG_FILE))?;
    Ok((log, state))
}
