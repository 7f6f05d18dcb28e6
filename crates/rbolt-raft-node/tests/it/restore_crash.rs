//! `restore` killed at every step: the directory it leaves is refused by the node with a
//! message that says to run the restore again (never started as a half-restored node), a
//! rerun killed at the same step leaves it so again, and the same restore run again
//! finishes; the node then holds exactly the backup's data. The crash points are
//! rbolt-raft's (`RESTORE_CRASH_POINTS`, failpoints of the test build that abort the process
//! where they stand, as a SIGKILL would).

use crate::cluster::{Cluster, PATIENCE, SERIAL, TIMING_ARGS, node_exe};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;
use tokio::time::Instant;

/// What the node says of a directory holding an unfinished restore.
const UNFINISHED: &str = "a restore into this directory did not finish";

/// Runs `restore` of `backup` into node 1's directory of `cluster` with `failpoints`; returns
/// its exit status and stderr.
fn run_restore(
    cluster: &Cluster,
    backup: &Path,
    failpoints: &str,
) -> (std::process::ExitStatus, String) {
    let dir = cluster.nodes[&1].dir.display().to_string();
    let output = Command::new(node_exe())
        .args(["restore", "--backup"])
        .arg(backup)
        .args(["--id", "1", "--data-dir", &dir, "--peers", &cluster.peers])
        .env("FAILPOINTS", failpoints)
        .output()
        .expect("restore runs");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    (output.status, stderr)
}

/// A backup of a one-node cluster holding `keys` writes; returns the file and what it holds.
async fn backup_of(keys: usize, root: &Path) -> (std::path::PathBuf, BTreeMap<String, String>) {
    let mut cluster = Cluster::new(1, TIMING_ARGS);
    cluster.start(1);
    cluster.wait_for_leader(&[1], 0).await;
    let client = cluster.client(PATIENCE);
    let mut written = BTreeMap::new();
    for n in 0..keys {
        let (key, value) = (
            format!("r-{n:04}"),
            format!("value {n} {}", "v".repeat(200)),
        );
        client
            .put(&cluster.addr(1), &key, &value)
            .await
            .expect("write");
        written.insert(key, value);
    }
    let file = root.join("backup.db");
    let output = Command::new(node_exe())
        .args(["snapshot", "save"])
        .arg(&file)
        .args(["--node", &cluster.addr(1)])
        .output()
        .expect("snapshot save runs");
    assert!(output.status.success(), "{output:?}");
    cluster.kill(1);
    (file, written)
}

/// Starts node 1 on a directory a killed restore left: it must exit at once, saying the
/// restore did not finish; returns its log.
async fn refused_start(cluster: &mut Cluster) -> String {
    cluster.start(1);
    let code = cluster.wait_exit(1).await;
    let log = cluster.log_text(1);
    assert!(
        code.is_some_and(|c| c != 0) && log.contains(UNFINISHED),
        "exit {code:?}, log:\n{log}"
    );
    log
}

/// Each crash point of `restore` in turn: the restore aborts there; the node refuses the
/// directory (no leader, no data: it exits naming the unfinished restore); a rerun aborted at
/// the same point leaves it refused; the same restore run again succeeds; the node then starts, leads its one-node cluster and holds exactly the
/// backup's data, and takes a write.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restore_killed_at_any_step_is_refused_by_the_node_and_finishes_when_run_again() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let (backup, written) = backup_of(300, root.path()).await;
    for point in rbolt_raft::RESTORE_CRASH_POINTS {
        let mut cluster = Cluster::new(1, TIMING_ARGS);
        let (status, stderr) = run_restore(&cluster, &backup, &format!("{point}=return"));
        assert!(
            status.code().is_none(),
            "{point}: the restore was not stopped there ({status}): {stderr}"
        );
        refused_start(&mut cluster).await;
        // The rerun killed at the same step: still refused, still rerunnable.
        let (status, stderr) = run_restore(&cluster, &backup, &format!("{point}=return"));
        assert!(
            status.code().is_none(),
            "{point}: the rerun ran through: {stderr}"
        );
        refused_start(&mut cluster).await;
        let (status, stderr) = run_restore(&cluster, &backup, "");
        assert!(status.success(), "{point}: the rerun failed: {stderr}");
        assert!(
            !cluster.nodes[&1]
                .dir
                .join(rbolt_raft::RESTORING_FILE)
                .exists(),
            "{point}: the marker outlived the restore"
        );
        cluster.start(1);
        cluster.wait_for_leader(&[1], 0).await;
        let client = cluster.client(PATIENCE);
        let data = client
            .dump(&cluster.addr(1), false)
            .await
            .unwrap_or_else(|e| panic!("{point}: dump: {e}"));
        assert_eq!(data, written, "{point}: the restored data");
        client
            .put(&cluster.addr(1), "after", point)
            .await
            .unwrap_or_else(|e| panic!("{point}: a write after the restore: {e}"));
        cluster.kill(1);
        eprintln!("{point}: refused, rerun, {} keys", data.len());
    }
    // A restore into a finished node's directory is still refused, and leaves it whole.
    let mut cluster = Cluster::new(1, TIMING_ARGS);
    let (status, _) = run_restore(&cluster, &backup, "");
    assert!(status.success());
    let (status, stderr) = run_restore(&cluster, &backup, "");
    assert!(
        !status.success() && stderr.contains("holds a node already"),
        "{status}: {stderr}"
    );
    cluster.start(1);
    cluster.wait_for_leader(&[1], 0).await;
    eprintln!(
        "{} crash points, {:.1?}",
        rbolt_raft::RESTORE_CRASH_POINTS.len(),
        started.elapsed()
    );
}

