//! One-sync durable commits (issue 51, `Durability::OneSync`): one sync per commit, and the
//! open trusts such a commit's meta only when the pages it names give its digest.

use crate::support::assert_clean;
use rbolt::storage::{FaultError, FaultPlan, OpKind, SimFile};
use rbolt::{Db, Durability, Options};
use rbolt_page::{MetaDurability, PageRun, Pgid, read_meta, read_meta_page, write_meta_one_sync};
use std::collections::BTreeMap;
use std::sync::Arc;

pub(crate) const PAGE: usize = 4096;

pub(crate) fn sim_db(options: Options) -> (SimFile, Db) {
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), options).unwrap();
    (sim, db)
}

pub(crate) fn put(db: &Db, key: &[u8], value: &[u8]) {
    db.update(|tx| tx.create_bucket_if_not_exists("b")?.put(key, value))
        .unwrap();
}

/// The content of bucket "b" (empty when there is none).
pub(crate) fn content(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    db.view(|tx| {
        let Some(b) = tx.bucket("b")? else {
            return Ok::<_, rbolt::Error>(BTreeMap::new());
        };
        b.iter()
            .map(|e| e.map(|e| (e.key().to_vec(), e.value().unwrap_or_default().to_vec())))
            .collect()
    })
    .unwrap()
}

/// How the meta in `slot` of `image` was written, if it reads at all.
pub(crate) fn meta_kind(image: &[u8], slot: usize) -> Option<(u64, MetaDurability)> {
    let at = slot * PAGE;
    read_meta_page(&image[at..at + PAGE], Pgid(slot as u64))
        .ok()
        .map(|(meta, kind)| (meta.txid, kind))
}

/// Opens `image` on a new machine (a power loss: another boot) and returns its content.
pub(crate) fn reopen(image: Vec<u8>) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let db = Db::open_storage(
        Arc::new(SimFile::from_image(image).unwrap()),
        Options::default(),
    )
    .unwrap();
    assert_clean(&db);
    content(&db)
}

