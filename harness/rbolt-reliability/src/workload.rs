//! A seeded workload of write transactions: puts and deletes of small and multi-page values,
//! nested buckets created, deleted and moved, sequences, bulk inserts that grow the file,
//! mass deletes that make the tree rebalance, and rewrites of a whole bucket (a durable commit
//! of many pages, which takes its pages in runs: `alloc::Runs` in the facade).
//!
//! Step `k` (from 1) is generated from the seed and the state after step `k - 1`, so any
//! process that knows the state can generate the next step: the kill loop's child reads it
//! from the database, its parent keeps it in memory. Every step writes its number to
//! [`PROGRESS_BUCKET`], so every step changes something (and takes a txid), and a recovered
//! database tells which step it holds.

use crate::model::{PROGRESS_BUCKET, Path, STEP_KEY, Tree, bucket_at, bucket_at_mut};
use rbolt::{BucketMut, Error, Result, WriteTx};
use rbolt_fixtures::Item;
use rbolt_fixtures::rng::Rng;

/// The top-level bucket bulk inserts go to.
pub const BULK_BUCKET: &[u8] = b"bulk";
/// The deepest bucket path the workload creates.
const PATH_LEN_MAX: usize = 4;
/// Top-level user buckets are `t0` .. `t{TOP_NAMES - 1}`.
const TOP_NAMES: u64 = 5;
/// Value keys are drawn from this many names per bucket, so puts overwrite and deletes hit.
const KEY_SPACE: u64 = 300;

/// One change inside a write transaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Creates the bucket at the path (its parent exists, it does not).
    CreateBucket(Path),
    /// Deletes the bucket at the path and everything in it.
    DeleteBucket(Path),
    /// Moves (and renames) a bucket.
    MoveBucket {
        /// Where it is.
        from: Path,
        /// Where it goes; the parent exists and the name is free.
        to: Path,
    },
    /// Puts a value.
    Put {
        /// The bucket.
        bucket: Path,
        /// The key, which holds no bucket.
        key: Vec<u8>,
        /// The value.
        value: Vec<u8>,
    },
    /// Deletes a key that holds no bucket (it may be absent).
    Delete {
        /// The bucket.
        bucket: Path,
        /// The key.
        key: Vec<u8>,
    },
    /// Increments a bucket's sequence.
    NextSequence(Path),
    /// Sets a bucket's sequence.
    SetSequence(Path, u64),
}

/// The workload's parameters. Two processes with equal `Workload`s generate equal steps.
#[derive(Clone, Debug)]
pub struct Workload {
    /// The seed every step derives from.
    pub seed: u64,
    /// Values of "large" puts are `large_min..=value_max` bytes: a few pages.
    pub large_min: usize,
    /// The largest value.
    pub value_max: usize,
    /// Normal steps have `1..=ops_max` operations.
    pub ops_max: u64,
    /// One step in `special_every` is a bulk insert, one a mass delete, one a rewrite of the
    /// bulk bucket.
    pub special_every: u64,
    /// Values a bulk insert puts.
    pub bulk_size: u64,
}

impl Workload {
    /// The default workload for files of `page_size`.
    pub fn new(seed: u64, page_size: usize) -> Workload {
        Workload {
            seed,
            large_min: page_size,
            value_max: 3 * page_size + 100,
            ops_max: 12,
            special_every: 12,
            bulk_size: 600,
        }
    }

    /// The operations of step `step` (from 1), generated from `model`, the state after the
    /// previous step, which becomes the state after this one.
    pub fn step(&self, step: u64, model: &mut Tree) -> Vec<Op> {
        let mut rng = Rng::derive(self.seed, step);
        let mut out = Gen {
            ops: Vec::new(),
            model,
        };
        let progress = vec![PROGRESS_BUCKET.to_vec()];
        if bucket_at(out.model, &progress).is_none() {
            out.push(Op::CreateBucket(progress.clone()));
        }
        out.push(Op::Put {
            bucket: progress,
            key: STEP_KEY.to_vec(),
            value: step.to_be_bytes().to_vec(),
        });
        match rng.below(self.special_every) {
            0 => self.bulk_insert(step, &mut rng, &mut out),
            1 => mass_delete(&mut rng, &mut out),
            2 => rewrite_bulk(&mut rng, &mut out),
            _ => {
                for _ in 0..rng.range(1, self.ops_max + 1) {
                    self.normal_op(&mut rng, &mut out);
                }
            }
        }
        out.ops
    }

