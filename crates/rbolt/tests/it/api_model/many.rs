//! The deletes of many keys at once (issue 49, item 4) against the model: `delete_range`,
//! `delete_prefix`, `clear`, `retain`, `try_retain`, `extract_if`, `pop_first` and
//! `pop_last`. Each deletes the model's values the call names — never a nested bucket — and
//! returns what the model says; a `try_retain` chosen to fail partway returns its closure's
//! error and leaves the model as it was (the harness compares the whole transaction after).

use super::exec::{Cx, on_bucket_mut};
use super::model::{Bytes, ErrKind, Item, Model, bucket_at, bucket_at_mut, res};
use super::ops::{Rng, Via, bucket_path, pick_bound_key};
use rbolt::{BucketMut, Error, WriteTx};
use std::ops::Bound;

/// Which call a `DeleteMany` makes.
#[derive(Clone, Copy, Debug)]
pub enum Many {
    Range,
    Prefix,
    Clear,
    Retain,
    /// `try_retain` whose closure fails at a value picked by the seed, or never.
    TryRetain,
    ExtractIf,
    PopFirst,
    PopLast,
}

impl Many {
    pub const ALL: [Many; 8] = [
        Many::Range,
        Many::Prefix,
        Many::Clear,
        Many::Retain,
        Many::TryRetain,
        Many::ExtractIf,
        Many::PopFirst,
        Many::PopLast,
    ];

    fn name(self) -> &'static str {
        match self {
            Many::Range => "delete_range",
            Many::Prefix => "delete_prefix",
            Many::Clear => "clear",
            Many::Retain => "retain",
            Many::TryRetain => "try_retain",
            Many::ExtractIf => "extract_if",
            Many::PopFirst => "pop_first",
            Many::PopLast => "pop_last",
        }
    }
}

/// What a call returns, made comparable: how many it deleted, and what it handed back.
type Outcome = Result<(u64, Vec<(Bytes, Bytes)>), ErrKind>;

/// The error the failing `try_retain` closure returns.
fn closure_error() -> Error {
    Error::SameBuckets
}

/// The predicate of `retain`, `try_retain` and `extract_if`: a hash of the pair, so that it
/// keeps about two thirds, scattered.
fn keep(key: &[u8], value: &[u8], salt: u64) -> bool {
    let hash = key
        .iter()
        .chain(value)
        .fold(salt, |h, &b| h.wrapping_mul(31).wrapping_add(u64::from(b)));
    hash % 3 != 0
}

fn bound(kind: u64, key: &[u8]) -> Bound<&[u8]> {
    match kind % 3 {
        0 => Bound::Unbounded,
        1 => Bound::Included(key),
        _ => Bound::Excluded(key),
    }
}

fn in_range(key: &[u8], (start, end): (Bound<&[u8]>, Bound<&[u8]>)) -> bool {
    std::ops::RangeBounds::<&[u8]>::contains(&(start, end), &key)
}

/// The call's parameters, drawn from the seed against the model's bucket.
struct Params {
    start: Vec<u8>,
    end: Vec<u8>,
    kinds: (u64, u64),
    prefix_len: usize,
    salt: u64,
    /// `try_retain` fails at this value (counted from 0), if there is one.
    fail_at: usize,
}

impl Params {
    fn draw(target: Option<&Model>, seed: u32) -> Params {
        let mut rng = Rng::new(seed, 9);
        let start = pick_bound_key(target, &mut rng);
        let end = pick_bound_key(target, &mut rng);
        let kinds = (rng.next(), rng.next());
        let prefix_len = rng.below(start.len() + 1);
        let salt = rng.next();
        let values = target.map_or(0, |t| t.entries.len());
        let fail_at = rng.below(values + 2);
        Params {
            start,
            end,
            kinds,
            prefix_len,
            salt,
            fail_at,
        }
    }

    fn bounds(&self) -> (Bound<&[u8]>, Bound<&[u8]>) {
        (
            bound(self.kinds.0, &self.start),
            bound(self.kinds.1, &self.end),
        )
    }

    fn prefix(&self) -> &[u8] {
        &self.start[..self.prefix_len]
    }
}

