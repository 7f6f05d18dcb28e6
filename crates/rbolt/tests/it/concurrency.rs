//! Readers never stall the writer, growth never waits for readers, freed pages come back once
//! readers end, and every reader sees a repeatable snapshot.

use crate::support::{assert_clean, within};
use rbolt::{Db, Options};
use rbolt_testkit::rng::Rng;
use rbolt_testkit::tier::Tier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

fn digest(db: &Db, tx: &rbolt::ReadTx<'_>) -> (usize, u64) {
    let _ = db;
    let mut n = 0;
    let mut sum = 0u64;
    tx.for_each(|_, bucket| {
        for entry in bucket.iter() {
            let entry = entry?;
            n += 1;
            sum = sum
                .wrapping_mul(31)
                .wrapping_add(entry.key().iter().map(|b| u64::from(*b)).sum::<u64>());
            sum = sum.wrapping_add(entry.value().map_or(0, <[u8]>::len) as u64);
        }
        Ok(())
    })
    .unwrap();
    (n, sum)
}

#[test]
fn a_reader_does_not_stall_commits_that_grow_the_file_past_several_mappings() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        db.update(|tx| tx.create_bucket(b"b")?.put(b"first", b"1"))
            .unwrap();
        std::thread::scope(|s| {
            let reader = db.begin_read().unwrap();
            let before = digest(&db, &reader);
            let size_before = reader.size();
            let writer = s.spawn(|| {
                for round in 0..40u32 {
                    db.update(|tx| {
                        let mut b = tx.bucket_mut(b"b")?.unwrap();
                        for i in 0..2000u32 {
                            b.put((round * 2000 + i).to_be_bytes(), [7u8; 200])?;
                        }
                        Ok::<_, rbolt::Error>(())
                    })
                    .unwrap();
                }
            });
            writer.join().unwrap();
            // The file grew far past the reader's mapping; its snapshot is unchanged.
            assert!(db.file_len().unwrap() > 8 * size_before.max(1 << 20));
            assert_eq!(digest(&db, &reader), before);
            assert_eq!(reader.bucket(b"b").unwrap().unwrap().iter().count(), 1);
        });
        assert_clean(&db);
    });
}

