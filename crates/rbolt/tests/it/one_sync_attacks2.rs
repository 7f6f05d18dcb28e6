//! Attacks on issue 51's second landing from outside: a one-sync commit writes no freelist page
//! (its meta says "none"; the open after a crash rebuilds the freelist by walking the tree, and
//! the close writes one with a meta in Go's form), and a commit that asked for one sync but
//! syncs twice writes a meta in Go's form with no freelist page. Each attack is a path that ends
//! with such a meta newest — a close, a close that fails or is killed, the open after a crash
//! and a kill inside it, a full disk, `max_size`, a vacuum step, `auto_shrink` — and what must
//! hold after it: rbolt opens the file with `check` clean (no leak, no page used twice), and
//! the meta a clean close or a read-write open leaves newest is in Go's form, with its freelist.

use crate::one_sync::{content, reopen, sim_db};
use crate::support::assert_clean;
use rbolt::storage::{CrashProfile, FaultError, FaultPlan, OpKind, SimFile};
use rbolt::{Db, Durability, FreelistKind, Options};
use rbolt_page::{Meta, MetaDurability, Pgid, read_meta, read_meta_page};
use std::collections::BTreeMap;
use std::sync::Arc;

type Content = BTreeMap<Vec<u8>, Vec<u8>>;

/// The newest meta of `image` (pages of `page` bytes) that reads in any form, with its kind.
fn newest(image: &[u8], page: usize) -> (Meta, MetaDurability) {
    (0..2)
        .filter_map(|slot| {
            read_meta_page(&image[slot * page..(slot + 1) * page], Pgid(slot as u64)).ok()
        })
        .max_by_key(|(meta, _)| meta.txid)
        .expect("a meta")
}

/// The newest meta Go bbolt would open (its plain checksum only).
fn go_newest(image: &[u8], page: usize) -> Option<Meta> {
    (0..2)
        .filter_map(|slot| {
            read_meta(&image[slot * page..(slot + 1) * page], Pgid(slot as u64)).ok()
        })
        .max_by_key(|meta| meta.txid)
}

/// Asserts that what a clean close (or a read-write open) left is what Go reads: the newest
/// meta of any kind is in Go's form, and names a freelist page unless `no_freelist`.
fn assert_go_form(image: &[u8], page: usize, no_freelist: bool, what: &str) {
    let (meta, kind) = newest(image, page);
    assert_eq!(kind, MetaDurability::Durable, "{what}: the newest meta");
    let go = go_newest(image, page).expect("a meta in Go's form");
    assert_eq!(go.txid, meta.txid, "{what}: Go would open an older commit");
    assert_eq!(
        go.has_freelist(),
        !no_freelist,
        "{what}: the freelist field of the meta Go opens"
    );
}

/// One commit of churn on bucket "b" (puts, deletes, an overflow value that comes and goes),
/// with `durability` if given (else the handle's): the shape that frees and reuses pages.
fn churn(db: &Db, round: u32, durability: Option<Durability>) {
    let tx = db.begin_write().unwrap();
    if let Some(durability) = durability {
        tx.set_durability(durability);
    }
    let mut b = tx.create_bucket_if_not_exists("b").unwrap();
    for i in 0..150u32 {
        let key = format!("k{:05}", (i * 7 + round * 13) % 900);
        b.put(key, [round as u8; 40]).unwrap();
    }
    for i in 0..50u32 {
        b.delete(format!("k{:05}", (i * 11 + round * 17) % 900))
            .unwrap();
    }
    if round.is_multiple_of(3) {
        b.put("overflow", vec![round as u8; 3 * 4096]).unwrap();
    } else {
        b.delete("overflow").unwrap();
    }
    drop(b);
    tx.commit().unwrap();
}

/// A handle on a new simulated file after `rounds` one-sync commits of churn: the newest meta
/// is a one-sync meta naming no freelist page.
fn churned(options: Options, rounds: u32) -> (SimFile, Db) {
    let (sim, db) = sim_db(options.one_sync(true));
    for round in 0..rounds {
        churn(&db, round, None);
    }
    let (meta, kind) = newest(&sim.live_image().unwrap(), 4096);
    assert_eq!(kind, MetaDurability::OneSync);
    assert!(
        !meta.has_freelist(),
        "a one-sync meta names a freelist page"
    );
    (sim, db)
}

