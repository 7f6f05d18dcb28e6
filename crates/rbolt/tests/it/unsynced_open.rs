//! The open after a crash with commits made without syncs (issue 52): it no longer walks every
//! page of the file to rebuild the freelist, only what those commits changed since the durable
//! meta (`walk::since`). Here random histories of such commits — values of one and of many
//! pages, deletes that merge leaves and branches (which moves subtrees to other parents
//! without rewriting them), nested buckets made and dropped, a reader holding pages back —
//! end in a crash that keeps every write; the open must take the newest commit, check clean
//! (no page both reachable and free, none neither), and go on writing over the free pages it
//! found without damage.

use crate::support::{assert_clean, read_db};
use rbolt::storage::SimFile;
use rbolt::{Db, Durability, Options};
use rbolt_fixtures::rng::Rng;
use std::sync::Arc;

/// One commit without a sync of random changes to the buckets `t0`..`t2` and their nested
/// bucket `n`.
fn random_commit(db: &Db, rng: &mut Rng, round: u64) {
    let page_size = db.page_size();
    let tx = db.begin_write().unwrap();
    tx.set_durability(Durability::None);
    for top in 0..3u8 {
        let mut bucket = tx.create_bucket_if_not_exists([b't', b'0' + top]).unwrap();
        match rng.below(6) {
            // A run of new keys: splits.
            0 | 1 => {
                let start = rng.below(4000);
                for i in start..start + rng.range(1, 300) {
                    let len = if rng.chance(1, 30) {
                        page_size + rng.below(3 * page_size as u64) as usize
                    } else {
                        rng.range(1, 150) as usize
                    };
                    let value = vec![(round % 251) as u8; len];
                    bucket.put(format!("k{i:06}"), value).unwrap();
                }
            }
            // A range deleted: merges of leaves, and of branches when it is wide.
            2 | 3 => {
                let start = rng.below(4000);
                for i in start..start + rng.range(1, 1500) {
                    bucket.delete(format!("k{i:06}")).unwrap();
                }
            }
            // The nested bucket dropped, or made again with some keys.
            4 => {
                if bucket.bucket(b"n").unwrap().is_some() {
                    bucket.delete_bucket(b"n").unwrap();
                } else {
                    let mut nested = bucket.create_bucket(b"n").unwrap();
                    for i in 0..rng.below(400) {
                        nested.put(format!("n{i:05}"), [top; 40]).unwrap();
                    }
                }
            }
            _ => {
                if let Some(mut nested) = bucket.bucket_mut(b"n").unwrap() {
                    for i in 0..rng.below(200) {
                        nested.put(format!("m{round}-{i:04}"), [7; 70]).unwrap();
                    }
                }
            }
        }
    }
    tx.commit().unwrap();
}

#[test]
fn the_open_after_commits_without_syncs_finds_exactly_the_free_pages() {
    let cases = rbolt_testkit::tier::size("RBOLT_UNSYNCED_OPEN_CASES", 12, 40, 200);
    let seed =
        rbolt_testkit::tier::number::<u64>("RBOLT_UNSYNCED_OPEN_SEED").unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    eprintln!("unsynced open: RBOLT_UNSYNCED_OPEN_SEED={seed}, {cases} cases");
    let mut rng = Rng::new(seed);
    let mut unsynced_commits = 0;
    for case in 0..cases {
        let sim = SimFile::new().unwrap();
        let db = Db::open_storage(Arc::new(sim.clone()), Options::default()).unwrap();
        // A durable start: the buckets full, some keys gone.
        for round in 0..3 {
            random_commit(&db, &mut rng, round);
        }
        db.sync().unwrap();
        // A reader from here keeps what the next commits free pending, in some cases.
        let reader = rng.chance(1, 2).then(|| db.begin_read().unwrap());
        let commits = rng.range(1, 25);
        for round in 0..commits {
            random_commit(&db, &mut rng, 3 + round);
        }
        unsynced_commits += commits;
        let model = read_db(&db).unwrap();
        drop(reader);
        // The process dies (the machine does not): every write stays in the page cache.
        let reopened = sim.after_process_crash().unwrap();
        drop(db);
        let db = Db::open_storage(Arc::new(reopened), Options::default()).unwrap();
        // Not `assert_eq!`: the models are large.
        assert!(
            read_db(&db).unwrap() == model,
            "case {case} (seed {seed}): the open did not take the newest commit"
        );
        assert_clean(&db);
        // Writing on over the pages it found free damages nothing.
        for round in 0..5 {
            random_commit(&db, &mut rng, 100 + round);
            assert_clean(&db);
        }
        let after = read_db(&db).unwrap();
        db.close().unwrap();
        drop(after);
    }
    eprintln!("unsynced open: {cases} cases, {unsynced_commits} commits without syncs");
}
