//! The vacuum's kept walk (issue 52): a vacuum plans its steps from one walk of the file while
//! that walk has work left, also when another writer changes the trees between steps.

use crate::support::{assert_clean, read_db};
use crate::vacuum::{assert_go_compatible, checked_vacuum, fill_and_thin, open};
use rbolt::storage::SimFile;
use rbolt::{Db, Options, VacuumOptions};
use std::ops::ControlFlow;

/// Issue 52: a vacuum walked every page of the file for every step (341 s at 10M keys). It
/// now plans its steps from one walk while that walk has work left, and walks again only
/// then: a vacuum of many small steps walks a few times, and ends where a vacuum that walks
/// for every step (`vacuum_step` in a loop) ends, within a few pages. Red with a walk per
/// step: `walks == steps`.
#[test]
fn a_vacuum_walks_the_file_a_few_times_not_once_per_step() {
    let thinned = |seed: u64| {
        let sim = SimFile::new().unwrap();
        let db = open(&sim, Options::default());
        fill_and_thin(&db, seed, 6000, 90);
        db
    };
    for seed in [3, 4] {
        let db = thinned(seed);
        let model = read_db(&db).unwrap();
        let report = checked_vacuum(&db, &model, 4);
        // Every step walking again: one walk per step.
        let walking = thinned(seed);
        let mut steps = 0u64;
        while walking.vacuum_step(4).unwrap().committed {
            steps += 1;
            assert!(steps < 100_000, "the walking vacuum does not end");
        }
        let walking_mark = walking.begin_read().unwrap().meta().pgid;
        eprintln!(
            "vacuum walks: seed {seed}: {} steps, {} walks, mark {}; walking every step: {steps} \
             steps, mark {walking_mark}",
            report.steps, report.walks, report.high_water
        );
        assert!(report.steps >= 20, "too few steps to tell: {report:?}");
        assert!(
            report.walks * 4 <= report.steps,
            "{} walks for {} steps",
            report.walks,
            report.steps
        );
        assert!(
            report.high_water <= walking_mark + walking_mark / 50 + 4,
            "the kept walk ends at {} pages, walking every step at {walking_mark}",
            report.high_water
        );
    }
}

/// A walk kept across steps goes out of date when another writer commits between them: here
/// the progress callback splits leaves (a run of new keys), deletes ranges, and deletes and
/// recreates a nested bucket the walk found, after every step. Every step stays sound and the
/// contents end exactly as a database given the same changes without a vacuum.
#[test]
fn a_vacuum_planning_from_an_old_walk_stays_sound_under_another_writers_changes() {
    let change = |db: &Db, round: u32| {
        db.update(|tx| {
            let mut t1 = tx.bucket_mut(b"t1")?.unwrap();
            for i in 0..60u32 {
                t1.put(format!("r{round:04}-{i:03}").as_bytes(), [round as u8; 90])?;
            }
            for i in 0..40u32 {
                t1.delete(format!("k{:06}", (round * 40 + i) % 1500).as_bytes())?;
            }
            if round.is_multiple_of(3) {
                let mut t2 = tx.bucket_mut(b"t2")?.unwrap();
                t2.delete_bucket(b"nested")?;
                t2.create_bucket(b"nested")?
                    .put(b"again", [round as u8; 10])?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
    };
    let db = open(&SimFile::new().unwrap(), Options::default());
    fill_and_thin(&db, 8, 1500, 90);
    let twin = open(&SimFile::new().unwrap(), Options::default());
    fill_and_thin(&twin, 8, 1500, 90);
    let mut rounds = 0u32;
    let report = db
        .vacuum(VacuumOptions::default().pages_per_step(8), |_| {
            assert_clean(&db);
            assert_go_compatible(&db);
            change(&db, rounds);
            change(&twin, rounds);
            rounds += 1;
            ControlFlow::Continue(())
        })
        .unwrap();
    eprintln!(
        "vacuum beside changes: {} steps, {} walks, {rounds} rounds of changes",
        report.steps, report.walks
    );
    assert!(rounds >= 10, "too few steps: {report:?}");
    assert!(
        report.walks < report.steps,
        "every step walked: the old walk was never used"
    );
    assert_clean(&db);
    assert_go_compatible(&db);
    assert_eq!(read_db(&db).unwrap(), read_db(&twin).unwrap());
}
