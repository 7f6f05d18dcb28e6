//! What travels over HTTP: the paths, and the JSON bodies of the client API and of the Raft
//! RPCs' side channel (the snapshot header). Raft messages themselves are openraft's types in
//! the binary frames of [`crate::wire`].

use crate::kv::KvConfig;
use openraft::type_config::alias::{SnapshotMetaOf, VoteOf};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `POST`: an `AppendEntriesRequest` in a frame, answered with
/// `Result<AppendEntriesResponse, RaftError>` in a frame.
pub const PATH_APPEND: &str = "/raft/append";
/// `POST`: a `VoteRequest` in a frame, answered with `Result<VoteResponse, RaftError>`.
pub const PATH_VOTE: &str = "/raft/vote";
/// `POST`: installs the snapshot this node received in chunks ([`PATH_SNAPSHOT_CHUNK`]);
/// [`SnapshotHeader`] in [`HEADER_SNAPSHOT`], the sender's cluster and id in
/// [`HEADER_CLUSTER`] and [`HEADER_FROM`], no body; answered with
/// `Result<SnapshotResponse, RaftError>` in a frame.
pub const PATH_SNAPSHOT: &str = "/raft/snapshot";
/// `POST`: bytes of a snapshot file at an offset ([`SnapshotChunk`] in
/// [`HEADER_SNAPSHOT_CHUNK`], the sender in [`HEADER_CLUSTER`] and [`HEADER_FROM`]), answered
/// with what this node holds of that snapshot ([`ChunkReply`], JSON).
pub const PATH_SNAPSHOT_CHUNK: &str = "/raft/snapshot/chunk";
/// The header of [`PATH_SNAPSHOT_CHUNK`] requests: [`SnapshotChunk`] as JSON.
pub const HEADER_SNAPSHOT_CHUNK: &str = "x-rbolt-raft-snapshot-chunk";
/// `POST`: a `TransferLeaderRequest` in a frame (the leader hands over to this node),
/// answered with `Result<TransferLeaderResponse, Fatal>` in a frame.
pub const PATH_TRANSFER: &str = "/raft/transfer";
/// `POST`: a [`Hello`] in a frame (the node a leader is about to add checks in), answered with
/// this node's [`Hello`] in a frame.
pub const PATH_HELLO: &str = "/raft/hello";
/// `POST`: an [`AlarmRaise`] in a frame (a member short of space asks the leader to raise
/// its NOSPACE alarm), answered `200` once the alarm is committed.
pub const PATH_ALARM: &str = "/raft/alarm";
/// The header of [`PATH_SNAPSHOT`] requests: [`SnapshotHeader`] as JSON.
pub const HEADER_SNAPSHOT: &str = "x-rbolt-raft-snapshot";
/// The sender's cluster id, on snapshot requests (frames carry it themselves).
pub const HEADER_CLUSTER: &str = "x-rbolt-cluster";
/// The sender's node id, on snapshot requests.
pub const HEADER_FROM: &str = "x-rbolt-from";
/// On a `503` to a write: `unknown` when the write was proposed and may still take effect
/// (the leader changed, or lost its quorum, before it committed). A client must not send such
/// a write again as if it had not happened.
pub const HEADER_OUTCOME: &str = "x-rbolt-outcome";
/// The value of [`HEADER_OUTCOME`] on a write that may or may not take effect.
pub const OUTCOME_UNKNOWN: &str = "unknown";
/// On a `PUT` or `DELETE` of a key: the client's id of the request (1 to 64 printable ASCII
/// characters, unique per write). The write takes effect at most once per id, so a client may
/// send again a write whose outcome it does not know (a `503` with [`HEADER_OUTCOME`]
/// `unknown`, a timeout) under the same id; a resend of one that took effect is answered
/// `200` with [`WriteReply::duplicate_of`].
pub const HEADER_REQUEST_ID: &str = "x-rbolt-request-id";
/// The cluster's peer secret (`--peer-secret-file`), on every peer request when one is set.
pub const HEADER_PEER_SECRET: &str = "x-rbolt-peer-secret";
/// On a `410 Gone` answer to a peer: the log index of the committed membership that leaves
/// out the node [`HEADER_REMOVED_NODE`] names.
pub const HEADER_MEMBERSHIP_INDEX: &str = "x-rbolt-membership-index";
/// On a `410 Gone` answer to a peer: the node that is no longer a member, the sender (a
/// candidate the committed membership leaves out) or the answering node itself (which was
/// removed). Only the first tells the sender anything about itself.
pub const HEADER_REMOVED_NODE: &str = "x-rbolt-removed-node";
/// `GET`: `200` only while the node knows a leader and its storage is sound.
pub const PATH_HEALTH: &str = "/health";
/// `GET`: `200` once the node knows a leader and has applied what it knows is committed.
pub const PATH_READYZ: &str = "/readyz";
/// `GET`: `200` while the process serves and its storage has not failed.
pub const PATH_LIVEZ: &str = "/livez";
/// `GET`: the node's metrics in Prometheus' text format.
pub const PATH_METRICS: &str = "/metrics";
/// `GET`: a backup, one consistent rbolt copy of the state machine (linearizable through the
/// leader, or `?read=local`).
pub const PATH_BACKUP: &str = "/backup";
/// `POST` [`TransferLeader`]: the leader hands leadership to another voter.
pub const PATH_LEADER: &str = "/cluster/leader";
/// `GET`: this node's [`Status`].
pub const PATH_STATUS: &str = "/status";
/// `GET /kv/KEY` reads, `PUT /kv/KEY` (the body is the value) writes, `DELETE /kv/KEY`
/// deletes; `GET /kv` returns every pair as a JSON object. Reads take `?read=local` to read
/// this node's state without asking the leader.
pub const PATH_KV: &str = "/kv";
/// `POST` [`AddLearner`]: adds a node that receives the log but does not vote;
/// `DELETE /cluster/learners/ID` removes a learner.
pub const PATH_LEARNERS: &str = "/cluster/learners";
/// `POST` [`ChangeMembers`]: makes exactly these nodes the voters; `GET`: [`Members`].
pub const PATH_MEMBERS: &str = "/cluster/members";
/// `GET`: the raised alarms ([`Alarms`]).
pub const PATH_ALARMS: &str = "/maintenance/alarms";
/// `POST`: clears every alarm (through the leader), answered with [`Alarms`] as they were.
pub const PATH_ALARMS_DISARM: &str = "/maintenance/alarms/disarm";
/// `POST`: runs the online vacuum of this node's files (not the leader's: each member's
/// own), answered with [`VacuumReply`]. Writes go on meanwhile.
pub const PATH_VACUUM: &str = "/maintenance/vacuum";
/// The header a client authenticates its writes with: `Bearer TOKEN`.
pub const HEADER_AUTHORIZATION: &str = "authorization";

