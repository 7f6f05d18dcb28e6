//! The operations a case is made of, and how their random parameters turn into concrete
//! paths, names, keys and values against the model as it is when they run.
//!
//! An operation holds seeds rather than names, so that a case stays meaningful when
//! quickcheck shrinks it: a seed picks among the buckets and keys that exist at that point,
//! or deliberately picks a missing one, a value where a bucket is expected, an empty name, a
//! name or key over `KEY_SIZE_MAX`, or a value over `VALUE_SIZE_MAX`.

use super::many::Many;
use super::model::{Item, Model, Path};
use quickcheck::{Arbitrary, Gen};
use rbolt::{FreelistKind, KEY_SIZE_MAX, VALUE_SIZE_MAX};
use std::sync::OnceLock;

/// Page sizes of new files: tiny, small, usual and large ones, powers of two or not (Go
/// bbolt writes any).
pub const PAGE_SIZES: &[usize] = &[256, 512, 1024, 3000, 4096, 16384];
/// Names of buckets drawn from a small set, so that creates collide with existing buckets.
const NAMES: &[&[u8]] = &[b"a", b"b", b"c", b"d", b"e"];
/// Keys are drawn from `KEY_POOL_SIZE` names `k00`, `k01`, ... so that puts replace and
/// deletes find.
const KEY_POOL_SIZE: u32 = 40;

/// How a `BucketMut` is reached.
#[derive(Clone, Copy, Debug)]
pub enum Via {
    /// `WriteTx::bucket_path_mut`.
    Path,
    /// `WriteTx::bucket_mut`, then `BucketMut::bucket_mut` level by level.
    Chain,
}

/// Where a read-only operation reads.
#[derive(Clone, Copy, Debug)]
pub enum Src {
    /// The write transaction's read view (`WriteTx::root`, then `Bucket::bucket`).
    Write,
    /// A `BucketMut` of the write transaction (for cursors: a `CursorMut`, which deletes).
    WriteMut,
    /// A read transaction begun beside the write transaction: it sees the last commit.
    Read,
}

#[derive(Clone, Copy, Debug)]
pub enum Move {
    First,
    Last,
    Next,
    Prev,
    Seek(u32),
    Current,
    /// `CursorMut::delete` (a plain cursor skips it).
    Delete,
}

#[derive(Clone, Copy, Debug)]
pub enum SeqAction {
    Get,
    Set(u64),
    Next,
}

