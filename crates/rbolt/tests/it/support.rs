//! Helpers shared by the facade tests.

use rbolt::{Bucket, Db, Result};
use rbolt_fixtures::{Bucket as Model, Item};

/// Reads a bucket's whole content into the fixtures' model.
pub fn read_bucket(bucket: &Bucket<'_>) -> Result<Model> {
    let mut model = Model {
        sequence: bucket.sequence(),
        ..Model::default()
    };
    for entry in bucket.iter() {
        let entry = entry?;
        let item = match entry.value() {
            Some(value) => Item::Value(value.to_vec()),
            None => Item::Bucket(read_bucket(
                &bucket.bucket(entry.key())?.expect("a nested bucket"),
            )?),
        };
        model.entries.insert(entry.key().to_vec(), item);
    }
    Ok(model)
}

/// The whole database's content (the root's entries are its top-level buckets).
pub fn read_all(db: &Db) -> Result<Model> {
    db.view(|tx| {
        let mut model = read_bucket(&tx.root())?;
        model.sequence = 0;
        Ok(model)
    })
}

/// Asserts the database checks clean.
pub fn assert_clean(db: &Db) {
    let errors = db.view(|tx| Ok::<_, rbolt::Error>(tx.check())).unwrap();
    assert!(errors.is_empty(), "check found: {errors:?}");
}

/// Writes `model` into the open write transaction at the bucket path `path`.
pub fn write_model(bucket: &mut rbolt::BucketMut<'_>, model: &Model) -> Result<()> {
    for (key, item) in &model.entries {
        match item {
            Item::Value(value) => bucket.put(key, value)?,
            Item::Bucket(child) => {
                let mut nested = bucket.create_bucket(key)?;
                write_model(&mut nested, child)?;
                nested.set_sequence(child.sequence)?;
            }
        }
    }
    Ok(())
}

/// Runs `f` on a thread and fails the test if it does not return within `limit` (a hang or
/// a deadlock).
pub fn within<T: Send + 'static>(
    limit: std::time::Duration,
    f: impl FnOnce() -> T + Send + 'static,
) -> T {
    rbolt_testkit::deadline::within(limit, "the call", f)
}
