//! Runs a case: the database is opened, used and reopened as the operations say; write
//! transactions commit, roll back, are dropped, panic inside `update`, fail inside `update`
//! and fail at commit past `max_size`; old readers on other threads keep their snapshot;
//! `compact`, `write_to`, `copy_file` and `batch` run beside. After every step the open
//! transaction equals the model; after every commit the database equals the committed model
//! and checks clean.

use super::exec::{self, Cx, Hooks};
use super::model::{Class, ErrKind, Item, Model, res};
use super::ops::{Case, Op, PAGE_SIZES, Rng};
use super::reader_process::Backing;
use super::reads::compare_tree;
use super::{READERS_MAX, Tally};
use rbolt::storage::{CrashProfile, SimFile};
use rbolt::{
    ALLOC_SIZE_DEFAULT, BATCH_DELAY_MAX_DEFAULT, BATCH_SIZE_MAX_DEFAULT, Db, Durability, Error,
    FreelistKind, Options, WriteTx,
};
use std::ops::Range;
use std::panic::{AssertUnwindSafe, catch_unwind, resume_unwind};
use std::sync::{Arc, mpsc};
use std::thread::JoinHandle;
use std::time::Duration;

/// Opens a database on a simulated file (the only place the test opens one on `SimFile`).
pub fn open(sim: &SimFile, options: Options) -> rbolt::Result<Db> {
    Db::open_storage(Arc::new(sim.clone()), options)
}

/// The top-level bucket `batch` calls write into.
const BATCH_BUCKET: &[u8] = b"batch";
/// The top-level bucket of the value that passes `max_size`.
const BIG_BUCKET: &[u8] = b"big";
/// The top-level bucket filled to `max_size` by commits without syncs.
const FILL_BUCKET: &[u8] = b"fill";

/// The payload of a deliberate panic inside an `update` closure; thrown with
/// `resume_unwind`, so no panic message is printed.
struct Deliberate;

/// Checks that `db`'s newest commit equals `expected` and checks clean.
pub fn verify(db: &Db, expected: &Model) -> Result<(), String> {
    let (same, errors) = db
        .view(|tx| Ok((compare_tree(tx.root(), expected), tx.check())))
        .map_err(|e: rbolt::Error| format!("view: {e}"))?;
    same?;
    if errors.is_empty() {
        Ok(())
    } else {
        Err(format!("check found: {errors:?}"))
    }
}

/// A read transaction kept open on another thread.
struct Reader {
    /// Each request carries where to send the comparison of the snapshot with the model.
    requests: mpsc::Sender<mpsc::Sender<Result<(), String>>>,
    handle: JoinHandle<()>,
}

/// What ends a session (the life of one handle).
enum Next {
    /// A crash: the file the next process (or the next boot) finds, and the states it may
    /// hold.
    Crash {
        sim: SimFile,
        allowed: Vec<Model>,
        index: usize,
    },
    Reopen(Options),
    ReadOnly {
        index: usize,
        compact: bool,
    },
    MaxSize {
        index: usize,
        inner: Range<usize>,
    },
    Done,
}

/// One case's database and what it must hold.
struct World {
    backing: Backing,
    page_size: usize,
    options: Options,
    committed: Model,
    /// The committed states since the last one known to be durable, that one first: what a
    /// power loss may bring back (the last, `committed`, is what a process crash keeps).
    history: Vec<Model>,
    readers: Vec<Reader>,
    dir: Option<tempfile::TempDir>,
}

/// The operation a final commit or check is reported as.
static FINAL: Op = Op::Commit;

/// Runs `case` on a simulated file, counting into `tally`. Panics (with the operation) on a
/// difference.
pub fn run(case: &Case, tally: &mut Tally) {
    run_on(Backing::sim(), case, tally);
}

