//! Several bucket handles of one write transaction open at once: top-level buckets opened
//! side by side, written in turn, entries copied from one to another while iterating it, and
//! every way of reaching a held bucket again (open, create, delete, move, a path through it)
//! refused with `BucketInUse` and changing nothing. The session compares the whole
//! transaction with the model after the operation, when every handle is back.

use super::exec::Cx;
use super::model::{Bytes, Class, ErrKind, Item, Model, bucket_at, bucket_at_mut, res};
use super::ops::Rng;
use rbolt::{BucketMut, WriteTx};

/// Top-level names the operation opens: the model's usual ones, so that they exist often.
const NAMES: &[&[u8]] = &[b"a", b"b", b"c", b"d", b"e"];
/// Keys written through the handles.
const KEY_POOL_SIZE: usize = 24;
/// Handles open at once, at most.
const HELD_MAX: usize = 4;

fn key(rng: &mut Rng) -> Vec<u8> {
    format!("k{:02}", rng.below(KEY_POOL_SIZE)).into_bytes()
}

/// The model's top-level bucket `name` (it exists: a handle holds it).
fn held_model<'m>(model: &'m mut Model, name: &[u8]) -> &'m mut Model {
    bucket_at_mut(model, &[name.to_vec()])
}

/// What a put of `key` into `bucket` returns, per the model, applying it when it succeeds.
fn model_put(bucket: &mut Model, key: &[u8], value: &[u8]) -> Result<(), ErrKind> {
    match bucket.entries.get(key) {
        Some(Item::Bucket(_)) => Err(ErrKind::IncompatibleValue),
        _ => {
            bucket
                .entries
                .insert(key.to_vec(), Item::Value(value.to_vec()));
            Ok(())
        }
    }
}

