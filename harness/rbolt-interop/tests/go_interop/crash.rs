//! The crash rounds: an rbolt process (`rbolt-interop-crash-writer`, `src/crash.rs`) makes a
//! planned mix of durable commits, commits without syncs and `Db::sync`s on a new file and is
//! SIGKILLed, idle after its plan or at a random moment inside it, at page sizes 1024, 4096,
//! 8192 and 16384. Each crash image is copied twice, for two rounds:
//!
//! 1. *Go opens every crash state*: Go bbolt opens the file read-only and read-write, checks
//!    and dumps it. It cannot see commits made without syncs (their meta fails its checksum
//!    on purpose), so it must read one acknowledged state, the same both times, at or past
//!    the last durable point (a durable commit or `Db::sync`): past it when rbolt made a
//!    commit without syncs durable, as it does when that commit's meta would go to slot 0,
//!    which Go bbolt 1.3 needs durable. That state is the image's durable state. On every
//!    other image Go then commits a transaction of its own. rbolt reopens the file
//!    (read-write, which makes what it opens durable): it must hold every acknowledged commit
//!    if Go did not write, and Go's state if Go committed; then Go checks and dumps what
//!    rbolt recovered.
//! 2. *Go dies mid-transaction*: Go opens the file under a file size limit (RLIMIT_FSIZE) of
//!    its size, or on every other image of a page inside it, and puts more than the file
//!    holds in one transaction (values of up to an eighth of a page on every other pair of
//!    images, bigger ones on the others). bbolt writes a commit's pages in page order and its
//!    meta last: its pages below the limit (the free pages of the durable state, which the
//!    commits without syncs took) are written, the first at or past it fails with EFBIG, and
//!    its meta is never written (the round checks that both meta pages are unchanged and
//!    that Go wrote pages). rbolt opens the file read-only, then read-write: each open must
//!    check clean and hold exactly a state rbolt acknowledged: the durable state Go read in
//!    round 1, or, if its digest check found the pages of the commits without syncs intact,
//!    the newest; never Go's uncommitted keys. Then Go checks and dumps what rbolt recovered.
//!
//! Files are made with both of rbolt's freelist kinds, with and without a freelist page
//! (`no_freelist_sync`: Go's read-write open then commits one, a write of Go's, which round
//! 1 detects by the meta pages and follows, and round 2 avoids with Go's own
//! `NoFreelistSync`); Go reads with both of its freelist types.
//!
//! With a kill inside the plan, the step in flight may or may not have happened: its state
//! is allowed too. An outcome that is allowed is counted by kind; one that is not counts as
//! lost (an older acknowledged state), wrong (any other content, or check errors) or
//! unopenable, and fails the suite.

use crate::go::{GoInterop, Run};
use crate::rbolt_side;
use rbolt::{Db, Options};
use rbolt_fixtures::rng::Rng;
use rbolt_interop::crash::{Step, commits, durable_commits, model_after, parse_plan};
use std::collections::BTreeSet;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The page sizes of the crash rounds: Go bbolt 1.3 finds the page size in meta 0 alone at
/// all but 4096 (the OS page size, its fallback).
const PAGE_SIZES: [usize; 4] = [1024, 4096, 8192, 16384];

/// The page sizes of this run's crash rounds (`RBOLT_GO_CRASH_SIZES`, how many of
/// [`PAGE_SIZES`]): in the fast tier the first two, one read from meta 0 and 4096, Go's
/// fallback; every one of them in CI's.
fn page_sizes() -> &'static [usize] {
    let n = rbolt_testkit::tier::size("RBOLT_GO_CRASH_SIZES", 2, 4, 4) as usize;
    &PAGE_SIZES[..n.clamp(1, PAGE_SIZES.len())]
}

/// How long a crash writer may take to reach its kill point.
const CHILD_TIME_MAX: Duration = Duration::from_secs(60);

/// A long plan of both kinds, killed at random moments inside it.
const LONG: &str = "DNNDNNNNSNNDNNNNNNDNNNN";

