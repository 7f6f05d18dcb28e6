//! SIGKILL during writes. A child process (this test binary, re-run with `--child`; see
//! `main.rs`) writes to a store and reports each operation on stdout before (`begin`) and after
//! (`done`) it; the parent kills it at a random moment, reopens the store, and requires exactly
//! the state of every `done` operation, plus or minus the one in flight. Rounds go on from the
//! state the previous one left. The stores live under the target directory, on the disk the
//! tests run on.

use crate::common::{
    Rng, TestConfig, TestMachine, append, apply, data, entry, log_id, payload, tmp_leftovers, vote,
};
use openraft::entry::RaftEntry;
use openraft::storage::{RaftLogReader, RaftLogStorage, RaftSnapshotBuilder, RaftStateMachine};
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Marks the child's report lines among anything else it may print.
const REPORT: &str = "rbolt-raft-report: ";

/// Writes one report line straight to the process's stdout, flushed, so that what the parent
/// reads is exactly what was reported before the kill.
fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{REPORT}{line}");
    let _ = out.flush();
}

/// The report in a line of the child's output, if there is one.
fn report(line: &str) -> Option<String> {
    line.find(REPORT)
        .map(|at| line[at + REPORT.len()..].to_owned())
}

/// The child process: `args` are what followed `--child` on its command line, the loop to run
/// and its directories. It runs until it is killed.
pub fn child(args: &[String]) {
    match args {
        [mode, dir] if mode == "append" => runtime().block_on(append_loop(Path::new(dir))),
        [mode, dir, donors] if mode == "install" => {
            let donors: Vec<&str> = donors.split(',').collect();
            runtime().block_on(install_loop(Path::new(dir), &donors));
        }
        other => panic!("unknown child arguments {other:?}"),
    }
}

/// Starts this test binary as a child running `args` (see [`child`]).
fn spawn_child(args: &[&str]) -> Child {
    let exe = std::env::current_exe().expect("the test binary");
    Command::new(exe)
        .arg("--child")
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("the child starts")
}

/// A directory for a test's stores under the target directory: on the disk the tests run on,
/// not a tmpfs that might hide what a real file system does.
fn test_dir() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir")
}

/// Reads the child's report lines until `dones` operations are done (or it exits), waits a
/// random moment more, SIGKILLs it, and returns every line it reported, those read after the
/// kill included.
fn run_and_kill(mut child: Child, dones: usize, rng: &mut Rng) -> Vec<String> {
    let stdout = child.stdout.take().expect("piped stdout");
    let mut lines = BufReader::new(stdout).lines();
    let mut reported = Vec::new();
    let mut done = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    while done < dones {
        let Some(line) = lines.next() else { break };
        if let Some(line) = report(&line.expect("child stdout")) {
            done += usize::from(line.starts_with("done "));
            reported.push(line);
        }
        assert!(Instant::now() < deadline, "the child is too slow");
    }
    std::thread::sleep(Duration::from_micros(rng.below(6000)));
    let early = child.try_wait().expect("child status");
    assert!(
        early.is_none(),
        "the child died on its own ({early:?}) before the kill: see its stderr"
    );
    // `Child::kill` sends SIGKILL on Unix: no destructor, no flush, no goodbye.
    child.kill().expect("SIGKILL");
    child.wait().expect("reap the child");
    for line in lines {
        if let Some(line) = report(&line.expect("child stdout")) {
            reported.push(line);
        }
    }
    reported
}

/// The state of a store as far as the kill test compares it.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Durable {
    /// Log entries: index to term.
    log: BTreeMap<u64, u64>,
    purged: Option<u64>,
    vote_term: Option<u64>,
    applied: Option<u64>,
    data: BTreeMap<u64, String>,
    snapshot: Option<u64>,
}

