//! The binary frames of the Raft RPCs between nodes: openraft's messages in postcard (serde,
//! compact, no escaping: a value's bytes travel as they are), inside a frame that names the
//! cluster and the sender and ends in a checksum.
//!
//! ```text
//! offset  size  field
//! 0       4     magic "RBRF"
//! 4       1     version (1)
//! 5       1     n = length of the cluster id
//! 6       n     cluster id (ASCII)
//! 6+n     8     sender node id, little-endian
//! 14+n    4     m = length of the payload, little-endian
//! 18+n    m     payload: the message in postcard
//! 18+n+m  4     CRC-32 of every byte before it, little-endian
//! ```
//!
//! A frame is decoded only whole: a truncated, padded or damaged one is a [`WireError`], and
//! the payload is decoded only once the checksum matches.

use serde::Serialize;
use serde::de::DeserializeOwned;

/// The first bytes of every frame.
pub const MAGIC: [u8; 4] = *b"RBRF";
/// The frame version this node writes and reads.
pub const VERSION: u8 = 1;
/// Bytes of a frame besides its cluster id and payload.
pub const FRAME_OVERHEAD_BYTES: usize = 4 + 1 + 1 + 8 + 4 + 4;

/// What a frame says besides its payload.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Envelope {
    /// The cluster the sender belongs to.
    pub cluster: String,
    /// The sender's node id.
    pub from: u64,
}

/// Why bytes are not a frame.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum WireError {
    /// The bytes do not start with [`MAGIC`]: not a frame of this protocol (a JSON request
    /// of an older node, say).
    #[error("not an rbolt-raft frame (no RBRF magic)")]
    Magic,
    /// A frame of another version.
    #[error("frame version {0}, this node speaks version {VERSION}")]
    Version(u8),
    /// Fewer or more bytes than the frame's lengths say.
    #[error("frame of {got} bytes, its lengths say {expected}")]
    Length {
        /// What the header's lengths add up to (or the least a header needs).
        expected: usize,
        /// What arrived.
        got: usize,
    },
    /// The checksum does not match: the frame was damaged.
    #[error("frame checksum {computed:#010x}, {stored:#010x} sent")]
    Checksum {
        /// Of the bytes that arrived.
        computed: u32,
        /// In the frame.
        stored: u32,
    },
    /// The cluster id is not ASCII.
    #[error("the frame's cluster id is not ASCII")]
    ClusterId,
    /// The payload is not the message expected.
    #[error("decoding the frame's payload: {0}")]
    Payload(String),
    /// A message could not be encoded, or is too large for a frame.
    #[error("encoding a frame: {0}")]
    Encode(String),
}

/// Encodes `message` in a frame from node `from` of cluster `cluster`.
pub fn encode<T: Serialize>(cluster: &str, from: u64, message: &T) -> Result<Vec<u8>, WireError> {
    let cluster_len = u8::try_from(cluster.len())
        .map_err(|_| WireError::Encode(format!("cluster id of {} bytes", cluster.len())))?;
    let payload = postcard::to_allocvec(message).map_err(|e| WireError::Encode(e.to_string()))?;
    let payload_len = u32::try_from(payload.len())
        .map_err(|_| WireError::Encode(format!("payload of {} bytes", payload.len())))?;
    let mut frame = Vec::with_capacity(FRAME_OVERHEAD_BYTES + cluster.len() + payload.len());
    frame.extend_from_slice(&MAGIC);
    frame.push(VERSION);
    frame.push(cluster_len);
    frame.extend_from_slice(cluster.as_bytes());
    frame.extend_from_slice(&from.to_le_bytes());
    frame.extend_from_slice(&payload_len.to_le_bytes());
    frame.extend_from_slice(&payload);
    let sum = crc32fast::hash(&frame);
    frame.extend_from_slice(&sum.to_le_bytes());
    debug_assert_eq!(frame.len(), frame.capacity(), "the frame was sized exactly");
    Ok(frame)
}