    /// Many new keys (the file grows), and the oldest ones go once there are many.
    fn bulk_insert(&self, step: u64, rng: &mut Rng, out: &mut Gen<'_>) {
        let bulk = vec![BULK_BUCKET.to_vec()];
        if bucket_at(out.model, &bulk).is_none() {
            out.push(Op::CreateBucket(bulk.clone()));
        }
        for i in 0..self.bulk_size {
            let len = rng.range(16, 160) as usize;
            out.push(Op::Put {
                bucket: bulk.clone(),
                key: format!("s{step:010}-{i:05}").into_bytes(),
                value: rng.bytes(len),
            });
        }
        let keys: Vec<Vec<u8>> = bucket_at(out.model, &bulk)
            .expect("created above")
            .entries
            .keys()
            .cloned()
            .collect();
        if keys.len() as u64 > 3 * self.bulk_size {
            for key in keys.into_iter().take(2 * self.bulk_size as usize) {
                out.push(Op::Delete {
                    bucket: bulk.clone(),
                    key,
                });
            }
        }
    }

    fn normal_op(&self, rng: &mut Rng, out: &mut Gen<'_>) {
        let buckets = user_buckets(out.model);
        let Some(bucket) = rng.pick(&buckets).cloned() else {
            out.push(Op::CreateBucket(vec![top_name(rng)]));
            return;
        };
        let holds = |model: &Tree, path: &[Vec<u8>], key: &[u8]| {
            bucket_at(model, path).and_then(|b| b.entries.get(key).cloned())
        };
        match rng.below(100) {
            0..50 => {
                let key = key_name(rng);
                if let Some(Item::Bucket(_)) = holds(out.model, &bucket, &key) {
                    return;
                }
                let len = if rng.chance(1, 10) {
                    rng.range(self.large_min as u64, self.value_max as u64 + 1)
                } else {
                    rng.below(200)
                };
                let value = rng.bytes(len as usize);
                out.push(Op::Put { bucket, key, value });
            }
            50..68 => {
                let values: Vec<Vec<u8>> = bucket_at(out.model, &bucket)
                    .expect("listed")
                    .entries
                    .iter()
                    .filter(|(_, item)| matches!(item, Item::Value(_)))
                    .map(|(key, _)| key.clone())
                    .collect();
                if let Some(key) = rng.pick(&values).cloned() {
                    out.push(Op::Delete { bucket, key });
                }
            }
            68..71 => {
                let key = key_name(rng);
                if !matches!(holds(out.model, &bucket, &key), Some(Item::Bucket(_))) {
                    out.push(Op::Delete { bucket, key });
                }
            }
            71..78 => {
                if bucket.len() < PATH_LEN_MAX {
                    let name = format!("n{}", rng.below(4)).into_bytes();
                    if holds(out.model, &bucket, &name).is_none() {
                        let mut path = bucket;
                        path.push(name);
                        out.push(Op::CreateBucket(path));
                    }
                }
            }
            78..81 => {
                let name = top_name(rng);
                if !out.model.entries.contains_key(&name) {
                    out.push(Op::CreateBucket(vec![name]));
                }
            }
            81..84 => {
                // Top-level buckets go less often than nested ones.
                if bucket.len() > 1 || rng.chance(1, 3) {
                    out.push(Op::DeleteBucket(bucket));
                }
            }
            84..89 => out.push(Op::NextSequence(bucket)),
            89..91 => {
                let sequence = rng.next_u64() >> rng.below(64);
                out.push(Op::SetSequence(bucket, sequence));
            }
            _ => {
                // Move `bucket` under another bucket (or to the top), under a new name.
                let mut parents: Vec<Path> = vec![Vec::new()];
                parents.extend(buckets.iter().cloned());
                let parent = rng.pick(&parents).cloned().expect("not empty");
                let height = height(bucket_at(out.model, &bucket).expect("listed"));
                if parent.starts_with(&bucket) || parent.len() + height > PATH_LEN_MAX {
                    return;
                }
                let name = if parent.is_empty() {
                    top_name(rng)
                } else {
                    format!("m{}", rng.below(4)).into_bytes()
                };
                let parent_tree = bucket_at(out.model, &parent).expect("listed");
                if parent_tree.entries.contains_key(&name) {
                    return;
                }
                let mut to = parent;
                to.push(name);
                out.push(Op::MoveBucket { from: bucket, to });
            }
        }
    }
}

