//! The kill loop at CI size: two loops side by side, one on the disk and one on tmpfs.

use rbolt_reliability::kill::{KillConfig, run};
use rbolt_reliability::parallel::run_units;
use rbolt_reliability::summary::size;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// Directories for the database files: one on the disk the tests run on (the build's own
/// temporary directory, where fsync reaches a device) and one on tmpfs when there is one;
/// `RBOLT_KILL_DIR` replaces both.
fn kill_dirs() -> Vec<tempfile::TempDir> {
    if let Some(dir) = std::env::var_os("RBOLT_KILL_DIR") {
        return vec![tempfile::tempdir_in(dir).expect("temp dir")];
    }
    let mut dirs = vec![tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("temp dir")];
    if let Some(shm) = Some(PathBuf::from("/dev/shm")).filter(|p| p.is_dir()) {
        dirs.push(tempfile::tempdir_in(shm).expect("temp dir"));
    }
    dirs
}

#[test]
fn kill_loop() {
    let dirs = kill_dirs();
    let kills = size("RBOLT_KILLS", 500, 10_000);
    // Two loops side by side, with different options (see `power::variant`), the first on
    // the disk.
    let seeds = [0u64, 3];
    let started = Instant::now();
    let report = run_units(seeds.len() as u64, seeds.len(), |index| {
        let index = index as usize;
        run(&KillConfig {
            child: PathBuf::from(env!("CARGO_BIN_EXE_rbolt-crash-child")),
            dir: dirs[index % dirs.len()].path().to_path_buf(),
            seed: seeds[index],
            kills: kills / seeds.len() as u64,
            delay_max: Duration::from_millis(30),
            vacuum: false,
            unsynced: false,
        })
    });
    report.summary().secs_since(started).print();
    assert!(report.is_clean(), "{}", report.failures);
    assert_eq!(
        report.kills,
        kills / seeds.len() as u64 * seeds.len() as u64
    );
    // The loop must have reached the moments it is about: creation, racing creators, and kills
    // before a child had the file open.
    assert!(report.new_files >= 4, "{}", report.summary());
    assert!(report.raced_files >= 2, "{}", report.summary());
    assert!(report.kills_before_ready > 0, "{}", report.summary());
}

/// A kill loop whose children run an online vacuum step after every step: kills land inside
/// vacuums, between a shrinking commit and its truncation, and after truncations.
#[test]
fn kill_loop_with_vacuum() {
    let dirs = kill_dirs();
    let kills = size("RBOLT_VACUUM_KILLS", 120, 2_000);
    let started = Instant::now();
    let report = run(&KillConfig {
        child: PathBuf::from(env!("CARGO_BIN_EXE_rbolt-crash-child")),
        dir: dirs[0].path().to_path_buf(),
        seed: 1,
        kills,
        delay_max: Duration::from_millis(30),
        vacuum: true,
        unsynced: false,
    });
    report.summary().secs_since(started).print();
    assert!(report.is_clean(), "{}", report.failures);
    assert_eq!(report.kills, kills);
    assert!(report.acked_commits > kills / 4, "{}", report.summary());
    // The vacuum did work between the kills: pages moved, not only empty steps.
    assert!(report.vacuum_pages_moved > 0, "{}", report.summary());
}

/// Kill loops whose children commit three steps in four without syncs: a crash of the process
/// keeps the page cache, so every acknowledged step must be there after the kill. Two side by
/// side: on the disk with an online vacuum step after every step (kills land among rewrites
/// copied into the mapping, shrinking commits and truncations), and on tmpfs without.
#[test]
fn kill_loop_without_syncs() {
    let dirs = kill_dirs();
    let kills = size("RBOLT_UNSYNCED_KILLS", 150, 3_000);
    let started = Instant::now();
    let loops: Vec<(usize, bool)> = if dirs.len() > 1 {
        vec![(0, true), (1, false)]
    } else {
        vec![(0, true), (0, false)]
    };
    let per_loop = kills / loops.len() as u64;
    let reports = std::thread::scope(|scope| {
        let handles: Vec<_> = loops
            .iter()
            .enumerate()
            .map(|(index, &(dir, vacuum))| {
                let dir = dirs[dir].path().to_path_buf();
                scope.spawn(move || {
                    run(&KillConfig {
                        child: PathBuf::from(env!("CARGO_BIN_EXE_rbolt-crash-child")),
                        dir,
                        seed: 2 + 2 * index as u64,
                        kills: per_loop,
                        delay_max: Duration::from_millis(30),
                        vacuum,
                        unsynced: true,
                    })
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap())
            .collect::<Vec<_>>()
    });
    for (report, &(dir, vacuum)) in reports.iter().zip(&loops) {
        report.summary().secs_since(started).print();
        assert!(report.is_clean(), "{}", report.failures);
        assert_eq!(report.kills, per_loop);
        assert!(
            report.acked_commits > per_loop / if vacuum { 4 } else { 2 },
            "{}",
            report.summary()
        );
        if vacuum {
            assert!(report.vacuum_pages_moved > 0, "{}", report.summary());
        }
        // Where the filesystem takes them, unsynced rewrites went to the file as copies into
        // its mapping, and the kills landed among them; elsewhere every write was a pwrite.
        let probe = rbolt::storage::FileStorage::open(
            dirs[dir].path().join(format!("probe-{vacuum}")),
            rbolt::storage::FileOptions::new(),
        )
        .unwrap();
        if probe.copies_rewrites() {
            assert!(report.copied_bytes > 0, "{}", report.summary());
        } else {
            assert_eq!(report.copied_bytes, 0, "{}", report.summary());
        }
    }
}