/// Runs `case` on `backing`: on a real file, with a reader process beside the writer from its
/// first open (`reader_process.rs`); operations that need the simulated file are skipped there,
/// counted.
pub fn run_on(backing: Backing, case: &Case, tally: &mut Tally) {
    let options = Options::default()
        .page_size(case.page_size)
        .freelist(case.freelist)
        .no_freelist_sync(case.no_freelist_sync);
    let mut world = World {
        backing,
        page_size: case.page_size,
        options,
        committed: Model::default(),
        history: vec![Model::default()],
        readers: Vec::new(),
        dir: None,
    };
    let mut next = 0;
    loop {
        let db = Arc::new(world.open(world.options.clone()));
        // One open handle per storage: a second one would be a second writer.
        let second = world
            .backing
            .open(Options::default().read_only(next % 2 == 0));
        let mut cx = Cx::new(&mut *tally, next, &FINAL);
        world.backing.attach(&world.committed, &mut cx);
        // The reader process reads the reopened writer's newest commit, and its held
        // snapshots read as before.
        world
            .backing
            .after_commit(&world.committed, Some(&db), &mut cx);
        cx.detail = "(a second handle on the open storage)".into();
        cx.expect(
            "opening the storage again",
            res(second.map(|_| ())),
            Err((ErrKind::StorageInUse, Class::SecondHandle)),
        );
        let step = world.session(&db, &case.ops, &mut next, tally);
        world.stop_readers();
        assert_eq!(Arc::strong_count(&db), 1, "a reader still holds the handle");
        drop(db);
        if !matches!(step, Next::Crash { .. }) {
            // A clean close makes everything durable.
            world.history = vec![world.committed.clone()];
        }
        match step {
            Next::Crash {
                sim,
                allowed,
                index,
            } => {
                let mut cx = Cx::new(&mut *tally, index, &case.ops[index]);
                world.reopen_after_crash(sim, allowed, &mut cx);
            }
            Next::Reopen(options) => {
                tally.event("reopens");
                world.backing.while_held("proc.held.reopens", tally);
                world.options = options;
            }
            Next::ReadOnly { index, compact } => {
                let mut cx = Cx::new(&mut *tally, index, &case.ops[index]);
                world.read_only(compact, &mut cx);
            }
            Next::MaxSize { index, inner } => {
                let mut cx = Cx::new(&mut *tally, index, &case.ops[index]);
                world.max_size(&case.ops, inner, &mut cx);
            }
            Next::Done => break,
        }
    }
    // What was committed is there after a last reopen with default options.
    let db = world.open(Options::default());
    drop(db);
    world.backing.finish();
}

impl World {
    fn open(&self, options: Options) -> Db {
        let db = self
            .backing
            .open(options.clone())
            .unwrap_or_else(|e| panic!("opening with {options:?}: {e}"));
        assert_eq!(db.page_size(), self.page_size, "a file keeps its page size");
        if let Err(e) = verify(&db, &self.committed) {
            panic!("after opening with {options:?}: {e}");
        }
        db
    }

