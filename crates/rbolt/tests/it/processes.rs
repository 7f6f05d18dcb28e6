//! Readers in other processes beside the writer (issue 50): a real second process — this test
//! binary run again on `processes::child_process`, which does what `RBOLT_PROCESS_CHILD` says
//! and nothing without it — reads through the writer's reader table while the writer commits,
//! holds an old snapshot while the writer churns and vacuums, dies by SIGKILL holding a slot,
//! or tries to write. The kill loop's children (`processes_kills.rs`) run through the same
//! entry.

use rbolt::{Db, Error, Options};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

/// Values are this long, so that commits rewrite many pages and free them.
const VALUE_LEN: usize = 300;

/// What the writer's commit `round` leaves in bucket `b`: `round % 97 + 1` keys, each value
/// naming the round. `counter` in bucket `meta` holds `round`.
fn model(round: u64) -> Vec<(Vec<u8>, Vec<u8>)> {
    (0..round % 97 + 1)
        .map(|j| {
            let mut value = format!("round {round} key {j} ").into_bytes();
            value.resize(VALUE_LEN, b'.');
            (format!("k{j:04}").into_bytes(), value)
        })
        .collect()
}

/// Commits round `round`: the model's keys, every other key deleted.
fn commit_round(db: &Db, round: u64) -> rbolt::Result<()> {
    db.update(|tx| write_round(tx, round))
}

/// Round `round`'s edits in `tx`.
pub(super) fn write_round(tx: &mut rbolt::WriteTx<'_>, round: u64) -> rbolt::Result<()> {
    let mut b = tx.create_bucket_if_not_exists("b")?;
    let keys: Vec<Vec<u8>> = b
        .iter()
        .map(|e| e.map(|e| e.key().to_vec()))
        .collect::<rbolt::Result<_>>()?;
    for key in keys {
        b.delete(key)?;
    }
    for (key, value) in model(round) {
        b.put(key, value)?;
    }
    drop(b);
    tx.create_bucket_if_not_exists("meta")?
        .put("counter", round.to_be_bytes())
}

/// The round a snapshot holds, after checking that it holds exactly the model of that round.
pub(super) fn check_snapshot(tx: &rbolt::ReadTx<'_>) -> Result<u64, String> {
    let Some(meta) = tx.bucket("meta").map_err(|e| e.to_string())? else {
        return Ok(0); // before the first round
    };
    let counter = meta
        .get("counter")
        .map_err(|e| e.to_string())?
        .ok_or("no counter")?;
    let round = u64::from_be_bytes(counter.try_into().map_err(|_| "counter length")?);
    let b = tx
        .bucket("b")
        .map_err(|e| e.to_string())?
        .ok_or("no bucket b")?;
    let found: Vec<(Vec<u8>, Vec<u8>)> = b
        .iter()
        .map(|e| e.map(|e| (e.key().to_vec(), e.value().unwrap_or_default().to_vec())))
        .collect::<rbolt::Result<_>>()
        .map_err(|e| e.to_string())?;
    if found != model(round) {
        return Err(format!(
            "txid {}: round {round} holds {} keys, not the model's {}",
            tx.id().0,
            found.len(),
            model(round).len()
        ));
    }
    Ok(round)
}

pub(super) fn read_only() -> Options {
    Options::default().read_only(true)
}

/// The child's side: `RBOLT_PROCESS_CHILD` names what to do on `RBOLT_PROCESS_PATH`. It
/// answers on stdout in lines starting `CHILD `, and takes orders on stdin.
#[test]
fn child_process() {
    let Ok(what) = std::env::var("RBOLT_PROCESS_CHILD") else {
        return; // run as a test of its own: nothing to do
    };
    let path = PathBuf::from(std::env::var("RBOLT_PROCESS_PATH").unwrap());
    let answer = match what.as_str() {
        "read" => child_read(&path),
        "hold" => child_hold(&path),
        "pause-before-slot" => child_pause_before_slot(&path),
        "write" => match Db::open(&path) {
            Ok(_) => "opened".to_string(),
            Err(error) => format!("{:?} {error}", error.kind()),
        },
        "pin-warn" => super::tracing::child_pin_warn(&path),
        "api-model-reader" => super::api_model::reader_child(&path),
        attack if attack.starts_with("attack-") => super::processes_attacks::child(attack, &path),
        other => super::processes_kills::child(other, &path),
    };
    println!("CHILD {answer}");
}

