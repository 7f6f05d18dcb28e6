//! The kill loop of readers in other processes (issue 50): a writer process commits round
//! after round (vacuuming after every large delete), reader processes beside it check every
//! snapshot they read against the model, and the test SIGKILLs one of them at random moments,
//! `RBOLT_PROCESS_KILLS` times, starting a new one after each kill (a new writer after a
//! writer's). It ends with no slot left behind, no process dead of anything but our SIGKILL
//! (no SIGBUS), no wrong read, a clean `check`, and no acknowledged round lost.
//!
//! The schedule (which process dies, after how long) comes from `RBOLT_PROCESS_KILLS_SEED`,
//! or the clock, printed; a seed replays the schedule, not the processes' timing.

use super::processes::{check_snapshot, child_command, read_only, write_round};
use rbolt::storage::{FileOptions, FileStorage, SlotInfo, Storage};
use rbolt::{Db, Error, Options};
use rbolt_testkit::rng::Rng;
use rbolt_testkit::tier;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Reader processes alive at once.
const READERS: usize = 3;

/// The longest pause between two kills; each pause is drawn below it.
const PAUSE_MAX_MS: u64 = 60;

/// In every period of this many rounds, round `BIG_FROM` creates bucket `big` and round
/// `BIG_UNTIL` deletes it, after which the writer vacuums: the file grows and shrinks while
/// readers hold snapshots of either size.
const BIG_PERIOD: u64 = 16;
const BIG_FROM: u64 = 5;
const BIG_UNTIL: u64 = 13;
const BIG_KEYS: u32 = 1500;
const BIG_VALUE_LEN: usize = 400;

/// How long the test waits for something a process should do soon (generous: CI's machine is
/// loaded).
const PATIENCE: Duration = Duration::from_secs(60);

/// SIGKILL's number (Linux).
const SIGKILL: i32 = 9;

fn big_value(i: u32) -> Vec<u8> {
    let mut value = format!("big {i} ").into_bytes();
    value.resize(BIG_VALUE_LEN, b'-');
    value
}

fn big_in(round: u64) -> bool {
    (BIG_FROM..BIG_UNTIL).contains(&(round % BIG_PERIOD))
}

/// Commits round `round` (durably): the model's keys, and `big` made or deleted.
fn commit(db: &Db, round: u64) -> rbolt::Result<()> {
    db.update(|tx| {
        write_round(tx, round)?;
        match round % BIG_PERIOD {
            BIG_FROM => {
                let mut big = tx.create_bucket("big")?;
                for i in 0..BIG_KEYS {
                    big.put(i.to_be_bytes(), big_value(i))?;
                }
            }
            BIG_UNTIL => tx.delete_bucket("big")?,
            _ => {}
        }
        Ok(())
    })
}

/// The round a snapshot holds, after checking all of it against the model of that round.
fn check_whole(tx: &rbolt::ReadTx<'_>) -> Result<u64, String> {
    let round = check_snapshot(tx)?;
    let big = tx.bucket("big").map_err(|e| e.to_string())?;
    let Some(big) = big else {
        return match big_in(round) {
            true => Err(format!("txid {}: round {round} has no big", tx.id().0)),
            false => Ok(round),
        };
    };
    if !big_in(round) {
        return Err(format!("txid {}: round {round} has a big", tx.id().0));
    }
    let mut n = 0u32;
    for entry in big.iter() {
        let entry = entry.map_err(|e| e.to_string())?;
        if entry.key() != n.to_be_bytes() || entry.value() != Some(&big_value(n)[..]) {
            return Err(format!("txid {}: big's entry {n} is wrong", tx.id().0));
        }
        n += 1;
    }
    match n == BIG_KEYS {
        true => Ok(round),
        false => Err(format!("txid {}: big holds {n} keys", tx.id().0)),
    }
}

/// A line to the parent.
fn say(line: &str) {
    println!("CHILD {line}");
    std::io::stdout().flush().unwrap();
}

/// The kill loop's children (run by `processes::child_process`); they return only to report
/// what went wrong.
pub(super) fn child(what: &str, path: &Path) -> String {
    match what {
        "kills-writer" => child_writer(path),
        "kills-reader" => {
            let seed = tier::number("RBOLT_PROCESS_SEED").expect("a reader's seed");
            child_reader(path, seed)
        }
        other => panic!("no such child: {other}"),
    }
}

