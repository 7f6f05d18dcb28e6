use rbolt_reliability::kill::{KillConfig, KillReport, run};
use rbolt_reliability::summary::size;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A directory for the database files: tmpfs when there is one (SIGKILL keeps the page cache,
/// so a disk adds only fsync time), `RBOLT_KILL_DIR` if set.
fn kill_dir() -> tempfile::TempDir {
    let base = std::env::var_os("RBOLT_KILL_DIR")
        .map(PathBuf::from)
        .or_else(|| Some(PathBuf::from("/dev/shm")).filter(|p| p.is_dir()))
        .unwrap_or_else(std::env::temp_dir);
    tempfile::tempdir_in(base).expect("temp dir")
}

#[test]
fn kill_loop() {
    let dir = kill_dir();
    let kills = size("RBOLT_KILLS", 500, 10_000);
    // Two files side by side, with different options (see `power::variant`).
    let seeds = [0u64, 3];
    let started = Instant::now();
    let reports: Vec<KillReport> = std::thread::scope(|scope| {
        let handles: Vec<_> = seeds
            .iter()
            .map(|&seed| {
                let config = KillConfig {
                    child: PathBuf::from(env!("CARGO_BIN_EXE_rbolt-crash-child")),
                    dir: dir.path().to_path_buf(),
                    seed,
                    kills: kills / seeds.len() as u64,
                    delay_max: Duration::from_millis(30),
                };
                scope.spawn(move || run(&config))
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    let mut report = KillReport::default();
    for one in reports {
        report.merge(one);
    }
    report
        .summary()
        .field("secs", format!("{:.1}", started.elapsed().as_secs_f64()))
        .print();
    assert!(report.is_clean(), "{}", report.failures);
    assert_eq!(
        report.kills,
        kills / seeds.len() as u64 * seeds.len() as u64
    );
}
