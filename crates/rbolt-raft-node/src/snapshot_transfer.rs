//! Sending a snapshot to a follower in chunks that resume, checked end to end.
//!
//! A snapshot is its rbolt file, as large as the store. Sent in one request, it had to be
//! received, checked and installed within one timeout, and a cut connection started it over:
//! a lagging follower of a large store might never catch up. So the leader sends the file in
//! chunks of `--snapshot-chunk-bytes` ([`crate::api::PATH_SNAPSHOT_CHUNK`]), each request with its own
//! timeout; the follower appends each chunk at the offset it holds, keeps what it received
//! across attempts (a file named by the snapshot's length and digest), and answers how much it
//! holds, so an attempt cut anywhere (a chunk half written included) goes on from there, and so
//! does one whose receiver was killed and restarted: the partial file is kept across a restart
//! ([`keep_partials`] checks its name and length at start). Once
//! the follower holds every byte, the leader asks it to install ([`crate::api::PATH_SNAPSHOT`]): it checks
//! the file's length and XXH3-128 digest against what the leader computed from its own copy
//! (nothing in an rbolt file checks a value's bytes), then the file as an rbolt state file,
//! then hands it to openraft. A file that fails the digest is deleted, so the next attempt
//! starts over.

#![expect(
    clippy::result_large_err,
    reason = "the error of a handler step is the HTTP answer itself, returned at once"
)]

use crate::api::{
    ChunkReply, HEADER_CLUSTER, HEADER_FROM, HEADER_SNAPSHOT, HEADER_SNAPSHOT_CHUNK, SnapshotChunk,
    SnapshotHeader,
};
use crate::app::{Answer, App, error, framed, json, limited_body};
use crate::kv::KvConfig;
use crate::limits::SNAPSHOT_CHUNK_BYTES_MAX;
use hyper::StatusCode;
use hyper::body::Incoming;
use openraft::error::RaftError;
use openraft::type_config::alias::SnapshotOf;
use std::fs::File;
use std::io::{Read, Seek, Write};
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// The digest of a snapshot file: XXH3-128 of its bytes, as 32 hex digits.
pub fn digest_of(mut file: impl Read) -> std::io::Result<(u64, String)> {
    let mut hasher = twox_hash::XxHash3_128::new();
    let mut buf = vec![0u8; 1 << 20];
    let mut length = 0u64;
    loop {
        let n = file.read(&mut buf)?;
        if n == 0 {
            break;
        }
        hasher.write(&buf[..n]);
        length += n as u64;
    }
    Ok((length, format!("{:032x}", hasher.finish_128())))
}

