//! A database read into the model ([`Bucket`]), nested buckets included: what the facade's
//! tests and the reliability suites compare a database with. The walk keeps its own stack
//! (nothing here recurses over what the file holds) and stops with an error at a nesting
//! deeper than its bound, which in the suites' files means a bucket value pointing back at an
//! ancestor. Feature `read`: the only part of this crate that links the facade.

use crate::{Bucket, Item};
use rbolt::page::{Corruption, Reason};
use rbolt::{Db, Error, Result};

/// The deepest nesting [`read_bucket`] and [`read_db`] follow below the bucket they read.
/// rbolt has no limit, but the model is a recursive structure (compared and dropped
/// recursively), and the tests' sound files nest at most a few hundred levels.
pub const NESTING_MAX: usize = 4096;

/// Reads `bucket` (its sequence, values and nested buckets) into the model, following at most
/// [`NESTING_MAX`] levels of nesting.
pub fn read_bucket(bucket: &rbolt::Bucket<'_>) -> Result<Bucket> {
    read_bucket_within(bucket, NESTING_MAX)
}

/// The whole content of a database (the root's entries are its top-level buckets; the root
/// has no sequence of its own in the model).
pub fn read_db(db: &Db) -> Result<Bucket> {
    db.view(|tx| {
        let mut model = read_bucket(&tx.root())?;
        model.sequence = 0;
        Ok(model)
    })
}

/// One bucket being read: where its entries are, and what has been read of it so far.
struct Level<'a> {
    /// The key the bucket has in its parent (empty for the bucket the read started at).
    name: Vec<u8>,
    bucket: rbolt::Bucket<'a>,
    entries: rbolt::Iter<'a>,
    model: Bucket,
}

impl<'a> Level<'a> {
    fn new(name: Vec<u8>, bucket: rbolt::Bucket<'a>) -> Level<'a> {
        Level {
            name,
            bucket,
            entries: bucket.iter(),
            model: Bucket {
                sequence: bucket.sequence(),
                ..Bucket::default()
            },
        }
    }
}

/// Reads `bucket` into the model like [`read_bucket`], following at most `nesting_max` levels
/// of nesting below it: a bucket nested deeper is a [`Reason::TooDeep`] corruption of its root
/// page.
pub fn read_bucket_within(bucket: &rbolt::Bucket<'_>, nesting_max: usize) -> Result<Bucket> {
    // The open buckets from `bucket` down to the one being read; a finished bucket goes into
    // its parent's entries.
    let mut stack = vec![Level::new(Vec::new(), *bucket)];
    loop {
        let top = stack
            .last_mut()
            .expect("the read stops when the stack empties");
        let Some(entry) = top.entries.next() else {
            let done = stack.pop().expect("a level on the stack");
            match stack.last_mut() {
                Some(parent) => {
                    parent
                        .model
                        .entries
                        .insert(done.name, Item::Bucket(done.model));
                }
                None => return Ok(done.model),
            }
            continue;
        };
        let entry = entry?;
        let key = entry.key().to_vec();
        if let Some(value) = entry.value() {
            top.model.entries.insert(key, Item::Value(value.to_vec()));
            continue;
        }
        let child = top.bucket.bucket(&key)?.ok_or(Error::BucketNotFound)?;
        if stack.len() > nesting_max {
            let reason = Reason::TooDeep {
                depth_max: nesting_max,
            };
            return Err(Error::Corruption(Corruption::new(child.root(), reason)));
        }
        stack.push(Level::new(key, child));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A database whose bucket `top` has `depth - 1` buckets nested in it, one in another,
    /// each with a value and a sequence; and its model.
    fn nested(depth: usize) -> (tempfile::TempDir, Db, Bucket) {
        let dir = tempfile::tempdir().unwrap();
        let db = Db::open(dir.path().join("db")).unwrap();
        let names: Vec<Vec<u8>> = (0..depth).map(|i| format!("b{i}").into_bytes()).collect();
        db.update(|tx| {
            for level in 1..=depth {
                let mut bucket = tx.create_bucket_path(&names[..level])?;
                bucket.put(b"level", level.to_be_bytes())?;
                bucket.set_sequence(level as u64)?;
            }
            Ok::<_, Error>(())
        })
        .unwrap();
        let mut model = Bucket::default();
        for level in 1..=depth {
            let bucket = model.bucket_path_mut(&names[..level]);
            let value = level.to_be_bytes().to_vec();
            bucket.entries.insert(b"level".to_vec(), Item::Value(value));
            bucket.sequence = level as u64;
        }
        (dir, db, model)
    }

    #[test]
    fn a_database_reads_back_as_the_model_it_was_written_from() {
        let (_dir, db, model) = nested(5);
        let read = read_db(&db).unwrap();
        assert_eq!(read, model);
        assert_eq!(read.key_count(), 5);
        assert_eq!(read.bucket_count(), 5);
    }

    #[test]
    fn a_nesting_at_the_bound_is_read_and_one_level_deeper_is_an_error() {
        let (_dir, db, model) = nested(4);
        let tx = db.begin_read().unwrap();
        let top = tx.bucket(b"b0").unwrap().unwrap();
        // `b0` holds three levels of nesting: b1, b2 in b1, b3 in b2.
        let read = read_bucket_within(&top, 3).unwrap();
        assert_eq!(&read, model.bucket(b"b0").unwrap());
        let error = read_bucket_within(&top, 2).unwrap_err();
        assert!(
            matches!(
                &error,
                Error::Corruption(Corruption {
                    reason: Reason::TooDeep { depth_max: 2 },
                    ..
                })
            ),
            "{error}"
        );
    }

    #[test]
    fn a_deep_nesting_past_the_bound_is_an_error_on_a_small_stack() {
        // A recursive read takes a stack frame (with its cursor) a level and overflows this
        // stack long before the bound; the read keeps its own stack and returns an error.
        const DEPTH: usize = 1500;
        const STACK_BYTES: usize = 128 * 1024;
        let (_dir, db, _model) = nested(DEPTH);
        let outcome = std::thread::scope(|scope| {
            std::thread::Builder::new()
                .stack_size(STACK_BYTES)
                .spawn_scoped(scope, || {
                    let tx = db.begin_read()?;
                    read_bucket_within(&tx.root(), DEPTH - 1).map(|_| ())
                })
                .unwrap()
                .join()
                .unwrap()
        });
        let error = outcome.unwrap_err();
        assert!(
            matches!(
                &error,
                Error::Corruption(Corruption {
                    reason: Reason::TooDeep { depth_max },
                    ..
                }) if *depth_max == DEPTH - 1
            ),
            "{error}"
        );
    }
}
