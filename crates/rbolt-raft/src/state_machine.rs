//! The state machine in its own rbolt file, and snapshots that are copies of that file:
//! [`StateMachine`], [`SnapshotBuilder`] and the [`Machine`] trait an application implements.

use crate::codec::{FORMAT, KEY_FORMAT, blocking, check_format, decode, encode};
use crate::error::{Error, Result};
use crate::files::{TMP_SUFFIX, create_dir_durable, open_or_create, refuse_unfinished, sync_dir};
use crate::observe::{NoObserver, Observer, retry_no_space};
use futures_util::TryStreamExt;
use openraft::entry::RaftEntry;
use openraft::storage::{EntryResponder, RaftSnapshotBuilder, RaftStateMachine};
use openraft::type_config::alias::{LogIdOf, SnapshotMetaOf, SnapshotOf, StoredMembershipOf};
use openraft::{OptionalSend, RaftTypeConfig, StoredMembership};
use rbolt::{Db, Durability, ReadTx, WriteTx};
use std::fmt::Debug;
use std::fs::{self, File};
use std::io::{self, Seek, SeekFrom};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, PoisonError, RwLock};
use std::time::Instant;

/// The bucket of the state machine's own metadata: the last applied log id and the last
/// membership. Every other top-level bucket of the state file belongs to the application.
pub const SM_META_BUCKET: &[u8] = b"sm_meta";
/// The state machine's rbolt file, in its directory.
pub const STATE_FILE: &str = "state.db";
/// The current snapshot, in the state machine's directory: a copy of the state file as of the
/// snapshot's last log id.
pub const SNAPSHOT_FILE: &str = "snapshot.db";
/// `apply` commits at least once per this many entries, so that a long catch-up neither holds
/// all its entries in memory nor delays every reply to the end.
pub const APPLY_BATCH_ENTRIES_MAX: usize = 1024;

const KEY_LAST_APPLIED: &[u8] = b"last_applied";
const KEY_MEMBERSHIP: &[u8] = b"last_membership";

/// The application's part of the state machine: what a log entry does to its buckets.
///
/// ```
/// use openraft::EntryPayload;
/// use rbolt_raft::Machine;
///
/// // Entries carry "key=value"; the response is the value the key held before.
/// openraft::declare_raft_types!(pub Config: D = String, R = Option<String>);
///
/// /// Each normal entry puts one key into the `kv` bucket.
/// struct Kv;
///
/// impl Machine<Config> for Kv {
///     fn apply(
///         &self,
///         tx: &mut rbolt::WriteTx<'_>,
///         entry: &openraft::type_config::alias::EntryOf<Config>,
///     ) -> rbolt_raft::Result<Option<String>> {
///         let EntryPayload::Normal(pair) = &entry.payload else {
///             return Ok(None); // blank and membership entries change no bucket here
///         };
///         let (key, value) = pair.split_once('=').unwrap_or((pair, ""));
///         let mut kv = tx.create_bucket_if_not_exists(b"kv")?;
///         let previous = kv.get(key.as_bytes())?.map(|v| String::from_utf8_lossy(v).into_owned());
///         kv.put(key.as_bytes(), value.as_bytes())?;
///         Ok(previous)
///     }
/// }
/// ```
pub trait Machine<C: RaftTypeConfig>: Send + Sync + 'static {
    /// Applies `entry` inside `tx` and returns the response for the client that proposed it.
    ///
    /// It is called for every entry in log order: normal, blank and membership ones alike (the
    /// state machine records memberships itself). Entries are applied in batches of one write
    /// transaction; the batch commits, with the last applied log id, before any response is
    /// sent. It must be deterministic: every replica applies the same entries. Leave the
    /// [`SM_META_BUCKET`] bucket alone.
    ///
    /// An `Err` that belongs to the entry ([`Error::is_entry_error`]: a key rbolt refuses, a
    /// payload the application cannot use) undoes what this entry did, keeps the rest of the
    /// batch, and records [`Machine::refused`]'s answer as the entry's result. Any other `Err`
    /// (the disk failing) rolls the whole batch back and stops the Raft node: openraft treats
    /// it as a fatal storage error. A request the application refuses on purpose belongs in
    /// `C::R`.
    fn apply(&self, tx: &mut WriteTx<'_>, entry: &C::Entry) -> Result<C::R>;

    /// The result recorded for `entry` when [`Machine::apply`] failed with `error`, an error
    /// of the entry's own; the entry changed nothing. The default gives `error` back, which
    /// stops the Raft node as any failed apply did before: implement it so that one entry
    /// that cannot be applied is answered to its client as a failure, on every replica alike,
    /// instead of stopping the cluster (it is committed: every restart would apply it again).
    fn refused(&self, entry: &C::Entry, error: Error) -> Result<C::R> {
        let _ = entry;
        Err(error)
    }
}

