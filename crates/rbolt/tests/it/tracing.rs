//! The `tracing` feature (issue 25): the store's events reach a subscriber — lock waits,
//! recovery at open, growth, shrinks, vacuum steps, a poisoned handle and slow commits.
//! A small subscriber records every event of the calling thread.

use rbolt::storage::{FaultError, FaultPlan, OpKind, SimFile};
use rbolt::{Db, Durability, Options, VacuumOptions};
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Level, Metadata, Subscriber};

/// One recorded event.
#[derive(Clone, Debug)]
struct Recorded {
    level: Level,
    target: String,
    message: String,
    fields: BTreeMap<String, String>,
}

/// Records events and span names; every span gets the same id (nothing here needs more).
#[derive(Clone, Default)]
struct Recorder {
    events: Arc<Mutex<Vec<Recorded>>>,
    spans: Arc<Mutex<Vec<String>>>,
}

struct Fields<'a>(&'a mut BTreeMap<String, String>);

impl Visit for Fields<'_> {
    fn record_debug(&mut self, field: &Field, value: &dyn Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }

    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }
}

impl Subscriber for Recorder {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &Attributes<'_>) -> Id {
        self.spans
            .lock()
            .unwrap()
            .push(span.metadata().name().to_owned());
        Id::from_u64(1)
    }

    fn record(&self, _: &Id, _: &Record<'_>) {}

    fn record_follows_from(&self, _: &Id, _: &Id) {}

    fn event(&self, event: &Event<'_>) {
        let mut fields = BTreeMap::new();
        event.record(&mut Fields(&mut fields));
        let message = fields.remove("message").unwrap_or_default();
        self.events.lock().unwrap().push(Recorded {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            message,
            fields,
        });
    }

    fn enter(&self, _: &Id) {}

    fn exit(&self, _: &Id) {}
}

impl Recorder {
    /// Runs `f` with this recorder as the thread's subscriber; returns the events it saw.
    fn run<T>(&self, f: impl FnOnce() -> T) -> (T, Vec<Recorded>) {
        let out = tracing::subscriber::with_default(self.clone(), f);
        (out, std::mem::take(&mut *self.events.lock().unwrap()))
    }
}

/// The events whose message contains `text`.
fn find<'a>(events: &'a [Recorded], text: &str) -> Vec<&'a Recorded> {
    events.iter().filter(|e| e.message.contains(text)).collect()
}

/// The one event whose message contains `text`, checked to come from rbolt at `level`.
fn one<'a>(events: &'a [Recorded], text: &str, level: Level) -> &'a Recorded {
    let found = find(events, text);
    assert_eq!(found.len(), 1, "one {text:?} event expected in {events:#?}");
    assert_eq!(found[0].level, level, "{:?}", found[0]);
    assert!(found[0].target.starts_with("rbolt"), "{:?}", found[0]);
    found[0]
}

#[test]
fn a_lock_wait_is_reported_when_it_starts_and_ends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(Db::open(&path).unwrap());
    // Another process's lock (within one process a second open fails at once).
    let held = std::fs::File::open(&path).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(100));
        drop(held);
    });
    let recorder = Recorder::default();
    let options = Options::default().lock_timeout(Some(Duration::from_secs(30)));
    let (db, events) = recorder.run(|| Db::open_with(&path, options));
    db.unwrap();
    release.join().unwrap();
    let started = one(&events, "waiting for it", Level::INFO);
    assert!(started.fields["path"].ends_with("db"), "{started:?}");
    assert!(
        started.fields["lock_timeout"].contains("30s"),
        "{started:?}"
    );
    let ended = one(&events, "got the file lock", Level::INFO);
    assert!(ended.fields.contains_key("waited"), "{ended:?}");
    // Without contention there is nothing to report.
    let (_, events) = recorder.run(|| drop(Db::open(dir.path().join("other")).unwrap()));
    assert!(find(&events, "lock").is_empty(), "{events:#?}");
}

