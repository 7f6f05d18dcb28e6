//! What travels over HTTP: the paths, and the JSON bodies of the client API and of the Raft
//! RPCs' side channel (the snapshot header). Raft messages themselves are openraft's types,
//! serialized with serde as they are.

use crate::kv::KvConfig;
use openraft::type_config::alias::{SnapshotMetaOf, VoteOf};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `POST`: an `AppendEntriesRequest`, answered with `Result<AppendEntriesResponse, RaftError>`.
pub const PATH_APPEND: &str = "/raft/append";
/// `POST`: a `VoteRequest`, answered with `Result<VoteResponse, RaftError>`.
pub const PATH_VOTE: &str = "/raft/vote";
/// `POST`: a snapshot file as the body, [`SnapshotHeader`] in [`HEADER_SNAPSHOT`], answered
/// with `Result<SnapshotResponse, RaftError>`.
pub const PATH_SNAPSHOT: &str = "/raft/snapshot";
/// The header of [`PATH_SNAPSHOT`] requests: [`SnapshotHeader`] as JSON.
pub const HEADER_SNAPSHOT: &str = "x-rbolt-raft-snapshot";
/// `GET`: this node's [`Status`].
pub const PATH_STATUS: &str = "/status";
/// `GET /kv/KEY` reads, `PUT /kv/KEY` (the body is the value) writes, `DELETE /kv/KEY`
/// deletes; `GET /kv` returns every pair as a JSON object. Reads take `?read=local` to read
/// this node's state without asking the leader.
pub const PATH_KV: &str = "/kv";
/// `POST` [`AddLearner`]: adds a node that receives the log but does not vote.
pub const PATH_LEARNERS: &str = "/cluster/learners";
/// `POST` [`ChangeMembers`]: makes exactly these nodes the voters.
pub const PATH_MEMBERS: &str = "/cluster/members";

/// The vote and meta of a snapshot sent in a [`PATH_SNAPSHOT`] request.
#[derive(Debug, Serialize, Deserialize)]
pub struct SnapshotHeader {
    /// The sender's vote.
    pub vote: VoteOf<KvConfig>,
    /// What the snapshot holds.
    pub meta: SnapshotMetaOf<KvConfig>,
}

/// The answer to an acknowledged write: it is committed and applied on the leader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteReply {
    /// The log index of the write.
    pub index: u64,
    /// The key's value before the write.
    pub previous: Option<String>,
}

/// The body of an error answer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ErrorReply {
    /// What went wrong.
    pub error: String,
}

/// The body of a [`PATH_LEARNERS`] request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct AddLearner {
    /// The new node's id.
    pub id: u64,
    /// The address (`host:port`) it listens on.
    pub addr: String,
}

/// The body of a [`PATH_MEMBERS`] request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChangeMembers {
    /// The ids of the voters after the change; each must be a member or learner already.
    pub voters: Vec<u64>,
}

/// The answer to a membership change.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MembershipReply {
    /// The log index of the membership entry.
    pub index: u64,
    /// The voters after the change.
    pub voters: Vec<u64>,
    /// Every node, voter or learner, and its address.
    pub nodes: BTreeMap<u64, String>,
}

/// A node's view of the cluster and what its storage has done since it started.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Status {
    /// This node's id.
    pub id: u64,
    /// `Leader`, `Follower`, `Candidate`, `Learner` or `Shutdown`.
    pub state: String,
    /// The leader this node knows of.
    pub leader: Option<u64>,
    /// The current term.
    pub term: u64,
    /// The last index in the log.
    pub last_log_index: Option<u64>,
    /// The last index known committed.
    pub committed: Option<u64>,
    /// The last index applied to the state machine.
    pub applied: Option<u64>,
    /// The last index in the current snapshot.
    pub snapshot: Option<u64>,
    /// The last index purged from the log.
    pub purged: Option<u64>,
    /// The voters of the effective membership.
    pub voters: Vec<u64>,
    /// Every node of the effective membership, voter or learner, and its address.
    pub nodes: BTreeMap<u64, String>,
    /// Durable commits of the log file since start (each two `fdatasync`s).
    pub log_commits: u64,
    /// Of those, appends.
    pub log_appends: u64,
    /// Entries appended by them.
    pub log_entries_appended: u64,
    /// Durable commits of apply batches since start (each two `fdatasync`s).
    pub apply_commits: u64,
    /// Entries applied by them.
    pub entries_applied: u64,
    /// Snapshots installed since start.
    pub snapshots_installed: u64,
}