/// What the state machine's handles share.
struct Shared<C: RaftTypeConfig> {
    dir: PathBuf,
    options: rbolt::Options,
    /// The open state file. Replaced when a snapshot is installed; readers keep the one they
    /// took.
    db: RwLock<Arc<Db>>,
    /// The meta of [`SNAPSHOT_FILE`], if there is one. Its lock orders the renames over it.
    snapshot: Mutex<Option<SnapshotMetaOf<C>>>,
    /// Numbers temporary files.
    tmp_seq: AtomicU64,
    /// Apply batches committed, for [`ApplyCounters`].
    apply_commits: AtomicU64,
    /// Entries applied by them.
    entries_applied: AtomicU64,
    /// Snapshots installed.
    installs: AtomicU64,
    /// Entries whose apply failed with an error of their own.
    refused: AtomicU64,
    /// Apply batches commit durably when this is at most 1; above, they commit without syncs
    /// and the file is synced once this many entries were applied since the last sync (see
    /// [`StateMachine::set_sync_every`]).
    sync_every: AtomicU64,
    /// Entries applied by commits without syncs since the last durable point.
    unsynced_entries: AtomicU64,
    /// Durable points made after commits without syncs.
    syncs: AtomicU64,
    /// Told of apply batches and snapshots.
    observer: OnceLock<Arc<dyn Observer>>,
}

/// What a [`StateMachine`] has written since it was opened.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ApplyCounters {
    /// Commits of apply batches (each durable, two `fdatasync`s, unless
    /// [`StateMachine::set_sync_every`] says otherwise).
    pub commits: u64,
    /// Entries applied by them.
    pub entries_applied: u64,
    /// Snapshots installed.
    pub installs: u64,
    /// Entries whose apply failed with an error of their own, answered by
    /// [`Machine::refused`].
    pub refused: u64,
    /// Syncs of the state file after commits without syncs ([`StateMachine::set_sync_every`]).
    pub syncs: u64,
}

/// The state machine: the application's buckets and [`SM_META_BUCKET`] in one rbolt file,
/// [`STATE_FILE`] in its directory, and the current snapshot beside it in [`SNAPSHOT_FILE`].
///
/// Clones are handles on the same state: give one to `Raft::new` and keep one to read.
pub struct StateMachine<C: RaftTypeConfig, M> {
    shared: Arc<Shared<C>>,
    machine: Arc<M>,
}

impl<C: RaftTypeConfig, M> Clone for StateMachine<C, M> {
    fn clone(&self) -> Self {
        StateMachine {
            shared: Arc::clone(&self.shared),
            machine: Arc::clone(&self.machine),
        }
    }
}

impl<C: RaftTypeConfig, M> Debug for StateMachine<C, M> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StateMachine")
            .field("dir", &self.shared.dir)
            .finish_non_exhaustive()
    }
}

/// Builds a snapshot of a [`StateMachine`]: one `write_to` of its state file from a single
/// read transaction, which also supplies the snapshot's last applied id and membership. Builds
/// never hold the writer, so applying goes on meanwhile.
pub struct SnapshotBuilder<C: RaftTypeConfig> {
    shared: Arc<Shared<C>>,
}

impl<C: RaftTypeConfig> Debug for SnapshotBuilder<C> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SnapshotBuilder")
            .field("dir", &self.shared.dir)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Records `applied` (the entries `tx` applied, in order) in `tx`'s sm_meta and commits it.
fn commit_applied<C: RaftTypeConfig>(tx: WriteTx<'_>, applied: &[C::Entry]) -> Result<()> {
    let membership = applied.iter().rev().find_map(|entry| {
        entry
            .get_membership()
            .map(|m| StoredMembershipOf::<C>::new(Some(entry.log_id()), m))
    });
    let last_applied = applied.last().map(|e| e.log_id());
    let mut meta = tx
        .bucket_mut(SM_META_BUCKET)?
        .ok_or_else(|| Error::invalid("the sm_meta bucket is missing"))?;
    meta.put(
        KEY_LAST_APPLIED,
        &encode("last applied log id", &last_applied)?,
    )?;
    if let Some(membership) = membership {
        meta.put(KEY_MEMBERSHIP, &encode("last membership", &membership)?)?;
    }
    drop(meta);
    tx.commit()?;
    Ok(())
}

