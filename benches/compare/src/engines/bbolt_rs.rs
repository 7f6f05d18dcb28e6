//! bbolt-rs (a Rust port of Go bbolt 1.3.10): one bucket, `update`/`view` closures.

use super::{Engine, Notes, Result, data_file, fail, value_ok};
use crate::workload::{Key, value_of};
use bbolt_rs::{Bolt, BoltOptions, BucketApi, BucketRwApi, DbApi, DbRwAPI, TxApi, TxRwRefApi};
use std::path::{Path, PathBuf};

const BUCKET: &[u8] = b"bench";

pub struct BboltRs {
    db: Option<Bolt>,
    path: PathBuf,
}

impl BboltRs {
    /// A handle for one call: `Bolt` is a cheap clone, and write transactions need `&mut`.
    fn db(&self) -> Bolt {
        self.db.clone().expect("open between calls")
    }
}

impl Engine for BboltRs {
    const NAME: &'static str = "bbolt-rs";
    const NOTES: Notes = Notes {
        sorted_load: "fill percent 1.0 on the bucket (`set_fill_percent`)",
        durable: "default options: like Go bbolt, write pages, fdatasync, meta, fdatasync",
        sync_off: "`BoltOptions::no_sync` (reopened to set it)",
        rust_heap_only: true,
    };

    fn create(dir: &Path) -> Result<BboltRs> {
        let path = data_file(dir);
        let mut db = Bolt::open(&path)?;
        db.update(|mut tx| tx.create_bucket(BUCKET).map(|_| ()))?;
        Ok(BboltRs { db: Some(db), path })
    }

    fn set_sync(&mut self, sync: bool) -> Result<()> {
        if let Some(db) = self.db.take() {
            drop(db);
        }
        let options = if sync {
            BoltOptions::default()
        } else {
            BoltOptions::builder().no_sync().build()
        };
        self.db = Some(options.open(&self.path)?);
        Ok(())
    }

    fn put_tx(&self, keys: &[Key], sorted: bool) -> Result<()> {
        self.db().update(|mut tx| {
            let mut bucket = tx.bucket_mut(BUCKET).expect("created at open");
            if sorted {
                bucket.set_fill_percent(1.0);
            }
            for key in keys {
                bucket.put(key, value_of(key))?;
            }
            Ok(())
        })?;
        Ok(())
    }

    fn delete_tx(&self, keys: &[Key]) -> Result<()> {
        self.db().update(|mut tx| {
            let mut bucket = tx.bucket_mut(BUCKET).expect("created at open");
            for key in keys {
                bucket.delete(key)?;
            }
            Ok(())
        })?;
        Ok(())
    }

    fn page_size(&self) -> Option<u64> {
        // The OS page size for a new file (4096 here), as in Go bbolt.
        Some(self.db().info().page_size as u64)
    }

    fn get_tx(&self, keys: &[Key], order: &mut dyn Iterator<Item = usize>) -> Result<u64> {
        let db = self.db();
        let tx = db.begin()?;
        let bucket = tx.bucket(BUCKET).ok_or_else(|| fail("no bucket"))?;
        let mut found = 0;
        for i in order {
            let key = &keys[i];
            if bucket.get(key).is_some_and(|value| value_ok(key, value)) {
                found += 1;
            }
        }
        Ok(found)
    }

    fn scan(&self) -> Result<(u64, u64)> {
        let db = self.db();
        let tx = db.begin()?;
        let bucket = tx.bucket(BUCKET).ok_or_else(|| fail("no bucket"))?;
        let (mut entries, mut bytes) = (0, 0);
        for (key, value) in bucket.iter_entries() {
            entries += 1;
            bytes += (key.len() + value.len()) as u64;
        }
        Ok((entries, bytes))
    }
}
