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

/// Opens the simulated file `sim` and returns its content, failing (with the reason) on an
/// open error or on anything `check` finds: how the crash tests judge a file a crash left.
pub fn content_of_sim(
    sim: rbolt::storage::SimFile,
    options: &rbolt::Options,
) -> std::result::Result<Model, String> {
    let storage = std::sync::Arc::new(sim);
    let db = Db::open_storage(storage, options.clone()).map_err(|e| e.to_string())?;
    let errors = db
        .view(|tx| Ok(tx.check()))
        .map_err(|e: rbolt::Error| e.to_string())?;
    if !errors.is_empty() {
        return Err(format!("check: {errors:?}"));
    }
    read_db(&db).map_err(|e| e.to_string())
}
