//! Deletes by range, prefix and predicate, `extract_if` and `pop_first`/`pop_last` (issue 49,
//! item 4): across many pages (leaves emptied, merged and rebalanced at commit), empty ranges,
//! ranges over everything, nested buckets among the keys, and failures that must change
//! nothing. The same operations run in the API model test against a `BTreeMap` too.

use crate::support::assert_clean;
use rbolt::{BucketDef, Db, Error, Result};
use std::collections::BTreeMap;
use std::ops::Bound;

type Map = BTreeMap<Vec<u8>, Vec<u8>>;

/// Keys that take many leaves: `n` big-endian numbers, each with a 40-byte value.
fn load(db: &Db, bucket: &str, n: u32) -> Map {
    let mut model = Map::new();
    db.update(|tx| {
        let mut b = tx.create_bucket_if_not_exists(bucket)?;
        for i in 0..n {
            let (key, value) = (i.to_be_bytes().to_vec(), format!("{i:040}").into_bytes());
            b.put(&key, &value)?;
            model.insert(key, value);
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    model
}

/// The bucket's keys and values (nested buckets left out).
fn values_of(db: &Db, bucket: &str) -> Map {
    db.view(|tx| {
        let b = tx.bucket(bucket)?.expect("the bucket");
        let mut map = Map::new();
        for entry in b.iter() {
            let entry = entry?;
            if let Some(value) = entry.value() {
                map.insert(entry.key().to_vec(), value.to_vec());
            }
        }
        Ok::<_, Error>(map)
    })
    .unwrap()
}

fn open() -> (tempfile::TempDir, Db) {
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    (dir, db)
}

fn key(i: u32) -> [u8; 4] {
    i.to_be_bytes()
}

/// One range deleted from 5,000 keys (about 80 leaves), committed: the rest equals the model,
/// the file checks clean (the emptied leaves were merged away), and it reopens the same.
fn check_range(start: Bound<u32>, end: Bound<u32>, in_same_tx: bool) {
    let (dir, db) = open();
    let mut model = if in_same_tx {
        Map::new()
    } else {
        load(&db, "b", 5000)
    };
    let (start_key, end_key) = (start.map(key), end.map(key));
    let bounds = (
        start_key.as_ref().map(|k| &k[..]),
        end_key.as_ref().map(|k| &k[..]),
    );
    let deleted = db
        .update(|tx| {
            let mut b = tx.create_bucket_if_not_exists("b")?;
            if in_same_tx {
                // The nodes the walk edits then exist before it (a copy of each is kept).
                for i in 0..5000u32 {
                    let value = format!("{i:040}").into_bytes();
                    b.put(key(i), &value)?;
                    model.insert(key(i).to_vec(), value);
                }
            }
            b.delete_range::<&[u8]>(bounds)
        })
        .unwrap();
    let before = model.len();
    model.retain(|k, _| !std::ops::RangeBounds::<&[u8]>::contains(&bounds, &k.as_slice()));
    assert_eq!(deleted, (before - model.len()) as u64, "{start:?}..{end:?}");
    assert_eq!(values_of(&db, "b"), model, "{start:?}..{end:?}");
    assert_clean(&db);
    drop(db);
    let db = Db::open(dir.path().join("db")).unwrap();
    assert_eq!(values_of(&db, "b"), model);
}

#[test]
fn delete_range_across_many_pages_matches_a_btreemap() {
    use Bound::{Excluded, Included, Unbounded};
    for in_same_tx in [false, true] {
        check_range(Included(100), Excluded(4000), in_same_tx);
        check_range(Excluded(0), Included(4998), in_same_tx);
        check_range(Unbounded, Excluded(2500), in_same_tx);
        check_range(Included(2500), Unbounded, in_same_tx);
        check_range(Included(1234), Included(1234), in_same_tx);
        check_range(Unbounded, Unbounded, in_same_tx);
    }
}

#[test]
fn an_empty_range_changes_nothing_and_copies_no_page() {
    use Bound::{Excluded, Included};
    let (_dir, db) = open();
    let model = load(&db, "b", 3000);
    let mut tx = db.begin_write().unwrap();
    let mut b = tx.bucket_mut("b").unwrap().unwrap();
    // Start after end, start == end excluded, a gap between keys, past the last key.
    assert_eq!(b.delete_range(key(200)..key(100)).unwrap(), 0);
    assert_eq!(
        b.delete_range::<[u8; 4]>((Excluded(key(7)), Excluded(key(7))))
            .unwrap(),
        0
    );
    assert_eq!(
        b.delete_range(&b"\x00\x00\x01\x00\x01"[..]..&b"\x00\x00\x01\x01"[..])
            .unwrap(),
        0
    );
    assert_eq!(
        b.delete_range((Included(key(3000)), Included(key(9000))))
            .unwrap(),
        0
    );
    assert_eq!(b.delete_prefix("no such prefix").unwrap(), 0);
    assert_eq!(b.retain(|_, _| true).unwrap(), 0);
    assert!(b.extract_if::<&[u8]>(.., |_, _| false).unwrap().is_empty());
    drop(b);
    // A walk that deleted nothing put back every page it read: no node was made.
    assert_eq!(tx.stats().node_count, 0);
    tx.commit().unwrap();
    assert_eq!(values_of(&db, "b"), model);
}

#[test]
fn clear_and_prefix_leave_nested_buckets_and_their_content() {
    let (_dir, db) = open();
    let mut model = load(&db, "b", 2000);
    db.update(|tx| {
        let mut b = tx.bucket_mut("b")?.unwrap();
        // Nested buckets at the start, in the middle and at the end of the keys.
        assert!(b.delete(key(1000))?);
        for name in [&key(0)[..2], &key(1000)[..], b"\xff\xff\xff\xff\xff"] {
            let mut nested = b.create_bucket_if_not_exists(name)?;
            nested.put("inside", "kept")?;
        }
        model.remove(&key(1000)[..]);
        assert_eq!(b.delete_prefix(&key(0)[..3])?, 256);
        model.retain(|k, _| !k.starts_with(&key(0)[..3]));
        assert_eq!(b.pop_first()?.map(|(k, _)| k), Some(key(256).to_vec()));
        model.remove(&key(256)[..]);
        assert_eq!(b.pop_last()?.map(|(k, _)| k), Some(key(1999).to_vec()));
        model.remove(&key(1999)[..]);
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_eq!(values_of(&db, "b"), model);
    let cleared = db
        .update(|tx| tx.bucket_mut("b")?.unwrap().clear())
        .unwrap();
    assert_eq!(cleared, model.len() as u64);
    db.view(|tx| {
        let b = tx.bucket("b")?.unwrap();
        assert_eq!(
            b.iter().count(),
            3,
            "only the three nested buckets are left"
        );
        for name in [&key(0)[..2], &key(1000)[..], b"\xff\xff\xff\xff\xff"] {
            let nested = b.bucket(name)?.expect("a nested bucket survives clear");
            assert_eq!(nested.get("inside")?, Some(&b"kept"[..]));
        }
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_clean(&db);
    // With only buckets left, pops find nothing.
    db.update(|tx| {
        let mut b = tx.bucket_mut("b")?.unwrap();
        assert_eq!(b.pop_first()?, None);
        assert_eq!(b.pop_last()?, None);
        Ok::<_, Error>(())
    })
    .unwrap();
}

#[test]
fn pops_drain_a_bucket_from_both_ends() {
    let (_dir, db) = open();
    let model = load(&db, "b", 3000);
    let mut expected: Vec<_> = model.into_iter().collect();
    db.update(|tx| {
        let mut b = tx.bucket_mut("b")?.unwrap();
        let mut turn = 0;
        while !expected.is_empty() {
            let wanted = if turn % 3 == 0 {
                Some(expected.remove(0))
            } else {
                expected.pop()
            };
            let popped = if turn % 3 == 0 {
                b.pop_first()?
            } else {
                b.pop_last()?
            };
            assert_eq!(popped, wanted, "pop {turn}");
            turn += 1;
        }
        assert_eq!(b.pop_first()?, None);
        Ok::<_, Error>(())
    })
    .unwrap();
    assert!(values_of(&db, "b").is_empty());
    assert_clean(&db);
}

#[test]
fn retain_and_extract_if_across_many_pages() {
    let (_dir, db) = open();
    let mut model = load(&db, "b", 6000);
    let (deleted, taken) = db
        .update(|tx| {
            let mut b = tx.bucket_mut("b")?.unwrap();
            let deleted = b.retain(|k, _| k[3] % 3 != 0)?;
            let taken = b.extract_if(key(1000)..key(5000), |k, _| k[3] % 2 == 0)?;
            Ok::<_, Error>((deleted, taken))
        })
        .unwrap();
    let before = model.len();
    model.retain(|k, _| k[3] % 3 != 0);
    assert_eq!(deleted, (before - model.len()) as u64);
    let wanted: Vec<_> = model
        .range(key(1000).to_vec()..key(5000).to_vec())
        .filter(|(k, _)| k[3] % 2 == 0)
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    assert_eq!(taken, wanted);
    for (k, _) in &wanted {
        model.remove(k);
    }
    assert_eq!(values_of(&db, "b"), model);
    assert_clean(&db);
}

/// The tree's whole state as a transaction sees it: every entry, bucket or value.
fn entries_of(b: &rbolt::BucketMut<'_>) -> Vec<(Vec<u8>, Option<Vec<u8>>)> {
    b.iter()
        .map(|e| e.map(|e| (e.key().to_vec(), e.value().map(<[u8]>::to_vec))))
        .collect::<Result<_>>()
        .unwrap()
}

#[test]
fn a_retain_that_fails_halfway_changes_nothing() {
    let (_dir, db) = open();
    load(&db, "b", 5000);
    let committed = values_of(&db, "b");
    let mut tx = db.begin_write().unwrap();
    let mut b = tx.bucket_mut("b").unwrap().unwrap();
    // Edits of this transaction first, so the walk meets nodes older than itself as well as
    // pages.
    b.delete_range(key(10)..key(20)).unwrap();
    b.put(key(2500), "edited").unwrap();
    b.create_bucket("nested").unwrap().put("k", "v").unwrap();
    let before = entries_of(&b);
    drop(b);
    let nodes_before = tx.stats().node_count;
    let mut b = tx.bucket_mut("b").unwrap().unwrap();
    let mut seen = 0;
    let failed = b.try_retain(|k, _| {
        seen += 1;
        // Deletes thousands of keys over dozens of leaves, then fails.
        if k == key(4000) {
            Err(Error::IncompatibleValue)
        } else {
            Ok(false)
        }
    });
    assert!(
        matches!(failed, Err(Error::IncompatibleValue)),
        "{failed:?}"
    );
    assert!(seen > 3900, "the predicate ran to the failing key ({seen})");
    // Not `assert_eq`: thousands of entries would fill the report.
    assert!(
        entries_of(&b) == before,
        "a failed retain changed the bucket"
    );
    drop(b);
    assert_eq!(
        tx.stats().node_count,
        nodes_before,
        "a failed retain left nodes"
    );
    tx.commit().unwrap();
    let mut expected = committed;
    expected.retain(|k, _| !(key(10)..key(20)).contains(&<[u8; 4]>::try_from(&k[..]).unwrap()));
    expected.insert(key(2500).to_vec(), b"edited".to_vec());
    assert_eq!(values_of(&db, "b"), expected);
    assert_clean(&db);
}

/// A retain's closure may write to another bucket of the same transaction (the walk does
/// not hold the transaction's workspace while the closure runs).
#[test]
fn a_retain_closure_may_write_to_another_bucket() {
    let (_dir, db) = open();
    let mut model = load(&db, "b", 1000);
    db.update(|tx| {
        let mut archive = tx.create_bucket("archive")?;
        let mut b = tx.bucket_mut("b")?.unwrap();
        let mut failed = None;
        b.retain(|k, v| {
            if k[3] % 2 == 0 {
                return true;
            }
            if let Err(error) = archive.put(k, v) {
                failed = Some(error);
            }
            false
        })?;
        assert!(failed.is_none(), "{failed:?}");
        Ok::<_, Error>(())
    })
    .unwrap();
    let archived: Map = model.extract_if(.., |k, _| k[3] % 2 == 1).collect();
    assert_eq!(values_of(&db, "b"), model);
    assert_eq!(values_of(&db, "archive"), archived);
    assert_clean(&db);
}

const SCORES: BucketDef<u32, &str> = BucketDef::new("scores");

#[test]
fn typed_operations_across_many_pages() {
    let (_dir, db) = open();
    db.update(|tx| {
        let mut scores = tx.open_bucket(SCORES)?;
        for i in 0..4000u32 {
            scores.put(i, if i % 2 == 0 { "even" } else { "odd" })?;
        }
        assert_eq!(scores.delete_range(100..200)?, 100);
        assert_eq!(scores.delete_range(3900..)?, 100);
        assert_eq!(scores.retain(|_, v| v == "even")?, 1900);
        let taken = scores.extract_if(..1000, |k, _| k % 4 == 0, |k, v| (k, v.to_string()))?;
        assert_eq!(taken.len(), 225);
        assert_eq!(taken[0], (0, "even".to_string()));
        assert_eq!(scores.pop_first(|k, _| k)?, Some(2));
        assert_eq!(scores.pop_last(|k, v| (k, v.len()))?, Some((3898, 4)));
        assert_eq!(scores.len()?, 1900 - 225 - 2);
        assert_eq!(scores.clear()?, 1900 - 225 - 2);
        assert!(scores.is_empty()?);
        Ok::<_, Error>(())
    })
    .unwrap();
    assert_clean(&db);
}

#[test]
fn a_typed_retain_that_meets_a_bad_key_changes_nothing() {
    let (_dir, db) = open();
    db.update(|tx| {
        let mut scores = tx.open_bucket(SCORES)?;
        for i in 0..3000u32 {
            scores.put(i, "x")?;
        }
        // A key that is no u32, between the numbers 2000 and 2001 in byte order.
        scores.bytes().put(b"\x00\x00\x07\xd0\x00", "bad")?;
        Ok::<_, Error>(())
    })
    .unwrap();
    let before = values_of(&db, "scores");
    let mut tx = db.begin_write().unwrap();
    let mut scores = tx.open_bucket(SCORES).unwrap();
    let failed = scores.retain(|_, _| false);
    assert!(matches!(failed, Err(Error::Decode { .. })), "{failed:?}");
    let failed = scores.try_retain(|_, _| Ok::<_, Error>(false));
    assert!(matches!(failed, Err(Error::Decode { .. })), "{failed:?}");
    let failed = scores.extract_if(.., |_, _| true, |k, _| k);
    assert!(matches!(failed, Err(Error::Decode { .. })), "{failed:?}");
    assert_eq!(
        scores.bytes().get(b"\x00\x00\x07\xd0\x00").unwrap(),
        Some(&b"bad"[..]),
        "the bad key is still there"
    );
    drop(scores);
    assert_eq!(
        tx.stats().node_count,
        0,
        "nothing of the failed walks is left"
    );
    tx.commit().unwrap();
    assert_eq!(values_of(&db, "scores"), before);
}

/// One walk copies each page it reads at most once, and keeps a copy only of what it
/// changed: one key deleted costs its path, a clear costs every page once.
#[test]
fn a_walk_keeps_copies_only_of_the_pages_it_changes() {
    let (_dir, db) = open();
    load(&db, "b", 5000);
    let stats = db
        .view(|tx| tx.bucket("b")?.expect("the bucket").stats())
        .unwrap();
    assert!(stats.depth >= 2 && stats.leaf_page_n > 50, "{stats:?}");
    let mut tx = db.begin_write().unwrap();
    let mut b = tx.bucket_mut("b").unwrap().unwrap();
    assert_eq!(b.retain(|k, _| k != key(2500)).unwrap(), 1);
    drop(b);
    assert_eq!(tx.stats().node_count, stats.depth as u64, "one path copied");
    let mut b = tx.bucket_mut("b").unwrap().unwrap();
    assert_eq!(b.clear().unwrap(), 4999);
    drop(b);
    assert_eq!(
        tx.stats().node_count,
        (stats.leaf_page_n + stats.branch_page_n) as u64,
        "every page copied once"
    );
    tx.commit().unwrap();
    assert!(values_of(&db, "b").is_empty());
    assert_clean(&db);
}

/// A typed try_retain returns its closure's error and deletes nothing.
#[test]
fn a_typed_try_retain_that_fails_halfway_changes_nothing() {
    let (_dir, db) = open();
    db.update(|tx| {
        let mut scores = tx.open_bucket(SCORES)?;
        for i in 0..3000u32 {
            scores.put(i, "x")?;
        }
        let failed = scores.try_retain(|k, _| {
            if k == 2999 {
                Err(Error::SameBuckets)
            } else {
                Ok(false)
            }
        });
        assert!(matches!(failed, Err(Error::SameBuckets)), "{failed:?}");
        assert_eq!(scores.len()?, 3000);
        Ok::<_, Error>(())
    })
    .unwrap();
    db.view(|tx| {
        assert_eq!(tx.open_bucket(SCORES)?.unwrap().len()?, 3000);
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// A retain closure that panics leaves the walk half done: the transaction refuses to commit,
/// and the file keeps what it had.
#[test]
fn a_retain_closure_that_panics_leaves_a_transaction_that_cannot_commit() {
    let (_dir, db) = open();
    let model = load(&db, "b", 2000);
    let tx = db.begin_write().unwrap();
    let mut b = tx.bucket_mut("b").unwrap().unwrap();
    let panicked = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        b.retain(|k, _| {
            assert!(k < &key(1500)[..], "the closure panics");
            false
        })
    }));
    assert!(panicked.is_err());
    drop(b);
    assert!(tx.commit().is_err(), "a half-done walk was committed");
    assert_eq!(values_of(&db, "b"), model);
    assert_clean(&db);
}
