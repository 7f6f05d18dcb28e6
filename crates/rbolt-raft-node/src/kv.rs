//! The replicated key/value store: the Raft types, the log entries clients propose, and the
//! [`KvMachine`] that applies them to an rbolt bucket.

use openraft::EntryPayload;
use openraft::type_config::alias::EntryOf;
use rbolt_raft::Machine;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// A client's write: the payload of a normal log entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Request {
    /// Sets `key` to `value`.
    Put {
        /// The key.
        key: String,
        /// The value.
        value: String,
    },
    /// Removes `key` (a key that is absent stays absent).
    Delete {
        /// The key.
        key: String,
    },
    /// Raises the NOSPACE alarm of `member` (its store is over its quota, or its disk is
    /// full): from this entry on, every replica refuses puts until the alarms are disarmed.
    /// Deletes, reads and membership changes go on (etcd's `NOSPACE`).
    RaiseAlarm {
        /// The member whose space ran out.
        member: u64,
        /// Why, for the operator.
        reason: String,
    },
    /// Clears every alarm (an operator's `alarm disarm`, after freeing space). A member still
    /// short of space raises its alarm again.
    DisarmAlarms,
}

impl Request {
    /// `put` or `delete`, for log lines and metrics (never the key or value itself).
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Put { .. } => "put",
            Request::Delete { .. } => "delete",
            Request::RaiseAlarm { .. } => "raise_alarm",
            Request::DisarmAlarms => "disarm_alarms",
        }
    }
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Put { key, value } => write!(f, "put {key} = {value}"),
            Request::Delete { key } => write!(f, "delete {key}"),
            Request::RaiseAlarm { member, reason } => {
                write!(f, "raise the NOSPACE alarm of member {member}: {reason}")
            }
            Request::DisarmAlarms => write!(f, "disarm every alarm"),
        }
    }
}

/// What a write did: the value the key held before it, or why it did nothing.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Response {
    /// The key's value before the write, if it had one.
    pub previous: Option<String>,
    /// Set when the entry could not be applied (the state machine's [`Machine::refused`]):
    /// it changed nothing, on any replica. Requests are checked before they are proposed, so
    /// this means a request that slipped past the checks (or a bug), never a lost write.
    pub refused: Option<String>,
    /// Set when a put found a NOSPACE alarm raised ([`Request::RaiseAlarm`]): it changed
    /// nothing, on any replica; the text names the alarms.
    #[serde(default)]
    pub alarm: Option<String>,
}

impl std::fmt::Display for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.refused, &self.alarm) {
            (Some(why), _) => write!(f, "refused: {why}"),
            (None, Some(alarm)) => write!(f, "refused by an alarm: {alarm}"),
            (None, None) => write!(f, "previous {:?}", self.previous),
        }
    }
}

openraft::declare_raft_types!(
    /// The store's Raft types; the rest are openraft's defaults (`u64` node ids, `BasicNode`
    /// addresses, tokio).
    pub KvConfig: D = Request, R = Response,
);

/// The bucket of the store's keys, in each node's state file.
pub const KV_BUCKET: &[u8] = b"kv";

/// The bucket of the raised alarms, in each node's state file: the member's id (8 bytes
/// big-endian) to the reason it gave. Written only by [`Request::RaiseAlarm`] and
/// [`Request::DisarmAlarms`], so every replica holds the same alarms at the same index.
pub const ALARM_BUCKET: &[u8] = b"alarms";

/// Applies [`Request`]s: puts and deletes in [`KV_BUCKET`].
#[derive(Debug, Default)]
pub struct KvMachine;