/// Reads snapshots for two seconds, each checked against the model; says how many and how
/// many different rounds.
fn child_read(path: &Path) -> String {
    let db = Db::open_with(path, read_only()).unwrap();
    assert!(db.reads_beside_writer(), "the writer is there");
    let (mut snapshots, mut rounds) = (0, std::collections::BTreeSet::new());
    let start = Instant::now();
    while start.elapsed() < Duration::from_secs(2) {
        let tx = db.begin_read().unwrap();
        match check_snapshot(&tx) {
            Ok(round) => rounds.insert(round),
            Err(error) => return format!("wrong {error}"),
        };
        snapshots += 1;
    }
    format!("ok {snapshots} {}", rounds.len())
}

/// Begins transactions whose first try each pauses between reading the writer's meta and
/// registering it in the slot (a failpoint: 50 ms), the window in which the writer can free and reuse the
/// pages that meta reaches; each snapshot must still be whole.
fn child_pause_before_slot(path: &Path) -> String {
    let db = Db::open_with(path, read_only()).unwrap();
    let mut rounds = std::collections::BTreeSet::new();
    for _ in 0..20 {
        // Once per transaction: the try after the pause must be able to succeed.
        fail::cfg("processes::before-slot", "1*sleep(50)").unwrap();
        let tx = db.begin_read().unwrap();
        match check_snapshot(&tx) {
            Ok(round) => rounds.insert(round),
            Err(error) => return format!("wrong {error}"),
        };
    }
    format!("ok {}", rounds.len())
}

/// Holds one snapshot: says its round and txid, then on each line of stdin checks it again
/// (answering `same` or what differs), until stdin closes.
fn child_hold(path: &Path) -> String {
    let db = Db::open_with(path, read_only()).unwrap();
    let tx = db.begin_read().unwrap();
    let round = check_snapshot(&tx).unwrap();
    println!("CHILD held {round} {} {}", tx.id().0, tx.size());
    std::io::stdout().flush().unwrap();
    for line in std::io::stdin().lock().lines() {
        line.unwrap();
        let answer = match check_snapshot(&tx) {
            Ok(again) if again == round => "same".to_string(),
            Ok(again) => format!("moved to {again}"),
            Err(error) => format!("wrong {error}"),
        };
        println!("CHILD {answer}");
        std::io::stdout().flush().unwrap();
    }
    "done".into()
}

/// The command that runs this test binary as a child doing `what` on `path` (see
/// [`child_process`]).
pub(super) fn child_command(what: &str, path: &Path) -> Command {
    let mut command = Command::new(std::env::current_exe().unwrap());
    command
        .args([
            "--exact",
            "processes::child_process",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("RBOLT_PROCESS_CHILD", what)
        .env("RBOLT_PROCESS_PATH", path);
    command
}

/// A child process of this test binary.
pub(super) struct Process {
    pub(super) child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
}

impl Process {
    pub(super) fn spawn(what: &str, path: &Path) -> Process {
        Process::start(child_command(what, path))
    }

    /// Starts `command` (from [`child_command`]) with its stdin and stdout piped.
    pub(super) fn start(mut command: Command) -> Process {
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .unwrap();
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().unwrap());
        Process {
            child,
            stdin,
            stdout,
        }
    }

    /// The child's next answer (what follows `CHILD ` on a line), without the prefix.
    pub(super) fn answer(&mut self) -> String {
        let mut line = String::new();
        loop {
            line.clear();
            let n = self.stdout.read_line(&mut line).unwrap();
            assert!(n > 0, "the child ended without answering");
            // libtest's "test ... " may come first on the line.
            if let Some(at) = line.find("CHILD ") {
                return line[at + "CHILD ".len()..].trim_end().to_string();
            }
        }
    }

    /// Sends the child a line and returns its answer.
    pub(super) fn ask(&mut self) -> String {
        writeln!(self.stdin.as_mut().unwrap(), "check").unwrap();
        self.answer()
    }

    /// Closes its stdin and waits for its last answer and its exit.
    pub(super) fn finish(mut self) -> String {
        drop(self.stdin.take());
        let answer = self.answer();
        assert!(self.child.wait().unwrap().success());
        answer
    }
}

/// The parts of a `held` answer: round, txid, bytes its snapshot reads.
pub(super) fn held(answer: &str) -> (u64, u64, u64) {
    let parts: Vec<u64> = answer
        .strip_prefix("held ")
        .unwrap_or_else(|| panic!("not a held answer: {answer}"))
        .split(' ')
        .map(|p| p.parse().unwrap())
        .collect();
    (parts[0], parts[1], parts[2])
}

#[test]
fn a_reader_process_reads_whole_snapshots_while_the_writer_commits_at_full_rate() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, Options::default().no_sync(true)).unwrap();
    commit_round(&db, 1).unwrap();
    let mut reader = Process::spawn("read", &path);
    let mut round = 1;
    let mut status = None;
    while status.is_none() {
        round += 1;
        commit_round(&db, round).unwrap();
        status = reader.child.try_wait().unwrap();
    }
    let answer = reader.answer();
    assert!(status.unwrap().success(), "{answer}");
    let counts: Vec<u64> = answer
        .strip_prefix("ok ")
        .unwrap_or_else(|| panic!("the reader process: {answer}"))
        .split(' ')
        .map(|p| p.parse().unwrap())
        .collect();
    println!(
        "reader process: {} snapshots of {} rounds, writer: {round} rounds",
        counts[0], counts[1]
    );
    assert!(
        counts[1] > 10,
        "the reader saw the writer's commits: {answer}"
    );
    assert!(
        db.reader_processes().unwrap().is_empty(),
        "the slot went with the process"
    );
}

