//! [`Ctx`]: what the server, the Raft network and the node's watchers share: its identity,
//! its cluster, its metrics, whether it was removed from the cluster or its storage failed,
//! and whether, leading, it has lost its quorum.

use crate::identity::{self, CLUSTER_ID_FILE, REMOVED_FILE};
use crate::kv::{KvConfig, KvRaft};
use crate::limits::Limits;
use crate::observe::Metrics;
use openraft::type_config::async_runtime::WatchReceiver;
use openraft::{Instant as _, RaftMetrics, ServerState};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError, RwLock};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

pub use crate::observe::WARN_EVERY;

/// Why a node stopped serving.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stopped {
    /// Its storage failed; the process exits non-zero.
    StorageFailed(String),
    /// It was removed from the cluster, by a membership change at this log index.
    Removed(u64),
}

/// What a node's parts share.
pub struct Ctx {
    /// The node's id.
    pub id: u64,
    /// Its data directory.
    pub dir: PathBuf,
    /// Its limits.
    pub limits: Limits,
    /// Its metrics.
    pub metrics: Arc<Metrics>,
    /// Its space: quota, reserve, and whether it is short.
    pub space: Arc<crate::space::Space>,
    /// Set while a vacuum of its files runs (one at a time).
    pub vacuuming: std::sync::atomic::AtomicBool,
    /// Its Raft, once started.
    pub raft: OnceLock<KvRaft>,
    /// The cluster it belongs to; `None` until a node that joins hears from its leader.
    cluster: RwLock<Option<String>>,
    /// Set once it stops serving.
    stopped: Mutex<Option<Stopped>>,
    /// Woken when it stops serving because its storage failed.
    pub failed: Notify,
    /// When each kind of repeated warning was last logged.
    warned: Mutex<BTreeMap<String, Instant>>,
    /// The term this node last became leader in, and when (see [`Ctx::quorum_lost`]).
    leading_since: Mutex<Option<(u64, Instant)>>,
    /// The log index this node must hold before it grants a vote; 0 when it votes freely
    /// (see [`Ctx::withhold_votes_until`]).
    votes_withheld_below: std::sync::atomic::AtomicU64,
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

impl Ctx {
    /// The context of node `id` in `dir`, of cluster `cluster` if it is known, with its
    /// `metrics` and `space`.
    pub fn new(
        id: u64,
        dir: PathBuf,
        limits: Limits,
        cluster: Option<String>,
        metrics: Arc<Metrics>,
        space: Arc<crate::space::Space>,
    ) -> Ctx {
        Ctx {
            id,
            dir,
            limits,
            metrics,
            space,
            vacuuming: std::sync::atomic::AtomicBool::new(false),
            raft: OnceLock::new(),
            cluster: RwLock::new(cluster),
            stopped: Mutex::new(None),
            failed: Notify::new(),
            warned: Mutex::new(BTreeMap::new()),
            leading_since: Mutex::new(None),
            votes_withheld_below: std::sync::atomic::AtomicU64::new(0),
        }
    }

    /// Withholds this node's vote until its log holds `index`. A node that starts with an
    /// empty log while its cluster runs (its data was lost, or its directory was replaced)
    /// may be a voter of the membership; granting votes before it holds the entries the
    /// cluster committed could elect a leader that lacks some of them (the committed entry
    /// held by the old leader and this node alone). So it takes the leader's entries first,
    /// and votes once it holds the commit index a running peer reported.
    pub fn withhold_votes_until(&self, index: u64) {
        self.votes_withheld_below
            .store(index, std::sync::atomic::Ordering::Release);
    }

    /// The index this node must hold before it votes, if it withholds its vote while holding
    /// only `last_log_index`; clears the withholding once it holds it.
    pub fn votes_withheld(&self, last_log_index: Option<u64>) -> Option<u64> {
        let below = self
            .votes_withheld_below
            .load(std::sync::atomic::Ordering::Acquire);
        if below == 0 {
            return None;
        }
        if last_log_index.is_some_and(|last| last >= below) {
            self.votes_withheld_below
                .store(0, std::sync::atomic::Ordering::Release);
            tracing::info!(
                index = below,
                "this node holds the entries the cluster had committed when it started: it \
                 votes again"
            );
            return None;
        }
        Some(below)
    }

    /// The cluster id, or `""` while it is not known.
    pub fn cluster(&self) -> String {
        self.cluster
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
            .unwrap_or_default()
    }