/// Opens the state file (a snapshot, a backup) at `path` read-only, requires rbolt's `check`
/// to find nothing wrong, and reads its last applied id and membership.
pub(crate) fn check_state_file<C: RaftTypeConfig>(
    path: &Path,
    options: &rbolt::Options,
) -> Result<(Option<LogIdOf<C>>, StoredMembershipOf<C>)> {
    let db = Db::open_with(path, options.clone().read_only(true))?;
    let tx = db.begin_read()?;
    let problems = tx.check();
    if let Some(first) = problems.first() {
        return Err(Error::invalid(format!(
            "{} fails rbolt's check with {} problem(s), the first: {first}",
            path.display(),
            problems.len()
        )));
    }
    read_sm_meta::<C>(&tx)
}

/// Reads the last applied id and the membership from [`SM_META_BUCKET`] of `tx`.
fn read_sm_meta<C: RaftTypeConfig>(
    tx: &ReadTx<'_>,
) -> Result<(Option<LogIdOf<C>>, StoredMembershipOf<C>)> {
    let meta = tx
        .bucket(SM_META_BUCKET)?
        .ok_or_else(|| Error::invalid("the sm_meta bucket is missing"))?;
    if meta.get(KEY_FORMAT)? != Some(FORMAT) {
        return Err(Error::invalid(format!(
            "the sm_meta bucket has format {:?}, expected {:?}",
            meta.get(KEY_FORMAT)?.map(String::from_utf8_lossy),
            String::from_utf8_lossy(FORMAT)
        )));
    }
    let last_applied = match meta.get(KEY_LAST_APPLIED)? {
        Some(bytes) => decode("last applied log id", bytes)?,
        None => None,
    };
    let membership = match meta.get(KEY_MEMBERSHIP)? {
        Some(bytes) => decode("last membership", bytes)?,
        None => StoredMembership::default(),
    };
    Ok((last_applied, membership))
}

impl<C: RaftTypeConfig> Shared<C> {
    fn state_path(&self) -> PathBuf {
        self.dir.join(STATE_FILE)
    }

    fn snapshot_path(&self) -> PathBuf {
        self.dir.join(SNAPSHOT_FILE)
    }

    /// A fresh temporary file name in the directory.
    fn tmp_path(&self, kind: &str) -> PathBuf {
        let seq = self.tmp_seq.fetch_add(1, Ordering::Relaxed);
        self.dir.join(format!("{kind}-{seq}{TMP_SUFFIX}"))
    }

    fn db(&self) -> Arc<Db> {
        Arc::clone(&self.db.read().unwrap_or_else(PoisonError::into_inner))
    }

    fn observer(&self) -> &dyn Observer {
        match self.observer.get() {
            Some(observer) => observer.as_ref(),
            None => &NoObserver,
        }
    }

    /// Applies `entries` and commits them with the last applied id (and the last membership,
    /// if one of them carries one): in one write transaction, unless an entry fails with an
    /// error of its own. rbolt has no savepoints, so then the transaction is dropped, the
    /// entries before the failed one are applied again in a new one (they succeeded and are
    /// deterministic), the failed one gets [`Machine::refused`]'s result and that prefix
    /// commits; the rest of the batch goes on in a fresh transaction. Each entry is applied
    /// at most twice per attempt, and a failure costs one more commit.
    ///
    /// A transaction whose commit fails for want of space changed nothing, so it runs again,
    /// from the same entry, while the observer asks for it ([`Observer::no_space`]): entries
    /// are applied in order, once each, whatever the disk does.
    fn apply_batch<M: Machine<C>>(&self, machine: &M, entries: &[C::Entry]) -> Result<Vec<C::R>> {
        let started = Instant::now();
        let path = self.state_path();
        let mut responses = Vec::with_capacity(entries.len());
        let mut rest = entries;
        while !rest.is_empty() {
            let kept = responses.len();
            let done = retry_no_space(self.observer(), &path, || {
                responses.truncate(kept);
                self.apply_prefix(machine, rest, &mut responses)
            })?;
            rest = &rest[done..];
        }
        self.apply_commits.fetch_add(1, Ordering::Relaxed);
        self.entries_applied
            .fetch_add(entries.len() as u64, Ordering::Relaxed);
        self.sync_if_due(entries.len() as u64)?;
        self.observer()
            .applied(entries.len() as u64, started.elapsed());
        Ok(responses)
    }

