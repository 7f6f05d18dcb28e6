//! Deterministic interleavings: two threads run short scripts of commits (with and without
//! syncs), `Db::sync`s, vacuum steps and reader ends on one database, and the schedule is
//! explored systematically. Every storage call of a scripted thread passes two pause points
//! (before and after it); for each point `k` of the first thread, a run pauses that thread at
//! `k`, lets the second thread run its whole script (or until it blocks on the writer), then
//! lets the first go on. At every pause point of every run the suite takes the images a power
//! loss could leave and the file a crash of the process would leave, and judges each by its
//! content: after a power loss, the last durable state or a later committed one (or the one in
//! flight); after a crash of the process, the last acknowledged one or the one in flight.
//!
//! This is how races show that a single-threaded suite cannot see: before issue 21's fix, a
//! `Db::sync` paused after its fdatasync let a commit without syncs land before it cleared the
//! "unsynced" flag, and the next durable commit then skipped the sync that protected the last
//! durable state; this suite's schedules find it.

use crate::parallel::run_units;
use crate::power::panic_message;
use crate::summary::{Failures, Summary};
use rbolt::storage::{BootId, Claim, CrashProfile, Mapping, SimFile, Storage};
use rbolt::{Db, Durability, FreelistKind, Options};
use rbolt_fixtures::rng::Rng;
use std::cell::Cell;
use std::collections::BTreeMap;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::Path;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The bucket every script writes.
const BUCKET: &[u8] = b"b";
/// Keys the database holds before the scripts run (durably): deletes shrink the tree.
const INITIAL_KEYS: u32 = 400;
/// Keys one script commit puts.
const PUTS_PER_COMMIT: u32 = 40;
/// How long the second thread may make no progress before it counts as blocked (on the
/// writer the paused first thread holds). Only coverage depends on it, never a verdict: a
/// thread released early is just another valid schedule.
const STALL: Duration = Duration::from_millis(40);
/// Images a power loss could leave, taken at each pause point (one per random profile).
const PROFILES: [CrashProfile; 3] = [
    CrashProfile::Random,
    CrashProfile::Torn,
    CrashProfile::Garbage,
];

/// One call of a script.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// A commit of `PUTS_PER_COMMIT` new keys, with or without syncs.
    Put { none: bool },
    /// A commit that deletes a quarter of the initial keys (the tree shrinks, pages are freed).
    Delete { none: bool, quarter: u8 },
    /// `Db::sync`.
    Sync,
    /// `Db::vacuum_step` of a few pages.
    VacuumStep,
    /// A read transaction that reads a key and ends (a reader's end tries a waiting truncation).
    Read,
}

/// How big a run is.
#[derive(Clone, Debug)]
pub struct InterleaveConfig {
    /// Seeds `first_seed..first_seed + seeds`; seed 0 is the fixed schedule of issue 21's
    /// defect 2, the others pick scripts and options at random.
    pub seeds: u64,
    /// The first seed.
    pub first_seed: u64,
    /// Actions per script.
    pub actions: usize,
    /// Worker threads (each runs its seeds' schedules one after another).
    pub threads: usize,
}

crate::report! {
    /// What a run found.
    pub struct InterleaveReport {
        /// Seeds run.
        pub seeds: u64,
        /// Schedules run (one per pause point of the first thread).
        pub schedules: u64,
        /// Schedules in which the second thread blocked while the first was paused.
        pub blocked: u64,
        /// Power-loss images judged.
        pub images: u64,
        /// Files a crash of the process would leave, judged.
        pub process_images: u64,
        /// Of those, files where the crash stopped a write that may be a copy into the mapping
        /// part-way (a kill can stop a copy anywhere).
        pub torn_copy_images: u64,
        /// Images that held an acknowledged state older than the last (commits without syncs
        /// lost to the power loss, as `Durability::None` allows).
        pub at_unsynced: u64,
        /// Images that did not open, did not check clean, or held a state they must not.
        pub bad_images: u64,
        /// Panics anywhere.
        pub panics: u64,
        /// Descriptions of the failures.
        pub failures: Failures,
    }
}

