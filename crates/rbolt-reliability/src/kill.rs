//! The kill loop: a child process commits a seeded workload durably on a real file and prints
//! an acknowledgement (step, txid, digest of the content) after each commit returns; the
//! parent SIGKILLs it at a random moment, reopens the file, checks it, and demands the state of
//! the last acknowledged step or of the one after it (committed, but killed before it could
//! say so). Then the next child goes on with the same file.

use crate::model::{Tree, describe_difference, digest, progress, read_db};
use crate::power::variant;
use crate::rng::Rng;
use crate::summary::{Failures, Summary};
use crate::workload::{Workload, commit_step};
use rbolt::{Db, Options};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// How big a kill loop is.
#[derive(Clone, Debug)]
pub struct KillConfig {
    /// The child binary (`rbolt-crash-child`).
    pub child: PathBuf,
    /// The directory the database file goes in.
    pub dir: PathBuf,
    /// The seed of the workload (and of the kill moments); it also picks the options.
    pub seed: u64,
    /// Children to kill.
    pub kills: u64,
    /// Each child is killed after a delay drawn from `0..delay_max` since it was spawned.
    pub delay_max: Duration,
}

/// What a kill loop found.
#[derive(Clone, Debug, Default)]
pub struct KillReport {
    /// Children killed.
    pub kills: u64,
    /// Commits the children acknowledged.
    pub acked_commits: u64,
    /// Kills after which the step in flight turned out committed.
    pub in_flight_landed: u64,
    /// Reopens that found an older state than the last acknowledged one.
    pub lost_acked: u64,
    /// Reopens whose check found problems.
    pub check_failures: u64,
    /// Reopens that failed.
    pub open_failures: u64,
    /// Reopens at a state that is neither acknowledged nor in flight, or acknowledgements whose
    /// digest differs from the model's.
    pub wrong_state: u64,
    /// Children that ended by themselves with an error instead of being killed.
    pub child_errors: u64,
    /// The database file's size at the end.
    pub file_bytes: u64,
    /// Descriptions of the failures.
    pub failures: Failures,
}

impl KillReport {
    /// Adds `other`'s counts.
    pub fn merge(&mut self, other: KillReport) {
        self.kills += other.kills;
        self.acked_commits += other.acked_commits;
        self.in_flight_landed += other.in_flight_landed;
        self.lost_acked += other.lost_acked;
        self.check_failures += other.check_failures;
        self.open_failures += other.open_failures;
        self.wrong_state += other.wrong_state;
        self.child_errors += other.child_errors;
        self.file_bytes = self.file_bytes.max(other.file_bytes);
        self.failures.extend(other.failures);
    }

    /// The suite's summary line.
    pub fn summary(&self) -> Summary {
        Summary::new("kill-loop")
            .field("kills", self.kills)
            .field("acked_commits", self.acked_commits)
            .field("in_flight_landed", self.in_flight_landed)
            .field("lost_acked", self.lost_acked)
            .field("check_failures", self.check_failures)
            .field("open_failures", self.open_failures)
            .field("wrong_state", self.wrong_state)
            .field("child_errors", self.child_errors)
            .field("max_file_bytes", self.file_bytes)
    }

    /// Whether every reopen was as it must be.
    pub fn is_clean(&self) -> bool {
        self.lost_acked == 0
            && self.check_failures == 0
            && self.open_failures == 0
            && self.wrong_state == 0
            && self.child_errors == 0
            && self.failures.is_empty()
    }
}

/// The options and workload of seed `seed`. The kill loop uses 4 KiB pages or larger, since
/// it is about real files.
fn setup(seed: u64) -> (Options, Workload) {
    let (options, _) = variant(seed);
    let options = if options.page_size != 0 && options.page_size < 4096 {
        options.page_size(4096)
    } else {
        options
    };
    let page_size = crate::workload::page_size_of(&options);
    (options, Workload::new(seed, page_size))
}