    /// After commits without syncs of `applied` more entries: syncs the state file once
    /// [`StateMachine::set_sync_every`]'s count is reached. A failed sync poisons the handle
    /// and fails the apply (openraft stops the node; at restart it applies again from the
    /// last durable point).
    fn sync_if_due(&self, applied: u64) -> Result<()> {
        let every = self.sync_every.load(Ordering::Relaxed);
        if every <= 1 {
            return Ok(());
        }
        let unsynced = self.unsynced_entries.fetch_add(applied, Ordering::Relaxed) + applied;
        if unsynced >= every {
            self.db().sync()?;
            self.unsynced_entries.store(0, Ordering::Relaxed);
            self.syncs.fetch_add(1, Ordering::Relaxed);
        }
        Ok(())
    }

    /// Applies `rest` in one transaction up to and including the first entry that fails with
    /// an error of its own (see [`Shared::apply_batch`]), pushes their responses and commits;
    /// returns how many entries it applied.
    fn apply_prefix<M: Machine<C>>(
        &self,
        machine: &M,
        rest: &[C::Entry],
        responses: &mut Vec<C::R>,
    ) -> Result<usize> {
        let db = self.db();
        let unsynced = self.sync_every.load(Ordering::Relaxed) > 1;
        let begin = || -> Result<WriteTx<'_>> {
            let tx = db.begin_write()?;
            if unsynced {
                tx.set_durability(Durability::None);
            }
            Ok(tx)
        };
        let mut tx = begin()?;
        let mut failed = None;
        for (at, entry) in rest.iter().enumerate() {
            match machine.apply(&mut tx, entry) {
                Ok(response) => responses.push(response),
                Err(error) if error.is_entry_error() => {
                    failed = Some((at, error));
                    break;
                }
                Err(error) => return Err(error),
            }
        }
        let done = match failed {
            None => rest.len(),
            Some((at, error)) => {
                drop(tx);
                tx = begin()?;
                for entry in &rest[..at] {
                    machine.apply(&mut tx, entry)?;
                }
                let entry = &rest[at];
                // Reported again if the commit below is retried for want of space.
                self.observer().entry_refused(entry.index(), &error);
                self.refused.fetch_add(1, Ordering::Relaxed);
                responses.push(machine.refused(entry, error)?);
                at + 1
            }
        };
        commit_applied::<C>(tx, &rest[..done])?;
        Ok(done)
    }

    /// Copies the state file as of one read transaction into a new snapshot file and makes it
    /// the current snapshot unless a newer one is already there.
    fn build_snapshot(&self) -> Result<SnapshotOf<C, File>> {
        let tmp = self.tmp_path("building");
        // A copy that fails for want of space is deleted (below) and made again while the
        // observer asks for it.
        retry_no_space(self.observer(), &tmp, || self.build_snapshot_at(&tmp))
    }

    /// [`Shared::build_snapshot`] into the temporary file `tmp`.
    fn build_snapshot_at(&self, tmp: &Path) -> Result<SnapshotOf<C, File>> {
        let started = Instant::now();
        let db = self.db();
        let tmp = tmp.to_path_buf();
        let built = (|| {
            let tx = db.begin_read()?;
            let (last_log_id, last_membership) = read_sm_meta::<C>(&tx)?;
            let bytes = tx.copy_file(&tmp)?;
            self.observer().snapshot_built(
                last_log_id.as_ref().map(|id| id.index()),
                bytes,
                started.elapsed(),
            );
            // This handle reads this snapshot whatever later renames do to the name.
            let file = File::open(&tmp).map_err(Error::io(&tmp))?;
            let meta = SnapshotMetaOf::<C> {
                last_log_id,
                last_membership,
            };
            Ok((meta, file))
        })();
        let (meta, file) = match built {
            Ok(built) => built,
            Err(error) => {
                let _ = fs::remove_file(&tmp);
                return Err(error);
            }
        };
        let mut current = lock(&self.snapshot);
        if current
            .as_ref()
            .is_some_and(|current| current.last_log_id > meta.last_log_id)
        {
            // An install got ahead of this build: keep the newer snapshot.
            fs::remove_file(&tmp).map_err(Error::io(&tmp))?;
        } else {
            fs::rename(&tmp, self.snapshot_path()).map_err(Error::io(&tmp))?;
            sync_dir(&self.dir)?;
            *current = Some(meta.clone());
        }
        Ok(SnapshotOf::<C, File> {
            meta,
            snapshot: file,
        })
    }

    /// Receives `data` into a temporary file, verifies it, and replaces the snapshot and the
    /// state file with it. A crash at any point leaves either the old state or the new one:
    /// every file is complete and synced before a rename makes it current, and the directory
    /// is synced after each rename.
    fn install_snapshot(&self, meta: &SnapshotMetaOf<C>, mut data: File) -> Result<()> {
        let started = Instant::now();
        let incoming = self.tmp_path("incoming");
        let state_tmp = self.tmp_path("state");
        // Staging that fails for want of space removes both files (below) and starts over
        // while the observer asks for it; nothing current changed yet.
        retry_no_space(self.observer(), &incoming, || {
            self.stage_install(meta, &mut data, &incoming, &state_tmp)
        })?;
        self.replace_with_installed(meta, incoming, state_tmp, started)
    }

    /// Steps 1 to 3 of [`Shared::install_snapshot`]: receives `data` into `incoming`, verifies
    /// it and copies it to `state_tmp`, durably; on an error neither file is left.
    fn stage_install(
        &self,
        meta: &SnapshotMetaOf<C>,
        data: &mut File,
        incoming: &Path,
        state_tmp: &Path,
    ) -> Result<()> {
        let staged = (|| {
            // 1. Receive, durably.
            data.seek(SeekFrom::Start(0)).map_err(Error::io(incoming))?;
            let mut out = File::create_new(incoming).map_err(Error::io(incoming))?;
            io::copy(data, &mut out).map_err(Error::io(incoming))?;
            out.sync_all().map_err(Error::io(incoming))?;
            drop(out);
            // 2. Verify: a sound rbolt file holding the state the meta claims.
            self.verify(incoming, meta)?;
            // 3. Stage the new state file, durably.
            fs::copy(incoming, state_tmp).map_err(Error::io(state_tmp))?;
            File::open(state_tmp)
                .and_then(|f| f.sync_all())
                .map_err(Error::io(state_tmp))?;
            Ok(())
        })();
        if let Err(error) = staged {
            let _ = fs::remove_file(incoming);
            let _ = fs::remove_file(state_tmp);
            return Err(error);
        }
        Ok(())
    }

    /// Steps 4 and 5 of [`Shared::install_snapshot`]: the staged files become current.
    fn replace_with_installed(
        &self,
        meta: &SnapshotMetaOf<C>,
        incoming: PathBuf,
        state_tmp: PathBuf,
        started: Instant,
    ) -> Result<()> {
        // 4. The snapshot becomes current. A crash from here until step 5 leaves a snapshot
        // newer than the state file; at restart openraft installs it again.
        {
            let mut current = lock(&self.snapshot);
            fs::rename(&incoming, self.snapshot_path()).map_err(Error::io(&incoming))?;
            sync_dir(&self.dir)?;
            *current = Some(meta.clone());
        }
        // 5. The state file is replaced, then reopened. Readers of the old one keep it.
        let state_path = self.state_path();
        fs::rename(&state_tmp, &state_path).map_err(Error::io(&state_tmp))?;
        sync_dir(&self.dir)?;
        let db = Db::open_with(&state_path, self.options.clone())?;
        *self.db.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(db);
        // The installed file is durable: nothing applied since the last sync is left on it.
        self.unsynced_entries.store(0, Ordering::Relaxed);
        self.installs.fetch_add(1, Ordering::Relaxed);
        self.observer().snapshot_installed(
            meta.last_log_id.as_ref().map(|id| id.index()),
            started.elapsed(),
        );
        Ok(())
    }

    /// Opens `path` read-only and checks it is a sound rbolt file whose sm_meta matches `meta`.
    fn verify(&self, path: &Path, meta: &SnapshotMetaOf<C>) -> Result<()> {
        let (last_log_id, last_membership) = check_state_file::<C>(path, &self.options)?;
        if last_log_id != meta.last_log_id || last_membership != meta.last_membership {
            return Err(Error::invalid(format!(
                "snapshot data holds last applied {last_log_id:?} and membership \
                 {last_membership:?}, but its meta says {:?} and {:?}",
                meta.last_log_id, meta.last_membership
            )));
        }
        Ok(())
    }

    fn current_snapshot(&self) -> Result<Option<SnapshotOf<C, File>>> {
        let current = lock(&self.snapshot);
        let Some(meta) = current.as_ref() else {
            return Ok(None);
        };
        let path = self.snapshot_path();
        let file = File::open(&path).map_err(Error::io(&path))?;
        Ok(Some(SnapshotOf::<C, File> {
            meta: meta.clone(),
            snapshot: file,
        }))
    }
}

