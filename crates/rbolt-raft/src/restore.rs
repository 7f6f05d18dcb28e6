//! Seeding a new node's directory from a backup of a state machine ([`restore`]), and checking
//! a backup ([`check_backup`]).

use crate::codec::encode;
use crate::error::{Error, Result};
use crate::files::{create_dir_durable, sync_dir};
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

/// Seeds the new node directory `dir` from `backup` (a state file written by
/// `StateMachine::backup_to` or copied from a stopped node's `state.db`), for a new cluster
/// whose membership is `membership`; returns the log id the new cluster starts after.
///
/// The directory gets the backup's data as its state file, with `membership` recorded as of
/// the backup's last applied log id, the same file as its current snapshot, and a log that is
/// empty and purged up to that id, with `vote` saved. Every node of the new cluster restored
/// from the same backup with the same membership starts from an identical snapshot, so
/// replication goes on from there, and a node added later receives the snapshot. `dir` must
/// not hold a node already, and the backup must hold at least one applied entry.
pub fn restore<C: RaftTypeConfig>(
    backup: impl AsRef<Path>,
    dir: impl AsRef<Path>,
    membership: Membership<C::NodeId, C::Node>,
    vote: VoteOf<C>,
) -> Result<LogIdOf<C>> {
    let (backup, dir) = (backup.as_ref(), dir.as_ref());
    let (last_applied, _) = check_backup::<C>(backup)?;
    let last_applied = last_applied.ok_or_else(|| {
        Error::invalid(format!(
            "{} holds no applied entry: start a new cluster instead of restoring it",
            backup.display()
        ))
    })?;
    for name in [STATE_FILE, LOG_FILE, SNAPSHOT_FILE] {
        if dir.join(name).exists() {
            return Err(Error::invalid(format!(
                "{} holds a node already ({name}); restore into a new directory",
                dir.display()
            )));
        }
    }
    create_dir_durable(dir)?;
    let state_tmp = dir.join(format!("restoring-state{TMP_SUFFIX}"));
    let snapshot_tmp = dir.join(format!("restoring-snapshot{TMP_SUFFIX}"));
    let staged = (|| {
        fs::copy(backup, &state_tmp).map_err(Error::io(&state_tmp))?;
        let stored = StoredMembershipOf::<C>::new(Some(last_applied.clone()), membership);
        let db = rbolt::Db::open_with(&state_tmp, crate::rbolt_options())?;
        let tx = db.begin_write()?;
        tx.bucket_mut(SM_META_BUCKET)?
            .ok_or_else(|| Error::invalid("the backup has no sm_meta bucket"))?
            .put(b"last_membership", &encode("last membership", &stored)?)?;
        tx.commit()?;
        db.begin_read()?.copy_file(&snapshot_tmp)?;
        drop(db);
        for path in [&state_tmp, &snapshot_tmp] {
            File::open(path)
                .and_then(|f| f.sync_all())
                .map_err(Error::io(path))?;
        }
        Ok(())
    })();
    if let Err(error) = staged {
        let _ = fs::remove_file(&state_tmp);
        let _ = fs::remove_file(&snapshot_tmp);
        return Err(error);
    }
    fs::rename(&snapshot_tmp, dir.join(SNAPSHOT_FILE)).map_err(Error::io(&snapshot_tmp))?;
    fs::rename(&state_tmp, dir.join(STATE_FILE)).map_err(Error::io(&state_tmp))?;
    sync_dir(dir)?;
    // The log last: a directory with a state file but no log opens as a node that has applied
    // the backup and waits for a leader, so a crash before this line needs only a new restore.
    let log = LogStore::<C>::open(dir.join(LOG_FILE))?;
    let tx = log.db().begin_write()?;
    let mut meta = tx
        .bucket_mut(LOG_META_BUCKET)?
        .ok_or_else(|| Error::invalid("the raft_meta bucket is missing"))?;
    meta.put(
        b"last_purged_log_id",
        &encode("last purged log id", &Some(&last_applied))?,
    )?;
    meta.put(b"vote", &encode("vote", &Some(&vote))?)?;
    drop(meta);
    tx.commit()?;
    Ok(last_applied)
}
