//! Power loss with the lock file torn or missing (issue 50): cells of the power-loss matrix in
//! which, beside each image a power loss leaves of the database file, the side lock file
//! `<path>-lock` that holds the reader table is missing, cut short, full of garbage, or a
//! stale copy of a live one (a writer's pid that holds no lock, slots of readers that are
//! gone, the published meta of another file). The lock file is not durable state, so a power
//! loss may leave any of these.
//!
//! Each image is written to a real file and reopened read-write: the database must open at a
//! state the power loss allows (as in [`crate::power`]), the writer must rebuild the table (no
//! slot left, no stale record read), and a reader process (`rbolt-crash-child read-beside`,
//! one per seed, attaching and detaching on request) must attach beside it, read the writer's
//! state, and then the state of the writer's next commit.

use crate::model::{Tree, read_db};
use crate::parallel::run_units;
use crate::power::{Mode, Reference, crash_run, is_crash_point, panic_message, reference};
use crate::summary::{Failures, Summary};
use crate::verdict::{Acked, Failure, Reopens, Verdict};
use crate::workload::{commit_step_with, page_size_of};
use rbolt::storage::{
    CrashProfile, FileOptions, FileStorage, LOCK_FILE_LEN, LockMode, Storage, lock_file_path,
};
use rbolt::{Db, Options};
use rbolt_fixtures::rng::Rng;
use std::io::{BufRead, BufReader, Write};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::sync::Arc;

/// What the power loss left of the lock file: one cell each.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LockDamage {
    /// No lock file.
    Missing,
    /// A prefix of a live lock file, from empty to one byte short.
    Truncated,
    /// Random bytes, the lock file's length; half the time behind a valid header's first word.
    Garbage,
    /// A whole copy of another writer's live lock file: its pid, its published meta, and
    /// slots naming transactions, none of whose locks anyone holds.
    Stale,
}

impl LockDamage {
    /// Every cell.
    pub const ALL: [LockDamage; 4] = [
        LockDamage::Missing,
        LockDamage::Truncated,
        LockDamage::Garbage,
        LockDamage::Stale,
    ];

    /// The name of its summary line.
    pub fn suite_name(self) -> &'static str {
        match self {
            LockDamage::Missing => "power-loss[lock-missing]",
            LockDamage::Truncated => "power-loss[lock-truncated]",
            LockDamage::Garbage => "power-loss[lock-garbage]",
            LockDamage::Stale => "power-loss[lock-stale]",
        }
    }

    /// Leaves the lock file at `lock` as this damage says; `live` is a live lock file's copy.
    fn apply(self, lock: &Path, live: &[u8], rng: &mut Rng) -> std::io::Result<()> {
        let bytes = match self {
            LockDamage::Missing => return Ok(()),
            LockDamage::Truncated => live[..rng.index(live.len())].to_vec(),
            LockDamage::Garbage => {
                let mut bytes = rng.bytes(LOCK_FILE_LEN);
                if rng.coin() {
                    bytes[..8].copy_from_slice(&live[..8]);
                }
                bytes
            }
            LockDamage::Stale => live.to_vec(),
        };
        std::fs::write(lock, bytes)
    }
}

/// The commit modes the cells' seeds take in turn.
const MODES: [Mode; 4] = [
    Mode::Mixed,
    Mode::AutoShrink,
    Mode::Vacuum,
    Mode::OneSyncMixed,
];

/// How big a run of one cell is.
#[derive(Clone, Debug)]
pub struct LockConfig {
    /// The cell.
    pub damage: LockDamage,
    /// Seeds `first_seed..first_seed + seeds`; seed `s` commits as `MODES[s % 4]` says
    /// (mixed, auto-shrink, vacuum steps, one-sync mixed) with the options of
    /// [`crate::power::variant`].
    pub seeds: u64,
    /// The first seed.
    pub first_seed: u64,
    /// Workload steps (commits) per seed.
    pub steps: u64,
    /// A directory for the files (one subdirectory per seed).
    pub dir: PathBuf,
    /// The child binary (`rbolt-crash-child`), run as the reader process.
    pub child: PathBuf,
    /// Worker threads.
    pub threads: usize,
}

