//! Power loss, which SIGKILL cannot show: the log runs on rbolt's simulated file, and at the
//! moment openraft would be told a write is durable (the flush callback of `append`, the return
//! of the other writes) the test takes the image a power loss could leave there — unsynced
//! writes dropped, torn or garbled — reopens it, and requires every acknowledged write.

use crate::common::{Rng, TestConfig, entry, log_id, vote};
use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogReader, RaftLogStorage};
use openraft::type_config::TypeConfigExt;
use rbolt::storage::{CrashProfile, SimFile};
use rbolt_raft::LogStore;
use std::collections::BTreeMap;
use std::sync::Arc;

fn store_on(sim: &SimFile) -> LogStore<TestConfig> {
    let db = rbolt::Db::open_storage(Arc::new(sim.clone()), rbolt::Options::default())
        .expect("rbolt opens the simulated file");
    LogStore::from_db(db).expect("the log store opens")
}

/// What was acknowledged: entries (index to term), purge point, vote term.
#[derive(Debug, Default, PartialEq, Eq)]
struct Acked {
    log: BTreeMap<u64, u64>,
    purged: Option<u64>,
    vote_term: Option<u64>,
}

/// Takes a crash image of `sim` as it is now, reopens it, and compares it with `acked`.
async fn crash_and_check(sim: &SimFile, acked: &Acked, rng: &mut Rng, step: &str) {
    let profiles = [
        CrashProfile::DropAll,
        CrashProfile::Random,
        CrashProfile::Torn,
        CrashProfile::Garbage,
    ];
    let profile = profiles[rng.below(profiles.len() as u64) as usize];
    let image = sim.crash_image(profile, rng.next());
    let crashed = SimFile::from_image(image).expect("image");
    let mut log = store_on(&crashed);
    let entries = log
        .try_get_log_entries(..)
        .await
        .expect("the log reads after a power loss");
    let state = log.get_log_state().await.expect("log state");
    let vote = log.read_vote().await.expect("vote");
    let recovered = Acked {
        log: entries
            .iter()
            .map(|e| (e.index(), e.log_id.leader_id.term))
            .collect(),
        purged: state.last_purged_log_id.map(|id| id.index),
        vote_term: vote.map(|v| v.leader_id().term),
    };
    assert_eq!(
        recovered, *acked,
        "{step}: after a power loss ({profile:?})"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn power_loss_after_an_acknowledgement_loses_nothing() {
    let (mut rng, seed) = Rng::from_env_or_time();
    eprintln!("power loss: RBOLT_RAFT_SEED={seed}");
    let sim = SimFile::new().expect("simulated file");
    let mut log = store_on(&sim);
    let mut acked = Acked::default();
    let mut term = 1;
    for step in 0..60 {
        let label = match rng.below(6) {
            0 => {
                term += 1;
                log.save_vote(&vote(term, 0, true))
                    .await
                    .expect("save_vote");
                acked.vote_term = Some(term);
                "save_vote"
            }
            1 => {
                let (Some(&first), Some(&last)) =
                    (acked.log.keys().next(), acked.log.keys().next_back())
                else {
                    continue;
                };
                let keep = first + rng.below(last - first + 1);
                log.truncate_after(Some(log_id(acked.log[&keep], keep)))
                    .await
                    .expect("truncate");
                acked.log.retain(|&i, _| i <= keep);
                term += 1;
                "truncate_after"
            }
            2 => {
                let Some(&first) = acked.log.keys().next() else {
                    continue;
                };
                let upto = first + rng.below(4);
                let Some(&t) = acked.log.get(&upto) else {
                    continue;
                };
                log.purge(log_id(t, upto)).await.expect("purge");
                acked.log.retain(|&i, _| i > upto);
                acked.purged = Some(upto);
                "purge"
            }
            _ => {
                let next = acked
                    .log
                    .keys()
                    .next_back()
                    .map(|l| l + 1)
                    .or(acked.purged.map(|p| p + 1))
                    .unwrap_or(0);
                let n = 1 + rng.below(20);
                let entries: Vec<_> = (next..next + n).map(|i| entry(term, i)).collect();
                // Append on its own task; the image is taken the moment the flush callback
                // fires, which is when openraft may tell a client the entries are safe.
                let (tx, rx) = TestConfig::oneshot();
                let appending = tokio::spawn(async move {
                    log.append(entries, IOFlushed::signal(tx))
                        .await
                        .expect("append");
                    log
                });
                rx.await
                    .expect("the callback fires")
                    .expect("append succeeded");
                for i in next..next + n {
                    acked.log.insert(i, term);
                }
                crash_and_check(
                    &sim,
                    &acked,
                    &mut rng,
                    &format!("step {step} (append, at the callback)"),
                )
                .await;
                log = appending.await.expect("append task");
                "append"
            }
        };
        crash_and_check(&sim, &acked, &mut rng, &format!("step {step} ({label})")).await;
    }
}