/// How a directory that a killed restore left stands: a node's (the restore finished: its
/// files, no marker), a marked one (refused), or one without any node file (the kill came
/// before the marker: nothing restored). Anything else is a half-restored directory.
fn standing(dir: &Path) -> Result<&'static str, String> {
    let has = |name: &str| dir.join(name).exists();
    let files = [
        rbolt_raft::STATE_FILE,
        rbolt_raft::LOG_FILE,
        rbolt_raft::SNAPSHOT_FILE,
        "node-id",
        "cluster-id",
        "initial-peers",
    ];
    let present: Vec<&str> = files.iter().copied().filter(|f| has(f)).collect();
    if has(rbolt_raft::RESTORING_FILE) {
        Ok("marked")
    } else if present.len() == files.len() {
        Ok("finished")
    } else if present.is_empty() {
        Ok("nothing")
    } else {
        Err(format!("half restored, unmarked: {present:?}"))
    }
}

/// SIGKILLs of `restore` at random moments over a backup of about a MiB (no failpoints): each
/// leaves a directory that is finished, marked as unfinished, or without any node file,
/// never half restored; a rerun then finishes; the last one's node serves the backup's data.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restores_sigkilled_at_random_moments_leave_no_half_restored_directory() {
    let _serial = SERIAL.lock().await;
    let started = Instant::now();
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let (backup, written) = backup_of(3000, root.path()).await;
    let mut rng = crate::cluster::Rng::from_env_or_time("restore kills");
    let timed = Instant::now();
    let probe = Cluster::new(1, TIMING_ARGS);
    assert!(run_restore(&probe, &backup, "").0.success());
    let whole = timed.elapsed().as_micros() as u64;
    let mut seen: BTreeMap<&str, usize> = BTreeMap::new();
    let mut cluster = Cluster::new(1, TIMING_ARGS);
    for _ in 0..12 {
        cluster = Cluster::new(1, TIMING_ARGS);
        let dir = cluster.nodes[&1].dir.clone();
        let mut child = Command::new(node_exe())
            .args(["restore", "--backup"])
            .arg(&backup)
            .args(["--id", "1", "--data-dir"])
            .arg(&dir)
            .args(["--peers", &cluster.peers])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("restore starts");
        std::thread::sleep(std::time::Duration::from_micros(rng.below(whole + 1)));
        let _ = child.kill();
        let _ = child.wait();
        let state = standing(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
        *seen.entry(state).or_default() += 1;
        if state != "finished" {
            let (status, stderr) = run_restore(&cluster, &backup, "");
            assert!(
                status.success(),
                "the rerun after a kill ({state}): {stderr}"
            );
        }
        assert_eq!(standing(&dir), Ok("finished"));
    }
    cluster.start(1);
    cluster.wait_for_leader(&[1], 0).await;
    let data = cluster
        .client(PATIENCE)
        .dump(&cluster.addr(1), false)
        .await
        .expect("dump");
    assert_eq!(data, written, "the last restored node's data");
    eprintln!(
        "restore kills: a whole restore took {whole} µs; 12 kills left {seen:?}; {:.1?}",
        started.elapsed()
    );
}
