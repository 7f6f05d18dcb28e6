//! The API model test's database on a real file with a reader process beside the writer
//! (issue 50): [`Backing`] is where a case's database lives (the simulated file, or a file in
//! a temporary directory), and [`ReaderProcess`] is this test binary run again
//! (`processes::child_command`, `RBOLT_PROCESS_CHILD=api-model-reader`), attached read-only
//! beside the writer for the whole case. After every commit it begins a read transaction and
//! sends the canonical text of all it sees (`dump.rs`), which must be the model's committed
//! state; it also holds snapshots across later commits, vacuum steps, batches, compacts and
//! the writer's closes and reopens, each compared with the model as it was when taken. Every
//! snapshot it sends is also checked (`ReadTx::check`) in the reader process, and a thread of
//! its own begins transactions at any moment, while the writer works, each read whole and
//! checked (`reader_child.rs`).

use super::Tally;
use super::dump;
use super::exec::Cx;
use super::model::Model;
use super::session::open;
use crate::processes::child_command;
use rbolt::storage::{SimFile, Storage};
use rbolt::{Db, Options};
use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Stdio};

/// What `RBOLT_PROCESS_CHILD` says to run [`child`].
pub const CHILD: &str = "api-model-reader";

/// Where a case's database lives.
pub enum Backing {
    /// A simulated file (crash images, byte-level images).
    Sim(SimFile),
    /// A file in a temporary directory, with a reader process once the writer opened it.
    File {
        path: PathBuf,
        reader: Option<ReaderProcess>,
        _dir: tempfile::TempDir,
    },
}

impl Backing {
    pub fn sim() -> Backing {
        Backing::Sim(SimFile::new().expect("a simulated file"))
    }

    /// A new file in a temporary directory (on `/dev/shm` when there is one: the test is of
    /// the reader process, not of the disk's syncs).
    pub fn file() -> Backing {
        let shm = Path::new("/dev/shm");
        let dir = if shm.is_dir() {
            tempfile::tempdir_in(shm)
        } else {
            tempfile::tempdir()
        }
        .expect("a temporary directory");
        Backing::File {
            path: dir.path().join("model.db"),
            reader: None,
            _dir: dir,
        }
    }

    pub fn open(&self, options: Options) -> rbolt::Result<Db> {
        match self {
            Backing::Sim(sim) => open(sim, options),
            Backing::File { path, .. } => Db::open_with(path, options),
        }
    }

    /// The simulated file, which only the simulated backing has.
    pub fn as_sim(&self) -> Option<&SimFile> {
        match self {
            Backing::Sim(sim) => Some(sim),
            Backing::File { .. } => None,
        }
    }

    /// The file's length (a real file's from its metadata).
    pub fn len(&self) -> u64 {
        match self {
            Backing::Sim(sim) => sim.len().expect("the file's length"),
            Backing::File { path, .. } => std::fs::metadata(path).expect("the file's length").len(),
        }
    }

    /// The file's bytes.
    pub fn image(&self) -> Vec<u8> {
        match self {
            Backing::Sim(sim) => sim.live_image().expect("the file's bytes"),
            Backing::File { path, .. } => std::fs::read(path).expect("the file's bytes"),
        }
    }

    fn reader(&mut self) -> Option<&mut ReaderProcess> {
        match self {
            Backing::Sim(_) => None,
            Backing::File { reader, .. } => reader.as_mut(),
        }
    }

    /// Starts the reader process, if this is a real file and none runs yet (the writer must be
    /// open: a read-only open without it would take the shared lock and keep it out).
    pub fn attach(&mut self, committed: &Model, cx: &mut Cx<'_>) {
        let len = self.len();
        if let Backing::File { path, reader, .. } = self
            && reader.is_none()
        {
            let mut process = ReaderProcess::start(path, len, cx);
            process.now(committed, None, len, cx);
            *reader = Some(process);
        }
    }

    /// After a commit (or the writer's reopen): a new read transaction in the reader process
    /// reads `committed`, the `writer`'s newest commit (when a writer is open), and every
    /// snapshot it holds still reads what it read, in the slots the writer lists.
    pub fn after_commit(&mut self, committed: &Model, writer: Option<&Db>, cx: &mut Cx<'_>) {
        let len = self.len();
        if let Some(reader) = self.reader() {
            reader.now(committed, writer, len, cx);
            reader.check_held(cx);
            reader.racing(cx);
            if let Some(writer) = writer {
                reader.check_slots(writer, cx);
            }
        }
    }

    /// The reader process begins a transaction and holds it (at most `held_max`, the oldest
    /// let go first).
    pub fn hold(&mut self, committed: &Model, held_max: usize, writer: &Db, cx: &mut Cx<'_>) {
        if let Some(reader) = self.reader() {
            reader.hold(committed, held_max, writer, cx);
        }
    }