#[test]
fn the_writer_never_reuses_pages_a_reader_process_still_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path).unwrap();
    commit_round(&db, 96).unwrap(); // the largest round: many pages to free
    let mut holder = Process::spawn("hold", &path);
    let (round, txid, _) = held(&holder.answer());
    assert_eq!(round, 96);
    let slots = db.reader_processes().unwrap();
    assert_eq!(slots.len(), 1, "{slots:?}");
    assert_eq!(slots[0].txid, Some(txid));
    assert_eq!(slots[0].pid, holder.child.id());
    for round in 97..400 {
        commit_round(&db, round).unwrap();
        if round % 100 == 0 {
            assert_eq!(holder.ask(), "same", "after round {round}");
        }
    }
    assert_eq!(holder.ask(), "same");
    let pending = db.stats().pending_page_n;
    assert!(pending > 0, "the held snapshot's pages are pending");
    assert_eq!(holder.finish(), "done");
    commit_round(&db, 400).unwrap();
    commit_round(&db, 401).unwrap();
    assert!(
        db.stats().pending_page_n < pending,
        "released once the reader left"
    );
}

/// The writer closes while a reader process holds an old snapshot, and a new writer opens:
/// the freelist it loads lists the held snapshot's freed pages as free, without saying which
/// commit freed them, so it holds them all until the reader has moved on.
#[test]
fn a_new_writer_keeps_the_pages_an_earlier_writers_reader_process_reads() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path).unwrap();
    commit_round(&db, 96).unwrap();
    let mut holder = Process::spawn("hold", &path);
    assert_eq!(held(&holder.answer()).0, 96);
    for round in 97..120 {
        commit_round(&db, round).unwrap();
    }
    db.close().unwrap();
    let db = Db::open(&path).unwrap();
    assert!(db.stats().pending_page_n > 0, "the free pages are held");
    for round in 120..420 {
        commit_round(&db, round).unwrap();
        if round % 100 == 0 {
            assert_eq!(holder.ask(), "same", "after round {round}");
        }
    }
    assert_eq!(holder.ask(), "same");
    assert_eq!(holder.finish(), "done");
    commit_round(&db, 420).unwrap();
    assert_eq!(db.reader_processes().unwrap(), vec![]);
}

#[test]
fn a_sigkilled_reader_process_releases_its_slot_without_help() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path).unwrap();
    commit_round(&db, 96).unwrap();
    let mut holder = Process::spawn("hold", &path);
    let (_, txid, _) = held(&holder.answer());
    for round in 97..150 {
        commit_round(&db, round).unwrap();
    }
    let pinned = db.stats().pending_page_n;
    assert!(pinned > 0, "pages the held snapshot reaches stay pending");
    holder.child.kill().unwrap(); // SIGKILL
    holder.child.wait().unwrap();
    // The slot still names the transaction; its lock went with the process.
    commit_round(&db, 150).unwrap();
    commit_round(&db, 151).unwrap();
    assert!(db.reader_processes().unwrap().is_empty());
    let after = db.stats().pending_page_n;
    assert!(
        after < pinned,
        "the dead reader's pages were released: {after} of {pinned}"
    );
    // And reused: more churn does not grow the file.
    let len = db.file_len().unwrap();
    for round in 152..250 {
        commit_round(&db, round).unwrap();
    }
    assert_eq!(
        db.file_len().unwrap(),
        len,
        "pages were reused (txid {txid} released)"
    );
}

