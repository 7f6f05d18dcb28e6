//! sled 0.34 (the stable line): the default tree, batches applied atomically.

use super::{Engine, Notes, Result, value_ok};
use crate::workload::{Key, value_of};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

pub struct Sled {
    db: sled::Db,
    sync: AtomicBool,
}

impl Sled {
    fn commit(&self, batch: sled::Batch) -> Result<()> {
        self.db.apply_batch(batch)?;
        if self.sync.load(Ordering::Relaxed) {
            self.db.flush()?;
        }
        Ok(())
    }
}

impl Engine for Sled {
    const NAME: &'static str = "sled";
    const NOTES: Notes = Notes {
        sorted_load: "one `Batch` of inserts in key order (no append path)",
        durable: "`apply_batch` (atomic) then `flush()`, which on Linux is `sync_file_range`: no device-cache flush, weaker than fdatasync",
        sync_off: "no `flush()`; sled's default background flush (every 500 ms) still runs",
        rust_heap_only: true,
    };

    fn create(dir: &Path) -> Result<Sled> {
        let db = sled::Config::new().path(dir).open()?;
        Ok(Sled {
            db,
            sync: AtomicBool::new(true),
        })
    }

    fn set_sync(&mut self, sync: bool) -> Result<()> {
        self.sync.store(sync, Ordering::Relaxed);
        Ok(())
    }

    fn put_tx(&self, keys: &[Key], _sorted: bool) -> Result<()> {
        let mut batch = sled::Batch::default();
        for key in keys {
            batch.insert(&key[..], &value_of(key)[..]);
        }
        self.commit(batch)
    }

    fn delete_tx(&self, keys: &[Key]) -> Result<()> {
        let mut batch = sled::Batch::default();
        for key in keys {
            batch.remove(&key[..]);
        }
        self.commit(batch)
    }

    fn page_size(&self) -> Option<u64> {
        // None: sled is log-structured; it appends variable-length page fragments and
        // rewrites into 512 KiB segments, so there is no page to count by.
        None
    }

    fn get_tx(&self, keys: &[Key], order: &mut dyn Iterator<Item = usize>) -> Result<u64> {
        // sled has no read transactions; each get sees the latest state.
        let mut found = 0;
        for i in order {
            let key = &keys[i];
            if self.db.get(key)?.is_some_and(|value| value_ok(key, &value)) {
                found += 1;
            }
        }
        Ok(found)
    }

    fn scan(&self) -> Result<(u64, u64)> {
        let (mut entries, mut bytes) = (0, 0);
        for entry in self.db.iter() {
            let (key, value) = entry?;
            entries += 1;
            bytes += (key.len() + value.len()) as u64;
        }
        Ok((entries, bytes))
    }
}
