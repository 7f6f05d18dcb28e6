//! One test per defect issue 21 found in the durability modes, each written to fail on the
//! code before its fix: commits made without syncs (`Durability::None`, `Options::no_sync`)
//! that let a later commit overwrite what the last durable commit reaches, a `Db::sync` that
//! raced a commit and lost track of it, a shrink that cut the file below the durable meta's
//! mark, and a vacuum made of unsynced steps. Each judges every crash image by its content,
//! not only by `check`: it must be one committed state, at or after the last durable one.

use crate::support::{content_of_sim, read_db, within};
use rbolt::storage::{Claim, CrashProfile, FaultPlan, Mapping, SimFile, Storage};
use rbolt::{Db, Durability, Options};
use rbolt_fixtures::Bucket as Model;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

/// Keys each state writes: enough for a tree of several pages.
const KEYS: u32 = 300;

/// Puts every key of bucket `b` with the value `tag`, with `durability`.
fn overwrite(db: &Db, tag: &[u8], durability: Durability) {
    let tx = db.begin_write().unwrap();
    tx.set_durability(durability);
    let mut b = tx.create_bucket_if_not_exists(b"b").unwrap();
    for i in 0..KEYS {
        b.put(format!("key{i:05}"), tag.repeat(20)).unwrap();
    }
    drop(b);
    tx.commit().unwrap();
}

/// `state` with every value of bucket `b` replaced by `tag`'s (as `overwrite` writes it).
fn with_values(state: &Model, tag: &[u8]) -> Model {
    let mut state = state.clone();
    if let Some(rbolt_fixtures::Item::Bucket(b)) = state.entries.get_mut(&b"b"[..]) {
        for item in b.entries.values_mut() {
            *item = rbolt_fixtures::Item::Value(tag.repeat(20));
        }
    }
    state
}

/// Opens `image` and returns its content if it opens and checks clean.
fn content_of(image: Vec<u8>, options: &Options) -> Result<Model, String> {
    let sim = SimFile::from_image(image).map_err(|e| e.to_string())?;
    content_of_sim(sim, options)
}

/// Judges `images` crash images of every profile: each must open, check clean and hold one of
/// `allowed` (committed states at or after the last durable one). Returns how many held each.
#[track_caller]
fn judge_images(sim: &SimFile, options: &Options, allowed: &[&Model], images: u64) -> Vec<u64> {
    let mut held = vec![0u64; allowed.len()];
    let mut bad = Vec::new();
    for profile in CrashProfile::ALL {
        for seed in 0..images {
            match content_of(sim.crash_image(profile, seed), options) {
                Ok(content) => match allowed.iter().position(|&state| *state == content) {
                    Some(index) => held[index] += 1,
                    None => bad.push(format!("{profile:?} {seed}: a state never committed")),
                },
                Err(error) => bad.push(format!("{profile:?} {seed}: {error}")),
            }
        }
    }
    assert!(
        bad.is_empty(),
        "{} of {} images are wrong, first: {}",
        bad.len(),
        5 * images,
        bad[0]
    );
    held
}

/// Defect 1: a durable commit A, then two commits without syncs B and C. Before the fix B's
/// pages (A's, rewritten) were released at C's start and C overwrote them, and C's meta went
/// to A's slot: a power loss opened A's meta over C's pages, and `check` saw nothing wrong.
#[test]
fn commits_without_syncs_never_overwrite_what_the_last_durable_commit_reaches() {
    let sim = SimFile::new().unwrap();
    let options = Options::default();
    let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
    overwrite(&db, b"A", Durability::Immediate);
    let a = read_db(&db).unwrap();
    overwrite(&db, b"B", Durability::None);
    let b = read_db(&db).unwrap();
    overwrite(&db, b"C", Durability::None);
    let c = read_db(&db).unwrap();
    // A power loss now: A, or (had they reached the disk whole) B or C; never a mix.
    judge_images(&sim, &options, &[&a, &b, &c], 60);
    // A crash of the process keeps the page cache, and with it C.
    let next = sim.after_process_crash().unwrap();
    let reopened = Db::open_storage(Arc::new(next), options.clone()).unwrap();
    assert!(read_db(&reopened).unwrap() == c, "a process crash lost C");
    drop(reopened);
    // Many more commits without syncs change nothing about that.
    for round in 0..20u32 {
        overwrite(&db, format!("N{round}").as_bytes(), Durability::None);
    }
    let last = read_db(&db).unwrap();
    let held = judge_images(&sim, &options, &[&a, &last], 20);
    assert!(held[0] > 0, "some power losses must find A: {held:?}");
    // Closing makes the newest commit durable: every image holds it.
    db.close().unwrap();
    let held = judge_images(&sim, &options, &[&last], 10);
    assert_eq!(held, [50]);
}

