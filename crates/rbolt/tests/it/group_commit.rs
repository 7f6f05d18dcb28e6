//! Attacks on group commit in `Db::batch` (issue 51): the batch's leader waits for the writer
//! and only then takes the queued calls, so calls made while another commit syncs share the
//! next one. What must still hold: a caller hears `Ok` only once its write is durable (a failed
//! sync, write or growth in the shared commit fails every caller, or commits each one's call
//! again alone); no caller waits for ever (a poisoned handle, a panic in a call, a leader that
//! cannot begin); a batch takes at most `max_batch_size` calls.

use crate::one_sync::{content, reopen, sim_db};
use crate::support::within;
use rbolt::storage::{FaultError, FaultPlan, OpKind, SimFile};
use rbolt::{Db, Options};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How long any one scenario may take before it counts as a hang.
const HANG: Duration = Duration::from_secs(120);

fn group_options() -> Options {
    Options::default().max_batch_delay(Duration::ZERO)
}

fn key(caller: u32, n: u32) -> Vec<u8> {
    format!("c{caller:02}n{n:02}").into_bytes()
}

/// Runs `callers` threads, each making `calls` batch calls that put one key; returns each
/// call's result (`Ok` or the error's text), once every caller has returned.
fn batch_callers(db: &Arc<Db>, callers: u32, calls: u32) -> BTreeMap<Vec<u8>, Result<(), String>> {
    let threads: Vec<_> = (0..callers)
        .map(|caller| {
            let db = db.clone();
            std::thread::spawn(move || {
                (0..calls)
                    .map(|n| {
                        let k = key(caller, n);
                        let put = k.clone();
                        let result =
                            db.batch(move |tx| tx.create_bucket_if_not_exists("b")?.put(&put, "v"));
                        (k, result.map_err(|e| e.to_string()))
                    })
                    .collect::<Vec<_>>()
            })
        })
        .collect();
    threads
        .into_iter()
        .flat_map(|thread| thread.join().expect("a caller panicked"))
        .collect()
}

/// A failure (EIO, or ENOSPC) at any one operation while 8 threads commit through batches of
/// group commit, with one sync a commit and with two: every call answered `Ok` is durable — a
/// power loss right after keeps it, and so does the page cache after the failed sync (Linux
/// may drop the pages it could not write) — and the file opens clean. A shared commit that
/// failed before its meta runs each call again alone; one that failed after poisons the handle
/// and every caller hears it.
#[test]
fn a_failure_anywhere_in_a_shared_commit_never_acknowledges_a_write_that_is_not_durable() {
    let (mut acknowledged, mut refused) = (0, 0);
    for one_sync in [true, false] {
        for (at, error) in (0..48u64).map(|at| {
            let error = if at % 3 == 0 {
                FaultError::NoSpace
            } else {
                FaultError::Io
            };
            (at, error)
        }) {
            let (sim, db) = sim_db(group_options().one_sync(one_sync));
            db.update(|tx| tx.create_bucket("b").map(drop)).unwrap();
            let op = sim.op_count() + at;
            sim.set_fault_plan(FaultPlan::new().fail_at(op, error));
            let db = Arc::new(db);
            let results = {
                let db = db.clone();
                within(HANG, move || batch_callers(&db, 8, 4))
            };
            sim.set_fault_plan(FaultPlan::new());
            let what = format!("one sync {one_sync}, {error:?} at op {op}");
            let ok: Vec<&Vec<u8>> = results
                .iter()
                .filter(|(_, result)| result.is_ok())
                .map(|(key, _)| key)
                .collect();
            acknowledged += ok.len();
            refused += results.len() - ok.len();
            for (image_what, image) in [
                ("a power loss", sim.durable_image()),
                (
                    "after the failed sync",
                    sim.after_failed_sync(op).unwrap().live_image().unwrap(),
                ),
            ] {
                let found = reopen(image);
                for key in &ok {
                    assert!(
                        found.contains_key(*key),
                        "{what}, {image_what}: {key:?} was acknowledged and is lost"
                    );
                }
            }
            drop(db);
        }
    }
    println!("group commit under faults: {acknowledged} calls acknowledged, {refused} refused");
    assert!(acknowledged > 0 && refused > 0, "{acknowledged} {refused}");
}

