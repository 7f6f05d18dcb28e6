//! The rbolt side: a seeded random workload on a file and its model (the mirror of the Go
//! program's), the file's content in the manifest format, and its check.

use crate::matrix::Case;
use rbolt::storage::{FileOptions, FileStorage};
use rbolt::{Db, Durability, Options, VacuumOptions, WalkStep, WriteTx};
use rbolt_fixtures::rng::Rng;
use rbolt_fixtures::{Bucket, Item};
use std::ops::ControlFlow;
use std::path::Path;
use std::sync::Arc;

/// A bucket path of the model.
type Path_ = Vec<Vec<u8>>;

/// The top-level buckets of the workload's own parts, which random deletes leave alone (and
/// everything in them: the deep chain stays whole).
const KEPT: [&[u8]; 6] = [b"fill", b"deep", b"big", b"bulk", b"wide", b"bigfree"];

/// Every bucket of `model` below its root, depth-first in key order.
fn bucket_paths(model: &Bucket) -> Vec<Path_> {
    let mut out = Vec::new();
    let mut stack: Vec<(Path_, &Bucket)> = vec![(Vec::new(), model)];
    while let Some((path, bucket)) = stack.pop() {
        for (name, item) in bucket.entries.iter().rev() {
            if let Item::Bucket(child) = item {
                let mut child_path = path.clone();
                child_path.push(name.clone());
                stack.push((child_path, child));
            }
        }
        if !path.is_empty() {
            out.push(path);
        }
    }
    out
}

fn value_keys(bucket: &Bucket) -> Vec<Vec<u8>> {
    bucket
        .entries
        .iter()
        .filter(|(_, item)| matches!(item, Item::Value(_)))
        .map(|(key, _)| key.clone())
        .collect()
}

/// A value length: mostly small, sometimes spanning pages (overflow).
fn value_len(rng: &mut Rng) -> usize {
    match rng.below(100) {
        0..60 => rng.index(64),
        60..85 => 64 + rng.index(400),
        85..95 => 400 + rng.index(3000),
        95..99 => 3000 + rng.index(20_000),
        _ => 20_000 + rng.index(80_000),
    }
}

/// A key `bucket` does not hold: spread out, after the last key (a sorted load), below every
/// key (the leftmost path), or binary.
fn new_key(bucket: &Bucket, rng: &mut Rng) -> Vec<u8> {
    loop {
        let key = match rng.below(100) {
            0..45 => format!("k{:08x}", rng.next_u64() as u32).into_bytes(),
            45..65 => format!("k{:08x}", 0xF000_0000 + rng.below(0x0FFF_FFFF)).into_bytes(),
            65..80 => {
                let mut key = vec![0x01];
                let len = 1 + rng.index(12);
                key.extend(rng.bytes(len));
                key
            }
            _ => {
                let len = 1 + rng.index(40);
                rng.bytes(len)
            }
        };
        if !bucket.entries.contains_key(&key) {
            return key;
        }
    }
}

/// A bucket name: text (some needing escapes in the manifest, some beyond ASCII) or binary.
fn new_name(bucket: &Bucket, rng: &mut Rng) -> Vec<u8> {
    loop {
        let name = match rng.below(10) {
            0..5 => format!("r{}", rng.below(1000)).into_bytes(),
            5..7 => format!("ü\"\\{}", rng.below(100)).into_bytes(),
            _ => {
                let len = 1 + rng.index(8);
                rng.bytes(len)
            }
        };
        if !bucket.entries.contains_key(&name) {
            return name;
        }
    }
}

