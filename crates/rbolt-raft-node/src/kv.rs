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
    /// A client's put or delete under the request id it sent (`x-rbolt-request-id`): applied
    /// at most once per id among the last [`REQUEST_IDS_KEPT`] log entries, so a client may
    /// send again a write whose outcome it does not know. A second entry with the same id
    /// changes nothing and answers [`Response::duplicate_of`].
    Once {
        /// The client's id of the request.
        id: String,
        /// The put or delete.
        request: Box<Request>,
    },
}

impl Request {
    /// `put` or `delete`, for log lines and metrics (never the key or value itself).
    pub fn kind(&self) -> &'static str {
        match self {
            Request::Put { .. } => "put",
            Request::Delete { .. } => "delete",
            Request::RaiseAlarm { .. } => "raise_alarm",
            Request::DisarmAlarms => "disarm_alarms",
            Request::Once { request, .. } => request.kind(),
        }
    }

    /// Whether it is a put (under a request id or not).
    pub fn is_put(&self) -> bool {
        match self {
            Request::Put { .. } => true,
            Request::Once { request, .. } => request.is_put(),
            _ => false,
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
            Request::Once { id, request } => write!(f, "{request} (request {id})"),
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
    /// Set when a [`Request::Once`] carried an id already applied: the log index where it
    /// took effect. This entry changed nothing, and `previous` is not known.
    #[serde(default)]
    pub duplicate_of: Option<u64>,
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

/// The request ids of [`Request::Once`] entries applied among the last [`REQUEST_IDS_KEPT`]
/// log entries: the id to the index (8 bytes big-endian) where it took effect.
pub const REQUEST_ID_BUCKET: &[u8] = b"request_ids";
/// The same ids by index, oldest first, for forgetting them.
pub const REQUEST_ORDER_BUCKET: &[u8] = b"request_order";
/// How far back, in log entries, a request id is remembered: a client that sends a write
/// again does so within its timeout, seconds, which is far fewer entries at any rate a node
/// takes. An id older than this applies again.
pub const REQUEST_IDS_KEPT: u64 = 100_000;
/// Ids forgotten per [`Request::Once`] applied, at most: more than the one it records, so
/// the set stays within [`REQUEST_IDS_KEPT`] entries, and a bounded cost per entry.
const REQUEST_IDS_FORGOTTEN_PER_ENTRY: usize = 2;

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
        apply_request(tx, request, entry.log_id.index)
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

/// Applies `request`, of the entry at log `index`.
fn apply_request(
    tx: &mut rbolt::WriteTx<'_>,
    request: &Request,
    index: u64,
) -> rbolt_raft::Result<Response> {
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
        Request::Once { id, request } => return apply_once(tx, id, request, index),
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

/// Applies `request` under request id `id` unless that id took effect already; forgets the
/// oldest ids past [`REQUEST_IDS_KEPT`]. A put an alarm refused is not recorded: sent again
/// after the disarm, it applies.
fn apply_once(
    tx: &mut rbolt::WriteTx<'_>,
    id: &str,
    request: &Request,
    index: u64,
) -> rbolt_raft::Result<Response> {
    let seen = match tx.bucket(REQUEST_ID_BUCKET)? {
        Some(ids) => ids.get(id.as_bytes())?.map(index_of).transpose()?,
        None => None,
    };
    if let Some(first) = seen {
        return Ok(Response {
            duplicate_of: Some(first),
            ..Response::default()
        });
    }
    forget_request_ids(tx, index)?;
    let response = apply_request(tx, request, index)?;
    if response.alarm.is_none() {
        tx.create_bucket_if_not_exists(REQUEST_ID_BUCKET)?
            .put(id.as_bytes(), index.to_be_bytes())?;
        tx.create_bucket_if_not_exists(REQUEST_ORDER_BUCKET)?
            .put(index.to_be_bytes(), id.as_bytes())?;
    }
    Ok(response)
}

/// A log index stored as 8 bytes big-endian.
fn index_of(bytes: &[u8]) -> rbolt_raft::Result<u64> {
    <[u8; 8]>::try_from(bytes)
        .map(u64::from_be_bytes)
        .map_err(|_| rbolt_raft::Error::Invalid("a stored index is not 8 bytes".into()))
}

/// Forgets at most [`REQUEST_IDS_FORGOTTEN_PER_ENTRY`] of the oldest request ids recorded
/// [`REQUEST_IDS_KEPT`] or more entries before `index`.
fn forget_request_ids(tx: &mut rbolt::WriteTx<'_>, index: u64) -> rbolt_raft::Result<()> {
    let Some(order) = tx.bucket(REQUEST_ORDER_BUCKET)? else {
        return Ok(());
    };
    let mut old = Vec::new();
    for item in order.iter().take(REQUEST_IDS_FORGOTTEN_PER_ENTRY) {
        let item = item?;
        let at = index_of(item.key())?;
        if at.saturating_add(REQUEST_IDS_KEPT) > index {
            break;
        }
        old.push((at, item.value().unwrap_or_default().to_vec()));
    }
    if old.is_empty() {
        return Ok(());
    }
    if let Some(mut order) = tx.bucket_mut(REQUEST_ORDER_BUCKET)? {
        for (at, _) in &old {
            order.delete(at.to_be_bytes())?;
        }
    }
    if let Some(mut ids) = tx.bucket_mut(REQUEST_ID_BUCKET)? {
        for (_, id) in &old {
            ids.delete(id)?;
        }
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;
    use openraft::entry::RaftEntry;

    /// Applies `request` as the entry at `index` in its own commit.
    fn apply_at(db: &rbolt::Db, index: u64, request: Request) -> Response {
        let mut tx = db.begin_write().expect("begin");
        let log_id = openraft::testing::log_id::<KvConfig>(1, 1, index);
        let entry = EntryOf::<KvConfig>::new_normal(log_id, request);
        let response = KvMachine.apply(&mut tx, &entry).expect("apply");
        tx.commit().expect("commit");
        response
    }

    fn value(db: &rbolt::Db) -> Option<String> {
        db.view(|tx| {
            Ok::<_, rbolt::Error>(
                tx.bucket(KV_BUCKET)?
                    .and_then(|kv| kv.get(b"k").ok().flatten().map(<[u8]>::to_vec)),
            )
        })
        .expect("view")
        .map(|v| String::from_utf8(v).expect("utf-8"))
    }

    fn put(value: &str) -> Request {
        Request::Put {
            key: "k".to_owned(),
            value: value.to_owned(),
        }
    }

    fn once(id: &str, request: Request) -> Request {
        Request::Once {
            id: id.to_owned(),
            request: Box::new(request),
        }
    }

    #[test]
    fn a_request_id_takes_effect_once_within_the_window_and_an_alarm_does_not_spend_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let db = rbolt::Db::open(dir.path().join("state.db")).expect("open");
        // A put under id x, another client's put, then x sent again: it changes nothing.
        assert_eq!(apply_at(&db, 1, once("x", put("a"))).duplicate_of, None);
        apply_at(&db, 2, put("b"));
        let again = apply_at(&db, 3, once("x", put("a")));
        assert_eq!(again.duplicate_of, Some(1));
        assert_eq!(
            value(&db).as_deref(),
            Some("b"),
            "the resend took effect again"
        );
        let delete = || {
            once(
                "d",
                Request::Delete {
                    key: "k".to_owned(),
                },
            )
        };
        assert_eq!(apply_at(&db, 4, delete()).previous.as_deref(), Some("b"));
        apply_at(&db, 5, put("c"));
        assert_eq!(apply_at(&db, 6, delete()).duplicate_of, Some(4));
        assert_eq!(value(&db).as_deref(), Some("c"));
        // Past the window, ids are forgotten as new ones come (two per entry): x applies again.
        let late = 1 + REQUEST_IDS_KEPT;
        apply_at(&db, late, once("y", put("y")));
        assert_eq!(
            apply_at(&db, late + 1, once("x", put("a"))).duplicate_of,
            None
        );
        assert_eq!(value(&db).as_deref(), Some("a"));
        // A put an alarm refused did not take effect: after the disarm its resend does.
        let raise = Request::RaiseAlarm {
            member: 2,
            reason: "full".to_owned(),
        };
        apply_at(&db, late + 2, raise);
        assert!(apply_at(&db, late + 3, once("z", put("z"))).alarm.is_some());
        apply_at(&db, late + 4, Request::DisarmAlarms);
        assert_eq!(
            apply_at(&db, late + 5, once("z", put("z"))).duplicate_of,
            None
        );
        assert_eq!(value(&db).as_deref(), Some("z"));
    }
}