/// A storage whose next `sync_data` after `arm` stops once it is done, until `release` (or a
/// second has passed): the moment between `Db::sync`'s fdatasync and its bookkeeping.
#[derive(Debug, Clone)]
struct PauseAfterSync {
    inner: SimFile,
    armed: Arc<AtomicBool>,
    /// (paused, released)
    state: Arc<(Mutex<(bool, bool)>, Condvar)>,
}

impl PauseAfterSync {
    fn new(inner: SimFile) -> PauseAfterSync {
        PauseAfterSync {
            inner,
            armed: Arc::new(AtomicBool::new(false)),
            state: Arc::new((Mutex::new((false, false)), Condvar::new())),
        }
    }

    fn wait_paused(&self) {
        let (lock, cond) = &*self.state;
        let guard = lock.lock().unwrap();
        drop(cond.wait_while(guard, |(paused, _)| !*paused).unwrap());
    }

    fn release(&self) {
        let (lock, cond) = &*self.state;
        lock.lock().unwrap().1 = true;
        cond.notify_all();
    }
}

impl Storage for PauseAfterSync {
    fn len(&self) -> std::io::Result<u64> {
        self.inner.len()
    }
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> std::io::Result<()> {
        self.inner.read_exact_at(buf, offset)
    }
    fn write_all_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_all_at(buf, offset)
    }
    fn read_durable(&self, buf: &mut [u8], offset: u64) -> std::io::Result<bool> {
        self.inner.read_durable(buf, offset)
    }
    fn write_whole_at(&self, buf: &[u8], offset: u64) -> std::io::Result<()> {
        self.inner.write_whole_at(buf, offset)
    }
    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> std::io::Result<()> {
        self.inner.write_vectored_at(bufs, offset)
    }
    fn sync_data(&self) -> std::io::Result<()> {
        let result = self.inner.sync_data();
        if self.armed.swap(false, Ordering::AcqRel) {
            let (lock, cond) = &*self.state;
            let mut guard = lock.lock().unwrap();
            guard.0 = true;
            cond.notify_all();
            let (guard, _) = cond
                .wait_timeout_while(guard, Duration::from_secs(1), |(_, released)| !*released)
                .unwrap();
            drop(guard);
        }
        result
    }
    fn sync_all(&self) -> std::io::Result<()> {
        self.inner.sync_all()
    }
    fn grow(&self, len: u64) -> std::io::Result<()> {
        self.inner.grow(len)
    }
    fn shrink(&self, len: u64) -> std::io::Result<()> {
        self.inner.shrink(len)
    }
    fn map(&self, len: usize) -> std::io::Result<Mapping> {
        self.inner.map(len)
    }
    fn path(&self) -> Option<&Path> {
        None
    }
    fn claim(&self) -> std::io::Result<Claim> {
        self.inner.claim()
    }
    fn boot_id(&self) -> Option<rbolt::storage::BootId> {
        self.inner.boot_id()
    }
}

