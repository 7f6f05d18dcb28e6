//! Seeding a new node's directory from a backup of a state machine ([`restore`]), and checking
//! a backup ([`check_backup`]).

use crate::codec::encode;
use crate::error::{Error, Result};
use crate::files::{RESTORING_FILE, create_dir_durable, sync_dir};
use crate::log_store::{LOG_META_BUCKET, LogStore};
use crate::state_machine::{SM_META_BUCKET, check_state_file};
use crate::{LOG_FILE, SNAPSHOT_FILE, STATE_FILE, TMP_SUFFIX};
use openraft::Membership;
use openraft::RaftTypeConfig;
use openraft::type_config::alias::{LogIdOf, StoredMembershipOf, VoteOf};
use std::fs::{self, File};
use std::path::Path;

/// Checks that `path` is a backup a node can be restored from: an rbolt file that rbolt's
/// `check` finds sound, with the state machine's metadata. Returns the last applied log id and
/// the membership it holds.
pub fn check_backup<C: RaftTypeConfig>(
    path: impl AsRef<Path>,
) -> Result<(Option<LogIdOf<C>>, StoredMembershipOf<C>)> {
    check_state_file::<C>(path.as_ref(), &crate::rbolt_options())
}

/// Test builds (feature `_failpoints`): a crash at the restore step `name`, when its failpoint
/// is on (`FAILPOINTS=restore::state-copied=return`): the process aborts there, with nothing
/// flushed or cleaned up, as a SIGKILL would stop it.
fn crash_point(name: &str) {
    #[cfg(feature = "_failpoints")]
    if fail::eval(name, |_| ()).is_some() {
        std::process::abort();
    }
    #[cfg(not(feature = "_failpoints"))]
    let _ = name;
}

/// The crash points of a restore, in the order it passes them (see `crash_point`); for the
/// tests that kill a restore at each.
pub const RESTORE_CRASH_POINTS: &[&str] = &[
    "restore::marked",
    "restore::state-copied",
    "restore::membership-recorded",
    "restore::snapshot-copied",
    "restore::snapshot-renamed",
    "restore::state-renamed",
    "restore::log-created",
    "restore::log-written",
    "restore::records-written",
];

/// Seeds the new node directory `dir` from `backup` (a state file written by
/// `StateMachine::backup_to` or copied from a stopped node's `state.db`), for a new cluster
/// whose membership is `membership`; returns the log id the new cluster starts after. The same
/// as [`restore_with`] without records.
pub fn restore<C: RaftTypeConfig>(
    backup: impl AsRef<Path>,
    dir: impl AsRef<Path>,
    membership: Membership<C::NodeId, C::Node>,
    vote: VoteOf<C>,
) -> Result<LogIdOf<C>> {
    restore_with::<C>(backup, dir, membership, vote, &[])
}

/// Seeds the new node directory `dir` from `backup`, for a new cluster whose membership is
/// `membership`; returns the log id the new cluster starts after. `records` are small files
/// of the caller's (a name in `dir` and its bytes) written as part of the restore.
///
/// The directory gets the backup's data as its state file, with `membership` recorded as of
/// the backup's last applied log id, the same file as its current snapshot, and a log that is
/// empty and purged up to that id, with `vote` saved. Every node of the new cluster restored
/// from the same backup with the same membership starts from an identical snapshot, so
/// replication goes on from there, and a node added later receives the snapshot. `dir` must
/// not hold a node already, and the backup must hold at least one applied entry.
///
/// A crash at any point leaves the marker [`RESTORING_FILE`] in `dir` until the restore has
/// written everything durably: a node refuses to open such a directory, and running the
/// restore again deletes what the unfinished one left (its files and `records`) and starts
/// over.
pub fn restore_with<C: RaftTypeConfig>(
    backup: impl AsRef<Path>,
    dir: impl AsRef<Path>,
    membership: Membership<C::NodeId, C::Node>,
    vote: VoteOf<C>,
    records: &[(&str, &[u8])],
) -> Result<LogIdOf<C>> {
    let (backup, dir) = (backup.as_ref(), dir.as_ref());
    let (last_applied, _) = check_backup::<C>(backup)?;
    let last_applied = last_applied.ok_or_else(|| {
        Error::invalid(format!(
            "{} holds no applied entry: start a new cluster instead of restoring it",
            backup.display()
        ))
    })?;
    let names: Vec<&str> = records.iter().map(|(name, _)| *name).collect();
    begin(dir, &names)?;
    crash_point("restore::marked");
    stage_state::<C>(backup, dir, &last_applied, membership)?;
    write_log::<C>(dir, &last_applied, &vote)?;
    crash_point("restore::log-written");
    for (name, bytes) in records {
        write_record(dir, name, bytes)?;
    }
    sync_dir(dir)?;
    crash_point("restore::records-written");
    let marker = dir.join(RESTORING_FILE);
    fs::remove_file(&marker).map_err(Error::io(&marker))?;
    sync_dir(dir)?;
    Ok(last_applied)
}