/// Runs a kill loop.
pub fn run(config: &KillConfig) -> KillReport {
    let mut report = KillReport::default();
    let path = config.dir.join(format!("kill-{}.db", config.seed));
    let (options, workload) = setup(config.seed);
    // The parent creates the file: a child killed while initialising a new file could leave
    // it unopenable, which the power-loss suite covers.
    match Db::open_with(&path, options.clone()) {
        Ok(db) => drop(db),
        Err(error) => {
            report.open_failures += 1;
            report
                .failures
                .push(format!("create {}: {error}", path.display()));
            return report;
        }
    }
    let mut rng = Rng::derive(config.seed, 0x4B11);
    let mut model = Tree::default();
    let mut step = 0;
    for kill in 0..config.kills {
        let delay = Duration::from_micros(rng.below(config.delay_max.as_micros().max(1) as u64));
        let what = format!(
            "seed {} kill {kill} (from step {step}, after {delay:?})",
            config.seed
        );
        let run = match kill_child(config, &path, step, delay) {
            Ok(run) => run,
            Err(error) => {
                report.child_errors += 1;
                report.failures.push(format!("{what}: {error}"));
                return report;
            }
        };
        report.kills += u64::from(run.killed);
        if !run.killed {
            report.child_errors += 1;
            report
                .failures
                .push(format!("{what}: the child was not killed: {}", run.stderr));
            return report;
        }
        // Bring the model up to the last acknowledged step, checking each digest.
        for ack in &run.acks {
            if ack.step != step + 1 || ack.txid != txid_of(ack.step) {
                report.wrong_state += 1;
                report.failures.push(format!(
                    "{what}: acknowledged step {} as txid {} after step {step}",
                    ack.step, ack.txid
                ));
                return report;
            }
            workload.step(ack.step, &mut model);
            step = ack.step;
            report.acked_commits += 1;
            if digest(&model) != ack.digest {
                report.wrong_state += 1;
                report.failures.push(format!(
                    "{what}: step {step}: the child's digest differs from the model's"
                ));
                return report;
            }
        }
        match verify(&path, &options, &workload, step, &model) {
            Ok(Recovered::Acked) => {}
            Ok(Recovered::InFlight(next)) => {
                report.in_flight_landed += 1;
                model = next;
                step += 1;
            }
            Err(failure) => {
                let (counter, message) = match failure {
                    Failure::Open(e) => (&mut report.open_failures, format!("open: {e}")),
                    Failure::Check(e) => (&mut report.check_failures, e),
                    Failure::Lost(e) => (&mut report.lost_acked, format!("lost: {e}")),
                    Failure::Wrong(e) => (&mut report.wrong_state, format!("wrong state: {e}")),
                };
                *counter += 1;
                report.failures.push(format!("{what}: {message}"));
                return report;
            }
        }
    }
    report.file_bytes = std::fs::metadata(&path).map_or(0, |m| m.len());
    report
}

/// What one child did before it was killed.
struct ChildRun {
    killed: bool,
    /// Every acknowledged commit, in order.
    acks: Vec<Ack>,
    stderr: String,
}

/// One acknowledgement: `ack STEP TXID DIGEST`.
struct Ack {
    step: u64,
    txid: u64,
    digest: u64,
}

/// The txid step `step` commits as: a new file's metas hold txids 0 and 1, and every step
/// commits once.
fn txid_of(step: u64) -> u64 {
    step + 1
}

