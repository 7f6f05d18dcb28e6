//! The commit protocol as the storage sees it, and what failures leave behind.

use crate::support::{assert_clean, read_db};
use rbolt::storage::{FaultError, FaultPlan, SimFile};
use rbolt::{Db, Error, Options};
use std::sync::Arc;

fn sim_db(options: Options) -> (SimFile, Db) {
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), options).unwrap();
    (sim, db)
}

fn fill(db: &Db, bucket: &[u8], range: std::ops::Range<u32>, value_len: usize) {
    db.update(|tx| {
        let mut b = tx.create_bucket_if_not_exists(bucket)?;
        for i in range {
            b.put(i.to_be_bytes(), vec![i as u8; value_len])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
}

#[test]
fn a_durable_commit_syncs_data_exactly_twice_and_writes_meta_once() {
    let (sim, db) = sim_db(Options::default());
    fill(&db, b"b", 0..100, 10);
    // A small change, no growth: one run of data pages, one meta, two fdatasyncs.
    let before = sim.counts();
    db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"k", b"v"))
        .unwrap();
    let ops = sim.counts().since(before);
    assert_eq!(ops.sync_data, 2, "{ops:?}");
    assert_eq!(ops.sync_all, 0, "{ops:?}");
    assert_eq!(ops.write, 1, "the meta page: {ops:?}");
    assert!(
        ops.write_vectored >= 1 && ops.write_vectored <= 2,
        "{ops:?}"
    );
}

#[test]
fn a_commit_with_nothing_changed_writes_nothing() {
    let (sim, db) = sim_db(Options::default());
    fill(&db, b"b", 0..10, 10);
    let before = sim.counts();
    db.update(|tx| {
        let b = tx.bucket(b"b")?.unwrap();
        assert_eq!(b.iter().count(), 10);
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    let tx = db.begin_write().unwrap();
    tx.commit().unwrap();
    let ops = sim.counts().since(before);
    assert_eq!(ops.writes() + ops.syncs() + ops.grow, 0, "{ops:?}");
}

#[test]
fn no_sync_skips_every_sync() {
    let (sim, db) = sim_db(Options::default().no_sync(true).no_grow_sync(true));
    // The first commit syncs all the same (see `Durability::None`: slot 0 takes durable metas
    // only, and a new file's durable meta is in slot 1); every one after it skips them.
    fill(&db, b"b", 0..1, 1);
    let before = sim.counts();
    fill(&db, b"b", 0..20_000, 100);
    let ops = sim.counts().since(before);
    assert_eq!(ops.syncs(), 0, "{ops:?}");
    assert!(ops.grow > 0, "the file grew: {ops:?}");
}

#[test]
fn a_commit_that_grows_the_file_syncs_its_length_with_its_data() {
    for no_grow_sync in [false, true] {
        let (sim, db) = sim_db(Options::default().no_grow_sync(no_grow_sync));
        let before = sim.counts();
        fill(&db, b"b", 0..20_000, 100);
        let ops = sim.counts().since(before);
        assert!(ops.grow >= 1, "the file grew: {ops:?}");
        // The first sync is an fsync (the data and the new length), the second the meta's
        // fdatasync: no more syncs than a commit that does not grow.
        assert_eq!((ops.sync_all, ops.sync_data), (1, 1), "{ops:?}");
        // The next commit, which does not grow the file, syncs with fdatasync only.
        let before = sim.counts();
        db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"k", b"v"))
            .unwrap();
        let ops = sim.counts().since(before);
        assert_eq!(
            (ops.grow, ops.sync_all, ops.sync_data),
            (0, 0, 2),
            "{ops:?}"
        );
    }
}

#[test]
fn dirty_pages_go_out_in_coalesced_runs() {
    let (sim, db) = sim_db(Options::default());
    let before = sim.counts();
    // A fresh bucket of a few hundred pages, allocated at the end of the file: one run,
    // handed to the storage as one vectored write (which the storage cuts into system calls
    // of at most 64 KiB: rbolt-storage's fdio), and the meta as one write.
    fill(&db, b"b", 0..10_000, 100);
    let ops = sim.counts().since(before);
    let pages = db.stats().tx_stats.page_count;
    assert!(pages > 200, "{pages} pages");
    assert_eq!((ops.write_vectored, ops.write), (1, 1), "{ops:?}");
}

/// Fails storage operation `n` (counted from now) of the next commit.
fn fail_next_commit_at(sim: &SimFile, n: u64, error: FaultError) {
    sim.set_fault_plan(FaultPlan::new().fail_at(sim.op_count() + n, error));
}

#[test]
fn a_failed_data_write_rolls_back_and_the_database_stays_usable() {
    let (sim, db) = sim_db(Options::default());
    fill(&db, b"b", 0..2000, 100);
    // An empty write transaction releases what no reader sees, as the failing one will.
    db.begin_write().unwrap().rollback();
    let content = read_db(&db).unwrap();
    let stats = db.stats();
    // The commit's first storage call is the vectored data write.
    fail_next_commit_at(&sim, 0, FaultError::NoSpace);
    let error = db
        .update(|tx| {
            let mut b = tx.bucket_mut(b"b")?.unwrap();
            for i in 0..2000u32 {
                b.delete(i.to_be_bytes())?;
            }
            b.put(b"new", b"value")
        })
        .unwrap_err();
    assert!(matches!(error, Error::Io { .. }), "{error}");
    let after = db.stats();
    assert_eq!(
        (after.free_page_n, after.pending_page_n),
        (stats.free_page_n, stats.pending_page_n)
    );
    assert!(read_db(&db).unwrap() == content);
    // Usable: the same commit succeeds now.
    db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"new", b"value"))
        .unwrap();
    assert_clean(&db);
    // And a reopen sees the acknowledged state.
    drop(db);
    let db = Db::open_storage(
        Arc::new(SimFile::from_image(sim.live_image().unwrap()).unwrap()),
        Options::default(),
    )
    .unwrap();
    assert_eq!(
        db.view(|tx| Ok::<_, rbolt::Error>(
            tx.bucket(b"b")?.unwrap().get(b"new")?.map(<[u8]>::to_vec)
        ))
        .unwrap()
        .as_deref(),
        Some(&b"value"[..])
    );
    assert_clean(&db);
}