impl Machine<KvConfig> for KvMachine {
    fn apply(
        &self,
        tx: &mut rbolt::WriteTx<'_>,
        entry: &EntryOf<KvConfig>,
    ) -> rbolt_raft::Result<Response> {
        let EntryPayload::Normal(request) = &entry.payload else {
            return Ok(Response::default());
        };
        let (key, value) = match request {
            Request::Put { key, value } => (key, Some(value)),
            Request::Delete { key } => (key, None),
            Request::RaiseAlarm { member, reason } => {
                tx.create_bucket_if_not_exists(ALARM_BUCKET)?
                    .put(member.to_be_bytes(), reason.as_bytes())?;
                return Ok(Response::default());
            }
            Request::DisarmAlarms => {
                if tx.bucket_mut(ALARM_BUCKET)?.is_some() {
                    tx.delete_bucket(ALARM_BUCKET)?;
                }
                return Ok(Response::default());
            }
        };
        // Decided here, in log order, so every replica refuses the same puts: a put proposed
        // before the alarm was raised and committed after it is refused too.
        if value.is_some() {
            let alarms = alarms_in(tx.bucket(ALARM_BUCKET)?)?;
            if !alarms.is_empty() {
                return Ok(Response {
                    alarm: Some(describe_alarms(&alarms)),
                    ..Response::default()
                });
            }
        }
        let mut kv = tx.create_bucket_if_not_exists(KV_BUCKET)?;
        let previous = kv
            .get(key.as_bytes())?
            .map(|v| String::from_utf8_lossy(v).into_owned());
        match value {
            Some(value) => kv.put(key.as_bytes(), value.as_bytes())?,
            None => {
                kv.delete(key.as_bytes())?;
            }
        }
        Ok(Response {
            previous,
            ..Response::default()
        })
    }

    /// An entry rbolt refused (a key over its limit, say) is answered as refused on every
    /// replica alike, instead of stopping the state machine.
    fn refused(
        &self,
        _entry: &EntryOf<KvConfig>,
        error: rbolt_raft::Error,
    ) -> rbolt_raft::Result<Response> {
        Ok(Response {
            refused: Some(error.to_string()),
            ..Response::default()
        })
    }
}

/// The state machine of a node.
pub type KvStateMachine = rbolt_raft::StateMachine<KvConfig, KvMachine>;
/// The Raft handle of a node.
pub type KvRaft = openraft::Raft<KvConfig, KvStateMachine>;

/// The value of `key` in `state`'s current state file.
pub fn get(state: &KvStateMachine, key: &str) -> rbolt_raft::Result<Option<String>> {
    state.view(|tx| {
        let Some(kv) = tx.bucket(KV_BUCKET)? else {
            return Ok(None);
        };
        Ok(kv
            .get(key.as_bytes())?
            .map(|v| String::from_utf8_lossy(v).into_owned()))
    })
}

/// Every key and value in `state`'s current state file, from one read transaction.
pub fn dump(state: &KvStateMachine) -> rbolt_raft::Result<BTreeMap<String, String>> {
    state.view(|tx| {
        let mut all = BTreeMap::new();
        if let Some(kv) = tx.bucket(KV_BUCKET)? {
            for item in kv.iter() {
                let item = item?;
                all.insert(
                    String::from_utf8_lossy(item.key()).into_owned(),
                    String::from_utf8_lossy(item.value().unwrap_or_default()).into_owned(),
                );
            }
        }
        Ok(all)
    })
}

/// The alarms in `bucket` (the [`ALARM_BUCKET`] of some transaction), by member.
fn alarms_in(bucket: Option<rbolt::Bucket<'_>>) -> rbolt_raft::Result<BTreeMap<u64, String>> {
    let mut all = BTreeMap::new();
    if let Some(bucket) = bucket {
        for item in bucket.iter() {
            let item = item?;
            let member = <[u8; 8]>::try_from(item.key())
                .map(u64::from_be_bytes)
                .map_err(|_| {
                    rbolt_raft::Error::Invalid("an alarm whose key is not a member id".into())
                })?;
            let reason = String::from_utf8_lossy(item.value().unwrap_or_default()).into_owned();
            all.insert(member, reason);
        }
    }
    Ok(all)
}

/// The raised alarms in `state`'s current state file, by member.
pub fn alarms(state: &KvStateMachine) -> rbolt_raft::Result<BTreeMap<u64, String>> {
    state.view(|tx| alarms_in(tx.bucket(ALARM_BUCKET)?))
}

/// What a put refused by `alarms` is told.
pub fn describe_alarms(alarms: &BTreeMap<u64, String>) -> String {
    let each: Vec<String> = alarms
        .iter()
        .map(|(member, reason)| format!("member {member}: {reason}"))
        .collect();
    format!(
        "NOSPACE alarm raised ({}); puts are refused until space is freed (delete keys, \
         `vacuum`) and an operator disarms it (`alarm disarm`); reads and deletes go on",
        each.join("; ")
    )
}