/// The plans, each killed idle after its last step (`None`) or after the step given has
/// been acknowledged and a random moment more (`Some`).
const PLANS: [(&str, Option<usize>); 11] = [
    // Everything durable: Go and rbolt see the same state.
    ("DDD", None),
    // One commit without syncs after a durable one.
    ("DDN", None),
    // Several, in the same meta slot.
    ("DNNNN", None),
    // A sync between them: the durable point is the sync's.
    ("DNSNN", None),
    // None durable but the new file's (empty) first state.
    ("NNNN", None),
    // Killed inside a run of both kinds.
    (LONG, Some(1)),
    (LONG, Some(6)),
    (LONG, Some(13)),
    // One-sync commits (issue 51), alone and among the others: Go reads the file once
    // rbolt has opened it (`rbolt_then_go`).
    ("DOOO", None),
    (LONG_ONE_SYNC, Some(3)),
    (LONG_ONE_SYNC, Some(9)),
];

/// A long plan with one-sync commits among the others, killed at random moments inside it.
const LONG_ONE_SYNC: &str = "DOONOONSOOONNOODOO";

/// What one round can end as, besides its allowed outcomes.
#[derive(Debug, Default)]
pub struct Failures {
    /// An older acknowledged state than the round requires.
    pub lost: usize,
    /// Check errors, or content that is no acknowledged state.
    pub wrong: usize,
    pub unopenable: usize,
}

impl Failures {
    fn total(&self) -> usize {
        self.lost + self.wrong + self.unopenable
    }
}

/// The crash rounds' counts.
#[derive(Debug, Default)]
pub struct Counts {
    /// Crash images.
    pub states: usize,
    /// Kills that found a step in flight.
    pub in_flight: usize,
    /// Round 1: images Go opened read-only and read-write, checked clean and read the same
    /// state at or past the last durable point, and acknowledged; of those, the ones where
    /// that state holds commits without syncs rbolt made durable (it does when their meta
    /// would go to slot 0, which Go bbolt 1.3 needs durable), and those where it lacks some
    /// acknowledged commits without syncs (which rbolt's reopen must hold).
    pub go_read_durable: usize,
    pub go_read_upgraded: usize,
    pub states_unsynced: usize,
    /// Round 1: rbolt reopens that held every acknowledged commit (Go did not write), and
    /// that held Go's commit.
    pub rbolt_kept_acked: usize,
    pub rbolt_kept_go: usize,
    /// Round 1: Go's read-write opens that committed (a freelist page, on files rbolt wrote
    /// without one).
    pub go_open_commits: usize,
    /// Plans with one-sync commits: images Go read, after rbolt's open, as rbolt did.
    pub one_sync_go_read: usize,
    pub opens: Failures,
    /// Round 2: Go transactions that died after writing pages, and the pages they wrote.
    pub go_died: usize,
    pub go_died_pages: usize,
    /// Of those, the ones whose file size limit was inside the file (a prefix of their
    /// pages written).
    pub go_died_inside: usize,
    /// Round 2: rbolt opens (read-only and read-write) at the durable state because the
    /// pages of the commits without syncs changed; at the newest state because they did
    /// not; at the one state there was (no commits without syncs).
    pub fell_back: usize,
    pub kept_unsynced: usize,
    pub only_durable: usize,
    pub dies: Failures,
    /// Rounds that could not do what they claim: a crash writer that failed, a Go writer
    /// that did not die, or died having written a meta or no page.
    pub setup_failures: usize,
}

impl Counts {
    pub fn line(&self) -> String {
        format!(
            "crash: states={} (in_flight={}) | go opens: go_read_durable={} (upgraded={}, \
             unsynced_unseen={}) go_open_commits={} one_sync_go_read={} rbolt_kept_acked={} \
             rbolt_kept_go={} \
             lost={} wrong={} unopenable={} | go dies: go_died={} (inside={}, pages={}) \
             fell_back={} kept_unsynced={} only_durable={} lost={} wrong={} unopenable={} | \
             setup_failures={}",
            self.states,
            self.in_flight,
            self.go_read_durable,
            self.go_read_upgraded,
            self.states_unsynced,
            self.go_open_commits,
            self.one_sync_go_read,
            self.rbolt_kept_acked,
            self.rbolt_kept_go,
            self.opens.lost,
            self.opens.wrong,
            self.opens.unopenable,
            self.go_died,
            self.go_died_inside,
            self.go_died_pages,
            self.fell_back,
            self.kept_unsynced,
            self.only_durable,
            self.dies.lost,
            self.dies.wrong,
            self.dies.unopenable,
            self.setup_failures
        )
    }

