//! rbolt: an embedded key/value store in one file, in Go bbolt's on-disk format.
//!
//! A memory-mapped, copy-on-write B+tree. One writer at a time and any number of readers,
//! none of which ever waits for another; nested buckets; cursors; ACID transactions made
//! durable with two `fdatasync`s per commit. Files written by Go bbolt open here and the other
//! way round.
//!
//! This crate is the facade: [`Db`], [`ReadTx`], [`WriteTx`], [`Bucket`], [`BucketMut`],
//! [`Cursor`]. It wires the page, freelist, B+tree and storage crates together; it touches
//! files, the memory mapping and file locks only through the [`storage::Storage`] trait (the
//! `rbolt-storage` crate, re-exported as [`storage`]), so the same code runs on a real file or
//! on a simulated one that can produce crash images, and it contains no `unsafe`.
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
//!
//! # What the compiler guarantees
//!
//! Transactions borrow the database and values borrow their transaction, so the mistakes
//! below are compile errors, not runtime ones.
//!
//! A read transaction's buckets cannot be written (a [`Bucket`] has no `put`; only a
//! [`BucketMut`] of a [`WriteTx`] has):
//!
//! ```compile_fail,E0599
//! # let dir = tempfile::tempdir().unwrap();
//! # let db = rbolt::Db::open(dir.path().join("db"))?;
//! # db.update(|tx| tx.create_bucket("b").map(drop))?;
//! let tx = db.begin_read()?;
//! let b = tx.bucket("b")?.unwrap();
//! b.put("k", "v")?; // error: no method `put` on `Bucket`
//! # Ok::<(), rbolt::Error>(())
//! ```
//!
//! A value cannot outlive its transaction (it points into the memory map, which the
//! transaction pins; copy it with `to_vec()` to keep it):
//!
//! ```compile_fail,E0597
//! # let dir = tempfile::tempdir().unwrap();
//! # let db = rbolt::Db::open(dir.path().join("db"))?;
//! # db.update(|tx| tx.create_bucket("b")?.put("k", "v"))?;
//! let value: &[u8];
//! {
//!     let tx = db.begin_read()?;
//!     value = tx.bucket("b")?.unwrap().get("k")?.unwrap();
//! } // error: `tx` dropped here while still borrowed
//! println!("{value:?}");
//! # Ok::<(), rbolt::Error>(())
//! ```
//!
//! A value read through a write handle cannot be held across a write to it (the write may
//! move the bytes):
//!
//! ```compile_fail,E0502
//! # let dir = tempfile::tempdir().unwrap();
//! # let db = rbolt::Db::open(dir.path().join("db"))?;
//! db.update(|tx| {
//!     let mut b = tx.create_bucket("b")?;
//!     b.put("k", "v")?;
//!     let value = b.get("k")?.unwrap();
//!     b.put("k", "w")?; // error: `b` is borrowed by `value`
//!     println!("{value:?}");
//!     Ok(())
//! })?;
//! # Ok::<(), rbolt::Error>(())
//! ```
//!
//! The database cannot be dropped or closed while a transaction lives:
//!
//! ```compile_fail,E0505
//! # let dir = tempfile::tempdir().unwrap();
//! let db = rbolt::Db::open(dir.path().join("db"))?;
//! let tx = db.begin_read()?;
//! drop(db); // error: cannot move out of `db` because it is borrowed
//! println!("{}", tx.id());
//! # Ok::<(), rbolt::Error>(())
//! ```
//!
//! ```compile_fail,E0505
//! # let dir = tempfile::tempdir().unwrap();
//! let db = rbolt::Db::open(dir.path().join("db"))?;
//! let tx = db.begin_write()?;
//! db.close()?; // error: cannot move out of `db` because it is borrowed
//! tx.commit()?;
//! # Ok::<(), rbolt::Error>(())
//! ```
//!
//! A write transaction cannot commit while a bucket handle lives (see [`WriteTx`]):
//!
//! ```compile_fail,E0505
//! # let dir = tempfile::tempdir().unwrap();
//! # let db = rbolt::Db::open(dir.path().join("db"))?;
//! let tx = db.begin_write()?;
//! let mut b = tx.create_bucket("b")?;
//! b.put("k", "v")?;
//! tx.commit()?; // error: `b` borrows `tx` and is dropped after this line
//! # drop(b);
//! # Ok::<(), rbolt::Error>(())
//! ```
//!
//! # Public API and the lower crates
//!
//! The facade's signatures name the facade's own types, with two deliberate exceptions, each
//! a module of re-exports: [`page`] (the file format: [`page::Meta`] from [`ReadTx::meta`],
//! [`page::Corruption`] and [`page::Reason`] in [`Error::Corruption`] and [`CheckError`],
//! the page and transaction ids [`Pgid`] and [`Txid`]) and [`freelist`] ([`FreelistKind`]
//! in [`Options`], [`freelist::FreelistError`] in [`Error::Freelist`]). They are part of
//! this crate's API: a breaking change in them is a breaking change of `rbolt`. The B+tree
//! crate (`rbolt-btree`) appears in no public signature. `CONTRIBUTING.md` says how to check
//! for API breaks before a release.
#![forbid(unsafe_code)]

/// The README's code blocks, compiled and run as doctests so that the quick start stays true.
#[cfg(doctest)]
#[doc = include_str!("../README.md")] // the symlink to the root README, inside the package
struct ReadmeDoctests;

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
mod options;
mod read_tx;
mod readers;
mod stats;
/// The storage layer (the `rbolt-storage` crate), re-exported: the [`Storage`](storage::Storage)
/// trait a database runs on, [`FileStorage`](storage::FileStorage) for real files, and with
/// the `sim` feature `SimFile`, a simulated file for crash tests.
pub use rbolt_storage as storage;
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
pub use options::{
    ALLOC_SIZE_DEFAULT, BATCH_DELAY_MAX_DEFAULT, BATCH_SIZE_MAX_DEFAULT, Durability, Options,
    PAGE_SIZE_DEFAULT,
};
pub use rbolt_freelist::FreelistKind;
pub use rbolt_page::{KEY_SIZE_MAX, Pgid, Txid, VALUE_SIZE_MAX};
pub use walk::{Walk, WalkStep};

/// The file format layer (the `rbolt-page` crate), re-exported on purpose: the types that
/// the facade's signatures name, and the format's limits, for tools that read pages. The
/// format is bbolt's version 2 and does not change; [`page::Reason`] is `#[non_exhaustive]`,
/// so a new kind of corruption is not a breaking change.
pub mod page {
    pub use rbolt_page::{
        Corruption, KEY_SIZE_MAX, MAGIC, Meta, PAGE_SIZE_MAX, PAGE_SIZE_MIN, Pgid, Reason, Txid,
        VALUE_SIZE_MAX, VERSION,
    };
}

/// The freelist layer (the `rbolt-freelist` crate), re-exported on purpose: the kind of
/// freelist a database keeps in memory ([`Options::freelist`]) and the error a freelist
/// operation reports ([`Error::Freelist`]).
pub mod freelist {
    pub use rbolt_freelist::{FreelistError, FreelistKind};
}
pub use read_tx::ReadTx;
pub use readers::READER_SLOTS;
pub use stats::{BucketStats, DbStats, TxStats};
pub use tx::WriteTx;
#[cfg(feature = "serde")]
pub use typed::Json;
pub use typed::{BucketDef, FixedWidth, Key, TypedBucket, TypedBucketMut, TypedIter, Value};
pub use vacuum::{VACUUM_STEP_PAGES_DEFAULT, VacuumOptions, VacuumProgress, VacuumStep};