/// Runs `steps` steps on handles held side by side; drops the rest in a random order.
pub fn handles(tx: &mut WriteTx<'_>, model: &mut Model, seed: u32, steps: u8, cx: &mut Cx<'_>) {
    cx.tally.kind("handles");
    // Shared from here on: the handles borrow the transaction together.
    let tx: &WriteTx<'_> = tx;
    let mut rng = Rng::new(seed, 0x4841_4e44);
    let mut held: Vec<(Vec<u8>, BucketMut<'_>)> = Vec::new();
    for _ in 0..steps {
        let step = rng.below(10);
        if held.is_empty() || (step < 2 && held.len() < HELD_MAX) {
            open(tx, model, &mut held, &mut rng, cx);
            continue;
        }
        let i = rng.below(held.len());
        match step {
            2..=3 => {
                cx.tally.kind("handles.put");
                let (name, bucket) = &mut held[i];
                let key = key(&mut rng);
                let value = format!("v{}", rng.next() % 1000).into_bytes();
                let expected = model_put(held_model(model, name), &key, &value);
                let actual = res(bucket.put(&key, &value));
                if let Err(kind) = &expected {
                    cx.tally.error(kind, Class::BucketWhereValue);
                }
                cx.same("put through one of several handles", &actual, &expected);
            }
            4 if held.len() >= 2 => copy(model, &mut held, &mut rng, cx),
            5..=6 => refused(tx, &held, &mut rng, cx),
            7 => {
                cx.tally.kind("handles.get");
                let (name, bucket) = &held[i];
                let key = key(&mut rng);
                let expected = match held_model(model, name).entries.get(&key) {
                    Some(Item::Value(value)) => Some(Bytes(value.clone())),
                    _ => None,
                };
                let actual = res(bucket.get(&key)).map(|v| v.map(|v| Bytes(v.to_vec())));
                cx.same("get through one of several handles", &actual, &Ok(expected));
            }
            8 => delete_other(tx, model, &held, &mut rng, cx),
            _ => {
                cx.tally.kind("handles.drop");
                held.swap_remove(i);
            }
        }
    }
    cx.tally.event("handles-held");
    if held.len() >= 2 {
        cx.tally.event("several-handles-held");
    }
    while !held.is_empty() {
        let i = rng.below(held.len());
        held.swap_remove(i);
    }
}

/// Opens a top-level bucket beside the held ones: `BucketInUse` when one of them is it.
fn open<'t>(
    tx: &'t WriteTx<'_>,
    model: &mut Model,
    held: &mut Vec<(Vec<u8>, BucketMut<'t>)>,
    rng: &mut Rng,
    cx: &mut Cx<'_>,
) {
    let name = NAMES[rng.below(NAMES.len())].to_vec();
    let is_held = held.iter().any(|(n, _)| *n == name);
    let exists = bucket_at(model, std::slice::from_ref(&name)).is_some();
    let create = rng.below(3) == 0;
    let result = if create {
        cx.tally.kind("handles.create_bucket_if_not_exists");
        tx.create_bucket_if_not_exists(&name).map(Some)
    } else {
        cx.tally.kind("handles.bucket_mut");
        tx.bucket_mut(&name)
    };
    let expected: Result<bool, ErrKind> = if is_held {
        Err(ErrKind::BucketInUse)
    } else {
        Ok(exists || create)
    };
    match result {
        Ok(Some(bucket)) => {
            cx.same("opening beside other handles", &Ok(true), &expected);
            if !exists {
                model
                    .entries
                    .insert(name.clone(), Item::Bucket(Model::default()));
            }
            held.push((name, bucket));
        }
        other => {
            let actual = res(other.map(|b| b.is_some()));
            if let Err(kind) = &expected {
                cx.tally.error(kind, Class::BucketInUse);
            }
            cx.same("opening beside other handles", &actual, &expected);
        }
    }
}

/// Copies every value of one held bucket into another while iterating the first.
fn copy(model: &mut Model, held: &mut [(Vec<u8>, BucketMut<'_>)], rng: &mut Rng, cx: &mut Cx<'_>) {
    cx.tally.kind("handles.copy");
    let from = rng.below(held.len());
    let to = (from + 1 + rng.below(held.len() - 1)) % held.len();
    let (src, dst) = if from < to {
        let (left, right) = held.split_at_mut(to);
        (&left[from], &mut right[0])
    } else {
        let (left, right) = held.split_at_mut(from);
        (&right[0], &mut left[to])
    };
    let mut copied = 0usize;
    for entry in src.1.iter() {
        let entry = match res(entry) {
            Ok(entry) => entry,
            Err(e) => cx.fail(format_args!("iterating a held bucket: {e:?}")),
        };
        let Some(value) = entry.value() else { continue };
        let expected = model_put(held_model(model, &dst.0), entry.key(), value);
        let actual = res(dst.1.put(entry.key(), value));
        if let Err(kind) = &expected {
            cx.tally.error(kind, Class::BucketWhereValue);
        }
        cx.same("a put while iterating another handle", &actual, &expected);
        copied += 1;
    }
    let values = held_model(model, &src.0)
        .entries
        .values()
        .filter(|item| matches!(item, Item::Value(_)))
        .count();
    cx.same("values copied from a held bucket", &copied, &values);
}

/// Reaches a held bucket from the transaction in one of the ways that must be refused.
fn refused(tx: &WriteTx<'_>, held: &[(Vec<u8>, BucketMut<'_>)], rng: &mut Rng, cx: &mut Cx<'_>) {
    let name = held[rng.below(held.len())].0.as_slice();
    let other = NAMES[rng.below(NAMES.len())];
    let result: rbolt::Result<()> = match rng.below(9) {
        0 => {
            cx.tally.kind("handles.refused.bucket_mut");
            tx.bucket_mut(name).map(drop)
        }
        1 => {
            cx.tally.kind("handles.refused.create_bucket");
            tx.create_bucket(name).map(drop)
        }
        2 => {
            cx.tally.kind("handles.refused.create_bucket_if_not_exists");
            tx.create_bucket_if_not_exists(name).map(drop)
        }
        3 => {
            cx.tally.kind("handles.refused.delete_bucket");
            tx.delete_bucket(name)
        }
        4 => {
            cx.tally.kind("handles.refused.move_from");
            tx.move_bucket(&[name], &[b"moved".as_slice()])
        }
        5 => {
            cx.tally.kind("handles.refused.move_into");
            tx.move_bucket(&[other], &[name, b"moved".as_slice()])
        }
        6 => {
            cx.tally.kind("handles.refused.bucket_path_mut");
            tx.bucket_path_mut(&[name, other]).map(drop)
        }
        7 => {
            cx.tally.kind("handles.refused.create_bucket_path");
            tx.create_bucket_path(&[name, other]).map(drop)
        }
        _ => {
            cx.tally.kind("handles.refused.move_onto");
            tx.move_bucket(&[other, b"x".as_slice()], &[name])
        }
    };
    cx.tally.error(&ErrKind::BucketInUse, Class::BucketInUse);
    cx.same(
        "reaching a held bucket from the transaction",
        &res(result),
        &Err(ErrKind::BucketInUse),
    );
}

/// Deletes a top-level bucket that no handle holds, beside the held ones.
fn delete_other(
    tx: &WriteTx<'_>,
    model: &mut Model,
    held: &[(Vec<u8>, BucketMut<'_>)],
    rng: &mut Rng,
    cx: &mut Cx<'_>,
) {
    let name = NAMES[rng.below(NAMES.len())].to_vec();
    if held.iter().any(|(n, _)| *n == name) {
        return;
    }
    cx.tally.kind("handles.delete_bucket(other)");
    let expected = if model.entries.remove(&name).is_some() {
        Ok(())
    } else {
        cx.tally
            .error(&ErrKind::BucketNotFound, Class::MissingBucket);
        Err(ErrKind::BucketNotFound)
    };
    cx.same(
        "deleting a bucket beside held ones",
        &res(tx.delete_bucket(&name)),
        &expected,
    );
}