/// Whether `digest` is one [`digest_of`] makes (it names a file).
fn well_formed(digest: &str) -> bool {
    digest.len() == 32
        && digest
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Bytes `file` holds at `offset` onwards, at most `max`.
pub fn read_chunk(file: &File, offset: u64, max: usize) -> std::io::Result<Vec<u8>> {
    let mut buf = vec![0u8; max];
    let mut filled = 0;
    while filled < max {
        let n = file.read_at(&mut buf[filled..], offset + filled as u64)?;
        if n == 0 {
            break;
        }
        filled += n;
    }
    buf.truncate(filled);
    Ok(buf)
}

/// The suffix of a partial snapshot's name. Not [`rbolt_raft::TMP_SUFFIX`]: the state machine
/// deletes those when it opens, and a partial copy is worth keeping across a restart.
pub const PARTIAL_SUFFIX: &str = ".partial";

/// The prefix of a partial snapshot's name.
const PARTIAL_PREFIX: &str = "received-";

/// Where this node keeps the bytes of the snapshot of `length` and `digest` it receives:
/// `received-{digest}-{length}.partial`, kept across a restart (see [`keep_partials`]).
fn partial_path(app: &App, length: u64, digest: &str) -> PathBuf {
    app.ctx
        .dir
        .join(format!("{PARTIAL_PREFIX}{digest}-{length}{PARTIAL_SUFFIX}"))
}

/// Whether `name` is a partial snapshot's, of either form (`.tmp`: before partials were kept).
fn is_partial_name(name: &str) -> bool {
    name.starts_with(PARTIAL_PREFIX)
        && (name.ends_with(PARTIAL_SUFFIX) || name.ends_with(rbolt_raft::TMP_SUFFIX))
}

/// The digest and length a partial snapshot's file name gives, if it is one
/// [`partial_path`] makes.
fn parse_partial_name(name: &str) -> Option<(String, u64)> {
    let rest = name
        .strip_prefix(PARTIAL_PREFIX)?
        .strip_suffix(PARTIAL_SUFFIX)?;
    let (digest, length) = rest.split_once('-')?;
    let length: u64 = length.parse().ok()?;
    (well_formed(digest) && length.to_string() == rest[digest.len() + 1..])
        .then(|| (digest.to_owned(), length))
}

/// A partial snapshot found at start ([`keep_partials`]).
#[derive(Debug, PartialEq, Eq)]
pub enum Partial {
    /// Kept: `held` of its `length` bytes, to resume from.
    Kept {
        name: String,
        held: u64,
        length: u64,
    },
    /// Deleted, and why.
    Deleted { name: String, why: &'static str },
}

/// At start: keeps the partial snapshots in `dir` a transfer can resume from, and deletes the
/// others — a name [`partial_path`] does not make, or a file longer than the snapshot its name
/// gives (a file as long as it is kept: the digest checked before the install decides). What
/// is kept is a prefix of the snapshot only if its bytes are right, which nothing checks
/// before the end: a damaged prefix fails the digest there, is deleted, and the next transfer
/// starts over.
pub fn keep_partials(dir: &Path) -> Vec<Partial> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if !is_partial_name(&name) {
            continue;
        }
        let held = entry
            .metadata()
            .ok()
            .filter(|m| m.is_file())
            .map(|m| m.len());
        let verdict = match (parse_partial_name(&name), held) {
            (None, _) => Err("not a name this node gives a partial snapshot"),
            (_, None) => Err("not a file"),
            (Some((_, length)), Some(held)) if held > length => {
                Err("longer than the snapshot its name gives")
            }
            (Some((_, length)), Some(held)) => Ok((held, length)),
        };
        match verdict {
            Ok((held, length)) => found.push(Partial::Kept { name, held, length }),
            Err(why) => {
                let _ = std::fs::remove_file(entry.path());
                found.push(Partial::Deleted { name, why });
            }
        }
    }
    found.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    found
}

/// Deletes the partial snapshots in `dir` other than `keep`: one transfer at a time is kept.
fn remove_other_partials(dir: &Path, keep: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        if is_partial_name(&name.to_string_lossy()) && entry.path() != keep {
            let _ = std::fs::remove_file(entry.path());
        }
    }
}