/// One rbolt round on `path`: open with the case's options, run its transactions on the
/// file and `model`, mixing durable and non-durable commits, a `Db::sync`, vacuum steps
/// (and, in some cases, a whole vacuum), then close. Returns the bytes the file took as
/// copies into its writable mapping (`FileStorage::copied_bytes`): pages that a commit without
/// a sync rewrote, which Go must then read and write on like any others.
pub fn write_round(
    path: &Path,
    case: &Case,
    round: usize,
    model: &mut Bucket,
) -> rbolt::Result<u64> {
    let mut rng = Rng::derive(case.seed, round as u64);
    let options = Options::default()
        .page_size(case.page_size)
        .freelist(case.rbolt_freelist)
        .no_freelist_sync(case.rbolt_no_freelist_sync)
        .auto_shrink(case.auto_shrink)
        .one_sync(case.one_sync);
    // As `Db::open_with` opens it, with the file kept to read its `copied_bytes`.
    let file = FileStorage::open(path, FileOptions::new()).map_err(|error| rbolt::Error::Io {
        path: Some(path.to_owned()),
        source: error.into(),
    })?;
    let file = Arc::new(file);
    let db = Db::open_storage(file.clone(), options)?;
    for t in 0..case.txs {
        let tx = db.begin_write()?;
        // Every other commit is not durable; the next durable one (or the sync) makes
        // them so. Go must see every one of them once rbolt has closed the file.
        if case.durability_mix && rng.coin() {
            tx.set_durability(Durability::None);
        }
        transaction(&tx, case, round == 0 && t == 0, t, model, &mut rng)?;
        tx.commit()?;
        if t == case.txs / 2 {
            db.sync()?;
        }
    }
    // (Not after the big free: its pages are at the end of the file, and a step would cut
    // them off the freelist before anyone read it.)
    if !case.big_freelist {
        for _ in 0..rng.index(4) {
            db.vacuum_step(1 + rng.index(64))?;
        }
    }
    if case.wipe {
        // Everything deleted, and the file vacuumed down to the few pages left.
        let tx = db.begin_write()?;
        for name in model.entries.keys() {
            tx.delete_bucket(name)?;
        }
        tx.commit()?;
        model.entries.clear();
    }
    if case.wipe || (case.whole_vacuum && round % 4 == 2) {
        db.vacuum(VacuumOptions::default(), |_| ControlFlow::Continue(()))?;
    }
    db.close()?;
    Ok(file.copied_bytes())
}

fn transaction(
    tx: &WriteTx<'_>,
    case: &Case,
    first: bool,
    t: usize,
    model: &mut Bucket,
    rng: &mut Rng,
) -> rbolt::Result<()> {
    if first && case.deep > 0 {
        deep_chain(tx, case.deep, model)?;
    }
    if case.big_freelist && first {
        return big_free(tx, model, rng);
    }
    if case.big_freelist && t == 1 && model.bucket(b"bigfree").is_some() {
        return unfree(tx, model);
    }
    for _ in 0..case.ops {
        op(tx, model, rng)?;
    }
    bulk(tx, case.page_size, model, rng)?;
    wide(tx, case.page_size, model, rng)?;
    if case.big && rng.coin() {
        let mut big = tx.create_bucket_if_not_exists("big")?;
        let key = format!("v{}", rng.below(3)).into_bytes();
        let len = (1 << 20) + rng.index(9 << 20);
        let value = rng.bytes(len);
        big.put(&key, &value)?;
        let big_model = model.bucket_path_mut(&[b"big".to_vec()]);
        big_model.entries.insert(key, Item::Value(value));
    }
    Ok(())
}

fn op(tx: &WriteTx<'_>, model: &mut Bucket, rng: &mut Rng) -> rbolt::Result<()> {
    let paths = bucket_paths(model);
    if paths.is_empty() || rng.below(20) == 0 {
        let name = new_name(model, rng);
        tx.create_bucket(&name)?;
        model.entries.insert(name, Item::Bucket(Bucket::default()));
        return Ok(());
    }
    let path = rng.pick(&paths).expect("not empty").clone();
    let mut bucket = tx.bucket_path_mut(&path)?.expect("a bucket of the model");
    let bucket_model = model.bucket_path_mut(&path);
    match rng.below(100) {
        0..40 => {
            let key = new_key(bucket_model, rng);
            let len = value_len(rng);
            let value = rng.bytes(len);
            bucket.put(&key, &value)?;
            bucket_model.entries.insert(key, Item::Value(value));
        }
        40..52 => {
            let keys = value_keys(bucket_model);
            if let Some(key) = rng.pick(&keys) {
                let len = value_len(rng);
                let value = rng.bytes(len);
                bucket.put(key, &value)?;
                bucket_model.entries.insert(key.clone(), Item::Value(value));
            }
        }
        52..64 => {
            // One key, the bucket's first key, or a run of consecutive keys: whole pages,
            // and the first keys of the pages after them.
            let keys = value_keys(bucket_model);
            if !keys.is_empty() {
                let (from, n) = match rng.below(4) {
                    0 => (0, 1),
                    1 => (rng.index(keys.len()), 5 + rng.index(300)),
                    _ => (rng.index(keys.len()), 1),
                };
                for key in keys.iter().skip(from).take(n) {
                    bucket.delete(key)?;
                    bucket_model.entries.remove(key);
                }
            }
        }
        64..70 => {
            let name = new_name(bucket_model, rng);
            bucket.create_bucket(&name)?;
            bucket_model
                .entries
                .insert(name, Item::Bucket(Bucket::default()));
        }
        70..73 if !KEPT.contains(&&path[0][..]) => {
            // rbolt has no bbolt's DeleteBucket leak: any bucket, anywhere in a transaction.
            drop(bucket);
            let (name, parent) = path.split_last().expect("not the root");
            if parent.is_empty() {
                tx.delete_bucket(name)?;
            } else {
                tx.bucket_path_mut(parent)?
                    .expect("its parent")
                    .delete_bucket(name)?;
            }
            model.bucket_path_mut(parent).entries.remove(name);
        }
        73..79 => {
            if rng.coin() {
                bucket_model.sequence = bucket.next_sequence()?;
            } else {
                bucket_model.sequence = rng.next_u64() >> rng.below(64);
                bucket.set_sequence(bucket_model.sequence)?;
            }
        }
        _ => {
            // A bucket split with a fill percent of its own (not stored in the file).
            drop(bucket);
            let mut fill = tx.create_bucket_if_not_exists("fill")?;
            fill.set_fill_percent(0.1 + 0.9 * (rng.below(1000) as f64 / 1000.0));
            let fill_model = model.bucket_path_mut(&[b"fill".to_vec()]);
            for _ in 0..20 {
                let key = new_key(fill_model, rng);
                let len = rng.index(200);
                let value = rng.bytes(len);
                fill.put(&key, &value)?;
                fill_model.entries.insert(key, Item::Value(value));
            }
        }
    }
    Ok(())
}