#[test]
fn a_failure_before_the_first_sync_rolls_back_and_at_or_after_it_poisons() {
    // Fail each storage call of one commit in turn, on a fresh database each time.
    let mut seen_sync = false;
    for n in 0..12 {
        let (sim, db) = sim_db(Options::default());
        fill(&db, b"b", 0..100, 10);
        let content = read_db(&db).unwrap();
        let start = sim.op_count();
        fail_next_commit_at(&sim, n, FaultError::Io);
        let result = db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"k", b"v"));
        let log = sim.op_log();
        if sim.op_count() <= start + n {
            // The commit needed fewer calls than n: it must have succeeded.
            assert!(result.is_ok(), "op {n}");
            assert!(seen_sync, "a commit syncs");
            break;
        }
        let failed_kind = log[(start + n) as usize];
        seen_sync |= failed_kind == rbolt::storage::OpKind::SyncData;
        let error = result.unwrap_err();
        assert!(matches!(error, Error::Io { .. }), "op {n}: {error}");
        let synced_before =
            log[start as usize..=(start + n) as usize].contains(&rbolt::storage::OpKind::SyncData);
        if synced_before {
            assert!(
                matches!(db.begin_read(), Err(Error::Poisoned)),
                "op {n} ({failed_kind:?})"
            );
            assert!(matches!(db.begin_write(), Err(Error::Poisoned)), "op {n}");
        } else {
            assert!(read_db(&db).unwrap() == content, "op {n}");
            db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"k", b"v"))
                .unwrap();
        }
        drop(db);
        // Whatever happened, a reopen sees a clean file holding a committed state.
        let db = Db::open_storage(
            Arc::new(SimFile::from_image(sim.live_image().unwrap()).unwrap()),
            Options::default(),
        )
        .unwrap();
        assert_clean(&db);
        let got = db
            .view(|tx| {
                Ok::<_, rbolt::Error>(tx.bucket(b"b")?.unwrap().get(b"k")?.map(<[u8]>::to_vec))
            })
            .unwrap();
        if !synced_before {
            assert_eq!(
                got.as_deref(),
                Some(&b"v"[..]),
                "op {n}: the retried commit"
            );
        }
    }
    assert!(seen_sync, "some failure hit an fdatasync");
}

#[test]
fn max_size_stops_growth_with_a_typed_error() {
    let (_sim, db) = sim_db(Options::default().max_size(1 << 20));
    let error = db
        .update(|tx| {
            let mut b = tx.create_bucket(b"b")?;
            for i in 0..20_000u32 {
                b.put(i.to_be_bytes(), [0u8; 100])?;
            }
            Ok(())
        })
        .unwrap_err();
    assert!(
        matches!(
            error,
            Error::MaxSizeReached {
                max_size: 1_048_576
            }
        ),
        "{error}"
    );
    // Still usable for what fits.
    fill(&db, b"small", 0..10, 10);
    assert_clean(&db);
}