/// Deletes about half of the values of one bucket, so that pages merge.
/// New values for every key of the bulk bucket, of about the same sizes: every leaf of it is
/// written again in one commit, on a file whose free pages earlier steps scattered.
fn rewrite_bulk(rng: &mut Rng, out: &mut Gen<'_>) {
    let bulk = vec![BULK_BUCKET.to_vec()];
    let Some(tree) = bucket_at(out.model, &bulk) else {
        return;
    };
    let keys: Vec<Vec<u8>> = tree.entries.keys().cloned().collect();
    for key in keys {
        let len = rng.range(16, 160) as usize;
        out.push(Op::Put {
            bucket: bulk.clone(),
            key,
            value: rng.bytes(len),
        });
    }
}

fn mass_delete(rng: &mut Rng, out: &mut Gen<'_>) {
    let mut buckets = user_buckets(out.model);
    buckets.push(vec![BULK_BUCKET.to_vec()]);
    let Some(bucket) = rng.pick(&buckets).cloned() else {
        return;
    };
    let Some(tree) = bucket_at(out.model, &bucket) else {
        return;
    };
    let keys: Vec<Vec<u8>> = tree
        .entries
        .iter()
        .filter(|(_, item)| matches!(item, Item::Value(_)))
        .map(|(key, _)| key.clone())
        .collect();
    for key in keys {
        if rng.coin() {
            out.push(Op::Delete {
                bucket: bucket.clone(),
                key,
            });
        }
    }
}

/// The steps' operations as they are generated, and the model they keep up to date.
struct Gen<'a> {
    ops: Vec<Op>,
    model: &'a mut Tree,
}

impl Gen<'_> {
    fn push(&mut self, op: Op) {
        apply_model(&op, self.model);
        self.ops.push(op);
    }
}

fn top_name(rng: &mut Rng) -> Vec<u8> {
    format!("t{}", rng.below(TOP_NAMES)).into_bytes()
}

/// A value key: mostly short, sometimes a few hundred bytes long.
fn key_name(rng: &mut Rng) -> Vec<u8> {
    let mut key = format!("k{:03}", rng.below(KEY_SPACE)).into_bytes();
    if rng.chance(1, 20) {
        let extra = rng.below(600) as usize;
        key.resize(key.len() + extra, b'x');
    }
    key
}

/// Every bucket the workload edits freely: all but the progress and bulk buckets.
fn user_buckets(model: &Tree) -> Vec<Path> {
    fn walk(tree: &Tree, path: &mut Path, out: &mut Vec<Path>) {
        for (name, item) in &tree.entries {
            if let Item::Bucket(child) = item {
                if path.is_empty() && (name == PROGRESS_BUCKET || name == BULK_BUCKET) {
                    continue;
                }
                path.push(name.clone());
                out.push(path.clone());
                walk(child, path, out);
                path.pop();
            }
        }
    }
    let mut out = Vec::new();
    walk(model, &mut Vec::new(), &mut out);
    out
}

/// Levels of buckets in `tree`, itself included.
fn height(tree: &Tree) -> usize {
    1 + tree
        .entries
        .values()
        .filter_map(|item| match item {
            Item::Bucket(child) => Some(height(child)),
            Item::Value(_) => None,
        })
        .max()
        .unwrap_or(0)
}

/// Applies `op` to the model. The op must fit the model (the generator makes sure).
pub fn apply_model(op: &Op, model: &mut Tree) {
    match op {
        Op::CreateBucket(path) => {
            let (name, parent) = split(path);
            let parent = bucket_at_mut(model, parent).expect("the parent bucket exists");
            let old = parent
                .entries
                .insert(name.to_vec(), Item::Bucket(Tree::default()));
            assert!(old.is_none(), "create of an existing key");
        }
        Op::DeleteBucket(path) => {
            let (name, parent) = split(path);
            let parent = bucket_at_mut(model, parent).expect("the parent bucket exists");
            let old = parent.entries.remove(name);
            assert!(
                matches!(old, Some(Item::Bucket(_))),
                "delete of a non-bucket"
            );
        }
        Op::MoveBucket { from, to } => {
            let (name, parent) = split(from);
            let item = bucket_at_mut(model, parent)
                .expect("the source parent exists")
                .entries
                .remove(name)
                .expect("the source exists");
            let (new_name, new_parent) = split(to);
            let old = bucket_at_mut(model, new_parent)
                .expect("the destination parent exists")
                .entries
                .insert(new_name.to_vec(), item);
            assert!(old.is_none(), "move onto an existing key");
        }
        Op::Put { bucket, key, value } => {
            let tree = bucket_at_mut(model, bucket).expect("the bucket exists");
            let old = tree.entries.insert(key.clone(), Item::Value(value.clone()));
            assert!(!matches!(old, Some(Item::Bucket(_))), "put over a bucket");
        }
        Op::Delete { bucket, key } => {
            let tree = bucket_at_mut(model, bucket).expect("the bucket exists");
            let old = tree.entries.remove(key);
            assert!(!matches!(old, Some(Item::Bucket(_))), "delete of a bucket");
        }
        Op::NextSequence(path) => {
            let tree = bucket_at_mut(model, path).expect("the bucket exists");
            tree.sequence += 1;
        }
        Op::SetSequence(path, sequence) => {
            bucket_at_mut(model, path)
                .expect("the bucket exists")
                .sequence = *sequence;
        }
    }
}