impl InterleaveReport {
    /// The suite's summary line.
    pub fn summary(&self) -> Summary {
        self.fields(Summary::new("interleave"))
    }

    /// Whether every image was as it must be.
    pub fn is_clean(&self) -> bool {
        self.bad_images == 0 && self.panics == 0 && self.failures.is_empty()
    }
}

/// Runs the suite.
pub fn run(config: &InterleaveConfig) -> InterleaveReport {
    run_units(config.seeds, config.threads, |i| {
        run_seed(config.first_seed + i, config)
    })
}

/// The scripts and options of a seed.
struct Plan {
    options: Options,
    scripts: [Vec<Action>; 2],
}

fn plan(seed: u64, actions: usize) -> Plan {
    if seed == 0 {
        // Issue 21, defect 2: a sync paused after its fdatasync, a commit without syncs on
        // the other thread meanwhile, then a durable commit that reuses what it freed.
        return Plan {
            options: Options::default(),
            scripts: [
                vec![
                    Action::Put { none: true },
                    Action::Sync,
                    Action::Delete {
                        none: false,
                        quarter: 0,
                    },
                ],
                vec![Action::Delete {
                    none: true,
                    quarter: 1,
                }],
            ],
        };
    }
    let mut rng = Rng::derive(seed, 0x1A7E);
    let options = Options::default()
        .page_size(if rng.coin() { 512 } else { 4096 })
        .freelist(if rng.coin() {
            FreelistKind::Array
        } else {
            FreelistKind::Span
        })
        .no_freelist_sync(rng.chance(1, 3))
        .auto_shrink(rng.coin())
        // Durable commits with one sync or two (issue 51).
        .one_sync(rng.coin());
    let script = |rng: &mut Rng| -> Vec<Action> {
        (0..actions)
            .map(|_| match rng.below(10) {
                0..=2 => Action::Put { none: rng.coin() },
                3..=4 => Action::Delete {
                    none: rng.coin(),
                    quarter: rng.below(4) as u8,
                },
                5..=6 => Action::Sync,
                7 => Action::VacuumStep,
                _ => Action::Read,
            })
            .collect()
    };
    let first = script(&mut rng);
    let second = script(&mut rng);
    Plan {
        options,
        scripts: [first, second],
    }
}

/// The content of bucket `b`.
type State = BTreeMap<Vec<u8>, Vec<u8>>;

/// The initial key `i`.
fn initial_key(i: u32) -> Vec<u8> {
    format!("init{i:05}").into_bytes()
}

/// Applies commit number `commit` (its thread and action) to `state`.
fn apply(state: &mut State, thread: usize, commit: usize, action: Action) {
    match action {
        Action::Put { .. } => {
            for j in 0..PUTS_PER_COMMIT {
                let key = format!("t{thread}-c{commit:03}-{j:03}").into_bytes();
                state.insert(key, vec![b'a' + thread as u8; 60]);
            }
        }
        Action::Delete { quarter, .. } => {
            let quarter = u32::from(quarter);
            for i in (0..INITIAL_KEYS).filter(|i| i % 4 == quarter) {
                state.remove(&initial_key(i));
            }
        }
        _ => unreachable!("only puts and deletes commit content"),
    }
}

/// What the scripted threads have done, as the observer needs it.
#[derive(Default)]
struct Progress {
    /// Commits in the order they took the writer: (thread, number within its thread, action).
    log: Vec<(usize, usize, Action)>,
    /// Commits that have returned `Ok`.
    acked: usize,
    /// The longest prefix of `log` known durable.
    durable: usize,
    /// The images taken so far, with what each may hold.
    images: Vec<Image>,
    /// Of those, the images with a copy cut short.
    torn_copy_images: u64,
}