    pub fn failed(&self) -> bool {
        self.opens.total() + self.dies.total() + self.setup_failures > 0
    }

    /// What the rounds claim to cover and did not.
    pub fn uncovered(&self) -> Vec<String> {
        let mut missing = Vec::new();
        if self.states_unsynced == 0 || self.rbolt_kept_acked == 0 || self.rbolt_kept_go == 0 {
            missing.push(format!(
                "crash round 1: no reopen after unsynced commits kept them, or none after Go \
                 wrote ({self:?})"
            ));
        }
        if self.one_sync_go_read == 0 {
            missing.push("crash: no plan with one-sync commits was read by Go".into());
        }
        if self.go_open_commits == 0 {
            missing.push("crash round 1: no file without a freelist page".into());
        }
        if self.fell_back == 0 {
            missing
                .push("crash round 2: Go's dead transaction never changed an unsynced page".into());
        }
        missing
    }
}

/// One crash image: the plan, what the killed child acknowledged, and the model of every
/// state of its workload.
struct Image {
    path: PathBuf,
    page_size: usize,
    steps: Vec<Step>,
    /// Steps acknowledged; whether the next was in flight (begun, not acknowledged).
    acked: usize,
    in_flight: bool,
    /// rbolt wrote no freelist page (its option `no_freelist_sync`).
    no_freelist_sync: bool,
    /// The manifest after each number of commits of the plan.
    manifests: Vec<String>,
}

impl Image {
    /// The states Go may read: from the last one a durable point made durable (a durable
    /// commit, or `Db::sync`) to the newest acknowledged (rbolt may make a commit without
    /// syncs durable: it does when its meta would go to slot 0, which Go bbolt 1.3 needs
    /// durable) or in flight.
    fn go_allowed(&self) -> BTreeSet<usize> {
        let newest = *self.rbolt_allowed().last().expect("not empty");
        (durable_commits(&self.steps[..self.acked])..=newest).collect()
    }

    /// The states rbolt may open when no other writer came: every acknowledged commit, and
    /// the one in flight or not.
    fn rbolt_allowed(&self) -> BTreeSet<usize> {
        let mut allowed = BTreeSet::from([commits(&self.steps[..self.acked])]);
        if self.in_flight {
            allowed.insert(commits(&self.steps[..=self.acked]));
        }
        allowed
    }

    /// Which state `content` is, if any.
    fn state_of(&self, content: &[u8]) -> Option<usize> {
        self.manifests
            .iter()
            .position(|manifest| manifest.as_bytes() == content)
    }

    /// A copy of the image for one round.
    fn copy(&self, round: &str) -> PathBuf {
        let copy = self.path.with_extension(format!("{round}.db"));
        std::fs::copy(&self.path, &copy).expect("a copy of the crash image");
        copy
    }
}

/// How a content compares with the states allowed.
enum Verdict {
    Allowed(usize),
    Lost(usize),
    /// Another content: a state of the plan not allowed (`Some`), or none.
    Wrong(Option<usize>),
}

/// How a failure names a wrong content.
fn wrong_what(state: Option<usize>, allowed: &BTreeSet<usize>) -> String {
    match state {
        Some(n) => format!("the state after {n} commits (allowed: after {allowed:?})"),
        None => format!("no state of the plan (allowed: after {allowed:?})"),
    }
}

fn judge(image: &Image, content: &[u8], allowed: &BTreeSet<usize>) -> Verdict {
    match image.state_of(content) {
        Some(n) if allowed.contains(&n) => Verdict::Allowed(n),
        Some(n) if n < *allowed.first().expect("not empty") => Verdict::Lost(n),
        state => Verdict::Wrong(state),
    }
}

