//! A type config and a state machine for tests that drive the storage traits directly.

use openraft::entry::RaftEntry;
use openraft::storage::{IOFlushed, RaftLogStorage, RaftStateMachine};
use openraft::type_config::TypeConfigExt;
use openraft::type_config::alias::{EntryOf, LogIdOf, VoteOf};
use openraft::{EntryPayload, Vote};
use rbolt_raft::{LogStore, Machine, StateMachine};
use std::collections::BTreeMap;
use std::io;

openraft::declare_raft_types!(
    /// openraft's default types: `String` payloads and responses, `u64` node ids.
    pub TestConfig
);

/// The bucket [`TestMachine`] writes to.
pub const DATA_BUCKET: &[u8] = b"data";

/// Payloads that fail to apply (see [`TestMachine`]).
pub const REFUSED_PREFIX: &str = "refuse";

/// Puts each normal entry's payload under its index (8 bytes big-endian) in [`DATA_BUCKET`]
/// and answers with the payload. A payload that starts with [`REFUSED_PREFIX`] is also put
/// under a key one byte longer than rbolt allows, so its apply fails with rbolt's
/// `KeyTooLarge` after the first put: what [`Machine::refused`] answers for (with
/// `refused: ` and the error).
#[derive(Debug, Default)]
pub struct TestMachine;

impl Machine<TestConfig> for TestMachine {
    fn apply(
        &self,
        tx: &mut rbolt::WriteTx<'_>,
        entry: &EntryOf<TestConfig>,
    ) -> rbolt_raft::Result<String> {
        match &entry.payload {
            EntryPayload::Normal(data) => {
                let mut bucket = tx.create_bucket_if_not_exists(DATA_BUCKET)?;
                bucket.put(entry.index().to_be_bytes(), data.as_bytes())?;
                if data.starts_with(REFUSED_PREFIX) {
                    bucket.put(vec![b'k'; rbolt::KEY_SIZE_MAX + 1], b"never")?;
                }
                Ok(data.clone())
            }
            _ => Ok(String::new()),
        }
    }

    fn refused(
        &self,
        _entry: &EntryOf<TestConfig>,
        error: rbolt_raft::Error,
    ) -> rbolt_raft::Result<String> {
        Ok(format!("refused: {error}"))
    }
}

pub type TestLog = LogStore<TestConfig>;
pub type TestState = StateMachine<TestConfig, TestMachine>;

pub fn log_id(term: u64, index: u64) -> LogIdOf<TestConfig> {
    openraft::testing::log_id::<TestConfig>(term, 0, index)
}

pub fn vote(term: u64, node: u64, committed: bool) -> VoteOf<TestConfig> {
    if committed {
        Vote::new_committed(term, node)
    } else {
        Vote::new(term, node)
    }
}

/// The payload every test entry of `(term, index)` carries, so a reader can tell a stale or
/// misplaced entry from the right one.
pub fn payload(term: u64, index: u64) -> String {
    format!("{index}:{term}")
}

pub fn entry(term: u64, index: u64) -> EntryOf<TestConfig> {
    EntryOf::<TestConfig>::new_normal(log_id(term, index), payload(term, index))
}

/// Appends `entries` and waits for the flush callback, as openraft does.
pub async fn append(log: &mut TestLog, entries: Vec<EntryOf<TestConfig>>) -> io::Result<()> {
    let (tx, rx) = TestConfig::oneshot();
    log.append(entries, IOFlushed::signal(tx)).await?;
    rx.await.map_err(io::Error::other)?
}

/// Applies `entries` with no client waiting.
pub async fn apply(state: &mut TestState, entries: Vec<EntryOf<TestConfig>>) -> io::Result<()> {
    let items = entries.into_iter().map(|e| Ok((e, None)));
    state.apply(futures_util::stream::iter(items)).await
}

/// Everything in the state machine's data bucket.
pub fn data(state: &TestState) -> BTreeMap<u64, String> {
    state
        .view(|tx| {
            let mut all = BTreeMap::new();
            if let Some(bucket) = tx.bucket(DATA_BUCKET)? {
                for item in bucket.iter() {
                    let item = item?;
                    let key: [u8; 8] = item.key().try_into().expect("8-byte keys");
                    all.insert(
                        u64::from_be_bytes(key),
                        String::from_utf8(item.value().unwrap_or_default().to_vec())
                            .expect("utf-8"),
                    );
                }
            }
            Ok(all)
        })
        .expect("the state machine reads")
}

/// The test kit's generator, seeded from `RBOLT_RAFT_SEED` or the clock: tests print their
/// seed so a failure can be replayed.
pub struct Rng(rbolt_testkit::rng::Rng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(rbolt_testkit::rng::Rng::new(seed))
    }

    pub fn from_env_or_time() -> (Rng, u64) {
        let seed = std::env::var("RBOLT_RAFT_SEED")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| {
                std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map(|d| d.as_nanos() as u64)
                    .unwrap_or(1)
                    ^ u64::from(std::process::id())
            });
        (Rng::new(seed), seed)
    }

    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    /// A number in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// Names of the temporary files (`rbolt_raft::TMP_SUFFIX`) left in `dir`.
pub fn tmp_leftovers(dir: &std::path::Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .expect("read_dir")
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(rbolt_raft::TMP_SUFFIX))
        .collect()
}