    /// Checks the cluster of a peer message. A node that does not know its cluster yet (it
    /// was started to join one) takes the first one it hears from and records it.
    pub fn check_cluster(&self, theirs: &str, from: u64) -> Result<(), String> {
        if let Some(ours) = self
            .cluster
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .as_deref()
        {
            if ours == theirs {
                return Ok(());
            }
            return Err(format!(
                "cluster mismatch: node {} belongs to cluster {ours:?}; the message came from \
                 node {from} of cluster {theirs:?}",
                self.id
            ));
        }
        if theirs.is_empty() || identity::check_cluster_token(theirs).is_err() {
            return Err(format!("a message of node {from} names no usable cluster"));
        }
        let mut cluster = self.cluster.write().unwrap_or_else(PoisonError::into_inner);
        if cluster.is_none() {
            identity::write_record(&self.dir, CLUSTER_ID_FILE, theirs)
                .map_err(|e| format!("recording the cluster id: {e:#}"))?;
            tracing::info!(cluster = theirs, from, "joined cluster");
            *cluster = Some(theirs.to_owned());
        }
        drop(cluster);
        self.check_cluster(theirs, from)
    }

    /// Why the node stopped serving, if it did.
    pub fn stopped(&self) -> Option<Stopped> {
        lock(&self.stopped).clone()
    }

    /// The node's storage failed: it stops serving, says so on `/health`, and the process
    /// exits non-zero (the caller of `node::run` sees [`Ctx::failed`]).
    pub fn storage_failed(&self, reason: String) {
        let mut stopped = lock(&self.stopped);
        if stopped.is_some() {
            return;
        }
        tracing::error!(%reason, "storage failed: this node stops and exits non-zero so that a supervisor restarts it");
        self.metrics.storage_failed.set(1);
        *stopped = Some(Stopped::StorageFailed(reason));
        drop(stopped);
        self.failed.notify_one();
    }

    /// A peer reports that its committed membership, of log index `their_index`, leaves this
    /// node out: it answered this node's vote request `410` naming this node. If that
    /// membership is newer than the one this node has, this node was removed: it records that,
    /// stops Raft (no more campaigns) and answers everything with `410 Gone` from now on.
    ///
    /// Only a `410` that names this node is such a report: a removed peer answers every
    /// message `410` naming itself, and a voter that missed the peer's removal must not stop
    /// on it (issue 47).
    pub fn peer_says_removed(&self, their_index: u64, peer: u64) {
        let Some(raft) = self.raft.get() else { return };
        let ours = raft
            .metrics()
            .borrow_watched()
            .membership_config
            .log_id()
            .as_ref()
            .map_or(0, |id| id.index);
        if their_index <= ours {
            return;
        }
        let mut stopped = lock(&self.stopped);
        if stopped.is_some() {
            return;
        }
        tracing::error!(
            node = self.id,
            removed_at = their_index,
            told_by = peer,
            "this node was removed from the cluster; it stops campaigning and answers 410 Gone (its data directory no longer belongs to a member: delete it before reusing the id)"
        );
        if let Err(e) = identity::write_record(&self.dir, REMOVED_FILE, &their_index.to_string()) {
            tracing::error!(error = %format!("{e:#}"), "recording the removal");
        }
        *stopped = Some(Stopped::Removed(their_index));
        drop(stopped);
        let raft = raft.clone();
        tokio::spawn(async move {
            let _ = raft.shutdown().await;
        });
    }

    /// Records that this node became leader in `term` now.
    pub fn became_leader(&self, term: u64) {
        *lock(&self.leading_since) = Some((term, Instant::now()));
    }

    /// Why this node, a leader, cannot serve now: it has not heard from a quorum of its voters
    /// (openraft's `last_quorum_acked`: the append entries a quorum answered) within an
    /// election timeout, so another leader may have been elected, and nothing it proposes
    /// can commit. `None` on a node that does not lead, on the only voter, and on a leader a
    /// quorum answered within an election timeout (or that was elected less than one ago).
    pub fn quorum_lost(&self, metrics: &RaftMetrics<KvConfig>) -> Option<String> {
        if metrics.state != ServerState::Leader {
            return None;
        }
        let raft = self.raft.get()?;
        let voters: Vec<u64> = metrics.membership_config.membership().voter_ids().collect();
        if voters == [self.id] {
            return None;
        }
        let timeout = Duration::from_millis(raft.config().election_timeout_min);
        let silent = match metrics.last_quorum_acked {
            Some(acked) => (*acked).elapsed(),
            None => match *lock(&self.leading_since) {
                Some((term, since)) if term == metrics.current_term => since.elapsed(),
                _ => Duration::ZERO,
            },
        };
        (silent > timeout).then(|| {
            format!(
                "quorum lost: this leader (node {}, term {}) has not heard from a quorum of \
                 the voters {voters:?} for {} ms, more than an election timeout ({} ms); \
                 nothing can commit until a quorum answers again",
                self.id,
                metrics.current_term,
                silent.as_millis(),
                timeout.as_millis()
            )
        })
    }

    /// Logs `message` as a warning unless one of the same `kind` was logged within
    /// [`WARN_EVERY`]; returns whether it was logged.
    pub fn warn_now(&self, kind: &str) -> bool {
        let mut warned = lock(&self.warned);
        let now = Instant::now();
        match warned.get(kind) {
            Some(at) if now.duration_since(*at) < WARN_EVERY => false,
            _ => {
                warned.insert(kind.to_owned(), now);
                true
            }
        }
    }
}