/// Runs both rounds on every plan at every page size.
pub fn run(go: &GoInterop, dir: &Path, counts: &mut Counts, failures: &mut Vec<String>) {
    let mut rng = Rng::new(46);
    for (size_idx, &page_size) in page_sizes().iter().enumerate() {
        for (plan_idx, &(plan, kill_after)) in PLANS.iter().enumerate() {
            let seed = 4600 + (size_idx * PLANS.len() + plan_idx) as u64;
            // rbolt's freelist kinds, and files without a freelist page (Go's read-write open
            // then commits one: a write of Go's).
            let mut flags = Vec::new();
            if plan_idx % 2 == 0 {
                flags.push("span");
            }
            if (size_idx + plan_idx) % 3 == 0 {
                flags.push("no-freelist-sync");
            }
            let label =
                format!("crash seed {seed} page size {page_size} plan {plan} options {flags:?}");
            let plan = (plan, kill_after);
            let image = match crash_image(dir, seed, page_size, plan, &flags, &mut rng) {
                Ok(image) => image,
                Err(why) => {
                    counts.setup_failures += 1;
                    failures.push(format!("{label}: {why}"));
                    continue;
                }
            };
            counts.states += 1;
            counts.in_flight += usize::from(image.in_flight);
            if image.steps.contains(&Step::OneSync) {
                if rbolt_then_go(go, &image, &label, counts, failures).is_some() {
                    let _ = std::fs::remove_file(image.path.with_extension("db"));
                    let _ = std::fs::remove_file(image.path.with_extension("opens.db"));
                } else {
                    crate::keep_failed(&image.path);
                }
                continue;
            }
            let label = format!(
                "{label} (acked {} steps{})",
                image.acked,
                if image.in_flight {
                    ", one in flight"
                } else {
                    ""
                }
            );
            let go_writes = (size_idx + plan_idx) % 2 == 1;
            let durable = go_opens(go, &image, go_writes, seed, &label, counts, failures);
            let passed_dies = go_dies(go, &image, durable, seed, &label, counts, failures);
            // Passed: the files go; a failed image's stay for a look.
            if durable.is_some() && passed_dies.is_some() {
                for extension in ["db", "opens.db", "opens.model", "dies.db"] {
                    let _ = std::fs::remove_file(image.path.with_extension(extension));
                }
            } else {
                crate::keep_failed(&image.path);
            }
        }
    }
}

/// The round of a plan with one-sync commits (issue 51): Go cannot read a one-sync meta, so
/// it reads the file once rbolt has opened it. rbolt's read-write open must hold every
/// acknowledged commit (and the one in flight or not), check clean, and leave a file Go
/// checks and dumps to the same content. Returns `None` if it failed.
fn rbolt_then_go(
    go: &GoInterop,
    image: &Image,
    label: &str,
    counts: &mut Counts,
    failures: &mut Vec<String>,
) -> Option<()> {
    let file = image.copy("opens");
    let label = format!("{label} (one-sync: rbolt opens, then Go)");
    let fails = &mut counts.opens;
    let export = match rbolt_recovers(&file) {
        Ok(export) => export,
        Err(error) => return read_failed(error, &label, fails, failures),
    };
    let allowed = image.rbolt_allowed();
    let verdict = judge(image, export.as_bytes(), &allowed);
    allowed_state(verdict, &allowed, "rbolt's reopen", &label, fails, failures)?;
    counts.rbolt_kept_acked += 1;
    go_reads_recovered(go, &file, image.page_size, &export, &label, fails, failures)?;
    counts.one_sync_go_read += 1;
    Some(())
}

/// Runs the crash writer on a new file and SIGKILLs it: idle after its plan, or a random
/// moment after step `kill_after` was acknowledged.
fn crash_image(
    dir: &Path,
    seed: u64,
    page_size: usize,
    (plan, kill_after): (&str, Option<usize>),
    flags: &[&str],
    rng: &mut Rng,
) -> Result<Image, String> {
    let path = dir.join(format!("crash-{seed}-{page_size}.db"));
    let _ = std::fs::remove_file(&path);
    let mut child = Command::new(env!("CARGO_BIN_EXE_rbolt-interop-crash-writer"))
        .arg(&path)
        .arg(page_size.to_string())
        .arg(seed.to_string())
        .arg(plan)
        .args(flags)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .map_err(|e| format!("the crash writer did not start: {e}"))?;
    let lines = run_and_kill(&mut child, kill_after, rng)?;
    let acked = lines.iter().filter(|l| l.starts_with("acked ")).count();
    let begun = lines.iter().filter(|l| l.starts_with("begin ")).count();
    let steps = parse_plan(plan)?;
    let manifests = (0..=commits(&steps))
        .map(|n| model_after(seed, page_size, n).to_manifest())
        .collect();
    Ok(Image {
        path,
        page_size,
        steps,
        acked,
        in_flight: begun > acked,
        no_freelist_sync: flags.contains(&"no-freelist-sync"),
        manifests,
    })
}