/// Runs `Db::sync` on a thread with its storage paused right after the fdatasync, and a
/// commit without syncs (`racing`) on another thread meanwhile; returns once both are done.
/// Before the fix the commit landed inside the pause and `Db::sync` then cleared the flag
/// that said it was not yet durable.
fn sync_racing_a_commit(db: &Arc<Db>, storage: &PauseAfterSync, racing: fn(&Db)) {
    storage.armed.store(true, Ordering::Release);
    let syncer = {
        let db = db.clone();
        std::thread::spawn(move || db.sync().unwrap())
    };
    storage.wait_paused();
    let committer = {
        let db = db.clone();
        std::thread::spawn(move || racing(&db))
    };
    // Fixed, the commit waits for the sync: give it the time it would need otherwise.
    std::thread::sleep(Duration::from_millis(100));
    storage.release();
    syncer.join().unwrap();
    committer.join().unwrap();
}

/// Defect 2: `Db::sync` racing a commit without syncs. The next durable commit then skipped
/// the sync that protects the racing commit's freed pages, reused them, and a crash in it
/// destroyed the last durable state.
#[test]
fn a_sync_racing_a_commit_without_syncs_keeps_the_last_durable_state() {
    let options = Options::default();
    // One run per crash point of the durable commit after the race.
    let mut crash_points = 0;
    for crash_at in 0.. {
        let sim = SimFile::new().unwrap();
        let storage = PauseAfterSync::new(sim.clone());
        let db = Arc::new(Db::open_storage(Arc::new(storage.clone()), options.clone()).unwrap());
        overwrite(&db, b"A", Durability::Immediate);
        overwrite(&db, b"B", Durability::None);
        let b = read_db(&db).unwrap();
        sync_racing_a_commit(&db, &storage, |db| overwrite(db, b"C", Durability::None));
        let c = read_db(&db).unwrap();
        let start = sim.op_count();
        sim.set_fault_plan(FaultPlan::new().crash_at(start + crash_at));
        let tx = db.begin_write().unwrap();
        let mut bucket = tx.bucket_mut(b"b").unwrap().unwrap();
        for i in 0..KEYS {
            bucket.put(format!("key{i:05}"), b"D".repeat(20)).unwrap();
        }
        drop(bucket);
        let committed = tx.commit().is_ok();
        if committed {
            break;
        }
        let d = with_values(&c, b"D");
        crash_points += 1;
        // B was made durable by the sync; C and D may or may not have reached the disk.
        judge_images(&sim, &options, &[&b, &c, &d], 12);
    }
    assert!(crash_points >= 3, "the durable commit has writes and syncs");
}

/// Defect 3: after the same race, the shrink at commit (`Options::auto_shrink`) trusted the
/// lost flag and cut the file below the mark of the durable meta: the image failed to open
/// with `Error::Truncated`.
#[test]
fn a_shrink_never_cuts_below_the_durable_metas_mark() {
    let options = Options::default().auto_shrink(true);
    let sim = SimFile::new().unwrap();
    let storage = PauseAfterSync::new(sim.clone());
    let db = Arc::new(Db::open_storage(Arc::new(storage.clone()), options.clone()).unwrap());
    // A file of many pages, durable.
    {
        let tx = db.begin_write().unwrap();
        let mut b = tx.create_bucket(b"b").unwrap();
        for i in 0..20 * KEYS {
            b.put(format!("key{i:05}"), [7u8; 100]).unwrap();
        }
        drop(b);
        tx.commit().unwrap();
    }
    let long = sim.len().unwrap();
    overwrite(&db, b"X", Durability::None);
    let x = read_db(&db).unwrap();
    // Without syncs, while `Db::sync` makes X durable: everything but a few keys goes, and
    // the commit lowers the mark.
    sync_racing_a_commit(&db, &storage, |db| {
        let tx = db.begin_write().unwrap();
        tx.set_durability(Durability::None);
        let mut b = tx.bucket_mut(b"b").unwrap().unwrap();
        for i in 10..20 * KEYS {
            b.delete(format!("key{i:05}")).unwrap();
        }
        drop(b);
        tx.commit().unwrap();
    });
    let small = read_db(&db).unwrap();
    // A reader's end, and a commit, try the waiting truncation.
    drop(db.begin_read().unwrap());
    overwrite(&db, b"Y", Durability::None);
    let last = read_db(&db).unwrap();
    drop(db.begin_read().unwrap());
    // X is durable; what came after may be lost, but nothing X needs may be cut.
    judge_images(&sim, &options, &[&x, &small, &last], 12);
    // Once the small state is durable its freed pages can be cut off: the next durable
    // commits lower the mark and the file follows.
    db.sync().unwrap();
    for tag in [&b"Z1"[..], b"Z2"] {
        overwrite(&db, tag, Durability::Immediate);
    }
    let cut = sim.len().unwrap();
    assert!(cut < long / 2, "the file was not cut: {long} -> {cut}");
    let last = read_db(&db).unwrap();
    judge_images(&sim, &options, &[&last], 4);
}