impl Durable {
    /// This state after operation `op` (a report line without its `begin `/`done `).
    fn after(&self, op: &str) -> Durable {
        let mut next = self.clone();
        let words: Vec<&str> = op.split(' ').collect();
        let num = |i: usize| -> u64 { words[i].parse().expect("a number in a report") };
        match words[0] {
            "vote" => next.vote_term = Some(num(1)),
            "append" => {
                for index in num(1)..=num(2) {
                    next.log.insert(index, num(3));
                }
            }
            "truncate" => next.log.retain(|&i, _| i <= num(1)),
            "purge" => {
                next.log.retain(|&i, _| i > num(1));
                next.purged = Some(num(1));
            }
            "apply" => {
                let from = self.applied.map_or(0, |a| a + 1);
                for index in from..=num(1) {
                    let term = self.log[&index];
                    next.data.insert(index, payload(term, index));
                }
                next.applied = Some(num(1));
            }
            "snapshot" => next.snapshot = Some(num(1)),
            other => panic!("unknown operation {other}"),
        }
        next
    }

    /// Replays `reported` from `self`: the state after every `done`, and the in-flight
    /// operation if the last `begin` has no `done`.
    fn replay(&self, reported: &[String]) -> (Durable, Option<String>) {
        let mut state = self.clone();
        let mut in_flight = None;
        for line in reported {
            if let Some(op) = line.strip_prefix("begin ") {
                in_flight = Some(op.to_owned());
            } else if let Some(op) = line.strip_prefix("done ") {
                assert_eq!(in_flight.as_deref(), Some(op), "reports pair up");
                state = state.after(op);
                in_flight = None;
            }
        }
        (state, in_flight)
    }
}

/// Reads back everything [`Durable`] compares, from the files in `dir`.
async fn recover(dir: &Path) -> Durable {
    let (mut log, mut state) = rbolt_raft::open::<TestConfig, _>(dir, TestMachine)
        .expect("the store reopens after SIGKILL");
    let entries = log
        .try_get_log_entries(..)
        .await
        .expect("the log reads back without a hole");
    let mut recovered = Durable::default();
    for e in &entries {
        let (term, index) = (e.log_id.leader_id.term, e.index());
        assert_eq!(
            e.payload,
            openraft::EntryPayload::Normal(payload(term, index)),
            "entry {index} is the entry written there"
        );
        recovered.log.insert(index, term);
    }
    let log_state = log.get_log_state().await.expect("log state");
    recovered.purged = log_state.last_purged_log_id.map(|id| id.index);
    if let (Some(first), Some(purged)) = (recovered.log.keys().next(), recovered.purged) {
        assert_eq!(
            *first,
            purged + 1,
            "the log starts right after the purge point"
        );
    }
    recovered.vote_term = log
        .read_vote()
        .await
        .expect("vote")
        .map(|v| v.leader_id().term);
    recovered.applied = state
        .applied_state()
        .await
        .expect("applied")
        .0
        .map(|id| id.index);
    recovered.data = data(&state);
    recovered.snapshot = state
        .get_current_snapshot()
        .await
        .expect("snapshot")
        .map(|s| s.meta.last_log_id.map_or(0, |id| id.index));
    let problems = state.db().begin_read().expect("read").check();
    assert!(
        problems.is_empty(),
        "the state file checks clean: {problems:?}"
    );
    recovered
}