crate::report! {
    /// What a run of one cell found.
    pub struct LockReport {
        /// Seeds run.
        pub seeds: u64,
        /// Crash points crashed at, one power-loss image each.
        pub crash_points: u64,
        /// Images reopened.
        pub images: u64,
        /// Images that reopened at the acknowledged state.
        pub at_acked: u64,
        /// Images that reopened at the in-flight commit's state.
        pub at_in_flight: u64,
        /// Images that reopened at an older acknowledged state (commits without syncs lost).
        pub at_unsynced: u64,
        /// Images of a creation whose write came back as garbage, refused (the power-loss
        /// suite's one allowed class).
        pub init_garbage_refused: u64,
        /// Reopened images beside whose writer a reader attached and read both states.
        pub readers_attached: u64,
        /// Images that did not reopen as they must.
        pub reopens: Reopens,
        /// Panics anywhere in reopening, checking or reading.
        pub panics: u64,
        /// Descriptions of the failures.
        pub failures: Failures,
    }
}

impl LockReport {
    /// The cell's summary line.
    pub fn summary(&self, damage: LockDamage) -> Summary {
        self.fields(Summary::new(damage.suite_name()))
    }

    /// Prints the reason for the allowed class, when it occurred (after the summary line).
    pub fn print_allowed(&self) {
        if self.init_garbage_refused > 0 {
            eprintln!(
                "power-loss[lock]: allowed init_garbage_refused={}: {}",
                self.init_garbage_refused,
                crate::power::INIT_GARBAGE_REASON
            );
        }
    }

    /// Whether every image reopened as it must and every reader attached.
    pub fn is_clean(&self) -> bool {
        self.reopens.is_clean() && self.panics == 0 && self.failures.is_empty()
    }
}

/// Runs one cell.
pub fn run(config: &LockConfig) -> LockReport {
    run_units(config.seeds, config.threads, |i| {
        run_seed(config.first_seed + i, config)
    })
}

/// Every crash point of seed `seed`, one random power-loss image each.
fn run_seed(seed: u64, config: &LockConfig) -> LockReport {
    let mut report = LockReport {
        seeds: 1,
        ..LockReport::default()
    };
    let mode = MODES[(seed % MODES.len() as u64) as usize];
    let dir = config.dir.join(format!("seed-{seed}"));
    let prepared = std::fs::create_dir_all(&dir)
        .map_err(|e| e.to_string())
        .and_then(|()| reference(mode, seed, config.steps))
        .and_then(|reference| {
            let live = live_lock_file(&dir.join("live"), &reference.options)?;
            let reader = ReaderProcess::spawn(&config.child)?;
            Ok((reference, live, reader))
        });
    let (reference, live, mut reader) = match prepared {
        Ok(prepared) => prepared,
        Err(error) => {
            report.failures.push(format!("seed {seed}: {error}"));
            return report;
        }
    };
    let mut rng = Rng::derive(seed, 0x10C4);
    for (op, kind) in reference.log.iter().enumerate() {
        if !is_crash_point(*kind) {
            continue;
        }
        report.crash_points += 1;
        let (sim, acked) = match crash_run(&reference, op as u64) {
            Ok(found) => found,
            Err(error) => {
                report
                    .failures
                    .push(format!("seed {seed} op {op}: {error}"));
                continue;
            }
        };
        let profile = *rng.pick(&CrashProfile::ALL).expect("not empty");
        let image_seed = rng.next_u64();
        let what = format!(
            "seed {seed} ({} {}) crash at op {op} ({kind:?}), {profile:?} image {image_seed:#x}, \
             lock file {:?}",
            mode.name(),
            reference.name,
            config.damage
        );
        let image = sim.crash_image(profile, image_seed);
        let image = Image {
            reference: &reference,
            bytes: image,
            acked,
            dir: &dir,
            live: &live,
            reader: &mut reader,
        };
        image.check(config.damage, &mut rng, &what, &mut report);
    }
    let _ = std::fs::remove_dir_all(&dir);
    report
}