#[derive(Clone, Debug)]
pub enum Op {
    CreateBucket {
        at: u32,
        name: u32,
        if_not_exists: bool,
        via: Via,
        then_put: u32,
    },
    DeleteBucket {
        at: u32,
        name: u32,
        via: Via,
    },
    MoveBucket {
        from: u32,
        to: u32,
    },
    /// `create_bucket_path`: below a bucket of the model (or a missing one, or the root),
    /// `len` more names, each picked against the model's bucket at its level.
    CreatePath {
        at: u32,
        names: [u32; 3],
        len: u8,
    },
    Access {
        at: u32,
        via: Via,
    },
    Put {
        at: u32,
        key: u32,
        value: u32,
        via: Via,
    },
    Delete {
        at: u32,
        key: u32,
        via: Via,
    },
    Get {
        at: u32,
        key: u32,
        src: Src,
    },
    Cursor {
        at: u32,
        src: Src,
        moves: Vec<Move>,
    },
    Range {
        at: u32,
        src: Src,
        bounds: u32,
        order: u32,
    },
    Sequence {
        at: u32,
        via: Via,
        action: SeqAction,
    },
    ForEach {
        at: u32,
        src: Src,
        stop: Option<u8>,
        buckets_only: bool,
    },
    Stats {
        at: u32,
        src: Src,
    },
    /// Many puts into one bucket (splits, overflow pages, a bucket leaving its inline form),
    /// or many deletes of a run of its keys by `delete` or by `CursorMut` (merges).
    Bulk {
        at: u32,
        n: u16,
        seed: u32,
        delete: bool,
    },
    /// A delete of many keys at once, or a pop (`many.rs`).
    DeleteMany {
        at: u32,
        seed: u32,
        many: Many,
        via: Via,
    },
    /// A chain of nested buckets, `depth` levels below a new top-level bucket.
    DeepChain {
        depth: u16,
        name: u8,
    },
    /// Registers an `on_commit` hook; with `update`, the hook writes in its own `db.update`.
    OnCommit {
        update: bool,
    },
    Commit,
    Rollback,
    DropTx,
    /// `db.update` whose closure runs the next `n` operations, then panics.
    PanicInUpdate {
        n: u8,
    },
    /// `db.update` whose closure runs the next `n` operations, then returns an error.
    ErrInUpdate {
        n: u8,
    },
    /// Reopen with `max_size` at the file's length; the next `n` operations and a value
    /// larger than the file, then a commit that must fail with `MaxSizeReached`.
    MaxSize {
        n: u8,
    },
    Reopen {
        options: u32,
    },
    ReadOnlyReopen {
        compact: bool,
    },
    /// A read transaction on another thread, kept open and checked after every commit.
    OldReader,
    Compact {
        tx_max_size: u16,
        page: u8,
    },
    WriteTo,
    CopyFile,
    Batch {
        threads: u8,
        failing: bool,
    },
    /// Several top-level bucket handles held at once for `steps` steps (see `handles.rs`).
    Handles {
        seed: u32,
        steps: u8,
    },
    /// Sets the open write transaction's durability (`None`: commit without syncs; else
    /// durable, with one sync or two).
    SetDurability {
        none: bool,
        one_sync: bool,
    },
    /// `Db::sync`: refused on the thread holding the write transaction; then, after a
    /// commit, every commit so far is durable.
    Sync,
    /// Commits, then one `Db::vacuum_step` of up to `pages` pages.
    VacuumStep {
        pages: u8,
    },
    /// Commits, then a `Db::vacuum` of steps of up to `pages` pages, stopped by its callback
    /// after `steps` steps (its steps plan from one walk kept across them).
    Vacuum {
        pages: u8,
        steps: u8,
    },
    /// A crash, without the handle's clean close: of the process (every commit is there
    /// after the reopen) or a power loss (a crash image picked by `seed`: the reopen holds
    /// the last durable commit or a later one).
    Crash {
        process: bool,
        seed: u32,
    },
}

impl Op {
    /// Whether the operation works inside one write transaction (and so may run inside an
    /// `update` closure); the others end or reopen it.
    pub fn in_tx(&self) -> bool {
        matches!(
            self,
            Op::CreateBucket { .. }
                | Op::DeleteBucket { .. }
                | Op::MoveBucket { .. }
                | Op::CreatePath { .. }
                | Op::Access { .. }
                | Op::Put { .. }
                | Op::Delete { .. }
                | Op::Get { .. }
                | Op::Cursor { .. }
                | Op::Range { .. }
                | Op::Sequence { .. }
                | Op::ForEach { .. }
                | Op::Stats { .. }
                | Op::Bulk { .. }
                | Op::DeleteMany { .. }
                | Op::DeepChain { .. }
                | Op::OnCommit { .. }
                | Op::Handles { .. }
                | Op::SetDurability { .. }
        )
    }
}

fn via(g: &mut Gen) -> Via {
    if bool::arbitrary(g) {
        Via::Path
    } else {
        Via::Chain
    }
}

fn src(g: &mut Gen) -> Src {
    match u8::arbitrary(g) % 3 {
        0 => Src::Write,
        1 => Src::WriteMut,
        _ => Src::Read,
    }
}