/// The child's write loop: appends, truncations of unapplied entries, applies, purges of
/// applied entries, snapshot builds and votes, in random order, for ever.
async fn append_loop(dir: &Path) {
    let (mut rng, _) = Rng::from_env_or_time();
    let (mut log, mut state) = rbolt_raft::open::<TestConfig, _>(dir, TestMachine).expect("open");
    let entries = log.try_get_log_entries(..).await.expect("read");
    let mut terms: BTreeMap<u64, u64> = entries
        .iter()
        .map(|e| (e.index(), e.log_id.leader_id.term))
        .collect();
    let log_state = log.get_log_state().await.expect("log state");
    let mut purged = log_state.last_purged_log_id.map(|id| id.index);
    let voted = log
        .read_vote()
        .await
        .expect("vote")
        .map_or(0, |v| v.leader_id().term);
    let mut term = voted.max(terms.values().copied().max().unwrap_or(0)) + 1;
    let mut applied = state
        .applied_state()
        .await
        .expect("applied")
        .0
        .map(|id| id.index);
    let mut new_term = true;
    loop {
        if new_term {
            say(&format!("begin vote {term}"));
            log.save_vote(&vote(term, 0, true))
                .await
                .expect("save_vote");
            say(&format!("done vote {term}"));
            new_term = false;
        }
        let next = terms
            .keys()
            .next_back()
            .map(|l| l + 1)
            .or(purged.map(|p| p + 1))
            .unwrap_or(0);
        let last = next.checked_sub(1).filter(|&l| terms.contains_key(&l));
        match rng.below(10) {
            0..=4 => {
                let n = 1 + rng.below(16);
                let op = format!("append {next} {} {term}", next + n - 1);
                say(&format!("begin {op}"));
                append(&mut log, (next..next + n).map(|i| entry(term, i)).collect())
                    .await
                    .expect("append");
                say(&format!("done {op}"));
                for i in next..next + n {
                    terms.insert(i, term);
                }
            }
            5 => {
                // Only entries not yet applied can be truncated, as in Raft.
                let (Some(&first), Some(last)) = (terms.keys().next(), last) else {
                    continue;
                };
                let low = applied.unwrap_or(first).max(first);
                if low >= last {
                    continue;
                }
                let keep = low + rng.below(last - low);
                let op = format!("truncate {keep}");
                say(&format!("begin {op}"));
                log.truncate_after(Some(log_id(terms[&keep], keep)))
                    .await
                    .expect("truncate_after");
                say(&format!("done {op}"));
                terms.retain(|&i, _| i <= keep);
                term += 1;
                new_term = true;
            }
            6 | 7 => {
                let Some(last) = last else { continue };
                let from = applied.map_or(0, |a| a + 1);
                if from > last || !terms.contains_key(&from) {
                    continue;
                }
                let batch: Vec<_> = (from..=last).map(|i| entry(terms[&i], i)).collect();
                let op = format!("apply {last}");
                say(&format!("begin {op}"));
                apply(&mut state, batch).await.expect("apply");
                say(&format!("done {op}"));
                applied = Some(last);
            }
            8 => {
                let Some(upto) = applied else { continue };
                let upto = upto.saturating_sub(rng.below(8));
                let Some(&t) = terms.get(&upto) else { continue };
                let op = format!("purge {upto}");
                say(&format!("begin {op}"));
                log.purge(log_id(t, upto)).await.expect("purge");
                say(&format!("done {op}"));
                terms.retain(|&i, _| i > upto);
                purged = Some(upto);
            }
            _ => {
                let index = applied.unwrap_or(0);
                let op = format!("snapshot {index}");
                say(&format!("begin {op}"));
                let built = state
                    .get_snapshot_builder()
                    .await
                    .build_snapshot()
                    .await
                    .expect("build_snapshot");
                assert_eq!(built.meta.last_log_id.map_or(0, |id| id.index), index);
                say(&format!("done {op}"));
            }
        }
    }
}