/// A copy of a live lock file: a writer of a database in `dir` with the page size of
/// `options`, and two slots of its table in transactions of different commits.
fn live_lock_file(dir: &Path, options: &Options) -> Result<Vec<u8>, String> {
    std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
    let path = dir.join("db");
    let commit = |db: &Db, n: u32| {
        db.update(|tx| {
            let mut b = tx.create_bucket_if_not_exists("stale")?;
            for i in 0..n {
                b.put(i.to_be_bytes(), [7u8; 100])?;
            }
            Ok::<_, rbolt::Error>(())
        })
    };
    let copy = (|| -> Result<Vec<u8>, String> {
        let file = FileOptions::new().readers_beside_writer(true);
        let storage = Arc::new(FileStorage::open(&path, file).map_err(|e| e.to_string())?);
        let db = Db::open_storage(storage.clone(), options.clone()).map_err(|e| e.to_string())?;
        let table = storage.reader_table().ok_or("no reader table")?;
        let mut slots = Vec::new();
        for (handle, keys) in [(1, 50), (2, 200)] {
            commit(&db, keys).map_err(|e| e.to_string())?;
            let slot = table.claim_slot(handle).map_err(|e| e.to_string())?;
            let txid = db.begin_read().map_err(|e| e.to_string())?.id().0;
            slot.begin(txid, db.file_len().map_err(|e| e.to_string())?);
            slots.push(slot);
        }
        std::fs::read(lock_file_path(&path)).map_err(|e| e.to_string())
    })();
    let _ = std::fs::remove_dir_all(dir);
    match copy {
        Ok(bytes) if bytes.len() == LOCK_FILE_LEN => Ok(bytes),
        Ok(bytes) => Err(format!("a live lock file of {} bytes", bytes.len())),
        Err(error) => Err(format!("a live lock file: {error}")),
    }
}

/// The reader process: `rbolt-crash-child read-beside`, which attaches to the database a
/// line names and reads it on request (see [`child_main`]).
struct ReaderProcess {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
}

impl ReaderProcess {
    fn spawn(program: &Path) -> Result<ReaderProcess, String> {
        let mut child = Command::new(program)
            .arg("read-beside")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .map_err(|e| format!("the reader process: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok(ReaderProcess {
            child,
            stdin,
            stdout,
        })
    }

    /// Sends an order and returns the answer line.
    fn ask(&mut self, order: &str) -> Result<String, String> {
        writeln!(self.stdin, "{order}").map_err(|e| format!("to the reader process: {e}"))?;
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err("the reader process ended".into()),
            Ok(_) => Ok(line.trim_end().to_string()),
            Err(error) => Err(format!("from the reader process: {error}")),
        }
    }
}

impl Drop for ReaderProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The reader process's side (`rbolt-crash-child read-beside`): on `open PATH` it checks the
/// writer's table (it attaches: its header is valid; no slot names a transaction), opens the
/// database read-only beside the writer and answers `read DIGEST` (the content's
/// [`digest`](crate::model::digest)); on `read`, a new transaction's; on `close` it closes
/// and answers `closed`. A failure is answered `error ...`.
pub fn child_main(args: &[String]) -> Result<(), String> {
    if !args.is_empty() {
        return Err("usage: rbolt-crash-child read-beside".into());
    }
    let mut db = None;
    let mut out = std::io::stdout().lock();
    for line in std::io::stdin().lock().lines() {
        let line = line.map_err(|e| e.to_string())?;
        let answer = match (line.split_once(' '), line.as_str()) {
            (Some(("open", path)), _) => match table_rebuilt(Path::new(path)) {
                Err(error) => format!("error: {error}"),
                Ok(()) => match Db::open_with(path, Options::default().read_only(true)) {
                    Ok(opened) if opened.reads_beside_writer() => read_digest(db.insert(opened)),
                    Ok(_) => "error: the open did not read beside a writer".into(),
                    Err(error) => format!("error at the open: {error}"),
                },
            },
            (_, "read") => db.as_ref().map_or("error: not open".into(), read_digest),
            (_, "close") => {
                db = None;
                "closed".into()
            }
            _ => format!("error: no such order: {line}"),
        };
        writeln!(out, "{answer}").map_err(|e| e.to_string())?;
        out.flush().map_err(|e| e.to_string())?;
    }
    Ok(())
}

/// Whether the writer's table at `path` can be attached to and no slot names a transaction.
fn table_rebuilt(path: &Path) -> Result<(), String> {
    // No wait: a reader that cannot attach must not wait for the writer to close.
    let options = FileOptions::new()
        .read_only(true)
        .readers_beside_writer(true)
        .lock_timeout(Some(std::time::Duration::ZERO));
    let storage = FileStorage::open(path, options).map_err(|e| e.to_string())?;
    if storage.lock_mode() != LockMode::BesideWriter {
        return Err(format!("no table to attach to: {}", storage.lock_mode()));
    }
    let table = storage.reader_table().ok_or("no reader table")?;
    let mut slots = Vec::new();
    // Below 0 nothing is checked or cleared: every slot naming a transaction is listed.
    table
        .live_readers(&mut slots, 0)
        .map_err(|e| e.to_string())?;
    match slots.is_empty() {
        true => Ok(()),
        false => Err(format!("slots left from before the rebuild: {slots:?}")),
    }
}

