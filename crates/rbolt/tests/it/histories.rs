//! Random histories of the whole store against a model: nested buckets, puts, deletes, bucket
//! creation and deletion, sequences, commit, rollback and reopen, with a check after every
//! commit.

use crate::support::{assert_clean, read_db};
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use rbolt::storage::SimFile;
use rbolt::{Db, Error, Options, WriteTx};
use rbolt_fixtures::{Bucket as Model, Item};
use std::sync::Arc;

#[derive(Clone, Debug)]
enum Op {
    CreateBucket { parent: usize, name: u8 },
    DeleteBucket { bucket: usize },
    Put { bucket: usize, key: u16, len: u16 },
    Delete { bucket: usize, key: u16 },
    NextSequence { bucket: usize },
    Commit,
    Rollback,
    Reopen,
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let bucket = usize::arbitrary(g);
        match u8::arbitrary(g) % 100 {
            0..=13 => Op::CreateBucket {
                parent: bucket,
                name: u8::arbitrary(g) % 6,
            },
            14..=15 => Op::DeleteBucket { bucket },
            16..=64 => Op::Put {
                bucket,
                key: u16::arbitrary(g) % 300,
                len: if u8::arbitrary(g) % 20 == 0 {
                    u16::arbitrary(g) % 9000
                } else {
                    u16::arbitrary(g) % 200
                },
            },
            65..=79 => Op::Delete {
                bucket,
                key: u16::arbitrary(g) % 300,
            },
            80..=82 => Op::NextSequence { bucket },
            83..=94 => Op::Commit,
            95..=97 => Op::Rollback,
            _ => Op::Reopen,
        }
    }
}

/// A run: the page size and a few hundred operations.
#[derive(Clone, Debug)]
struct Case {
    small_pages: bool,
    ops: Vec<Op>,
}