/// Grows or thins the top-level bucket "bulk" by hundreds of keys at once: keys long enough
/// (a 32nd of a page) that its tree is three or four levels deep at any page size, so that
/// deletes empty whole pages and branches, and branches merge.
fn bulk(
    tx: &WriteTx<'_>,
    page_size: usize,
    model: &mut Bucket,
    rng: &mut Rng,
) -> rbolt::Result<()> {
    let mut bucket = tx.create_bucket_if_not_exists("bulk")?;
    let bucket_model = model.bucket_path_mut(&[b"bulk".to_vec()]);
    let keys = value_keys(bucket_model);
    match rng.below(10) {
        choice if choice < 5 || keys.len() < 200 => {
            let sorted = rng.coin();
            let start = rng.next_u64() as u32;
            for i in 0..600 + rng.index(900) {
                let prefix = if sorted {
                    start.wrapping_add(i as u32)
                } else {
                    rng.next_u64() as u32
                };
                let mut key = format!("{prefix:08x}").into_bytes();
                key.resize(key.len() + page_size / 32, b'y');
                let len = rng.index(24);
                let value = rng.bytes(len);
                bucket.put(&key, &value)?;
                bucket_model.entries.insert(key, Item::Value(value));
            }
        }
        5..8 => {
            // A run of consecutive keys: whole pages, and the first keys of the pages after.
            let from = rng.index(keys.len());
            for key in keys.iter().skip(from).take(100 + rng.index(1400)) {
                bucket.delete(key)?;
                bucket_model.entries.remove(key);
            }
        }
        _ => {
            // Every other (or third) key of a range: pages thinned until they merge.
            let from = rng.index(keys.len());
            let step = 2 + rng.index(2);
            let n = 300 + rng.index(1700);
            for key in keys.iter().skip(from).take(n).step_by(step) {
                bucket.delete(key)?;
                bucket_model.entries.remove(key);
            }
        }
    }
    Ok(())
}

/// Puts values of a quarter to three quarters of a page into the top-level bucket "wide", so
/// that its leaves hold one to three entries each, then deletes a quarter of its keys at
/// random: leaves empty out one by one while their neighbours stay untouched, and the
/// branches above them shrink until they merge.
fn wide(
    tx: &WriteTx<'_>,
    page_size: usize,
    model: &mut Bucket,
    rng: &mut Rng,
) -> rbolt::Result<()> {
    let mut bucket = tx.create_bucket_if_not_exists("wide")?;
    let bucket_model = model.bucket_path_mut(&[b"wide".to_vec()]);
    for _ in 0..50 + rng.index(150) {
        let mut key = format!("{:08x}", rng.next_u64() as u32).into_bytes();
        key.resize(key.len() + page_size / 32, b'v');
        let len = page_size / 4 + rng.index(page_size / 2);
        let value = rng.bytes(len);
        bucket.put(&key, &value)?;
        bucket_model.entries.insert(key, Item::Value(value));
    }
    let keys = value_keys(bucket_model);
    for _ in 0..keys.len() / 4 {
        let key = &keys[rng.index(keys.len())];
        if bucket_model.entries.remove(key).is_some() {
            bucket.delete(key)?;
        }
    }
    Ok(())
}

