//! One small adapter per engine behind [`Engine`]. Each adapter uses its engine the way its
//! documentation recommends for the workload, and says in [`Notes`] what it used where the
//! engines differ (sorted loads, what "durability off" means, what a durable commit does).

use crate::workload::{Key, VALUE_LEN, value_of};
use std::path::{Path, PathBuf};

#[cfg(feature = "bbolt-rs")]
mod bbolt_rs;
#[cfg(feature = "jammdb")]
mod jammdb;
#[cfg(feature = "lmdb")]
mod lmdb;
mod rbolt;
#[cfg(feature = "redb")]
mod redb;
#[cfg(feature = "sled")]
mod sled;

pub type Error = Box<dyn std::error::Error + Send + Sync>;
pub type Result<T> = std::result::Result<T, Error>;

/// What an adapter used where the engines differ; printed in the report.
pub struct Notes {
    /// The fastest path for loading sorted keys into an empty store.
    pub sorted_load: &'static str,
    /// What a durable commit does.
    pub durable: &'static str,
    /// What "durability off" means for this engine.
    pub sync_off: &'static str,
    /// Whether heap allocations are all made through Rust's global allocator (so the
    /// counting allocator sees them); false for engines with C internals.
    pub rust_heap_only: bool,
}

/// A store under test. All methods but [`Engine::set_sync`] take `&self` so one reader
/// thread per core and a writer can share it in the read-write phase.
pub trait Engine: Sized + Sync {
    const NAME: &'static str;
    const NOTES: Notes;

    /// Creates an empty store in `dir` (which exists and is empty) with durable commits.
    fn create(dir: &Path) -> Result<Self>;

    /// Durable (`true`, the default) or not (`false`) commits from now on. May reopen.
    fn set_sync(&mut self, sync: bool) -> Result<()>;

    /// Puts `value_of(key)` for each key in one transaction and commits it. `sorted` says
    /// the keys ascend and the store is empty, so the engine's append path may be used.
    fn put_tx(&self, keys: &[Key], sorted: bool) -> Result<()>;

    /// Deletes each key in one transaction and commits it.
    fn delete_tx(&self, keys: &[Key]) -> Result<()>;

    /// Looks up `keys[i]` for each `i` of `order` in one read transaction, checking each
    /// value; returns how many were found with the right value.
    fn get_tx(&self, keys: &[Key], order: &mut dyn Iterator<Item = usize>) -> Result<u64>;

    /// Reads every entry in key order in one read transaction; returns (entries, bytes of
    /// keys and values).
    fn scan(&self) -> Result<(u64, u64)>;

    /// The size of the pages the engine writes, in bytes, as the open store reports it
    /// where it can: the report divides bytes written per transaction by it to count pages.
    /// `None` for an engine without fixed-size pages, whose "pages written" would mean
    /// nothing beside the others'.
    fn page_size(&self) -> Option<u64>;

    // The scale rows (`--scale`, issue 52): what an engine offers for them. An engine without
    // one reports no row for it; nothing is emulated.

    /// Whether [`Engine::open`] reopens a store; without it the scale rows are skipped.
    const REOPENS: bool = false;

    /// Opens the store [`Engine::create`] made in `dir` again, durable commits on, after the
    /// handle before was dropped or its process died.
    fn open(_dir: &Path) -> Result<Self> {
        Err(fail(format!("{} cannot reopen here", Self::NAME)))
    }

    /// Checks the whole store's structure with the engine's own checker; `None` where it has
    /// none that runs beside an open handle.
    fn check(&self) -> Option<Result<()>> {
        None
    }

    /// Writes a consistent copy of the open store into `dir` (existing, empty), the engine's
    /// hot backup; `None` where it has none.
    fn backup(&self, _dir: &Path) -> Option<Result<()>> {
        None
    }

    /// Writes a compacted copy of the open store into `dir` (existing, empty); `None` where
    /// the engine cannot beside an open handle.
    fn compact(&self, _dir: &Path) -> Option<Result<()>> {
        None
    }

    /// Whether [`Engine::vacuum`] runs an online vacuum.
    const VACUUMS: bool = false;

    /// Runs the engine's online vacuum to its end while other threads go on writing; `None`
    /// where it has none.
    fn vacuum(&self) -> Option<Result<()>> {
        None
    }
}

/// Checks a value read back against what was written for `key`.
#[inline]
pub fn value_ok(key: &Key, value: &[u8]) -> bool {
    value.len() == VALUE_LEN && value == value_of(key)
}

/// The engines compiled into this binary, by name.
pub fn names() -> Vec<&'static str> {
    vec![
        <rbolt::Rbolt as Engine>::NAME,
        #[cfg(feature = "lmdb")]
        <lmdb::Lmdb<false> as Engine>::NAME,
        #[cfg(feature = "lmdb")]
        <lmdb::Lmdb<true> as Engine>::NAME,
        #[cfg(feature = "redb")]
        <redb::Redb as Engine>::NAME,
        #[cfg(feature = "sled")]
        <sled::Sled as Engine>::NAME,
        #[cfg(feature = "jammdb")]
        <jammdb::Jammdb as Engine>::NAME,
        #[cfg(feature = "bbolt-rs")]
        <bbolt_rs::BboltRs as Engine>::NAME,
    ]
}

/// Runs every workload on the engine called `name`; `None` if it is not compiled in.
pub fn run(name: &str, config: &crate::workload::Config) -> Option<Result<serde_json::Value>> {
    use crate::workload::run as go;
    match name {
        "rbolt" => Some(go::<rbolt::Rbolt>(config)),
        #[cfg(feature = "lmdb")]
        "lmdb" => Some(go::<lmdb::Lmdb<false>>(config)),
        #[cfg(feature = "lmdb")]
        "lmdb-named" => Some(go::<lmdb::Lmdb<true>>(config)),
        #[cfg(feature = "redb")]
        "redb" => Some(go::<redb::Redb>(config)),
        #[cfg(feature = "sled")]
        "sled" => Some(go::<sled::Sled>(config)),
        #[cfg(feature = "jammdb")]
        "jammdb" => Some(go::<jammdb::Jammdb>(config)),
        #[cfg(feature = "bbolt-rs")]
        "bbolt-rs" => Some(go::<bbolt_rs::BboltRs>(config)),
        _ => None,
    }
}

/// The child of the scale row "open after a kill" on the engine called `name`: reopens the
/// store in `dir`, commits without syncs, and ends the process without closing anything, as
/// a SIGKILL after the last commit would. Returns only on an error.
pub fn kill_child(name: &str, dir: &Path, seed: u64) -> Option<Result<()>> {
    use crate::workload::kill_child as go;
    match name {
        "rbolt" => Some(go::<rbolt::Rbolt>(dir, seed)),
        #[cfg(feature = "lmdb")]
        "lmdb" => Some(go::<lmdb::Lmdb<false>>(dir, seed)),
        #[cfg(feature = "lmdb")]
        "lmdb-named" => Some(go::<lmdb::Lmdb<true>>(dir, seed)),
        #[cfg(feature = "redb")]
        "redb" => Some(go::<redb::Redb>(dir, seed)),
        _ => None,
    }
}

/// The single data file of engines that keep one.
pub fn data_file(dir: &Path) -> PathBuf {
    dir.join("data.db")
}

/// An error with a message, for conditions the engines report as `None` or `false`.
pub fn fail(message: impl Into<String>) -> Error {
    message.into().into()
}