impl Arbitrary for Case {
    fn arbitrary(g: &mut Gen) -> Case {
        let n = 50 + usize::arbitrary(g) % (g.size() * 5);
        Case {
            small_pages: bool::arbitrary(g),
            ops: (0..n).map(|_| Op::arbitrary(g)).collect(),
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Case>> {
        let small_pages = self.small_pages;
        Box::new(self.ops.shrink().map(move |ops| Case { small_pages, ops }))
    }
}

/// Every bucket path in the model, depth first (the root's children first).
fn paths(model: &Model, prefix: &mut Vec<Vec<u8>>, out: &mut Vec<Vec<Vec<u8>>>) {
    for (key, item) in &model.entries {
        if let Item::Bucket(child) = item {
            prefix.push(key.clone());
            out.push(prefix.clone());
            paths(child, prefix, out);
            prefix.pop();
        }
    }
}

fn pick(model: &Model, n: usize) -> Option<Vec<Vec<u8>>> {
    let mut all = Vec::new();
    paths(model, &mut Vec::new(), &mut all);
    (!all.is_empty()).then(|| all[n % all.len()].clone())
}

fn slices(path: &[Vec<u8>]) -> Vec<&[u8]> {
    path.iter().map(Vec::as_slice).collect()
}

fn apply(tx: &mut WriteTx<'_>, model: &mut Model, op: &Op) {
    match op {
        Op::CreateBucket { parent, name } => {
            let name = vec![b'b', *name];
            // Half of the time at the top level.
            let parent_path = if parent % 2 == 0 {
                Some(Vec::new())
            } else {
                pick(model, *parent)
            };
            let Some(parent_path) = parent_path else {
                return;
            };
            let exists = model
                .bucket_path_mut(&parent_path)
                .entries
                .get(&name)
                .cloned();
            let result = if parent_path.is_empty() {
                tx.create_bucket(&name).map(|_| ())
            } else {
                tx.bucket_path_mut(&slices(&parent_path))
                    .unwrap()
                    .unwrap()
                    .create_bucket(&name)
                    .map(|_| ())
            };
            match exists {
                Some(Item::Bucket(_)) => assert!(matches!(result, Err(Error::BucketExists))),
                Some(Item::Value(_)) => assert!(matches!(result, Err(Error::IncompatibleValue))),
                None => {
                    result.unwrap();
                    model
                        .bucket_path_mut(&parent_path)
                        .entries
                        .insert(name, Item::Bucket(Model::default()));
                }
            }
        }
        Op::DeleteBucket { bucket } => {
            let Some(path) = pick(model, *bucket) else {
                return;
            };
            let (name, parent) = path.split_last().unwrap();
            if parent.is_empty() {
                tx.delete_bucket(name).unwrap();
            } else {
                tx.bucket_path_mut(&slices(parent))
                    .unwrap()
                    .unwrap()
                    .delete_bucket(name)
                    .unwrap();
            }
            model.bucket_path_mut(parent).entries.remove(name);
        }
        Op::Put { bucket, key, len } => {
            let Some(path) = pick(model, *bucket) else {
                return;
            };
            let key = key.to_be_bytes().to_vec();
            let value = vec![(*len % 251) as u8; *len as usize];
            let target = model.bucket_path_mut(&path);
            let result = tx
                .bucket_path_mut(&slices(&path))
                .unwrap()
                .unwrap()
                .put(&key, &value);
            if matches!(target.entries.get(&key), Some(Item::Bucket(_))) {
                assert!(matches!(result, Err(Error::IncompatibleValue)));
            } else {
                result.unwrap();
                target.entries.insert(key, Item::Value(value));
            }
        }
        Op::Delete { bucket, key } => {
            let Some(path) = pick(model, *bucket) else {
                return;
            };
            let key = key.to_be_bytes().to_vec();
            let target = model.bucket_path_mut(&path);
            let result = tx
                .bucket_path_mut(&slices(&path))
                .unwrap()
                .unwrap()
                .delete(&key);
            match target.entries.get(&key) {
                Some(Item::Bucket(_)) => assert!(matches!(result, Err(Error::IncompatibleValue))),
                Some(Item::Value(_)) => {
                    assert!(result.unwrap());
                    target.entries.remove(&key);
                }
                None => assert!(!result.unwrap()),
            }
        }
        Op::NextSequence { bucket } => {
            let Some(path) = pick(model, *bucket) else {
                return;
            };
            let target = model.bucket_path_mut(&path);
            target.sequence += 1;
            let got = tx
                .bucket_path_mut(&slices(&path))
                .unwrap()
                .unwrap()
                .next_sequence()
                .unwrap();
            assert_eq!(got, target.sequence);
        }
        Op::Commit | Op::Rollback | Op::Reopen => unreachable!(),
    }
}

fn run(case: Case) -> TestResult {
    let Case { small_pages, ops } = case;
    let options = Options::default().page_size(if small_pages { 1024 } else { 4096 });
    let mut committed = Model::default();
    let mut image: Option<Vec<u8>> = None;
    let segments: Vec<&[Op]> = ops.split(|op| matches!(op, Op::Reopen)).collect();
    let last = segments.len() - 1;
    for (index, segment) in segments.into_iter().enumerate() {
        // Each segment runs on a freshly opened database: uncommitted work is lost between.
        let sim = match image.take() {
            None => SimFile::new().unwrap(),
            Some(image) => SimFile::from_image(image).unwrap(),
        };
        let db = Db::open_storage(Arc::new(sim.clone()), options.clone()).unwrap();
        assert!(read_db(&db).unwrap() == committed, "after reopen");
        assert_clean(&db);
        let mut model = committed.clone();
        let mut tx = Some(db.begin_write().unwrap());
        for op in segment {
            match op {
                Op::Commit => {
                    tx.take().unwrap().commit().unwrap();
                    committed = model.clone();
                    assert!(read_db(&db).unwrap() == committed);
                    assert_clean(&db);
                    tx = Some(db.begin_write().unwrap());
                }
                Op::Rollback => {
                    tx.take().unwrap().rollback();
                    model = committed.clone();
                    tx = Some(db.begin_write().unwrap());
                }
                other => apply(tx.as_mut().unwrap(), &mut model, other),
            }
        }
        let open = tx.take().unwrap();
        drop(tx);
        if index == last {
            open.commit().unwrap();
            assert!(read_db(&db).unwrap() == model);
            assert_clean(&db);
        } else {
            drop(open);
        }
        drop(db);
        image = Some(sim.live_image().unwrap());
    }
    TestResult::passed()
}

#[test]
fn random_bucket_edits_read_back_as_committed_across_rollbacks_and_reopens() {
    QuickCheck::new()
        .tests(150)
        .quickcheck(run as fn(Case) -> TestResult);
}

#[test]
fn deleting_buckets_written_earlier_in_the_same_transaction_frees_every_page() {
    // Go bbolt leaks every other nested bucket here (see tests/data/bbolt/README.md).
    let dir = tempfile::tempdir().unwrap();
    let db = Db::open(dir.path().join("db")).unwrap();
    db.update(|tx| tx.create_bucket(b"keep").map(|_| ()))
        .unwrap();
    let empty_len = db.file_len().unwrap();
    for committed_first in [false, true] {
        let fill = |tx: &mut WriteTx<'_>| -> rbolt::Result<()> {
            let mut parent = tx.create_bucket(b"parent")?;
            for child in 0..8u8 {
                let mut c = parent.create_bucket([b'c', child])?;
                for i in 0..300u32 {
                    c.put(i.to_be_bytes(), [child; 64])?;
                }
                let mut grandchild = c.create_bucket(b"deeper")?;
                grandchild.put(b"k", [1; 3000])?;
            }
            Ok(())
        };
        let mut tx = db.begin_write().unwrap();
        fill(&mut tx).unwrap();
        if committed_first {
            tx.commit().unwrap();
            tx = db.begin_write().unwrap();
            // Touch the nested buckets in this transaction, then delete their parent.
            for child in 0..8u8 {
                tx.bucket_path_mut(&[&b"parent"[..], &[b'c', child]])
                    .unwrap()
                    .unwrap()
                    .put(b"x", b"y")
                    .unwrap();
            }
        }
        tx.delete_bucket(b"parent").unwrap();
        tx.commit().unwrap();
        assert_clean(&db);
        assert!(
            db.view(|tx| Ok::<_, rbolt::Error>(tx.bucket(b"parent")?.is_none()))
                .unwrap()
        );
    }
    // Every page came back: more churn fits in the file as it is.
    let len = db.file_len().unwrap();
    for _ in 0..3 {
        db.update(|tx| {
            let mut b = tx.create_bucket(b"again")?;
            for i in 0..300u32 {
                b.put(i.to_be_bytes(), [0; 64])?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .unwrap();
        db.update(|tx| tx.delete_bucket(b"again")).unwrap();
    }
    assert_eq!(db.file_len().unwrap(), len);
    assert!(len >= empty_len);
    assert_clean(&db);
}