/// Every way a handle whose last durable meta is a one-sync one (no freelist page) can reach
/// its close: more one-sync commits (a reader holding an old snapshot across some), commits
/// without syncs after them, `Db::sync`, vacuum steps, `auto_shrink` emptying the file, the
/// span freelist, `no_freelist_sync`. The close leaves a meta in Go's form newest, durable,
/// with the freelist page the handle kept in memory: reopened, `check` finds every page
/// below the mark reachable or free, never both (a freelist kept wrong across one-sync
/// commits, which no page shows until the close writes one, would show here).
#[test]
fn every_path_to_the_close_after_one_sync_commits_leaves_go_a_sound_freelist() {
    type Steps = fn(&Db);
    let cases: Vec<(&str, Options, Steps)> = vec![
        ("one-sync commits", Options::default(), |db| {
            let reader = db.begin_read().unwrap();
            for round in 10..14 {
                churn(db, round, None);
            }
            drop(reader);
            churn(db, 14, None);
        }),
        ("then commits without syncs", Options::default(), |db| {
            churn(db, 10, Some(Durability::None));
            churn(db, 11, Some(Durability::None));
        }),
        ("then Db::sync", Options::default(), |db| {
            churn(db, 10, Some(Durability::None));
            db.sync().unwrap();
        }),
        ("then a two-sync commit", Options::default(), |db| {
            churn(db, 10, Some(Durability::Immediate));
            churn(db, 11, None);
        }),
        ("vacuum steps between", Options::default(), |db| {
            db.update(|tx| {
                let mut b = tx.bucket_mut("b")?.unwrap();
                for i in (0..900u32).filter(|i| i % 5 != 0) {
                    b.delete(format!("k{i:05}"))?;
                }
                Ok::<_, rbolt::Error>(())
            })
            .unwrap();
            for _ in 0..3 {
                db.vacuum_step(8).unwrap();
                churn(db, 10, None);
            }
        }),
        (
            "a whole vacuum, then one-sync commits",
            Options::default(),
            |db| {
                db.update(|tx| {
                    let mut b = tx.bucket_mut("b")?.unwrap();
                    for i in (0..900u32).filter(|i| i % 4 != 0) {
                        b.delete(format!("k{i:05}"))?;
                    }
                    Ok::<_, rbolt::Error>(())
                })
                .unwrap();
                let options = rbolt::VacuumOptions::default().pages_per_step(8);
                let report = db
                    .vacuum(options, |_| std::ops::ControlFlow::Continue(()))
                    .unwrap();
                assert!(report.steps > 0, "the vacuum did nothing");
                churn(db, 10, None);
                churn(db, 11, None);
            },
        ),
        ("auto_shrink", Options::default().auto_shrink(true), |db| {
            churn(db, 10, None);
            db.update(|tx| tx.delete_bucket("b")).unwrap();
            churn(db, 11, None);
        }),
        (
            "the span freelist",
            Options::default().freelist(FreelistKind::Span),
            |db| churn(db, 10, None),
        ),
        (
            "no_freelist_sync",
            Options::default().no_freelist_sync(true),
            |db| churn(db, 10, None),
        ),
    ];
    for (what, options, steps) in cases {
        let no_freelist = options.no_freelist_sync;
        let (sim, db) = churned(options.clone(), 10);
        steps(&db);
        let expected = content(&db);
        // A kill instead of the close: the open after it (same boot) shows every commit,
        // clean, and leaves a meta in Go's form.
        let killed = sim.after_process_crash().unwrap();
        let reopened = Db::open_storage(Arc::new(killed.clone()), options.clone()).unwrap();
        assert_clean(&reopened);
        assert_eq!(content(&reopened), expected, "{what}: after a kill");
        assert_go_form(&killed.live_image().unwrap(), 4096, no_freelist, what);
        drop(reopened);
        db.close().unwrap();
        let image = sim.live_image().unwrap();
        assert_go_form(&image, 4096, no_freelist, what);
        assert_eq!(reopen(image), expected, "{what}");
        // Durable: a power loss after the close keeps it (a truncation of the file may still
        // be pending, which either way is sound).
        let durable = sim.durable_image();
        assert_go_form(&durable, 4096, no_freelist, what);
        assert_eq!(reopen(durable), expected, "{what}: after a power loss");
    }
}