/// Starts a restore into `dir`: refuses a directory that holds a node, clears what an
/// unfinished restore left (its marker kept), and writes the marker durably.
fn begin(dir: &Path, records: &[&str]) -> Result<()> {
    for name in records {
        if name.is_empty()
            || name.contains('/')
            || [
                ".",
                "..",
                RESTORING_FILE,
                STATE_FILE,
                LOG_FILE,
                SNAPSHOT_FILE,
            ]
            .contains(name)
            || name.ends_with(TMP_SUFFIX)
        {
            return Err(Error::invalid(format!(
                "{name:?} cannot be a record of a restore: a plain file name of the caller's"
            )));
        }
    }
    let marker = dir.join(RESTORING_FILE);
    if marker.exists() {
        let ours = [STATE_FILE, LOG_FILE, SNAPSHOT_FILE];
        for name in ours.iter().chain(records) {
            remove_if_there(&dir.join(name))?;
        }
        for entry in fs::read_dir(dir).map_err(Error::io(dir))? {
            let path = entry.map_err(Error::io(dir))?.path();
            if path.to_string_lossy().ends_with(TMP_SUFFIX) {
                remove_if_there(&path)?;
            }
        }
        return sync_dir(dir);
    }
    for name in [STATE_FILE, LOG_FILE, SNAPSHOT_FILE] {
        if dir.join(name).exists() {
            return Err(Error::invalid(format!(
                "{} holds a node already ({name}); restore into a new directory",
                dir.display()
            )));
        }
    }
    create_dir_durable(dir)?;
    write_record(
        dir,
        RESTORING_FILE,
        b"a restore into this directory is under way, or was killed: run it again\n",
    )?;
    sync_dir(dir)
}

/// Deletes `path` if it is there.
fn remove_if_there(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Err(error) if error.kind() != std::io::ErrorKind::NotFound => Err(Error::io(path)(error)),
        _ => Ok(()),
    }
}

/// Writes `bytes` to `dir/name` durably (through a temporary name; the caller syncs `dir`).
fn write_record(dir: &Path, name: &str, bytes: &[u8]) -> Result<()> {
    let (path, tmp) = (dir.join(name), dir.join(format!("{name}{TMP_SUFFIX}")));
    fs::write(&tmp, bytes)
        .and_then(|()| File::open(&tmp)?.sync_all())
        .map_err(Error::io(&tmp))?;
    fs::rename(&tmp, &path).map_err(Error::io(&path))
}

/// Puts the backup's data in `dir` as the state file and the snapshot, with `membership`
/// recorded as of `last_applied`, durably.
fn stage_state<C: RaftTypeConfig>(
    backup: &Path,
    dir: &Path,
    last_applied: &LogIdOf<C>,
    membership: Membership<C::NodeId, C::Node>,
) -> Result<()> {
    let state_tmp = dir.join(format!("restoring-state{TMP_SUFFIX}"));
    let snapshot_tmp = dir.join(format!("restoring-snapshot{TMP_SUFFIX}"));
    let staged = (|| {
        fs::copy(backup, &state_tmp).map_err(Error::io(&state_tmp))?;
        crash_point("restore::state-copied");
        let stored = StoredMembershipOf::<C>::new(Some(last_applied.clone()), membership);
        let db = rbolt::Db::open_with(&state_tmp, crate::rbolt_options())?;
        let tx = db.begin_write()?;
        tx.bucket_mut(SM_META_BUCKET)?
            .ok_or_else(|| Error::invalid("the backup has no sm_meta bucket"))?
            .put(b"last_membership", &encode("last membership", &stored)?)?;
        tx.commit()?;
        crash_point("restore::membership-recorded");
        db.begin_read()?.copy_file(&snapshot_tmp)?;
        drop(db);
        for path in [&state_tmp, &snapshot_tmp] {
            File::open(path)
                .and_then(|f| f.sync_all())
                .map_err(Error::io(path))?;
        }
        crash_point("restore::snapshot-copied");
        Ok(())
    })();
    if let Err(error) = staged {
        let _ = fs::remove_file(&state_tmp);
        let _ = fs::remove_file(&snapshot_tmp);
        return Err(error);
    }
    fs::rename(&snapshot_tmp, dir.join(SNAPSHOT_FILE)).map_err(Error::io(&snapshot_tmp))?;
    crash_point("restore::snapshot-renamed");
    fs::rename(&state_tmp, dir.join(STATE_FILE)).map_err(Error::io(&state_tmp))?;
    sync_dir(dir)?;
    crash_point("restore::state-renamed");
    Ok(())
}

/// Writes the log of a restored node in `dir`: empty, purged up to `last_applied`, `vote`
/// saved.
fn write_log<C: RaftTypeConfig>(
    dir: &Path,
    last_applied: &LogIdOf<C>,
    vote: &VoteOf<C>,
) -> Result<()> {
    let log = LogStore::<C>::open(dir.join(LOG_FILE))?;
    crash_point("restore::log-created");
    let tx = log.db().begin_write()?;
    let mut meta = tx
        .bucket_mut(LOG_META_BUCKET)?
        .ok_or_else(|| Error::invalid("the raft_meta bucket is missing"))?;
    meta.put(
        b"last_purged_log_id",
        &encode("last purged log id", &Some(last_applied))?,
    )?;
    meta.put(b"vote", &encode("vote", &Some(vote))?)?;
    drop(meta);
    tx.commit()?;
    Ok(())
}
