//! How values and log indexes are laid out in rbolt, and how rbolt calls leave the async
//! executor.

use crate::error::{Error, Result};
use openraft::RaftTypeConfig;
use openraft::type_config::TypeConfigExt;
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::path::Path;

/// The value of the `format` key in both metadata buckets. A file with another value was
/// written by an incompatible version of this crate (or by something else) and is refused.
pub(crate) const FORMAT: &[u8] = b"rbolt-raft 1";
/// The key of [`FORMAT`] in both metadata buckets.
pub(crate) const KEY_FORMAT: &[u8] = b"format";

/// Encodes `value` as MessagePack with field names, so that serde attributes that need a
/// self-describing format (`skip_serializing_if`, `flatten`, `untagged`) work in user types.
pub(crate) fn encode<T: Serialize + ?Sized>(what: &'static str, value: &T) -> Result<Vec<u8>> {
    rmp_serde::to_vec_named(value).map_err(|source| Error::Encode { what, source })
}

/// Decodes what [`encode`] wrote.
pub(crate) fn decode<T: DeserializeOwned>(what: &'static str, bytes: &[u8]) -> Result<T> {
    rmp_serde::from_slice(bytes).map_err(|source| Error::Decode { what, source })
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

/// Checks the `format` key of a metadata bucket, writing it when the bucket is new.
pub(crate) fn check_format(bucket: &mut rbolt::BucketMut<'_>, file: &Path) -> Result<()> {
    match bucket.get(KEY_FORMAT)? {
        None => bucket.put(KEY_FORMAT, FORMAT)?,
        Some(found) if found == FORMAT => {}
        Some(found) => {
            return Err(Error::invalid(format!(
                "{}: format {:?}, expected {:?}",
                file.display(),
                String::from_utf8_lossy(found),
                String::from_utf8_lossy(FORMAT)
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
