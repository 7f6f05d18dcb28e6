//! How values and log indexes are laid out in rbolt, and how rbolt calls leave the async
//! executor.

use crate::error::{Error, Result};
use openraft::RaftTypeConfig;
use openraft::type_config::TypeConfigExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

/// The value of the `format` key in the state machine's metadata bucket. A file with another
/// value was written by an incompatible version of this crate (or by something else) and is
/// refused.
pub(crate) const FORMAT: &[u8] = b"rbolt-raft 1";
/// The value of the `format` key in the log's metadata bucket: format 2 entries carry a
/// checksum ([`encode_entry`]). A format 1 log (the same, without checksums) is rewritten to
/// format 2 in one commit when it is opened.
pub(crate) const LOG_FORMAT: &[u8] = b"rbolt-raft 2";
/// The log format before entries carried checksums.
pub(crate) const LOG_FORMAT_1: &[u8] = b"rbolt-raft 1";
/// The key of [`FORMAT`] in both metadata buckets.
pub(crate) const KEY_FORMAT: &[u8] = b"format";
/// Bytes of the checksum in front of every stored log entry.
pub(crate) const ENTRY_CHECKSUM_BYTES: usize = 4;

/// Encodes `value` as MessagePack with field names, so that serde attributes that need a
/// self-describing format (`skip_serializing_if`, `flatten`, `untagged`) work in user types.
pub(crate) fn encode<T: Serialize + ?Sized>(what: &'static str, value: &T) -> Result<Vec<u8>> {
    rmp_serde::to_vec_named(value).map_err(|source| Error::Encode { what, source })
}

/// Decodes what [`encode`] wrote.
pub(crate) fn decode<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T> {
    rmp_serde::from_slice(bytes).map_err(|source| Error::Decode { what, source })
}

/// The CRC-32 of a stored entry: over its index (so an entry found under another key fails
/// too) and its encoding.
fn entry_checksum(index: u64, encoded: &[u8]) -> u32 {
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&index.to_be_bytes());
    hasher.update(encoded);
    hasher.finalize()
}

/// The stored form of log entry `index`: its checksum (4 bytes, little-endian), then
/// `encoded`, what [`encode`] made of the entry.
pub(crate) fn seal_entry(index: u64, encoded: &[u8]) -> Vec<u8> {
    let mut sealed = Vec::with_capacity(ENTRY_CHECKSUM_BYTES + encoded.len());
    sealed.extend_from_slice(&entry_checksum(index, encoded).to_le_bytes());
    sealed.extend_from_slice(encoded);
    sealed
}

/// Encodes log entry `entry` of index `index` in its stored form (see [`seal_entry`]).
pub(crate) fn encode_entry<T: Serialize>(index: u64, entry: &T) -> Result<Vec<u8>> {
    Ok(seal_entry(index, &encode("log entry", entry)?))
}

/// The encoding inside stored entry `index`, once its checksum is checked: a damaged entry is
/// [`Error::Damaged`], naming the index, never decoded.
pub(crate) fn open_entry<'a>(file: &Path, index: u64, stored: &'a [u8]) -> Result<&'a [u8]> {
    let damaged = |reason: String| Error::Damaged {
        file: file.to_path_buf(),
        index,
        reason,
    };
    if stored.len() < ENTRY_CHECKSUM_BYTES {
        return Err(damaged(format!(
            "{} bytes, shorter than its {ENTRY_CHECKSUM_BYTES}-byte checksum",
            stored.len()
        )));
    }
    let (sum, encoded) = stored.split_at(ENTRY_CHECKSUM_BYTES);
    let stored_sum = u32::from_le_bytes(sum.try_into().unwrap_or_default());
    let computed = entry_checksum(index, encoded);
    if stored_sum != computed {
        return Err(damaged(format!(
            "checksum {computed:#010x} of its {} bytes, {stored_sum:#010x} stored",
            encoded.len()
        )));
    }
    Ok(encoded)
}

/// Decodes stored entry `index` after checking its checksum.
pub(crate) fn decode_entry<T: DeserializeOwned>(
    file: &Path,
    index: u64,
    stored: &[u8],
) -> Result<T> {
    decode("log entry", open_entry(file, index, stored)?)
}

/// The key of log index `index`: 8 bytes big-endian, so key order is index order.
pub(crate) fn index_key(index: u64) -> [u8; 8] {
    index.to_be_bytes()
}

/// The index a log key names.
pub(crate) fn key_index(key: &[u8]) -> Result<u64> {
    let bytes: [u8; 8] = key.try_into().map_err(|_| {
        Error::invalid(format!(
            "log key of {} bytes; log keys are 8-byte big-endian indexes",
            key.len()
        ))
    })?;
    Ok(u64::from_be_bytes(bytes))
}

/// Checks the `format` key of a metadata bucket against `format`, writing it when the bucket
/// is new.
pub(crate) fn check_format(
    bucket: &mut rbolt::BucketMut<'_>,
    file: &Path,
    format: &[u8],
) -> Result<()> {
    match bucket.get(KEY_FORMAT)? {
        None => bucket.put(KEY_FORMAT, format)?,
        Some(found) if found == format => {}
        Some(found) => {
            return Err(Error::invalid(format!(
                "{}: format {:?}, expected {:?}",
                file.display(),
                String::from_utf8_lossy(found),
                String::from_utf8_lossy(format)
            )));
        }
    }
    Ok(())
}

/// Runs `f` on the runtime's blocking pool.
///
/// Every rbolt call that may wait goes through here: a commit waits for two `fdatasync`s and a
/// read of the memory map may fault on disk, and either would stall every task sharing the
/// executor thread (heartbeats and elections among them). The hop costs microseconds, a small
/// fraction of a durable commit.
pub(crate) async fn blocking<C, T>(f: impl FnOnce() -> Result<T> + Send + 'static) -> Result<T>
where
    C: RaftTypeConfig,
    T: Send + 'static,
{
    C::spawn_blocking(f).await.map_err(Error::Join)?
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_entry_opens_and_any_damage_names_the_entry() {
        let file = Path::new("log.db");
        let sealed = seal_entry(7, b"the entry");
        assert_eq!(open_entry(file, 7, &sealed).expect("opens"), b"the entry");
        let check = |stored: &[u8], index: u64| match open_entry(file, index, stored) {
            Err(Error::Damaged { index: named, .. }) => assert_eq!(named, index),
            other => panic!("{stored:?} at {index}: {other:?}"),
        };
        // Every single bit flip, a short value, and the right bytes under another index.
        for bit in 0..sealed.len() * 8 {
            let mut flipped = sealed.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            check(&flipped, 7);
        }
        check(&sealed[..3], 7);
        check(&sealed, 8);
        let message = open_entry(file, 8, &sealed).expect_err("moved").to_string();
        assert!(
            message.contains("log.db") && message.contains("entry 8"),
            "{message}"
        );
    }
}
