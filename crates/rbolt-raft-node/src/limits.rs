//! The limits a node checks every request against before anything is proposed, and the
//! limits of its peer RPCs, computed from them so that nothing a client may write can outgrow
//! the transport that replicates it.

use crate::kv::Request;

/// The default of `--max-request-bytes`: the largest value a client may write, and the
/// largest client request body (etcd's default request limit, 1.5 MiB).
pub const MAX_REQUEST_BYTES_DEFAULT: usize = 3 << 19;
/// `--max-request-bytes` may not be set above this (a value is one rbolt value and one log
/// entry, replicated in one request).
pub const MAX_REQUEST_BYTES_CAP: usize = 64 << 20;
/// The longest key: rbolt's (and bbolt's) limit.
pub const KEY_BYTES_MAX: usize = rbolt::KEY_SIZE_MAX;
/// Stored bytes of log entries a replication batch stops after (it holds at least one entry).
pub const REPLICATION_BATCH_BYTES: usize = 4 << 20;
/// What framing and encoding add to a batch of entries at most, beyond their stored size:
/// the binary encoding of a batch is smaller than the stored one (no field names), so this is
/// only headroom for the request's own fields.
pub const FRAME_SLACK_BYTES: usize = 1 << 20;
/// The largest vote request or answer, and the largest answer to an append (they hold a few
/// ids and a vote, or an error message).
pub const SMALL_RPC_BYTES_MAX: usize = 64 << 10;

/// The default of `--snapshot-chunk-bytes`: the bytes of a snapshot file one request carries.
pub const SNAPSHOT_CHUNK_BYTES_DEFAULT: usize = 4 << 20;
/// The smallest `--snapshot-chunk-bytes`.
pub const SNAPSHOT_CHUNK_BYTES_MIN: usize = 4 << 10;
/// The largest `--snapshot-chunk-bytes`, and the largest chunk a node receives.
pub const SNAPSHOT_CHUNK_BYTES_MAX: usize = 64 << 20;

/// A node's limits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The largest value, and the largest body of a client request.
    pub max_request_bytes: usize,
    /// The bytes of a snapshot file one request to a follower carries.
    pub snapshot_chunk_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_request_bytes: MAX_REQUEST_BYTES_DEFAULT,
            snapshot_chunk_bytes: SNAPSHOT_CHUNK_BYTES_DEFAULT,
        }
    }
}

/// Why a request is refused before it is proposed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The key is empty or longer than [`KEY_BYTES_MAX`] (HTTP 400).
    Key(String),
    /// The value or the body is longer than the request limit (HTTP 413).
    TooLarge(String),
}

/// The longest request id a client may send, in bytes.
pub const REQUEST_ID_BYTES_MAX: usize = 64;

/// Checks a client's request id: 1 to [`REQUEST_ID_BYTES_MAX`] printable ASCII characters.
pub fn check_request_id(id: &str) -> Result<(), Refusal> {
    if id.is_empty() || id.len() > REQUEST_ID_BYTES_MAX || !id.bytes().all(|b| b.is_ascii_graphic())
    {
        return Err(Refusal::Key(format!(
            "a request id is 1 to {REQUEST_ID_BYTES_MAX} printable ASCII characters without \
             spaces, not {} bytes",
            id.len()
        )));
    }
    Ok(())
}

impl Limits {
    /// Limits with `max_request_bytes`, checked against [`MAX_REQUEST_BYTES_CAP`].
    pub fn new(max_request_bytes: usize) -> anyhow::Result<Limits> {
        if max_request_bytes == 0 || max_request_bytes > MAX_REQUEST_BYTES_CAP {
            anyhow::bail!(
                "--max-request-bytes {max_request_bytes}: from 1 to {MAX_REQUEST_BYTES_CAP}"
            );
        }
        Ok(Limits {
            max_request_bytes,
            ..Limits::default()
        })
    }

    /// These limits with snapshot chunks of `bytes`, checked against
    /// [`SNAPSHOT_CHUNK_BYTES_MIN`] and [`SNAPSHOT_CHUNK_BYTES_MAX`].
    pub fn with_snapshot_chunk_bytes(self, bytes: usize) -> anyhow::Result<Limits> {
        if !(SNAPSHOT_CHUNK_BYTES_MIN..=SNAPSHOT_CHUNK_BYTES_MAX).contains(&bytes) {
            anyhow::bail!(
                "--snapshot-chunk-bytes {bytes}: from {SNAPSHOT_CHUNK_BYTES_MIN} to \
                 {SNAPSHOT_CHUNK_BYTES_MAX}"
            );
        }
        Ok(Limits {
            snapshot_chunk_bytes: bytes,
            ..self
        })
    }

