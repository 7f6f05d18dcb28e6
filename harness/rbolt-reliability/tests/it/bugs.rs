//! One small test per bug the suites found in rbolt, each the smallest case that showed it.
//! All are fixed; these keep them fixed (the suites would find them too, among many cases).

use rbolt::storage::{CrashProfile, FaultError, FaultPlan, OpKind, SimFile};
use rbolt::{Db, Options};
use rbolt_reliability::hostile::{crafted_files, cycles, fix_meta_checksum, shapes};
use rbolt_reliability::model::read_db;
use rbolt_reliability::workload::{Workload, commit_step};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A new file's initialisation is one write of four pages and one sync. A power loss before
/// the sync can keep the sectors of both metas and lose those of the root leaf (page 3): the
/// metas then point at a page of zeros. Such a file must not open (a clear error is fine
/// before the first commit) — today it opens and its check fails.
#[test]
fn a_torn_initialisation_never_opens_as_a_corrupt_database() {
    let sim = SimFile::new().unwrap();
    // Crash at the initialisation's sync: operation 0 is `len`, 1 the write, 2 the sync.
    sim.set_fault_plan(FaultPlan::new().crash_at(2));
    assert!(Db::open_storage(Arc::new(sim.clone()), Options::default()).is_err());
    assert_eq!(sim.op_log()[1], OpKind::Write);
    let mut corrupt = Vec::new();
    for seed in 0..200 {
        let image = sim.crash_image(CrashProfile::Torn, seed);
        let reopened = SimFile::from_image(image).unwrap();
        if let Ok(db) = Db::open_storage(Arc::new(reopened), Options::default()) {
            let errors = db.view(|tx| Ok::<_, rbolt::Error>(tx.check())).unwrap();
            if !errors.is_empty() {
                corrupt.push((seed, errors[0].to_string()));
            }
        }
    }
    assert!(
        corrupt.is_empty(),
        "{} torn images of a new file open but fail their check, e.g. seed {}: {}",
        corrupt.len(),
        corrupt[0].0,
        corrupt[0].1
    );
}

/// An I/O error while reading a meta at open must be reported. Today it counts as an invalid
/// meta: the open falls back to the other, older meta, and the last acknowledged commit is
/// gone (the next commit then overwrites its meta).
#[test]
fn a_meta_read_error_at_open_is_reported_not_skipped() {
    let sim = SimFile::new().unwrap();
    let workload = Workload::new(1, rbolt::PAGE_SIZE_DEFAULT);
    let mut model = Default::default();
    {
        let db = Db::open_storage(Arc::new(sim.clone()), Options::default()).unwrap();
        // One commit: txid 2, written to meta page 0; meta page 1 still holds txid 1.
        commit_step(&db, &workload.step(1, &mut model)).unwrap();
    }
    // The open's operations: the length, a read of meta 0 for the page size, then both metas.
    for nth in 0..4 {
        let op = sim.op_count() + nth;
        sim.set_fault_plan(FaultPlan::new().fail_at(op, FaultError::Io));
        if let Ok(db) = Db::open_storage(Arc::new(sim.clone()), Options::default()) {
            let state = read_db(&db).unwrap();
            assert!(
                state == model,
                "operation {op} ({:?}) failed with EIO, and the open went on with an older meta: the acknowledged commit is invisible",
                sim.op_log()[op as usize]
            );
        }
    }
}