/// A file a crash could leave, and the prefixes of the commit log it may hold.
struct Image {
    sim: SimFile,
    /// Prefix lengths allowed: `min..=max`.
    min: usize,
    max: usize,
    /// Commits acknowledged when it was taken: a prefix shorter than this lost some (allowed
    /// after a power loss for commits without syncs).
    acked: usize,
    what: String,
}

/// The pause points every storage call of a scripted thread passes.
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
    /// The file, for the images.
    sim: SimFile,
    progress: Mutex<Progress>,
    /// The write a scripted thread is about to make, while it passes the point before it.
    upcoming: Mutex<Option<(u64, Vec<u8>)>>,
}

#[derive(Default)]
struct GateState {
    /// Points passed per scripted thread.
    points: [u64; 2],
    /// Pause thread 0 when it reaches this point.
    pause_at: Option<u64>,
    paused: bool,
    released: bool,
    /// Images are taken only while `observe` is set (not while the database is prepared).
    observe: bool,
}

thread_local! {
    /// The scripted thread this is (0 or 1), if any.
    static SCRIPTED: Cell<Option<usize>> = const { Cell::new(None) };
}

impl Gate {
    fn lock(&self) -> MutexGuard<'_, GateState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn progress(&self) -> MutexGuard<'_, Progress> {
        self.progress.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// A pause point of the calling thread: counted, observed, and where thread 0 pauses.
    fn point(&self, what: &str) {
        let Some(thread) = SCRIPTED.with(Cell::get) else {
            return;
        };
        let mut state = self.lock();
        let point = state.points[thread];
        state.points[thread] += 1;
        let observe = state.observe;
        self.changed.notify_all();
        if thread == 0 && state.pause_at == Some(point) {
            state.paused = true;
            self.changed.notify_all();
            drop(state);
            if observe {
                self.observe(&format!("thread 0 paused at point {point} ({what})"));
            }
            let mut state = self.lock();
            while !state.released {
                state = self
                    .changed
                    .wait(state)
                    .unwrap_or_else(PoisonError::into_inner);
            }
            return;
        }
        drop(state);
        if observe {
            self.observe(&format!("thread {thread} at point {point} ({what})"));
        }
    }

    /// Takes the images a crash now could leave, with the states each may hold.
    fn observe(&self, what: &str) {
        let mut progress = self.progress();
        // Every commit in the log has taken the writer: it may be on disk, though its thread
        // has not yet said it returned (commits run one at a time, so all but the last have).
        let (durable, acked, logged) = (progress.durable, progress.acked, progress.log.len());
        let mut images = Vec::new();
        for profile in PROFILES {
            let seed = progress.images.len() as u64;
            if let Ok(sim) = SimFile::from_image(self.sim.crash_image(profile, seed)) {
                images.push(Image {
                    sim,
                    min: durable,
                    max: logged,
                    acked,
                    what: format!("{what}: power loss, {profile:?} image {seed}"),
                });
            }
        }
        if let Ok(sim) = self.sim.after_process_crash() {
            images.push(Image {
                sim,
                min: acked,
                max: logged,
                acked,
                what: format!("{what}: crash of the process"),
            });
        }
        // A write about to run that may be a copy into the mapping: a kill can stop it after
        // any 8 bytes. Its first 8 bytes and its first half, as the file keeps them.
        let upcoming = self.upcoming.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some((offset, bytes)) = upcoming.as_ref()
            && self.sim.would_copy(*offset, bytes.len())
        {
            for cut in [8, bytes.len() / 16 * 8] {
                let cut = cut.min(bytes.len());
                let Ok(sim) = self.sim.after_process_crash() else {
                    continue;
                };
                if sim.write_all_at(&bytes[..cut], *offset).is_ok() {
                    images.push(Image {
                        sim,
                        min: acked,
                        max: logged,
                        acked,
                        what: format!("{what}: crash of the process, a copy cut at {cut}"),
                    });
                    progress.torn_copy_images += 1;
                }
            }
        }
        drop(upcoming);
        progress.images.extend(images);
    }
}

/// A [`SimFile`] whose calls pass the gate's pause points before and after they run.
#[derive(Clone)]
struct Gated {
    sim: SimFile,
    gate: Arc<Gate>,
}

impl std::fmt::Debug for Gated {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gated").field("sim", &self.sim).finish()
    }
}

