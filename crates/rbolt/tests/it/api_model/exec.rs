//! Runs the operations that work inside one write transaction, each against the transaction
//! and the model at once, comparing every result (error variant included): bucket creation,
//! deletion and moves, puts and deletes, sequences, deep chains, `on_commit` hooks. The read
//! side is in `reads.rs`.

use super::model::{
    Bytes, CursorModel, ErrKind, Expect, Item, Model, Path, bucket_at, bucket_at_mut, do_move,
    expect_access, expect_create, expect_create_path, expect_delete, expect_delete_bucket,
    expect_get, expect_move, expect_put, height, key_n, res,
};
use super::ops::{
    Op, Rng, SeqAction, Src, Via, Want, bucket_path, existing_bucket, name_too_large, pick_name,
    pick_value, through_value, value_too_large,
};
use super::reads::{cursor, cursor_mut, for_each, moved, on_src, range};
use super::{CHAIN_DEPTH_MIN, NESTING_DEPTH_TESTED_MAX, Tally};
use rbolt::{BucketMut, Db, WriteTx};
use std::cell::RefCell;
use std::fmt::{Debug, Display};
use std::rc::Rc;

/// The operation under way, for failure reports, and the counters.
pub struct Cx<'a> {
    /// The handle, for readers beside the writer (operations run inside a session).
    pub db: Option<&'a Db>,
    pub tally: &'a mut Tally,
    pub index: usize,
    pub op: &'a Op,
    /// What the operation resolved to (paths, names), for a failure report.
    pub detail: String,
}

impl<'a> Cx<'a> {
    pub fn new(tally: &'a mut Tally, index: usize, op: &'a Op) -> Cx<'a> {
        Cx {
            db: None,
            tally,
            index,
            op,
            detail: String::new(),
        }
    }

    pub fn fail(&self, message: impl Display) -> ! {
        panic!(
            "operation #{} {:?} {}: {message}",
            self.index, self.op, self.detail
        )
    }

    pub fn same<T: PartialEq + Debug>(&self, what: &str, actual: &T, expected: &T) {
        if actual != expected {
            self.fail(format_args!(
                "{what}: got {actual:?}, the model says {expected:?}"
            ));
        }
    }

    /// Compares a result with the model's; counts an expected error. Whether it was `Ok`.
    pub fn expect<T: PartialEq + Debug>(
        &mut self,
        what: &str,
        actual: Result<T, ErrKind>,
        expected: Expect<T>,
    ) -> bool {
        match expected {
            Ok(value) => {
                self.same(what, &actual, &Ok(value));
                true
            }
            Err((kind, class)) => {
                self.same(what, &actual, &Err(kind.clone()));
                self.tally.error(&kind, class);
                false
            }
        }
    }
}

/// A hook that ran: its id and, for a hook that writes, the result of its `db.update`.
type HookRun = (u32, Option<Result<(), ErrKind>>);

/// The hooks registered with `on_commit`: which must run at the next commit, and which ran.
#[derive(Default)]
pub struct Hooks {
    next_id: u32,
    /// Registered and not yet run: id and, for a hook that writes, its key.
    pub pending: Vec<(u32, Option<Vec<u8>>)>,
    /// Ran: id and, for a hook that writes, the result of its `db.update`.
    pub log: Rc<RefCell<Vec<HookRun>>>,
}

/// The top-level bucket hooks write into.
pub const HOOK_BUCKET: &[u8] = b"hooks";
const HOOK_VALUE: &[u8] = b"written by an on_commit hook";