    fn session(&mut self, db: &Arc<Db>, ops: &[Op], next: &mut usize, tally: &mut Tally) -> Next {
        let mut model = self.committed.clone();
        let mut hooks = Hooks::default();
        let mut tx = Some(db.begin_write().expect("begin_write"));
        while *next < ops.len() {
            let index = *next;
            *next += 1;
            let op = &ops[index];
            tally.ops += 1;
            let mut cx = Cx::new(&mut *tally, index, op);
            cx.db = Some(db);
            match op {
                Op::Commit => {
                    self.commit(db, tx.take(), &mut model, &mut hooks, &mut cx);
                    tx = Some(db.begin_write().expect("begin_write after a commit"));
                }
                Op::Rollback => {
                    cx.tally.event("rollbacks");
                    tx.take().expect("a transaction is open").rollback();
                    self.discard(db, &mut model, &mut hooks, &mut cx);
                    tx = Some(db.begin_write().expect("begin_write after a rollback"));
                }
                Op::DropTx => {
                    cx.tally.event("drops");
                    drop(tx.take());
                    self.discard(db, &mut model, &mut hooks, &mut cx);
                    tx = Some(db.begin_write().expect("begin_write after a drop"));
                }
                Op::PanicInUpdate { n } | Op::ErrInUpdate { n } => {
                    self.commit(db, tx.take(), &mut model, &mut hooks, &mut cx);
                    let inner = *next..(*next + usize::from(*n)).min(ops.len());
                    *next = inner.end;
                    let panics = matches!(op, Op::PanicInUpdate { .. });
                    self.failing_update(db, ops, inner, panics, &mut cx);
                    tx = Some(db.begin_write().expect("begin_write after a failed update"));
                }
                Op::MaxSize { n } => {
                    self.commit(db, tx.take(), &mut model, &mut hooks, &mut cx);
                    let inner = *next..(*next + usize::from(*n)).min(ops.len());
                    *next = inner.end;
                    return Next::MaxSize { index, inner };
                }
                Op::Reopen { options } => {
                    drop(tx.take());
                    self.discard(db, &mut model, &mut hooks, &mut cx);
                    return Next::Reopen(self.reopen_options(*options));
                }
                Op::ReadOnlyReopen { compact } => {
                    drop(tx.take());
                    self.discard(db, &mut model, &mut hooks, &mut cx);
                    return Next::ReadOnly {
                        index,
                        compact: *compact,
                    };
                }
                Op::OldReader => self.spawn_reader(db, &mut cx),
                Op::Sync => {
                    // Refused on this thread while it holds the writer, changing nothing...
                    cx.expect(
                        "Db::sync on the thread holding the write transaction",
                        res(db.sync()),
                        Err((ErrKind::WriteTxOnThisThread, Class::SyncOnWriterThread)),
                    );
                    // ...and after the commit, it makes every commit durable.
                    self.commit(db, tx.take(), &mut model, &mut hooks, &mut cx);
                    cx.tally.kind("sync");
                    cx.same("Db::sync", &res(db.sync()), &Ok(()));
                    self.history = vec![self.committed.clone()];
                    tx = Some(db.begin_write().expect("begin_write after a sync"));
                }
                Op::VacuumStep { pages } => {
                    self.commit(db, tx.take(), &mut model, &mut hooks, &mut cx);
                    cx.tally.kind("vacuum_step");
                    match db.vacuum_step(usize::from(*pages)) {
                        // A step that commits is durable, and so is everything before it.
                        Ok(step) if step.committed => {
                            cx.tally.event("vacuum-steps");
                            self.backing.while_held("proc.held.vacuum-steps", cx.tally);
                            self.history = vec![self.committed.clone()];
                        }
                        Ok(_) => {}
                        Err(e) => cx.fail(format_args!("vacuum_step: {e}")),
                    }
                    if let Err(e) = verify(db, &self.committed) {
                        cx.fail(format_args!("after a vacuum step: {e}"));
                    }
                    self.backing
                        .after_commit(&self.committed, Some(db), &mut cx);
                    self.backing.renew(&self.committed, db, &mut cx);
                    self.check_readers(&mut cx);
                    tx = Some(db.begin_write().expect("begin_write after a vacuum step"));
                }
                Op::Vacuum { pages, steps } => {
                    self.commit(db, tx.take(), &mut model, &mut hooks, &mut cx);
                    cx.tally.kind("vacuum");
                    let options =
                        rbolt::VacuumOptions::default().pages_per_step(usize::from(*pages));
                    let mut left = *steps;
                    let vacuumed = db.vacuum(options, |progress| {
                        if progress.finished {
                            return std::ops::ControlFlow::Continue(());
                        }
                        left -= 1;
                        if left == 0 {
                            std::ops::ControlFlow::Break(())
                        } else {
                            std::ops::ControlFlow::Continue(())
                        }
                    });
                    match vacuumed {
                        // Its steps are durable, and so is everything before them.
                        Ok(report) if report.steps > 0 => {
                            cx.tally.event("vacuum-steps");
                            self.backing.while_held("proc.held.vacuum-steps", cx.tally);
                            self.history = vec![self.committed.clone()];
                        }
                        Ok(_) => {}
                        Err(e) => cx.fail(format_args!("vacuum: {e}")),
                    }
                    if let Err(e) = verify(db, &self.committed) {
                        cx.fail(format_args!("after a vacuum: {e}"));
                    }
                    self.backing
                        .after_commit(&self.committed, Some(db), &mut cx);
                    self.backing.renew(&self.committed, db, &mut cx);
                    self.check_readers(&mut cx);
                    tx = Some(db.begin_write().expect("begin_write after a vacuum"));
                }
                Op::Crash { process, .. } if self.backing.as_sim().is_none() => {
                    cx.tally.skip(if *process {
                        "process-crash (needs the simulated file's image after a crash)"
                    } else {
                        "power-loss (needs the simulated file's crash images)"
                    });
                }
                Op::Crash { process, seed } => {
                    drop(tx.take());
                    self.discard(db, &mut model, &mut hooks, &mut cx);
                    // The image is taken before the handle goes: its clean close would make
                    // everything durable.
                    let file = self.backing.as_sim().expect("a simulated file");
                    let (sim, allowed) = if *process {
                        cx.tally.event("process-crashes");
                        let sim = file.after_process_crash().expect("a simulated file");
                        (sim, vec![self.committed.clone()])
                    } else {
                        cx.tally.event("power-losses");
                        let mut rng = Rng::new(*seed, 11);
                        let profile = CrashProfile::ALL[rng.below(CrashProfile::ALL.len())];
                        let image = file.crash_image(profile, u64::from(*seed));
                        let sim = SimFile::from_image(image).expect("a simulated file");
                        (sim, self.history.clone())
                    };
                    return Next::Crash {
                        sim,
                        allowed,
                        index,
                    };
                }
                Op::Compact { tx_max_size, page } => {
                    self.compact(db, *tx_max_size, *page, &mut cx);
                }
                Op::WriteTo => self.write_to(db, &mut cx),
                Op::CopyFile => self.copy_file(db, &mut cx),
                Op::Batch { threads, failing } => {
                    self.commit(db, tx.take(), &mut model, &mut hooks, &mut cx);
                    self.batch(db, usize::from(*threads), *failing, &mut model, &mut cx);
                    tx = Some(db.begin_write().expect("begin_write after a batch"));
                }
                _ => exec::apply(
                    db,
                    tx.as_mut().expect("a transaction is open"),
                    &mut model,
                    &self.committed,
                    &mut hooks,
                    &mut cx,
                ),
            }
            if let Some(tx) = &mut tx
                && let Err(e) = compare_tree(tx.root(), &model)
            {
                cx.fail(format_args!("the transaction differs from the model: {e}"));
            }
        }
        let mut cx = Cx::new(tally, ops.len(), &FINAL);
        self.commit(db, tx.take(), &mut model, &mut hooks, &mut cx);
        Next::Done
    }