/// Bytes of the pages the newest commit uses (its high-water mark).
fn pages_len(db: &Db) -> u64 {
    let tx = db.begin_read().unwrap();
    tx.meta().pgid * db.page_size() as u64
}

#[test]
fn growth_leaves_the_file_a_few_percent_longer_than_its_pages_and_auto_shrink_gives_it_back() {
    for auto_shrink in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let db = Db::open_with(&path, Options::default().auto_shrink(auto_shrink)).unwrap();
        let mut lens = Vec::new();
        for round in 0..6u32 {
            // Bigger commits each round: the file grows from 32 KiB to some MiB.
            fill(&db, b"b", round * 4000..(round + 1) * 6000, 100);
            let (used, len) = (pages_len(&db), db.file_len().unwrap());
            // At most one growth's room past the pages: a 32nd of them, at least 64 KiB, in
            // whole pages.
            let room = (used / 32).max(64 * 1024) + db.page_size() as u64;
            assert!(used <= len && len <= used + room, "{used} {len}");
            lens.push(len);
        }
        assert!(lens.windows(2).all(|w| w[0] <= w[1]), "{lens:?}");
        let used = pages_len(&db);
        let len = db.file_len().unwrap();
        db.close().unwrap();
        let closed = std::fs::metadata(&path).unwrap().len();
        if auto_shrink {
            assert_eq!(closed, used, "the room goes at close under auto_shrink");
        } else {
            assert_eq!(closed, len, "the file keeps its room without auto_shrink");
        }
        // Either way the file opens with everything in it, and grows again from there.
        let db = Db::open(&path).unwrap();
        let count = db
            .view(|tx| Ok::<_, rbolt::Error>(tx.bucket(b"b")?.unwrap().iter().count()))
            .unwrap();
        assert_eq!(count, 36_000);
        fill(&db, b"b", 100_000..101_000, 100);
    }
}

/// Rewrites one key in every `stride`th from `offset` on in bucket `b` (of `n` keys), one
/// transaction, and keeps `model` alike: each rewrite is a leaf of its own, so the leaves'
/// old pages become free pages with taken pages between them.
fn rewrite_every(
    db: &Db,
    model: &mut std::collections::BTreeMap<u32, Vec<u8>>,
    (offset, stride, n): (u32, usize, u32),
    byte: u8,
) -> rbolt::Result<()> {
    db.update(|tx| {
        let mut b = tx.bucket_mut(b"b")?.unwrap();
        for i in (offset..n).step_by(stride) {
            b.put(i.to_be_bytes(), vec![byte; 100])?;
        }
        Ok::<_, rbolt::Error>(())
    })?;
    for i in (offset..n).step_by(stride) {
        model.insert(i, vec![byte; 100]);
    }
    Ok(())
}