/// The images a crash of `sim` can leave: the page cache as a killed process leaves it (same
/// boot; and cut inside the copy into the mapping it stopped, if any), and power losses that
/// drop, keep by halves, tear or garble the writes since the last sync.
fn crash_images(sim: &SimFile, seed: u64) -> Vec<(&'static str, Vec<u8>)> {
    let kill = sim.after_process_crash().unwrap().live_image().unwrap();
    let mut images = vec![
        ("a kill", kill),
        (
            "a power loss, nothing kept",
            sim.crash_image(CrashProfile::DropAll, seed),
        ),
        (
            "a power loss, halves kept",
            sim.crash_image(CrashProfile::Random, seed),
        ),
        (
            "a power loss, torn",
            sim.crash_image(CrashProfile::Torn, seed),
        ),
        (
            "a power loss, garbled",
            sim.crash_image(CrashProfile::Garbage, seed),
        ),
    ];
    // A kill inside a copy into the mapping leaves any 8-byte-aligned prefix of it.
    if let Some(len) = sim.torn_copy_len() {
        let cut = (seed as usize * 8) % len.max(8);
        let copy = sim.after_process_crash_torn(cut).unwrap();
        images.push(("a kill inside a copy", copy.live_image().unwrap()));
    }
    images
}

/// A crash at any operation of the close's commit in Go's form (its freelist page, the first
/// sync, the meta, the second sync): every image opens with the content (the close changes
/// none), `check` clean, and the read-write open leaves a meta in Go's form newest. The
/// freelist page the close writes lands in a page free as of the one-sync meta, perhaps one
/// of the meta before it, which a crash before the close's meta needs no more: the one-sync
/// meta is durable.
#[test]
fn a_crash_anywhere_in_the_close_after_one_sync_commits_loses_nothing() {
    let setup = || churned(Options::default(), 12);
    let (sim, db) = setup();
    let expected = content(&db);
    let first = sim.op_count();
    db.close().unwrap();
    let last = sim.op_count();
    assert!(
        last - first >= 4,
        "the close wrote no commit: {first}..{last}"
    );
    for op in first..last {
        let (sim, db) = setup();
        sim.set_fault_plan(FaultPlan::new().crash_at(op));
        assert!(
            db.close().is_err(),
            "op {op}: the close did not see the crash"
        );
        for (what, image) in crash_images(&sim, op) {
            let reopened = SimFile::from_image(image).unwrap();
            let db = Db::open_storage(Arc::new(reopened.clone()), Options::default()).unwrap();
            assert_clean(&db);
            assert_eq!(content(&db), expected, "op {op}, {what}");
            assert_go_form(&reopened.live_image().unwrap(), 4096, false, what);
            drop(db);
            assert_eq!(
                reopen(reopened.durable_image()),
                expected,
                "op {op}, {what}"
            );
        }
    }
}