/// What the model says `many` deletes from `values` (the bucket's values in key order), and
/// what the call returns.
fn expect(many: Many, values: &[(&Vec<u8>, &Vec<u8>)], p: &Params) -> (Vec<Vec<u8>>, Outcome) {
    let pick = |f: &dyn Fn(&[u8], &[u8]) -> bool| -> Vec<(Bytes, Bytes)> {
        values
            .iter()
            .filter(|(k, v)| f(k, v))
            .map(|(k, v)| (Bytes(k.to_vec()), Bytes(v.to_vec())))
            .collect()
    };
    let gone = match many {
        Many::Range => pick(&|k, _| in_range(k, p.bounds())),
        Many::Prefix => pick(&|k, _| k.starts_with(p.prefix())),
        Many::Clear => pick(&|_, _| true),
        Many::Retain | Many::TryRetain => pick(&|k, v| !keep(k, v, p.salt)),
        Many::ExtractIf => pick(&|k, v| in_range(k, p.bounds()) && keep(k, v, p.salt)),
        Many::PopFirst => pick(&|_, _| true).into_iter().take(1).collect(),
        Many::PopLast => pick(&|_, _| true).into_iter().rev().take(1).collect(),
    };
    if matches!(many, Many::TryRetain) && p.fail_at < values.len() {
        return (Vec::new(), Err(ErrKind::of(&closure_error())));
    }
    let keys = gone.iter().map(|(k, _)| k.0.clone()).collect();
    let handed = match many {
        Many::ExtractIf | Many::PopFirst | Many::PopLast => gone.clone(),
        _ => Vec::new(),
    };
    (keys, Ok((gone.len() as u64, handed)))
}

fn pairs(taken: Vec<(Vec<u8>, Vec<u8>)>) -> Vec<(Bytes, Bytes)> {
    taken
        .into_iter()
        .map(|(k, v)| (Bytes(k), Bytes(v)))
        .collect()
}

/// Makes the call on the facade.
fn call(b: &mut BucketMut<'_>, many: Many, p: &Params) -> Outcome {
    let salt = p.salt;
    let counted = |n: rbolt::Result<u64>| res(n).map(|n| (n, Vec::new()));
    match many {
        Many::Range => counted(b.delete_range::<&[u8]>(p.bounds())),
        Many::Prefix => counted(b.delete_prefix(p.prefix())),
        Many::Clear => counted(b.clear()),
        Many::Retain => counted(b.retain(|k, v| keep(k, v, salt))),
        Many::TryRetain => {
            let mut seen = 0;
            counted(b.try_retain(|k, v| {
                seen += 1;
                if seen > p.fail_at {
                    return Err(closure_error());
                }
                Ok(keep(k, v, salt))
            }))
        }
        Many::ExtractIf => res(b.extract_if::<&[u8]>(p.bounds(), |k, v| keep(k, v, salt)))
            .map(|taken| (taken.len() as u64, pairs(taken))),
        Many::PopFirst | Many::PopLast => {
            let popped = if matches!(many, Many::PopFirst) {
                b.pop_first()
            } else {
                b.pop_last()
            };
            res(popped).map(|p| (u64::from(p.is_some()), pairs(p.into_iter().collect())))
        }
    }
}

pub fn delete_many(
    tx: &mut WriteTx<'_>,
    model: &mut Model,
    (at, seed): (u32, u32),
    many: Many,
    via: Via,
    cx: &mut Cx<'_>,
) {
    let path = bucket_path(model, at, 4);
    let target = bucket_at(model, &path);
    let p = Params::draw(target, seed);
    let values: Vec<(&Vec<u8>, &Vec<u8>)> = target
        .iter()
        .flat_map(|t| t.entries.iter())
        .filter_map(|(k, item)| match item {
            Item::Value(v) => Some((k, v)),
            Item::Bucket(_) => None,
        })
        .collect();
    let (gone, expected) = expect(many, &values, &p);
    cx.detail = format!(
        "({} in {path:?}: bounds {:?}, prefix {:?}, fail at {})",
        many.name(),
        p.bounds(),
        Bytes(p.prefix().to_vec()),
        p.fail_at
    );
    let Some(actual) = on_bucket_mut(tx, model, &path, via, cx, |b, _| call(b, many, &p)) else {
        return;
    };
    cx.tally.kind(many.name());
    if actual.is_err() {
        cx.tally.kind("try_retain.failed");
    }
    cx.same(many.name(), &actual, &expected);
    let bucket = bucket_at_mut(model, &path);
    for key in gone {
        bucket.entries.remove(&key);
    }
}