pub fn sigkill_during_log_and_state_writes_loses_nothing_acknowledged() {
    let started = Instant::now();
    let (mut rng, seed) = Rng::from_env_or_time();
    eprintln!("sigkill during writes: RBOLT_RAFT_SEED={seed}");
    let dir = test_dir();
    let dir_str = dir.path().to_str().expect("utf-8 path");
    let rt = runtime();
    let mut expected = Durable::default();
    let (mut kills, mut in_flight_kills, mut dones) = (0, 0, 0);
    for round in 0..8 {
        let child = spawn_child(&["append", dir_str]);
        let reported = run_and_kill(child, 20 + rng.below(200) as usize, &mut rng);
        kills += 1;
        dones += reported.iter().filter(|l| l.starts_with("done ")).count();
        let (acknowledged, in_flight) = expected.replay(&reported);
        let recovered = rt.block_on(recover(dir.path()));
        let with_in_flight = in_flight.as_deref().map(|op| acknowledged.after(op));
        if recovered == acknowledged {
            expected = acknowledged;
        } else if with_in_flight.as_ref() == Some(&recovered) {
            in_flight_kills += 1;
            expected = recovered;
        } else {
            panic!(
                "round {round}: after SIGKILL (in flight: {in_flight:?}) the store holds\n\
                 {recovered:?}\nbut acknowledged\n{acknowledged:?}"
            );
        }
    }
    eprintln!(
        "sigkill during writes: {kills} kills, {dones} operations acknowledged, {in_flight_kills} \
         in-flight operations found completed, 0 lost; final log {}..={} purged to {:?}, \
         applied {:?}; {:.2?}",
        expected
            .log
            .keys()
            .next()
            .map_or(String::from("-"), u64::to_string),
        expected
            .log
            .keys()
            .next_back()
            .map_or(String::from("-"), u64::to_string),
        expected.purged,
        expected.applied,
        started.elapsed()
    );
    assert!(
        dones > 100,
        "the child did enough work to be worth killing: {dones}"
    );
}

/// Rounds of the first-open test.
const FIRST_OPEN_ROUNDS: u64 = 24;
/// The first-open test kills its child at most this many times the time a child takes from
/// its start to its first acknowledged write (measured first), so that most kills land
/// while the directories and files are being created.
const FIRST_OPEN_KILL_SPAN: u32 = 2;

/// SIGKILL from the first moment of a store's life. Each round starts a child on a directory
/// that does not exist yet (nor does its parent), kills it after a random delay from 0 to
/// [`FIRST_OPEN_KILL_SPAN`] times a child's time to its first write, and requires that the store then opens and holds exactly what
/// the child reported done (plus or minus the operation in flight), with no temporary file
/// left once it is open.
pub fn sigkill_during_first_open_leaves_a_store_that_opens() {
    let started = Instant::now();
    let (mut rng, seed) = Rng::from_env_or_time();
    eprintln!("sigkill during first open: RBOLT_RAFT_SEED={seed}");
    let root = test_dir();
    let rt = runtime();
    let first_write = {
        let dir = root.path().join("calibration");
        let spawned = Instant::now();
        let mut child = spawn_child(&["append", dir.to_str().expect("utf-8 path")]);
        let stdout = child.stdout.take().expect("piped stdout");
        let first_done = BufReader::new(stdout)
            .lines()
            .map_while(|line| line.ok())
            .find(|line| report(line).is_some_and(|r| r.starts_with("done ")));
        let elapsed = spawned.elapsed();
        child.kill().expect("SIGKILL");
        child.wait().expect("reap the child");
        assert!(first_done.is_some(), "the calibration child wrote nothing");
        elapsed
    };
    let kill_us_max = (first_write * FIRST_OPEN_KILL_SPAN).as_micros() as u64;
    // What each kill found on disk, before the reopen.
    let mut found: BTreeMap<&str, u64> = BTreeMap::new();
    let mut dones = 0;
    for round in 0..FIRST_OPEN_ROUNDS {
        let dir = root.path().join(format!("round-{round}")).join("node");
        let child = spawn_child(&["append", dir.to_str().expect("utf-8 path")]);
        let reported = kill_after(child, Duration::from_micros(rng.below(kill_us_max + 1)));
        let state = if !dir.exists() {
            "no directory"
        } else if !dir.join(rbolt_raft::STATE_FILE).exists() {
            "a directory without files"
        } else if !dir.join(rbolt_raft::LOG_FILE).exists() {
            "the state file only"
        } else if reported.iter().any(|l| l.starts_with("done ")) {
            "both files and acknowledged writes"
        } else {
            "both files"
        };
        *found.entry(state).or_default() += 1;
        dones += reported.iter().filter(|l| l.starts_with("done ")).count();
        let (acknowledged, in_flight) = Durable::default().replay(&reported);
        let recovered = rt.block_on(recover(&dir));
        let leftovers = tmp_leftovers(&dir);
        assert!(
            leftovers.is_empty(),
            "round {round}: open removes the leftovers of a killed creation: {leftovers:?}"
        );
        let with_in_flight = in_flight.as_deref().map(|op| acknowledged.after(op));
        assert!(
            recovered == acknowledged || with_in_flight.as_ref() == Some(&recovered),
            "round {round}: after SIGKILL during the first open (in flight: {in_flight:?}) the \
             store holds\n{recovered:?}\nbut acknowledged\n{acknowledged:?}"
        );
    }
    let found = found
        .iter()
        .map(|(state, n)| format!("{n} {state}"))
        .collect::<Vec<_>>()
        .join(", ");
    eprintln!(
        "sigkill during first open: {FIRST_OPEN_ROUNDS} kills from 0 to {kill_us_max} us \
         after the start (a child's first write took {first_write:.2?}) found {found}; every \
         store reopened, {dones} operations acknowledged, 0 lost; {:.2?}",
        started.elapsed()
    );
}