impl<C: RaftTypeConfig, M: Machine<C>> StateMachine<C, M> {
    /// Opens the state machine in directory `dir` with [`crate::rbolt_options`], creating the
    /// directory and the state file if missing.
    pub fn open(dir: impl AsRef<Path>, machine: M) -> Result<StateMachine<C, M>> {
        StateMachine::open_with(dir, machine, crate::rbolt_options())
    }

    /// Opens the state machine in directory `dir` with `options` for its rbolt files. The
    /// directory belongs to the state machine: files in it ending in [`TMP_SUFFIX`] are
    /// deleted. A directory holding a [`crate::restore`] that did not finish is refused
    /// ([`crate::Error::RestoreUnfinished`]), before anything in it changes.
    ///
    /// Missing directories are created with their parents synced, and a new state file is
    /// built under a temporary name and given its name only once it is complete and durable,
    /// so a crash during a first start leaves nothing that a restart cannot open.
    pub fn open_with(
        dir: impl AsRef<Path>,
        machine: M,
        options: rbolt::Options,
    ) -> Result<StateMachine<C, M>> {
        let dir = dir.as_ref().to_path_buf();
        refuse_unfinished(&dir)?;
        create_dir_durable(&dir)?;
        let state_path = dir.join(STATE_FILE);
        // Opening the state file takes its lock first, so no other handle is using the
        // directory when the leftovers go.
        let db = open_or_create(&state_path, &options, |tx| {
            check_format(
                &mut tx.create_bucket_if_not_exists(SM_META_BUCKET)?,
                &state_path,
                FORMAT,
            )
        })?;
        let ready = db.view(|tx| {
            Ok::<_, rbolt::Error>(
                tx.bucket(SM_META_BUCKET)?
                    .is_some_and(|meta| meta.get(KEY_FORMAT).ok().flatten() == Some(FORMAT)),
            )
        })?;
        if !ready {
            let tx = db.begin_write()?;
            check_format(
                &mut tx.create_bucket_if_not_exists(SM_META_BUCKET)?,
                &state_path,
                FORMAT,
            )?;
            tx.commit()?;
        }
        remove_leftovers(&dir)?;
        let snapshot_path = dir.join(SNAPSHOT_FILE);
        let snapshot = if snapshot_path.exists() {
            let snapshot_db = Db::open_with(&snapshot_path, options.clone().read_only(true))?;
            let tx = snapshot_db.begin_read()?;
            let (last_log_id, last_membership) = read_sm_meta::<C>(&tx)?;
            Some(SnapshotMetaOf::<C> {
                last_log_id,
                last_membership,
            })
        } else {
            None
        };
        Ok(StateMachine {
            shared: Arc::new(Shared {
                dir,
                options,
                db: RwLock::new(Arc::new(db)),
                snapshot: Mutex::new(snapshot),
                tmp_seq: AtomicU64::new(0),
                apply_commits: AtomicU64::new(0),
                entries_applied: AtomicU64::new(0),
                installs: AtomicU64::new(0),
                refused: AtomicU64::new(0),
                sync_every: AtomicU64::new(1),
                unsynced_entries: AtomicU64::new(0),
                syncs: AtomicU64::new(0),
                observer: OnceLock::new(),
            }),
            machine: Arc::new(machine),
        })
    }
}