impl Gated {
    fn around<T>(&self, what: &str, call: impl FnOnce(&SimFile) -> T) -> T {
        self.gate.point(what);
        let result = call(&self.sim);
        self.gate.point(what);
        result
    }

    /// As `around`, for a write of `bytes` at `offset` that may be a copy into the mapping:
    /// the images taken at the point before it include ones with the copy cut short.
    fn around_copy(
        &self,
        what: &str,
        bytes: Vec<u8>,
        offset: u64,
        call: impl FnOnce(&SimFile) -> std::io::Result<()>,
    ) -> std::io::Result<()> {
        *self
            .gate
            .upcoming
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some((offset, bytes));
        self.gate.point(what);
        *self
            .gate
            .upcoming
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = None;
        let result = call(&self.sim);
        self.gate.point(what);
        result
    }
}

impl Storage for Gated {
    fn len(&self) -> std::io::Result<u64> {
        self.sim.len()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.sim.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.around_copy("write", buf.to_vec(), offset, |sim| {
            sim.write_all_at(buf, offset)
        })
    }
    fn read_durable(&self, buf: &mut [u8], offset: u64) -> std::io::Result<bool> {
        self.sim.read_durable(buf, offset)
    }
    fn write_whole_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.around("write", |sim| sim.write_whole_at(buf, offset))
    }
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> std::io::Result<()> {
        self.around_copy("writev", bufs.concat(), offset, |sim| {
            sim.write_vectored_at(bufs, offset)
        })
    }
    fn sync_data(&self) -> std::io::Result<()> {
        self.around("fdatasync", SimFile::sync_data)
    }
    fn sync_all(&self) -> std::io::Result<()> {
        self.around("fsync", SimFile::sync_all)
    }
    fn grow(&self, len: u64) -> std::io::Result<()> {
        self.around("grow", |sim| sim.grow(len))
    }
    fn shrink(&self, len: u64) -> std::io::Result<()> {
        self.around("shrink", |sim| sim.shrink(len))
    }
    fn map(&self, len: usize) -> std::io::Result<Mapping> {
        self.sim.map(len)
    }
    fn path(&self) -> Option<&Path> {
        None
    }
    fn claim(&self) -> std::io::Result<Claim> {
        self.sim.claim()
    }
    fn boot_id(&self) -> Option<BootId> {
        self.sim.boot_id()
    }
}

/// Runs every schedule of seed `seed`.
pub fn run_seed(seed: u64, config: &InterleaveConfig) -> InterleaveReport {
    let mut report = InterleaveReport {
        seeds: 1,
        ..InterleaveReport::default()
    };
    let plan = plan(seed, config.actions);
    for pause_at in 0.. {
        report.schedules += 1;
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            run_schedule(seed, &plan, pause_at, &mut report)
        }));
        match outcome {
            Ok(Ok(true)) => {}
            Ok(Ok(false)) => break,
            Ok(Err(error)) => {
                report
                    .failures
                    .push(format!("seed {seed} pause {pause_at}: {error}"));
                break;
            }
            Err(panic) => {
                report.panics += 1;
                report.failures.push(format!(
                    "seed {seed} pause {pause_at}: panic: {}",
                    panic_message(&panic)
                ));
                break;
            }
        }
    }
    report
}