    /// Commits: the hooks run, the database equals the model and checks clean, old readers
    /// still see their snapshots.
    fn commit(
        &mut self,
        db: &Db,
        tx: Option<WriteTx<'_>>,
        model: &mut Model,
        hooks: &mut Hooks,
        cx: &mut Cx<'_>,
    ) {
        cx.tally.event("commits");
        let tx = tx.expect("a transaction is open");
        let durable = tx.durability() != Durability::None;
        cx.tally.event(if durable {
            "durable-commits"
        } else {
            "commits-without-syncs"
        });
        if let Err(e) = tx.commit() {
            cx.fail(format_args!("commit: {e}"));
        }
        let before_hooks = model.clone();
        let after_each_hook = hooks
            .committed(model, cx.tally)
            .unwrap_or_else(|e| cx.fail(e));
        self.record(before_hooks, durable);
        for state in after_each_hook {
            // A hook's own `update` is a commit of its own, with the handle's default
            // durability (a power loss may keep any of them: the model found the first of two
            // kept, its commit synced where a meta Go must read goes).
            self.record(state, !self.options.no_sync);
        }
        self.committed = model.clone();
        if let Err(e) = verify(db, &self.committed) {
            cx.fail(format_args!("after the commit: {e}"));
        }
        self.backing.while_held("proc.held.commits", cx.tally);
        self.backing.after_commit(&self.committed, Some(db), cx);
        self.check_readers(cx);
    }

    /// Notes a committed `state`: if `durable`, a power loss can no longer go behind it. A
    /// commit that changed nothing writes nothing (and syncs nothing), so it changes nothing
    /// here either (one that changed and reverted something did sync: then the model only
    /// allows more than it must).
    fn record(&mut self, state: Model, durable: bool) {
        if self.history.last() == Some(&state) {
            return;
        }
        if durable {
            self.history = vec![state];
        } else {
            self.history.push(state);
        }
    }

    /// Opens the file a crash left: it must hold one of `allowed`, check clean, and then be
    /// what the world holds.
    fn reopen_after_crash(&mut self, sim: SimFile, allowed: Vec<Model>, cx: &mut Cx<'_>) {
        self.backing = Backing::Sim(sim);
        let db = match self.backing.open(self.options.clone()) {
            Ok(db) => db,
            Err(e) => cx.fail(format_args!("the file does not open after a crash: {e}")),
        };
        let found = allowed.iter().position(|state| verify(&db, state).is_ok());
        match found {
            Some(index) => {
                cx.tally.event(if index + 1 == allowed.len() {
                    "crash-kept-all"
                } else {
                    "crash-kept-durable"
                });
                self.committed = allowed[index].clone();
                self.history = vec![self.committed.clone()];
            }
            None => {
                let last = verify(&db, allowed.last().expect("never empty")).unwrap_err();
                cx.fail(format_args!(
                    "after a crash the file holds none of the {} committed states it may \
                     (vs the newest: {last})",
                    allowed.len()
                ));
            }
        }
    }

    /// After a rollback: the model goes back to the last commit, no hook ran, and the
    /// database still holds that commit.
    fn discard(&mut self, db: &Db, model: &mut Model, hooks: &mut Hooks, cx: &mut Cx<'_>) {
        *model = self.committed.clone();
        if let Err(e) = hooks.discarded() {
            cx.fail(e);
        }
        if let Err(e) = verify(db, &self.committed) {
            cx.fail(format_args!("after a rollback: {e}"));
        }
    }