#[test]
fn a_lock_wait_that_runs_out_is_a_warning() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(Db::open(&path).unwrap());
    let held = std::fs::File::open(&path).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let options = Options::default().lock_timeout(Some(Duration::from_millis(50)));
    let (result, events) = Recorder::default().run(|| Db::open_with(&path, options));
    assert!(
        matches!(result, Err(rbolt::Error::Timeout { .. })),
        "{result:?}"
    );
    one(&events, "waiting for it", Level::INFO);
    let gave_up = one(&events, "gave up waiting", Level::WARN);
    assert!(gave_up.fields.contains_key("error"), "{gave_up:?}");
}

#[test]
fn recovery_at_open_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    // A creation cut short: four pages of zeros.
    let path = dir.path().join("torn-creation.db");
    std::fs::write(&path, vec![0u8; 4 * 4096]).unwrap();
    let (db, events) = Recorder::default().run(|| Db::open(&path));
    drop(db.unwrap());
    let event = one(&events, "creation was interrupted", Level::INFO);
    assert_eq!(event.fields["file_len"], "16384");
    // A new file is no recovery.
    let (db, events) = Recorder::default().run(|| Db::open(dir.path().join("new.db")));
    drop(db.unwrap());
    assert!(find(&events, "interrupted").is_empty(), "{events:#?}");

    // The newest meta torn: the open falls back to the other.
    let path = dir.path().join("torn-meta.db");
    let db = Db::open(&path).unwrap();
    db.update(|tx| tx.create_bucket("b")?.put("k", "v"))
        .unwrap();
    let newest = db.begin_read().unwrap().id().0;
    drop(db);
    let mut bytes = std::fs::read(&path).unwrap();
    let slot = (newest % 2) as usize * 4096;
    bytes[slot + 40] ^= 0xFF; // inside the checksummed fields
    std::fs::write(&path, &bytes).unwrap();
    let (db, events) = Recorder::default().run(|| Db::open(&path));
    let db = db.unwrap();
    let event = one(&events, "one meta cannot be opened", Level::WARN);
    assert!(event.fields["why"].contains("torn"), "{event:?}");
    assert_eq!(event.fields["txid"], (newest - 1).to_string());
    assert_eq!(db.begin_read().unwrap().id().0, newest - 1);
    drop(db);

    // A file that keeps no freelist page: the freelist is rebuilt.
    let path = dir.path().join("no-freelist.db");
    let options = Options::default().no_freelist_sync(true);
    let db = Db::open_with(&path, options.clone()).unwrap();
    db.update(|tx| tx.create_bucket("b")?.put("k", "v"))
        .unwrap();
    drop(db);
    let (db, events) = Recorder::default().run(|| Db::open_with(&path, options));
    drop(db.unwrap());
    one(&events, "rebuilding the freelist", Level::INFO);
}

#[test]
fn commits_without_syncs_made_durable_at_open_are_reported() {
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default()).unwrap();
    // A durable commit first: a new file's last durable meta is in slot 1, where no commit
    // without syncs goes, and slot 0 takes only durable ones (see `Durability::None`).
    db.update(|tx| tx.create_bucket("a").map(drop)).unwrap();
    let tx = db.begin_write().unwrap();
    tx.set_durability(Durability::None);
    tx.create_bucket("b").unwrap().put("k", "v").unwrap();
    tx.commit().unwrap();
    // The process dies without closing: the page cache keeps the commit.
    let crashed = sim.after_process_crash().unwrap();
    drop(db);
    let (db, events) = Recorder::default()
        .run(|| Db::open_storage(Arc::new(crashed), Options::default().no_freelist_sync(true)));
    let db = db.unwrap();
    let event = one(&events, "making them durable", Level::INFO);
    assert_eq!(event.fields["path"], "-", "a storage without a path");
    assert!(db.begin_read().unwrap().bucket("b").unwrap().is_some());
}

