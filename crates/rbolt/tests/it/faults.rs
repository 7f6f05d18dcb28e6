//! One test per finding of issue 46, each failing on the code before its fix: the faults a real
//! process, kernel and Go writer produce beyond what the suites modelled — a kill that cuts a
//! copy into the mapping short, a Go bbolt transaction that dies after writing pages, a sync
//! that fails and lets the kernel drop pages, Go bbolt 1.3's page-size rule, a durable point at
//! `max_size`, and `WriteTx::id` after commits without syncs. Each judges by content: a reopen
//! must hold exactly one acknowledged state, at or after the last durable one.

use crate::support::{content_of_sim, read_db};
use rbolt::storage::{CrashProfile, FaultError, FaultPlan, OpKind, SimFile, Storage};
use rbolt::{Db, Durability, Options};
use rbolt_fixtures::Bucket as Model;
use rbolt_page::{FreelistPage, Meta, Pgid, read_meta};
use std::sync::Arc;

/// Keys each commit writes: enough for a tree of several pages.
const KEYS: u32 = 200;

/// Puts every key of bucket `b` with values made of `tag`, with `durability`.
fn overwrite(db: &Db, tag: &str, durability: Durability) -> rbolt::Result<()> {
    let tx = db.begin_write()?;
    tx.set_durability(durability);
    let mut b = tx.create_bucket_if_not_exists(b"b")?;
    for i in 0..KEYS {
        b.put(format!("key{i:05}"), tag.repeat(12))?;
    }
    drop(b);
    tx.commit()
}

/// The run every test below starts with: a durable commit "A", then commits without syncs "B"
/// and "C" (acknowledged, and so kept by a crash of the process). Returns the states after A
/// and after C.
fn durable_then_unsynced(db: &Db) -> (Model, Model) {
    overwrite(db, "A", Durability::Immediate).unwrap();
    let a = read_db(db).unwrap();
    overwrite(db, "B", Durability::None).unwrap();
    overwrite(db, "C", Durability::None).unwrap();
    let c = read_db(db).unwrap();
    (a, c)
}

/// Finding 1: every commit without syncs since the last durable one writes the same meta slot,
/// and that meta was a copy into the writable mapping, which a kill can stop at any byte: a
/// meta torn at 64 bytes lost B and C as well as the commit in flight. Now a meta is one
/// `pwrite`, whole after a kill; a kill inside any copy of the commit in flight (its pages)
/// leaves C. Crashes at every write of the next commit, each cut at every 8 bytes of the copy
/// it stopped (the first 512 bytes of a page copy).
#[test]
fn a_kill_inside_any_copy_keeps_every_acknowledged_commit() {
    let options = Options::default();
    // The reference run: which operations the commit after C makes.
    let reference = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(reference.clone()), options.clone()).unwrap();
    let (_, c) = durable_then_unsynced(&db);
    let from = reference.op_count();
    overwrite(&db, "D", Durability::None).unwrap();
    let d = read_db(&db).unwrap();
    let log = reference.op_log();
    drop(db);
    let mut torn_copies = 0;
    for op in from..log.len() as u64 {
        if !matches!(log[op as usize], OpKind::Write | OpKind::WriteVectored) {
            continue;
        }
        let sim = SimFile::new().unwrap();
        let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
        durable_then_unsynced(&db);
        sim.set_fault_plan(FaultPlan::new().crash_at(op));
        assert!(overwrite(&db, "D", Durability::None).is_err());
        let Some(len) = sim.torn_copy_len() else {
            continue;
        };
        torn_copies += 1;
        for cut in (8..len.min(512)).step_by(8) {
            let next = sim.after_process_crash_torn(cut).unwrap();
            match content_of_sim(next, &options) {
                Ok(state) => assert!(
                    state == c || state == d,
                    "op {op} cut at {cut}: a state never committed"
                ),
                Err(error) => panic!("op {op} cut at {cut}: {error}"),
            }
        }
    }
    // The commit's pages rewrite pages B and C wrote: copies, and so cut by the kills above.
    assert!(torn_copies > 0, "no write of the commit was a copy to cut");
}