/// Nests buckets `depth` levels below a top-level bucket "deep", a key in each.
fn deep_chain(tx: &WriteTx<'_>, depth: usize, model: &mut Bucket) -> rbolt::Result<()> {
    let mut path = vec![b"deep".to_vec()];
    for level in 0..depth {
        let key = format!("level{level:04}").into_bytes();
        tx.create_bucket_path(&path)?.put(&key, &key)?;
        model
            .bucket_path_mut(&path)
            .entries
            .insert(key.clone(), Item::Value(key));
        path.push(b"d".to_vec());
    }
    tx.create_bucket_path(&path)?;
    model.bucket_path_mut(&path);
    Ok(())
}

/// Four 10 MB values, deleted by the next transaction ([`unfree`]): at small pages more than
/// 65,535 ids are freed at once, and the freelist page takes the 0xFFFF count rule.
fn big_free(tx: &WriteTx<'_>, model: &mut Bucket, rng: &mut Rng) -> rbolt::Result<()> {
    let mut bucket = tx.create_bucket_if_not_exists("bigfree")?;
    let bucket_model = model.bucket_path_mut(&[b"bigfree".to_vec()]);
    for i in 0..4 {
        let key = format!("free{i}").into_bytes();
        let value = rng.bytes(10 << 20);
        bucket.put(&key, &value)?;
        bucket_model.entries.insert(key, Item::Value(value));
    }
    Ok(())
}

fn unfree(tx: &WriteTx<'_>, model: &mut Bucket) -> rbolt::Result<()> {
    let mut bucket = tx.bucket_mut("bigfree")?.expect("made by big_free");
    let bucket_model = model.bucket_path_mut(&[b"bigfree".to_vec()]);
    for key in value_keys(bucket_model) {
        bucket.delete(&key)?;
        bucket_model.entries.remove(&key);
    }
    Ok(())
}

/// The file's content as `rbolt export` writes it.
pub fn export(path: &Path) -> rbolt::Result<String> {
    let db = Db::open_with(path, Options::default().read_only(true))?;
    let tx = db.begin_read()?;
    let mut out = Vec::new();
    let root = tx.root();
    let mut walk = root.walk();
    while let Some(step) = walk.next_step() {
        let prefix = rbolt_manifest::line_prefix(walk.path());
        match step? {
            WalkStep::Value { key, value } => {
                rbolt_manifest::write_value_line(&mut out, &prefix, key, value)
                    .expect("writing to a vector");
            }
            WalkStep::Enter { bucket, .. } => {
                rbolt_manifest::write_sequence_line(&mut out, &prefix, bucket.sequence())
                    .expect("writing to a vector");
            }
            WalkStep::Leave => {}
        }
    }
    Ok(String::from_utf8(out).expect("manifest lines are UTF-8"))
}

/// What rbolt's check found in a file.
pub struct Checked {
    /// The places Go's writer cannot continue.
    pub hazards: Vec<String>,
    /// Every other problem.
    pub other: Vec<String>,
    /// The ids on the file's freelist page (`None`: it keeps none).
    pub freelist_ids: Option<usize>,
}

/// rbolt's check of the file.
pub fn check(path: &Path) -> rbolt::Result<Checked> {
    let db = Db::open_with(path, Options::default().read_only(true))?;
    let tx = db.begin_read()?;
    let (hazards, other): (Vec<_>, Vec<_>) = tx
        .check()
        .into_iter()
        .partition(rbolt::CheckError::breaks_go_writer);
    let text = |errors: Vec<rbolt::CheckError>| errors.iter().map(ToString::to_string).collect();
    let freelist_ids = match tx.meta().has_freelist() {
        true => Some(tx.free_page_ids()?.len()),
        false => None,
    };
    Ok(Checked {
        hazards: text(hazards),
        other: text(other),
        freelist_ids,
    })
}

/// How deep buckets nest in `model` (a top-level bucket is 1), and its longest value.
pub fn shape(model: &Bucket) -> (usize, usize) {
    let (mut depth, mut value_max) = (0, 0);
    let mut stack = vec![(model, 0)];
    while let Some((bucket, level)) = stack.pop() {
        depth = depth.max(level);
        for item in bucket.entries.values() {
            match item {
                Item::Value(value) => value_max = value_max.max(value.len()),
                Item::Bucket(child) => stack.push((child, level + 1)),
            }
        }
    }
    (depth, value_max)
}