/// The sender's cluster and id from a snapshot request's headers, once its cluster is checked.
fn sender(app: &App, request: &hyper::Request<Incoming>) -> Result<(u64, String), Answer> {
    let text = |name: &str| {
        request
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let from: u64 = text(HEADER_FROM).and_then(|f| f.parse().ok()).unwrap_or(0);
    let cluster = text(HEADER_CLUSTER).unwrap_or_default();
    app.ctx
        .check_cluster(&cluster, from)
        .map_err(|why| refused(app, StatusCode::CONFLICT, "wrong_cluster", from, why))?;
    Ok((from, cluster))
}

/// A JSON header of a snapshot request, or the refusal of its absence or its form.
fn header<T: serde::de::DeserializeOwned>(
    app: &App,
    request: &hyper::Request<Incoming>,
    name: &str,
    from: u64,
) -> Result<T, Answer> {
    let malformed = |why: String| refused(app, StatusCode::BAD_REQUEST, "malformed", from, why);
    let text = request
        .headers()
        .get(name)
        .ok_or_else(|| malformed(format!("no {name} header")))?
        .to_str()
        .map_err(|e| malformed(format!("{name}: {e}")))?;
    serde_json::from_str(text).map_err(|e| malformed(format!("{name}: {e}")))
}

/// The answer to a snapshot request refused for `reason`, counted and logged.
fn refused(app: &App, status: StatusCode, reason: &'static str, from: u64, why: String) -> Answer {
    app.ctx.metrics.peer_refused(reason);
    if app.ctx.warn_now(&format!("snapshot {reason} {from}")) {
        tracing::warn!(reason, from, %why, "snapshot message refused");
    }
    error(status, why)
}

/// Whether the failpoint `name` is on (the node's test build only).
fn failpoint(name: &str) -> bool {
    #[cfg(feature = "_failpoints")]
    {
        fail::eval(name, |_| ()).is_some()
    }
    #[cfg(not(feature = "_failpoints"))]
    {
        let _ = name;
        false
    }
}

/// `POST /raft/snapshot/chunk`: appends the chunk at its offset when that is what this node
/// holds of the snapshot, and answers what it holds ([`ChunkReply`]) in any case.
pub async fn receive_chunk(app: &App, request: hyper::Request<Incoming>) -> Answer {
    let (from, _) = match sender(app, &request) {
        Ok(sender) => sender,
        Err(answer) => return answer,
    };
    let chunk: SnapshotChunk = match header(app, &request, HEADER_SNAPSHOT_CHUNK, from) {
        Ok(chunk) => chunk,
        Err(answer) => return answer,
    };
    if !well_formed(&chunk.digest) {
        let why = format!(
            "snapshot digest {:?}: 32 lowercase hex digits",
            chunk.digest
        );
        return refused(app, StatusCode::BAD_REQUEST, "malformed", from, why);
    }
    let bytes = match limited_body(request, SNAPSHOT_CHUNK_BYTES_MAX, "snapshot chunk").await {
        Ok(bytes) => bytes,
        Err(answer) => return answer,
    };
    if chunk.offset.saturating_add(bytes.len() as u64) > chunk.length {
        let why = format!(
            "a chunk of {} bytes at {} overruns the snapshot's {} bytes",
            bytes.len(),
            chunk.offset,
            chunk.length
        );
        return refused(app, StatusCode::BAD_REQUEST, "malformed", from, why);
    }
    let _receiving = app.receiving.lock().await;
    let path = partial_path(app, chunk.length, &chunk.digest);
    // Test builds: a connection cut half way through this chunk, or a byte damaged on its way
    // (in the middle of a page, where nothing but the digest would see it).
    let (cut, flip) = if bytes.is_empty() {
        (false, false)
    } else {
        (
            failpoint("snapshot::chunk-cut"),
            failpoint("snapshot::chunk-flip"),
        )
    };
    let at = (chunk.offset, chunk.length);
    let appended = tokio::task::spawn_blocking(move || {
        // Test builds: a slow chunk (a kill can land in the middle of a transfer).
        if !bytes.is_empty() {
            failpoint("snapshot::chunk-slow");
        }
        append_chunk(&path, at, &bytes, cut, flip)
    })
    .await
    .unwrap_or_else(|e| Err(std::io::Error::other(e)));
    let appended = appended.map(|(held, cut, added)| {
        app.ctx.metrics.snapshot_bytes_received.inc_by(added);
        (held, cut)
    });
    match appended {
        Ok((_, true)) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            "failpoint snapshot::chunk-cut: the chunk was cut half way",
        ),
        Ok((held, false)) => json(StatusCode::OK, &ChunkReply { held }),
        Err(e) => error(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("receiving a snapshot chunk: {e}"),
        ),
    }
}

/// Appends `bytes` to the partial snapshot of `length` bytes at `path` if it holds `offset`
/// bytes; answers what it holds then, and whether the chunk was cut (`cut`: only half of it
/// written). `flip` damages a byte of it first. Deletes the partial snapshots of other
/// transfers, and empties this one if it is longer than the snapshot (so it starts over).
/// The third value: the bytes appended.
fn append_chunk(
    path: &Path,
    (offset, length): (u64, u64),
    bytes: &[u8],
    cut: bool,
    flip: bool,
) -> std::io::Result<(u64, bool, u64)> {
    remove_other_partials(path.parent().unwrap_or(Path::new(".")), path);
    let mut file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)?;
    let mut held = file.metadata()?.len();
    if held > length {
        file.set_len(0)?;
        held = 0;
    }
    if held != offset || bytes.is_empty() {
        return Ok((held, false, 0));
    }
    let mut data = bytes.to_vec();
    if flip {
        let at = (data.len() / 2 + 1001).min(data.len() - 1);
        data[at] ^= 0x20;
    }
    let keep = if cut { data.len() / 2 } else { data.len() };
    file.write_all(&data[..keep])?;
    Ok((held + keep as u64, cut, keep as u64))
}