/// The durable meta of a file image as Go bbolt chooses it: the valid one (plain checksum)
/// with the larger txid, at `page_size`.
fn go_meta(image: &[u8], page_size: usize) -> Option<Meta> {
    (0..2)
        .filter_map(|slot| read_meta(image.get(slot * page_size..)?, Pgid(slot as u64)).ok())
        .max_by_key(|meta| meta.txid)
}

/// Finding 2: after a process ends with commits without syncs, Go bbolt opens the durable meta
/// (it takes the other for torn) and reuses the pages it holds free — exactly those the
/// unsynced commits wrote. A Go transaction that dies before its meta (killed in its sync, EIO,
/// ENOSPC) leaves its pages there, and rbolt's next open in the same boot trusted the
/// non-durable meta over them. Go is emulated from bbolt's source: its freelist is the durable
/// meta's page, it allocates free ids and then past the high-water mark, and writes whole
/// pages. Two kinds of
/// Go page: garbage where a page was (`check` sees it), and the stealthy one, the same leaf
/// with one value changed, as Go's own update of that leaf would be (only a digest sees it).
#[test]
fn a_go_transaction_that_died_after_its_pages_never_opens() {
    let options = Options::default();
    for stealthy in [false, true] {
        let sim = SimFile::new().unwrap();
        let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
        let (a, _) = durable_then_unsynced(&db);
        // The process ends without closing (a kill, `process::exit`, a `Db` in a `static`).
        let go = sim.after_process_crash().unwrap();
        drop(db);
        let image = go.live_image().unwrap();
        let page_size = 4096;
        let durable = go_meta(&image, page_size).expect("Go finds the durable meta");
        let start = durable.freelist as usize * page_size;
        let freelist = FreelistPage::new(&image[start..], durable.freelist_pgid()).unwrap();
        // What Go may allocate: the free pages, then past the high-water mark. Its transaction
        // takes them all (a big one), so it surely meets the pages of B and C.
        let past_mark = durable.pgid..(image.len() / page_size) as u64;
        let free: Vec<u64> = freelist
            .iter()
            .map(|pgid| pgid.0)
            .chain(past_mark)
            .collect();
        let mut changed = 0;
        for &pgid in &free {
            let at = pgid as usize * page_size;
            let mut page = image[at..at + page_size].to_vec();
            if stealthy {
                // A leaf of "b" with values of C: one value byte changed, the rest as it was.
                let Some(offset) = page.windows(12).rposition(|w| w == b"CCCCCCCCCCCC") else {
                    continue;
                };
                page[offset] = b'G';
            } else {
                page.fill(0x5a);
            }
            go.write_all_at(&page, at as u64).unwrap();
            changed += 1;
        }
        assert!(
            changed > 0,
            "Go found no page to take (stealthy: {stealthy})"
        );
        // No meta: Go's transaction died. rbolt opens in the same boot.
        match content_of_sim(go, &options) {
            Ok(state) => assert!(state == a, "stealthy {stealthy}: not the durable state"),
            Err(error) => panic!("stealthy {stealthy}: {error}"),
        }
    }
}

/// Finding 3: a sync that fails (EIO) may let the kernel drop the pages it could not write, and
/// a later read returns their old content, or zeros. The handle is poisoned, but the
/// non-durable meta stayed in its slot and the next open of the same boot trusted it: it failed
/// ("header names page 0") or, with reused pages, opened a state never committed. A durable
/// commit's first sync fails after B and C; every page written since the last good sync is
/// kept, dropped or zeroed.
#[test]
fn a_failed_sync_never_opens_dropped_pages() {
    let options = Options::default();
    let mut fell_back = 0;
    for seed in 0..24 {
        let sim = SimFile::new().unwrap();
        let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
        let (a, c) = durable_then_unsynced(&db);
        sim.set_fault_plan(
            FaultPlan::new()
                .fail_kind(OpKind::SyncAll, FaultError::Io)
                .fail_kind(OpKind::SyncData, FaultError::Io),
        );
        assert!(overwrite(&db, "D", Durability::Immediate).is_err());
        assert!(matches!(
            overwrite(&db, "E", Durability::None),
            Err(rbolt::Error::Poisoned)
        ));
        let after = sim.after_failed_sync(seed).unwrap();
        drop(db);
        match content_of_sim(after, &options) {
            Ok(state) if state == a => fell_back += 1,
            Ok(state) => assert!(state == c, "seed {seed}: a state never committed"),
            Err(error) => panic!("seed {seed}: {error}"),
        }
    }
    assert!(fell_back > 0, "no seed dropped a page the meta needs");
}

