//! The read side of the API against the model: read views walked by path, cursors (and
//! `CursorMut`, which deletes), ranges from both ends, `for_each` with a callback that
//! stops, `stats`; and the comparison of a whole bucket tree with the model.

use super::exec::{Cx, on_bucket_mut};
use super::model::{
    Bytes, Class, CursorModel, Ent, ErrKind, Expect, Item, Model, bucket_at, bucket_at_mut, ent_of,
    model_ent, range_entries, res,
};
use super::ops::{Move, Rng, Src, Via, bucket_path, pick_bound_key};
use rbolt::{Bucket, Error, WriteTx};
use std::fmt::Debug;
use std::ops::Bound;

/// Walks read views from `root` down `path` with `Bucket::bucket` beside the model, and runs
/// `f` on the bucket reached, if the model has it (a value on the way reads as no bucket).
fn on_view(
    root: Bucket<'_>,
    model: &Model,
    path: &[Vec<u8>],
    cx: &mut Cx<'_>,
    f: impl FnOnce(Bucket<'_>, &Model, &mut Cx<'_>),
) {
    let mut bucket = root;
    let mut expected = model;
    for name in path {
        cx.tally.kind("bucket(view)");
        let model_child = match expected.entries.get(name) {
            Some(Item::Bucket(child)) => Some(child),
            _ => None,
        };
        match (res(bucket.bucket(name)), model_child) {
            (Ok(Some(child)), Some(model_child)) => {
                bucket = child;
                expected = model_child;
            }
            (Ok(None), None) => return,
            (actual, _) => cx.fail(format_args!(
                "bucket({:?}) on the way to {path:?}: got {:?}, the model has {}",
                Bytes(name.clone()),
                actual.map(|b| b.is_some()),
                if model_child.is_some() {
                    "a bucket"
                } else {
                    "none"
                }
            )),
        }
    }
    f(bucket, expected, cx);
}

/// Runs a read-only operation on the bucket at a path picked from the model `src` reads.
pub fn on_src(
    tx: &mut WriteTx<'_>,
    model: &Model,
    committed: &Model,
    at: u32,
    src: Src,
    cx: &mut Cx<'_>,
    f: impl FnOnce(Bucket<'_>, &Model, &mut Cx<'_>),
) {
    match src {
        Src::Write => {
            let path = bucket_path(model, at, 10);
            on_view(tx.root(), model, &path, cx, f);
        }
        Src::Read => {
            let path = bucket_path(committed, at, 10);
            let read = cx
                .db
                .expect("a session's handle")
                .begin_read()
                .expect("begin_read beside a writer");
            on_view(read.root(), committed, &path, cx, f);
        }
        Src::WriteMut => {
            let path = bucket_path(model, at, 3);
            let target = bucket_at(model, &path).cloned();
            on_bucket_mut(tx, model, &path, Via::Path, cx, |bucket, cx| {
                let target = target.expect("the model has the bucket");
                f(bucket.as_bucket(), &target, cx);
            });
        }
    }
}

/// Reads a cursor's move as an entry.
pub fn moved(entry: rbolt::Result<Option<rbolt::Entry<'_>>>) -> Result<Option<Ent>, ErrKind> {
    res(entry).map(|e| e.as_ref().map(ent_of))
}

pub fn cursor(bucket: Bucket<'_>, model: &Model, moves: &[Move], cx: &mut Cx<'_>) {
    let mut cursor = bucket.cursor();
    let mut expected = CursorModel::new();
    for (step, m) in moves.iter().enumerate() {
        let (name, actual, wanted) = match m {
            Move::First => ("first", moved(cursor.first()), expected.first(model)),
            Move::Last => ("last", moved(cursor.last()), expected.last(model)),
            Move::Next | Move::Delete => ("next", moved(cursor.next()), expected.next(model)),
            Move::Prev => ("prev", moved(cursor.prev()), expected.prev(model)),
            Move::Seek(seed) => {
                let key = pick_bound_key(Some(model), &mut Rng::new(*seed, 6));
                ("seek", moved(cursor.seek(&key)), expected.seek(model, &key))
            }
            Move::Current => ("current", moved(cursor.current()), expected.current(model)),
        };
        cx.tally.kind(match name {
            "seek" => "cursor.seek",
            "current" => "cursor.current",
            "prev" | "last" => "cursor.backward",
            _ => "cursor.forward",
        });
        cx.same(
            &format!("cursor step {step} ({name})"),
            &actual,
            &Ok(wanted),
        );
    }
}

