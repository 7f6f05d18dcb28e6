//! The kill loop: a child process commits a seeded workload durably on a real file and prints
//! an acknowledgement (step, txid, digest of the content) after each commit returns; the
//! parent SIGKILLs it at a random moment, reopens the file, checks it, and demands the state of
//! the last acknowledged step or of the one after it (committed, but killed before it could
//! say so). Then the next child goes on with the same file.
//!
//! Kills cover a file's whole life: every so often the loop starts over on a file that does
//! not exist yet, which the child creates, so that kills land during creation (from 0 ms) and
//! during every growth of the file; and every other new file is created by two children
//! racing to create and open it, one of them waiting for the other's lock.

use crate::model::{Tree, digest, progress, read_db};
use crate::power::variant;
use crate::summary::{Failures, Max, Summary};
use crate::verdict::{Failure, Reopens, Verdict, judge};
use crate::workload::{Workload, commit_step_with};
use rbolt::storage::{FileOptions, FileStorage};
use rbolt::{Db, Durability, Options};
use rbolt_fixtures::rng::Rng;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
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
    /// After every step's commit the child also runs one online vacuum step (a commit that
    /// moves pages down and cuts the file's free end), so kills land in vacuums and between a
    /// shrinking commit and its truncation. Vacuum steps take txids without changing the
    /// content, so acknowledged txids are then only checked to grow.
    pub vacuum: bool,
    /// The child commits three steps in four without syncs (`Durability::None`): a kill must
    /// still find every acknowledged step, since the page cache outlives the process (and the
    /// next open makes them durable). Such commits may skip a txid, so acknowledged txids are
    /// then only checked to grow.
    pub unsynced: bool,
}

/// Whether the child commits step `step` without syncs in a loop with `KillConfig::unsynced`.
fn unsynced_step(step: u64) -> bool {
    !step.is_multiple_of(4)
}

/// Pages a kill-loop child's vacuum step moves: small, so that steps stay short and many.
const VACUUM_STEP_PAGES: usize = 8;

crate::report! {
    /// What a kill loop found.
    pub struct KillReport {
        /// Children killed.
        pub kills: u64,
        /// Commits the children acknowledged.
        pub acked_commits: u64,
        /// Kills after which the step in flight turned out committed.
        pub in_flight_landed: u64,
        /// Reopens after a kill that did not show what was acknowledged (`wrong_state` also
        /// counts acknowledgements whose step or digest differs from the model's).
        pub reopens: Reopens,
        /// Children that ended by themselves with an error instead of being killed.
        pub child_errors: u64,
        /// Files the loop started from nothing (each created by a child it may kill).
        pub new_files: u64,
        /// Of those, the files two children raced to create.
        pub raced_files: u64,
        /// Kills of a child that had not yet opened the file (killed during its start or creation).
        pub kills_before_ready: u64,
        /// Pages the children's vacuum steps reported moved (0 without `KillConfig::vacuum`).
        pub vacuum_pages_moved: u64,
        /// Bytes the children wrote as copies into a writable mapping of the file rather than
        /// with `pwrite` (`FileStorage::copied_bytes`, as each last acknowledged it): pages
        /// written again before a sync, on the filesystems that take copies.
        pub copied_bytes: u64,
        /// The database file's size at the end.
        pub max_file_bytes: Max,
        /// Descriptions of the failures.
        pub failures: Failures,
    }
}

impl KillReport {
    /// The suite's summary line.
    pub fn summary(&self) -> Summary {
        self.fields(Summary::new("kill-loop"))
    }