/// Go bbolt 1.3's open (Debian's 1.3.6, etcd 3.5's) on this system: the page size from meta 0
/// when it is valid, else the system's (`os.Getpagesize()`: 4096 on x86-64, 16 KiB or 64 KiB
/// on many arm64 kernels); then the valid meta of the two at that size with the larger txid.
/// Whether it opens `image`.
fn go13_opens(image: &[u8]) -> bool {
    let system = rbolt::storage::system_page_size();
    let page_size = read_meta(image, Pgid(0)).map_or(system, |meta| meta.page_size as usize);
    go_meta(image, page_size).is_some_and(|meta| meta.page_size as usize == page_size)
}

/// Finding 4: commits without syncs wrote their meta (which Go rejects, on purpose) to slot 0
/// whenever the durable one was in slot 1; Go 1.3 then found no page size and refused the file
/// after a crash, for every page size but 4096 (and, an outside review found, 4096-byte files
/// on systems of 16 KiB or 64 KiB pages too). Now slot 0 holds only durable metas on files
/// whose pages are not the system's: every crash state of a run of mixed commits opens in Go
/// 1.3 on this system, and no acked commit is lost to a crash of the process.
#[test]
fn go_13_opens_every_crash_state_at_every_page_size() {
    for page_size in [1024, 2048, 4096, 8192, 16384] {
        let options = Options::default().page_size(page_size);
        let sim = SimFile::new().unwrap();
        let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
        for round in 0..12u32 {
            let durability = if round % 5 == 4 {
                Durability::Immediate
            } else {
                Durability::None
            };
            overwrite(&db, &format!("r{round}"), durability).unwrap();
            if round % 4 == 3 {
                db.sync().unwrap();
            }
            let acked = read_db(&db).unwrap();
            let crashed = sim.after_process_crash().unwrap();
            let image = crashed.live_image().unwrap();
            assert!(go13_opens(&image), "page size {page_size}, round {round}");
            let state = content_of_sim(crashed, &options).unwrap();
            assert!(state == acked, "page size {page_size}, round {round}: lost");
        }
    }
}

/// Finding 6: after commits without syncs the ids skip one (no such commit's meta goes to the
/// durable meta's slot), and `WriteTx::id` did not: it said 4 and 6 where the commits were 5
/// and 7.
#[test]
fn write_tx_id_is_the_id_the_commit_gets() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    let kinds = [
        Durability::None,
        Durability::None,
        Durability::Immediate,
        Durability::None,
        Durability::Immediate,
        Durability::Immediate,
        Durability::None,
    ];
    for (round, durability) in kinds.into_iter().cycle().take(30).enumerate() {
        let tx = db.begin_write().unwrap();
        tx.set_durability(durability);
        let id = tx.id();
        tx.create_bucket_if_not_exists("b")
            .unwrap()
            .put(round.to_be_bytes(), "v")
            .unwrap();
        tx.commit().unwrap();
        assert_eq!(db.begin_read().unwrap().id(), id, "round {round}");
        if round % 9 == 8 {
            db.sync().unwrap();
        }
    }
}