/// Runs one schedule: thread 0 paused at its point `pause_at` while thread 1 runs. Returns
/// whether thread 0 reached that point (else the schedules of this seed are done).
fn run_schedule(
    seed: u64,
    plan: &Plan,
    pause_at: u64,
    report: &mut InterleaveReport,
) -> Result<bool, String> {
    let sim = SimFile::new().map_err(|e| e.to_string())?;
    let gate = Arc::new(Gate {
        state: Mutex::new(GateState::default()),
        changed: Condvar::new(),
        sim: sim.clone(),
        progress: Mutex::new(Progress::default()),
        upcoming: Mutex::new(None),
    });
    let storage = Gated {
        sim: sim.clone(),
        gate: gate.clone(),
    };
    let db = Arc::new(
        Db::open_storage(Arc::new(storage), plan.options.clone()).map_err(|e| e.to_string())?,
    );
    // The initial keys, durable.
    db.update(|tx| {
        let mut b = tx.create_bucket(BUCKET)?;
        for i in 0..INITIAL_KEYS {
            b.put(initial_key(i), [b'i'; 60])?;
        }
        Ok(())
    })
    .map_err(|e: rbolt::Error| e.to_string())?;
    let mut initial = State::new();
    for i in 0..INITIAL_KEYS {
        initial.insert(initial_key(i), vec![b'i'; 60]);
    }
    {
        let mut state = gate.lock();
        state.pause_at = Some(pause_at);
        state.observe = true;
    }
    let first = spawn_script(&db, &gate, 0, plan.scripts[0].clone());
    // Until thread 0 pauses (or ends without reaching the point).
    {
        let mut state = gate.lock();
        while !state.paused && !first.is_finished() {
            let (next, _) = gate
                .changed
                .wait_timeout(state, Duration::from_millis(5))
                .unwrap_or_else(PoisonError::into_inner);
            state = next;
        }
        if !state.paused {
            drop(state);
            first.join().map_err(|p| panic_message(&p))??;
            drop(db);
            return Ok(false);
        }
    }
    // Thread 1 runs its script, until done or blocked.
    let second = spawn_script(&db, &gate, 1, plan.scripts[1].clone());
    let mut last = (gate.lock().points[1], Instant::now());
    while !second.is_finished() {
        std::thread::sleep(Duration::from_millis(2));
        let points = gate.lock().points[1];
        if points != last.0 {
            last = (points, Instant::now());
        } else if last.1.elapsed() > STALL {
            report.blocked += 1;
            break;
        }
    }
    gate.lock().released = true;
    gate.changed.notify_all();
    first.join().map_err(|p| panic_message(&p))??;
    second.join().map_err(|p| panic_message(&p))??;
    gate.lock().observe = false;
    // The schedule's last moment, before the handle's clean close.
    gate.observe("end of the schedule");
    drop(db);
    let progress = std::mem::take(&mut *gate.progress());
    judge(seed, pause_at, &plan.options, &initial, &progress, report);
    Ok(true)
}

/// Starts scripted thread `thread` running `script` on `db`.
fn spawn_script(
    db: &Arc<Db>,
    gate: &Arc<Gate>,
    thread: usize,
    script: Vec<Action>,
) -> std::thread::JoinHandle<Result<(), String>> {
    let db = db.clone();
    let gate = gate.clone();
    std::thread::spawn(move || {
        SCRIPTED.with(|s| s.set(Some(thread)));
        for (number, action) in script.into_iter().enumerate() {
            run_action(&db, &gate, thread, number, action)
                .map_err(|e| format!("thread {thread} action {number} {action:?}: {e}"))?;
        }
        Ok(())
    })
}