/// Reads the child's report until its kill point, SIGKILLs it, and returns every line it
/// reported (those read after the kill too). A child that does not reach its kill point
/// within [`CHILD_TIME_MAX`] is killed and reported.
fn run_and_kill(
    child: &mut Child,
    kill_after: Option<usize>,
    rng: &mut Rng,
) -> Result<Vec<String>, String> {
    let stdout = child.stdout.take().expect("piped stdout");
    // Read on a thread, so that a child that hangs cannot hang the suite.
    let (send, lines) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if send.send(line).is_err() {
                break;
            }
        }
    });
    let until = match kill_after {
        Some(step) => format!("acked {step}"),
        None => "idle".to_owned(),
    };
    let deadline = Instant::now() + CHILD_TIME_MAX;
    let mut reported = Vec::new();
    let reached = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = lines.recv_timeout(left) else {
            break false;
        };
        let reached = line == until;
        reported.push(line);
        if reached {
            break true;
        }
    };
    if reached && kill_after.is_some() {
        std::thread::sleep(Duration::from_micros(rng.below(20_000)));
    }
    let early = child.try_wait().map_err(|e| e.to_string())?;
    // `Child::kill` is SIGKILL on Unix: no destructor, no close, no flush.
    let _ = child.kill();
    let _ = child.wait();
    // The pipe is closed now: the reader ends, having sent every line.
    reader
        .join()
        .expect("the reader of the crash writer's stdout");
    reported.extend(lines.try_iter());
    if !reached || early.is_some() {
        return Err(format!(
            "the crash writer ended ({early:?}) or hung before {until:?} (see its stderr): \
             {reported:?}"
        ));
    }
    Ok(reported)
}

/// The Go program's options for a file of the rounds: Go's freelist type by page size.
fn go_args(page_size: usize, read_only: bool) -> Vec<String> {
    let freelist = if page_size.is_multiple_of(8192) {
        "map"
    } else {
        "array"
    };
    let mut args = vec!["--freelist".to_owned(), freelist.to_owned()];
    if read_only {
        args.push("--read-only".into());
    }
    args
}

/// A failure of one round: counted, described. Returns `None`: the round failed.
fn fail<T>(count: &mut usize, failures: &mut Vec<String>, label: &str, what: &str) -> Option<T> {
    *count += 1;
    failures.push(format!("{label}: {what}"));
    None
}

/// Go checks and dumps `file`; returns the dump, or why not (and whether Go could not open
/// the file at all).
fn go_reads(
    go: &GoInterop,
    file: &Path,
    page_size: usize,
    read_only: bool,
) -> Result<Vec<u8>, (bool, String)> {
    let checked = go.run("check", file, &go_args(page_size, read_only));
    if !checked.ok() {
        return Err((
            opened_not(&checked),
            format!("Go's check: {}", checked.describe()),
        ));
    }
    let dumped = go.run("dump", file, &go_args(page_size, read_only));
    if !dumped.ok() {
        return Err((
            opened_not(&dumped),
            format!("Go's dump: {}", dumped.describe()),
        ));
    }
    Ok(dumped.stdout)
}

/// Whether a run of the Go program failed at its open.
fn opened_not(run: &Run) -> bool {
    run.code == Some(1) && run.stderr.starts_with("open ")
}