fn moves(g: &mut Gen, deletes: bool) -> Vec<Move> {
    let n = 1 + usize::arbitrary(g) % 12;
    (0..n)
        .map(|_| match u8::arbitrary(g) % 20 {
            0..=1 => Move::First,
            2..=3 => Move::Last,
            4..=8 => Move::Next,
            9..=11 => Move::Prev,
            12..=14 => Move::Seek(u32::arbitrary(g)),
            15..=16 => Move::Current,
            _ if deletes => Move::Delete,
            _ => Move::Next,
        })
        .collect()
}

/// Weights of the operations, per 1,000.
const WEIGHTS: &[(u16, &str)] = &[
    (210, "put"),
    (60, "delete"),
    (55, "get"),
    (95, "create"),
    (30, "delete-bucket"),
    (60, "move"),
    (25, "access"),
    (35, "cursor"),
    (30, "cursor-mut"),
    (40, "range"),
    (30, "sequence"),
    (20, "for-each"),
    (15, "stats"),
    (15, "create-path"),
    (12, "bulk"),
    (25, "delete-many"),
    (2, "deep-chain"),
    (12, "on-commit"),
    (25, "handles"),
    (70, "commit"),
    (12, "rollback"),
    (8, "drop"),
    (6, "panic"),
    (5, "err-update"),
    (3, "max-size"),
    (8, "reopen"),
    (3, "read-only"),
    (8, "old-reader"),
    (5, "compact"),
    (5, "write-to"),
    (2, "copy-file"),
    (4, "batch"),
    (25, "durability"),
    (8, "sync"),
    (5, "vacuum-step"),
    (3, "vacuum"),
    (6, "crash"),
];

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let total: u32 = WEIGHTS.iter().map(|(w, _)| u32::from(*w)).sum();
        let mut pick = u32::arbitrary(g) % total;
        let mut kind = WEIGHTS[0].1;
        for (weight, name) in WEIGHTS {
            if pick < u32::from(*weight) {
                kind = name;
                break;
            }
            pick -= u32::from(*weight);
        }
        let at = u32::arbitrary(g);
        match kind {
            "put" => Op::Put {
                at,
                key: u32::arbitrary(g),
                value: u32::arbitrary(g),
                via: via(g),
            },
            "delete" => Op::Delete {
                at,
                key: u32::arbitrary(g),
                via: via(g),
            },
            "get" => Op::Get {
                at,
                key: u32::arbitrary(g),
                src: src(g),
            },
            "create" => Op::CreateBucket {
                at,
                name: u32::arbitrary(g),
                if_not_exists: u8::arbitrary(g) % 3 == 0,
                via: via(g),
                then_put: u32::arbitrary(g),
            },
            "delete-bucket" => Op::DeleteBucket {
                at,
                name: u32::arbitrary(g),
                via: via(g),
            },
            "create-path" => Op::CreatePath {
                at,
                names: [u32::arbitrary(g), u32::arbitrary(g), u32::arbitrary(g)],
                len: 1 + u8::arbitrary(g) % 3,
            },
            "move" => Op::MoveBucket {
                from: at,
                to: u32::arbitrary(g),
            },
            "access" => Op::Access { at, via: via(g) },
            "cursor" => {
                let src = if bool::arbitrary(g) {
                    Src::Write
                } else {
                    Src::Read
                };
                Op::Cursor {
                    at,
                    src,
                    moves: moves(g, false),
                }
            }
            "cursor-mut" => Op::Cursor {
                at,
                src: Src::WriteMut,
                moves: moves(g, true),
            },
            "range" => Op::Range {
                at,
                src: src(g),
                bounds: u32::arbitrary(g),
                order: u32::arbitrary(g),
            },
            "sequence" => Op::Sequence {
                at,
                via: via(g),
                action: match u8::arbitrary(g) % 5 {
                    0 => SeqAction::Get,
                    1 => SeqAction::Set(if bool::arbitrary(g) {
                        u64::MAX - u64::from(u8::arbitrary(g) % 2)
                    } else {
                        u64::arbitrary(g)
                    }),
                    _ => SeqAction::Next,
                },
            },
            "for-each" => Op::ForEach {
                at,
                src: src(g),
                stop: (u8::arbitrary(g) % 3 == 0).then(|| u8::arbitrary(g) % 8),
                buckets_only: bool::arbitrary(g),
            },
            "stats" => Op::Stats { at, src: src(g) },
            "bulk" => Op::Bulk {
                at,
                n: 20 + u16::arbitrary(g) % 400,
                seed: u32::arbitrary(g),
                delete: u8::arbitrary(g) % 3 == 0,
            },
            "delete-many" => Op::DeleteMany {
                at,
                seed: u32::arbitrary(g),
                many: Many::ALL[usize::arbitrary(g) % Many::ALL.len()],
                via: via(g),
            },
            "deep-chain" => Op::DeepChain {
                depth: u16::arbitrary(g),
                name: u8::arbitrary(g),
            },
            "on-commit" => Op::OnCommit {
                update: bool::arbitrary(g),
            },
            "handles" => Op::Handles {
                seed: u32::arbitrary(g),
                steps: 4 + u8::arbitrary(g) % 24,
            },
            "commit" => Op::Commit,
            "rollback" => Op::Rollback,
            "drop" => Op::DropTx,
            "panic" => Op::PanicInUpdate {
                n: u8::arbitrary(g) % 8,
            },
            "err-update" => Op::ErrInUpdate {
                n: u8::arbitrary(g) % 8,
            },
            "max-size" => Op::MaxSize {
                n: u8::arbitrary(g) % 8,
            },
            "reopen" => Op::Reopen {
                options: u32::arbitrary(g),
            },
            "read-only" => Op::ReadOnlyReopen {
                compact: bool::arbitrary(g),
            },
            "old-reader" => Op::OldReader,
            "durability" => Op::SetDurability {
                none: u8::arbitrary(g) % 3 != 0,
                one_sync: bool::arbitrary(g),
            },
            "sync" => Op::Sync,
            "vacuum-step" => Op::VacuumStep {
                pages: 1 + u8::arbitrary(g) % 32,
            },
            "vacuum" => Op::Vacuum {
                pages: 1 + u8::arbitrary(g) % 16,
                steps: 1 + u8::arbitrary(g) % 12,
            },
            "crash" => Op::Crash {
                process: bool::arbitrary(g),
                seed: u32::arbitrary(g),
            },
            "compact" => Op::Compact {
                tx_max_size: u16::arbitrary(g),
                page: u8::arbitrary(g),
            },
            "write-to" => Op::WriteTo,
            "copy-file" => Op::CopyFile,
            "batch" => Op::Batch {
                threads: 2 + u8::arbitrary(g) % 5,
                failing: u8::arbitrary(g) % 3 == 0,
            },
            other => unreachable!("no operation {other}"),
        }
    }
}

