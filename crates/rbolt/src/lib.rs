//! rbolt: an embedded key/value store in one file, in Go bbolt's on-disk format.
//!
//! A memory-mapped, copy-on-write B+tree. One writer at a time and any number of readers,
//! none of which ever waits for another; nested buckets; cursors; ACID transactions made
//! durable with two `fdatasync`s per commit. Files written by Go bbolt open here and the other
//! way round.
//!
//! This crate is the facade: [`Db`], [`ReadTx`], [`WriteTx`], [`Bucket`], [`BucketMut`],
//! [`Cursor`]. It wires the page, freelist and B+tree crates to a file, and it is the only
//! crate that touches files, the memory mapping and file locks — all through the
//! [`storage::Storage`] trait, so the same code runs on a real file or on a simulated one
//! that can produce crash images.
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! use rbolt::Db;
//!
//! let db = Db::open(dir.path().join("app.db"))?;
//! db.update(|tx| {
//!     let mut users = tx.create_bucket_if_not_exists(b"users")?;
//!     users.put(b"alice", b"admin")?;
//!     users.put(b"bob", b"guest")?;
//!     Ok(())
//! })?;
//! db.view(|tx| {
//!     let users = tx.bucket(b"users")?.expect("created above");
//!     for entry in users.range(&b"b"[..]..) {
//!         let entry = entry?;
//!         assert_eq!(entry.key(), b"bob");
//!     }
//!     Ok(())
//! })?;
//! # Ok::<(), rbolt::Error>(())
//! ```

/// A named point in the commit path where tests (feature `failpoints`) inject an error or
/// a panic. `poison` marks points past the first sync, where an injected error must poison
/// the handle as a real one would. Without the feature it compiles to nothing.
macro_rules! failpoint {
    ($name:literal) => {
        #[cfg(feature = "failpoints")]
        fail::fail_point!($name, |_| Err($crate::error::Error::io(
            None,
            std::io::Error::other(concat!("failpoint ", $name))
        )));
    };
    ($name:literal, poison $db:expr) => {
        #[cfg(feature = "failpoints")]
        fail::fail_point!($name, |_| {
            $db.poison();
            Err($crate::error::Error::io(
                None,
                std::io::Error::other(concat!("failpoint ", $name)),
            ))
        });
    };
}

mod alloc;
mod backup;
mod batch;
mod bucket;
mod check;
mod db;
mod error;
mod iter;
mod nested;
mod options;
mod readers;
mod stats;
pub mod storage;
mod tx;
mod typed;
mod vacuum;
mod verify;
mod walk;

pub use backup::compact;
pub use bucket::{Bucket, BucketMut};
pub use check::CheckError;
pub use db::Db;
pub use error::{Error, ErrorKind, Result};
pub use iter::{Cursor, CursorMut, Entry, Iter};
pub use nested::{Walk, WalkStep};
pub use options::{
    ALLOC_SIZE_DEFAULT, BATCH_DELAY_MAX_DEFAULT, BATCH_SIZE_MAX_DEFAULT, Durability, Options,
    PAGE_SIZE_DEFAULT,
};
pub use rbolt_freelist::FreelistKind;
pub use rbolt_page::{KEY_SIZE_MAX, Pgid, Txid, VALUE_SIZE_MAX};
pub use readers::READER_SLOTS;
pub use stats::{BucketStats, DbStats, TxStats};
pub use tx::{ReadTx, WriteTx};
#[cfg(feature = "serde")]
pub use typed::Json;
pub use typed::{BucketDef, FixedWidth, Key, TypedBucket, TypedBucketMut, TypedIter, Value};
pub use vacuum::{VACUUM_STEP_PAGES_DEFAULT, VacuumOptions, VacuumProgress, VacuumStep};