/// Round 1. Returns the state Go read (its durable state), if the round passed.
fn go_opens(
    go: &GoInterop,
    image: &Image,
    go_writes: bool,
    seed: u64,
    label: &str,
    counts: &mut Counts,
    failures: &mut Vec<String>,
) -> Option<usize> {
    let file = image.copy("opens");
    let writes = if go_writes { ", writes" } else { "" };
    let label = format!("{label} round 1 (Go opens{writes})");
    let fails = &mut counts.opens;
    let go_allowed = image.go_allowed();
    let metas_before = meta_pages(&file, image.page_size);
    let mut read = Vec::new();
    let mut dump = Vec::new();
    for read_only in [true, false] {
        let who = format!(
            "Go ({})",
            if read_only { "read-only" } else { "read-write" }
        );
        dump = match go_reads(go, &file, image.page_size, read_only) {
            Ok(dump) => dump,
            Err(error) => return read_failed(error, &label, fails, failures),
        };
        let verdict = judge(image, &dump, &go_allowed);
        read.push(allowed_state(
            verdict,
            &go_allowed,
            &who,
            &label,
            fails,
            failures,
        )?);
    }
    let durable = read[0];
    if read[1] != durable {
        let what = format!("Go read the state after {read:?} commits read-only, read-write");
        return fail(&mut fails.wrong, failures, &label, &what);
    }
    counts.go_read_durable += 1;
    let acked = &image.steps[..image.acked];
    counts.go_read_upgraded += usize::from(durable > durable_commits(acked));
    counts.states_unsynced += usize::from(durable < commits(acked));
    // Go's read-write open commits (a freelist page) when the durable meta has none: then
    // Go wrote, and the state rbolt must hold is Go's.
    let mut go_state = None;
    if meta_pages(&file, image.page_size) != metas_before {
        counts.go_open_commits += 1;
        go_state = Some(String::from_utf8(dump).expect("a manifest is UTF-8"));
    }
    if go_writes {
        match go_writes_on(go, &file, image.page_size, seed) {
            Ok(model) => go_state = Some(model),
            Err(why) => return fail(&mut fails.wrong, failures, &label, &why),
        }
    }
    let export = match rbolt_recovers(&file) {
        Ok(export) => export,
        Err(error) => return read_failed(error, &label, fails, failures),
    };
    let who = "rbolt's reopen";
    match go_state {
        Some(expected) if export != expected => {
            let what = match image.state_of(export.as_bytes()) {
                Some(n) => format!("{who} holds the state after {n} commits, not Go's"),
                None => format!(
                    "{who} does not hold Go's state: {}",
                    crate::first_difference(&export, &expected)
                ),
            };
            return fail(&mut fails.wrong, failures, &label, &what);
        }
        Some(_) => counts.rbolt_kept_go += 1,
        None => {
            let allowed = image.rbolt_allowed();
            let verdict = judge(image, export.as_bytes(), &allowed);
            allowed_state(verdict, &allowed, who, &label, fails, failures)?;
            counts.rbolt_kept_acked += 1;
        }
    }
    go_reads_recovered(go, &file, image.page_size, &export, &label, fails, failures)?;
    Some(durable)
}

/// The file's two meta pages.
fn meta_pages(file: &Path, page_size: usize) -> Vec<u8> {
    let mut bytes = std::fs::read(file).expect("the file");
    bytes.truncate(2 * page_size);
    bytes
}

/// Go commits one transaction of its workload on `file`; returns the manifest of its state.
fn go_writes_on(
    go: &GoInterop,
    file: &Path,
    page_size: usize,
    seed: u64,
) -> Result<String, String> {
    let model = file.with_extension("model");
    let mut args = go_args(page_size, false);
    args.extend([
        "--seed".to_owned(),
        seed.to_string(),
        "--txs".into(),
        "1".into(),
        "--ops".into(),
        "30".into(),
        "--model-out".into(),
        model.display().to_string(),
    ]);
    let written = go.run("write", file, &args);
    if !written.ok() {
        return Err(format!("Go's write: {}", written.describe()));
    }
    let text = std::fs::read_to_string(&model).expect("Go wrote its model");
    let _ = std::fs::remove_file(&model);
    Ok(text)
}