#[test]
fn a_small_one_sync_commit_issues_exactly_one_fdatasync() {
    let (sim, db) = sim_db(Options::default().one_sync(true));
    for i in 0..100u32 {
        put(&db, &i.to_be_bytes(), b"value");
    }
    let before = sim.counts();
    put(&db, b"k", b"v");
    let ops = sim.counts().since(before);
    assert_eq!((ops.sync_data, ops.sync_all), (1, 0), "{ops:?}");
    assert_eq!(ops.write, 1, "the meta page: {ops:?}");
    let image = sim.live_image().unwrap();
    let newest = (0..2)
        .filter_map(|slot| meta_kind(&image, slot))
        .max_by_key(|(txid, _)| *txid);
    assert_eq!(newest.map(|(_, kind)| kind), Some(MetaDurability::OneSync));

    // One that grows the file: its one sync is an fsync.
    let before = sim.counts();
    db.update(|tx| {
        let mut b = tx.bucket_mut("b")?.unwrap();
        for i in 0..2000u32 {
            b.put(format!("grow{i}"), [7u8; 100])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    let ops = sim.counts().since(before);
    assert!(ops.grow >= 1, "{ops:?}");
    assert_eq!((ops.sync_data, ops.sync_all), (0, 1), "{ops:?}");
}

#[test]
fn one_sync_falls_back_to_two_syncs_where_its_meta_may_not_go() {
    let (sim, db) = sim_db(Options::default());
    put(&db, b"a", b"1");
    // After a commit without syncs: its digest would not cover that commit's pages.
    let tx = db.begin_write().unwrap();
    tx.set_durability(Durability::None);
    tx.create_bucket_if_not_exists("b")
        .unwrap()
        .put("n", "1")
        .unwrap();
    tx.commit().unwrap();
    let before = sim.counts();
    let tx = db.begin_write().unwrap();
    tx.set_durability(Durability::OneSync);
    tx.bucket_mut("b").unwrap().unwrap().put("o", "1").unwrap();
    tx.commit().unwrap();
    assert_eq!(sim.counts().since(before).sync_data, 2);
    // After a durable commit: one.
    let before = sim.counts();
    let tx = db.begin_write().unwrap();
    tx.set_durability(Durability::OneSync);
    tx.bucket_mut("b").unwrap().unwrap().put("p", "1").unwrap();
    tx.commit().unwrap();
    assert_eq!(sim.counts().since(before).syncs(), 1);
    // Pages of 512 bytes: slot 0 takes no meta Go cannot read (not the system's page size),
    // and slot 1 holds 25 runs. Each commit writes one run per write call: more runs than
    // that, or slot 0, means two syncs, whatever the commit asked for.
    let (sim, db) = sim_db(Options::default().page_size(512).one_sync(true));
    for i in 0..3000u32 {
        put(&db, &i.to_be_bytes(), &[1u8; 20]);
    }
    let (mut one, mut many_runs, mut slot_0) = (0, 0, 0);
    for round in 0..40u32 {
        let txid = db.begin_read().unwrap().id().0 + 1;
        let before = sim.counts();
        db.update(|tx| {
            let mut b = tx.bucket_mut("b")?.unwrap();
            // Alternately a few keys and many, spread over the tree.
            let step = if round % 4 < 2 {
                1000
            } else {
                7 + round as usize
            };
            for i in (round % 7..3000).step_by(step) {
                b.put(i.to_be_bytes(), [round as u8; 20])?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
        let ops = sim.counts().since(before);
        let expected = if txid % 2 == 0 {
            slot_0 += 1;
            2
        } else if ops.write_vectored > 25 {
            many_runs += 1;
            2
        } else {
            one += 1;
            1
        };
        assert_eq!(ops.syncs(), expected, "round {round}, txid {txid}: {ops:?}");
    }
    assert!(
        one > 0 && many_runs > 0 && slot_0 > 0,
        "{one} {many_runs} {slot_0}"
    );
}

#[test]
fn close_and_reopen_leave_a_meta_go_reads_as_the_newest() {
    let (sim, db) = sim_db(Options::default().one_sync(true));
    put(&db, b"a", b"1");
    put(&db, b"b", b"2");
    let expected = content(&db);
    db.close().unwrap();
    let image = sim.live_image().unwrap();
    // Go's check (the plain checksum) passes for the newest meta.
    let go_newest = (0..2)
        .filter_map(|slot| read_meta(&image[slot * PAGE..], Pgid(slot as u64)).ok())
        .map(|meta| meta.txid)
        .max();
    let newest = (0..2)
        .filter_map(|slot| meta_kind(&image, slot))
        .max_by_key(|(txid, _)| *txid);
    assert_eq!(go_newest, newest.map(|(txid, _)| txid));
    assert_eq!(reopen(image), expected);

    // A crash (no close) leaves a one-sync meta; the open writes one in Go's form after it.
    let (sim, db) = sim_db(Options::default().one_sync(true));
    put(&db, b"a", b"1");
    let expected = content(&db);
    std::mem::forget(db);
    let crashed = sim.after_process_crash().unwrap();
    let image = crashed.live_image().unwrap();
    let newest = (0..2)
        .filter_map(|slot| meta_kind(&image, slot))
        .max_by_key(|(txid, _)| *txid);
    assert_eq!(newest.map(|(_, kind)| kind), Some(MetaDurability::OneSync));
    let db = Db::open_storage(Arc::new(crashed.clone()), Options::default()).unwrap();
    assert_eq!(content(&db), expected);
    drop(db);
    let image = crashed.durable_image();
    let go_newest = (0..2)
        .filter_map(|slot| read_meta(&image[slot * PAGE..], Pgid(slot as u64)).ok())
        .map(|meta| meta.txid)
        .max();
    let newest = (0..2)
        .filter_map(|slot| meta_kind(&image, slot))
        .max_by_key(|(txid, _)| *txid);
    assert_eq!(go_newest, newest.map(|(txid, _)| txid));
}

/// A one-sync commit of a few keys whose sync fails: the images of what a power loss during
/// that sync can leave. Returns the durable image before it (`old`, content `before`), the
/// live image with every write of the commit (`new`, content `after`), and the pages the
/// commit wrote, the meta's included.
pub(crate) struct Interrupted {
    pub(crate) old: Vec<u8>,
    pub(crate) new: Vec<u8>,
    pub(crate) before: BTreeMap<Vec<u8>, Vec<u8>>,
    pub(crate) after: BTreeMap<Vec<u8>, Vec<u8>>,
    pub(crate) data_pages: Vec<usize>,
    pub(crate) meta_page: usize,
}

pub(crate) fn interrupted_commit() -> Interrupted {
    let (sim, db) = sim_db(Options::default().one_sync(true));
    for i in 0..300u32 {
        put(&db, &i.to_be_bytes(), &[i as u8; 30]);
    }
    let before = content(&db);
    let mut after = before.clone();
    sim.set_fault_plan(FaultPlan::new().fail_kind(OpKind::SyncData, FaultError::Io));
    let result = db.update(|tx| {
        let mut b = tx.bucket_mut("b")?.unwrap();
        for i in [3u32, 150, 299] {
            b.put(i.to_be_bytes(), b"changed")?;
            after.insert(i.to_be_bytes().to_vec(), b"changed".to_vec());
        }
        Ok::<_, rbolt::Error>(())
    });
    assert!(result.is_err(), "the sync failed");
    let old = sim.durable_image();
    let new = sim.live_image().unwrap();
    assert_eq!(old.len(), new.len(), "no growth in this commit");
    let changed: Vec<usize> = (0..new.len() / PAGE)
        .filter(|&p| old[p * PAGE..(p + 1) * PAGE] != new[p * PAGE..(p + 1) * PAGE])
        .collect();
    let meta_page = *changed
        .iter()
        .find(|&&p| p < 2)
        .expect("the meta was written");
    let data_pages: Vec<usize> = changed.into_iter().filter(|&p| p >= 2).collect();
    assert!(data_pages.len() >= 3, "{data_pages:?}");
    assert_eq!(
        meta_kind(&new, meta_page).unwrap().1,
        MetaDurability::OneSync
    );
    Interrupted {
        old,
        new,
        before,
        after,
        data_pages,
        meta_page,
    }
}

pub(crate) fn with_page_from(
    image: &mut [u8],
    from: &[u8],
    page: usize,
    range: std::ops::Range<usize>,
) {
    let at = page * PAGE;
    image[at + range.start..at + range.end]
        .copy_from_slice(&from[at + range.start..at + range.end]);
}

#[test]
fn a_power_loss_during_the_one_sync_opens_the_commit_only_with_all_its_pages() {
    let crash = interrupted_commit();
    // Every write kept: the commit.
    assert_eq!(reopen(crash.new.clone()), crash.after);
    // The pages kept, the meta not: the commit before.
    let mut image = crash.new.clone();
    with_page_from(&mut image, &crash.old, crash.meta_page, 0..PAGE);
    assert_eq!(reopen(image), crash.before);
    for &page in &crash.data_pages {
        // The meta kept, one page dropped (its old bytes), torn (its first sector only, or
        // all but its last) or zeroed: the commit before, whole.
        let mut dropped = crash.new.clone();
        with_page_from(&mut dropped, &crash.old, page, 0..PAGE);
        let mut torn_head = crash.new.clone();
        with_page_from(&mut torn_head, &crash.old, page, 512..PAGE);
        let mut torn_tail = crash.new.clone();
        with_page_from(&mut torn_tail, &crash.old, page, PAGE - 512..PAGE);
        let mut zeroed = crash.new.clone();
        zeroed[page * PAGE..(page + 1) * PAGE].fill(0);
        for (what, image) in [
            ("dropped", dropped),
            ("torn head", torn_head),
            ("torn tail", torn_tail),
            ("zeroed", zeroed),
        ] {
            if image[page * PAGE..(page + 1) * PAGE] == crash.new[page * PAGE..(page + 1) * PAGE] {
                continue; // the damage changed nothing (a sector that did not change)
            }
            assert_eq!(reopen(image), crash.before, "page {page} {what}");
        }
    }
}

#[test]
fn a_damaged_one_sync_meta_falls_back_and_never_panics() {
    let crash = interrupted_commit();
    let slot = crash.meta_page;
    let (meta, _) = read_meta_page(&crash.new[slot * PAGE..], Pgid(slot as u64)).unwrap();
    let file_pages = (crash.new.len() / PAGE) as u64;
    let run = |start, n_pages| PageRun {
        start: Pgid(start),
        n_pages,
    };
    let good_runs: Vec<PageRun> = crash.data_pages.iter().map(|&p| run(p as u64, 1)).collect();
    // Metas that pass their checksum but name runs a commit cannot have written, runs outside
    // the file, or the wrong digest: each opens the commit before.
    let mut cases: Vec<(&str, Vec<PageRun>, [u8; 16])> = vec![
        ("a wrong digest", good_runs.clone(), [0x5a; 16]),
        ("a run past the file", vec![run(file_pages, 3)], [0; 16]),
        ("a run past the mark", vec![run(meta.pgid - 1, 2)], [0; 16]),
        ("a run over the metas", vec![run(0, 3)], [0; 16]),
        ("a wrapping run", vec![run(u64::MAX - 1, 4)], [0; 16]),
        ("an empty run", vec![run(5, 0)], [0; 16]),
        ("runs out of order", vec![run(9, 1), run(5, 1)], [0; 16]),
        ("a huge run", vec![run(2, u64::MAX / 2)], [0; 16]),
    ];
    // Too many runs for the page: not a one-sync meta at all (torn, to its reader).
    cases.push(("too many runs", vec![run(2, 1); 300], [0; 16]));
    for (what, runs, digest) in cases {
        let mut image = crash.new.clone();
        let mut page = vec![0u8; 16 * PAGE];
        let n = runs.len().min(249);
        write_meta_one_sync(&mut page, &meta, &runs[..n], &digest);
        let end = if runs.len() > 249 {
            PAGE
        } else {
            rbolt_page::one_sync_meta_len(n)
        };
        if runs.len() > 249 {
            // The count names more runs than the page holds.
            page[86..88].copy_from_slice(&(runs.len() as u16).to_le_bytes());
        }
        image[slot * PAGE..slot * PAGE + end].copy_from_slice(&page[..end]);
        assert_eq!(reopen(image), crash.before, "{what}");
    }
    // Random damage anywhere in the meta's first block: a typed error or an open, never a
    // panic, and never a state other than the two.
    let mut rng = rbolt_testkit::rng::Rng::new(51);
    for _ in 0..200 {
        let mut image = crash.new.clone();
        let at = slot * PAGE + 16 + rng.below(200) as usize;
        image[at] ^= 1 << rng.below(8);
        let opened = Db::open_storage(
            Arc::new(SimFile::from_image(image).unwrap()),
            Options::default(),
        );
        if let Ok(db) = opened {
            let found = content(&db);
            assert!(found == crash.before || found == crash.after);
        }
    }
}

/// Issue 51: a one-sync commit's digest covers only the pages it wrote, so right after
/// commits without syncs (whose pages its tree still reaches, unsynced) it must sync twice:
/// else a power loss during its one sync can keep its meta and its pages but drop theirs,
/// and the open would trust a meta whose tree is not all there. Every power loss at every
/// storage call of such a commit opens one of the three states, whole.
#[test]
fn a_one_sync_commit_after_commits_without_syncs_survives_a_power_loss_anywhere() {
    let keys = |range: std::ops::Range<u32>, value: u8| -> Vec<(Vec<u8>, Vec<u8>)> {
        range
            .map(|i| (i.to_be_bytes().to_vec(), vec![value; 40]))
            .collect()
    };
    let write = |db: &Db, bucket: &str, entries: &[(Vec<u8>, Vec<u8>)], durability| {
        let tx = db.begin_write().unwrap();
        tx.set_durability(durability);
        let mut b = tx.create_bucket_if_not_exists(bucket).unwrap();
        for (k, v) in entries {
            b.put(k, v).unwrap();
        }
        drop(b);
        tx.commit()
    };
    let state = |db: &Db| -> Vec<BTreeMap<Vec<u8>, Vec<u8>>> {
        ["a", "b"]
            .iter()
            .map(|name| {
                db.view(|tx| {
                    let b = tx.bucket(name)?.unwrap();
                    b.iter()
                        .map(|e| e.map(|e| (e.key().to_vec(), e.value().unwrap().to_vec())))
                        .collect()
                })
                .unwrap()
            })
            .collect()
    };
    // The database up to the commit without syncs, and the states before and after it.
    let setup = || {
        let (sim, db) = sim_db(Options::default());
        write(&db, "a", &keys(0..2000, 1), Durability::Immediate).unwrap();
        write(&db, "b", &keys(0..2000, 2), Durability::Immediate).unwrap();
        let before_none = state(&db);
        // Many leaves of "a", without syncs.
        let spread: Vec<_> = keys(0..2000, 3).into_iter().step_by(40).collect();
        write(&db, "a", &spread, Durability::None).unwrap();
        (sim, db, before_none)
    };
    let (sim, db, before_none) = setup();
    let after_none = state(&db);
    let first_op = sim.op_count();
    write(&db, "b", &keys(7..8, 4), Durability::OneSync).unwrap();
    let after = state(&db);
    let last_op = sim.op_count();
    drop(db);
    let mut opened = [0u32; 3];
    for op in first_op..last_op {
        for seed in 0..6u64 {
            let (sim, db, _) = setup();
            sim.set_fault_plan(FaultPlan::new().crash_at(op));
            let _ = write(&db, "b", &keys(7..8, 4), Durability::OneSync);
            std::mem::forget(db);
            let profile = if seed % 2 == 0 {
                rbolt::storage::CrashProfile::Random
            } else {
                rbolt::storage::CrashProfile::Torn
            };
            let image = sim.crash_image(profile, seed);
            let db = Db::open_storage(
                Arc::new(SimFile::from_image(image).unwrap()),
                Options::default(),
            )
            .unwrap_or_else(|e| panic!("op {op} seed {seed}: {e}"));
            assert_clean(&db);
            let found = state(&db);
            let index = [&before_none, &after_none, &after]
                .iter()
                .position(|s| **s == found)
                .unwrap_or_else(|| panic!("op {op} seed {seed}: a state never committed"));
            opened[index] += 1;
        }
    }
    assert!(opened[2] > 0, "some image kept the commit: {opened:?}");
}

/// Issue 51: the open falls back from a one-sync meta to the meta before it, so that meta must
/// stay sound however the commits after it wrote: every page a one-sync commit writes (the
/// runs its digest covers) must be one its meta reaches, else the next commit may reuse it
/// and the older meta's digest fails when it is needed. After each commit of a varied
/// workload (big commits that write out as they spill, nested and inline buckets, deletes,
/// commits without syncs, two-sync commits), the image with the newest meta torn opens at
/// the commit before it.
#[test]
fn the_meta_before_a_one_sync_commit_stays_a_sound_fallback() {
    let (sim, db) = sim_db(Options::default().one_sync(true));
    let mut rng = rbolt_testkit::rng::Rng::new(5151);
    let mut previous = content_all(&db);
    let mut previous_durability = Durability::Immediate;
    let mut one_sync_fallbacks = 0;
    let mut previous_one_sync = false;
    for round in 0..24u32 {
        let durability = match rng.below(6) {
            0 => Durability::None,
            1 => Durability::Immediate,
            _ => Durability::OneSync,
        };
        let tx = db.begin_write().unwrap();
        tx.set_durability(durability);
        let big = rng.chance(1, 6);
        let n = if big { 12_000 } else { 1 + rng.below(200) };
        let value_len = if big { 900 } else { rng.below(300) as usize };
        let mut b = tx.create_bucket_if_not_exists("b").unwrap();
        for _ in 0..n {
            let key = (rng.below(20_000) as u32).to_be_bytes();
            if rng.chance(1, 4) {
                b.delete(key).unwrap();
            } else {
                b.put(key, vec![round as u8; value_len]).unwrap();
            }
        }
        // A nested bucket that is sometimes inline, sometimes spilled, sometimes deleted.
        let mut nested = b.create_bucket_if_not_exists("nested").unwrap();
        for i in 0..rng.below(60) as u32 {
            nested.put(i.to_be_bytes(), vec![1u8; 50]).unwrap();
        }
        drop(nested);
        if rng.chance(1, 3) {
            b.delete_bucket("nested").unwrap();
        }
        drop(b);
        tx.commit().unwrap();
        // An acknowledged durable commit is what the disk holds: its one-sync meta verifies
        // (its runs plausible, never overlapping, and giving its digest), so a power loss
        // right after it opens it, not the commit before.
        if durability != Durability::None {
            let synced = Db::open_storage(
                Arc::new(SimFile::from_image(sim.durable_image()).unwrap()),
                Options::default().read_only(true),
            )
            .unwrap();
            assert_eq!(
                content_all(&synced),
                content_all(&db),
                "round {round}: not durable"
            );
        }
        let image = sim.live_image().unwrap();
        let newest = (0..2)
            .filter_map(|slot| meta_kind(&image, slot))
            .max_by_key(|(txid, _)| *txid)
            .unwrap();
        let mut torn = image.clone();
        let at = (newest.0 % 2) as usize * PAGE;
        torn[at + 16..at + 80].fill(0xee);
        let db_torn = Db::open_storage(
            Arc::new(SimFile::from_image(torn).unwrap()),
            Options::default().read_only(true),
        )
        .unwrap_or_else(|e| panic!("round {round}: {e}"));
        assert_clean(&db_torn);
        // The fallback is the commit before when both are durable (after a commit without
        // syncs, a durable commit takes that one's slot, and the fallback is older).
        if durability != Durability::None && previous_durability != Durability::None {
            assert_eq!(content_all(&db_torn), previous, "round {round}");
            one_sync_fallbacks += usize::from(previous_one_sync);
        }
        drop(db_torn);
        previous = content_all(&db);
        previous_durability = durability;
        previous_one_sync = newest.1 == MetaDurability::OneSync;
    }
    assert!(
        one_sync_fallbacks >= 5,
        "{one_sync_fallbacks} falls back to a one-sync meta"
    );
}

/// Every bucket's content, nested ones as "name/".
pub(crate) fn content_all(db: &Db) -> BTreeMap<Vec<u8>, Vec<u8>> {
    let mut all = content(db);
    db.view(|tx| {
        if let Some(b) = tx.bucket("b")?
            && let Some(nested) = b.bucket("nested")?
        {
            for e in nested.iter() {
                let e = e?;
                let mut key = b"nested/".to_vec();
                key.extend_from_slice(e.key());
                all.insert(key, e.value().unwrap_or_default().to_vec());
            }
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    all
}

/// A one-sync commit writes no freelist page (its meta names none: only rbolt's open reads
/// such a meta, and it rebuilds the freelist by walking the tree), so a small commit's bytes
/// do not grow with the free set; the open after a power loss rebuilds it, leaking nothing
/// and reusing nothing reachable, and writes a meta in Go's form with a freelist page again.
#[test]
fn a_one_sync_commit_writes_no_freelist_page_and_the_open_after_a_power_loss_rebuilds_it() {
    let (sim, db) = sim_db(Options::default().one_sync(true));
    db.update(|tx| {
        let mut b = tx.create_bucket_if_not_exists("b")?;
        for i in 0..6000u32 {
            b.put(i.to_be_bytes(), [1u8; 200])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    // Most keys deleted by a commit with two syncs: a free set of hundreds of pages, whose
    // freelist page that commit writes.
    db.update(|tx| {
        tx.set_durability(Durability::Immediate);
        let mut b = tx.bucket_mut("b")?.unwrap();
        for i in (0..6000u32).filter(|i| i % 8 != 0) {
            b.delete(i.to_be_bytes())?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    let free = db.stats().free_page_n + db.stats().pending_page_n;
    assert!(free > 300, "{free} free pages");
    for i in 0..20u32 {
        let before = sim.counts();
        put(&db, &(i * 8 + 1).to_be_bytes(), b"small");
        let ops = sim.counts().since(before);
        assert_eq!(ops.syncs(), 1, "commit {i}: {ops:?}");
        let image = sim.live_image().unwrap();
        let slot = (db.begin_read().unwrap().id().0 % 2) as usize;
        let (meta, kind) =
            read_meta_page(&image[slot * PAGE..(slot + 1) * PAGE], Pgid(slot as u64)).unwrap();
        assert_eq!(kind, MetaDurability::OneSync);
        assert_eq!(meta.freelist, rbolt_page::PGID_NO_FREELIST.0, "commit {i}");
    }
    let expected = content(&db);
    // A power loss: what the syncs made durable, on another boot.
    let rebooted = SimFile::from_image(sim.durable_image()).unwrap();
    let reopened = Db::open_storage(Arc::new(rebooted.clone()), Options::default()).unwrap();
    assert_eq!(content(&reopened), expected);
    assert_clean(&reopened);
    // Every page the last commit does not reach is free again (nothing pinned it across the
    // boot: the 20 commits' pending pages too), and the open wrote a meta in Go's form with
    // a freelist page.
    let stats = reopened.stats();
    assert!(
        stats.free_page_n + 20 >= free,
        "{} free of {free}",
        stats.free_page_n
    );
    let image = rebooted.live_image().unwrap();
    let newest = (0..2)
        .filter_map(|slot| {
            read_meta_page(&image[slot * PAGE..(slot + 1) * PAGE], Pgid(slot as u64)).ok()
        })
        .max_by_key(|(meta, _)| meta.txid)
        .unwrap();
    assert_eq!(newest.1, MetaDurability::Durable);
    assert_ne!(newest.0.freelist, rbolt_page::PGID_NO_FREELIST.0);
    reopened.close().unwrap();
}