/// The open after a kill that stopped a one-sync commit before its sync (its meta and pages
/// in the page cache only) trusts that meta, rebuilds the freelist by walking its tree — so
/// every page only the meta before it reaches counts as free — and then writes a commit in
/// Go's form, whose freelist page may land on such a page. A kill or power loss at any
/// operation of that open, and a power loss after it, must open one of the two states, clean:
/// the meta before stays whole until the one the open trusts is durable (the open syncs it
/// before it writes anything else).
#[test]
fn a_crash_anywhere_in_the_open_after_a_killed_one_sync_commit_opens_a_whole_state() {
    // The last commit frees most of the tree the meta before reaches.
    let last_commit = |db: &Db| {
        db.update(|tx| {
            let mut b = tx.bucket_mut("b")?.unwrap();
            for i in (0..900u32).filter(|i| i % 3 != 0) {
                b.delete(format!("k{i:05}"))?;
            }
            b.put("last", "commit")
        })
    };
    let (probe_sim, probe) = churned(Options::default(), 12);
    let before = content(&probe);
    let first = probe_sim.op_count();
    last_commit(&probe).unwrap();
    let after = content(&probe);
    let log = probe_sim.op_log();
    let sync_op = (first..probe_sim.op_count())
        .rev()
        .find(|&op| matches!(log[op as usize], OpKind::SyncData | OpKind::SyncAll))
        .expect("the commit's sync");
    drop(probe);
    // Killed at its sync: the commit is in the page cache, not on the disk.
    let (sim, db) = churned(Options::default(), 12);
    sim.set_fault_plan(FaultPlan::new().crash_at(sync_op));
    assert!(last_commit(&db).is_err());
    std::mem::forget(db);
    let killed = sim.after_process_crash().unwrap();
    assert!(killed.has_pending());
    let read_only = Db::open_storage(
        Arc::new(killed.after_process_crash().unwrap()),
        Options::default().read_only(true),
    )
    .unwrap();
    assert_clean(&read_only);
    assert_eq!(content(&read_only), after, "the read-only open");
    drop(read_only);
    // How many operations the read-write open makes.
    let counted = killed.after_process_crash().unwrap();
    drop(Db::open_storage(Arc::new(counted.clone()), Options::default()).unwrap());
    let open_ops = counted.op_count();
    assert!(open_ops > 4, "{open_ops} operations");
    let (mut found_before, mut found_after) = (0, 0);
    for op in 0..open_ops {
        let copy = killed.after_process_crash().unwrap();
        copy.set_fault_plan(FaultPlan::new().crash_at(op));
        if let Ok(db) = Db::open_storage(Arc::new(copy.clone()), Options::default()) {
            std::mem::forget(db); // the crash came in the close's commit
        }
        for (what, image) in crash_images(&copy, op) {
            let found = reopen(image);
            assert!(
                found == before || found == after,
                "op {op}, {what}: a state never committed"
            );
            if found == after {
                found_after += 1;
            } else {
                found_before += 1;
            }
        }
    }
    // Both outcomes are allowed; both must turn up, or the crashes missed the window.
    println!(
        "the open's crashes: {found_after} opened the killed commit, {found_before} the one before"
    );
    assert!(
        found_after > 0 && found_before > 0,
        "{found_after} {found_before}"
    );
}

/// A full disk (ENOSPC) or a failing device (EIO) at any one operation of the close's commit
/// in Go's form: the close may fail (and say so), and the file keeps the one-sync meta newest,
/// durable. The next open — after the process goes, in the same boot, after a failed sync's
/// dropped pages, or after a power loss — finds the content, `check` clean, and leaves a meta
/// in Go's form.
#[test]
fn a_close_that_fails_at_any_operation_leaves_a_file_rbolt_opens_and_go_reads_after() {
    let setup = || churned(Options::default(), 12);
    let (sim, db) = setup();
    let expected = content(&db);
    let first = sim.op_count();
    db.close().unwrap();
    let last = sim.op_count();
    let mut failed_closes = 0;
    for op in first..last {
        for error in [FaultError::NoSpace, FaultError::Io] {
            let (sim, db) = setup();
            sim.set_fault_plan(FaultPlan::new().fail_at(op, error));
            if db.close().is_err() {
                failed_closes += 1;
            }
            sim.set_fault_plan(FaultPlan::new());
            let mut images = vec![
                ("the next process", sim.after_process_crash().unwrap()),
                ("after a failed sync", sim.after_failed_sync(op).unwrap()),
            ];
            let power_loss = sim.crash_image(CrashProfile::Torn, op);
            images.push(("a power loss", SimFile::from_image(power_loss).unwrap()));
            for (what, next) in images {
                let db = Db::open_storage(Arc::new(next.clone()), Options::default()).unwrap();
                assert_clean(&db);
                assert_eq!(content(&db), expected, "op {op} {error:?}, {what}");
                assert_go_form(&next.live_image().unwrap(), 4096, false, what);
                drop(db);
            }
        }
    }
    assert!(failed_closes > 0, "no close failed");
}