/// Holds the writer on a thread of its own, starts `callers` batch callers behind it, waits
/// until they have all called and had time to queue, then runs `before_release` and lets the
/// holder commit (its key `held`). Returns the holder's commit result and each caller's
/// result (a caller that panicked: `Err("panicked")`).
fn behind_a_held_writer(
    db: &Arc<Db>,
    callers: u32,
    call: impl Fn(u32, &mut rbolt::WriteTx<'_>) -> rbolt::Result<()> + Send + Sync + 'static,
    before_release: impl FnOnce(),
) -> (rbolt::Result<()>, Vec<Result<(), String>>) {
    let (held_tx, held_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder = {
        let db = db.clone();
        std::thread::spawn(move || {
            let tx = db.begin_write().unwrap();
            tx.create_bucket_if_not_exists("b")?.put("held", "v")?;
            held_tx.send(()).unwrap();
            release_rx.recv().unwrap();
            tx.commit()
        })
    };
    held_rx.recv().unwrap();
    let call = Arc::new(call);
    let arrived = Arc::new(AtomicU32::new(0));
    let threads: Vec<_> = (0..callers)
        .map(|caller| {
            let (db, call, arrived) = (db.clone(), call.clone(), arrived.clone());
            std::thread::spawn(move || {
                arrived.fetch_add(1, Ordering::SeqCst);
                db.batch(move |tx| call(caller, tx))
            })
        })
        .collect();
    while arrived.load(Ordering::SeqCst) < callers {
        std::thread::yield_now();
    }
    // Time to queue behind the writer; a straggler only makes a batch smaller.
    std::thread::sleep(Duration::from_millis(500));
    before_release();
    release_tx.send(()).unwrap();
    let held = holder.join().expect("the holder panicked");
    let results = threads
        .into_iter()
        .map(|thread| match thread.join() {
            Ok(result) => result.map_err(|e| e.to_string()),
            Err(_) => Err("panicked".to_owned()),
        })
        .collect();
    (held, results)
}

/// Batch callers queued behind a commit whose sync fails (EIO; the handle poisons): none hangs,
/// none hears `Ok`, each hears `Poisoned` — the leader's `begin_write` fails, and so does each
/// call's solo run. A batch call after that fails at once.
#[test]
fn batch_callers_queued_behind_a_commit_that_poisons_the_handle_all_hear_it() {
    for one_sync in [true, false] {
        let (sim, db) = sim_db(group_options().one_sync(one_sync));
        let db = Arc::new(db);
        let (held, results) = {
            let db = db.clone();
            within(HANG, move || {
                behind_a_held_writer(
                    &db,
                    8,
                    |caller, tx| tx.bucket_mut("b")?.unwrap().put(key(caller, 0), "v"),
                    || {
                        sim.set_fault_plan(
                            FaultPlan::new()
                                .fail_kind(OpKind::SyncData, FaultError::Io)
                                .fail_kind(OpKind::SyncAll, FaultError::Io),
                        )
                    },
                )
            })
        };
        assert!(
            held.is_err(),
            "one sync {one_sync}: the held commit's sync failed"
        );
        for result in &results {
            assert_eq!(
                result.as_ref().map_err(String::as_str),
                Err(rbolt::Error::Poisoned.to_string().as_str()),
                "one sync {one_sync}"
            );
        }
        let db2 = db.clone();
        let late = within(HANG, move || {
            db2.batch(|tx| tx.create_bucket("late").map(drop))
        });
        assert!(matches!(late, Err(rbolt::Error::Poisoned)), "{late:?}");
    }
}

/// A call that panics, among calls queued behind the writer: the others commit together
/// (the panicking call is taken out of the shared transaction, and panics again on its own
/// caller's thread when run alone), and nobody waits for ever.
#[test]
fn a_panicking_call_among_queued_calls_hangs_nobody_and_the_others_commit() {
    let (_sim, db) = sim_db(group_options().one_sync(true));
    let db = Arc::new(db);
    let (held, results) = {
        let db = db.clone();
        within(HANG, move || {
            behind_a_held_writer(
                &db,
                8,
                |caller, tx| {
                    assert!(caller != 3, "caller 3's call panics");
                    tx.bucket_mut("b")?.unwrap().put(key(caller, 0), "v")
                },
                || {},
            )
        })
    };
    held.unwrap();
    let found = content(&db);
    for (caller, result) in results.iter().enumerate() {
        let caller = caller as u32;
        if caller == 3 {
            assert_eq!(result, &Err("panicked".to_owned()));
            assert!(!found.contains_key(&key(caller, 0)));
        } else {
            assert_eq!(result, &Ok(()), "caller {caller}");
            assert!(found.contains_key(&key(caller, 0)), "caller {caller}");
        }
    }
}

/// `max_batch_size` still bounds a batch when the leader takes the calls only once it holds
/// the writer: 12 calls queued behind a held writer, with batches of at most 3, commit in
/// transactions of at most 3 calls each (each call notes the transaction its committed run
/// ran in).
#[test]
fn max_batch_size_bounds_the_calls_a_group_commit_takes() {
    let (_sim, db) = sim_db(group_options().max_batch_size(3));
    let db = Arc::new(db);
    let ran_in: Arc<Mutex<BTreeMap<u32, u64>>> = Arc::default();
    let (held, results) = {
        let (db, ran_in) = (db.clone(), ran_in.clone());
        within(HANG, move || {
            behind_a_held_writer(
                &db,
                12,
                move |caller, tx| {
                    ran_in.lock().unwrap().insert(caller, tx.id().0);
                    tx.bucket_mut("b")?.unwrap().put(key(caller, 0), "v")
                },
                || {},
            )
        })
    };
    held.unwrap();
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let mut per_commit: BTreeMap<u64, usize> = BTreeMap::new();
    for txid in ran_in.lock().unwrap().values() {
        *per_commit.entry(*txid).or_default() += 1;
    }
    println!("calls per commit: {per_commit:?}");
    assert_eq!(per_commit.values().sum::<usize>(), 12);
    assert!(
        per_commit.values().all(|&calls| calls <= 3),
        "a batch took more than max_batch_size calls: {per_commit:?}"
    );
    assert_eq!(content(&db).len(), 13);
}

/// The leader of a batch cannot begin (the handle is poisoned already): every caller of the
/// batch, leader or not, hears `Poisoned`, at once.
#[test]
fn a_batch_whose_leader_cannot_begin_answers_every_caller() {
    let (sim, db) = sim_db(group_options());
    sim.set_fault_plan(FaultPlan::new().fail_kind(OpKind::SyncData, FaultError::Io));
    assert!(db.update(|tx| tx.create_bucket("b").map(drop)).is_err());
    sim.set_fault_plan(FaultPlan::new());
    let db = Arc::new(db);
    let results = {
        let db = db.clone();
        within(HANG, move || batch_callers(&db, 8, 3))
    };
    assert_eq!(results.len(), 24);
    for (key, result) in results {
        assert_eq!(
            result,
            Err(rbolt::Error::Poisoned.to_string()),
            "{}",
            String::from_utf8_lossy(&key)
        );
    }
    let _: &SimFile = &sim;
}

/// A call that asks for a commit without syncs (`WriteTx::set_durability(None)`) shares its
/// transaction with the other calls of its batch: their callers, who asked for nothing of the
/// kind, hear `Ok` only once their writes are durable all the same (a power loss right after
/// keeps them).
#[test]
fn a_call_that_asks_for_no_syncs_does_not_take_the_other_calls_durability() {
    for one_sync in [false, true] {
        let (sim, db) = sim_db(group_options().one_sync(one_sync));
        db.update(|tx| tx.create_bucket("b").map(drop)).unwrap();
        let db = Arc::new(db);
        let (held, results) = {
            let db = db.clone();
            within(HANG, move || {
                behind_a_held_writer(
                    &db,
                    8,
                    |caller, tx| {
                        if caller % 2 == 1 {
                            tx.set_durability(rbolt::Durability::None);
                        }
                        tx.bucket_mut("b")?.unwrap().put(key(caller, 0), "v")
                    },
                    || {},
                )
            })
        };
        held.unwrap();
        assert!(results.iter().all(Result::is_ok), "{results:?}");
        let found = reopen(sim.durable_image());
        for caller in (0..8).filter(|caller| caller % 2 == 0) {
            assert!(
                found.contains_key(&key(caller, 0)),
                "one sync {one_sync}: caller {caller} heard Ok and its write is not durable"
            );
        }
    }
}