/// Runs one action, keeping `Progress` up to date.
fn run_action(
    db: &Db,
    gate: &Gate,
    thread: usize,
    number: usize,
    action: Action,
) -> rbolt::Result<()> {
    let acked_before = gate.progress().acked;
    match action {
        Action::Put { none } | Action::Delete { none, .. } => {
            let tx = db.begin_write()?;
            // The writer is held: the log's order is the commit order.
            let index = {
                let mut progress = gate.progress();
                progress.log.push((thread, number, action));
                progress.log.len()
            };
            tx.set_durability(if none {
                Durability::None
            } else if db.options().one_sync {
                Durability::OneSync
            } else {
                Durability::Immediate
            });
            let mut b = tx.bucket_mut(BUCKET)?.expect("created first");
            if let Action::Delete { quarter, .. } = action {
                for i in (0..INITIAL_KEYS).filter(|i| i % 4 == u32::from(quarter)) {
                    b.delete(initial_key(i))?;
                }
            } else {
                let mut puts = State::new();
                apply(&mut puts, thread, number, action);
                for (key, value) in &puts {
                    b.put(key, value)?;
                }
            }
            drop(b);
            tx.commit()?;
            let mut progress = gate.progress();
            progress.acked = progress.acked.max(index);
            if !none {
                progress.durable = progress.durable.max(index);
            }
        }
        Action::Sync => {
            db.sync()?;
            let mut progress = gate.progress();
            progress.durable = progress.durable.max(acked_before);
        }
        Action::VacuumStep => {
            if db.vacuum_step(4)?.committed {
                let mut progress = gate.progress();
                progress.durable = progress.durable.max(acked_before);
            }
        }
        Action::Read => {
            let tx = db.begin_read()?;
            let b = tx.bucket(BUCKET)?.expect("created first");
            b.get(initial_key(0))?;
        }
    }
    Ok(())
}

/// Judges every image of a schedule against the states its commit log allows.
fn judge(
    seed: u64,
    pause_at: u64,
    options: &Options,
    initial: &State,
    progress: &Progress,
    report: &mut InterleaveReport,
) {
    let mut states = vec![initial.clone()];
    for &(thread, number, action) in &progress.log {
        let mut next = states.last().expect("the initial state").clone();
        apply(&mut next, thread, number, action);
        states.push(next);
    }
    report.torn_copy_images += progress.torn_copy_images;
    for image in &progress.images {
        if image.what.contains("crash of the process") {
            report.process_images += 1;
        } else {
            report.images += 1;
        }
        let found = content(&image.sim, options);
        let verdict = match &found {
            Ok(state) => (image.min..=image.max.min(states.len() - 1))
                .rev()
                .find(|&prefix| states[prefix] == *state),
            Err(_) => None,
        };
        match verdict {
            Some(prefix) => {
                if prefix < image.acked {
                    report.at_unsynced += 1;
                }
            }
            None => {
                report.bad_images += 1;
                let detail = match found {
                    Ok(state) => format!(
                        "holds {} keys: {}, not one of the states {}..={} of the commits {:?}",
                        state.len(),
                        match states.iter().position(|s| s == &state) {
                            Some(prefix) => format!("the state after {prefix} commits"),
                            None => "no committed state".to_string(),
                        },
                        image.min,
                        image.max,
                        progress.log
                    ),
                    Err(error) => error,
                };
                report.failures.push(format!(
                    "seed {seed} pause {pause_at}, {}: {detail}",
                    image.what
                ));
            }
        }
    }
}

/// Opens `sim` and reads bucket `b`, after a clean check.
fn content(sim: &SimFile, options: &Options) -> Result<State, String> {
    let db = Db::open_storage(Arc::new(sim.clone()), options.clone())
        .map_err(|e| format!("open: {e}"))?;
    db.view(|tx| {
        let errors = tx.check();
        if !errors.is_empty() {
            return Ok(Err(format!("check: {errors:?}")));
        }
        let mut state = State::new();
        if let Some(b) = tx.bucket(BUCKET)? {
            for entry in b.iter() {
                let entry = entry?;
                if let Some(value) = entry.value() {
                    state.insert(entry.key().to_vec(), value.to_vec());
                }
            }
        }
        Ok(Ok(state))
    })
    .map_err(|e: rbolt::Error| format!("read: {e}"))?
}