fn split(path: &[Vec<u8>]) -> (&[u8], &[Vec<u8>]) {
    let (name, parent) = path.split_last().expect("a bucket path is not empty");
    (name, parent)
}

fn refs(path: &[Vec<u8>]) -> Vec<&[u8]> {
    path.iter().map(Vec::as_slice).collect()
}

/// The bucket at `path` of the write transaction.
pub fn bucket_mut<'t>(tx: &'t mut WriteTx<'_>, path: &[Vec<u8>]) -> Result<BucketMut<'t>> {
    tx.bucket_path_mut(&refs(path))?
        .ok_or(Error::BucketNotFound)
}

/// Applies `ops` to a write transaction.
pub fn apply_tx(ops: &[Op], tx: &mut WriteTx<'_>) -> Result<()> {
    for op in ops {
        match op {
            Op::CreateBucket(path) => {
                let (name, parent) = split(path);
                if parent.is_empty() {
                    tx.create_bucket(name)?;
                } else {
                    bucket_mut(tx, parent)?.create_bucket(name)?;
                }
            }
            Op::DeleteBucket(path) => {
                let (name, parent) = split(path);
                if parent.is_empty() {
                    tx.delete_bucket(name)?;
                } else {
                    bucket_mut(tx, parent)?.delete_bucket(name)?;
                }
            }
            Op::MoveBucket { from, to } => tx.move_bucket(&refs(from), &refs(to))?,
            Op::Put { bucket, key, value } => bucket_mut(tx, bucket)?.put(key, value)?,
            Op::Delete { bucket, key } => {
                bucket_mut(tx, bucket)?.delete(key)?;
            }
            Op::NextSequence(path) => {
                bucket_mut(tx, path)?.next_sequence()?;
            }
            Op::SetSequence(path, sequence) => bucket_mut(tx, path)?.set_sequence(*sequence)?,
        }
    }
    Ok(())
}

/// Runs one step as a write transaction and commits it.
pub fn commit_step(db: &rbolt::Db, ops: &[Op]) -> Result<()> {
    commit_step_with(db, ops, None)
}

/// Runs one step as a write transaction and commits it with `durability` (`None`: the
/// handle's default).
pub fn commit_step_with(
    db: &rbolt::Db,
    ops: &[Op],
    durability: Option<rbolt::Durability>,
) -> Result<()> {
    let mut tx = db.begin_write()?;
    if let Some(durability) = durability {
        tx.set_durability(durability);
    }
    apply_tx(ops, &mut tx)?;
    tx.commit()
}

/// The models after steps `0..=steps` of `workload`, from an empty database.
pub fn models(workload: &Workload, steps: u64) -> Vec<Tree> {
    let mut models = Vec::with_capacity(steps as usize + 1);
    let mut model = Tree::default();
    models.push(model.clone());
    for step in 1..=steps {
        workload.step(step, &mut model);
        models.push(model.clone());
    }
    models
}

/// The operations of steps `1..=steps`: `ops[k - 1]` is step `k`.
pub fn all_ops(workload: &Workload, steps: u64) -> Vec<Vec<Op>> {
    let mut model = Tree::default();
    (1..=steps)
        .map(|step| workload.step(step, &mut model))
        .collect()
}

/// The page size a database opened with `options` uses (0 means rbolt's default).
pub fn page_size_of(options: &rbolt::Options) -> usize {
    if options.page_size == 0 {
        rbolt::PAGE_SIZE_DEFAULT
    } else {
        options.page_size
    }
}