impl<C: RaftTypeConfig, M> StateMachine<C, M> {
    /// The directory of the state file and the snapshot.
    pub fn dir(&self) -> &Path {
        &self.shared.dir
    }

    /// The open state file. Read it (`begin_read`, `view`); writing to it behind the state
    /// machine's back breaks replication. After a snapshot is installed this returns the new
    /// file; a handle taken before keeps reading the old one.
    pub fn db(&self) -> Arc<Db> {
        self.shared.db()
    }

    /// Runs `f` in a read transaction on the current state file.
    pub fn view<T>(&self, f: impl FnOnce(&ReadTx<'_>) -> Result<T>) -> Result<T> {
        let db = self.db();
        let tx = db.begin_read()?;
        f(&tx)
    }

    /// The last applied log id and the last membership, as committed.
    pub fn applied(&self) -> Result<(Option<LogIdOf<C>>, StoredMembershipOf<C>)> {
        let db = self.db();
        let tx = db.begin_read()?;
        read_sm_meta::<C>(&tx)
    }

    /// The meta of the current snapshot, if there is one.
    pub fn snapshot_meta(&self) -> Option<SnapshotMetaOf<C>> {
        lock(&self.shared.snapshot).clone()
    }

    /// What this state machine has written since it was opened.
    pub fn counters(&self) -> ApplyCounters {
        ApplyCounters {
            commits: self.shared.apply_commits.load(Ordering::Relaxed),
            entries_applied: self.shared.entries_applied.load(Ordering::Relaxed),
            installs: self.shared.installs.load(Ordering::Relaxed),
            refused: self.shared.refused.load(Ordering::Relaxed),
            syncs: self.shared.syncs.load(Ordering::Relaxed),
        }
    }

    /// With `entries` above 1, apply batches commit without syncs (`Durability::None`) and
    /// the state file is synced once `entries` entries were applied since the last sync; at 0
    /// or 1 (the default) every batch is one durable commit. Set it before the state machine
    /// goes to openraft.
    ///
    /// The log is the durable record of every committed entry, so the state file need not be
    /// durable at every batch (etcd's backend commits in batches too): a crash of the process
    /// keeps commits without syncs (rbolt finds them at the next open in the same boot), and
    /// a power loss or an OS crash reopens the file at its last durable commit, whole, whose
    /// last applied id is the one recorded with its data (never more than it holds). openraft
    /// then applies the committed entries after it again, from the log, or installs the
    /// snapshot if that is newer (a snapshot is a synced copy, and the log is purged only
    /// behind one). A client hears of its write once its entry is durable in a majority's logs
    /// and applied here, durably or not. What it costs: after a power loss, the entries since
    /// the last durable point are applied again at the start, and until a sync rbolt keeps the
    /// pages of the last durable commit, so the file can grow by up to its live pages.
    pub fn set_sync_every(&self, entries: u64) {
        self.shared.sync_every.store(entries, Ordering::Relaxed);
    }

    /// Tells `observer` of every apply batch, refused entry and snapshot from now on. Only
    /// the first call has an effect: set it before the state machine goes to openraft.
    pub fn set_observer(&self, observer: Arc<dyn Observer>) {
        let _ = self.shared.observer.set(observer);
    }

    /// Writes a backup of the state machine to `w`: one consistent copy of the state file
    /// from one read transaction (an rbolt file like `state.db`, which [`restore`] seeds a
    /// new node from). Returns the last applied log id it holds and its size in bytes.
    pub fn backup_to(&self, w: impl io::Write) -> Result<(Option<LogIdOf<C>>, u64)> {
        let db = self.db();
        let tx = db.begin_read()?;
        let (last_applied, _) = read_sm_meta::<C>(&tx)?;
        let bytes = tx.write_to(w)?;
        Ok((last_applied, bytes))
    }

    /// The application's [`Machine`].
    pub fn machine(&self) -> &M {
        &self.machine
    }
}

/// Deletes the temporary files a crash may have left in `dir`.
fn remove_leftovers(dir: &Path) -> Result<()> {
    for entry in fs::read_dir(dir).map_err(Error::io(dir))? {
        let path = entry.map_err(Error::io(dir))?.path();
        if path
            .file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| n.ends_with(TMP_SUFFIX))
        {
            fs::remove_file(&path).map_err(Error::io(&path))?;
        }
    }
    Ok(())
}