/// One run: a new file's page size and freelist settings, and the operations.
#[derive(Clone, Debug)]
pub struct Case {
    pub page_size: usize,
    pub freelist: FreelistKind,
    pub no_freelist_sync: bool,
    pub ops: Vec<Op>,
}

/// Operations per case: at least this many...
const OPS_MIN: usize = 80;
/// ...and up to this many more.
const OPS_EXTRA_MAX: usize = 320;

impl Arbitrary for Case {
    fn arbitrary(g: &mut Gen) -> Case {
        let n = OPS_MIN + usize::arbitrary(g) % OPS_EXTRA_MAX;
        Case {
            page_size: PAGE_SIZES[usize::arbitrary(g) % PAGE_SIZES.len()],
            freelist: if bool::arbitrary(g) {
                FreelistKind::Array
            } else {
                FreelistKind::Span
            },
            no_freelist_sync: u8::arbitrary(g) % 4 == 0,
            ops: (0..n).map(|_| Op::arbitrary(g)).collect(),
        }
    }

    fn shrink(&self) -> Box<dyn Iterator<Item = Case>> {
        let Case {
            page_size,
            freelist,
            no_freelist_sync,
            ..
        } = self.clone();
        Box::new(self.ops.shrink().map(move |ops| Case {
            page_size,
            freelist,
            no_freelist_sync,
            ops,
        }))
    }
}