    /// Whether every reopen was as it must be.
    pub fn is_clean(&self) -> bool {
        self.reopens.is_clean() && self.child_errors == 0 && self.failures.is_empty()
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

/// The most kills one file sees before the loop starts over on a new one.
const KILLS_PER_FILE_MAX: u64 = 40;

/// A new file's first child is killed within this long, so that creation is often cut short.
const CREATION_DELAY_MAX: Duration = Duration::from_millis(8);

/// Runs a kill loop.
pub fn run(config: &KillConfig) -> KillReport {
    let mut report = KillReport::default();
    let path = config.dir.join(format!("kill-{}.db", config.seed));
    let (options, workload) = setup(config.seed);
    let mut rng = Rng::derive(config.seed, 0x4B11);
    // Reopens commit too after commits without syncs, vacuum steps and one-sync commits (a
    // meta in Go's form after a one-sync one): txids then run ahead of steps.
    let loose_txids = config.vacuum || config.unsynced || one_sync_seed(config.seed);
    let mut models = Models::new(workload, loose_txids);
    let mut step = 0;
    let mut kills_left_on_file = 0;
    let mut kill = 0;
    while kill < config.kills {
        if kills_left_on_file == 0 {
            // Start over on a file that does not exist: the children create it.
            if let Err(error) = std::fs::remove_file(&path)
                && error.kind() != std::io::ErrorKind::NotFound
            {
                report.child_errors += 1;
                report
                    .failures
                    .push(format!("remove {}: {error}", path.display()));
                return report;
            }
            report.new_files += 1;
            kills_left_on_file = 1 + rng.below(KILLS_PER_FILE_MAX);
            let race = report.new_files % 2 == 0 && kill + 2 <= config.kills;
            let delay = Duration::from_micros(rng.below(CREATION_DELAY_MAX.as_micros() as u64));
            let what = format!(
                "seed {} kill {kill} (creating a new file{}, after {delay:?})",
                config.seed,
                if race { ", two children racing" } else { "" }
            );
            let runs = if race {
                report.raced_files += 1;
                // The second is killed later, so that it often gets the lock the first held.
                let later = delay
                    + Duration::from_micros(rng.below(config.delay_max.as_micros().max(1) as u64));
                kill_children(config, &path, None, &[delay, later])
            } else {
                kill_children(config, &path, None, &[delay])
            };
            let last = match runs.and_then(|runs| models.replay(&runs, 0, &mut report)) {
                Ok(last) => last,
                Err(error) => {
                    report.child_errors += 1;
                    report.failures.push(format!("{what}: {error}"));
                    return report;
                }
            };
            kill += if race { 2 } else { 1 };
            kills_left_on_file -= 1;
            step = last;
            if !verify_step(&path, &options, &mut models, &mut step, &what, &mut report) {
                return report;
            }
            continue;
        }
        let delay = Duration::from_micros(rng.below(config.delay_max.as_micros().max(1) as u64));
        let what = format!(
            "seed {} kill {kill} (from step {step}, after {delay:?})",
            config.seed
        );
        let last = match kill_children(config, &path, Some(step), &[delay])
            .and_then(|runs| models.replay(&runs, step, &mut report))
        {
            Ok(last) => last,
            Err(error) => {
                report.child_errors += 1;
                report.failures.push(format!("{what}: {error}"));
                return report;
            }
        };
        kill += 1;
        kills_left_on_file -= 1;
        step = last;
        if !verify_step(&path, &options, &mut models, &mut step, &what, &mut report) {
            return report;
        }
    }
    report.max_file_bytes = Max(std::fs::metadata(&path).map_or(0, |m| m.len()));
    report
}

/// Reopens the file after a kill and checks it against the model of `step` (the last
/// acknowledged one) or the next; moves `step` on when the next had landed. Returns whether
/// the loop may go on.
fn verify_step(
    path: &Path,
    options: &Options,
    models: &mut Models,
    step: &mut u64,
    what: &str,
    report: &mut KillReport,
) -> bool {
    let model = models.get(*step).clone();
    let next = models.get(*step + 1).clone();
    let db = Db::open_with(path, options.clone());
    let mut verdict = judge(db.as_ref(), false, &model, Some(&next));
    if let (Verdict::Acked | Verdict::InFlight, Ok(db)) = (&verdict, &db) {
        // The content says which step the file holds; the meta's txid must say the same.
        let holds = *step + u64::from(matches!(verdict, Verdict::InFlight));
        match db.view(|tx| Ok::<_, rbolt::Error>(tx.id().0)) {
            Ok(txid) if txid_fits(models.loose_txids, holds, txid) => {}
            Ok(txid) => {
                let detail = format!("txid {txid} holds step {holds}");
                verdict = Verdict::Failed(Failure::Wrong(detail));
            }
            Err(error) => verdict = Verdict::Failed(Failure::Check(error.to_string())),
        }
    }
    match verdict {
        Verdict::Acked => true,
        Verdict::InFlight => {
            report.in_flight_landed += 1;
            *step += 1;
            true
        }
        // Only the power-loss suite tells garbage apart; `judge` never says this.
        Verdict::Unsynced(_) => {
            unreachable!("the kill loop judges with every acknowledged step required")
        }
        Verdict::InitGarbage => unreachable!("the kill loop does not classify garbage"),
        Verdict::Failed(failure) => {
            report.reopens.record(failure, what, &mut report.failures);
            false
        }
    }
}

/// The model after each step of the workload, computed as far as asked.
struct Models {
    workload: Workload,
    trees: Vec<Tree>,
    /// Steps may take more than one txid each (see `KillConfig::vacuum` and `unsynced`).
    loose_txids: bool,
}

impl Models {
    fn new(workload: Workload, loose_txids: bool) -> Models {
        Models {
            workload,
            trees: vec![Tree::default()],
            loose_txids,
        }
    }

    /// The content after step `step`.
    fn get(&mut self, step: u64) -> &Tree {
        while self.trees.len() as u64 <= step {
            let mut next = self.trees.last().expect("step 0").clone();
            self.workload.step(self.trees.len() as u64, &mut next);
            self.trees.push(next);
        }
        &self.trees[step as usize]
    }

    /// Checks the acknowledgements of `runs` (children that ran one after the other on the
    /// file, which held step `step` or the one after when the first started) and returns the
    /// last acknowledged step. Every child must have been killed.
    fn replay(
        &mut self,
        runs: &[ChildRun],
        step: u64,
        report: &mut KillReport,
    ) -> Result<u64, String> {
        let mut last = step;
        // A child that started saw the file at the last acknowledged step or the one after it
        // (in flight when the one before was killed): which ran first shows in that step.
        let mut order: Vec<&ChildRun> = runs.iter().collect();
        order.sort_by_key(|run| run.ready.unwrap_or(u64::MAX));
        for run in order {
            if !run.killed {
                return Err(format!("the child was not killed: {}", run.stderr));
            }
            report.kills += 1;
            report.vacuum_pages_moved += run.vacuum_pages_moved;
            report.copied_bytes += run.acks.last().map_or(0, |ack| ack.copied_bytes);
            let Some(ready) = run.ready else {
                report.kills_before_ready += 1;
                if !run.acks.is_empty() {
                    return Err("acknowledgements without a ready line".into());
                }
                continue;
            };
            if ready != last && ready != last + 1 {
                return Err(format!(
                    "a child found step {ready} after step {last} was acknowledged"
                ));
            }
            last = ready;
            let mut last_txid = 0;
            for ack in &run.acks {
                if ack.step != last + 1
                    || !txid_fits(self.loose_txids, ack.step, ack.txid)
                    || ack.txid <= last_txid
                {
                    report.reopens.wrong_state += 1;
                    return Err(format!(
                        "acknowledged step {} as txid {} after step {last}",
                        ack.step, ack.txid
                    ));
                }
                last = ack.step;
                last_txid = ack.txid;
                report.acked_commits += 1;
                if digest(self.get(last)) != ack.digest {
                    report.reopens.wrong_state += 1;
                    return Err(format!(
                        "step {last}: the child's digest differs from the model's"
                    ));
                }
            }
        }
        Ok(last)
    }
}

/// What one child did before it was killed.
struct ChildRun {
    killed: bool,
    /// The step the file held when the child had it open (`ready STEP`); `None` if it was
    /// killed first.
    ready: Option<u64>,
    /// Every acknowledged commit, in order.
    acks: Vec<Ack>,
    /// Pages its vacuum steps moved (`vacuum STEP PAGES` lines).
    vacuum_pages_moved: u64,
    stderr: String,
}

/// One acknowledgement: `ack STEP TXID DIGEST COPIED`.
struct Ack {
    step: u64,
    txid: u64,
    digest: u64,
    /// The child's `FileStorage::copied_bytes` so far.
    copied_bytes: u64,
}

/// The txid step `step` commits as: a new file's metas hold txids 0 and 1, and every step
/// commits once.
fn txid_of(step: u64) -> u64 {
    step + 1
}

/// Whether `txid` may hold step `step`: exactly `txid_of(step)`, or at least that when steps
/// may take more than one txid (vacuum steps between them, commits without syncs).
/// Whether the children of seed `seed` make their durable steps with one sync (issue 51):
/// the odd seeds.
fn one_sync_seed(seed: u64) -> bool {
    seed % 2 == 1
}

fn txid_fits(loose: bool, step: u64, txid: u64) -> bool {
    if loose {
        txid >= txid_of(step)
    } else {
        txid == txid_of(step)
    }
}

/// Starts one child per entry of `delays` on `path` at once, and SIGKILLs each when its delay
/// has passed since the start. `step`: the step the file holds, which each child checks; `None`
/// lets each child take whatever the file holds (new files, racing children).
fn kill_children(
    config: &KillConfig,
    path: &Path,
    step: Option<u64>,
    delays: &[Duration],
) -> Result<Vec<ChildRun>, String> {
    struct Running {
        child: std::process::Child,
        deadline: Instant,
        killed: bool,
        /// Killed, or ended by itself.
        done: bool,
        reader: std::thread::JoinHandle<Vec<String>>,
        errors: std::thread::JoinHandle<String>,
    }
    let started = Instant::now();
    let mut running = Vec::new();
    for &delay in delays {
        let mut child = Command::new(&config.child)
            .arg("kill-loop")
            .arg(path)
            .arg(config.seed.to_string())
            .arg(step.map_or_else(|| "any".to_string(), |s| s.to_string()))
            .args(config.vacuum.then_some("vacuum"))
            .args(config.unsynced.then_some("unsynced"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("spawn {}: {e}", config.child.display()))?;
        let stdout = child.stdout.take().expect("piped");
        let mut stderr = child.stderr.take().expect("piped");
        // Read while the child runs, so a full pipe never holds it up.
        let reader = std::thread::spawn(move || {
            BufReader::new(stdout)
                .lines()
                .map_while(Result::ok)
                .collect::<Vec<String>>()
        });
        let errors = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        running.push(Running {
            child,
            deadline: started + delay,
            killed: false,
            done: false,
            reader,
            errors,
        });
    }
    // Kill each at its deadline (unless it exited first, which is a failure).
    loop {
        let now = Instant::now();
        let mut pending = false;
        for run in running.iter_mut().filter(|run| !run.done) {
            if run.child.try_wait().map_err(|e| e.to_string())?.is_some() {
                run.done = true;
                continue;
            }
            if now >= run.deadline {
                // SIGKILL: the child gets no chance to finish a write, sync or commit.
                run.child.kill().map_err(|e| format!("kill: {e}"))?;
                run.killed = true;
                run.done = true;
            } else {
                pending = true;
            }
        }
        if !pending {
            break;
        }
        std::thread::sleep(Duration::from_micros(200));
    }
    let mut runs = Vec::new();
    for mut run in running {
        let status = run.child.wait().map_err(|e| format!("wait: {e}"))?;
        // A child that died of something else just before its kill (a SIGBUS, say) was not
        // killed by the loop: the check of the runs reports it with its stderr.
        let killed =
            run.killed && std::os::unix::process::ExitStatusExt::signal(&status) == Some(9);
        let lines = run.reader.join().map_err(|_| "stdout reader panicked")?;
        let mut stderr = run.errors.join().map_err(|_| "stderr reader panicked")?;
        if run.killed && !killed {
            stderr.push_str(&format!(" [it ended with {status} before its kill]"));
        }
        let mut ready = None;
        let mut acks = Vec::new();
        let mut vacuum_pages_moved = 0;
        for line in lines {
            let bad = || format!("bad line {line:?}; stderr: {stderr}");
            let mut words = line.split_whitespace();
            let fields = (words.next(), words.next(), words.next(), words.next());
            match (fields, words.next()) {
                ((Some("ack"), Some(step), Some(txid), Some(hex)), Some(copied)) => {
                    let step = step.parse().map_err(|_| bad())?;
                    let txid = txid.parse().map_err(|_| bad())?;
                    let digest = u64::from_str_radix(hex, 16).map_err(|_| bad())?;
                    let copied_bytes = copied.parse().map_err(|_| bad())?;
                    acks.push(Ack {
                        step,
                        txid,
                        digest,
                        copied_bytes,
                    });
                }
                ((Some("vacuum"), Some(_step), Some(moved), None), None) => {
                    vacuum_pages_moved += moved.parse::<u64>().map_err(|_| bad())?;
                }
                ((Some("ready"), Some(step), None, None), None) => {
                    ready = Some(step.parse().map_err(|_| bad())?);
                }
                _ => return Err(format!("unexpected line {line:?}; stderr: {stderr}")),
            }
        }
        runs.push(ChildRun {
            killed,
            ready,
            acks,
            vacuum_pages_moved,
            stderr,
        });
    }
    Ok(runs)
}

/// The child's side: `kill-loop PATH SEED STEP [vacuum] [unsynced]`. Opens the file (creating
/// it if missing), which must hold step `STEP` (any step for `any`), prints `ready STEP`, and
/// commits steps after it until killed, printing `ack STEP TXID DIGEST COPIED` after each
/// commit returns (`COPIED`: the bytes its file took as copies into the mapping so far); with
/// `vacuum`, each step is followed by an online vacuum step and `vacuum STEP PAGES`; with
/// `unsynced`, three steps in four commit without syncs; odd seeds commit their durable steps
/// with one sync.
pub(crate) fn child_main(args: &[String]) -> Result<(), String> {
    let usage = || "usage: kill-loop PATH SEED STEP|any [vacuum] [unsynced]".to_string();
    let [path, seed, start, modes @ ..] = args else {
        return Err(usage());
    };
    let vacuum = modes.first().is_some_and(|mode| mode == "vacuum");
    let unsynced = modes.last().is_some_and(|mode| mode == "unsynced");
    if modes.len() != usize::from(vacuum) + usize::from(unsynced) {
        return Err(usage());
    }
    let seed: u64 = seed.parse().map_err(|_| "bad seed")?;
    let start: Option<u64> = match start.as_str() {
        "any" => None,
        start => Some(start.parse().map_err(|_| "bad step")?),
    };
    let (options, workload) = setup(seed);
    // Two children racing to create a file: the second waits for the first's lock (rbolt's
    // default is to fail at once). Opened as `Db::open_with` opens it, with the file kept to
    // read its `copied_bytes`.
    // Odd seeds make their durable steps with one sync (issue 51): a kill between a one-sync
    // commit's meta and its sync leaves a meta the next open must check and write in Go's
    // form.
    let options = options.lock_timeout(None).one_sync(one_sync_seed(seed));
    let file = FileStorage::open(path, FileOptions::new().lock_timeout(None))
        .map_err(|e| format!("open: {e}"))?;
    let file = Arc::new(file);
    let db = Db::open_storage(file.clone(), options).map_err(|e| format!("open: {e}"))?;
    let mut model = read_db(&db).map_err(|e| format!("read: {e}"))?;
    let found = progress(&model);
    if start.is_some_and(|start| start != found) {
        return Err(format!(
            "the file holds step {found}, the parent says {start:?}"
        ));
    }
    let start = found;
    let mut out = std::io::stdout().lock();
    writeln!(out, "ready {start}").map_err(|e| e.to_string())?;
    out.flush().map_err(|e| e.to_string())?;
    for step in start + 1.. {
        let ops = workload.step(step, &mut model);
        let durability = (unsynced && unsynced_step(step)).then_some(Durability::None);
        commit_step_with(&db, &ops, durability).map_err(|e| format!("step {step}: {e}"))?;
        if vacuum {
            let moved = db
                .vacuum_step(VACUUM_STEP_PAGES)
                .map_err(|e| format!("vacuum after step {step}: {e}"))?
                .pages_moved;
            writeln!(out, "vacuum {step} {moved}").map_err(|e| e.to_string())?;
        }
        let txid = db
            .view(|tx| Ok(tx.id().0))
            .map_err(|e: rbolt::Error| e.to_string())?;
        let copied = file.copied_bytes();
        writeln!(out, "ack {step} {txid} {:016x} {copied}", digest(&model))
            .map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}