impl<C: RaftTypeConfig> RaftSnapshotBuilder<C> for SnapshotBuilder<C> {
    type SnapshotData = File;

    async fn build_snapshot(&mut self) -> io::Result<SnapshotOf<C, File>> {
        let shared = Arc::clone(&self.shared);
        Ok(blocking::<C, _>(move || shared.build_snapshot()).await?)
    }
}

impl<C: RaftTypeConfig, M: Machine<C>> RaftStateMachine<C> for StateMachine<C, M> {
    /// A snapshot is an rbolt file: the state file as of the snapshot's last log id. The
    /// handle reads that file even after a newer snapshot replaces its name.
    type SnapshotData = File;
    type SnapshotBuilder = SnapshotBuilder<C>;

    async fn applied_state(&mut self) -> io::Result<(Option<LogIdOf<C>>, StoredMembershipOf<C>)> {
        let this = self.clone();
        Ok(blocking::<C, _>(move || this.applied()).await?)
    }

    async fn apply<S>(&mut self, mut entries: S) -> io::Result<()>
    where
        S: futures_util::Stream<Item = io::Result<EntryResponder<C>>> + Unpin + OptionalSend,
    {
        loop {
            let mut batch = Vec::new();
            let mut responders = Vec::new();
            let mut ended = false;
            while batch.len() < APPLY_BATCH_ENTRIES_MAX {
                match entries.try_next().await? {
                    Some((entry, responder)) => {
                        batch.push(entry);
                        responders.push(responder);
                    }
                    None => {
                        ended = true;
                        break;
                    }
                }
            }
            if !batch.is_empty() {
                let shared = Arc::clone(&self.shared);
                let machine = Arc::clone(&self.machine);
                let responses =
                    blocking::<C, _>(move || shared.apply_batch(&*machine, &batch)).await?;
                // The batch and its last applied id are durable: now clients may hear of it.
                for (responder, response) in responders.into_iter().zip(responses) {
                    if let Some(responder) = responder {
                        responder.send(response);
                    }
                }
            }
            if ended {
                return Ok(());
            }
        }
    }

