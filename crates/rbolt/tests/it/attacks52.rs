//! Attacks on issue 52's two changes, from outside: the vacuum's walk kept across its steps
//! (another writer changing the trees it planned from between steps), and the open after a
//! kill with commits made without syncs (`walk::since`: the newer tree walked only into pages
//! written since the durable meta), here after commits that lower the high-water mark
//! (`auto_shrink`), with and without a freelist, at several page sizes.

use crate::support::{assert_clean, read_db};
use crate::vacuum::{assert_go_compatible, fill_and_thin, open};
use rbolt::storage::SimFile;
use rbolt::{Db, Durability, Options, VacuumOptions};
use rbolt_fixtures::rng::Rng;
use std::ops::ControlFlow;
use std::sync::Arc;

/// Replaces every nested bucket `nested` of `t0`..`t2` with a plain value under the same key
/// (a bucket path the vacuum's kept walk found now names a value), and makes `inline` a
/// bucket of many pages.
fn replace_buckets_with_values(db: &Db) {
    db.update(|tx| {
        for top in 0..3u8 {
            let mut bucket = tx.bucket_mut([b't', b'0' + top])?.unwrap();
            if bucket.bucket(b"nested")?.is_some() {
                bucket.delete_bucket(b"nested")?;
                bucket.put(b"nested", b"a value where a bucket was")?;
            }
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
}

/// A vacuum plans its next steps from a walk that found the nested buckets `t*/nested`
/// (and their pages, among the highest of the file); between steps another writer deletes
/// them and puts plain values under the same keys. The vacuum must not fail (the bucket it
/// planned to touch is gone: nothing to move there), and must end sound, with the contents
/// of a twin given the same change.
#[test]
fn a_vacuum_goes_on_when_a_planned_bucket_became_a_value() {
    for page_size in [512, 4096] {
        let options = Options::default().page_size(page_size);
        let db = open(&SimFile::new().unwrap(), options.clone());
        fill_and_thin(&db, 52, 1200, 90);
        let twin = open(&SimFile::new().unwrap(), options);
        fill_and_thin(&twin, 52, 1200, 90);
        let mut calls = 0u32;
        let report = db
            .vacuum(VacuumOptions::default().pages_per_step(4), |_| {
                if calls == 0 {
                    replace_buckets_with_values(&db);
                    replace_buckets_with_values(&twin);
                }
                calls += 1;
                assert_clean(&db);
                ControlFlow::Continue(())
            })
            .unwrap_or_else(|e| panic!("page size {page_size}: the vacuum failed: {e}"));
        assert!(report.steps >= 2, "too few steps to matter: {report:?}");
        assert_clean(&db);
        assert_go_compatible(&db);
        assert!(read_db(&db).unwrap() == read_db(&twin).unwrap());
    }
}

/// Between every step, another writer deletes every top-level bucket and makes it again
/// small (its nested bucket inline, or absent), or large again with other keys: every page
/// the kept walk found is gone, the buckets at its paths are other trees (shallower, inline).
/// The vacuum stays sound at every step, ends, and matches a twin.
#[test]
fn a_vacuum_survives_every_bucket_dropped_and_made_again_between_steps() {
    let change = |db: &Db, round: u32| {
        db.update(|tx| {
            for top in 0..4u8 {
                let name = [b't', b'0' + top];
                if tx.bucket(name)?.is_some() {
                    tx.delete_bucket(name)?;
                }
                let mut bucket = tx.create_bucket(name)?;
                // Empty, inline, or of many pages.
                let n = [0, 3, 300][((round + u32::from(top)) % 3) as usize];
                for i in 0..n {
                    bucket.put(format!("k{i:06}"), [round as u8; 70])?;
                }
                if round.is_multiple_of(3) {
                    bucket.create_bucket(b"nested")?.put(b"one", b"inline")?;
                }
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
    };
    let db = open(&SimFile::new().unwrap(), Options::default());
    fill_and_thin(&db, 9, 1500, 90);
    let twin = open(&SimFile::new().unwrap(), Options::default());
    fill_and_thin(&twin, 9, 1500, 90);
    let mut rounds = 0u32;
    let reader = db.begin_read().unwrap();
    let report = db
        .vacuum(VacuumOptions::default().pages_per_step(6), |_| {
            assert_clean(&db);
            assert_go_compatible(&db);
            change(&db, rounds);
            change(&twin, rounds);
            rounds += 1;
            ControlFlow::Continue(())
        })
        .unwrap();
    drop(reader);
    assert!(rounds >= 2, "too few steps: {report:?}");
    assert_clean(&db);
    assert!(read_db(&db).unwrap() == read_db(&twin).unwrap());
    // Run again without a reader: it ends, sound.
    db.vacuum(VacuumOptions::default().pages_per_step(16), |_| {
        assert_clean(&db);
        ControlFlow::Continue(())
    })
    .unwrap();
    assert_clean(&db);
    assert!(read_db(&db).unwrap() == read_db(&twin).unwrap());
}

/// One commit without a sync on `db`: keys added at the end of `t0`/`t1` (some values of many
/// pages), or the newest of them deleted (the pages at the end of the file freed, so that
/// `auto_shrink` lowers the mark, and the next commits allocate past the lower mark), or the
/// bucket `t2` dropped or made again.
fn shrinking_commit(db: &Db, rng: &mut Rng, round: u64, top: &mut [u64; 2]) {
    let page_size = db.page_size() as u64;
    let mut tx = db.begin_write().unwrap();
    tx.set_durability(Durability::None);
    for (b, end) in top.iter_mut().enumerate() {
        let mut bucket = tx
            .create_bucket_if_not_exists([b't', b'0' + b as u8])
            .unwrap();
        if rng.chance(1, 2) {
            for _ in 0..rng.range(1, 200) {
                let len = if rng.chance(1, 20) {
                    (page_size + rng.below(3 * page_size)) as usize
                } else {
                    rng.range(1, 120) as usize
                };
                bucket
                    .put(format!("k{:07}", *end), vec![round as u8; len])
                    .unwrap();
                *end += 1;
            }
        } else {
            for _ in 0..rng.range(1, 400).min(*end) {
                *end -= 1;
                bucket.delete(format!("k{:07}", *end)).unwrap();
            }
        }
    }
    if tx.bucket(b"t2").unwrap().is_some() && rng.chance(1, 2) {
        tx.delete_bucket(b"t2").unwrap();
    } else if tx.bucket(b"t2").unwrap().is_none() {
        let mut t2 = tx.create_bucket(b"t2").unwrap();
        for i in 0..rng.below(600) {
            t2.put(format!("x{i:05}"), [round as u8; 50]).unwrap();
        }
    }
    tx.commit().unwrap();
}

/// Durable commits, then commits without syncs that lower the mark (`auto_shrink`) and grow
/// past it again, with or without a reader from the durable point, and the process dies: the
/// open must take the newest commit, check clean, and write on over what it found free.
fn shrink_then_kill(options: &Options, rng: &mut Rng, case: u64) {
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
    let mut top = [0u64; 2];
    for round in 0..4 {
        shrinking_commit(&db, rng, round, &mut top);
    }
    db.sync().unwrap();
    let reader = rng.chance(1, 3).then(|| db.begin_read().unwrap());
    for round in 0..rng.range(2, 20) {
        shrinking_commit(&db, rng, 10 + round, &mut top);
    }
    let model = read_db(&db).unwrap();
    drop(reader);
    let reopened = sim.after_process_crash().unwrap();
    drop(db);
    let db = Db::open_storage(Arc::new(reopened), options.clone()).unwrap();
    assert!(
        read_db(&db).unwrap() == model,
        "case {case} ({options:?}): the open did not take the newest commit"
    );
    assert_clean(&db);
    for round in 0..4 {
        shrinking_commit(&db, rng, 100 + round, &mut top);
        assert_clean(&db);
    }
    db.close().unwrap();
}

#[test]
fn the_open_after_unsynced_commits_that_shrank_and_grew_the_file_is_exact() {
    let seed = rbolt_testkit::tier::number::<u64>("RBOLT_ATTACKS52_SEED").unwrap_or(5252);
    let mut rng = Rng::new(seed);
    let mut case = 0;
    for page_size in [512, 4096, 65536] {
        for no_freelist_sync in [false, true] {
            let options = Options::default()
                .page_size(page_size)
                .auto_shrink(true)
                .no_freelist_sync(no_freelist_sync);
            let cases = if page_size == 65536 { 2 } else { 5 };
            for _ in 0..cases {
                shrink_then_kill(&options, &mut rng, case);
                case += 1;
            }
        }
    }
}

/// A vacuum whose callback commits without syncs between its (durable) steps, with changes
/// that free and reuse pages and lower the mark; the process is killed after some step (a
/// copy of what the kill leaves, taken there). Each copy opens at the callback's last commit,
/// checks clean, and takes more commits soundly.
#[test]
fn a_kill_after_unsynced_commits_between_vacuum_steps_opens_exactly() {
    for (page_size, no_freelist_sync) in [(512, false), (4096, true), (4096, false)] {
        let options = Options::default()
            .page_size(page_size)
            .auto_shrink(true)
            .no_freelist_sync(no_freelist_sync);
        let sim = SimFile::new().unwrap();
        let db = open(&sim, options.clone());
        fill_and_thin(&db, 77, 900, 85);
        let mut rng = Rng::new(page_size as u64);
        let mut top = [0u64; 2];
        let mut calls = 0u64;
        let mut kills = Vec::new();
        db.vacuum(VacuumOptions::default().pages_per_step(8), |_| {
            shrinking_commit(&db, &mut rng, calls, &mut top);
            if calls % 3 == 1 {
                let model = read_db(&db).unwrap();
                kills.push((sim.after_process_crash().unwrap(), model, top));
            }
            calls += 1;
            ControlFlow::Continue(())
        })
        .unwrap();
        assert!(!kills.is_empty(), "no step to kill after");
        drop(db);
        for (at, (image, model, mut top)) in kills.into_iter().enumerate() {
            let db = Db::open_storage(Arc::new(image), options.clone()).unwrap();
            assert!(
                read_db(&db).unwrap() == model,
                "kill {at} (page size {page_size}): not the callback's last commit"
            );
            assert_clean(&db);
            for round in 0..3 {
                shrinking_commit(&db, &mut rng, 200 + round, &mut top);
                assert_clean(&db);
            }
        }
    }
}

/// A durable start and then 1-12 commits without syncs (with a reader from the durable point
/// in some cases): the file, the contents at the durable point and after each commit since,
/// and the handle (still open: the caller kills it by dropping it after taking an image).
fn unsynced_history(
    options: &Options,
    rng: &mut Rng,
) -> (SimFile, Vec<rbolt_fixtures::Bucket>, Db) {
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
    let mut top = [0u64; 2];
    for round in 0..4 {
        shrinking_commit(&db, rng, round, &mut top);
    }
    db.sync().unwrap();
    let mut models = vec![read_db(&db).unwrap()];
    let reader = rng.chance(1, 3).then(|| db.begin_read().unwrap());
    for round in 0..rng.range(1, 12) {
        shrinking_commit(&db, rng, 10 + round, &mut top);
        models.push(read_db(&db).unwrap());
    }
    drop(reader);
    (sim, models, db)
}

fn options_matrix() -> Vec<Options> {
    let mut all = Vec::new();
    for page_size in [512, 4096] {
        for (no_freelist_sync, auto_shrink) in [(false, false), (true, false), (false, true)] {
            all.push(
                Options::default()
                    .page_size(page_size)
                    .no_freelist_sync(no_freelist_sync)
                    .auto_shrink(auto_shrink),
            );
        }
    }
    all
}

/// The contents a power loss now brings back: the durable point (a commit without syncs may
/// have been made durable after all).
fn power_loss_model(sim: &SimFile, options: &Options) -> rbolt_fixtures::Bucket {
    let lost = SimFile::from_image(sim.durable_image()).unwrap();
    read_db(&Db::open_storage(Arc::new(lost), options.clone()).unwrap()).unwrap()
}

/// Opens `image`: it must give one of `allowed`, check clean, and, after a power loss right
/// after the open (the open made what it took durable), give the same again.
fn open_one_of(
    image: &SimFile,
    options: &Options,
    allowed: &[&rbolt_fixtures::Bucket],
    what: &str,
) {
    let db = Db::open_storage(Arc::new(image.clone()), options.clone()).unwrap();
    let got = read_db(&db).unwrap();
    assert!(
        allowed.iter().any(|m| **m == got),
        "{what}: opened contents no commit had"
    );
    assert_clean(&db);
    let lost = SimFile::from_image(image.crash_image(rbolt::storage::CrashProfile::DropAll, 0));
    drop(db);
    let db = Db::open_storage(Arc::new(lost.unwrap()), options.clone()).unwrap();
    assert!(
        read_db(&db).unwrap() == got,
        "{what}: the open's choice was not made durable"
    );
    assert_clean(&db);
}

/// Commits without syncs, then a sync that fails (Linux drops some written pages, keeps
/// others clean in the cache) and the process dies. The open takes a commit whose pages are
/// whole (the newest, an earlier one, or the durable one), never a mix; and makes it durable.
#[test]
fn a_failed_sync_after_unsynced_commits_opens_a_whole_commit() {
    let mut rng = Rng::new(0x52f5);
    for (n, options) in options_matrix().iter().enumerate() {
        for case in 0..4u64 {
            let (sim, models, db) = unsynced_history(options, &mut rng);
            let image = sim.after_failed_sync(case * 31 + n as u64).unwrap();
            let durable = power_loss_model(&sim, options);
            drop(db);
            let allowed = [&durable, models.last().unwrap()];
            open_one_of(
                &image,
                options,
                &allowed,
                &format!("options {n} case {case}"),
            );
        }
    }
}

/// Commits without syncs and a kill; then one page the commits since the durable point wrote
/// is garbled before the open (another writer, a bad sector). The open takes the newest
/// commit if that page is not one it reaches, else the durable one: never the garbled page.
#[test]
fn a_garbled_page_written_since_the_durable_meta_falls_back_to_it() {
    let mut rng = Rng::new(0x52a7);
    let mut fell_back = 0;
    for (n, options) in options_matrix().iter().enumerate() {
        for case in 0..5u64 {
            let (sim, models, db) = unsynced_history(options, &mut rng);
            let image = sim.after_process_crash().unwrap();
            // Before the handle's close syncs `sim`; and what a power loss brings back (a
            // commit without syncs may have been made durable after all).
            let durable = sim.durable_image();
            let first = power_loss_model(&sim, options);
            drop(db);
            let page_size = options.page_size;
            let live = image.live_image().unwrap();
            let changed: Vec<usize> = (2..live.len() / page_size)
                .filter(|&p| {
                    let at = p * page_size..(p + 1) * page_size;
                    durable.get(at.clone()) != live.get(at)
                })
                .collect();
            let last = models.last().unwrap();
            if changed.is_empty() {
                // The commits were made durable after all (nothing to garble).
                open_one_of(
                    &image,
                    options,
                    &[last],
                    &format!("options {n} case {case}"),
                );
                continue;
            }
            let page = changed[rng.below(changed.len() as u64) as usize];
            let at = page * page_size + 16 + rng.below(page_size as u64 - 16) as usize;
            rbolt::storage::Storage::write_all_at(&image, &[live[at] ^ 0x5a], at as u64).unwrap();
            let db = Db::open_storage(Arc::new(image.clone()), options.clone()).unwrap();
            fell_back += usize::from(read_db(&db).unwrap() == first && first != *last);
            drop(db);
            open_one_of(
                &image,
                options,
                &[&first, last],
                &format!("options {n} case {case}"),
            );
        }
    }
    assert!(
        fell_back > 0,
        "no garbled page was one the newest commit reached"
    );
}

/// Commits without syncs grow the file; the process dies, and every page they wrote is then
/// garbled, so the open falls back to the durable meta. That open's close cuts the file to
/// the durable meta's pages (`auto_shrink`), below the newest (non-durable) meta's mark, which
/// is still in its slot. The next open must take the durable meta again, not fail with
/// `Truncated` (found by the garbled-page attack above).
#[test]
fn a_fallback_opens_again_after_its_close_cut_the_file() {
    for page_size in [512, 4096] {
        let options = Options::default().page_size(page_size).auto_shrink(true);
        let sim = SimFile::new().unwrap();
        let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
        let mut rng = Rng::new(7);
        let mut top = [0u64; 2];
        shrinking_commit(&db, &mut rng, 0, &mut top);
        db.sync().unwrap();
        let durable_model = read_db(&db).unwrap();
        let durable = sim.durable_image();
        let tx = db.begin_write().unwrap();
        tx.set_durability(Durability::None);
        let mut big = tx.create_bucket(b"big").unwrap();
        for i in 0..300u32 {
            big.put(i.to_be_bytes(), vec![3; 2 * page_size]).unwrap();
        }
        drop(big);
        tx.commit().unwrap();
        let image = sim.after_process_crash().unwrap();
        drop(db);
        let live = image.live_image().unwrap();
        assert!(
            live.len() > durable.len() + 64 * page_size,
            "the file did not grow"
        );
        for page in 2..live.len() / page_size {
            let at = page * page_size..(page + 1) * page_size;
            if durable.get(at.clone()) != live.get(at.clone()) {
                let garbage = vec![0xa5; page_size];
                rbolt::storage::Storage::write_all_at(&image, &garbage, at.start as u64).unwrap();
            }
        }
        for open_number in 0..2 {
            let db = Db::open_storage(Arc::new(image.clone()), options.clone())
                .unwrap_or_else(|e| panic!("page size {page_size}, open {open_number}: {e}"));
            assert!(read_db(&db).unwrap() == durable_model);
            assert_clean(&db);
            db.close().unwrap();
        }
    }
}

/// The durable point and the commits without syncs after it made by handles of other options
/// (a freelist page or none, one-sync durable commits), the last one killed, and the file
/// opened with a third set: the newest commit opens, checks clean, and takes more commits.
#[test]
fn unsynced_commits_by_a_handle_of_other_options_than_the_durable_ones_open_exactly() {
    let with = |no_freelist_sync: bool, one_sync: bool| {
        Options::default()
            .page_size(1024)
            .no_freelist_sync(no_freelist_sync)
            .one_sync(one_sync)
    };
    let sets = [
        (with(false, false), with(true, false), with(false, false)),
        (with(true, false), with(false, false), with(true, false)),
        (with(false, true), with(false, false), with(true, false)),
        (with(false, true), with(true, true), with(false, true)),
        (with(true, true), with(false, true), with(false, false)),
    ];
    let mut rng = Rng::new(0x52b0);
    for (n, (durable, unsynced, last)) in sets.iter().enumerate() {
        let sim = SimFile::new().unwrap();
        let mut top = [0u64; 2];
        let db = Db::open_storage(Arc::new(sim.clone()), durable.clone()).unwrap();
        for round in 0..4 {
            shrinking_commit(&db, &mut rng, round, &mut top);
            // A durable commit by the handle's own default (one-sync or two syncs).
            db.update(|tx| {
                tx.create_bucket_if_not_exists(b"d")?
                    .put([round as u8], b"x")
            })
            .unwrap();
        }
        db.close().unwrap();
        let db = Db::open_storage(Arc::new(sim.clone()), unsynced.clone()).unwrap();
        for round in 0..rng.range(1, 10) {
            shrinking_commit(&db, &mut rng, 10 + round, &mut top);
        }
        let model = read_db(&db).unwrap();
        let image = sim.after_process_crash().unwrap();
        drop(db);
        let db = Db::open_storage(Arc::new(image), last.clone()).unwrap();
        assert!(
            read_db(&db).unwrap() == model,
            "set {n}: not the newest commit"
        );
        assert_clean(&db);
        for round in 0..3 {
            shrinking_commit(&db, &mut rng, 50 + round, &mut top);
            assert_clean(&db);
        }
    }
}

/// The first steps of a vacuum see another writer replace values at the keys it planned from
/// (small values made many pages long and the other way round, some deleted), then the
/// writer stops. Every step stays sound, the vacuum ends, the next one converges (a third
/// finds at most a few pages left to move), and the contents match a twin's.
#[test]
fn a_vacuum_converges_after_another_writer_reshaped_the_planned_keys() {
    for (page_size, no_freelist_sync) in [(512, false), (4096, true), (65536, false)] {
        let options = Options::default()
            .page_size(page_size)
            .no_freelist_sync(no_freelist_sync);
        let reshape = |db: &Db, round: u64| {
            db.update(|tx| {
                for top in 0..3u8 {
                    let mut bucket = tx.bucket_mut([b't', b'0' + top])?.unwrap();
                    for i in (round * 7..600).step_by(23) {
                        let key = format!("k{i:06}");
                        match (i + round) % 3 {
                            0 => bucket.put(&key, vec![top; 3 * page_size])?,
                            1 => bucket.put(&key, vec![top; 5])?,
                            _ => drop(bucket.delete(&key)?),
                        }
                    }
                }
                Ok::<_, rbolt::Error>(())
            })
            .unwrap();
        };
        let db = open(&SimFile::new().unwrap(), options.clone());
        fill_and_thin(&db, 21, 600, 80);
        let twin = open(&SimFile::new().unwrap(), options);
        fill_and_thin(&twin, 21, 600, 80);
        let mut round = 0;
        let report = db
            .vacuum(VacuumOptions::default().pages_per_step(4), |_| {
                if round < 4 {
                    reshape(&db, round);
                    reshape(&twin, round);
                }
                round += 1;
                assert_clean(&db);
                ControlFlow::Continue(())
            })
            .unwrap();
        assert!(report.finished, "page size {page_size}: {report:?}");
        // The first vacuum stops early (its stall rule counts the other writer's growth as
        // steps without progress: so did the vacuum before the kept walk, 7 steps and 90
        // pages to go at 512 bytes there too). A second, undisturbed one converges: a third
        // finds next to nothing to move.
        let quiet = |db: &Db| {
            db.vacuum(VacuumOptions::default().pages_per_step(4), |_| {
                ControlFlow::Continue(())
            })
            .unwrap()
        };
        let second = quiet(&db);
        let third = quiet(&db);
        assert!(
            third.pages_moved <= 2 + second.live_pages / 50,
            "page size {page_size}: the second vacuum stopped short: {second:?} then {third:?}"
        );
        assert_clean(&db);
        assert_go_compatible(&db);
        assert!(read_db(&db).unwrap() == read_db(&twin).unwrap());
    }
}

/// A durable start and 8 commits without syncs from `seed` on `sim`, stopped by the first
/// failure (a kill by the fault plan); the contents at the durable point and after each commit
/// since, and the operation count at the durable point.
fn killed_history(
    sim: &SimFile,
    options: &Options,
    seed: u64,
) -> (Vec<rbolt_fixtures::Bucket>, u64) {
    let mut rng = Rng::new(seed);
    let mut models = Vec::new();
    let mut durable_at = 0;
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
        let mut top = [0u64; 2];
        for round in 0..3 {
            shrinking_commit(&db, &mut rng, round, &mut top);
        }
        db.sync().unwrap();
        durable_at = sim.op_count();
        models.push(read_db(&db).unwrap());
        for round in 0..8 {
            shrinking_commit(&db, &mut rng, 10 + round, &mut top);
            models.push(read_db(&db).unwrap());
        }
        // Killed: no close.
        std::mem::forget(db);
    }));
    (models, durable_at)
}

/// A kill at a storage operation among commits without syncs (sampled through them): the
/// next open in the same boot takes one of the commits, whole, checks clean, and goes on.
#[test]
fn a_kill_at_any_operation_among_unsynced_commits_opens_a_whole_commit() {
    for options in [
        Options::default().page_size(512).auto_shrink(true),
        Options::default().page_size(4096).no_freelist_sync(true),
    ] {
        let reference = SimFile::new().unwrap();
        let (all, durable_at) = killed_history(&reference, &options, 99);
        let total = reference.op_count();
        let mut checked = 0;
        for op in (durable_at..total).step_by(((total - durable_at) / 30).max(1) as usize) {
            let sim = SimFile::new().unwrap();
            sim.set_fault_plan(rbolt::storage::FaultPlan::new().crash_at(op));
            let (models, _) = killed_history(&sim, &options, 99);
            assert!(
                !models.is_empty(),
                "op {op}: killed before the durable point"
            );
            let image = sim.after_process_crash().unwrap();
            let db = Db::open_storage(Arc::new(image), options.clone())
                .unwrap_or_else(|e| panic!("op {op}: {e}"));
            let got = read_db(&db).unwrap();
            assert!(all.contains(&got), "op {op}: contents no commit had");
            assert_clean(&db);
            let mut rng = Rng::new(op);
            let mut top = [4000u64; 2];
            shrinking_commit(&db, &mut rng, 77, &mut top);
            assert_clean(&db);
            checked += 1;
        }
        assert!(checked >= 10, "only {checked} kills checked");
    }
}

/// A vacuum of a file at its `max_size`, while another writer fills every page the steps give
/// back (its commits fail with `MaxSizeReached` once the file is full again): no step may
/// fail for want of room, every step stays sound, and every commit the writer made is there.
#[test]
fn a_vacuum_of_a_full_file_beside_a_writer_that_fills_it() {
    let sim = SimFile::new().unwrap();
    let db = open(&sim, Options::default().page_size(1024));
    fill_and_thin(&db, 31, 1200, 85);
    let full = db.file_len().unwrap();
    db.close().unwrap();
    let db = open(&sim, Options::default().max_size(full));
    let mut written = Vec::new();
    let mut round = 0u32;
    let mut refused = 0;
    let report = db
        .vacuum(VacuumOptions::default().pages_per_step(8), |_| {
            for batch in 0..400u32 {
                let key = format!("fill{round:04}-{batch:03}");
                let put = db.update(|tx| tx.bucket_mut(b"t1")?.unwrap().put(&key, [9; 300]));
                match put {
                    Ok(()) => written.push(key),
                    Err(rbolt::Error::MaxSizeReached { .. }) => {
                        refused += 1;
                        break;
                    }
                    Err(e) => panic!("the writer failed: {e}"),
                }
            }
            round += 1;
            assert_clean(&db);
            assert_go_compatible(&db);
            ControlFlow::Continue(())
        })
        .unwrap();
    assert!(report.steps >= 2, "{report:?}");
    assert!(refused >= 2, "the file was never full again: {report:?}");
    assert!(db.file_len().unwrap() <= full);
    db.view(|tx| {
        let t1 = tx.bucket(b"t1")?.unwrap();
        for key in &written {
            assert!(t1.get(key)?.is_some(), "{key} lost");
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_clean(&db);
}

/// Every step, another writer changes the trees and a new reader starts and is held to the
/// end (so pages each step frees stay pending, and the kept walk's steps find less and less
/// room): the vacuum ends (no loop of walks), every step stays sound, and once the readers
/// end a second vacuum finishes the work.
#[test]
fn a_vacuum_beside_readers_taken_between_its_steps_ends_and_stays_sound() {
    let db = open(&SimFile::new().unwrap(), Options::default().page_size(1024));
    fill_and_thin(&db, 17, 1000, 90);
    let mut readers = Vec::new();
    let mut round = 0u32;
    let report = db
        .vacuum(VacuumOptions::default().pages_per_step(8), |_| {
            db.update(|tx| {
                let mut t2 = tx.bucket_mut(b"t2")?.unwrap();
                for i in 0..40u32 {
                    t2.put(
                        format!("k{:06}", (round * 37 + i) % 1000),
                        [round as u8; 80],
                    )?;
                }
                Ok::<_, rbolt::Error>(())
            })
            .unwrap();
            readers.push(db.begin_read().unwrap());
            round += 1;
            assert_clean(&db);
            ControlFlow::Continue(())
        })
        .unwrap();
    for reader in &readers {
        assert!(reader.bucket(b"t2").unwrap().is_some());
    }
    drop(readers);
    assert!(report.walks <= report.steps + 1, "{report:?}");
    let before = read_db(&db).unwrap();
    let second = db
        .vacuum(VacuumOptions::default().pages_per_step(16), |_| {
            ControlFlow::Continue(())
        })
        .unwrap();
    assert!(second.finished);
    assert_clean(&db);
    assert_go_compatible(&db);
    assert!(read_db(&db).unwrap() == before);
}