fn read_digest(db: &Db) -> String {
    match read_db(db) {
        Ok(tree) => format!("read {:#x}", crate::model::digest(&tree)),
        Err(error) => format!("error reading: {error}"),
    }
}

/// One power-loss image of a seed, and what it is judged with.
struct Image<'a> {
    reference: &'a Reference,
    bytes: Vec<u8>,
    acked: Acked,
    dir: &'a Path,
    live: &'a [u8],
    reader: &'a mut ReaderProcess,
}

impl Image<'_> {
    /// Writes the image and the damaged lock file, reopens, judges, and attaches a reader.
    fn check(self, damage: LockDamage, rng: &mut Rng, what: &str, report: &mut LockReport) {
        report.images += 1;
        let page_size = page_size_of(&self.reference.options);
        let garbage = !crate::power::is_torn_creation(&self.bytes, page_size);
        let path = self.dir.join("db");
        let lock = lock_file_path(&path);
        let _ = std::fs::remove_file(&lock);
        let written =
            std::fs::write(&path, &self.bytes).and_then(|()| damage.apply(&lock, self.live, rng));
        if let Err(error) = written {
            report
                .failures
                .push(format!("{what}: writing the files: {error}"));
            return;
        }
        let (reference, acked, reader) = (self.reference, self.acked, self.reader);
        let outcome = catch_unwind(AssertUnwindSafe(|| {
            let db = Db::open_with(&path, reference.options.clone());
            let verdict = match acked.judge(&reference.models, db.as_ref()) {
                Verdict::Failed(Failure::InitError(_)) if garbage => Verdict::InitGarbage,
                verdict => verdict,
            };
            let beside = match (&db, acked.recovered(&verdict)) {
                (Ok(db), Some(step)) => {
                    let found = reader_beside(reference, &path, db, step, reader);
                    // Detached before the writer closes, whatever happened.
                    let closed = reader.ask("close");
                    Some(found.and(closed.and_then(|answer| match answer.as_str() {
                        "closed" => Ok(()),
                        _ => Err(format!("the reader's close: {answer}")),
                    })))
                }
                _ => None,
            };
            (verdict, beside)
        }));
        let (verdict, beside) = match outcome {
            Ok(found) => found,
            Err(panic) => {
                report.panics += 1;
                let message = panic_message(&panic);
                report.failures.push(format!("{what}: panic: {message}"));
                return;
            }
        };
        match verdict {
            Verdict::Acked => report.at_acked += 1,
            Verdict::InFlight => report.at_in_flight += 1,
            Verdict::Unsynced(_) => report.at_unsynced += 1,
            Verdict::InitGarbage => report.init_garbage_refused += 1,
            Verdict::Failed(failure) => report.reopens.record(failure, what, &mut report.failures),
        }
        match beside {
            Some(Ok(())) => report.readers_attached += 1,
            Some(Err(error)) => report.failures.push(format!("{what}: {error}")),
            None => {}
        }
    }
}

/// Beside `db`, the writer reopened at step `step`: no slot is held, the reader process finds
/// the table rebuilt (a valid header, no slot naming a transaction), attaches, is listed, and
/// reads the writer's state, and, after the writer commits the next step, that step's state.
fn reader_beside(
    reference: &Reference,
    path: &Path,
    db: &Db,
    step: u64,
    reader: &mut ReaderProcess,
) -> Result<(), String> {
    if !db.reader_processes().map_err(|e| e.to_string())?.is_empty() {
        return Err("a slot is held after the rebuild".into());
    }
    let expect = |answer: String, model: &Tree, when: &str| -> Result<(), String> {
        let digest = format!("read {:#x}", crate::model::digest(model));
        match answer == digest {
            true => Ok(()),
            false => Err(format!("the reader process {when}: {answer}, not {digest}")),
        }
    };
    let answer = reader.ask(&format!("open {}", path.display()))?;
    expect(
        answer,
        &reference.models[step as usize],
        "at the reopened state",
    )?;
    let slots = db.reader_processes().map_err(|e| e.to_string())?;
    if slots.len() != 1 || slots[0].pid != reader.child.id() {
        return Err(format!("the writer lists {slots:?}"));
    }
    if let Some(ops) = reference.ops.get(step as usize) {
        commit_step_with(db, ops, None).map_err(|e| format!("the next commit: {e}"))?;
        let answer = reader.ask("read")?;
        expect(
            answer,
            &reference.models[step as usize + 1],
            "after the next commit",
        )?;
    }
    Ok(())
}