/// `max_size`: a one-sync commit writes no freelist page, but the durable point after it (the
/// close, or the open after a kill, each a commit in Go's form) must have room for one. Here
/// the free pages are hundreds of single pages (every other leaf of a big tree emptied), so
/// the freelist takes two pages, which only the high-water mark has in a row; one-sync
/// commits of overflow values (runs no single page holds) grow the file towards its limit.
/// They are refused while the freelist page would not fit after them; the close then
/// succeeds, and so does the open after a kill, with the same limit.
#[test]
fn one_sync_commits_at_max_size_leave_room_for_the_freelist_the_close_writes() {
    let options = Options::default().alloc_size(4096).one_sync(true);
    let (sim, db) = sim_db(options.clone());
    // A thousand buckets of one leaf each, side by side; every other one deleted: single free
    // pages.
    db.update(|tx| {
        for i in 0..2000u32 {
            let mut b = tx.create_bucket(format!("bucket{i:05}"))?;
            for k in 0..20u32 {
                b.put(k.to_be_bytes(), [1u8; 100])?;
            }
        }
        tx.create_bucket("b").map(drop)
    })
    .unwrap();
    db.update(|tx| {
        for i in (0..2000u32).step_by(2) {
            tx.delete_bucket(format!("bucket{i:05}"))?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    let high_water = db.begin_read().unwrap().meta().pgid;
    db.close().unwrap();
    let max_size = (high_water + 78) * 4096;
    let options = options.max_size(max_size);
    let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
    let free = db.stats().free_page_n;
    assert!(
        free > 4096 / 8,
        "{free} free pages: the freelist fits in one page"
    );
    let (mut refused, mut round) = (0, 0u32);
    while refused < 14 && round < 200 {
        // Values of 10 down to 4 pages by turns (runs the free pages do not hold): the file
        // comes to its limit to a few pages.
        let pages = 10 - (round as usize % 7);
        let result = db.update(|tx| {
            tx.bucket_mut("b")?
                .unwrap()
                .put(format!("v{round:04}"), vec![7u8; pages * 4096 - 100])
        });
        match result {
            Ok(()) => {}
            Err(rbolt::Error::MaxSizeReached { .. }) => refused += 1,
            Err(error) => panic!("round {round}: {error}"),
        }
        round += 1;
    }
    assert!(refused >= 14, "the limit was never reached");
    let (_, kind) = newest(&sim.live_image().unwrap(), 4096);
    assert_eq!(kind, MetaDurability::OneSync);
    let expected = content(&db);
    // A kill now: the open after it writes its commit in Go's form within the limit.
    let killed = sim.after_process_crash().unwrap();
    let reopened = Db::open_storage(Arc::new(killed.clone()), options).unwrap();
    assert_clean(&reopened);
    assert_eq!(content(&reopened), expected);
    assert_go_form(
        &killed.live_image().unwrap(),
        4096,
        false,
        "the open after a kill",
    );
    reopened.close().unwrap();
    db.close().unwrap();
    let image = sim.live_image().unwrap();
    assert_go_form(&image, 4096, false, "the close");
    assert!(image.len() as u64 <= max_size);
    assert_eq!(reopen(image), expected);
}

/// A file with one sync a commit, just after a commit that asked for one sync and, its runs
/// too many for the meta, synced twice: a meta in Go's form naming no freelist page. With the
/// operation that commit began at, and the content before and after it.
struct Fallback {
    sim: SimFile,
    db: Db,
    first: u64,
    before: Content,
    after: Content,
}

/// On pages of `page` bytes, loads keys and runs commits spread over the tree until one falls
/// back to two syncs (see [`Fallback`]): on 512-byte pages a slot holds 25 runs; on 4 KiB
/// pages 249, which a commit that rewrites every other leaf, its pages taken one by one from
/// the leaves the commit before freed, passes. The file crashes at operation `crash`, if
/// given: then the file as the first commit that failed left it.
fn fallen_back(page: usize, crash: Option<u64>) -> Result<Fallback, SimFile> {
    let (sim, db) = sim_db(Options::default().page_size(page).one_sync(true));
    if let Some(op) = crash {
        sim.set_fault_plan(FaultPlan::new().crash_at(op));
    }
    let (keys, step): (u32, usize) = if page == 512 {
        (3000, 40)
    } else {
        (30_000, 97)
    };
    db.update(|tx| {
        let mut b = tx.create_bucket("b")?;
        for i in 0..keys {
            b.put(i.to_be_bytes(), [1u8; 60])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    for round in 0..60u32 {
        let before = content(&db);
        let first = sim.op_count();
        let committed = db.update(|tx| {
            let mut b = tx.bucket_mut("b")?.unwrap();
            for i in (round % 11..keys).step_by(step + round as usize) {
                b.put(i.to_be_bytes(), [round as u8; 60])?;
            }
            b.delete((round * 37 % keys).to_be_bytes()).map(drop)
        });
        if committed.is_err() {
            std::mem::forget(db);
            return Err(sim);
        }
        let (meta, kind) = newest(&sim.live_image().unwrap(), page);
        if kind == MetaDurability::Durable && !meta.has_freelist() {
            let after = content(&db);
            return Ok(Fallback {
                sim,
                db,
                first,
                before,
                after,
            });
        }
    }
    panic!("no commit fell back to two syncs on {page}-byte pages");
}

/// The commits after the fallback, up to the first that is a one-sync one (on 512-byte pages
/// the next commit's slot takes none: two syncs), each putting `next{n}`; stops at the first
/// that fails. Returns the content after each.
fn commits_after_fallback(sim: &SimFile, db: &Db, page: usize) -> Vec<Content> {
    let mut states = Vec::new();
    for n in 0..2u32 {
        if db
            .update(|tx| tx.bucket_mut("b")?.unwrap().put(format!("next{n}"), "1"))
            .is_err()
        {
            break;
        }
        states.push(content(db));
        if newest(&sim.live_image().unwrap(), page).1 == MetaDurability::OneSync {
            break;
        }
    }
    states
}

/// The fallback: a commit that asked for one sync and syncs twice for its run list writes a
/// meta in Go's form with freelist "none" (Go reads such a file by walking it, as for
/// `NoFreelistSync`). The handle knows it owes a freelist: the close writes one. A kill after
/// it opens clean (read-only: the free pages are what nothing reaches; read-write: a freelist
/// is written), a crash at any operation of it opens one of the two states, and so does a
/// crash in the one-sync commit after it, whose fallback it is on 4 KiB pages.
#[test]
fn a_one_sync_commit_that_syncs_twice_writes_no_freelist_and_the_close_writes_one() {
    for page in [512, 4096] {
        let Ok(Fallback {
            sim,
            db,
            first,
            before,
            after,
        }) = fallen_back(page, None)
        else {
            panic!("no crash was planned");
        };
        let last = sim.op_count();
        // A kill right after it: read-only and read-write opens.
        let killed = sim.after_process_crash().unwrap();
        let read_only = Db::open_storage(
            Arc::new(killed.after_process_crash().unwrap()),
            Options::default().read_only(true),
        )
        .unwrap();
        assert_clean(&read_only);
        assert_eq!(content(&read_only), after, "{page}");
        drop(read_only);
        let reopened = Db::open_storage(Arc::new(killed.clone()), Options::default()).unwrap();
        assert_clean(&reopened);
        assert_eq!(content(&reopened), after, "{page}");
        assert_go_form(
            &killed.live_image().unwrap(),
            page,
            false,
            "the open after a kill",
        );
        drop(reopened);
        // A close right after it writes the freelist the fallback's meta did not name.
        let Ok(again) = fallen_back(page, None) else {
            panic!("no crash was planned");
        };
        again.db.close().unwrap();
        let image = again.sim.live_image().unwrap();
        assert_go_form(&image, page, false, "the close right after a fallback");
        assert_eq!(reopen(image), after, "{page}");
        // The commits after it, the last a one-sync one, then the close.
        let first_next = sim.op_count();
        let mut states = vec![after.clone()];
        states.extend(commits_after_fallback(&sim, &db, page));
        let last_next = sim.op_count();
        let log = sim.op_log();
        let (_, kind) = newest(&sim.live_image().unwrap(), page);
        assert_eq!(kind, MetaDurability::OneSync, "{page}: after the fallback");
        let expected = content(&db);
        db.close().unwrap();
        let image = sim.live_image().unwrap();
        assert_go_form(&image, page, false, "the close after a fallback");
        assert_eq!(reopen(image), expected, "{page}");
        // A crash at any operation of the fallback commit, and of the commits after it.
        for (range, states) in [
            (first..last, vec![before.clone(), after]),
            (first_next..last_next, states),
        ] {
            // Every operation but the page writes of a commit of hundreds of runs, of which
            // every 16th: each crash replays the whole load.
            let crash_ops = range.filter(|&op| {
                log[op as usize] != OpKind::WriteVectored || op % 16 == 0 || page == 512
            });
            for op in crash_ops {
                let sim = match fallen_back(page, Some(op)) {
                    Err(sim) => sim,
                    Ok(fallback) => {
                        commits_after_fallback(&fallback.sim, &fallback.db, page);
                        std::mem::forget(fallback.db);
                        fallback.sim
                    }
                };
                assert!(sim.crashed_at().is_some(), "{page}: op {op} never came");
                for (what, image) in crash_images(&sim, op) {
                    let found = reopen(image);
                    assert!(
                        states.contains(&found),
                        "{page}: op {op}, {what}: a state never committed"
                    );
                }
            }
        }
    }
}

/// A hot backup (`ReadTx::write_to`) of a snapshot whose meta is a one-sync one names no
/// freelist page either: both its metas are in Go's form with freelist "none", a file Go reads
/// by walking it, and rbolt opens it clean, read-only and read-write (which writes a freelist).
#[test]
fn a_hot_backup_of_a_one_sync_snapshot_opens_clean_and_in_gos_form() {
    let (_sim, db) = churned(Options::default(), 12);
    let expected = content(&db);
    let mut backup = Vec::new();
    db.begin_read().unwrap().write_to(&mut backup).unwrap();
    for slot in 0..2u64 {
        let at = slot as usize * 4096;
        let meta = read_meta(&backup[at..at + 4096], Pgid(slot)).expect("a meta in Go's form");
        assert!(!meta.has_freelist());
    }
    let read_only = Db::open_storage(
        Arc::new(SimFile::from_image(backup.clone()).unwrap()),
        Options::default().read_only(true),
    )
    .unwrap();
    assert_clean(&read_only);
    assert_eq!(content(&read_only), expected);
    drop(read_only);
    let copy = SimFile::from_image(backup).unwrap();
    let db = Db::open_storage(Arc::new(copy.clone()), Options::default()).unwrap();
    assert_go_form(
        &copy.live_image().unwrap(),
        4096,
        false,
        "the backup opened",
    );
    drop(db);
    assert_eq!(reopen(copy.live_image().unwrap()), expected);
}

/// A vacuum step right after one-sync commits (a two-sync commit that moves pages down and
/// cuts the file's tail; its base names no freelist page): a crash at any operation of it
/// opens the content (a step changes none), `check` clean.
#[test]
fn a_crash_anywhere_in_a_vacuum_step_after_one_sync_commits_loses_nothing() {
    let setup = || {
        let (sim, db) = churned(Options::default(), 6);
        db.update(|tx| {
            let mut b = tx.bucket_mut("b")?.unwrap();
            for i in (0..900u32).filter(|i| i % 4 != 0) {
                b.delete(format!("k{i:05}"))?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
        (sim, db)
    };
    let (sim, db) = setup();
    let expected = content(&db);
    let first = sim.op_count();
    assert!(
        db.vacuum_step(16).unwrap().committed,
        "the step did nothing"
    );
    let last = sim.op_count();
    for op in first..last {
        let (sim, db) = setup();
        sim.set_fault_plan(FaultPlan::new().crash_at(op));
        // A crash at the truncation after the commit goes unreported: the step is done.
        let _ = db.vacuum_step(16);
        assert_eq!(sim.crashed_at(), Some(op));
        std::mem::forget(db);
        for (what, image) in crash_images(&sim, op) {
            assert_eq!(reopen(image), expected, "op {op}, {what}");
        }
    }
}