/// Kills `child` `delay` after now and returns every line it reported.
fn kill_after(mut child: Child, delay: Duration) -> Vec<String> {
    std::thread::sleep(delay);
    // A child that died on its own did so before the kill: that is a failure of its own.
    let early = child.try_wait().expect("child status");
    assert!(
        early.is_none(),
        "the child died on its own ({early:?}) before the kill: see its stderr"
    );
    child.kill().expect("SIGKILL");
    child.wait().expect("reap the child");
    let stdout = child.stdout.take().expect("piped stdout");
    BufReader::new(stdout)
        .lines()
        .filter_map(|line| report(&line.expect("child stdout")))
        .collect()
}

/// The child's install loop: installs the donors' snapshots in turn, for ever.
async fn install_loop(dir: &Path, donors: &[&str]) {
    let mut snapshots = Vec::new();
    for donor in donors {
        let (_, mut state) = rbolt_raft::open::<TestConfig, _>(donor, TestMachine).expect("donor");
        let snapshot = state
            .get_current_snapshot()
            .await
            .expect("read")
            .expect("donor snapshot");
        snapshots.push(snapshot.meta);
    }
    let (_, mut state) = rbolt_raft::open::<TestConfig, _>(dir, TestMachine).expect("open");
    for round in 0.. {
        let which = round % donors.len();
        let file = std::fs::File::open(Path::new(donors[which]).join(rbolt_raft::SNAPSHOT_FILE))
            .expect("donor snapshot file");
        let op = format!("install {which}");
        say(&format!("begin {op}"));
        state
            .install_snapshot(&snapshots[which], file)
            .await
            .expect("install");
        say(&format!("done {op}"));
    }
}