pub fn cursor_mut(
    tx: &mut WriteTx<'_>,
    model: &mut Model,
    at: u32,
    moves: &[Move],
    cx: &mut Cx<'_>,
) {
    let path = bucket_path(model, at, 3);
    let Some(mut target) = bucket_at(model, &path).cloned() else {
        // Missing or through a value: the opening is what is compared.
        on_bucket_mut(tx, model, &path, Via::Path, cx, |_, _| ());
        return;
    };
    let done = on_bucket_mut(tx, model, &path, Via::Path, cx, |bucket, cx| {
        let mut cursor = bucket.cursor_mut();
        let mut expected = CursorModel::new();
        for (step, m) in moves.iter().enumerate() {
            let (name, actual, wanted) = match m {
                Move::First => ("first", moved(cursor.first()), expected.first(&target)),
                Move::Last => ("last", moved(cursor.last()), expected.last(&target)),
                Move::Next => ("next", moved(cursor.next()), expected.next(&target)),
                Move::Prev => ("prev", moved(cursor.prev()), expected.prev(&target)),
                Move::Seek(seed) => {
                    let key = pick_bound_key(Some(&target), &mut Rng::new(*seed, 6));
                    let actual = moved(cursor.seek(&key));
                    ("seek", actual, expected.seek(&target, &key))
                }
                Move::Current => (
                    "current",
                    moved(cursor.current()),
                    expected.current(&target),
                ),
                Move::Delete => {
                    cx.tally.kind("cursor_mut.delete");
                    let wanted: Expect<bool> = match expected.key() {
                        None => Ok(false),
                        Some(key) => match target.entries.get(key) {
                            None => Ok(false),
                            Some(Item::Value(_)) => Ok(true),
                            Some(Item::Bucket(_)) => {
                                Err((ErrKind::IncompatibleValue, Class::CursorDeleteBucket))
                            }
                        },
                    };
                    let actual = res(cursor.delete());
                    let failed = wanted.is_err();
                    if cx.expect(&format!("cursor_mut step {step} (delete)"), actual, wanted)
                        && let Some(key) = expected.key()
                    {
                        let key = key.to_vec();
                        target.entries.remove(&key);
                    }
                    if failed {
                        // The transaction is compared with the model after the operation.
                        return target;
                    }
                    continue;
                }
            };
            cx.tally.kind(match name {
                "seek" => "cursor_mut.seek",
                "prev" | "last" => "cursor_mut.backward",
                _ => "cursor_mut.forward",
            });
            cx.same(
                &format!("cursor_mut step {step} ({name})"),
                &actual,
                &Ok(wanted),
            );
        }
        target
    });
    if let Some(target) = done {
        *bucket_at_mut(model, &path) = target;
    }
}

fn bound(kind: u64, key: &[u8]) -> Bound<&[u8]> {
    match kind % 3 {
        0 => Bound::Unbounded,
        1 => Bound::Included(key),
        _ => Bound::Excluded(key),
    }
}

fn item_of(entry: Option<rbolt::Result<rbolt::Entry<'_>>>) -> Option<Result<Ent, ErrKind>> {
    entry.map(|e| res(e).map(|e| ent_of(&e)))
}

pub fn range(bucket: Bucket<'_>, model: &Model, bounds: u32, order: u32, cx: &mut Cx<'_>) {
    let mut rng = Rng::new(bounds, 7);
    let start_key = pick_bound_key(Some(model), &mut rng);
    let end_key = pick_bound_key(Some(model), &mut rng);
    let (start, end) = (bound(rng.next(), &start_key), bound(rng.next(), &end_key));
    let unbounded = matches!((start, end), (Bound::Unbounded, Bound::Unbounded));
    let mut iter = if unbounded && rng.percent() < 50 {
        cx.tally.kind("iter");
        bucket.iter()
    } else {
        cx.tally.kind("range");
        bucket.range::<&[u8]>((start, end))
    };
    let mut expected = range_entries(model, start, end);
    let mut order = Rng::new(order, 8);
    let mode = order.below(4);
    // Past the end twice: an exhausted iterator stays exhausted.
    let steps = expected.len() + 2;
    for step in 0..steps {
        let forward = match mode {
            0 => true,
            1 => false,
            2 => order.percent() < 50,
            _ => step % 3 != 2,
        };
        let (actual, wanted) = if forward {
            cx.tally.kind("iter.next");
            (item_of(iter.next()), expected.pop_front().map(Ok))
        } else {
            cx.tally.kind("iter.next_back");
            (item_of(iter.next_back()), expected.pop_back().map(Ok))
        };
        cx.same(
            &format!(
                "{} step {step} of the range ({start:?}, {end:?}) ({})",
                if unbounded { "iter" } else { "range" },
                if forward { "next" } else { "next_back" }
            ),
            &actual,
            &wanted,
        );
    }
}

/// The error a `for_each` callback returns to stop the walk.
fn stop_error() -> Error {
    Error::SameBuckets
}

