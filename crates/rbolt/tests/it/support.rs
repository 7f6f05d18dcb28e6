//! Helpers shared by the facade tests.

use rbolt::{Db, Result};
/// A bucket, or the whole database, read into the fixtures' model.
pub use rbolt_fixtures::read::{read_bucket, read_db};
use rbolt_fixtures::{Bucket as Model, Item};

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