    /// `db.update` whose closure runs `ops[inner]` and then panics or returns an error:
    /// nothing of it is committed, no hook runs, and the handle goes on working.
    fn failing_update(
        &mut self,
        db: &Db,
        ops: &[Op],
        inner: Range<usize>,
        panics: bool,
        cx: &mut Cx<'_>,
    ) {
        let mut scratch = self.committed.clone();
        let mut hooks = Hooks::default();
        let committed = &self.committed;
        let tally = &mut *cx.tally;
        let result = catch_unwind(AssertUnwindSafe(|| {
            db.update(|tx| -> rbolt::Result<()> {
                run_inner(
                    db,
                    tx,
                    ops,
                    inner,
                    &mut scratch,
                    committed,
                    &mut hooks,
                    tally,
                );
                if panics {
                    resume_unwind(Box::new(Deliberate));
                }
                Err(Error::SameBuckets)
            })
        }));
        match result {
            Err(payload) if panics && payload.is::<Deliberate>() => cx.tally.event("panics"),
            // A failure of the test inside the closure.
            Err(payload) => resume_unwind(payload),
            Ok(result) if panics => cx.fail(format_args!(
                "update returned {:?} although its closure panicked",
                result.map_err(|e| e.to_string())
            )),
            Ok(result) => {
                cx.tally.event("update-errors");
                cx.expect(
                    "update whose closure returned an error",
                    res(result),
                    Err((ErrKind::SameBuckets, Class::ClosureError)),
                );
            }
        }
        if let Err(e) = hooks.discarded() {
            cx.fail(e);
        }
        if let Err(e) = verify(db, &self.committed) {
            cx.fail(format_args!("after a failed update: {e}"));
        }
    }

    /// Reopens with `max_size` at the file's length, writes more than the file holds, and
    /// commits: `MaxSizeReached`, the database as before, the handle usable.
    fn max_size(&mut self, ops: &[Op], inner: Range<usize>, cx: &mut Cx<'_>) {
        cx.tally.event("max-size");
        self.backing
            .while_held("proc.held.max-size-reopens", cx.tally);
        let len = self.backing.len();
        let db = self.open(self.options.clone().max_size(len));
        let mut scratch = self.committed.clone();
        let mut hooks = Hooks::default();
        let mut tx = db.begin_write().expect("begin_write");
        run_inner(
            &db,
            &mut tx,
            ops,
            inner,
            &mut scratch,
            &self.committed,
            &mut hooks,
            cx.tally,
        );
        let big = vec![0x5a; len as usize + 4 * self.page_size];
        let put = res(tx
            .create_bucket_if_not_exists(BIG_BUCKET)
            .and_then(|mut b| b.put(b"value", &big)));
        cx.same("a put larger than the file", &put, &Ok(()));
        cx.expect(
            "commit past max_size",
            res(tx.commit()),
            Err((
                ErrKind::MaxSizeReached { max_size: len },
                Class::MaxSizeReached,
            )),
        );
        if let Err(e) = hooks.discarded() {
            cx.fail(e);
        }
        if let Err(e) = verify(&db, &self.committed) {
            cx.fail(format_args!("after a commit refused for max_size: {e}"));
        }
        // The handle goes on: an empty commit, and a read.
        let tx = db.begin_write().expect("begin_write after MaxSizeReached");
        cx.same("an empty commit", &res(tx.commit()), &Ok(()));
        self.backing.after_commit(&self.committed, Some(&db), cx);
        let after = db.file_len().expect("the file's length");
        if self.options.auto_shrink {
            // The commit may still write (a durable one after commits without syncs), and
            // auto-shrink then gives back the free tail: never longer, never below the mark.
            let mark = db.begin_read().expect("begin_read").meta().pgid;
            let least = mark * self.page_size as u64;
            if !(least..=len).contains(&after) {
                cx.fail(format_args!(
                    "the file's length after an empty commit with auto-shrink: {after}, \
                     outside {least}..={len}"
                ));
            }
        } else {
            cx.same("the file's length", &Some(after), &Some(len));
        }
        if let Err(e) = verify(&db, &self.committed) {
            cx.fail(format_args!("after a commit refused for max_size: {e}"));
        }
        self.fill_to_the_limit(db, len, cx);
    }

