//! Reads that span more than one chunk: `entries_stream` (openraft's apply path) and
//! `limited_get_log_entries` (replication batches).

use crate::common::{TestConfig, append, log_id};
use futures_util::TryStreamExt;
use openraft::entry::RaftEntry;
use openraft::storage::{RaftLogReader, RaftLogStorage};
use openraft::type_config::alias::EntryOf;

const ENTRY_BYTES: usize = 4096;

fn big_entry(index: u64) -> EntryOf<TestConfig> {
    let fill = char::from(b'a' + (index % 26) as u8);
    EntryOf::<TestConfig>::new_normal(log_id(1, index), fill.to_string().repeat(ENTRY_BYTES))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streams_and_limited_reads_cross_chunks() {
    let dir = tempfile::tempdir().expect("tempdir");
    let (mut log, _state) =
        rbolt_raft::open::<TestConfig, _>(dir.path(), crate::common::TestMachine).expect("open");
    // About 2.5 chunks' worth of entries, after a purge point.
    let count = (rbolt_raft::LIMITED_READ_BYTES_MAX * 5 / 2 / ENTRY_BYTES) as u64;
    log.purge(log_id(1, 9)).await.expect("purge");
    for batch in (10..10 + count).collect::<Vec<_>>().chunks(200) {
        append(&mut log, batch.iter().map(|&i| big_entry(i)).collect())
            .await
            .expect("append");
    }
    let last = 10 + count - 1;
    let mut reader = log.get_log_reader().await;
    let cases: Vec<(&str, std::ops::Range<u64>, Vec<u64>)> = vec![
        ("everything", 0..u64::MAX, (10..=last).collect()),
        ("from the middle", 500..u64::MAX, (500..=last).collect()),
        (
            "a window over a chunk boundary",
            900..1200,
            (900..1200).collect(),
        ),
        ("past the end", last + 1..last + 10, vec![]),
    ];
    for (name, range, expected) in cases {
        let streamed: Vec<_> = reader
            .entries_stream(range.clone())
            .await
            .try_collect()
            .await
            .expect(name);
        let indexes: Vec<u64> = streamed.iter().map(|e| e.index()).collect();
        assert_eq!(indexes, expected, "{name}");
        for entry in &streamed {
            assert_eq!(
                entry,
                &big_entry(entry.index()),
                "{name}: entry {}",
                entry.index()
            );
        }
        let whole = reader.try_get_log_entries(range.clone()).await.expect(name);
        assert_eq!(whole, streamed, "{name}: one read gives the same");
    }
    let limited = reader
        .limited_get_log_entries(10, last + 1)
        .await
        .expect("limited read");
    assert!(
        !limited.is_empty(),
        "a limited read returns at least one entry"
    );
    assert!(
        (limited.len() as u64) < count,
        "a limited read stops early: {} of {count}",
        limited.len()
    );
    assert_eq!(limited[0].index(), 10);
    assert!(limited.windows(2).all(|w| w[1].index() == w[0].index() + 1));
}