/// Finding 5: close and `Db::sync` are durable points, which write the freelist page; after
/// commits without syncs had filled the file to its `max_size` they found no page for it and
/// failed with `MaxSizeReached`, so a user at the limit could not close cleanly. Now a commit
/// without syncs that would leave no room for that page is refused instead (and changes
/// nothing), and every durable point succeeds: `Db::sync`, a durable commit, close.
#[test]
fn a_durable_point_at_max_size_succeeds() {
    for page_size in [1024, 4096, 8192] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        let options = Options::default().max_size(1 << 20).page_size(page_size);
        let db = Db::open_with(&path, options.clone()).unwrap();
        let mut refused = 0;
        for round in 0..400u32 {
            let before = read_db(&db).unwrap();
            let tx = db.begin_write().unwrap();
            tx.set_durability(Durability::None);
            let put = tx
                .create_bucket_if_not_exists("b")
                .and_then(|mut b| b.put(round.to_be_bytes(), vec![round as u8; 3000]));
            let committed = put.and_then(|()| tx.commit());
            match committed {
                Ok(()) => {}
                Err(rbolt::Error::MaxSizeReached { .. }) => {
                    refused += 1;
                    assert!(
                        read_db(&db).unwrap() == before,
                        "a refused commit changed the state"
                    );
                }
                Err(error) => panic!("page size {page_size} round {round}: {error}"),
            }
            if round % 50 == 49 {
                db.sync().unwrap();
            }
        }
        assert!(refused > 0, "page size {page_size}: the file never filled");
        let last = read_db(&db).unwrap();
        db.sync().unwrap();
        db.close().unwrap();
        let db = Db::open_with(&path, options).unwrap();
        assert!(read_db(&db).unwrap() == last, "page size {page_size}");
        db.close().unwrap();
    }
}

/// A meta write never reaches into the next page: on pages smaller than the 112 bytes a
/// non-durable meta takes (80 bytes is the smallest page a meta fits in), or of odd sizes,
/// every commit keeps the other slot's meta intact, and commits without syncs are made durable
/// there (their meta would not fit, or would cross a 4 KiB boundary that a kill can tear at).
#[test]
fn small_and_odd_pages_keep_both_metas() {
    for page_size in [80usize, 96, 100, 112, 4090, 12345] {
        let options = Options::default().page_size(page_size);
        let sim = SimFile::new().unwrap();
        let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
        for round in 0..6u32 {
            let tx = db.begin_write().unwrap();
            if round % 2 == 0 {
                tx.set_durability(Durability::None);
            }
            let mut b = tx.create_bucket_if_not_exists(b"b").unwrap();
            b.put(round.to_be_bytes(), b"v").unwrap();
            drop(b);
            tx.commit().unwrap();
            let image = sim.live_image().unwrap();
            for slot in 0..2 {
                let at = slot * page_size;
                let meta = rbolt_page::read_meta_page(&image[at..], Pgid(slot as u64));
                assert!(
                    meta.is_ok(),
                    "page {page_size} round {round} slot {slot}: {meta:?}"
                );
            }
            // Whatever the durability asked for, a crash of the process keeps it.
            let acked = read_db(&db).unwrap();
            let state = content_of_sim(sim.after_process_crash().unwrap(), &options).unwrap();
            assert!(state == acked, "page {page_size} round {round}");
        }
    }
}

/// A kill inside a durable commit's meta sync leaves its meta in the page cache only; the
/// reopen of the same boot took it as durable, so the next commit without syncs wrote over the
/// slot of the meta that really was (and reused its pages): a power loss then opened a file
/// with no valid meta, or the durable meta over overwritten pages (found by an outside review).
/// Now the open makes the meta it takes as durable durable first.
#[test]
fn a_meta_the_open_takes_as_durable_is_on_disk() {
    let options = Options::default();
    // The reference run: the last sync of commit C.
    let reference = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(reference.clone()), options.clone()).unwrap();
    overwrite(&db, "A", Durability::Immediate).unwrap();
    let from = reference.op_count();
    overwrite(&db, "C", Durability::Immediate).unwrap();
    let log = reference.op_log();
    let meta_sync = (from..log.len() as u64)
        .rev()
        .find(|&op| matches!(log[op as usize], OpKind::SyncData | OpKind::SyncAll))
        .unwrap();
    drop(db);
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
    overwrite(&db, "A", Durability::Immediate).unwrap();
    sim.set_fault_plan(FaultPlan::new().crash_at(meta_sync));
    assert!(overwrite(&db, "C", Durability::Immediate).is_err());
    let this_boot = sim.after_process_crash().unwrap();
    drop(db);
    let db = Db::open_storage(Arc::new(this_boot.clone()), options.clone()).unwrap();
    let c = read_db(&db).unwrap();
    overwrite(&db, "E", Durability::None).unwrap();
    let e = read_db(&db).unwrap();
    for profile in CrashProfile::ALL {
        for seed in 0..24 {
            let image = SimFile::from_image(this_boot.crash_image(profile, seed)).unwrap();
            match content_of_sim(image, &options) {
                Ok(state) => assert!(
                    state == c || state == e,
                    "{profile:?} {seed}: a state the reopen never showed"
                ),
                Err(error) => panic!("{profile:?} {seed}: {error}"),
            }
        }
    }
}