/// A meta whose txid is `u64::MAX` passes validation. Beginning a read transaction adds one
/// to it: a panic in debug builds, and in release a wrap to 0 — the reader table's "free"
/// marker, so the reader is invisible to the writer. The next write transaction adds one too:
/// in release it commits as txid 0, and a reopen picks the `u64::MAX` meta again, so the
/// acknowledged commit is gone.
#[test]
fn a_meta_with_the_largest_txid_is_an_error_not_a_panic_or_a_lost_commit() {
    let shape = shapes(false)
        .into_iter()
        .find(|s| s.name == "one-key")
        .unwrap();
    let mut image = shape.image.clone();
    // Meta 1 (an odd txid belongs on page 1) becomes the newest.
    let txid_offset = shape.page_size + 16 + 48;
    image[txid_offset..txid_offset + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    fix_meta_checksum(&mut image, shape.page_size, 1);
    for read_only in [true, false] {
        let sim = SimFile::from_image(image.clone()).unwrap();
        let result = catch_unwind(AssertUnwindSafe(|| {
            let options = Options::default().read_only(read_only);
            if let Ok(db) = Db::open_storage(Arc::new(sim), options) {
                let _ = db.view(|tx| Ok::<_, rbolt::Error>(tx.check()));
            }
        }));
        assert!(
            result.is_ok(),
            "a meta with txid u64::MAX panics (read-only: {read_only})"
        );
    }
    let sim = SimFile::from_image(image).unwrap();
    let committed = catch_unwind(AssertUnwindSafe(|| {
        let Ok(db) = Db::open_storage(Arc::new(sim.clone()), Options::default()) else {
            return true;
        };
        if db
            .update(|tx| tx.bucket_mut(b"b")?.expect("b").put(b"new", b"value"))
            .is_err()
        {
            return true;
        }
        drop(db);
        let Ok(db) = Db::open_storage(Arc::new(sim), Options::default()) else {
            return true;
        };
        db.view(|tx| {
            Ok::<_, rbolt::Error>(
                tx.bucket(b"b")?
                    .and_then(|b| b.get(b"new").ok().flatten())
                    .is_some(),
            )
        })
        .unwrap_or(true)
    }));
    assert!(
        matches!(committed, Ok(true)),
        "a commit on a file whose meta has txid u64::MAX panics or is lost on reopen"
    );
}

/// Runs `rbolt-crash-child hostile-walk FILE WHAT` on `image` and demands that it ends,
/// in time and by itself.
fn walk_in_child(image: &[u8], what: &str) -> Result<(), String> {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("case.db");
    std::fs::write(&path, image).unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_rbolt-crash-child"))
        .arg("hostile-walk")
        .arg(&path)
        .arg(what)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let started = Instant::now();
    let limit = Duration::from_secs(10);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let output = child.wait_with_output().unwrap();
            let stderr = String::from_utf8_lossy(&output.stderr);
            let last = stderr.lines().rfind(|l| !l.starts_with(' ')).unwrap_or("");
            return if status.success() {
                Ok(())
            } else {
                Err(format!("{what} died ({status}): {last}"))
            };
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(format!("{what} did not end within {limit:?}"));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

fn crafted(name: &str) -> Vec<u8> {
    crafted_files()
        .into_iter()
        .find(|(what, _)| what.contains(name))
        .unwrap_or_else(|| panic!("no crafted file {name}"))
        .1
}

/// `Bucket::stats` recurses into nested buckets with no record of the pages it has seen: a
/// bucket value whose root is an ancestor's page makes it recurse up to `BUCKET_DEPTH_MAX`
/// levels, which overflows a 2 MiB stack in debug builds (`check` stops at the page reached
/// twice).
#[test]
fn bucket_stats_of_a_bucket_rooted_at_its_ancestor_end() {
    let shape = shapes(false)
        .into_iter()
        .find(|s| s.name == "nested")
        .unwrap();
    let (_, image) = cycles(&shape)
        .into_iter()
        .find(|(what, _)| what.contains("rooted at the root page"))
        .unwrap();
    walk_in_child(&image, "stats").unwrap();
}

/// 1000 nested buckets, each a 63-level tree (a chain of one-child branch pages): within
/// `DEPTH_MAX` and `BUCKET_DEPTH_MAX`, yet the recursive walks nest some 63,000 calls and
/// overflow a 2 MiB stack, in debug and release builds alike. `check` does...
#[test]
fn check_of_deep_nesting_within_the_limits_ends() {
    walk_in_child(
        &crafted("1000 nested buckets, each a 62-deep chain of branch pages (freelist)"),
        "check",
    )
    .unwrap();
}

/// ...so does opening such a file read-write when it keeps no freelist (the open walks every
/// reachable page to rebuild it)...
#[test]
fn opening_deep_nesting_without_a_freelist_ends() {
    walk_in_child(
        &crafted("1000 nested buckets, each a 62-deep chain of branch pages (no freelist)"),
        "open-read-write",
    )
    .unwrap();
}

/// ...and so does `Bucket::stats`.
#[test]
fn bucket_stats_of_deep_nesting_within_the_limits_end() {
    walk_in_child(
        &crafted("1000 nested buckets, each a 62-deep chain of branch pages (freelist)"),
        "stats",
    )
    .unwrap();
}

/// 50 branch pages, each with two children that are both the next page: `Bucket::stats`
/// visits the last page 2^50 times.
#[test]
fn bucket_stats_of_a_dag_of_branch_pages_end() {
    walk_in_child(
        &crafted("DAG of 50 branch pages over an one-entry leaf"),
        "stats",
    )
    .unwrap();
}

/// The same DAG over an empty leaf: the cursor's `first` steps over 2^50 empty leaves
/// before it can return.
#[test]
fn iterating_a_dag_of_empty_pages_ends() {
    walk_in_child(
        &crafted("DAG of 50 branch pages over an empty leaf"),
        "iterate",
    )
    .unwrap();
}