/// The writer: opens (waiting while a reader that found no writer holds the shared lock),
/// says which round it found, then commits the next rounds, acknowledging each once it is
/// durable, and says when the file got shorter (a cut that waited for no reader, or for
/// readers that have gone).
fn child_writer(path: &Path) -> String {
    let options = Options::default()
        .auto_shrink(true)
        .lock_timeout(Some(PATIENCE));
    let db = match Db::open_with(path, options) {
        Ok(db) => db,
        Err(error) => return format!("error at open: {error}"),
    };
    let found = db
        .begin_read()
        .map_err(|e| e.to_string())
        .and_then(|tx| check_whole(&tx));
    let mut round = match found {
        Ok(round) => round,
        Err(error) => return format!("wrong at open: {error}"),
    };
    say(&format!("opened {round}"));
    let mut len = db.file_len().unwrap_or(0);
    loop {
        round += 1;
        if let Err(error) = commit(&db, round) {
            return format!("error in round {round}: {error}");
        }
        say(&format!("acked {round}"));
        let len_before = std::mem::replace(&mut len, db.file_len().unwrap_or(0));
        if len < len_before {
            say(&format!("shrunk {len}"));
        }
        if round % BIG_PERIOD == BIG_UNTIL {
            let vacuum = db.vacuum(rbolt::VacuumOptions::default(), |_| {
                std::ops::ControlFlow::Continue(())
            });
            if let Err(error) = vacuum {
                return format!("error in the vacuum after round {round}: {error}");
            }
        }
    }
}

/// A reader: attaches beside the writer, then reads snapshot after snapshot, each checked
/// whole; one in eight is held a few milliseconds (while the writer commits, vacuums, dies
/// or opens anew) and checked again.
fn child_reader(path: &Path, seed: u64) -> String {
    let mut rng = Rng::new(seed);
    let db = loop {
        match Db::open_with(path, read_only()) {
            Ok(db) if db.reads_beside_writer() => break db,
            // No writer: the shared lock this open holds would keep the next one out.
            Ok(db) => drop(db),
            // A writer opening, not yet attachable.
            Err(Error::Locked { .. }) => {}
            Err(error) => return format!("error at open: {error}"),
        }
        std::thread::sleep(Duration::from_millis(rng.range(10, 50)));
    };
    let mut snapshots = 0u64;
    let mut said = Instant::now();
    loop {
        let tx = match db.begin_read() {
            Ok(tx) => tx,
            Err(error) => return format!("error at a begin: {error}"),
        };
        let round = match check_whole(&tx) {
            Ok(round) => round,
            Err(error) => return format!("wrong {error}"),
        };
        if rng.chance(1, 4) {
            std::thread::sleep(Duration::from_millis(rng.below(40)));
            match check_whole(&tx) {
                Ok(again) if again == round => {}
                Ok(again) => return format!("wrong: a held round {round} became {again}"),
                Err(error) => return format!("wrong in a held snapshot: {error}"),
            }
        }
        snapshots += 1;
        if snapshots == 1 || said.elapsed() > Duration::from_millis(100) {
            say(&format!("read {snapshots} {round}"));
            said = Instant::now();
        }
    }
}

/// What a child said.
#[derive(Debug, Default)]
struct Log {
    /// The round the writer found at its open.
    opened: Option<u64>,
    /// The writer's last acknowledged round.
    acked: Option<u64>,
    /// The snapshots a reader has checked (its last report).
    snapshots: u64,
    /// How many times the writer found its file shorter after a commit.
    shrinks: u64,
    /// Anything else: what went wrong.
    other: Vec<String>,
}

/// A child of the kill loop, its stdout drained into its log by a thread. Dropping it kills
/// the process, so a failing test leaves none behind.
struct Watched {
    child: Child,
    log: Arc<Mutex<Log>>,
    drain: Option<JoinHandle<()>>,
}