#[test]
fn a_thread_holding_a_reader_can_commit_growth() {
    within(Duration::from_secs(60), || {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let reader = db.begin_read().unwrap();
        db.update(|tx| {
            let mut b = tx.create_bucket(b"b")?;
            for i in 0..50_000u32 {
                b.put(i.to_be_bytes(), [1u8; 100])?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
        assert!(reader.bucket(b"b").unwrap().is_none());
        drop(reader);
        assert_eq!(
            db.view(|tx| Ok::<_, rbolt::Error>(tx.bucket(b"b")?.unwrap().iter().count()))
                .unwrap(),
            50_000
        );
    });
}

fn churn(db: &Db, round: u32) {
    db.update(|tx| {
        let mut b = tx.bucket_mut(b"b")?.unwrap();
        for i in 0..50u32 {
            b.put(((round * 7 + i) % 400).to_be_bytes(), [round as u8; 300])?;
        }
        for i in 0..50u32 {
            b.delete(((round * 11 + i) % 400).to_be_bytes())?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
}

/// Puts all 400 keys churn uses.
fn churn_fill(db: &Db) {
    db.update(|tx| {
        let mut b = tx.bucket_mut(b"b")?.unwrap();
        for i in 0..400u32 {
            b.put(i.to_be_bytes(), [1; 300])?;
        }
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
}

#[test]
fn pages_freed_under_a_long_reader_are_reused_after_it_ends() {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), Options::default().alloc_size(4096)).unwrap();
    db.update(|tx| tx.create_bucket(b"b").map(|_| ())).unwrap();
    // The reader's snapshot holds a tree of some forty pages; churn frees them all.
    churn_fill(&db);
    let reader = db.begin_read().unwrap();
    // Durable commits, two syncs each: the fast tier churns 300 rounds a phase, CI 1,000.
    let rounds = Tier::current().pick(300, 1000, 1000);
    for round in 0..rounds {
        churn(&db, round);
    }
    let pending = db.stats().pending_page_n;
    assert!(
        pending >= 30,
        "a reader keeps the pages it sees pending: {pending}"
    );
    drop(reader);
    for round in rounds..rounds + 100 {
        churn(&db, round);
    }
    let settled = db.file_len().unwrap();
    for round in rounds + 100..2 * rounds + 100 {
        churn(&db, round);
    }
    assert_eq!(
        db.file_len().unwrap(),
        settled,
        "churn without readers grows the file"
    );
    assert!(db.stats().pending_page_n < pending);
    assert_clean(&db);
}

#[test]
fn readers_see_repeatable_snapshots_while_writers_and_batches_commit() {
    const ACCOUNTS: u32 = 64;
    const TOTAL: u64 = 64 * 1000;
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), Options::default().no_sync(true)).unwrap();
    db.update(|tx| {
        let mut b = tx.create_bucket(b"accounts")?;
        for i in 0..ACCOUNTS {
            b.put(i.to_be_bytes(), 1000u64.to_be_bytes())?;
        }
        tx.create_bucket(b"batches")?;
        Ok::<_, rbolt::Error>(())
    })
    .unwrap();
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let batched = AtomicU64::new(0);
    let balance = |tx: &rbolt::ReadTx<'_>| -> (u64, u64) {
        let accounts = tx.bucket(b"accounts").unwrap().unwrap();
        let sum = accounts
            .iter()
            .map(|e| u64::from_be_bytes(e.unwrap().value().unwrap().try_into().unwrap()))
            .sum();
        (sum, tx.id().0)
    };
    std::thread::scope(|s| {
        for _ in 0..3 {
            s.spawn(|| {
                while !stop.load(Ordering::Relaxed) {
                    let tx = db.begin_read().unwrap();
                    let (sum, txid) = balance(&tx);
                    assert_eq!(sum, TOTAL, "transfers keep the total at every txid");
                    let first = crate::concurrency::digest(&db, &tx);
                    std::thread::yield_now();
                    assert_eq!(
                        crate::concurrency::digest(&db, &tx),
                        first,
                        "repeatable read at {txid}"
                    );
                    reads.fetch_add(1, Ordering::Relaxed);
                }
            });
        }
        for thread in 0..2u32 {
            let db = &db;
            let batched = &batched;
            let stop = &stop;
            s.spawn(move || {
                let mut n = 0u32;
                while !stop.load(Ordering::Relaxed) {
                    let key = [thread.to_be_bytes(), n.to_be_bytes()].concat();
                    db.batch(move |tx| tx.bucket_mut(b"batches")?.unwrap().put(&key, b"x"))
                        .unwrap();
                    batched.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
            });
        }
        let mut rng = Rng::new(7);
        // 400 transfers, then more until the readers and the batchers have each had a turn
        // (on a loaded machine the transfers can all be done before a thread is scheduled).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        for round in 0.. {
            if round >= 400
                && (reads.load(Ordering::Relaxed) > 0 && batched.load(Ordering::Relaxed) > 0
                    || std::time::Instant::now() > deadline)
            {
                break;
            }
            db.update(|tx| {
                let mut accounts = tx.bucket_mut(b"accounts")?.unwrap();
                for _ in 0..5 {
                    let from = rng.below(u64::from(ACCOUNTS)) as u32;
                    let to = rng.below(u64::from(ACCOUNTS)) as u32;
                    let read = |b: &rbolt::BucketMut<'_>, k: u32| {
                        u64::from_be_bytes(
                            b.get(k.to_be_bytes()).unwrap().unwrap().try_into().unwrap(),
                        )
                    };
                    let amount = read(&accounts, from).min(rng.below(1 << 14));
                    let from_balance = read(&accounts, from) - amount;
                    accounts.put(from.to_be_bytes(), from_balance.to_be_bytes())?;
                    let to_balance = read(&accounts, to) + amount;
                    accounts.put(to.to_be_bytes(), to_balance.to_be_bytes())?;
                }
                Ok::<_, rbolt::Error>(())
            })
            .unwrap();
        }
        stop.store(true, Ordering::Relaxed);
    });
    assert!(reads.load(Ordering::Relaxed) > 0);
    let batched = batched.load(Ordering::Relaxed) as usize;
    assert!(batched > 0);
    assert_eq!(
        db.view(|tx| Ok::<_, rbolt::Error>(tx.bucket(b"batches")?.unwrap().iter().count()))
            .unwrap(),
        batched
    );
    assert_eq!(
        db.view(|tx| Ok::<_, rbolt::Error>(balance(tx).0)).unwrap(),
        TOTAL
    );
    assert_clean(&db);
}

#[test]
fn pages_allocated_and_freed_after_a_long_reader_are_reused_while_it_lives() {
    // A reader pins what it can see, not what was written after it began: churn under a
    // long reader must settle instead of growing the file for as long as the reader lives.
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open_with(dir.path().join("db"), Options::default().alloc_size(4096)).unwrap();
    db.update(|tx| tx.create_bucket(b"b").map(|_| ())).unwrap();
    for round in 0..50 {
        churn(&db, round);
    }
    let reader = db.begin_read().unwrap();
    for round in 50..300 {
        churn(&db, round);
    }
    let settled = db.file_len().unwrap();
    for round in 300..1300 {
        churn(&db, round);
    }
    // Each round frees some ten pages; were they all pinned by the reader, the file would
    // grow by megabytes. Only the tree's own ups and downs may show.
    let grown = db.file_len().unwrap() - settled;
    assert!(
        grown <= 16 * 4096,
        "churn under a long reader grew the file by {grown} bytes"
    );
    drop(reader);
    assert_clean(&db);
}

/// Group commit: with a batch delay of zero, `Db::batch` calls that arrive while the writer is
/// busy (another commit's syncs, here a write transaction held open) are taken by the next
/// batch once it has the writer, and share its commit. A leader that took the calls before it
/// had the writer would commit each call that arrived alone (16 commits here).
#[test]
fn batch_calls_that_arrive_while_the_writer_is_busy_share_one_commit() {
    let dir = tempfile::tempdir().unwrap();
    let options = Options::default().max_batch_delay(Duration::ZERO);
    let db = Db::open_with(dir.path().join("db"), options).unwrap();
    db.update(|tx| tx.create_bucket("b").map(|_| ())).unwrap();
    let before = db.begin_read().unwrap().id().0;
    const CALLS: u32 = 16;
    let arrived = AtomicU64::new(0);
    std::thread::scope(|s| {
        let (release, released) = std::sync::mpsc::channel::<()>();
        let (ready, writer_held) = std::sync::mpsc::channel::<()>();
        let db = &db;
        s.spawn(move || {
            let tx = db.begin_write().unwrap();
            ready.send(()).unwrap();
            let _ = released.recv();
            drop(tx);
        });
        writer_held.recv().unwrap();
        for i in 0..CALLS {
            let arrived = &arrived;
            s.spawn(move || {
                arrived.fetch_add(1, Ordering::SeqCst);
                db.batch(move |tx| tx.bucket_mut("b")?.unwrap().put(i.to_be_bytes(), "v"))
                    .unwrap();
            });
        }
        // Every caller has arrived and had a second to queue behind the held writer.
        while arrived.load(Ordering::SeqCst) < u64::from(CALLS) {
            std::thread::yield_now();
        }
        std::thread::sleep(Duration::from_secs(1));
        release.send(()).unwrap();
    });
    let commits = db.begin_read().unwrap().id().0 - before;
    let keys = db
        .view(|tx| Ok::<_, rbolt::Error>(tx.bucket("b")?.unwrap().iter().count()))
        .unwrap();
    assert_eq!(keys, CALLS as usize);
    // One commit when every call had queued in time; a straggler on a loaded machine may
    // lead one more.
    assert!(commits <= 3, "{commits} commits for {CALLS} calls");
    assert_clean(&db);
}