/// A cut of the file waits for a reader process that started before the commit that freed
/// the tail, as it waits for the writer's own readers; the next commit after it left cuts.
#[test]
fn a_shrink_waits_for_a_reader_process_of_an_older_snapshot() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, Options::default().auto_shrink(true)).unwrap();
    commit_round(&db, 5).unwrap();
    let mut holder = Process::spawn("hold", &path);
    let (_, _, reads) = held(&holder.answer());
    db.update(|tx| {
        let mut big = tx.create_bucket("big")?;
        for i in 0..6000u32 {
            big.put(i.to_be_bytes(), [7u8; 500])?;
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    let grown = db.file_len().unwrap();
    assert!(grown > 8 * reads, "the file grew: {grown} against {reads}");
    db.update(|tx| tx.delete_bucket("big")).unwrap();
    db.vacuum(rbolt::VacuumOptions::default(), |_| {
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    for round in 6..12 {
        commit_round(&db, round).unwrap();
    }
    assert!(
        db.begin_read().unwrap().size() < grown / 4,
        "the high-water mark came down"
    );
    let held_len = db.file_len().unwrap();
    assert_eq!(
        held_len, grown,
        "the file was cut while a reader process read an older snapshot"
    );
    assert_eq!(holder.ask(), "same");
    assert_eq!(holder.finish(), "done");
    commit_round(&db, 12).unwrap();
    let shrunk = db.file_len().unwrap();
    assert!(
        shrunk < grown / 4,
        "the file shrank once the reader left: {shrunk} of {grown}"
    );
}

/// The race LMDB's pattern closes: a reader reads the meta, the writer commits twice (freeing
/// and then reusing the pages that meta reaches, as no slot names it yet), then the reader
/// registers. It must see that a newer meta was published and start again.
#[test]
fn a_reader_that_pauses_before_its_slot_starts_again_on_a_newer_meta() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, Options::default().no_sync(true)).unwrap();
    commit_round(&db, 1).unwrap();
    let mut reader = Process::spawn("pause-before-slot", &path);
    let mut round = 1;
    let status = loop {
        round += 1;
        commit_round(&db, round).unwrap();
        if let Some(status) = reader.child.try_wait().unwrap() {
            break status;
        }
    };
    let answer = reader.answer();
    assert!(status.success(), "{answer}");
    assert!(answer.starts_with("ok "), "the reader process: {answer}");
}

#[test]
fn a_second_writer_process_is_still_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path).unwrap();
    commit_round(&db, 1).unwrap();
    let answer = Process::spawn("write", &path).finish();
    assert!(answer.starts_with("Locked"), "{answer}");
    assert!(
        !answer.contains("beside"),
        "a writer is simply locked out: {answer}"
    );
    drop(db);
    assert_eq!(Process::spawn("write", &path).finish(), "opened");
}

#[test]
fn a_missing_or_torn_lock_file_is_rebuilt_by_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let lock = rbolt::storage::lock_file_path(&path);
    drop(Db::open(&path).unwrap());
    for damage in ["missing", "short", "garbage"] {
        match damage {
            "missing" => std::fs::remove_file(&lock).unwrap(),
            "short" => std::fs::write(&lock, b"rbolt").unwrap(),
            _ => std::fs::write(&lock, vec![0xa5; rbolt::storage::LOCK_FILE_LEN]).unwrap(),
        }
        let db = Db::open(&path).unwrap();
        commit_round(&db, 3).unwrap();
        let mut holder = Process::spawn("hold", &path);
        assert_eq!(held(&holder.answer()).0, 3, "{damage}");
        assert_eq!(db.reader_processes().unwrap().len(), 1, "{damage}");
        assert_eq!(holder.finish(), "done");
        drop(db);
    }
}

/// A writer that keeps no reader table (Go bbolt's `flock`, here taken by hand): a read-only
/// open fails at once, as before, and says why it could not read beside it.
#[test]
fn a_writer_without_a_reader_table_keeps_read_only_opens_out_and_says_why() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(Db::open(&path).unwrap());
    std::fs::remove_file(rbolt::storage::lock_file_path(&path)).unwrap();
    let held = std::fs::File::open(&path).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let error = Db::open_with(&path, read_only()).unwrap_err();
    let message = error.to_string();
    assert!(
        matches!(
            &error,
            Error::Locked {
                beside_writer: Some(_),
                ..
            }
        ),
        "{message}"
    );
    assert!(message.contains("cannot open the lock file"), "{message}");
    drop(held);
    // No writer: the shared lock, as before.
    let db = Db::open_with(&path, read_only()).unwrap();
    assert!(!db.reads_beside_writer());
}