/// `POST /raft/snapshot`: installs the snapshot whose bytes this node received in chunks,
/// once their length and digest are the ones the header names and they are a sound state
/// file holding what the header says.
pub async fn install(app: &App, request: hyper::Request<Incoming>) -> Answer {
    let (from, _) = match sender(app, &request) {
        Ok(sender) => sender,
        Err(answer) => return answer,
    };
    let header: SnapshotHeader = match header(app, &request, HEADER_SNAPSHOT, from) {
        Ok(header) => header,
        Err(answer) => return answer,
    };
    if !well_formed(&header.digest) {
        let why = format!(
            "snapshot digest {:?}: 32 lowercase hex digits",
            header.digest
        );
        return refused(app, StatusCode::BAD_REQUEST, "malformed", from, why);
    }
    let _receiving = app.receiving.lock().await;
    let path = partial_path(app, header.length, &header.digest);
    let (length, digest, meta) = (header.length, header.digest.clone(), header.meta.clone());
    let checked = {
        let path = path.clone();
        tokio::task::spawn_blocking(move || check_received(&path, length, &digest, &meta))
            .await
            .unwrap_or_else(|e| Err((false, e.to_string())))
    };
    let file = match checked {
        Ok(file) => file,
        Err((discard, why)) => {
            if discard {
                let _ = std::fs::remove_file(&path);
            }
            return refused(app, StatusCode::BAD_REQUEST, "snapshot_unsound", from, why);
        }
    };
    let snapshot = SnapshotOf::<KvConfig, File> {
        meta: header.meta,
        snapshot: file,
    };
    let installed = app
        .raft
        .install_full_snapshot(header.vote, snapshot)
        .await
        .map_err(RaftError::<KvConfig>::Fatal);
    // The state machine copied what it installed; the received file has served.
    let _ = tokio::fs::remove_file(&path).await;
    framed(app, &installed)
}

/// Checks the received file at `path` before openraft sees it (a file the state machine cannot
/// install would be a storage failure there, and stop this node): all `length` bytes are here,
/// their digest is `digest`, and it is a sound state file holding what `meta` says. On `Err`,
/// whether to delete the file (it is whole and wrong), and why.
fn check_received(
    path: &Path,
    length: u64,
    digest: &str,
    meta: &openraft::type_config::alias::SnapshotMetaOf<KvConfig>,
) -> Result<File, (bool, String)> {
    let file = File::open(path).map_err(|e| {
        (
            false,
            format!("no snapshot of {length} bytes and digest {digest} was received: {e}"),
        )
    })?;
    let (held, found) = digest_of(&file).map_err(|e| (false, e.to_string()))?;
    if held != length {
        return Err((
            false,
            format!("the snapshot is not all here: {held} of {length} bytes"),
        ));
    }
    if found != digest {
        return Err((
            true,
            format!("the snapshot's digest is {found}, the leader's {digest}: damaged on its way"),
        ));
    }
    let (last, membership) = rbolt_raft::check_backup::<KvConfig>(path)
        .map_err(|e| (true, format!("the snapshot is not a sound state file: {e}")))?;
    if last != meta.last_log_id || membership != meta.last_membership {
        return Err((
            true,
            format!(
                "the snapshot holds {last:?} and {membership:?}, its header says {:?} and {:?}",
                meta.last_log_id, meta.last_membership
            ),
        ));
    }
    File::open(path).map_err(|e| (false, e.to_string()))
}

/// What the sender needs of the snapshot it sends.
pub struct Outgoing {
    /// The file, read at offsets.
    pub file: Arc<File>,
    /// Its length and digest.
    pub length: u64,
    pub digest: String,
}

impl Outgoing {
    /// The snapshot in `file`, its length and digest computed.
    pub async fn new(file: File) -> std::io::Result<Outgoing> {
        let file = Arc::new(file);
        let reading = Arc::clone(&file);
        let (length, digest) = tokio::task::spawn_blocking(move || {
            // A clone shares the cursor, which nothing else uses: chunks are read at offsets.
            let mut reader = reading.try_clone()?;
            reader.rewind()?;
            digest_of(reader)
        })
        .await
        .map_err(std::io::Error::other)??;
        Ok(Outgoing {
            file,
            length,
            digest,
        })
    }

    /// The header of the chunk at `offset`.
    pub fn chunk(&self, offset: u64) -> SnapshotChunk {
        SnapshotChunk {
            length: self.length,
            digest: self.digest.clone(),
            offset,
        }
    }

    /// Up to `max` bytes at `offset`.
    pub async fn read(&self, offset: u64, max: usize) -> std::io::Result<Vec<u8>> {
        let file = Arc::clone(&self.file);
        tokio::task::spawn_blocking(move || read_chunk(&file, offset, max))
            .await
            .map_err(std::io::Error::other)?
    }
}

#[cfg(test)]
mod tests {
    use super::{
        Partial, append_chunk, digest_of, keep_partials, remove_other_partials, well_formed,
    };