/// The vote and meta of a snapshot installed by a [`PATH_SNAPSHOT`] request, and the length
/// and digest of its file.
#[derive(Debug, Serialize, Deserialize)]
pub struct SnapshotHeader {
    /// The sender's vote.
    pub vote: VoteOf<KvConfig>,
    /// What the snapshot holds.
    pub meta: SnapshotMetaOf<KvConfig>,
    /// The file's length in bytes.
    pub length: u64,
    /// The file's XXH3-128 digest, 32 lowercase hex digits.
    pub digest: String,
}

/// Where a [`PATH_SNAPSHOT_CHUNK`] request's bytes go: the snapshot file of `length` bytes
/// and `digest` (as in [`SnapshotHeader`]), at `offset`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SnapshotChunk {
    pub length: u64,
    pub digest: String,
    pub offset: u64,
}

/// The answer to a [`PATH_SNAPSHOT_CHUNK`] request: the bytes of that snapshot the node holds
/// (from its start); the sender goes on from there.
#[derive(Clone, Copy, Debug, Serialize, Deserialize)]
pub struct ChunkReply {
    pub held: u64,
}

/// The answer to an acknowledged write: it is committed and applied on the leader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WriteReply {
    /// The log index of the write.
    pub index: u64,
    /// The key's value before the write.
    pub previous: Option<String>,
    /// Set on a resend of a request id that took effect already ([`HEADER_REQUEST_ID`]): the
    /// log index where it did. This one changed nothing, and `previous` is not known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate_of: Option<u64>,
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
    /// Add it even if it does not answer yet (it catches up once it does); the answer says
    /// "not reachable yet".
    #[serde(default)]
    pub force: bool,
}

