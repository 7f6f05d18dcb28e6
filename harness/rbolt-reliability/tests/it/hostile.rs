//! The hostile-file suite at the tier's size (`RBOLT_TIER`), and a check that its shapes are what they are named.

use rbolt_reliability::hostile::{HostileConfig, run, shapes};
use rbolt_reliability::summary::{size, soak};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[test]
fn hostile_files() {
    let config = HostileConfig {
        random_cases: size("RBOLT_HOSTILE_RANDOM", 10_000, 100_000, 1_000_000),
        threads: 2,
        case_limit: Duration::from_secs(10),
        with_4k: soak(),
        seed: 0x5EED,
        child: Some(PathBuf::from(env!("CARGO_BIN_EXE_rbolt-crash-child"))),
        batch: 4000,
    };
    let started = Instant::now();
    let report = run(&config);
    report.summary().secs_since(started).print();
    assert!(report.tally.is_clean(), "{}", report.tally.failures);
}

/// The shapes are what they claim to be: the three-level tree has three levels.
#[test]
fn shapes_are_as_named() {
    for shape in shapes(false) {
        let sim = rbolt::storage::SimFile::from_image(shape.image.clone()).unwrap();
        let db =
            rbolt::Db::open_storage(std::sync::Arc::new(sim), rbolt::Options::default()).unwrap();
        let errors = db.view(|tx| Ok::<_, rbolt::Error>(tx.check())).unwrap();
        assert!(errors.is_empty(), "{}: {errors:?}", shape.name);
        if shape.name == "three-level" {
            let depth = db
                .view(|tx| tx.bucket(b"b").map(|b| b.unwrap().stats()))
                .unwrap()
                .unwrap()
                .depth;
            assert!(depth >= 3, "three-level has depth {depth}");
        }
    }
}

/// The bad-input sweep's one-sync metas (issue 51): the sound one opens at its own meta
/// (txid 3), every damaged one falls back to meta 0 (txid 0); none is called corrupt.
#[test]
fn one_sync_metas_open_only_when_sound() {
    let mut seen = 0;
    for (what, image) in rbolt_reliability::hostile::crafted_files() {
        if !what.contains("one-sync") {
            continue;
        }
        seen += 1;
        let sim = rbolt::storage::SimFile::from_image(image).unwrap();
        let options = rbolt::Options::default().read_only(true);
        let db = rbolt::Db::open_storage(std::sync::Arc::new(sim), options)
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        let txid = db.begin_read().unwrap().id().0;
        let expected = if what.contains("sound") { 3 } else { 0 };
        assert_eq!(txid, expected, "{what}");
    }
    assert!(seen >= 10, "{seen} one-sync cases");
}