fn kill_child(
    config: &KillConfig,
    path: &Path,
    step: u64,
    delay: Duration,
) -> Result<ChildRun, String> {
    let mut child = Command::new(&config.child)
        .arg("kill-loop")
        .arg(path)
        .arg(config.seed.to_string())
        .arg(step.to_string())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("spawn {}: {e}", config.child.display()))?;
    let stdout = child.stdout.take().expect("piped");
    let mut stderr = child.stderr.take().expect("piped");
    // Read while the child runs, so a full pipe never holds it up.
    let reader = std::thread::spawn(move || {
        let mut lines = Vec::new();
        for line in BufReader::new(stdout).lines() {
            match line {
                Ok(line) => lines.push(line),
                Err(_) => break,
            }
        }
        lines
    });
    let errors = std::thread::spawn(move || {
        let mut text = String::new();
        let _ = stderr.read_to_string(&mut text);
        text
    });
    let deadline = Instant::now() + delay;
    let mut exited = None;
    while Instant::now() < deadline {
        if let Some(status) = child.try_wait().map_err(|e| e.to_string())? {
            exited = Some(status);
            break;
        }
        std::thread::sleep(Duration::from_micros(200).min(deadline - Instant::now()));
    }
    let killed = exited.is_none();
    if killed {
        // SIGKILL: the child gets no chance to finish a write, sync or commit.
        child.kill().map_err(|e| format!("kill: {e}"))?;
    }
    child.wait().map_err(|e| format!("wait: {e}"))?;
    let lines = reader.join().map_err(|_| "stdout reader panicked")?;
    let stderr = errors.join().map_err(|_| "stderr reader panicked")?;
    let mut acks = Vec::new();
    for line in lines {
        let mut words = line.split_whitespace();
        match (words.next(), words.next(), words.next(), words.next()) {
            (Some("ack"), Some(step), Some(txid), Some(hex)) => {
                let bad = || format!("bad line {line:?}");
                let step = step.parse().map_err(|_| bad())?;
                let txid = txid.parse().map_err(|_| bad())?;
                let digest = u64::from_str_radix(hex, 16).map_err(|_| bad())?;
                acks.push(Ack { step, txid, digest });
            }
            (Some("ready"), ..) => {}
            _ => return Err(format!("unexpected line {line:?}; stderr: {stderr}")),
        }
    }
    Ok(ChildRun {
        killed,
        acks,
        stderr,
    })
}

enum Recovered {
    Acked,
    /// The step after the acknowledged one had committed; its model.
    InFlight(Tree),
}

enum Failure {
    Open(String),
    Check(String),
    Lost(String),
    Wrong(String),
}

fn verify(
    path: &Path,
    options: &Options,
    workload: &Workload,
    step: u64,
    model: &Tree,
) -> Result<Recovered, Failure> {
    let db = Db::open_with(path, options.clone()).map_err(|e| Failure::Open(e.to_string()))?;
    let errors = db
        .view(|tx| Ok(tx.check()))
        .map_err(|e| Failure::Check(e.to_string()))?;
    if let Some(first) = errors.first() {
        return Err(Failure::Check(format!(
            "check found {} problem(s), first: {first}",
            errors.len()
        )));
    }
    let state = read_db(&db).map_err(|e| Failure::Check(format!("reading: {e}")))?;
    let txid = db
        .view(|tx| Ok(tx.id().0))
        .map_err(|e| Failure::Check(e.to_string()))?;
    if txid != txid_of(progress(&state)) {
        return Err(Failure::Wrong(format!(
            "txid {txid} holds step {}",
            progress(&state)
        )));
    }
    if state == *model {
        return Ok(Recovered::Acked);
    }
    let mut next = model.clone();
    workload.step(step + 1, &mut next);
    if state == next {
        return Ok(Recovered::InFlight(next));
    }
    let detail = format!(
        "content of step {}, acknowledged {step}: {}",
        progress(&state),
        describe_difference(model, &state)
    );
    if progress(&state) < step {
        Err(Failure::Lost(detail))
    } else {
        Err(Failure::Wrong(detail))
    }
}

/// The child's side: `kill-loop PATH SEED STEP`. Opens the file, which must hold step
/// `STEP`, and commits steps after it until killed, printing `ack STEP TXID DIGEST` after
/// each commit returns.
pub fn child_main(args: &[String]) -> Result<(), String> {
    let [path, seed, start] = args else {
        return Err("usage: kill-loop PATH SEED STEP".into());
    };
    let seed: u64 = seed.parse().map_err(|_| "bad seed")?;
    let start: u64 = start.parse().map_err(|_| "bad step")?;
    let (options, workload) = setup(seed);
    let db = Db::open_with(path, options).map_err(|e| format!("open: {e}"))?;
    let mut model = read_db(&db).map_err(|e| format!("read: {e}"))?;
    if progress(&model) != start {
        return Err(format!(
            "the file holds step {}, the parent says {start}",
            progress(&model)
        ));
    }
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready {start}").map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    for step in start + 1.. {
        let ops = workload.step(step, &mut model);
        commit_step(&db, &ops).map_err(|e| format!("step {step}: {e}"))?;
        let txid = db.view(|tx| Ok(tx.id().0)).map_err(|e| e.to_string())?;
        writeln!(out, "ack {step} {txid} {:016x}", digest(&model)).map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}
