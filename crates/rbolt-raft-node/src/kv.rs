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
}

impl Request {
    /// `put` or `delete`, for log lines and metrics (never the key or value itself).
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Put { .. } => "put",
            Request::Delete { .. } => "delete",
        }
    }
}

impl std::fmt::Display for Request {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Request::Put { key, value } => write!(f, "put {key} = {value}"),
            Request::Delete { key } => write!(f, "delete {key}"),
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
}

impl std::fmt::Display for Response {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.refused {
            Some(why) => write!(f, "refused: {why}"),
            None => write!(f, "previous {:?}", self.previous),
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
        let mut kv = tx.create_bucket_if_not_exists(KV_BUCKET)?;
        let (key, value) = match request {
            Request::Put { key, value } => (key, Some(value)),
            Request::Delete { key } => (key, None),
        };
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
            refused: None,
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
            previous: None,
            refused: Some(error.to_string()),
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