/// Counts a failed read as unopenable or wrong. Returns `None`: the round failed.
fn read_failed<T>(
    (unopenable, why): (bool, String),
    label: &str,
    fails: &mut Failures,
    failures: &mut Vec<String>,
) -> Option<T> {
    let count = match unopenable {
        true => &mut fails.unopenable,
        false => &mut fails.wrong,
    };
    fail(count, failures, label, &why)
}

/// The state of a verdict that `allowed` allows; any other is counted as lost or wrong.
fn allowed_state(
    verdict: Verdict,
    allowed: &BTreeSet<usize>,
    who: &str,
    label: &str,
    fails: &mut Failures,
    failures: &mut Vec<String>,
) -> Option<usize> {
    match verdict {
        Verdict::Allowed(n) => Some(n),
        Verdict::Lost(n) => {
            let what =
                format!("{who} holds the state after {n} commits (allowed: after {allowed:?})");
            fail(&mut fails.lost, failures, label, &what)
        }
        Verdict::Wrong(state) => {
            let what = format!("{who} holds {}", wrong_what(state, allowed));
            fail(&mut fails.wrong, failures, label, &what)
        }
    }
}

/// Go checks and dumps what rbolt recovered: the same content.
fn go_reads_recovered(
    go: &GoInterop,
    file: &Path,
    page_size: usize,
    export: &str,
    label: &str,
    fails: &mut Failures,
    failures: &mut Vec<String>,
) -> Option<()> {
    match go_reads(go, file, page_size, false) {
        Ok(dump) if dump == export.as_bytes() => Some(()),
        Ok(dump) => {
            let what = format!(
                "Go's dump after rbolt's recovery differs: {}",
                crate::first_difference(&String::from_utf8_lossy(&dump), export)
            );
            fail(&mut fails.wrong, failures, label, &what)
        }
        Err(error) => read_failed(error, label, fails, failures),
    }
}

/// rbolt opens `file` read-only: its check, then its export. `Err((unopenable, why))`.
fn rbolt_reads(file: &Path) -> Result<String, (bool, String)> {
    let checked = rbolt_side::check(file).map_err(|e| (true, format!("rbolt's open: {e}")))?;
    if !checked.hazards.is_empty() || !checked.other.is_empty() {
        return Err((
            false,
            format!("rbolt's check: {:?} {:?}", checked.hazards, checked.other),
        ));
    }
    rbolt_side::export(file).map_err(|e| (false, format!("rbolt's export: {e}")))
}

/// rbolt's next open (read-write: it makes what it opens durable), closed; then its check
/// and export.
fn rbolt_recovers(file: &Path) -> Result<String, (bool, String)> {
    Db::open_with(file, Options::default())
        .and_then(Db::close)
        .map_err(|e| (true, format!("rbolt's read-write open: {e}")))?;
    rbolt_reads(file)
}

/// Round 2, on the image whose durable state Go read in round 1 (`None`: round 1 failed;
/// then any state Go may read counts as durable). Returns `None` if it failed.
fn go_dies(
    go: &GoInterop,
    image: &Image,
    durable: Option<usize>,
    seed: u64,
    label: &str,
    counts: &mut Counts,
    failures: &mut Vec<String>,
) -> Option<()> {
    let file = image.path.with_extension("dies.db");
    let label = format!("{label} round 2 (Go dies)");
    let pages = go_dies_at_some_limit(go, &file, image, seed, &label, counts, failures)?;
    counts.go_died += 1;
    counts.go_died_pages += pages;
    let durable = match durable {
        Some(state) => BTreeSet::from([state]),
        None => image.go_allowed(),
    };
    let rbolt_allowed = image.rbolt_allowed();
    let allowed: BTreeSet<usize> = durable.union(&rbolt_allowed).copied().collect();
    let fails = &mut counts.dies;
    let mut export = String::new();
    for read_write in [false, true] {
        let (who, read) = match read_write {
            false => ("rbolt's read-only open", rbolt_reads(&file)),
            true => ("rbolt's read-write open", rbolt_recovers(&file)),
        };
        export = match read {
            Ok(export) => export,
            Err(error) => return read_failed(error, &label, fails, failures),
        };
        let verdict = judge(image, export.as_bytes(), &allowed);
        if export.contains("go-uncommitted") {
            // (Never a state of the plan: counted as wrong by the verdict.)
            failures.push(format!("{label}: {who} shows Go's uncommitted bucket"));
        }
        let n = allowed_state(verdict, &allowed, who, &label, fails, failures)?;
        match (durable.contains(&n), rbolt_allowed.contains(&n)) {
            (true, false) => counts.fell_back += 1,
            (false, true) => counts.kept_unsynced += 1,
            _ => counts.only_durable += 1,
        }
    }
    go_reads_recovered(go, &file, image.page_size, &export, &label, fails, failures)
}

