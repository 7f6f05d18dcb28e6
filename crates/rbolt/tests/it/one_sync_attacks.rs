//! Attacks on one-sync durable commits against the fault model (issue 51, a review from
//! outside): each hypothesis of how the protocol could lose or invent a commit, as a test.
//! The helpers are `one_sync.rs`'s.

use crate::one_sync::{
    PAGE, content, interrupted_commit, meta_kind, put, reopen, sim_db, with_page_from,
};
use crate::support::assert_clean;
use rbolt::storage::{FaultError, FaultPlan, OpKind, SimFile};
use rbolt::{Db, Durability, Options};
use rbolt_page::{MetaDurability, OneSyncRecord, Pgid, read_meta, read_meta_page};
use std::collections::BTreeSet;
use std::sync::Arc;

/// The newest meta of `image` that reads at all: its slot, txid and kind.
fn newest_meta(image: &[u8]) -> (usize, u64, MetaDurability) {
    (0..2)
        .filter_map(|slot| meta_kind(image, slot).map(|(txid, kind)| (slot, txid, kind)))
        .max_by_key(|(_, txid, _)| *txid)
        .expect("a meta")
}

/// Asserts that every page (past the metas) that differs between `before` and `after` is
/// named by the runs of the one-sync meta in `slot` of `after`.
fn assert_every_change_named(before: &[u8], after: &[u8], slot: usize, what: &str) {
    let named = pages_named(after, slot);
    let unnamed: Vec<u64> = changed_pages(before, after)
        .into_iter()
        .filter(|&p| p >= 2 && !named.contains(&p))
        .collect();
    assert!(
        unnamed.is_empty(),
        "{what}: pages written but not named: {unnamed:?}"
    );
}

/// Every page the one-sync meta in `slot` of `image` names.
fn pages_named(image: &[u8], slot: usize) -> BTreeSet<u64> {
    let page = &image[slot * PAGE..(slot + 1) * PAGE];
    let (meta, kind) = read_meta_page(page, Pgid(slot as u64)).unwrap();
    assert_eq!(kind, MetaDurability::OneSync);
    let record = OneSyncRecord::read(page, &meta).expect("a one-sync record");
    record
        .runs()
        .flat_map(|run| run.start.0..run.start.0 + run.n_pages)
        .collect()
}

/// The pages whose bytes differ between `before` and `after` (a page past the end of
/// `before` compares with zeros, as a file grown with `fallocate` reads).
fn changed_pages(before: &[u8], after: &[u8]) -> BTreeSet<u64> {
    let zeros = [0u8; PAGE];
    (0..after.len() / PAGE)
        .filter(|&p| {
            let old = before.get(p * PAGE..(p + 1) * PAGE).unwrap_or(&zeros);
            old != &after[p * PAGE..(p + 1) * PAGE]
        })
        .map(|p| p as u64)
        .collect()
}