    async fn try_create_snapshot_builder(&mut self, _force: bool) -> Option<SnapshotBuilder<C>> {
        Some(self.get_snapshot_builder().await)
    }

    async fn get_snapshot_builder(&mut self) -> SnapshotBuilder<C> {
        SnapshotBuilder {
            shared: Arc::clone(&self.shared),
        }
    }

    async fn install_snapshot(
        &mut self,
        meta: &SnapshotMetaOf<C>,
        snapshot: File,
    ) -> io::Result<()> {
        let shared = Arc::clone(&self.shared);
        let meta = meta.clone();
        Ok(blocking::<C, _>(move || shared.install_snapshot(&meta, snapshot)).await?)
    }

    async fn get_current_snapshot(&mut self) -> io::Result<Option<SnapshotOf<C, File>>> {
        let shared = Arc::clone(&self.shared);
        Ok(blocking::<C, _>(move || shared.current_snapshot()).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    openraft::declare_raft_types!(Config);

    struct Noop;

    impl Machine<Config> for Noop {
        fn apply(
            &self,
            _tx: &mut WriteTx<'_>,
            _entry: &openraft::type_config::alias::EntryOf<C>,
        ) -> Result<String> {
            Ok(String::new())
        }
    }

    type C = Config;

    #[test]
    fn a_build_that_ends_after_a_newer_install_keeps_the_newer_snapshot() {
        let dir = tempfile::tempdir().expect("tempdir");
        let state = StateMachine::<C, Noop>::open(dir.path(), Noop).expect("open");
        // As if an install of a snapshot at index 100 finished while this build ran.
        let newer = SnapshotMetaOf::<C> {
            last_log_id: Some(openraft::testing::log_id::<C>(9, 0, 100)),
            last_membership: StoredMembership::default(),
        };
        *lock(&state.shared.snapshot) = Some(newer.clone());
        fs::write(dir.path().join(SNAPSHOT_FILE), b"the newer snapshot").expect("write");

        let built = state.shared.build_snapshot().expect("build");

        assert_eq!(
            built.meta.last_log_id, None,
            "the build saw nothing applied"
        );
        assert_eq!(
            fs::read(dir.path().join(SNAPSHOT_FILE)).expect("read"),
            b"the newer snapshot",
            "the older build did not replace the newer snapshot"
        );
        assert_eq!(state.snapshot_meta(), Some(newer));
        let leftovers = fs::read_dir(dir.path())
            .expect("read_dir")
            .filter_map(|e| e.ok())
            .filter(|e| e.file_name().to_string_lossy().ends_with(TMP_SUFFIX))
            .count();
        assert_eq!(leftovers, 0, "the discarded build's file is gone");
    }
}