    #[test]
    fn a_chunk_is_appended_only_where_the_copy_ends() {
        let dir = tempfile::tempdir().expect("tempdir");
        let path = dir.path().join("received-a.partial");
        let check = |offset: u64, bytes: &[u8], cut: bool, expected: (u64, bool)| {
            let (held, was_cut, added) =
                append_chunk(&path, (offset, 10), bytes, cut, false).expect("append");
            let appended = if offset == held - added { added } else { 0 };
            assert_eq!(added, appended, "at {offset}: counted what was appended");
            assert_eq!(
                (held, was_cut),
                expected,
                "at {offset}, {} bytes, cut {cut}",
                bytes.len()
            );
        };
        check(0, b"", false, (0, false)); // what is held: nothing
        check(0, b"abcd", false, (4, false));
        check(0, b"abcd", false, (4, false)); // sent again: not appended twice
        check(8, b"ijkl", false, (4, false)); // a gap: nothing written
        check(4, b"efgh", true, (6, true)); // cut half way
        check(6, b"ghij", false, (10, false)); // resumed where the copy ends
        assert_eq!(std::fs::read(&path).expect("read"), b"abcdefghij");
        // A copy longer than the snapshot (damaged on disk) starts over.
        std::fs::write(&path, b"abcdefghijkl").expect("write");
        check(0, b"ab", false, (2, false));
        assert_eq!(std::fs::read(&path).expect("read"), b"ab");
    }

    #[test]
    fn the_partials_kept_at_start_are_the_ones_a_transfer_can_resume() {
        let dir = tempfile::tempdir().expect("tempdir");
        let digest = "0123456789abcdef0123456789abcdef";
        let files: [(String, usize); 6] = [
            (format!("received-{digest}-100.partial"), 40), // kept: 40 of 100
            (format!("received-{digest}-10.partial"), 11),  // longer than its snapshot
            (format!("received-{}-100.partial", "A".repeat(32)), 1), // not a digest
            (format!("received-{digest}-010.partial"), 1),  // not a length this node writes
            (format!("received-{digest}.partial"), 1),      // no length
            ("state.db".to_owned(), 1),                     // not a partial
        ];
        for (name, len) in &files {
            std::fs::write(dir.path().join(name), vec![7u8; *len]).expect("write");
        }
        std::fs::create_dir(dir.path().join(format!("received-{digest}-5.partial")))
            .expect("mkdir");
        let found = keep_partials(dir.path());
        let kept: Vec<&Partial> = found
            .iter()
            .filter(|p| matches!(p, Partial::Kept { .. }))
            .collect();
        assert_eq!(
            kept,
            [&Partial::Kept {
                name: files[0].0.clone(),
                held: 40,
                length: 100
            }],
            "{found:?}"
        );
        assert_eq!(found.len(), 6, "{found:?}");
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        let mut expected = vec![files[0].0.clone(), "state.db".to_owned()];
        expected.sort();
        // The directory stays (not a file: it is reported, `remove_file` cannot delete it).
        left.retain(|name| !name.ends_with("-5.partial"));
        assert_eq!(left, expected);
    }

    #[test]
    fn a_damaged_chunk_changes_the_digest() {
        let dir = tempfile::tempdir().expect("tempdir");
        let (good, bad) = (dir.path().join("good"), dir.path().join("bad"));
        let bytes: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        append_chunk(&good, (0, 5000), &bytes, false, false).expect("append");
        append_chunk(&bad, (0, 5000), &bytes, false, true).expect("append");
        let digest = |path| digest_of(std::fs::File::open(path).expect("open")).expect("digest");
        let (length, sound) = digest(&good);
        assert_eq!(length, 5000);
        assert_eq!(
            sound,
            format!("{:032x}", twox_hash::XxHash3_128::oneshot(&bytes))
        );
        assert!(well_formed(&sound), "{sound}");
        assert_ne!(digest(&bad).1, sound);
        for name in ["", "../x", &"A".repeat(32), &"0".repeat(31)] {
            assert!(!well_formed(name), "{name:?}");
        }
    }

    #[test]
    fn only_the_current_transfer_is_kept() {
        let dir = tempfile::tempdir().expect("tempdir");
        let names = [
            "received-a-1.partial",
            "received-b-2.partial",
            "received-b-3.tmp",
            "state.db",
            "received-c",
        ];
        for name in names {
            std::fs::write(dir.path().join(name), b"x").expect("write");
        }
        remove_other_partials(dir.path(), &dir.path().join("received-a-1.partial"));
        let left: std::collections::BTreeSet<String> = std::fs::read_dir(dir.path())
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        let expected = ["received-a-1.partial", "received-c", "state.db"];
        assert_eq!(left, expected.iter().map(|s| (*s).to_owned()).collect());
    }
}