/// Attack 3: the digest guards only the pages the meta names, so a commit that wrote a page
/// it does not name (a freelist page, an overflow value, a page of a second flush, a page
/// past the old end of the file, a vacuum step's move) could lose that page to a power loss
/// under a meta the open trusts. Every page a one-sync commit changes, in every shape of
/// commit, is named by its meta; and the other meta slot is never written.
#[test]
fn every_page_a_one_sync_commit_changes_is_named_by_its_meta() {
    let (sim, db) = sim_db(Options::default().one_sync(true));
    let big = |tx: &mut rbolt::WriteTx<'_>, n: u32, len: usize| -> rbolt::Result<()> {
        let mut b = tx.create_bucket_if_not_exists("b")?;
        for i in 0..n {
            b.put(format!("big{i:06}"), vec![i as u8; len])?;
        }
        Ok(())
    };
    type Step = Box<dyn Fn(&mut rbolt::WriteTx<'_>) -> rbolt::Result<()>>;
    let steps: Vec<(&str, Step)> = vec![
        (
            "one key",
            Box::new(|tx| tx.create_bucket_if_not_exists("b")?.put("k", "v")),
        ),
        (
            "an overflow value",
            Box::new(|tx| {
                tx.create_bucket_if_not_exists("b")?
                    .put("o", vec![9u8; 3 * PAGE])
            }),
        ),
        // More than `DIRTY_FLUSH_BYTES` (8 MiB): pages written out as the spill goes, and the
        // file grows.
        (
            "a commit of several flushes",
            Box::new(move |tx| big(tx, 11_000, 900)),
        ),
        (
            "nested buckets",
            Box::new(|tx| {
                let mut b = tx.create_bucket_if_not_exists("b")?;
                let mut n = b.create_bucket_if_not_exists("nested")?;
                for i in 0..300u32 {
                    n.put(i.to_be_bytes(), [1u8; 60])?;
                }
                drop(n);
                let mut inline = b.create_bucket_if_not_exists("inline")?;
                inline.put("x", "y")
            }),
        ),
        (
            "deletes that merge leaves",
            Box::new(|tx| {
                let mut b = tx.bucket_mut("b")?.unwrap();
                for i in (0..11_000u32).filter(|i| i % 7 != 0).take(3000) {
                    b.delete(format!("big{i:06}"))?;
                }
                b.delete_bucket("nested")
            }),
        ),
        (
            "the overflow value shrunk",
            Box::new(|tx| tx.bucket_mut("b")?.unwrap().put("o", "small")),
        ),
    ];
    let mut one_sync_commits = 0;
    for (what, step) in &steps {
        let before = sim.live_image().unwrap();
        db.update(|tx| step(tx)).unwrap();
        let after = sim.live_image().unwrap();
        let (slot, _, kind) = newest_meta(&after);
        let other = 1 - slot;
        assert_eq!(
            before[other * PAGE..(other + 1) * PAGE],
            after[other * PAGE..(other + 1) * PAGE],
            "{what}: the commit wrote the other meta's slot"
        );
        if kind != MetaDurability::OneSync {
            continue; // synced twice (too many runs, or too many bytes)
        }
        one_sync_commits += 1;
        assert_every_change_named(&before, &after, slot, what);
    }
    // Vacuum steps (each synced twice, whatever the handle's default), each followed by a
    // one-sync commit: the first pages it may reuse are those the step moved away from.
    for step in 0..6 {
        if !db.vacuum_step(64).unwrap().committed {
            break;
        }
        let before = sim.live_image().unwrap();
        db.update(|tx| {
            tx.bucket_mut("b")?
                .unwrap()
                .put("after a step", [step as u8; 8])
        })
        .unwrap();
        let after = sim.live_image().unwrap();
        let (slot, _, kind) = newest_meta(&after);
        if kind != MetaDurability::OneSync {
            continue;
        }
        one_sync_commits += 1;
        assert_every_change_named(&before, &after, slot, &format!("after vacuum step {step}"));
    }
    assert!(one_sync_commits >= 8, "{one_sync_commits} one-sync commits");
    assert_clean(&db);
}