    /// The reader process lets the snapshots it holds go and takes a new one (after a vacuum
    /// step: a cut of the file that waited for the old snapshots may then happen while the
    /// new one is held).
    pub fn renew(&mut self, committed: &Model, writer: &Db, cx: &mut Cx<'_>) {
        if let Some(reader) = self.reader() {
            while !reader.held.is_empty() {
                reader.release_oldest(cx);
            }
            reader.hold(committed, usize::MAX, writer, cx);
            cx.tally.event("proc.renewals");
        }
    }

    /// Counts `event` (`proc.held.<what>`) if the reader process holds a snapshot now.
    pub fn while_held(&mut self, event: &'static str, tally: &mut Tally) {
        if self.reader().is_some_and(|reader| !reader.held.is_empty()) {
            tally.event(event);
        }
    }

    /// Ends the reader process: it must exit cleanly.
    pub fn finish(&mut self) {
        if let Backing::File { reader, .. } = self
            && let Some(process) = reader.take()
        {
            process.finish();
        }
    }
}

/// The reader process, from the parent's side.
pub struct ReaderProcess {
    child: Child,
    stdin: Option<ChildStdin>,
    stdout: BufReader<ChildStdout>,
    /// The txid and the model's text of each snapshot it holds, oldest first (as the process
    /// holds them).
    held: Vec<(u64, Vec<String>)>,
    /// The file's length at the last check, to see shrinks.
    len: u64,
}

/// A snapshot as the reader process sent it.
struct Sent {
    txid: u64,
    lines: Vec<String>,
    /// What `ReadTx::check` found, one a line.
    errors: Vec<String>,
}