pub fn sigkill_during_snapshot_install_leaves_old_or_new_state() {
    let started = Instant::now();
    let (mut rng, seed) = Rng::from_env_or_time();
    eprintln!("sigkill during installs: RBOLT_RAFT_SEED={seed}");
    let rt = runtime();
    let root = test_dir();
    // Two donors with different states, each with a snapshot of a few hundred KiB.
    let mut donors = Vec::new();
    for (d, (first, term)) in [(0u64, 3u64), (5000, 9)].into_iter().enumerate() {
        let dir = root.path().join(format!("donor-{d}"));
        let donor = rt.block_on(async {
            let (_, mut state) =
                rbolt_raft::open::<TestConfig, _>(&dir, TestMachine).expect("donor");
            apply(
                &mut state,
                (first..first + 2000).map(|i| entry(term, i)).collect(),
            )
            .await
            .expect("apply");
            let built = state
                .get_snapshot_builder()
                .await
                .build_snapshot()
                .await
                .expect("build");
            (built.meta.last_log_id.map(|id| id.index), data(&state))
        });
        donors.push((dir, donor));
    }
    let donor_list = donors
        .iter()
        .map(|(dir, _)| dir.to_str().expect("utf-8").to_owned())
        .collect::<Vec<_>>()
        .join(",");
    let dir = root.path().join("target");
    let dir_str = dir.to_str().expect("utf-8").to_owned();
    // A state is the initial empty one (`None`) or a whole donor's (`Some(d)`).
    let state_of = |recovered: &Durable| -> Option<Option<usize>> {
        if recovered.applied.is_none() && recovered.data.is_empty() {
            return Some(None);
        }
        donors
            .iter()
            .position(|(_, (applied, data))| {
                recovered.applied == *applied && recovered.data == *data
            })
            .map(Some)
    };
    let snapshot_of = |recovered: &Durable| -> Option<Option<usize>> {
        match recovered.snapshot {
            None => Some(None),
            Some(index) => donors
                .iter()
                .position(|(_, (applied, _))| *applied == Some(index))
                .map(Some),
        }
    };
    let (mut kills, mut dones, mut mid_install) = (0, 0, 0);
    let mut last_done: Option<usize> = None;
    for round in 0..8 {
        let child = spawn_child(&["install", &dir_str, &donor_list]);
        let reported = run_and_kill(child, 1 + rng.below(6) as usize, &mut rng);
        kills += 1;
        let mut in_flight = None;
        for line in &reported {
            if let Some(op) = line.strip_prefix("begin install ") {
                in_flight = Some(op.parse::<usize>().expect("donor number"));
            } else if let Some(op) = line.strip_prefix("done install ") {
                last_done = Some(op.parse().expect("donor number"));
                in_flight = None;
                dones += 1;
            }
        }
        let recovered = rt.block_on(recover(&dir));
        let leftovers = tmp_leftovers(&dir);
        assert!(
            leftovers.is_empty(),
            "round {round}: open removes leftovers: {leftovers:?}"
        );
        // The state file and the snapshot are each the last acknowledged install or the one in
        // flight, whole: applied id and data agree.
        let allowed: Vec<Option<usize>> = std::iter::once(last_done)
            .chain(in_flight.map(Some))
            .collect();
        let state_is = state_of(&recovered);
        let snapshot_is = snapshot_of(&recovered);
        assert!(
            state_is.is_some_and(|s| allowed.contains(&s)),
            "round {round}: the state (applied {:?}, {} keys) is not a whole one of {allowed:?}",
            recovered.applied,
            recovered.data.len()
        );
        assert!(
            snapshot_is.is_some_and(|s| allowed.contains(&s)),
            "round {round}: the snapshot ({:?}) is not one of {allowed:?}",
            recovered.snapshot
        );
        let (state_is, snapshot_is) = (state_is.flatten(), snapshot_is.flatten());
        if state_is != snapshot_is {
            // Killed between the two renames: the snapshot goes first, and a snapshot newer
            // than the state is what openraft installs again at startup. Do that here.
            mid_install += 1;
            assert_eq!(
                snapshot_is, in_flight,
                "round {round}: the snapshot is renamed first"
            );
            rt.block_on(async {
                let (_, mut state) =
                    rbolt_raft::open::<TestConfig, _>(&dir, TestMachine).expect("open");
                let snapshot = state
                    .get_current_snapshot()
                    .await
                    .expect("read")
                    .expect("some");
                state
                    .install_snapshot(&snapshot.meta, snapshot.snapshot)
                    .await
                    .expect("reinstall");
            });
        } else if state_is != last_done {
            mid_install += 1;
        }
        last_done = snapshot_is;
    }
    eprintln!(
        "sigkill during installs: {kills} kills, {dones} installs acknowledged, {mid_install} kills \
         found the in-flight install (partly) renamed in, 0 half-installed files; {:.2?}",
        started.elapsed()
    );
}