#[expect(
    clippy::too_many_arguments,
    reason = "one operation's parameters, passed through"
)]
pub fn for_each(
    tx: &mut WriteTx<'_>,
    model: &Model,
    committed: &Model,
    at: u32,
    src: Src,
    stop: Option<u8>,
    buckets_only: bool,
    cx: &mut Cx<'_>,
) {
    let stop = stop.map(usize::from);
    if matches!(src, Src::Read) && bucket_path(committed, at, 10).is_empty() {
        // `ReadTx::for_each`: the top-level buckets and their sequences.
        cx.tally.kind("tx.for_each");
        let read = cx
            .db
            .expect("a session's handle")
            .begin_read()
            .expect("begin_read beside a writer");
        let mut calls = Vec::new();
        let actual = res(read.for_each(|name, bucket| {
            calls.push((Bytes(name.to_vec()), bucket.sequence()));
            if Some(calls.len() - 1) == stop {
                return Err(stop_error());
            }
            Ok(())
        }));
        let all: Vec<(Bytes, u64)> = committed
            .entries
            .iter()
            .filter_map(|(name, item)| match item {
                Item::Bucket(b) => Some((Bytes(name.clone()), b.sequence)),
                Item::Value(_) => None,
            })
            .collect();
        check_walk(cx, "ReadTx::for_each", actual, &calls, &all, stop);
        return;
    }
    on_src(tx, model, committed, at, src, cx, |bucket, m, cx| {
        if buckets_only {
            cx.tally.kind("for_each_bucket");
            let mut calls = Vec::new();
            let actual = res(bucket.for_each_bucket(|name| {
                calls.push(Bytes(name.to_vec()));
                if Some(calls.len() - 1) == stop {
                    return Err(stop_error());
                }
                Ok(())
            }));
            let all: Vec<Bytes> = m
                .entries
                .iter()
                .filter(|(_, item)| matches!(item, Item::Bucket(_)))
                .map(|(name, _)| Bytes(name.clone()))
                .collect();
            check_walk(cx, "for_each_bucket", actual, &calls, &all, stop);
        } else {
            cx.tally.kind("for_each");
            let mut calls = Vec::new();
            let actual = res(bucket.for_each(|key, value| {
                calls.push((Bytes(key.to_vec()), value.map(|v| Bytes(v.to_vec()))));
                if Some(calls.len() - 1) == stop {
                    return Err(stop_error());
                }
                Ok(())
            }));
            let all: Vec<Ent> = m.entries.iter().map(|(k, i)| model_ent(k, i)).collect();
            check_walk(cx, "for_each", actual, &calls, &all, stop);
        }
    });
}

/// A walk with a callback saw every item, or stopped with the callback's error right after
/// the one it was told to stop at.
fn check_walk<T: PartialEq + Debug>(
    cx: &mut Cx<'_>,
    what: &str,
    actual: Result<(), ErrKind>,
    calls: &[T],
    all: &[T],
    stop: Option<usize>,
) {
    match stop {
        Some(stop) if stop < all.len() => {
            cx.expect(
                what,
                actual,
                Err((ErrKind::of(&stop_error()), Class::CallbackError)),
            );
            cx.same(&format!("{what} calls"), &calls, &&all[..=stop]);
        }
        _ => {
            cx.same(what, &actual, &Ok(()));
            cx.same(&format!("{what} calls"), &calls, &all);
        }
    }
}

/// Compares every bucket, key, value and sequence under `root` with `model`. Walks with an
/// explicit stack: chains of buckets may be deep.
pub fn compare_tree(root: Bucket<'_>, model: &Model) -> Result<(), String> {
    // Names of the buckets visited, each with its parent's index, to name a path in a report.
    let mut names: Vec<(usize, &[u8])> = vec![(usize::MAX, b"")];
    let path_of = |names: &[(usize, &[u8])], mut id: usize| {
        let mut path = Vec::new();
        while id != 0 {
            path.push(Bytes(names[id].1.to_vec()));
            id = names[id].0;
        }
        path.reverse();
        path
    };
    let mut stack = vec![(root, model, 0usize)];
    while let Some((bucket, expected, id)) = stack.pop() {
        if bucket.sequence() != expected.sequence {
            return Err(format!(
                "bucket {:?}: sequence {}, the model says {}",
                path_of(&names, id),
                bucket.sequence(),
                expected.sequence
            ));
        }
        let mut wanted = expected.entries.iter();
        for entry in bucket.iter() {
            let entry = entry.map_err(|e| format!("bucket {:?}: {e}", path_of(&names, id)))?;
            let got = ent_of(&entry);
            let Some((key, item)) = wanted.next() else {
                return Err(format!(
                    "bucket {:?}: entry {got:?} that the model has not",
                    path_of(&names, id)
                ));
            };
            if got != model_ent(key, item) {
                return Err(format!(
                    "bucket {:?}: entry {got:?}, the model says {:?}",
                    path_of(&names, id),
                    model_ent(key, item)
                ));
            }
            if let Item::Bucket(child) = item {
                let nested = bucket
                    .bucket(key)
                    .map_err(|e| format!("bucket {:?}: {e}", path_of(&names, id)))?
                    .ok_or_else(|| {
                        format!(
                            "bucket {:?}: {:?} is listed as a bucket but does not open",
                            path_of(&names, id),
                            Bytes(key.clone())
                        )
                    })?;
                names.push((id, key));
                stack.push((nested, child, names.len() - 1));
            }
        }
        if let Some((key, item)) = wanted.next() {
            return Err(format!(
                "bucket {:?}: missing entry {:?}",
                path_of(&names, id),
                model_ent(key, item)
            ));
        }
    }
    Ok(())
}