/// Reads `n` bytes at `*at`, or the length error of a frame that ends too soon.
fn take<'a>(bytes: &'a [u8], at: &mut usize, n: usize) -> Result<&'a [u8], WireError> {
    let end = at.checked_add(n).filter(|&end| end <= bytes.len());
    let end = end.ok_or(WireError::Length {
        expected: at.saturating_add(n),
        got: bytes.len(),
    })?;
    let taken = &bytes[*at..end];
    *at = end;
    Ok(taken)
}

/// Splits a frame into its envelope and payload, checking its magic, version, lengths and
/// checksum; decodes nothing.
pub fn open(bytes: &[u8]) -> Result<(Envelope, &[u8]), WireError> {
    let mut at = 0;
    if take(bytes, &mut at, 4).map_err(|_| WireError::Magic)? != MAGIC {
        return Err(WireError::Magic);
    }
    let version = take(bytes, &mut at, 1)?[0];
    if version != VERSION {
        return Err(WireError::Version(version));
    }
    let cluster_len = usize::from(take(bytes, &mut at, 1)?[0]);
    let cluster = take(bytes, &mut at, cluster_len)?;
    let from = u64::from_le_bytes(take(bytes, &mut at, 8)?.try_into().unwrap_or_default());
    let payload_len = u32::from_le_bytes(take(bytes, &mut at, 4)?.try_into().unwrap_or_default());
    let payload = take(bytes, &mut at, payload_len as usize)?;
    let summed = at;
    let stored = u32::from_le_bytes(take(bytes, &mut at, 4)?.try_into().unwrap_or_default());
    if at != bytes.len() {
        return Err(WireError::Length {
            expected: at,
            got: bytes.len(),
        });
    }
    let computed = crc32fast::hash(&bytes[..summed]);
    if computed != stored {
        return Err(WireError::Checksum { computed, stored });
    }
    let cluster = std::str::from_utf8(cluster)
        .ok()
        .filter(|c| c.is_ascii())
        .ok_or(WireError::ClusterId)?;
    Ok((
        Envelope {
            cluster: cluster.to_owned(),
            from,
        },
        payload,
    ))
}

/// Decodes a whole frame: its envelope and its message.
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<(Envelope, T), WireError> {
    let (envelope, payload) = open(bytes)?;
    Ok((envelope, decode_payload(payload)?))
}

/// Decodes the payload [`open`] returned; every byte of it must belong to the message.
pub fn decode_payload<T: DeserializeOwned>(payload: &[u8]) -> Result<T, WireError> {
    let (message, rest) =
        postcard::take_from_bytes(payload).map_err(|e| WireError::Payload(e.to_string()))?;
    if !rest.is_empty() {
        return Err(WireError::Payload(format!(
            "{} bytes after the message",
            rest.len()
        )));
    }
    Ok(message)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_round_trips_and_every_damage_is_refused() {
        let message = (
            "a value \u{1}\u{2} with control characters".to_owned(),
            7u64,
        );
        let frame = encode("cluster-a", 3, &message).expect("encode");
        let (envelope, decoded): (Envelope, (String, u64)) = decode(&frame).expect("decode");
        assert_eq!(envelope.cluster, "cluster-a");
        assert_eq!(envelope.from, 3);
        assert_eq!(decoded, message);
        // Every truncation, every single byte changed, and a byte too many.
        for len in 0..frame.len() {
            assert!(
                decode::<(String, u64)>(&frame[..len]).is_err(),
                "{len} bytes"
            );
        }
        for at in 0..frame.len() {
            let mut damaged = frame.clone();
            damaged[at] ^= 0x41;
            assert!(decode::<(String, u64)>(&damaged).is_err(), "byte {at}");
        }
        let mut padded = frame.clone();
        padded.push(0);
        assert!(matches!(
            decode::<(String, u64)>(&padded),
            Err(WireError::Length { .. })
        ));
        assert_eq!(
            decode::<(String, u64)>(b"{\"vote\":1}"),
            Err(WireError::Magic)
        );
        // A sound frame of another message is a payload error, not a panic.
        let other = encode("cluster-a", 3, &vec![1u8; 3]).expect("encode");
        assert!(matches!(
            decode::<(String, u64, String)>(&other),
            Err(WireError::Payload(_))
        ));
    }
}