    /// Commits without syncs until the file at its `max_size` (`len`) holds no more, each
    /// accepted whole or refused with nothing changed; then every durable point at the limit
    /// succeeds: `Db::sync`, the close, and the close after a reopen at the limit (issue 46:
    /// a durable point found no page for its freelist there).
    fn fill_to_the_limit(&mut self, db: Db, len: u64, cx: &mut Cx<'_>) {
        let value = vec![0xf1; self.page_size];
        let mut refused = false;
        for round in 0..(len / self.page_size as u64 + 8) as u32 {
            let tx = db.begin_write().expect("begin_write at the limit");
            tx.set_durability(rbolt::Durability::None);
            let key = round.to_be_bytes();
            let put = tx
                .create_bucket_if_not_exists(FILL_BUCKET)
                .and_then(|mut b| b.put(key, &value))
                .and_then(|()| tx.commit());
            match put {
                Ok(()) => {
                    let fill = self
                        .committed
                        .entries
                        .entry(FILL_BUCKET.to_vec())
                        .or_insert_with(|| Item::Bucket(Model::default()));
                    if let Item::Bucket(fill) = fill {
                        fill.entries
                            .insert(key.to_vec(), Item::Value(value.clone()));
                    }
                    self.history.push(self.committed.clone());
                }
                Err(rbolt::Error::MaxSizeReached { .. }) => {
                    refused = true;
                    break;
                }
                Err(e) => cx.fail(format_args!("a commit without syncs at the limit: {e}")),
            }
            if let Err(e) = verify(&db, &self.committed) {
                cx.fail(format_args!("filling to the limit: {e}"));
            }
            self.backing.after_commit(&self.committed, Some(&db), cx);
        }
        if refused {
            cx.tally.event("filled-to-max-size");
        }
        cx.same("Db::sync at the limit", &res(db.sync()), &Ok(()));
        self.history = vec![self.committed.clone()];
        cx.same("the close at the limit", &res(db.close()), &Ok(()));
        let db = self.open(self.options.clone().max_size(len));
        cx.same(
            "a close after a reopen at the limit",
            &res(db.close()),
            &Ok(()),
        );
    }

    /// A read-only handle: it reads what was committed, refuses to write, copies, and leaves
    /// the file's bytes as they were.
    fn read_only(&mut self, compact: bool, cx: &mut Cx<'_>) {
        cx.tally.event("read-only-reopens");
        self.backing
            .while_held("proc.held.read-only-reopens", cx.tally);
        let before = self.backing.image();
        let db = self.open(self.options.clone().read_only(true));
        // No writer: the reader process reads the last one's last commit.
        self.backing.after_commit(&self.committed, None, cx);
        let refused = Err((ErrKind::DatabaseReadOnly, Class::ReadOnly));
        cx.expect(
            "begin_write on a read-only handle",
            res(db.begin_write().map(|_| ())),
            refused.clone(),
        );
        cx.expect(
            "update on a read-only handle",
            res(db.update(|_| Ok(()))),
            refused.clone(),
        );
        cx.expect(
            "batch on a read-only handle",
            res(db.batch(|_| Ok(()))),
            refused,
        );
        if compact {
            self.compact(&db, 0, 0, cx);
        } else {
            self.write_to(&db, cx);
        }
        drop(db);
        if self.backing.image() != before {
            cx.fail("a read-only handle changed the file");
        }
    }

    fn reopen_options(&self, seed: u32) -> Options {
        let mut rng = Rng::new(seed, 9);
        Options::default()
            .freelist(if rng.percent() < 50 {
                FreelistKind::Array
            } else {
                FreelistKind::Span
            })
            .no_freelist_sync(rng.percent() < 30)
            .no_grow_sync(rng.percent() < 30)
            .no_sync(rng.percent() < 25)
            .one_sync(rng.percent() < 33)
            .auto_shrink(rng.percent() < 25)
            // Ignored for an existing file, which keeps its own.
            .page_size(PAGE_SIZES[rng.below(PAGE_SIZES.len())])
            .initial_mmap_size(if rng.percent() < 20 { 1 << 20 } else { 0 })
            .alloc_size(if rng.percent() < 30 {
                4 * self.page_size as u64
            } else {
                ALLOC_SIZE_DEFAULT
            })
            // Batches cut short by size, or by a short delay.
            .max_batch_size(match rng.percent() {
                0..=19 => 1 + rng.below(2),
                _ => BATCH_SIZE_MAX_DEFAULT,
            })
            .max_batch_delay(if rng.percent() < 30 {
                Duration::from_millis(1)
            } else {
                BATCH_DELAY_MAX_DEFAULT
            })
    }