#[test]
fn growth_and_slow_commits_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let recorder = Recorder::default();
    let db = Db::open(dir.path().join("db")).unwrap();
    let (_, events) = recorder.run(|| {
        db.update(|tx| {
            let mut b = tx.create_bucket("b")?;
            for i in 0u32..2000 {
                b.put(i.to_be_bytes(), [7u8; 100])?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap()
    });
    let grew = one(&events, "the file grew", Level::DEBUG);
    let (from, to): (u64, u64) = (
        grew.fields["from"].parse().unwrap(),
        grew.fields["to"].parse().unwrap(),
    );
    assert!(from < to && to == db.file_len().unwrap(), "{grew:?}");
    // Under the default threshold (a second), nothing is slow here...
    assert!(find(&events, "slow commit").is_empty(), "{events:#?}");
    // ...and a commit that grows nothing reports no growth.
    let (_, events) = recorder.run(|| db.update(|tx| tx.bucket_mut("b")?.unwrap().put("k", "v")));
    assert!(find(&events, "grew").is_empty(), "{events:#?}");
    drop(db);
    // With a threshold of zero every commit is slow, with its phases' times.
    let options = Options::default().slow_commit_threshold(Some(Duration::ZERO));
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    let (_, events) = recorder.run(|| db.update(|tx| tx.bucket_mut("b")?.unwrap().put("k", "w")));
    let slow = one(&events, "slow commit", Level::WARN);
    for field in ["txid", "commit_time", "spill_time", "write_time", "writes"] {
        assert!(slow.fields.contains_key(field), "{field} in {slow:?}");
    }
    // The commit runs in a span of its own, and each phase of its protocol in one inside it
    // (a durable commit that grows nothing: no mapping phase).
    let spans = recorder.spans.lock().unwrap().clone();
    for phase in [
        "commit",
        "commit.spill",
        "commit.freelist",
        "commit.write_data",
        "commit.sync_data",
        "commit.write_meta",
        "commit.publish",
    ] {
        assert!(
            spans.iter().any(|name| name == phase),
            "{phase} in {spans:?}"
        );
    }
    drop(db);
    let off = Options::default().slow_commit_threshold(None);
    let db = Db::open_with(dir.path().join("db"), off).unwrap();
    let (_, events) = recorder.run(|| db.update(|tx| tx.bucket_mut("b")?.unwrap().put("k", "x")));
    assert!(find(&events, "slow commit").is_empty(), "{events:#?}");
}

#[test]
fn vacuum_steps_and_shrinks_are_reported() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    db.update(|tx| {
        let mut b = tx.create_bucket("b")?;
        for i in 0u32..5000 {
            b.put(i.to_be_bytes(), [1u8; 100])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    db.update(|tx| {
        let mut b = tx.bucket_mut("b")?.unwrap();
        for i in 0u32..4900 {
            b.delete(i.to_be_bytes())?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    let before = db.file_len().unwrap();
    let (report, events) = Recorder::default().run(|| {
        db.vacuum(VacuumOptions::default(), |_| ControlFlow::Continue(()))
            .unwrap()
    });
    assert!(report.file_len < before);
    let steps = find(&events, "a vacuum step");
    assert_eq!(steps.len() as u64, report.steps, "{events:#?}");
    assert!(
        steps
            .iter()
            .all(|s| s.level == Level::DEBUG && s.fields["committed"] == "true")
    );
    let done = one(&events, "the vacuum is done", Level::INFO);
    assert_eq!(done.fields["file_len"], report.file_len.to_string());
    let shrank = find(&events, "the file shrank");
    assert!(!shrank.is_empty(), "{events:#?}");
    let last = shrank.last().unwrap();
    assert_eq!(last.fields["to"], report.file_len.to_string(), "{last:?}");
}

#[test]
fn a_poisoned_handle_is_an_error_event() {
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default()).unwrap();
    db.update(|tx| tx.create_bucket("b").map(drop)).unwrap();
    sim.set_fault_plan(FaultPlan::new().fail_kind(OpKind::SyncData, FaultError::Io));
    let (result, events) =
        Recorder::default().run(|| db.update(|tx| tx.bucket_mut("b")?.unwrap().put("k", "v")));
    assert!(result.is_err());
    one(&events, "reopened", Level::ERROR);
    // Once: a handle already poisoned says nothing more.
    let (_, events) = Recorder::default().run(|| db.sync());
    assert!(find(&events, "reopened").is_empty(), "{events:#?}");
}

/// A writer whose lock file cannot be made (here a directory stands in its place, as a
/// read-only directory would refuse it) opens as before issue 50, and says so.
#[test]
fn a_writer_without_a_reader_table_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    std::fs::create_dir(rbolt::storage::lock_file_path(&path)).unwrap();
    let recorder = Recorder::default();
    let (db, events) = recorder.run(|| Db::open(&path));
    let db = db.unwrap();
    let said = one(&events, "without a reader table", Level::INFO);
    assert!(said.fields["path"].ends_with("db"), "{said:?}");
    assert!(db.reader_processes().unwrap().is_empty());
    drop(db);
    // With a lock file there is nothing to say.
    std::fs::remove_dir(rbolt::storage::lock_file_path(&path)).unwrap();
    let (db, events) = recorder.run(|| Db::open(&path));
    drop(db.unwrap());
    assert!(find(&events, "without a reader table").is_empty());
}

/// Part of the message of the event that reports a reader process pinning an old snapshot.
const PINNED: &str = "held an old snapshot for long";

/// The writer of `a_reader_process_that_pins_an_old_snapshot_for_long_is_reported`, a child
/// process (`processes::child_process`) whose `RBOLT_READER_PIN_WARN_SECS` is 3: says `ready`,
/// waits until the parent holds a snapshot (its stdin closes), commits twice at once (no
/// report: held for less than the threshold, whose whole seconds are counted from the second
/// the transaction began in), then every 20 ms until a report comes (for 30 s at most),
/// then three more times (no second report for the same transaction); answers with each report's pid, txid,
/// seconds and level, or with what went wrong.
pub(super) fn child_pin_warn(path: &Path) -> String {
    let db = Db::open(path).unwrap();
    let commit = || {
        db.update(|tx| tx.create_bucket_if_not_exists("b")?.put("k", "v"))
            .unwrap()
    };
    commit();
    println!("CHILD ready");
    std::io::Write::flush(&mut std::io::stdout()).unwrap();
    for line in std::io::BufRead::lines(std::io::stdin().lock()) {
        line.unwrap();
    }
    let recorder = Recorder::default();
    let (_, early) = recorder.run(|| (commit(), commit()));
    if !find(&early, PINNED).is_empty() {
        return format!("reported at once: {early:#?}");
    }
    let started = std::time::Instant::now();
    let mut events = Vec::new();
    // Half the default threshold: a report then comes from the variable's.
    while find(&events, PINNED).is_empty() && started.elapsed() < Duration::from_secs(30) {
        std::thread::sleep(Duration::from_millis(20));
        events.extend(recorder.run(commit).1);
    }
    events.extend(recorder.run(|| (commit(), commit(), commit())).1);
    let reports: Vec<String> = find(&events, PINNED)
        .iter()
        .map(|e| {
            let field = |name: &str| e.fields.get(name).cloned().unwrap_or_default();
            let level = e.level;
            format!(
                "{} {} {} {level}",
                field("pid"),
                field("txid"),
                field("seconds")
            )
        })
        .collect();
    reports.join("; ")
}

/// A reader process that holds a snapshot older than the newest for longer than the
/// threshold (60 s; here 3 s, through `RBOLT_READER_PIN_WARN_SECS` in the writer's process)
/// is reported once, naming the process, the txid it pins and for how long; not before.
#[test]
fn a_reader_process_that_pins_an_old_snapshot_for_long_is_reported() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(Db::open(&path).unwrap());
    let mut command = super::processes::child_command("pin-warn", &path);
    command.env("RBOLT_READER_PIN_WARN_SECS", "3");
    let mut writer = super::processes::Process::start(command);
    assert_eq!(writer.answer(), "ready");
    // This process is the reader: beside the writer, holding one snapshot.
    let db = Db::open_with(&path, Options::default().read_only(true)).unwrap();
    assert!(db.reads_beside_writer());
    let tx = db.begin_read().unwrap();
    let answer = writer.finish();
    let parts: Vec<&str> = answer.split(' ').collect();
    assert_eq!(parts.len(), 4, "one report: {answer}");
    assert_eq!(parts[0], std::process::id().to_string(), "{answer}");
    assert_eq!(parts[1], tx.id().0.to_string(), "{answer}");
    let seconds: u64 = parts[2].parse().unwrap();
    assert!(
        (3..60).contains(&seconds),
        "the variable's threshold: {answer}"
    );
    assert_eq!(parts[3], "WARN", "{answer}");
}