/// Defect 4: under `Options::no_sync` the vacuum's steps were commits without syncs, though
/// each is documented as durable: 0 syncs, the file never cut, and no crash image held the
/// content.
#[test]
fn every_vacuum_step_is_durable_even_under_no_sync() {
    let options = Options::default().no_sync(true);
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
    for round in 0..10u32 {
        let tx = db.begin_write().unwrap();
        let mut b = tx.create_bucket_if_not_exists(b"b").unwrap();
        for i in 0..KEYS {
            b.put(format!("r{round:02}-{i:05}"), [round as u8; 100])
                .unwrap();
        }
        drop(b);
        tx.commit().unwrap();
    }
    thin_out_rounds(&db);
    let content = read_db(&db).unwrap();
    let before = sim.counts();
    let len_before = sim.len().unwrap();
    let report = within(Duration::from_secs(60), {
        let db = Arc::new(db);
        move || {
            let report = db
                .vacuum(rbolt::VacuumOptions::default().pages_per_step(8), |_| {
                    std::ops::ControlFlow::Continue(())
                })
                .unwrap();
            (report, db)
        }
    });
    let (report, db) = report;
    let syncs = sim.counts().since(before).syncs();
    assert!(report.steps > 1, "{report:?}");
    assert!(
        syncs >= 2 * report.steps,
        "{syncs} syncs for {} steps",
        report.steps
    );
    assert!(sim.len().unwrap() < len_before, "the vacuum cut the file");
    // Everything is durable now: every image holds the content.
    judge_images(&sim, &options, &[&content], 8);
    drop(db);
}

/// Deletes most keys of every round but one, without syncs.
fn thin_out_rounds(db: &Db) {
    let tx = db.begin_write().unwrap();
    let mut b = tx.bucket_mut(b"b").unwrap().unwrap();
    for round in 1..10u32 {
        for i in 0..KEYS {
            b.delete(format!("r{round:02}-{i:05}")).unwrap();
        }
    }
    drop(b);
    tx.commit().unwrap();
}

/// Found by the interleavings suite: a durable commit that changed nothing wrote nothing and
/// synced nothing, so the commits without syncs before it — which `Durability::Immediate`
/// promises durable once its commit returns — were still lost to a power loss.
#[test]
fn a_durable_commit_that_changes_nothing_still_makes_the_commits_before_it_durable() {
    let sim = SimFile::new().unwrap();
    let options = Options::default();
    let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
    overwrite(&db, b"A", Durability::Immediate);
    overwrite(&db, b"B", Durability::None);
    let b = read_db(&db).unwrap();
    let before = sim.counts();
    let tx = db.begin_write().unwrap();
    assert_eq!(tx.durability(), Durability::Immediate);
    // Deleting a key that is not there changes nothing.
    tx.bucket_mut(b"b")
        .unwrap()
        .unwrap()
        .delete(b"absent")
        .unwrap();
    tx.commit().unwrap();
    assert_eq!(
        sim.counts().since(before).syncs(),
        2,
        "the data, then the meta"
    );
    let held = judge_images(&sim, &options, &[&b], 20);
    assert_eq!(held, [100]);
    // With nothing outstanding, an empty durable commit is free again.
    let before = sim.counts();
    db.update(|_| Ok::<_, rbolt::Error>(())).unwrap();
    assert_eq!(sim.counts().since(before).syncs(), 0);
}
