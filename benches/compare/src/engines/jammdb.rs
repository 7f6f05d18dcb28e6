//! jammdb (a Rust port of BoltDB): one bucket, default open options.

use super::{Engine, Notes, Result, data_file, fail, value_ok};
use crate::workload::{Key, value_of};
use jammdb::DB;
use std::path::Path;

const BUCKET: &str = "bench";

pub struct Jammdb {
    db: DB,
}

impl Engine for Jammdb {
    const NAME: &'static str = "jammdb";
    const NOTES: Notes = Notes {
        sorted_load: "plain puts in key order (fill percent is fixed at 0.5; no append path)",
        durable: "default: commit writes pages and calls `sync_all` (fsync)",
        sync_off: "none: jammdb has no option to skip syncs, so (e) and (g) stay durable",
        rust_heap_only: true,
    };

    fn create(dir: &Path) -> Result<Jammdb> {
        let db = DB::open(data_file(dir))?;
        let tx = db.tx(true)?;
        tx.create_bucket(BUCKET)?;
        tx.commit()?;
        Ok(Jammdb { db })
    }

    fn set_sync(&mut self, _sync: bool) -> Result<()> {
        Ok(())
    }

    fn put_tx(&self, keys: &[Key], _sorted: bool) -> Result<()> {
        let tx = self.db.tx(true)?;
        {
            let bucket = tx.get_bucket(BUCKET)?;
            for key in keys {
                // Owned values: jammdb keeps borrowed ones until commit, which would need a
                // buffer of every value of the transaction.
                bucket.put(&key[..], value_of(key).to_vec())?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn delete_tx(&self, keys: &[Key]) -> Result<()> {
        let tx = self.db.tx(true)?;
        {
            let bucket = tx.get_bucket(BUCKET)?;
            for key in keys {
                bucket.delete(key)?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn page_size(&self) -> Option<u64> {
        // The OS page size unless opened with another (4096 here).
        Some(self.db.pagesize())
    }

    fn get_tx(&self, keys: &[Key], order: &mut dyn Iterator<Item = usize>) -> Result<u64> {
        let tx = self.db.tx(false)?;
        let bucket = tx.get_bucket(BUCKET)?;
        let mut found = 0;
        for i in order {
            let key = &keys[i];
            if bucket
                .get(key)
                .is_some_and(|data| data.is_kv() && value_ok(key, data.kv().value()))
            {
                found += 1;
            }
        }
        Ok(found)
    }

    fn scan(&self) -> Result<(u64, u64)> {
        let tx = self.db.tx(false)?;
        let bucket = tx.get_bucket(BUCKET)?;
        let (mut entries, mut bytes) = (0, 0);
        for data in bucket.cursor() {
            if !data.is_kv() {
                return Err(fail("unexpected nested bucket"));
            }
            let (key, value) = data.kv().kv();
            entries += 1;
            bytes += (key.len() + value.len()) as u64;
        }
        Ok((entries, bytes))
    }
}
