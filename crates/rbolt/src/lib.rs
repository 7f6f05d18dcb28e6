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
//!     Ok::<_, rbolt::Error>(())
//! })?;
//! db.view(|tx| {
//!     let users = tx.bucket(b"users")?.expect("created above");
//!     for entry in users.range(&b"b"[..]..) {
//!         let entry = entry?;
//!         assert_eq!(entry.key(), b"bob");
//!     }
//!     Ok::<_, rbolt::Error>(())
//! })?;
//! # Ok::<(), rbolt::Error>(())
//! ```
//!
//! # Feature flags
//!
//! All off by default; the crate has no dependency it does not need without them.
//!
//! | feature | what it adds |
//! |---|---|
//! | `serde` | `Json<T>`: typed buckets whose values are any serde type, stored as JSON |
//! | `tokio` | `Db::update_async`, `Db::view_async`, `Db::batch_async`: transactions from async code, run on tokio's blocking pool |
//! | `tracing` | events for a `tracing` subscriber: lock waits, recovery at open, growth, shrinks, vacuum steps, a poisoned handle, commits slower than [`Options::slow_commit_threshold`], and a span around each commit |
//! | `sim` | `storage::SimFile`: a simulated file for an application's own crash tests — it records unsynced writes, makes the images a crash or a power loss could leave, and injects I/O errors |
//!
//! Features whose names start with an underscore (`_failpoints`, `_verify`) are machinery of
//! rbolt's own test suites, not part of the API: they may change in any release and slow every
//! commit down.
//!
//! # Platforms
//!
//! Linux, macOS and the BSDs on 64-bit little-endian hosts. The storage layer
//! ([`storage`], the `rbolt-storage` crate) is built from portable calls — std's positioned
//! I/O, syncs (`F_FULLFSYNC` on Apple systems, where `fsync` leaves data in the disk's cache)
//! and `File::lock`, and memmap2 — with three Linux calls where they exist (`pwritev`,
//! `fallocate`, `memfd_create`), each with a portable fallback that the repository's CI runs
//! the facade's and the crash suites through on Linux. Linux is where it is tested on real
//! disks. One difference: only Linux has a boot id, so elsewhere a [`Durability::None`]
//! commit survives a crash of the process only once a durable point follows (after a crash
//! the file opens at the last durable commit, as after a power loss). Windows is not
//! supported: the crate does not build there (`docs/ARCHITECTURE.md` says what it needs).
//! The file format is bbolt's and portable: a file copied to any little-endian machine opens
//! in rbolt or in Go bbolt there.
//! The oldest supported compiler is Rust 1.89 (the crate's `rust-version`).
//!
//! # Errors, async code and logs
//!
//! - The closure API takes the application's own error type: [`Db::update`], [`Db::view`]
//!   and [`Db::batch`] return whatever error the closure returns, any type with
//!   `From<rbolt::Error>` (see [`Db::update`] for an example with thiserror). So a closure
//!   whose only errors are rbolt's and that ends in `Ok(..)` must name its error type, as the
//!   example above does; rustc's own suggestion, `Ok::<(), E>(())`, names `update`'s type
//!   parameter and does not compile. Any of these three reads well:
//!
//! ```
//! # let dir = tempfile::tempdir().unwrap();
//! # let db = rbolt::Db::open(dir.path().join("app.db"))?;
//! // 1. End in an rbolt call: its `rbolt::Result` is the closure's.
//! db.update(|tx| tx.create_bucket_if_not_exists("users")?.put("alice", "admin"))?;
//! // 2. Name the error where the closure ends.
//! db.update(|tx| {
//!     tx.bucket_mut("users")?.expect("created").put("bob", "guest")?;
//!     Ok::<_, rbolt::Error>(())
//! })?;
//! // 3. Give the closure a return type.
//! let n = db.view(|tx| -> rbolt::Result<usize> {
//!     Ok(tx.bucket("users")?.expect("created").iter().count())
//! })?;
//! assert_eq!(n, 2);
//! # Ok::<(), rbolt::Error>(())
//! ```
//!
//! - A [`WriteTx`] is not `Send` and cannot be held across an `.await` in a spawned task; run
//!   the transaction on a blocking thread (`Db::update_async` with the `tokio` feature).
//! - Opening a file another process holds for writing fails at once with [`Error::Locked`];
//!   waiting is [`Options::lock_timeout`]. A read-only open reads beside a writer of another
//!   process instead (on Linux, through the reader table in `<path>-lock`: see
//!   [`Options::read_only`]).
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
#![warn(missing_docs)]
#![forbid(unsafe_code)]
// docs.rs builds with `--cfg docsrs` (see Cargo.toml): mark feature-gated items.
#![cfg_attr(docsrs, feature(doc_cfg))]

/// The crate README's code blocks, compiled and run as doctests so that they stay true (the
/// workspace README's quick start is checked to be the same: `tests/it/readme.rs`).
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
struct ReadmeDoctests;

/// A named point in the commit path where tests (feature `_failpoints`) inject an error or
/// a panic. `poison` marks points past the first sync, where an injected error must poison
/// the handle as a real one would. Without the feature it compiles to nothing.
macro_rules! failpoint {
    ($name:literal) => {
        #[cfg(feature = "_failpoints")]
        fail::fail_point!($name, |_| Err($crate::error::Error::io(
            None,
            std::io::Error::other(concat!("failpoint ", $name))
        )));
    };
    ($name:literal, poison $db:expr) => {
        #[cfg(feature = "_failpoints")]
        fail::fail_point!($name, |_| {
            $db.poison();
            Err($crate::error::Error::io(
                None,
                std::io::Error::other(concat!("failpoint ", $name)),
            ))
        });
    };
}

#[cfg(feature = "tokio")]
mod async_tx;
mod backup;
mod bucket;
mod check;
mod db;
mod engine;
mod error;
mod iter;
mod options;
mod read_tx;
mod stats;
/// The storage layer (the `rbolt-storage` crate), re-exported: the [`Storage`](storage::Storage)
/// trait a database runs on, [`FileStorage`](storage::FileStorage) for real files, and with
/// the `sim` feature `SimFile`, a simulated file for crash tests.
pub use rbolt_storage as storage;
mod trace;
mod tx;
mod typed;
mod vacuum;
mod walk;

pub use backup::compact;
pub use bucket::{Bucket, BucketMut};
pub use check::CheckError;
pub use db::Db;
pub use error::{Error, ErrorKind, Result};
pub use iter::{Cursor, CursorMut, Entry, Iter};
pub use options::{
    ALLOC_SIZE_DEFAULT, BATCH_DELAY_MAX_DEFAULT, BATCH_SIZE_MAX_DEFAULT, Durability, Options,
    PAGE_SIZE_DEFAULT, SLOW_COMMIT_THRESHOLD_DEFAULT,
};
pub use rbolt_btree::GoHazard;
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
pub use engine::readers::READER_SLOTS;
pub use read_tx::ReadTx;
pub use stats::{BucketStats, DbStats, TxStats};
pub use tx::WriteTx;
#[cfg(feature = "serde")]
#[cfg_attr(docsrs, doc(cfg(feature = "serde")))]
pub use typed::Json;
pub use typed::{
    BucketDef, FixedWidth, Key, KeyPart, TupleKey, TupleKey2, TypedBucket, TypedBucketMut,
    TypedCursor, TypedIter, Value,
};
pub use vacuum::{VACUUM_STEP_PAGES_DEFAULT, VacuumOptions, VacuumProgress, VacuumStep};