    /// The largest log entry a client request can make: a key, a value, and the entry's own
    /// fields (log id, variant) with room to spare.
    pub fn entry_bytes_max(&self) -> usize {
        KEY_BYTES_MAX + self.max_request_bytes + 4096
    }

    /// The largest append-entries request a peer may send: a batch stops after
    /// [`REPLICATION_BATCH_BYTES`] stored bytes, so it is at most that plus one entry; two
    /// entries' worth and [`FRAME_SLACK_BYTES`] cover the framing with a wide margin.
    /// Nodes of one cluster must share `--max-request-bytes`: a follower with a lower one
    /// refuses a leader's larger entries (the leader logs that, with both limits).
    pub fn append_bytes_max(&self) -> usize {
        REPLICATION_BATCH_BYTES + 2 * self.entry_bytes_max() + FRAME_SLACK_BYTES
    }

    /// Checks a client's write before it is proposed.
    pub fn check(&self, request: &Request) -> Result<(), Refusal> {
        let (key, value) = match request {
            Request::Put { key, value } => (key, Some(value)),
            Request::Delete { key } => (key, None),
            // Proposed by nodes and operators, never from a client's key or value.
            Request::RaiseAlarm { .. } | Request::DisarmAlarms => return Ok(()),
            Request::Once { id, request } => {
                check_request_id(id)?;
                return match request.as_ref() {
                    Request::Put { .. } | Request::Delete { .. } => self.check(request),
                    other => Err(Refusal::Key(format!(
                        "a request id goes with a put or a delete, not {}",
                        other.kind()
                    ))),
                };
            }
        };
        if key.is_empty() {
            return Err(Refusal::Key("empty key".to_owned()));
        }
        if key.len() > KEY_BYTES_MAX {
            return Err(Refusal::Key(format!(
                "key of {} bytes: keys are at most {KEY_BYTES_MAX} bytes",
                key.len()
            )));
        }
        if let Some(value) = value
            && value.len() > self.max_request_bytes
        {
            return Err(self.too_large("value", value.len()));
        }
        Ok(())
    }

    /// The refusal of a body or value of `len` bytes.
    pub fn too_large(&self, what: &str, len: usize) -> Refusal {
        Refusal::TooLarge(format!(
            "{what} of {len} bytes: at most {} bytes (--max-request-bytes)",
            self.max_request_bytes
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn put(key_bytes: usize, value_bytes: usize) -> Request {
        Request::Put {
            key: "k".repeat(key_bytes),
            value: "v".repeat(value_bytes),
        }
    }

    #[test]
    fn requests_are_checked_at_the_limits() {
        let limits = Limits::new(1000).expect("limits");
        let check = |request: Request, ok: bool| {
            assert_eq!(limits.check(&request).is_ok(), ok, "{}", request.kind());
        };
        check(put(1, 0), true);
        check(put(KEY_BYTES_MAX, 1000), true);
        check(put(KEY_BYTES_MAX + 1, 1), false);
        check(put(0, 1), false);
        check(put(1, 1001), false);
        check(
            Request::Delete {
                key: "k".repeat(KEY_BYTES_MAX + 1),
            },
            false,
        );
        let Err(Refusal::TooLarge(message)) = limits.check(&put(1, 1001)) else {
            panic!("a value over the limit is TooLarge");
        };
        assert!(message.contains("at most 1000 bytes"), "{message}");
        assert!(Limits::new(0).is_err() && Limits::new(MAX_REQUEST_BYTES_CAP + 1).is_err());
    }

    #[test]
    fn the_append_limit_holds_a_batch_and_its_largest_entry() {
        for max in [1, MAX_REQUEST_BYTES_DEFAULT, MAX_REQUEST_BYTES_CAP] {
            let limits = Limits::new(max).expect("limits");
            assert!(limits.append_bytes_max() > REPLICATION_BATCH_BYTES + limits.entry_bytes_max());
        }
    }
}