fn assert_content(db: &Db, model: &std::collections::BTreeMap<u32, Vec<u8>>) {
    db.view(|tx| {
        let b = tx.bucket(b"b")?.unwrap();
        let mut expected = model.iter();
        for entry in b.iter() {
            let entry = entry?;
            let (key, value) = expected.next().expect("no more keys in the model");
            assert_eq!(entry.key(), key.to_be_bytes());
            assert_eq!(entry.value(), Some(&value[..]), "key {key}");
        }
        assert!(expected.next().is_none(), "keys missing from the file");
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    assert_clean(db);
}

/// A file whose few free pages lie one by one between taken ones (what updates and deletes
/// at random leave): a bucket of `N` keys, then a transaction that rewrites a leaf in
/// every 300th key, each freeing about 1,400 pages apart from one another.
const N: u32 = 400_000;
/// Keys apart of the rewrites of one transaction.
const STRIDE: usize = 300;

/// Free pages (with those pending, which the next write transaction frees) and the pages in
/// use up to the high-water mark.
fn free_and_pages(db: &Db) -> (u64, u64) {
    let stats = db.stats();
    let pages = db.view(|tx| Ok::<_, rbolt::Error>(tx.size())).unwrap() / 4096;
    ((stats.free_page_n + stats.pending_page_n) as u64, pages)
}

fn fragmented(options: Options) -> (SimFile, Db, std::collections::BTreeMap<u32, Vec<u8>>) {
    let (sim, db) = sim_db(options);
    fill(&db, b"b", 0..N, 100);
    let mut model = (0..N).map(|i| (i, vec![i as u8; 100])).collect();
    rewrite_every(&db, &mut model, (0, STRIDE, N), 1).unwrap();
    // The state the allocation is about: free pages are few (under an eighth of the file),
    // but more than a big commit's first pages, and mostly alone.
    let (free, pages) = free_and_pages(&db);
    assert!(
        free > 200 && free * 8 < pages,
        "free {free} of {pages} pages"
    );
    (sim, db, model)
}

/// A big durable commit on such a file writes its pages in long runs, not one write call per
/// isolated free page, and everything reads back and checks clean after a reopen.
#[test]
fn a_big_durable_commit_on_scattered_free_pages_writes_long_runs() {
    let (sim, db, mut model) = fragmented(Options::default());
    let leaves = (N as usize).div_ceil(STRIDE) as u64;
    let before = sim.counts();
    rewrite_every(&db, &mut model, (75, STRIDE, N), 3).unwrap();
    let ops = sim.counts().since(before);
    // First fit put most of the ~1,330 leaves on a free page of their own (a write call each).
    assert!(
        ops.write_vectored * 4 < leaves,
        "{} write calls for {leaves} leaves: {ops:?}",
        ops.write_vectored
    );
    let (_, pages_before) = free_and_pages(&db);
    assert_content(&db, &model);
    // The pages left free are taken again once they are many: more such commits grow the
    // file by an eighth at most.
    for round in 0..12u8 {
        let offset = (round as u32 * 37) % STRIDE as u32;
        rewrite_every(&db, &mut model, (offset, STRIDE, N), 4 + round).unwrap();
    }
    let (free, pages) = free_and_pages(&db);
    assert!(
        pages <= pages_before + pages_before / 8,
        "{pages} pages after, {pages_before} before ({free} free)"
    );
    drop(db);
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default()).unwrap();
    assert_content(&db, &model);
}

/// When `max_size` leaves little room to grow, the same commit takes the isolated free pages
/// and leaves the room for what needs contiguous pages (its freelist page): a limit is
/// reached only when the free pages are used up too.
#[test]
fn a_big_durable_commit_at_max_size_takes_the_isolated_free_pages() {
    use rbolt::storage::Storage;
    let (sim, db, mut model) = fragmented(Options::default());
    drop(db);
    let limit = sim.len().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default().max_size(limit)).unwrap();
    let size_before = db.view(|tx| Ok::<_, rbolt::Error>(tx.size())).unwrap();
    rewrite_every(&db, &mut model, (75, STRIDE, N), 3).unwrap();
    assert!(sim.len().unwrap() <= limit);
    assert!(db.view(|tx| Ok::<_, rbolt::Error>(tx.size())).unwrap() <= limit);
    assert!(size_before <= limit);
    assert_content(&db, &model);
    // A commit far bigger than the free pages still fails, and changes nothing.
    let failed = db.update(|tx| {
        let mut b = tx.bucket_mut(b"b")?.unwrap();
        for i in 0..N {
            b.put(i.to_be_bytes(), vec![9; 400])?;
        }
        Ok::<_, rbolt::Error>(())
    });
    assert!(
        matches!(failed, Err(Error::MaxSizeReached { .. })),
        "{failed:?}"
    );
    assert_content(&db, &model);
}

/// Such a commit failing at any of its storage calls before the meta (a data write, the file's
/// growth, the first sync) leaves the free pages and the content exactly as before, and the
/// same commit then succeeds.
#[test]
fn a_big_durable_commit_that_fails_changes_nothing() {
    let (sim, db, mut model) = fragmented(Options::default());
    // An empty write transaction releases what no reader sees, as the failing one will.
    db.begin_write().unwrap().rollback();
    let before = sim.counts();
    let probe = {
        let mut probe = model.clone();
        let image = SimFile::from_image(sim.live_image().unwrap()).unwrap();
        let copy = Db::open_storage(Arc::new(image.clone()), Options::default()).unwrap();
        let start = image.op_count();
        rewrite_every(&copy, &mut probe, (75, STRIDE, N), 3).unwrap();
        image.op_count() - start
    };
    assert_eq!(sim.counts(), before);
    let stats = db.stats();
    // Every call but the meta write and the last sync (after which the commit is durable).
    for n in (0..probe.saturating_sub(2)).step_by(7) {
        fail_next_commit_at(&sim, n, FaultError::Io);
        let failed = rewrite_every(&db, &mut model.clone(), (75, STRIDE, N), 3);
        assert!(
            failed.is_err(),
            "the fault at call {n} of {probe} did not fail"
        );
        let after = db.stats();
        assert_eq!(
            (after.free_page_n, after.pending_page_n),
            (stats.free_page_n, stats.pending_page_n),
            "call {n}"
        );
        assert_content(&db, &model);
    }
    rewrite_every(&db, &mut model, (75, STRIDE, N), 3).unwrap();
    assert_content(&db, &model);
}