/// Attack 2: a power loss tears the meta page at a sector, or a write keeps the new record
/// and leaves the tail of the one-sync meta that was in the slot before (a stale run list and
/// digest, which its own pages still match), or the reverse. The checksum binds the record
/// to its tail, so no mix of the two is taken for a one-sync meta: each opens the commit
/// before. Bytes past the runs are nobody's: garbage there changes nothing.
#[test]
fn a_meta_with_a_stale_or_torn_tail_never_validates() {
    let crash = interrupted_commit();
    let slot = crash.meta_page;
    // The slot held a one-sync meta before (every commit of the setup was one).
    assert_eq!(
        meta_kind(&crash.old, slot).unwrap().1,
        MetaDurability::OneSync
    );
    let end = rbolt_page::one_sync_meta_len(pages_named_runs(&crash.new, slot));
    let mut cases: Vec<(&str, Vec<u8>)> = Vec::new();
    let mut image = crash.new.clone();
    with_page_from(&mut image, &crash.old, slot, 80..PAGE);
    cases.push(("new record, the old tail", image));
    let mut image = crash.new.clone();
    with_page_from(&mut image, &crash.old, slot, 0..80);
    cases.push(("old record, the new tail", image));
    let mut image = crash.new.clone();
    image[slot * PAGE + 80..(slot + 1) * PAGE].fill(0);
    cases.push(("new record, the tail zeroed", image));
    let mut image = crash.new.clone();
    image[slot * PAGE + 80..slot * PAGE + 88].fill(0);
    cases.push(("new record, the tag and count zeroed", image));
    let mut image = crash.new.clone();
    with_page_from(&mut image, &crash.old, slot, end - 16..end);
    cases.push(("the last run from the old meta", image));
    let mut image = crash.new.clone();
    with_page_from(&mut image, &crash.old, slot, 88..104);
    cases.push(("the old digest", image));
    // The old tail names the old meta's runs, whose pages the durable state still holds
    // (freed by the commit after it, and reusable only by this one): with this commit's
    // writes over them dropped, and one more of its pages, the old runs give the old digest,
    // and only the checksum's binding of record and tail keeps the open from trusting the
    // new record, whose pages are not all there.
    let old_runs = pages_named(&crash.old, slot);
    for &extra in &crash.data_pages {
        let mut image = crash.new.clone();
        with_page_from(&mut image, &crash.old, slot, 80..PAGE);
        for &page in &crash.data_pages {
            if page == extra || old_runs.contains(&(page as u64)) {
                with_page_from(&mut image, &crash.old, page, 0..PAGE);
            }
        }
        cases.push(("new record, the old tail over its intact runs", image));
    }
    for (what, image) in cases {
        assert_ne!(image, crash.new, "{what}: no change");
        assert_eq!(reopen(image), crash.before, "{what}");
    }
    let mut image = crash.new.clone();
    image[slot * PAGE + end..(slot + 1) * PAGE].fill(0xab);
    assert_eq!(reopen(image), crash.after, "garbage past the runs");
}

/// How many runs the one-sync meta in `slot` of `image` names.
fn pages_named_runs(image: &[u8], slot: usize) -> usize {
    let page = &image[slot * PAGE..(slot + 1) * PAGE];
    let (meta, _) = read_meta_page(page, Pgid(slot as u64)).unwrap();
    OneSyncRecord::read(page, &meta).unwrap().runs().count()
}

/// Attack 4: a one-sync commit that grows the file makes its length durable with its one
/// sync (an fsync); a power loss during it may keep the meta and the pages within the old
/// end but not the growth (the file at its old length), or the growth but not the pages in
/// it (zeros). Both open the commit before, and no `Error::Truncated`.
#[test]
fn a_one_sync_commit_that_grows_the_file_opens_only_with_its_length() {
    let (sim, db) = sim_db(Options::default().one_sync(true));
    for i in 0..50u32 {
        put(&db, &i.to_be_bytes(), b"value");
    }
    let before = content(&db);
    let len_before = sim.live_image().unwrap().len();
    sim.set_fault_plan(FaultPlan::new().fail_kind(OpKind::SyncAll, FaultError::Io));
    let mut after = before.clone();
    let result = db.update(|tx| {
        let mut b = tx.bucket_mut("b")?.unwrap();
        for i in 0..3000u32 {
            let key = format!("grow{i:05}").into_bytes();
            b.put(&key, [7u8; 100])?;
            after.insert(key, vec![7u8; 100]);
        }
        // And one key in the first leaf, a page within the old end.
        b.put(0u32.to_be_bytes(), b"changed")?;
        after.insert(0u32.to_be_bytes().to_vec(), b"changed".to_vec());
        Ok::<_, rbolt::Error>(())
    });
    assert!(result.is_err(), "its one sync, an fsync, failed");
    let new = sim.live_image().unwrap();
    assert!(new.len() > len_before, "the commit grew the file");
    let (slot, _, kind) = newest_meta(&new);
    assert_eq!(kind, MetaDurability::OneSync);
    let named = pages_named(&new, slot);
    assert!(named.iter().any(|&p| (p as usize + 1) * PAGE <= len_before));
    assert!(named.iter().any(|&p| (p as usize + 1) * PAGE > len_before));
    assert_eq!(reopen(new.clone()), after, "everything kept");
    let mut cut = new.clone();
    cut.truncate(len_before);
    assert_eq!(reopen(cut), before, "the growth lost");
    let mut zeroed = new.clone();
    zeroed[len_before..].fill(0);
    assert_eq!(reopen(zeroed), before, "the pages past the old end lost");
}