/// After a sync that failed, Linux may keep a page it could not write in the cache, clean: a
/// reopen reads it, a later sync does not write it. The reopen made such pages durable under
/// its meta (it synced without writing them): a power loss then showed the old bytes under it
/// (found by an outside review). Now recovery writes what it trusts again before it syncs, and
/// the open writes again a meta the device does not hold.
#[test]
fn what_a_reopen_after_a_failed_sync_shows_survives_a_power_loss() {
    let options = Options::default();
    for seed in 0..24 {
        let sim = SimFile::new().unwrap();
        let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
        durable_then_unsynced(&db);
        sim.set_fault_plan(
            FaultPlan::new()
                .fail_kind(OpKind::SyncAll, FaultError::Io)
                .fail_kind(OpKind::SyncData, FaultError::Io),
        );
        let durability = if seed % 2 == 0 {
            Durability::Immediate
        } else {
            Durability::None
        };
        let _ = overwrite(&db, "D", durability);
        let _ = db.sync();
        let after = sim.after_failed_sync(seed).unwrap();
        drop(db);
        let db = Db::open_storage(Arc::new(after.clone()), options.clone()).unwrap();
        let shown = read_db(&db).unwrap();
        db.close().unwrap();
        let image = SimFile::from_image(after.crash_image(CrashProfile::DropAll, 0)).unwrap();
        match content_of_sim(image, &options) {
            Ok(state) => assert!(state == shown, "seed {seed}: not what the reopen showed"),
            Err(error) => panic!("seed {seed}: {error}"),
        }
    }
}

/// A close on a poisoned handle returned `Ok` although nothing was made durable (found by an
/// outside review): it says `Poisoned` now.
#[test]
fn a_close_after_a_failed_sync_says_so() {
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), Options::default()).unwrap();
    durable_then_unsynced(&db);
    sim.set_fault_plan(FaultPlan::new().fail_kind(OpKind::SyncData, FaultError::Io));
    assert!(db.sync().is_err());
    sim.set_fault_plan(FaultPlan::new());
    assert!(matches!(db.close(), Err(rbolt::Error::Poisoned)));
}

/// A non-durable meta is trusted only against the durable meta beside it (its digest covers the
/// pages written since that one): with that meta damaged, the open refuses the file with a
/// typed error, and writes nothing, rather than trusting pages nothing vouches for.
#[test]
fn a_non_durable_meta_without_its_durable_meta_is_refused() {
    let options = Options::default();
    let sim = SimFile::new().unwrap();
    let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
    durable_then_unsynced(&db);
    let crashed = sim.after_process_crash().unwrap();
    drop(db);
    let durable_slot = (0..2u64)
        .find(|&slot| {
            let image = crashed.live_image().unwrap();
            read_meta(&image[slot as usize * 4096..], Pgid(slot)).is_ok()
        })
        .expect("a durable meta");
    // Its checksum's first byte, flipped.
    let at = durable_slot * 4096 + 72;
    let mut byte = [0u8];
    crashed.read_exact_at(&mut byte, at).unwrap();
    crashed.write_all_at(&[byte[0] ^ 0xff], at).unwrap();
    let before = crashed.live_image().unwrap();
    let opened = Db::open_storage(Arc::new(crashed.clone()), options);
    assert!(
        opened.is_err(),
        "opened with no durable meta to check against"
    );
    assert!(
        crashed.live_image().unwrap() == before,
        "the refused open wrote"
    );
}