/// A small deterministic generator seeded by an operation's seed: the choices it makes
/// depend on the seed and on the model only.
pub struct Rng(rbolt_fixtures::rng::Rng);

impl Rng {
    /// Stream `salt` of the operation's seed: one a kind of choice.
    pub fn new(seed: u32, salt: u64) -> Rng {
        Rng(rbolt_fixtures::rng::Rng::derive(u64::from(seed), salt))
    }

    pub fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    pub fn below(&mut self, n: usize) -> usize {
        self.0.index(n)
    }

    pub fn percent(&mut self) -> usize {
        self.below(100)
    }
}

fn child_buckets(bucket: &Model) -> Vec<(&Vec<u8>, &Model)> {
    bucket
        .entries
        .iter()
        .filter_map(|(name, item)| match item {
            Item::Bucket(child) => Some((name, child)),
            Item::Value(_) => None,
        })
        .collect()
}

fn value_keys(bucket: &Model) -> Vec<&Vec<u8>> {
    bucket
        .entries
        .iter()
        .filter_map(|(key, item)| matches!(item, Item::Value(_)).then_some(key))
        .collect()
}

/// An existing bucket: a walk down from the root that stops at each level with some
/// chance, or goes to the bottom. `None` when there are no buckets.
pub fn existing_bucket(model: &Model, rng: &mut Rng) -> Option<Path> {
    let to_bottom = rng.percent() < 10;
    let mut path = Vec::new();
    let mut bucket = model;
    loop {
        let children = child_buckets(bucket);
        if children.is_empty() || (!path.is_empty() && !to_bottom && rng.percent() < 40) {
            break;
        }
        let (name, child) = children[rng.below(children.len())];
        path.push(name.clone());
        bucket = child;
    }
    (!path.is_empty()).then_some(path)
}

/// A name absent from `bucket`.
fn missing_name(bucket: Option<&Model>, rng: &mut Rng) -> Vec<u8> {
    loop {
        let name = format!("m{}", rng.below(1000)).into_bytes();
        if bucket.is_none_or(|b| !b.entries.contains_key(&name)) {
            return name;
        }
    }
}

/// A bucket path for an operation: usually an existing bucket; sometimes a missing one, one
/// that crosses a value, or the root (`root_percent` of the time, for operations whose
/// target may be the root).
pub fn bucket_path(model: &Model, seed: u32, root_percent: usize) -> Path {
    let mut rng = Rng::new(seed, 1);
    let roll = rng.percent();
    if roll < root_percent {
        return Vec::new();
    }
    let existing = existing_bucket(model, &mut rng);
    match rng.percent() {
        // With no bucket yet, half the time the root (not writable), half a missing one.
        0..=79 => existing.unwrap_or_else(|| {
            if rng.percent() < 50 {
                Vec::new()
            } else {
                vec![missing_name(Some(model), &mut rng)]
            }
        }),
        80..=89 => {
            // A missing bucket, under an existing one or at the top.
            let mut path = existing.unwrap_or_default();
            let name = missing_name(super::model::bucket_at(model, &path), &mut rng);
            path.push(name);
            if rng.percent() < 30 {
                path.push(b"below".to_vec());
            }
            path
        }
        _ => through_value(model, &mut rng)
            .unwrap_or_else(|| vec![missing_name(Some(model), &mut rng)]),
    }
}

/// A path whose last name (or one before it) holds a value.
pub fn through_value(model: &Model, rng: &mut Rng) -> Option<Path> {
    for _ in 0..4 {
        let path = existing_bucket(model, rng)?;
        let bucket = super::model::bucket_at(model, &path)?;
        let keys = value_keys(bucket);
        if keys.is_empty() {
            continue;
        }
        let mut path = path;
        path.push(keys[rng.below(keys.len())].clone());
        if rng.percent() < 30 {
            path.push(b"below".to_vec());
        }
        return Some(path);
    }
    None
}