impl ReaderProcess {
    fn start(path: &Path, len: u64, cx: &mut Cx<'_>) -> ReaderProcess {
        let mut child = child_command(CHILD, path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("the reader process starts");
        let stdin = child.stdin.take();
        let stdout = BufReader::new(child.stdout.take().expect("its stdout"));
        let mut process = ReaderProcess {
            child,
            stdin,
            stdout,
            held: Vec::new(),
            len,
        };
        match process.answer() {
            Ok(answer) if answer == "ready" => cx.tally.event("proc.attached"),
            Ok(answer) => cx.fail(format_args!("the reader process did not attach: {answer}")),
            Err(e) => cx.fail(e),
        }
        process
    }

    /// The next line from the process that starts with `CHILD ` (libtest's own lines, and
    /// its `test ... ` before the first answer, are skipped), without the prefix.
    fn answer(&mut self) -> Result<String, String> {
        let mut line = String::new();
        loop {
            line.clear();
            match self.stdout.read_line(&mut line) {
                Ok(0) => return Err("the reader process ended without answering".into()),
                Ok(_) => {}
                Err(e) => return Err(format!("reading the reader process: {e}")),
            }
            if let Some(at) = line.find("CHILD ") {
                return Ok(line[at + "CHILD ".len()..].trim_end().to_string());
            }
        }
    }

    fn raw_line(&mut self) -> Result<String, String> {
        let mut line = String::new();
        match self.stdout.read_line(&mut line) {
            Ok(0) => Err("the reader process ended in the middle of a snapshot".into()),
            Ok(_) => Ok(line.trim_end_matches('\n').to_string()),
            Err(e) => Err(format!("reading the reader process: {e}")),
        }
    }

    fn send(&mut self, command: &str) -> Result<(), String> {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{command}")
            .and_then(|()| stdin.flush())
            .map_err(|e| format!("the reader process does not take {command:?}: {e}"))
    }

    /// Sends `command` and reads the snapshot it answers with.
    fn snapshot(&mut self, command: &str) -> Result<Sent, String> {
        self.send(command)?;
        let answer = self.answer()?;
        let fields: Vec<&str> = answer.split(' ').collect();
        let ["dump", txid, lines, errors] = fields[..] else {
            return Err(format!(
                "the reader process answered {command:?} with {answer}"
            ));
        };
        let number = |text: &str| {
            text.parse::<u64>()
                .map_err(|_| format!("not a number in {answer}"))
        };
        let (txid, lines, errors) = (number(txid)?, number(lines)?, number(errors)?);
        let lines = (0..lines)
            .map(|_| self.raw_line())
            .collect::<Result<_, _>>()?;
        let errors = (0..errors)
            .map(|_| self.raw_line())
            .collect::<Result<_, _>>()?;
        Ok(Sent {
            txid,
            lines,
            errors,
        })
    }

    /// Compares what the process sent for `command` with `wanted` (the model's text); the
    /// txid it read.
    fn compare(&mut self, command: &str, wanted: &[String], what: &str, cx: &Cx<'_>) -> u64 {
        let sent = self.snapshot(command).unwrap_or_else(|e| cx.fail(e));
        if let Err(e) = dump::compare(&sent.lines, wanted) {
            cx.fail(format_args!(
                "{what} (txid {}) differs from the model: {e}",
                sent.txid
            ));
        }
        if !sent.errors.is_empty() {
            cx.fail(format_args!(
                "{what} (txid {}): check found {}",
                sent.txid,
                sent.errors.join("; ")
            ));
        }
        sent.txid
    }

    /// A new transaction of the reader process reads `txid`: the `writer`'s newest commit.
    fn newest(txid: u64, writer: Option<&Db>, cx: &mut Cx<'_>) {
        if let Some(writer) = writer {
            let newest = writer
                .begin_read()
                .map(|tx| tx.id().0)
                .unwrap_or_else(|e| cx.fail(format_args!("the writer's begin_read: {e}")));
            if txid != newest {
                cx.fail(format_args!(
                    "a new read transaction of the reader process reads txid {txid}, the \
                     writer's newest commit is {newest}"
                ));
            }
            cx.tally.event("proc.newest-txids");
        }
    }

    fn now(&mut self, committed: &Model, writer: Option<&Db>, len: u64, cx: &mut Cx<'_>) {
        let wanted = dump::of_model(committed);
        let txid = self.compare(
            "now",
            &wanted,
            "a new read transaction in the reader process",
            cx,
        );
        ReaderProcess::newest(txid, writer, cx);
        cx.tally.event("proc.commits-checked");
        if len < self.len {
            cx.tally.event("proc.shrinks-seen");
            if !self.held.is_empty() {
                cx.tally.event("proc.held.shrinks");
            }
        }
        self.len = len;
    }

    fn hold(&mut self, committed: &Model, held_max: usize, writer: &Db, cx: &mut Cx<'_>) {
        if self.held.len() >= held_max {
            self.release_oldest(cx);
        }
        let wanted = dump::of_model(committed);
        let txid = self.compare(
            "hold",
            &wanted,
            "a snapshot the reader process takes to hold",
            cx,
        );
        ReaderProcess::newest(txid, Some(writer), cx);
        cx.tally.event("proc.holds");
        self.held.push((txid, wanted));
    }

    /// The racing thread's transactions since the last ask were whole and checked clean.
    fn racing(&mut self, cx: &mut Cx<'_>) {
        self.send("racing").unwrap_or_else(|e| cx.fail(e));
        let answer = self.answer().unwrap_or_else(|e| cx.fail(e));
        match answer.split_once(' ') {
            Some(("racing", n)) => {
                let n: u64 = n
                    .parse()
                    .unwrap_or_else(|_| cx.fail(format_args!("racing: {answer}")));
                *cx.tally.events.entry("proc.racing-snapshots").or_default() += n;
            }
            _ => cx.fail(format_args!(
                "a transaction the reader process began while the writer worked: {answer}"
            )),
        }
    }

    /// The writer lists the reader process's slots, one reading each held snapshot's txid
    /// (and perhaps one more: the racing thread's).
    fn check_slots(&mut self, writer: &Db, cx: &mut Cx<'_>) {
        let pid = self.child.id();
        let slots = writer
            .reader_processes()
            .unwrap_or_else(|e| cx.fail(format_args!("reader_processes: {e}")));
        let mut listed: Vec<u64> = slots
            .iter()
            .filter(|slot| slot.pid == pid)
            .filter_map(|slot| slot.txid)
            .collect();
        listed.sort_unstable();
        let mut unheld = listed.clone();
        for (txid, _) in &self.held {
            match unheld.iter().position(|t| t == txid) {
                Some(at) => {
                    unheld.remove(at);
                }
                None => unheld.push(u64::MAX), // not listed: fails below
            }
        }
        let held: Vec<u64> = self.held.iter().map(|(txid, _)| *txid).collect();
        if unheld.len() > 1 || unheld.contains(&u64::MAX) {
            cx.fail(format_args!(
                "the writer lists the reader process's slots reading {listed:?}, it holds \
                 {held:?} (all slots: {slots:?})"
            ));
        }
        cx.tally.event("proc.slots-checked");
    }

    fn release_oldest(&mut self, cx: &mut Cx<'_>) {
        self.send("release 0").unwrap_or_else(|e| cx.fail(e));
        match self.answer() {
            Ok(answer) if answer == "released" => {}
            Ok(answer) => cx.fail(format_args!("release: the reader process said {answer}")),
            Err(e) => cx.fail(e),
        }
        self.held.remove(0);
    }

    fn check_held(&mut self, cx: &mut Cx<'_>) {
        let held = std::mem::take(&mut self.held);
        for (index, (txid, wanted)) in held.iter().enumerate() {
            let what = format!("the snapshot the reader process holds (the {index}th)");
            let read = self.compare(&format!("check {index}"), wanted, &what, cx);
            if read != *txid {
                cx.fail(format_args!("{what} moved from txid {txid} to {read}"));
            }
            cx.tally.event("proc.held-checks");
        }
        self.held = held;
    }

    fn finish(mut self) {
        drop(self.stdin.take());
        let last = self.answer();
        let status = self.child.wait().expect("the reader process's exit");
        assert_eq!(
            last.as_deref(),
            Ok("done"),
            "the reader process's last answer"
        );
        assert!(status.success(), "the reader process exited with {status}");
    }
}

impl Drop for ReaderProcess {
    fn drop(&mut self) {
        // A failed case (`finish` waited already otherwise): the process must not outlive it,
        // nor keep the case waiting while it writes into a pipe no one reads.
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