impl Hooks {
    fn register<'db>(
        &mut self,
        db: &'db Db,
        tx: &mut WriteTx<'db>,
        update: bool,
        tally: &mut Tally,
    ) {
        let id = self.next_id;
        self.next_id += 1;
        let key = update.then(|| format!("h{id}").into_bytes());
        self.pending.push((id, key.clone()));
        let log = self.log.clone();
        tally.kind("on_commit");
        tx.on_commit(move || {
            let result = key.map(|key| {
                res(db.update(|tx| {
                    tx.create_bucket_if_not_exists(HOOK_BUCKET)?
                        .put(&key, HOOK_VALUE)
                }))
            });
            log.borrow_mut().push((id, result));
        });
    }

    /// After a commit: every pending hook ran once, in order, and each write it made is
    /// applied to `model`. Returns the state after each such write: each is a commit of its
    /// own, which a power loss may keep (one that landed where a meta must sync is durable
    /// whatever the handle's default).
    pub fn committed(
        &mut self,
        model: &mut Model,
        tally: &mut Tally,
    ) -> Result<Vec<Model>, String> {
        let ran = std::mem::take(&mut *self.log.borrow_mut());
        let pending = std::mem::take(&mut self.pending);
        let ran_ids: Vec<u32> = ran.iter().map(|(id, _)| *id).collect();
        let pending_ids: Vec<u32> = pending.iter().map(|(id, _)| *id).collect();
        if ran_ids != pending_ids {
            return Err(format!(
                "on_commit hooks {pending_ids:?} registered, {ran_ids:?} ran"
            ));
        }
        let mut states = Vec::new();
        for ((_, result), (_, key)) in ran.iter().zip(&pending) {
            tally.event("hooks-run");
            let Some(key) = key else { continue };
            if result.as_ref() != Some(&Ok(())) {
                return Err(format!("an on_commit hook's db.update returned {result:?}"));
            }
            tally.kind("on_commit.update");
            let hooks = model
                .entries
                .entry(HOOK_BUCKET.to_vec())
                .or_insert_with(|| Item::Bucket(Model::default()));
            let Item::Bucket(hooks) = hooks else {
                unreachable!("top-level entries are buckets")
            };
            hooks
                .entries
                .insert(key.clone(), Item::Value(HOOK_VALUE.to_vec()));
            states.push(model.clone());
        }
        Ok(states)
    }

    /// After a rollback or a failed commit: no hook ran, and none will.
    pub fn discarded(&mut self) -> Result<(), String> {
        let ran = std::mem::take(&mut *self.log.borrow_mut());
        self.pending.clear();
        if ran.is_empty() {
            Ok(())
        } else {
            Err(format!(
                "on_commit hooks ran without a commit: {:?}",
                ran.iter().map(|(id, _)| id).collect::<Vec<_>>()
            ))
        }
    }
}

/// What can hold buckets: the transaction (top level) and a bucket.
trait Parent {
    fn create(&mut self, name: &[u8], if_not_exists: bool) -> rbolt::Result<BucketMut<'_>>;
    fn remove_bucket(&mut self, name: &[u8]) -> rbolt::Result<()>;
}

impl Parent for WriteTx<'_> {
    fn create(&mut self, name: &[u8], if_not_exists: bool) -> rbolt::Result<BucketMut<'_>> {
        if if_not_exists {
            self.create_bucket_if_not_exists(name)
        } else {
            self.create_bucket(name)
        }
    }

    fn remove_bucket(&mut self, name: &[u8]) -> rbolt::Result<()> {
        self.delete_bucket(name)
    }
}

impl Parent for BucketMut<'_> {
    fn create(&mut self, name: &[u8], if_not_exists: bool) -> rbolt::Result<BucketMut<'_>> {
        if if_not_exists {
            self.create_bucket_if_not_exists(name)
        } else {
            self.create_bucket(name)
        }
    }

    fn remove_bucket(&mut self, name: &[u8]) -> rbolt::Result<()> {
        self.delete_bucket(name)
    }
}

/// A path as it prints in a report.
fn shown(path: &[Vec<u8>]) -> Vec<Bytes> {
    path.iter().map(|n| Bytes(n.clone())).collect()
}

fn slices(path: &[Vec<u8>]) -> Vec<&[u8]> {
    path.iter().map(Vec::as_slice).collect()
}