/// What a node says of itself to a leader about to add it ([`PATH_HELLO`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Hello {
    /// Its node id.
    pub id: u64,
    /// Its cluster, `""` if it has not joined one yet.
    pub cluster: String,
}

/// A member's request to raise its NOSPACE alarm ([`PATH_ALARM`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AlarmRaise {
    /// The member short of space: the sender itself.
    pub member: u64,
    /// Why.
    pub reason: String,
}

/// The raised alarms, as the answering node has applied them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Alarms {
    /// The member whose space ran out, and why; puts are refused while this is not empty.
    pub nospace: BTreeMap<u64, String>,
    /// The log index of the disarm, on an answer to [`PATH_ALARMS_DISARM`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disarmed_at: Option<u64>,
}

/// What a vacuum of one file did.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VacuumFile {
    /// The file's length before, in bytes.
    pub bytes_before: u64,
    /// Its length after.
    pub bytes_after: u64,
    /// Commits the vacuum made.
    pub steps: u64,
    /// Milliseconds it took.
    pub elapsed_ms: u64,
}

/// The answer to [`PATH_VACUUM`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VacuumReply {
    /// The node that vacuumed its files.
    pub id: u64,
    /// The state file.
    pub state: VacuumFile,
    /// The log file.
    pub log: VacuumFile,
}

/// The body of a [`PATH_LEADER`] request.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TransferLeader {
    /// The voter to hand leadership to.
    pub to: u64,
}

/// The answer to a leadership transfer.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct LeaderReply {
    /// The leader after the transfer.
    pub leader: u64,
    /// Its term.
    pub term: u64,
}

/// One member in [`Members`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Member {
    /// Its address.
    pub addr: String,
    /// `voter` or `learner`.
    pub role: String,
    /// On the leader: the last log index replicated to it (`None`: nothing yet).
    pub matched: Option<u64>,
    /// On the leader: milliseconds since it last acknowledged a heartbeat or an append.
    pub last_ack_ms: Option<u64>,
}

/// The answer to `GET /cluster/members`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Members {
    /// The node that answered.
    pub id: u64,
    /// The leader it knows.
    pub leader: Option<u64>,
    /// The leader's last log index, when the answer comes from the leader.
    pub last_log_index: Option<u64>,
    /// The log index of the effective membership.
    pub membership_index: Option<u64>,
    /// Every member.
    pub members: BTreeMap<u64, Member>,
}

/// The answer to `GET /health`, `/readyz` and `/livez`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Health {
    /// Whether the check passes (then the status is `200`, else `503`).
    pub ok: bool,
    /// Why it does not, or `ok`.
    pub reason: String,
    /// The leader this node knows.
    pub leader: Option<u64>,
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
    /// What the operator should know (a learner added before it answered, say).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
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
    /// Commits of apply batches since start (each two `fdatasync`s when
    /// `--apply-sync-every` is 0 or 1, else none; see `apply_syncs`).
    pub apply_commits: u64,
    /// Entries applied by them.
    pub entries_applied: u64,
    /// Snapshots installed since start.
    pub snapshots_installed: u64,
    /// The cluster this node belongs to (`""` before it joined one; absent from the status of
    /// a node built before cluster ids).
    #[serde(default)]
    pub cluster: String,
    /// Committed entries the state machine refused since start.
    #[serde(default)]
    pub entries_refused: u64,
    /// Why the node stopped serving (`storage failed: ...` or `removed at index N`).
    #[serde(default)]
    pub stopped: Option<String>,
    /// The raised NOSPACE alarms, by member, as this node has applied them: puts are refused
    /// cluster-wide while there is one.
    #[serde(default)]
    pub alarms: BTreeMap<u64, String>,
    /// Why this node is short of space now, if it is (its alarm is then raised, or about to
    /// be).
    #[serde(default)]
    pub space_shortage: Option<String>,
    /// The bytes the pages in use of its state file take.
    #[serde(default)]
    pub store_in_use_bytes: u64,
    /// Its `--quota-backend-bytes` (0: none).
    #[serde(default)]
    pub quota_backend_bytes: u64,
    /// Syncs of the state file after apply batches without syncs, since start
    /// (`--apply-sync-every`).
    #[serde(default)]
    pub apply_syncs: u64,
}
