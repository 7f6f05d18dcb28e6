//! LMDB through heed, default environment flags: `lmdb` keeps the keys in the unnamed
//! database; `lmdb-named` in a named one (`mdb_dbi_open` with a name), which is what a
//! bbolt bucket corresponds to: its record in the main database changes on every commit
//! that changes it, as a bbolt bucket's header in the root bucket does.

use super::{Engine, Notes, Result, value_ok};
use crate::workload::{Key, value_of};
use heed::types::Bytes;
use heed::{CompactionOption, Database, Env, EnvFlags, EnvOpenOptions, FlagSetMode, PutFlags};
use std::path::Path;

/// Address space for the map: far above what any workload here writes, so LMDB never runs
/// out of map (it does not grow the file to this size; the file grows as pages are written).
const MAP_SIZE: usize = 64 << 30;

/// The environment in `dir`, created if it is not there.
fn environment(dir: &Path) -> Result<Env> {
    // SAFETY: heed marks opening unsafe because LMDB memory-maps the file: another process
    // (or a second open in this one) changing it could break Rust's aliasing rules. The
    // directory is private to this process (and, for the scale rows, to the one child that
    // reopens it after this process dropped its handle), opened once at a time.
    let env = unsafe {
        EnvOpenOptions::new()
            .map_size(MAP_SIZE)
            .max_dbs(1)
            .open(dir)?
    };
    Ok(env)
}

pub struct Lmdb<const NAMED: bool> {
    env: Env,
    db: Database<Bytes, Bytes>,
}

impl<const NAMED: bool> Engine for Lmdb<NAMED> {
    const NAME: &'static str = if NAMED { "lmdb-named" } else { "lmdb" };
    const NOTES: Notes = Notes {
        sorted_load: "`put_with_flags(PutFlags::APPEND)` (MDB_APPEND)",
        durable: "default environment flags: commit writes pages, fdatasync, meta, fdatasync",
        sync_off: "`EnvFlags::NO_SYNC` (MDB_NOSYNC) set with `Env::set_flags`",
        rust_heap_only: false,
    };

    fn create(dir: &Path) -> Result<Lmdb<NAMED>> {
        let env = environment(dir)?;
        let mut tx = env.write_txn()?;
        let db = env.create_database(&mut tx, NAMED.then_some("bench"))?;
        tx.commit()?;
        Ok(Lmdb { env, db })
    }

    const REOPENS: bool = true;

    fn open(dir: &Path) -> Result<Lmdb<NAMED>> {
        let env = environment(dir)?;
        let tx = env.read_txn()?;
        let db = env
            .open_database(&tx, NAMED.then_some("bench"))?
            .ok_or_else(|| super::fail("the store has no bench database"))?;
        tx.commit()?;
        Ok(Lmdb { env, db })
    }

    fn backup(&self, dir: &Path) -> Option<Result<()>> {
        let copy = self
            .env
            .copy_to_path(dir.join("data.mdb"), CompactionOption::Disabled);
        Some(copy.map(|_| ()).map_err(Into::into))
    }

    fn compact(&self, dir: &Path) -> Option<Result<()>> {
        let copy = self
            .env
            .copy_to_path(dir.join("data.mdb"), CompactionOption::Enabled);
        Some(copy.map(|_| ()).map_err(Into::into))
    }

    fn set_sync(&mut self, sync: bool) -> Result<()> {
        let mode = if sync {
            FlagSetMode::Disable
        } else {
            FlagSetMode::Enable
        };
        // SAFETY: NO_SYNC only trades durability for speed (a crash may lose recent
        // commits); no transaction is open while it changes.
        unsafe { self.env.set_flags(EnvFlags::NO_SYNC, mode)? };
        Ok(())
    }

    fn put_tx(&self, keys: &[Key], sorted: bool) -> Result<()> {
        let mut tx = self.env.write_txn()?;
        for key in keys {
            if sorted {
                self.db
                    .put_with_flags(&mut tx, PutFlags::APPEND, key, &value_of(key))?;
            } else {
                self.db.put(&mut tx, key, &value_of(key))?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn delete_tx(&self, keys: &[Key]) -> Result<()> {
        let mut tx = self.env.write_txn()?;
        for key in keys {
            self.db.delete(&mut tx, key)?;
        }
        tx.commit()?;
        Ok(())
    }

    fn page_size(&self) -> Option<u64> {
        // `mdb_env_stat`: LMDB's pages are the OS page size (4096 here).
        Some(u64::from(self.env.stat().page_size))
    }

    fn get_tx(&self, keys: &[Key], order: &mut dyn Iterator<Item = usize>) -> Result<u64> {
        let tx = self.env.read_txn()?;
        let mut found = 0;
        for i in order {
            let key = &keys[i];
            if self
                .db
                .get(&tx, key)?
                .is_some_and(|value| value_ok(key, value))
            {
                found += 1;
            }
        }
        Ok(found)
    }

    fn scan(&self) -> Result<(u64, u64)> {
        let tx = self.env.read_txn()?;
        let (mut entries, mut bytes) = (0, 0);
        for entry in self.db.iter(&tx)? {
            let (key, value) = entry?;
            entries += 1;
            bytes += (key.len() + value.len()) as u64;
        }
        Ok((entries, bytes))
    }
}