/// Opens the bucket at `path` for writing the way `via` says and runs `f` on it: `Ok(None)`
/// when a name on the way is missing.
fn with_mut<R>(
    tx: &mut WriteTx<'_>,
    path: &[Vec<u8>],
    via: Via,
    f: impl FnOnce(&mut BucketMut<'_>) -> R,
) -> Result<Option<R>, ErrKind> {
    let names = slices(path);
    match (via, names.split_first()) {
        (Via::Chain, Some((first, rest))) => match res(tx.bucket_mut(first))? {
            None => Ok(None),
            Some(bucket) => descend(bucket, rest, f),
        },
        _ => Ok(res(tx.bucket_path_mut(&names))?.map(|mut bucket| f(&mut bucket))),
    }
}

/// One level of `with_mut`'s walk by `BucketMut::bucket_mut`. (A test helper: it recurses as
/// deep as the path, at most `NESTING_DEPTH_TESTED_MAX` levels.)
fn descend<R>(
    mut bucket: BucketMut<'_>,
    rest: &[&[u8]],
    f: impl FnOnce(&mut BucketMut<'_>) -> R,
) -> Result<Option<R>, ErrKind> {
    match rest.split_first() {
        None => Ok(Some(f(&mut bucket))),
        Some((name, rest)) => match res(bucket.bucket_mut(name))? {
            None => Ok(None),
            Some(child) => descend(child, rest, f),
        },
    }
}

/// Opens the bucket at `path` for writing, checks the opening against the model, and runs
/// `f` on the bucket when the model says it opens. `None` when the operation ends there.
pub fn on_bucket_mut<R>(
    tx: &mut WriteTx<'_>,
    model: &Model,
    path: &[Vec<u8>],
    via: Via,
    cx: &mut Cx<'_>,
    f: impl FnOnce(&mut BucketMut<'_>, &mut Cx<'_>) -> R,
) -> Option<R> {
    let expected = expect_access(model, path).map(|bucket| bucket.is_some());
    match via {
        Via::Path => cx.tally.kind("bucket_path_mut"),
        Via::Chain if path.len() > 1 => cx.tally.kind("bucket_mut(nested)"),
        Via::Chain => cx.tally.kind("bucket_mut(tx)"),
    }
    let actual = with_mut(tx, path, via, |bucket| f(bucket, cx));
    match (expected, actual) {
        (Ok(true), Ok(Some(result))) => Some(result),
        (Ok(false), Ok(None)) => None,
        (Err((kind, class)), Err(actual)) if kind == actual => {
            cx.tally.error(&kind, class);
            None
        }
        (expected, actual) => cx.fail(format_args!(
            "opening {path:?} for writing via {via:?}: got {:?}, the model says {expected:?}",
            actual.map(|r| r.is_some())
        )),
    }
}

/// Runs `op`, which works inside one transaction, on `tx` and on `model`.
pub fn apply<'db>(
    db: &'db Db,
    tx: &mut WriteTx<'db>,
    model: &mut Model,
    committed: &Model,
    hooks: &mut Hooks,
    cx: &mut Cx<'_>,
) {
    let op = cx.op;
    match op {
        Op::Put {
            at,
            key,
            value,
            via,
        } => put(tx, model, *at, *key, *value, *via, cx),
        Op::Delete { at, key, via } => delete(tx, model, *at, *key, *via, cx),
        Op::CreateBucket {
            at,
            name,
            if_not_exists,
            via,
            then_put,
        } => create_bucket(tx, model, (*at, *name, *then_put), *if_not_exists, *via, cx),
        Op::DeleteBucket { at, name, via } => delete_bucket(tx, model, *at, *name, *via, cx),
        Op::MoveBucket { from, to } => move_bucket(tx, model, *from, *to, cx),
        Op::CreatePath { at, names, len } => create_path(tx, model, *at, names, *len, cx),
        Op::Access { at, via } => {
            let path = bucket_path(model, *at, 5);
            let expected = bucket_at(model, &path).map(|b| b.sequence);
            if let Some(sequence) = on_bucket_mut(tx, model, &path, *via, cx, |b, _| b.sequence()) {
                cx.same("sequence of the bucket opened", &Some(sequence), &expected);
            }
        }
        Op::Get { at, key, src } => {
            let key = *key;
            on_src(tx, model, committed, *at, *src, cx, |bucket, m, cx| {
                let key = pick_name(Some(m), key, Want::Key);
                cx.tally.kind("get");
                let actual = res(bucket.get(&key)).map(|v| v.map(|v| Bytes(v.to_vec())));
                cx.same("get", &actual, &Ok(expect_get(m, &key)));
            });
        }
        Op::Cursor { at, src, moves } => match src {
            Src::WriteMut => cursor_mut(tx, model, *at, moves, cx),
            _ => on_src(tx, model, committed, *at, *src, cx, |bucket, m, cx| {
                cursor(bucket, m, moves, cx);
            }),
        },
        Op::Range {
            at,
            src,
            bounds,
            order,
        } => {
            let (bounds, order) = (*bounds, *order);
            on_src(tx, model, committed, *at, *src, cx, |bucket, m, cx| {
                range(bucket, m, bounds, order, cx);
            });
        }
        Op::Sequence { at, via, action } => sequence(tx, model, *at, *via, *action, cx),
        Op::ForEach {
            at,
            src,
            stop,
            buckets_only,
        } => for_each(tx, model, committed, *at, *src, *stop, *buckets_only, cx),
        Op::Stats { at, src } => {
            on_src(tx, model, committed, *at, *src, cx, |bucket, m, cx| {
                cx.tally.kind("stats");
                let stats = res(bucket.stats()).map(|s| (s.key_n, s.bucket_n));
                cx.same(
                    "stats (key_n, bucket_n)",
                    &stats,
                    &Ok((key_n(m), super::model::bucket_n(m))),
                );
            });
        }
        Op::Bulk {
            at,
            n,
            seed,
            delete,
        } => bulk(tx, model, *at, usize::from(*n), *seed, *delete, cx),
        Op::DeleteMany {
            at,
            seed,
            many,
            via,
        } => super::many::delete_many(tx, model, (*at, *seed), *many, *via, cx),
        Op::DeepChain { depth, name } => deep_chain(tx, model, *depth, *name, cx),
        Op::OnCommit { update } => hooks.register(db, tx, *update, cx.tally),
        Op::SetDurability { none, one_sync } => {
            cx.tally.kind("set_durability");
            let durability = if *none {
                rbolt::Durability::None
            } else if *one_sync {
                rbolt::Durability::OneSync
            } else {
                rbolt::Durability::Immediate
            };
            tx.set_durability(durability);
            cx.same("the durability set", &tx.durability(), &durability);
        }
        Op::Handles { seed, steps } => super::handles::handles(tx, model, *seed, *steps, cx),
        other => unreachable!("{other:?} does not run inside a transaction"),
    }
}

fn put(
    tx: &mut WriteTx<'_>,
    model: &mut Model,
    at: u32,
    key: u32,
    value: u32,
    via: Via,
    cx: &mut Cx<'_>,
) {
    let path = bucket_path(model, at, 4);
    let target = bucket_at(model, &path);
    let key = pick_name(target, key, Want::Key);
    let value = pick_value(value);
    let bytes = value.as_deref().unwrap_or_else(|| value_too_large());
    let expected = target.map(|t| expect_put(t, &key, bytes.len()));
    cx.detail = format!(
        "(put {:?} = {} bytes into {:?})",
        Bytes(key.clone()),
        bytes.len(),
        shown(&path)
    );
    let Some(actual) = on_bucket_mut(tx, model, &path, via, cx, |b, _| res(b.put(&key, bytes)))
    else {
        return;
    };
    cx.tally.kind("put");
    if cx.expect("put", actual, expected.expect("the bucket exists")) {
        let value = value.expect("a value over the limit is refused");
        bucket_at_mut(model, &path)
            .entries
            .insert(key, Item::Value(value));
    }
}

fn delete(tx: &mut WriteTx<'_>, model: &mut Model, at: u32, key: u32, via: Via, cx: &mut Cx<'_>) {
    let path = bucket_path(model, at, 4);
    let target = bucket_at(model, &path);
    let key = pick_name(target, key, Want::Key);
    let expected = target.map(|t| expect_delete(t, &key));
    cx.detail = format!("(delete {:?} in {:?})", Bytes(key.clone()), shown(&path));
    let Some(actual) = on_bucket_mut(tx, model, &path, via, cx, |b, _| res(b.delete(&key))) else {
        return;
    };
    cx.tally.kind("delete");
    if cx.expect("delete", actual, expected.expect("the bucket exists")) {
        bucket_at_mut(model, &path).entries.remove(&key);
    }
}

/// What a create (and the put into the bucket it returns) gave.
type Created = (
    Result<(), ErrKind>,
    Option<(Result<(), ErrKind>, Result<Option<Bytes>, ErrKind>)>,
);

fn create_in(
    parent: &mut dyn Parent,
    name: &[u8],
    if_not_exists: bool,
    then_put: Option<(&[u8], &[u8])>,
) -> Created {
    match parent.create(name, if_not_exists) {
        Err(error) => (Err(ErrKind::of(&error)), None),
        Ok(mut bucket) => {
            let put = then_put.map(|(key, value)| {
                let put = res(bucket.put(key, value));
                let got = res(bucket.get(key)).map(|v| v.map(|v| Bytes(v.to_vec())));
                (put, got)
            });
            (Ok(()), put)
        }
    }
}

/// `create_bucket_path` below an existing, missing or root path; on success every missing
/// bucket of the path is created in the model, on failure nothing (the harness compares the
/// whole transaction with the model after every operation).
fn create_path(
    tx: &mut WriteTx<'_>,
    model: &mut Model,
    at: u32,
    names: &[u32; 3],
    len: u8,
    cx: &mut Cx<'_>,
) {
    let mut path = bucket_path(model, at, 30);
    if path.len() + usize::from(len) > NESTING_DEPTH_TESTED_MAX {
        cx.tally.skip("nesting-past-tested-max");
        return;
    }
    for &seed in &names[..usize::from(len)] {
        let name = pick_name(bucket_at(model, &path), seed, Want::Name);
        path.push(name);
    }
    cx.detail = format!("(create_bucket_path {:?})", shown(&path));
    cx.tally.kind("create_bucket_path");
    let expected = expect_create_path(model, &path);
    let actual = res(tx.create_bucket_path(&path).map(drop));
    if !cx.expect("create_bucket_path", actual, expected) {
        return;
    }
    for depth in 1..=path.len() {
        bucket_at_mut(model, &path[..depth - 1])
            .entries
            .entry(path[depth - 1].clone())
            .or_insert_with(|| Item::Bucket(Model::default()));
    }
}

fn create_bucket(
    tx: &mut WriteTx<'_>,
    model: &mut Model,
    (at, name, then_put): (u32, u32, u32),
    if_not_exists: bool,
    via: Via,
    cx: &mut Cx<'_>,
) {
    let parent = bucket_path(model, at, 40);
    if parent.len() + 1 > NESTING_DEPTH_TESTED_MAX {
        cx.tally.skip("nesting-past-tested-max");
        return;
    }
    let target = bucket_at(model, &parent);
    let name = pick_name(target, name, Want::Name);
    let expected = target.map(|t| expect_create(t, &name, if_not_exists));
    cx.detail = format!("(create {:?} in {:?})", Bytes(name.clone()), shown(&parent));
    // Half the time, a put into the bucket returned.
    let child = target.and_then(|t| super::model::bucket_at(t, std::slice::from_ref(&name)));
    let put = (then_put % 2 == 0).then(|| {
        let key = pick_name(child, then_put, Want::Key);
        let value = pick_value(then_put).unwrap_or_default();
        (key, value)
    });
    let put_ref = put.as_ref().map(|(k, v)| (k.as_slice(), v.as_slice()));
    let label = if if_not_exists {
        "create_bucket_if_not_exists"
    } else {
        "create_bucket"
    };
    let actual = if parent.is_empty() {
        cx.tally.kind(if if_not_exists {
            "create_bucket_if_not_exists(tx)"
        } else {
            "create_bucket(tx)"
        });
        create_in(tx, &name, if_not_exists, put_ref)
    } else {
        let Some(actual) = on_bucket_mut(tx, model, &parent, via, cx, |b, _| {
            create_in(b, &name, if_not_exists, put_ref)
        }) else {
            return;
        };
        cx.tally.kind(if if_not_exists {
            "create_bucket_if_not_exists(nested)"
        } else {
            "create_bucket(nested)"
        });
        actual
    };
    let expected = expected.expect("the parent exists");
    let (created, put_result) = actual;
    if !cx.expect(label, created, expected.clone().map(|_| ())) {
        return;
    }
    let mut path = parent;
    path.push(name.clone());
    if expected == Ok(true) {
        bucket_at_mut(model, &path[..path.len() - 1])
            .entries
            .insert(name, Item::Bucket(Model::default()));
    }
    if let Some((key, value)) = put {
        let (put_actual, got) = put_result.expect("a put was made");
        let bucket = bucket_at(model, &path).expect("just created or existing");
        cx.tally.kind("put");
        if cx.expect(
            "put into the bucket create returned",
            put_actual,
            expect_put(bucket, &key, value.len()),
        ) {
            bucket_at_mut(model, &path)
                .entries
                .insert(key.clone(), Item::Value(value));
        }
        let bucket = bucket_at(model, &path).expect("exists");
        cx.same("get after the put", &got, &Ok(expect_get(bucket, &key)));
    }
}

fn delete_bucket(
    tx: &mut WriteTx<'_>,
    model: &mut Model,
    at: u32,
    name: u32,
    via: Via,
    cx: &mut Cx<'_>,
) {
    let parent = bucket_path(model, at, 40);
    let target = bucket_at(model, &parent);
    let name = pick_name(target, name, Want::Name);
    let expected = target.map(|t| expect_delete_bucket(t, &name));
    cx.detail = format!(
        "(delete bucket {:?} in {:?})",
        Bytes(name.clone()),
        shown(&parent)
    );
    let actual = if parent.is_empty() {
        cx.tally.kind("delete_bucket(tx)");
        res(tx.remove_bucket(&name))
    } else {
        let Some(actual) = on_bucket_mut(tx, model, &parent, via, cx, |b, _| {
            res(b.remove_bucket(&name))
        }) else {
            return;
        };
        cx.tally.kind("delete_bucket(nested)");
        actual
    };
    if cx.expect(
        "delete_bucket",
        actual,
        expected.expect("the parent exists"),
    ) {
        bucket_at_mut(model, &parent).entries.remove(&name);
    }
}

/// The source and destination of a move: mostly real buckets and free names, and each way
/// a move can be refused.
fn move_paths(model: &Model, from: u32, to: u32) -> (Path, Path) {
    let mut rng = Rng::new(from, 4);
    let existing = existing_bucket(model, &mut rng);
    let from: Path = match rng.percent() {
        0..=84 => existing.unwrap_or_else(|| vec![b"a".to_vec()]),
        85..=91 => {
            let mut path = existing.unwrap_or_default();
            path.pop();
            path.push(b"missing".to_vec());
            path
        }
        92..=96 => through_value(model, &mut rng).unwrap_or_else(|| vec![b"missing".to_vec()]),
        _ => Vec::new(),
    };
    let mut rng = Rng::new(to, 5);
    let named = |mut parent: Path, rng: &mut Rng| {
        let name = pick_name(bucket_at(model, &parent), rng.next() as u32, Want::Name);
        parent.push(name);
        parent
    };
    let to = match rng.percent() {
        0..=29 => named(Vec::new(), &mut rng),
        30..=54 => {
            let parent = existing_bucket(model, &mut rng).unwrap_or_default();
            named(parent, &mut rng)
        }
        55..=60 => from.clone(),
        61..=67 => {
            // Into itself: a bucket below the source, or a name right in it.
            let mut parent = from.clone();
            if let Some(below) = bucket_at(model, &from).and_then(|b| existing_bucket(b, &mut rng))
            {
                parent.extend(below);
            }
            named(parent, &mut rng)
        }
        68..=73 => {
            // A missing parent.
            let mut parent = existing_bucket(model, &mut rng).unwrap_or_default();
            parent.push(b"missing".to_vec());
            named(parent, &mut rng)
        }
        74..=79 => {
            // A parent that holds a value (or a missing one, when there are no values).
            let parent =
                through_value(model, &mut rng).unwrap_or_else(|| vec![b"missing".to_vec()]);
            named(parent, &mut rng)
        }
        80..=83 => {
            let mut parent = existing_bucket(model, &mut rng).unwrap_or_default();
            parent.push(Vec::new());
            parent
        }
        84..=87 => {
            let mut parent = existing_bucket(model, &mut rng).unwrap_or_default();
            parent.push(name_too_large());
            parent
        }
        88..=96 => {
            // A rename in place.
            let parent = from
                .split_last()
                .map(|(_, p)| p.to_vec())
                .unwrap_or_default();
            named(parent, &mut rng)
        }
        _ => Vec::new(),
    };
    (from, to)
}

fn move_bucket(tx: &mut WriteTx<'_>, model: &mut Model, from: u32, to: u32, cx: &mut Cx<'_>) {
    let (from, to) = move_paths(model, from, to);
    let expected = expect_move(model, &from, &to);
    cx.detail = format!(
        "(move {:?} to {:?}, the model says {expected:?})",
        shown(&from),
        shown(&to)
    );
    if expected.is_ok() {
        let moved = bucket_at(model, &from).expect("a checked move");
        if to.len() + height(moved) > NESTING_DEPTH_TESTED_MAX {
            cx.tally.skip("nesting-past-tested-max");
            return;
        }
    }
    cx.tally.kind("move_bucket");
    let actual = res(tx.move_bucket(&slices(&from), &slices(&to)));
    if cx.expect("move_bucket", actual, expected) {
        do_move(model, &from, &to);
    }
}

/// Keys of bulk puts: `n0000` to `n1999`, so that bulks overlap.
const BULK_KEY_SPACE: usize = 2000;

fn bulk(
    tx: &mut WriteTx<'_>,
    model: &mut Model,
    at: u32,
    n: usize,
    seed: u32,
    delete: bool,
    cx: &mut Cx<'_>,
) {
    let path = bucket_path(model, at, 3);
    let Some(mut target) = bucket_at(model, &path).cloned() else {
        // Missing or through a value: the opening is what is compared.
        on_bucket_mut(tx, model, &path, Via::Path, cx, |_, _| ());
        return;
    };
    cx.detail = format!("(bulk of {n} in {:?})", shown(&path));
    let mut rng = Rng::new(seed, 10);
    let by_cursor = rng.percent() < 50;
    let done = on_bucket_mut(tx, model, &path, Via::Path, cx, |bucket, cx| {
        if !delete {
            cx.tally.kind("bulk.put");
            for _ in 0..n {
                let key = format!("n{:04}", rng.below(BULK_KEY_SPACE)).into_bytes();
                let value = vec![rng.next() as u8; rng.below(200)];
                let expected = expect_put(&target, &key, value.len());
                if cx.expect("bulk put", res(bucket.put(&key, &value)), expected) {
                    target.entries.insert(key, Item::Value(value));
                }
            }
            return target;
        }
        // A run of `n` entries from a random one.
        let keys: Vec<Vec<u8>> = target.entries.keys().cloned().collect();
        let Some(first) = (!keys.is_empty()).then(|| keys[rng.below(keys.len())].clone()) else {
            return target;
        };
        if !by_cursor {
            cx.tally.kind("bulk.delete");
            for key in keys.iter().filter(|k| **k >= first).take(n) {
                let expected = expect_delete(&target, key);
                if cx.expect("bulk delete", res(bucket.delete(key)), expected) {
                    target.entries.remove(key);
                }
            }
            return target;
        }
        // By a cursor that deletes each value it lands on and steps over buckets.
        cx.tally.kind("bulk.cursor_mut.delete");
        let mut cursor = bucket.cursor_mut();
        let mut expected = CursorModel::new();
        let mut at = moved(cursor.seek(&first));
        cx.same("cursor_mut seek", &at, &Ok(expected.seek(&target, &first)));
        for step in 0..n {
            let Ok(Some((key, value))) = at else { break };
            if value.is_some() {
                cx.same(
                    &format!("cursor_mut delete at step {step}"),
                    &res(cursor.delete()),
                    &Ok(true),
                );
                target.entries.remove(&key.0);
                cx.same(
                    "cursor_mut current after a delete",
                    &moved(cursor.current()),
                    &Ok(None),
                );
            }
            at = moved(cursor.next());
            cx.same(
                &format!("cursor_mut next at step {step}"),
                &at,
                &Ok(expected.next(&target)),
            );
        }
        target
    });
    if let Some(target) = done {
        *bucket_at_mut(model, &path) = target;
    }
}

fn sequence(
    tx: &mut WriteTx<'_>,
    model: &mut Model,
    at: u32,
    via: Via,
    action: SeqAction,
    cx: &mut Cx<'_>,
) {
    let path = bucket_path(model, at, 3);
    let current = bucket_at(model, &path).map(|b| b.sequence);
    let Some(actual) = on_bucket_mut(tx, model, &path, via, cx, |b, cx| match action {
        SeqAction::Get => {
            cx.tally.kind("sequence");
            Ok(b.sequence())
        }
        SeqAction::Set(value) => {
            cx.tally.kind("set_sequence");
            res(b.set_sequence(value)).map(|()| value)
        }
        SeqAction::Next => {
            cx.tally.kind("next_sequence");
            res(b.next_sequence())
        }
    }) else {
        return;
    };
    let current = current.expect("the bucket exists");
    let expected = match action {
        SeqAction::Get => current,
        SeqAction::Set(value) => value,
        SeqAction::Next => current.wrapping_add(1),
    };
    cx.same("sequence", &actual, &Ok(expected));
    bucket_at_mut(model, &path).sequence = expected;
    // The read view shows it too.
    let mut view = Some(tx.root());
    for name in &path {
        view = view.and_then(|b| b.bucket(name).ok().flatten());
    }
    let seen = view.map(|b| b.sequence());
    cx.same("sequence in the read view", &seen, &Some(expected));
}

/// Builds `levels` nested buckets named `c` below `bucket`, a value at the bottom.
fn build_chain(bucket: &mut BucketMut<'_>, levels: usize) -> rbolt::Result<()> {
    // Iterating would need to hold a chain of borrows; recursion is bounded by the chain
    // length, at most `NESTING_DEPTH_TESTED_MAX`.
    if levels == 0 {
        bucket.put(b"bottom", b"of the chain")?;
        return bucket.set_sequence(7);
    }
    let mut child = bucket.create_bucket(b"c")?;
    build_chain(&mut child, levels - 1)
}

fn deep_chain(tx: &mut WriteTx<'_>, model: &mut Model, depth: u16, name: u8, cx: &mut Cx<'_>) {
    let span = NESTING_DEPTH_TESTED_MAX - CHAIN_DEPTH_MIN;
    // Levels below the top-level bucket.
    let levels = CHAIN_DEPTH_MIN + usize::from(depth) % span;
    let name = format!("z{}", name % 3).into_bytes();
    cx.tally.kind("deep-chain");
    let expected = expect_create(model, &name, false);
    let actual = match tx.create_bucket(&name) {
        Err(error) => Err(ErrKind::of(&error)),
        Ok(mut bucket) => {
            let built = res(build_chain(&mut bucket, levels));
            cx.same("building a chain of buckets", &built, &Ok(()));
            Ok(true)
        }
    };
    if !cx.expect("create_bucket (top of a chain)", actual, expected) {
        return;
    }
    cx.tally.event("deep-chains");
    cx.tally.depth(levels + 1);
    let mut chain = Model {
        sequence: 7,
        ..Model::default()
    };
    chain
        .entries
        .insert(b"bottom".to_vec(), Item::Value(b"of the chain".to_vec()));
    for _ in 0..levels {
        let mut parent = Model::default();
        parent.entries.insert(b"c".to_vec(), Item::Bucket(chain));
        chain = parent;
    }
    model.entries.insert(name, Item::Bucket(chain));
}