/// Round 2's Go writer, which dies mid-commit on a copy of the image at `file`. Returns the
/// pages it wrote, or `None` if it failed (counted).
fn go_dies_at_some_limit(
    go: &GoInterop,
    file: &Path,
    image: &Image,
    seed: u64,
    label: &str,
    counts: &mut Counts,
    failures: &mut Vec<String>,
) -> Option<usize> {
    // On every other image, a file size limit inside the file first: Go's transaction then
    // dies after a prefix of its pages (in page order), which may spare the pages of the
    // commits without syncs. If that prefix is empty, the limit is the file's end.
    let file_len = std::fs::metadata(&image.path)
        .expect("the crash image")
        .len();
    let mut limits = vec![None];
    if seed % 2 == 1 {
        let pages = file_len / image.page_size as u64;
        let page = Rng::derive(seed, 2).range(pages / 4, pages);
        limits.insert(0, Some(page * image.page_size as u64));
    }
    for limit in limits {
        image.copy("dies");
        match go_dies_on(go, file, image, seed, limit) {
            Ok(0) if limit.is_some() => continue,
            Ok(0) => {}
            Ok(pages) => {
                counts.go_died_inside += usize::from(limit.is_some());
                return Some(pages);
            }
            Err((true, why)) => return fail(&mut counts.dies.unopenable, failures, label, &why),
            Err((false, why)) => return fail(&mut counts.setup_failures, failures, label, &why),
        }
    }
    let what = "Go's dead transaction wrote no page";
    fail(&mut counts.setup_failures, failures, label, what)
}

/// Runs Go's writer that dies mid-commit on `file` under a file size limit of `limit` bytes
/// (`None`: the file's length), and checks that it died as planned, with no meta written.
/// Returns the pages it wrote, or `Err((unopenable, why))`.
fn go_dies_on(
    go: &GoInterop,
    file: &Path,
    image: &Image,
    seed: u64,
    limit: Option<u64>,
) -> Result<usize, (bool, String)> {
    let page_size = image.page_size;
    let before = std::fs::read(file).expect("the crash image");
    // More than the file holds: the transaction must grow the file, and dies there.
    let bytes = before.len() + before.len() / 4 + 8 * page_size;
    let mut args = go_args(page_size, false);
    args.extend([
        "--seed".into(),
        seed.to_string(),
        "--bytes".into(),
        bytes.to_string(),
    ]);
    if let Some(limit) = limit {
        args.extend(["--limit".into(), limit.to_string()]);
    }
    if (seed / 2).is_multiple_of(2) {
        // Small values: full leaves and few branches, a tree that walks as soundly as the
        // one it overwrote (only the digest tells); else bigger ones, whose branches and
        // page runs break the walk of the overwritten tree too.
        args.push("--small".into());
    }
    if image.no_freelist_sync {
        // Else Go's open would commit a freelist page first: a meta of Go's.
        args.push("--no-freelist-sync".into());
    }
    let died = go.run("die-writing", file, &args);
    if opened_not(&died) {
        return Err((true, format!("Go's writer: {}", died.describe())));
    }
    if !died.ok() || !died.stdout.starts_with(b"died: ") {
        let what = format!("Go's writer did not die as planned: {}", died.describe());
        return Err((false, what));
    }
    let after = std::fs::read(file).expect("the file after Go");
    let metas = 2 * page_size;
    if after.len() != before.len() || before[..metas] != after[..metas] {
        let what = "Go's dead transaction changed a meta page or the file's length";
        return Err((false, what.into()));
    }
    let pages = before
        .chunks(page_size)
        .zip(after.chunks(page_size))
        .filter(|(a, b)| a != b)
        .count();
    Ok(pages)
}