/// Attack 5: a read-only open of a file whose newest meta is a one-sync meta with a page
/// missing falls back as a read-write open does, and writes nothing (no write, no sync: the
/// file stays byte for byte what the crash left); its check is clean.
#[test]
fn a_read_only_open_falls_back_from_an_unverified_meta_and_writes_nothing() {
    let crash = interrupted_commit();
    let mut image = crash.new.clone();
    let page = crash.data_pages[0];
    with_page_from(&mut image, &crash.old, page, 0..PAGE);
    let sim = SimFile::from_image(image.clone()).unwrap();
    let before_ops = sim.counts();
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default().read_only(true)).unwrap();
    assert_clean(&db);
    assert_eq!(content(&db), crash.before);
    drop(db);
    let ops = sim.counts().since(before_ops);
    assert_eq!(
        (ops.writes(), ops.syncs(), ops.grow, ops.shrink),
        (0, 0, 0, 0),
        "{ops:?}"
    );
    assert!(
        sim.live_image().unwrap() == image,
        "the read-only open changed the file"
    );
    // A read-write open of the same image shows the same state and leaves a meta Go reads
    // as the newest, over a freelist that checks clean.
    let sim = SimFile::from_image(image).unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default()).unwrap();
    assert_eq!(content(&db), crash.before);
    let reopened = sim.live_image().unwrap();
    let go_newest = (0..2u64)
        .filter_map(|slot| read_meta(&reopened[slot as usize * PAGE..], Pgid(slot)).ok())
        .max_by_key(|meta| meta.txid)
        .expect("a meta in Go's form");
    let (_, newest_txid, _) = newest_meta(&reopened);
    assert_eq!(go_newest.txid, newest_txid, "Go would open an older commit");
    drop(db);
    let go_only = Db::open_storage(
        Arc::new(SimFile::from_image(reopened).unwrap()),
        Options::default().read_only(true),
    )
    .unwrap();
    assert_clean(&go_only);
    assert_eq!(content(&go_only), crash.before);
}

/// Attack 7 (fsyncgate): a one-sync commit whose one sync fails (EIO) poisons the handle, as
/// a two-sync commit's failed sync does, so nothing builds on pages that may not be on the
/// disk. Linux may then keep the pages it could not write in the cache, clean: a reopen in
/// the same boot reads them, and the digest matches, though the disk holds the old bytes.
/// What that reopen shows must survive a power loss after it (recovery writes the runs and
/// the meta again before its sync).
#[test]
fn a_failed_one_sync_poisons_and_what_the_reopen_shows_survives_a_power_loss() {
    let mut showed_the_commit = 0;
    for seed in 0..64u64 {
        let (sim, db) = sim_db(Options::default().one_sync(true));
        for i in 0..200u32 {
            put(&db, &i.to_be_bytes(), &[i as u8; 30]);
        }
        let before = content(&db);
        sim.set_fault_plan(
            FaultPlan::new()
                .fail_kind(OpKind::SyncData, FaultError::Io)
                .fail_kind(OpKind::SyncAll, FaultError::Io),
        );
        let result = db.update(|tx| {
            let mut b = tx.bucket_mut("b")?.unwrap();
            b.put(100u32.to_be_bytes(), b"changed")
        });
        assert!(result.is_err());
        sim.set_fault_plan(FaultPlan::new());
        // Poisoned: the next commit, of either kind, is refused; so is the close.
        for durability in [Durability::OneSync, Durability::Immediate, Durability::None] {
            let tx = db.begin_write();
            assert!(
                matches!(tx, Err(rbolt::Error::Poisoned)),
                "seed {seed} {durability:?}: the handle is not poisoned"
            );
        }
        let after_failed = sim.after_failed_sync(seed).unwrap();
        assert!(matches!(db.close(), Err(rbolt::Error::Poisoned)));
        let db = Db::open_storage(Arc::new(after_failed.clone()), Options::default()).unwrap();
        assert_clean(&db);
        let shown = content(&db);
        if shown != before {
            showed_the_commit += 1;
        }
        drop(db);
        for (profile, image_seed) in [
            (rbolt::storage::CrashProfile::DropAll, 0),
            (rbolt::storage::CrashProfile::Torn, seed),
        ] {
            let image = after_failed.crash_image(profile, image_seed);
            assert_eq!(
                reopen(image),
                shown,
                "seed {seed} {profile:?}: not what the reopen showed"
            );
        }
    }
    assert!(
        showed_the_commit > 0,
        "no seed kept every page of the commit"
    );
}