/// A name longer than `KEY_SIZE_MAX`.
pub fn name_too_large() -> Vec<u8> {
    vec![b'L'; KEY_SIZE_MAX + 1]
}

/// What a name or key is for: a bucket name, or a key of a value.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Want {
    Name,
    Key,
}

fn pool_name(rng: &mut Rng, want: Want) -> Vec<u8> {
    match want {
        Want::Name => NAMES[rng.below(NAMES.len())].to_vec(),
        Want::Key => format!("k{:02}", rng.below(KEY_POOL_SIZE as usize)).into_bytes(),
    }
}

/// A name or key for an operation on `bucket`: usually from the pool of its kind or an
/// existing entry; sometimes an entry of the other kind, empty, exactly `KEY_SIZE_MAX` long,
/// or longer.
pub fn pick_name(bucket: Option<&Model>, seed: u32, want: Want) -> Vec<u8> {
    let mut rng = Rng::new(seed, 2);
    let (same, other): (Vec<&Vec<u8>>, Vec<&Vec<u8>>) = match bucket {
        None => (Vec::new(), Vec::new()),
        Some(bucket) => {
            let buckets = child_buckets(bucket).into_iter().map(|(n, _)| n).collect();
            let values = value_keys(bucket);
            match want {
                Want::Name => (buckets, values),
                Want::Key => (values, buckets),
            }
        }
    };
    match rng.percent() {
        0..=2 => Vec::new(),
        3..=4 => name_too_large(),
        5 => vec![b'M'; KEY_SIZE_MAX],
        6..=27 if !same.is_empty() => same[rng.below(same.len())].clone(),
        28..=39 if !other.is_empty() => other[rng.below(other.len())].clone(),
        40..=47 => pool_name(
            &mut rng,
            if want == Want::Name {
                Want::Key
            } else {
                Want::Name
            },
        ),
        _ => pool_name(&mut rng, want),
    }
}

/// A value over `VALUE_SIZE_MAX`, allocated once. It is zeroed memory never touched, so the
/// kernel backs it with no pages (as in the facade test `oversized_values_are_refused...`).
pub fn value_too_large() -> &'static [u8] {
    static HUGE: OnceLock<Vec<u8>> = OnceLock::new();
    HUGE.get_or_init(|| vec![0u8; VALUE_SIZE_MAX + 1])
}

/// A value to put: `None` for one over `VALUE_SIZE_MAX`.
pub fn pick_value(seed: u32) -> Option<Vec<u8>> {
    let mut rng = Rng::new(seed, 3);
    let len = match rng.below(200) {
        0..=3 => return None,
        4..=9 => 0,
        10..=150 => 1 + rng.below(40),
        151..=190 => 100 + rng.below(1400),
        _ => 2000 + rng.below(10_000),
    };
    let start = rng.next() as u8;
    Some(
        (0..len)
            .map(|i| start.wrapping_add((i as u8).wrapping_mul(31)))
            .collect(),
    )
}

/// A key to seek to or bound a range with: from the pool, an entry, or anything.
pub fn pick_bound_key(bucket: Option<&Model>, rng: &mut Rng) -> Vec<u8> {
    match rng.percent() {
        0..=39 => {
            if let Some(bucket) = bucket
                && !bucket.entries.is_empty()
            {
                let n = rng.below(bucket.entries.len());
                return bucket.entries.keys().nth(n).expect("n < len").clone();
            }
            pool_name(rng, Want::Key)
        }
        40..=69 => pool_name(rng, Want::Key),
        70..=84 => pool_name(rng, Want::Name),
        85..=89 => Vec::new(),
        _ => {
            let len = rng.below(4);
            (0..len).map(|_| rng.next() as u8).collect()
        }
    }
}