impl Watched {
    fn spawn(what: &str, path: &Path, seed: u64) -> Watched {
        let mut child = child_command(what, path)
            .env("RBOLT_PROCESS_SEED", seed.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let log = Arc::new(Mutex::new(Log::default()));
        let drain = {
            let log = Arc::clone(&log);
            std::thread::spawn(move || {
                for line in stdout.lines() {
                    let Ok(line) = line else { break };
                    // libtest's "test ... " may come first on the line.
                    if let Some(at) = line.find("CHILD ") {
                        log.lock()
                            .unwrap_or_else(PoisonError::into_inner)
                            .take(&line[at + "CHILD ".len()..]);
                    }
                }
            })
        };
        Watched {
            child,
            log,
            drain: Some(drain),
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn log<T>(&self, f: impl FnOnce(&Log) -> T) -> T {
        f(&self.log.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Waits until `ready` holds of the log, or the process ends, or `PATIENCE` passes.
    fn wait_for(&mut self, what: &str, ready: impl Fn(&Log) -> bool) -> Result<(), String> {
        let start = Instant::now();
        while !self.log(&ready) {
            if let Some(status) = self.child.try_wait().unwrap() {
                let said = self.log(|log| log.other.clone());
                return Err(format!("waiting for {what}, it ended ({status}): {said:?}"));
            }
            if start.elapsed() > PATIENCE {
                return Err(format!("no {what} within {PATIENCE:?}"));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        Ok(())
    }

    /// SIGKILLs it and returns its whole log, or what went wrong: it had died of something
    /// else first, or said something other than its progress.
    fn kill(mut self) -> Result<Log, String> {
        let _ = self.child.kill();
        let status = self.child.wait().unwrap();
        self.drain.take().unwrap().join().unwrap();
        let log = std::mem::take(&mut *self.log.lock().unwrap_or_else(PoisonError::into_inner));
        if status.signal() != Some(SIGKILL) {
            return Err(format!("died before the kill ({status}): {:?}", log.other));
        }
        match log.other.is_empty() {
            true => Ok(log),
            false => Err(format!("said {:?}", log.other)),
        }
    }
}

impl Log {
    fn take(&mut self, line: &str) {
        let (word, rest) = line.split_once(' ').unwrap_or((line, ""));
        let number = rest.split(' ').next().and_then(|w| w.parse::<u64>().ok());
        match (word, number) {
            ("opened", Some(round)) => self.opened = Some(round),
            ("acked", Some(round)) => self.acked = Some(round),
            ("read", Some(snapshots)) => self.snapshots = snapshots,
            ("shrunk", Some(_)) => self.shrinks += 1,
            _ => self.other.push(line.to_string()),
        }
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The loop's state: the processes alive, what the writers acknowledged, what went wrong.
struct Run<'a> {
    path: &'a Path,
    rng: Rng,
    writer: Option<Watched>,
    readers: Vec<Watched>,
    /// The last round a writer acknowledged: every later open must find it.
    acked: u64,
    /// The last round a writer acknowledged or found at its open: an open finds it or the
    /// one after (committed, not yet acknowledged), never more.
    seen: u64,
    writer_kills: u64,
    reader_kills: u64,
    writer_opens: u64,
    shrinks: u64,
    snapshots: u64,
    failures: Vec<String>,
}

impl Run<'_> {
    fn start(path: &Path, seed: u64) -> Run<'_> {
        let mut run = Run {
            path,
            rng: Rng::new(seed),
            writer: None,
            readers: Vec::new(),
            acked: 0,
            seen: 0,
            writer_kills: 0,
            reader_kills: 0,
            writer_opens: 0,
            shrinks: 0,
            snapshots: 0,
            failures: Vec::new(),
        };
        run.writer = Some(Watched::spawn("kills-writer", path, 0));
        for _ in 0..READERS {
            let reader = run.spawn_reader();
            run.readers.push(reader);
        }
        run
    }

    fn spawn_reader(&mut self) -> Watched {
        Watched::spawn("kills-reader", self.path, self.rng.next_u64())
    }

    /// A pause, then one SIGKILL: the writer's one time in three, else a reader's; and a new
    /// process in its place.
    fn step(&mut self) {
        std::thread::sleep(Duration::from_millis(self.rng.below(PAUSE_MAX_MS)));
        if self.rng.chance(1, 3) {
            let writer = self.writer.take().expect("a writer runs");
            self.writer_killed(writer.kill());
            self.writer_kills += 1;
            self.writer = Some(Watched::spawn("kills-writer", self.path, 0));
        } else {
            let index = self.rng.index(self.readers.len());
            let reader = self.readers.swap_remove(index);
            self.reader_killed(reader.kill());
            self.reader_kills += 1;
            let reader = self.spawn_reader();
            self.readers.push(reader);
        }
    }

    fn writer_killed(&mut self, log: Result<Log, String>) {
        let log = match log {
            Ok(log) => log,
            Err(error) => return self.failures.push(format!("a writer {error}")),
        };
        if let Some(opened) = log.opened {
            self.writer_opens += 1;
            if opened < self.acked || opened < self.seen || opened > self.seen + 1 {
                self.failures.push(format!(
                    "a writer opened round {opened}: {} was acknowledged, {} seen",
                    self.acked, self.seen
                ));
            }
            self.seen = self.seen.max(opened);
        }
        self.shrinks += log.shrinks;
        if let Some(acked) = log.acked {
            self.acked = self.acked.max(acked);
            self.seen = self.seen.max(acked);
        }
    }

    fn reader_killed(&mut self, log: Result<Log, String>) {
        match log {
            Ok(log) => self.snapshots += log.snapshots,
            Err(error) => self.failures.push(format!("a reader {error}")),
        }
    }

    /// Fails the test with the first failures, if any.
    fn assert_clean(&self) {
        const SHOWN: usize = 20;
        assert!(
            self.failures.is_empty(),
            "{} failures ({}), the first {SHOWN}: {:#?}",
            self.failures.len(),
            self.summary(),
            &self.failures[..self.failures.len().min(SHOWN)]
        );
    }

    fn summary(&self) -> String {
        format!(
            "{} kills ({} of writers, {} of readers), {} writer opens, {} rounds acknowledged, \
             {} shrinks, {} snapshots checked by killed readers",
            self.writer_kills + self.reader_kills,
            self.writer_kills,
            self.reader_kills,
            self.writer_opens,
            self.acked,
            self.shrinks,
            self.snapshots
        )
    }
}

/// Every slot of the table that names a transaction, live or dead, as a reader beside the
/// writer sees it; `None` when no writer is there to attach to.
fn slots_naming_a_transaction(path: &Path) -> Option<Vec<SlotInfo>> {
    let options = FileOptions::new()
        .read_only(true)
        .readers_beside_writer(true);
    let storage = FileStorage::open(path, options).unwrap();
    let table = storage.reader_table()?;
    let mut slots = Vec::new();
    // Below 0 nothing is checked or cleared: every slot with a txid is listed as it is.
    table.live_readers(&mut slots, 0).unwrap();
    Some(slots)
}

/// The end: a shrink beside the readers if the loop made none; the readers killed, then two
/// more rounds of the writer, which must clear their slots (a dead slot pins nothing); the
/// writer killed, and a fresh open finds every slot free and the last acknowledged round,
/// `check` is clean, and a new reader attaches.
fn finish(mut run: Run<'_>) {
    let mut writer = run.writer.take().unwrap();
    // The loop is about cuts of the file beside readers: when the kills came too fast for
    // any, the last writer makes one while the readers read.
    let shrunk = run.shrinks;
    writer
        .wait_for("an open and a shrink", |log| {
            log.opened.is_some() && shrunk + log.shrinks > 0
        })
        .unwrap();
    for reader in std::mem::take(&mut run.readers) {
        let log = reader.kill();
        run.reader_killed(log);
    }
    assert!(run.snapshots > 0, "{}", run.summary());
    let base = writer.log(|log| log.acked.or(log.opened).unwrap());
    writer
        .wait_for("two more rounds", |log| log.acked >= Some(base + 2))
        .unwrap();
    let left = slots_naming_a_transaction(run.path).expect("the writer is there");
    assert_eq!(
        left,
        vec![],
        "dead readers' slots were cleared by the writer"
    );
    run.writer_killed(writer.kill());
    println!("process kills: {}", run.summary());
    run.assert_clean();

    let options = FileOptions::new().readers_beside_writer(true);
    let storage = FileStorage::open(run.path, options).unwrap();
    let table = storage.reader_table().expect("the writer's table");
    let mut slots = table.slots().unwrap();
    table.live_readers(&mut slots, 0).unwrap();
    assert_eq!(slots, vec![], "every slot is free");
    drop(storage);
    let db = Db::open(run.path).unwrap();
    let round = check_whole(&db.begin_read().unwrap()).unwrap();
    assert!(
        round >= run.seen && round <= run.seen + 1,
        "the file holds round {round}: {} was acknowledged, {} seen",
        run.acked,
        run.seen
    );
    assert_eq!(db.begin_read().unwrap().check(), vec![]);
    let mut reader = Watched::spawn("kills-reader", run.path, 1);
    reader
        .wait_for("a new reader's snapshot", |log| log.snapshots > 0)
        .unwrap();
    let pids: Vec<u32> = db
        .reader_processes()
        .unwrap()
        .iter()
        .map(|slot| slot.pid)
        .collect();
    assert_eq!(pids, vec![reader.pid()]);
    reader.kill().unwrap();
}

#[test]
fn sigkills_of_reader_and_writer_processes_lose_nothing_and_leave_no_slot() {
    let kills = tier::size("RBOLT_PROCESS_KILLS", 30, 200, 2_000);
    let seed = tier::number::<u64>("RBOLT_PROCESS_KILLS_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos() as u64)
    });
    println!("process kills: seed={seed} (RBOLT_PROCESS_KILLS_SEED={seed} replays its schedule)");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(Db::open(&path).unwrap());
    let started = Instant::now();
    let mut run = Run::start(&path, seed);
    for _ in 0..kills {
        run.step();
    }
    run.assert_clean();
    if !tier::is_set("RBOLT_PROCESS_KILLS") {
        assert!(
            run.writer_kills > 0 && run.reader_kills > 0,
            "{}",
            run.summary()
        );
    }
    finish(run);
    println!("process kills: {:.1} s", started.elapsed().as_secs_f64());
}