/// Attack 8: a device full (ENOSPC) in the middle of a one-sync commit — while its pages are
/// written, or the file grows — rolls it back and leaves the handle usable; the next one-sync
/// commit is whole after a power loss at any point of it. Full at the meta's write, the
/// handle is poisoned (the slot may hold part of it), as for a two-sync commit, and a reopen
/// shows one of the two states.
#[test]
fn a_full_device_in_a_one_sync_commit_changes_nothing_and_the_next_commit_is_whole() {
    let grow = |db: &Db, tag: u8| {
        db.update(|tx| {
            let mut b = tx.bucket_mut("b")?.unwrap();
            for i in 0..1500u32 {
                b.put(format!("g{tag}{i:05}"), [tag; 100])?;
            }
            Ok::<_, rbolt::Error>(())
        })
    };
    for kind in [OpKind::WriteVectored, OpKind::Grow] {
        let (sim, db) = sim_db(Options::default().one_sync(true));
        for i in 0..100u32 {
            put(&db, &i.to_be_bytes(), b"v");
        }
        let before = content(&db);
        sim.set_fault_plan(FaultPlan::new().fail_kind(kind, FaultError::NoSpace));
        assert!(grow(&db, 1).is_err(), "{kind:?}");
        sim.set_fault_plan(FaultPlan::new());
        assert_eq!(content(&db), before, "{kind:?}: the failed commit shows");
        let first_op = sim.op_count();
        grow(&db, 2).unwrap();
        let after = content(&db);
        let last_op = sim.op_count();
        assert_clean(&db);
        // The commit after it was one-sync, opens whole (its meta names what it wrote, not
        // what the failed commit did), and a power loss anywhere in it opens one of the two
        // states.
        let image = sim.live_image().unwrap();
        assert_eq!(newest_meta(&image).2, MetaDurability::OneSync, "{kind:?}");
        assert_eq!(reopen(image), after, "{kind:?}");
        // And acknowledged, it is durable: a power loss after it keeps it (its one sync made
        // the growth durable too, though the failed commit had grown the file first).
        assert_eq!(reopen(sim.durable_image()), after, "{kind:?}: not durable");
        drop(db);
        for op in first_op..last_op {
            let (sim, db) = sim_db(Options::default().one_sync(true));
            for i in 0..100u32 {
                put(&db, &i.to_be_bytes(), b"v");
            }
            sim.set_fault_plan(FaultPlan::new().fail_kind(kind, FaultError::NoSpace));
            assert!(grow(&db, 1).is_err());
            sim.set_fault_plan(FaultPlan::new().crash_at(op));
            let _ = grow(&db, 2);
            std::mem::forget(db);
            for (profile, seed) in [
                (rbolt::storage::CrashProfile::Random, op),
                (rbolt::storage::CrashProfile::Torn, op),
            ] {
                let found = reopen(sim.crash_image(profile, seed));
                assert!(
                    found == before || found == after,
                    "{kind:?} op {op} {profile:?}: a state never committed"
                );
            }
        }
    }
    // Full at the meta's write: poisoned, and a reopen shows one of the two states.
    let (sim, db) = sim_db(Options::default().one_sync(true));
    for i in 0..100u32 {
        put(&db, &i.to_be_bytes(), b"v");
    }
    let before = content(&db);
    sim.set_fault_plan(FaultPlan::new().fail_kind(OpKind::Write, FaultError::NoSpace));
    assert!(grow(&db, 1).is_err());
    sim.set_fault_plan(FaultPlan::new());
    assert!(matches!(db.begin_write(), Err(rbolt::Error::Poisoned)));
    drop(db);
    let found = reopen(sim.live_image().unwrap());
    assert!(found == before || found.len() == before.len() + 1500);
}