    fn spawn_reader(&mut self, db: &Arc<Db>, cx: &mut Cx<'_>) {
        if self.readers.len() >= READERS_MAX {
            let oldest = self.readers.remove(0);
            drop(oldest.requests);
            oldest.handle.join().expect("a reader thread");
        }
        cx.tally.event("old-readers");
        self.backing.hold(&self.committed, READERS_MAX, db, cx);
        let (requests, incoming) = mpsc::channel::<mpsc::Sender<Result<(), String>>>();
        let (ready, started) = mpsc::channel();
        let db = Arc::clone(db);
        let expected = self.committed.clone();
        let handle = std::thread::spawn(move || {
            let read = match db.begin_read() {
                Ok(read) => read,
                Err(e) => {
                    let _ = ready.send(Err(format!("begin_read: {e}")));
                    return;
                }
            };
            let _ = ready.send(compare_tree(read.root(), &expected));
            while let Ok(reply) = incoming.recv() {
                let errors = read.check();
                let result = compare_tree(read.root(), &expected).and_then(|()| {
                    if errors.is_empty() {
                        Ok(())
                    } else {
                        Err(format!("check found: {errors:?}"))
                    }
                });
                let _ = reply.send(result);
            }
        });
        match started.recv() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => cx.fail(format_args!("a new reader: {e}")),
            Err(_) => cx.fail("a reader thread died"),
        }
        self.readers.push(Reader { requests, handle });
    }

    fn check_readers(&self, cx: &mut Cx<'_>) {
        for reader in &self.readers {
            let (reply, result) = mpsc::channel();
            if reader.requests.send(reply).is_err() {
                cx.fail("a reader thread died");
            }
            match result.recv() {
                Ok(Ok(())) => cx.tally.event("reader-checks"),
                Ok(Err(e)) => cx.fail(format_args!(
                    "an old reader no longer sees its snapshot: {e}"
                )),
                Err(_) => cx.fail("a reader thread died"),
            }
        }
    }

    fn stop_readers(&mut self) {
        for reader in self.readers.drain(..) {
            drop(reader.requests);
            reader.handle.join().expect("a reader thread");
        }
    }

    /// `compact` into a new file: the copy equals the last commit and checks clean.
    fn compact(&mut self, db: &Db, tx_max_size: u16, page: u8, cx: &mut Cx<'_>) {
        cx.tally.event("compacts");
        self.backing.while_held("proc.held.compacts", cx.tally);
        let sim = SimFile::new().expect("a simulated file");
        let page_size = PAGE_SIZES[usize::from(page) % PAGE_SIZES.len()];
        let dst = open(&sim, Options::default().page_size(page_size)).expect("a new file");
        // One transaction, or a commit every few hundred bytes.
        let tx_max_size = match tx_max_size % 3 {
            0 => 0,
            _ => 64 + u64::from(tx_max_size % 2000),
        };
        cx.same(
            "compact",
            &res(rbolt::compact(&dst, db, tx_max_size)),
            &Ok(()),
        );
        if let Err(e) = verify(&dst, &self.committed) {
            cx.fail(format_args!("the compacted copy: {e}"));
        }
    }

    /// `ReadTx::write_to`: the copy opens and equals the last commit.
    fn write_to(&mut self, db: &Db, cx: &mut Cx<'_>) {
        cx.tally.event("write-tos");
        let mut image = Vec::new();
        let written = db.begin_read().and_then(|read| read.write_to(&mut image));
        cx.same("write_to", &res(written), &Ok(image.len() as u64));
        let sim = SimFile::from_image(image).expect("a simulated file");
        match open(&sim, Options::default()) {
            Ok(copy) => {
                if let Err(e) = verify(&copy, &self.committed) {
                    cx.fail(format_args!("the copy write_to made: {e}"));
                }
            }
            Err(e) => cx.fail(format_args!("the copy write_to made does not open: {e}")),
        }
    }

    /// `ReadTx::copy_file`: the copy opens (read-only, on a real file) and equals the last
    /// commit.
    fn copy_file(&mut self, db: &Db, cx: &mut Cx<'_>) {
        cx.tally.event("copy-files");
        let dir = self
            .dir
            .get_or_insert_with(|| tempfile::tempdir().expect("a temporary directory"));
        let path = dir.path().join("copy.db");
        let written = db.begin_read().and_then(|read| read.copy_file(&path));
        let len = std::fs::metadata(&path).map(|m| m.len()).ok();
        cx.same("copy_file", &res(written).ok(), &len);
        match Db::open_with(&path, Options::default().read_only(true)) {
            Ok(copy) => {
                if let Err(e) = verify(&copy, &self.committed) {
                    cx.fail(format_args!("the copy copy_file made: {e}"));
                }
            }
            Err(e) => cx.fail(format_args!("the copy copy_file made does not open: {e}")),
        }
        std::fs::remove_file(&path).expect("remove the copy");
    }

    /// `batch` from several threads: each call's writes are committed, except those of the
    /// call that fails, whose caller gets its error.
    fn batch(
        &mut self,
        db: &Db,
        threads: usize,
        failing: bool,
        model: &mut Model,
        cx: &mut Cx<'_>,
    ) {
        cx.tally.event("batches");
        self.backing.while_held("proc.held.batches", cx.tally);
        // Each call: its puts, and whether it fails.
        type Call = (Vec<(Vec<u8>, Vec<u8>)>, bool);
        let calls: Vec<Call> = (0..threads)
            .map(|thread| {
                let puts = (0..3)
                    .map(|j| {
                        (
                            format!("t{}-{thread}-{j}", cx.index).into_bytes(),
                            format!("written by batch call {thread}").into_bytes(),
                        )
                    })
                    .collect();
                (puts, failing && thread == 0)
            })
            .collect();
        let results: Vec<Result<(), ErrKind>> = std::thread::scope(|s| {
            let handles: Vec<_> = calls
                .iter()
                .map(|(puts, fails)| {
                    let puts = puts.clone();
                    let fails = *fails;
                    s.spawn(move || {
                        res(db.batch(move |tx| {
                            let mut bucket = tx.create_bucket_if_not_exists(BATCH_BUCKET)?;
                            for (key, value) in &puts {
                                bucket.put(key, value)?;
                            }
                            drop(bucket);
                            if fails {
                                // The bucket exists now: BucketExists.
                                tx.create_bucket(BATCH_BUCKET)?;
                            }
                            Ok(())
                        }))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("a batch thread"))
                .collect()
        });
        let before = model.clone();
        let mut succeeded: Vec<&Vec<(Vec<u8>, Vec<u8>)>> = Vec::new();
        for ((puts, fails), result) in calls.iter().zip(results) {
            cx.tally.event("batch-calls");
            if *fails {
                cx.expect(
                    "a batch call that fails",
                    result,
                    Err((ErrKind::BucketExists, Class::BatchCallError)),
                );
                continue;
            }
            cx.same("a batch call", &result, &Ok(()));
            put_batch_call(model, puts);
            succeeded.push(puts);
        }
        // Calls may commit in several transactions (a batch cut short by size or delay), in
        // any order: without syncs, a power loss may keep any of them without the others, so
        // every proper subset of the calls that succeeded is a state the file may hold
        // (CI's seed 1796688532933262189: call 1's puts without call 0's).
        if self.options.no_sync && succeeded.len() > 1 {
            for mask in 1..(1usize << succeeded.len()) - 1 {
                let mut state = before.clone();
                for (index, puts) in succeeded.iter().enumerate() {
                    if mask & (1 << index) != 0 {
                        put_batch_call(&mut state, puts);
                    }
                }
                self.history.push(state);
            }
        }
        self.committed = model.clone();
        self.record(model.clone(), !self.options.no_sync);
        if let Err(e) = verify(db, &self.committed) {
            cx.fail(format_args!("after a batch: {e}"));
        }
        self.backing.after_commit(&self.committed, Some(db), cx);
        self.check_readers(cx);
    }
}

/// Runs the in-transaction operations of `ops[inner]` inside another transaction (an
/// `update` closure, or one that will fail at commit), against `scratch`.
#[expect(
    clippy::too_many_arguments,
    reason = "the handle, the transaction and the session state it runs in, passed through"
)]
fn run_inner<'db>(
    db: &'db Db,
    tx: &mut WriteTx<'db>,
    ops: &[Op],
    inner: Range<usize>,
    scratch: &mut Model,
    committed: &Model,
    hooks: &mut Hooks,
    tally: &mut Tally,
) {
    for index in inner {
        let op = &ops[index];
        if !op.in_tx() {
            continue;
        }
        tally.ops += 1;
        let mut cx = Cx::new(&mut *tally, index, op);
        cx.db = Some(db);
        exec::apply(db, tx, scratch, committed, hooks, &mut cx);
        if let Err(e) = compare_tree(tx.root(), scratch) {
            cx.fail(format_args!("the transaction differs from the model: {e}"));
        }
    }
}

/// Applies one batch call's `puts` to `model` (in the batch bucket, made if missing).
fn put_batch_call(model: &mut Model, puts: &[(Vec<u8>, Vec<u8>)]) {
    let bucket = model
        .entries
        .entry(BATCH_BUCKET.to_vec())
        .or_insert_with(|| Item::Bucket(Model::default()));
    let Item::Bucket(bucket) = bucket else {
        unreachable!("top-level entries are buckets")
    };
    for (key, value) in puts {
        bucket
            .entries
            .insert(key.clone(), Item::Value(value.clone()));
    }
}
