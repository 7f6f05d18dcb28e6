//! redb: one table of byte slices, default builder (default page cache).

use super::{Engine, Notes, Result, data_file, value_ok};
use crate::workload::{Key, value_of};
use redb::{Database, Durability, ReadableDatabase, ReadableTable, TableDefinition};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

const TABLE: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new("bench");

pub struct Redb {
    db: Database,
    sync: AtomicBool,
}

impl Engine for Redb {
    const NAME: &'static str = "redb";
    const NOTES: Notes = Notes {
        sorted_load: "plain inserts in key order (redb has no append path)",
        durable: "`Durability::Immediate` (the default)",
        sync_off: "`Durability::None` per transaction (redb then frees no pages until a durable commit)",
        rust_heap_only: true,
    };

    fn create(dir: &Path) -> Result<Redb> {
        let db = Database::create(data_file(dir))?;
        let tx = db.begin_write()?;
        tx.open_table(TABLE)?;
        tx.commit()?;
        Ok(Redb {
            db,
            sync: AtomicBool::new(true),
        })
    }

    const REOPENS: bool = true;

    fn open(dir: &Path) -> Result<Redb> {
        Ok(Redb {
            db: Database::open(data_file(dir))?,
            sync: AtomicBool::new(true),
        })
    }

    fn set_sync(&mut self, sync: bool) -> Result<()> {
        self.sync.store(sync, Ordering::Relaxed);
        Ok(())
    }

    fn put_tx(&self, keys: &[Key], _sorted: bool) -> Result<()> {
        let mut tx = self.db.begin_write()?;
        if !self.sync.load(Ordering::Relaxed) {
            tx.set_durability(Durability::None)?;
        }
        {
            let mut table = tx.open_table(TABLE)?;
            for key in keys {
                table.insert(&key[..], &value_of(key)[..])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn delete_tx(&self, keys: &[Key]) -> Result<()> {
        let mut tx = self.db.begin_write()?;
        if !self.sync.load(Ordering::Relaxed) {
            tx.set_durability(Durability::None)?;
        }
        {
            let mut table = tx.open_table(TABLE)?;
            for key in keys {
                table.remove(&key[..])?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn page_size(&self) -> Option<u64> {
        // redb 5.0 has no way to ask: its page size is a constant 4 KiB (`PAGE_SIZE` in
        // tree_store/page_store/header.rs; `Builder::set_page_size` exists only in its own
        // tests). Its allocator hands out runs of 2^k such pages, so pages here count 4 KiB
        // units written, as for the others.
        Some(4096)
    }

    fn get_tx(&self, keys: &[Key], order: &mut dyn Iterator<Item = usize>) -> Result<u64> {
        let tx = self.db.begin_read()?;
        let table = tx.open_table(TABLE)?;
        let mut found = 0;
        for i in order {
            let key = &keys[i];
            if table
                .get(&key[..])?
                .is_some_and(|value| value_ok(key, value.value()))
            {
                found += 1;
            }
        }
        Ok(found)
    }

    fn scan(&self) -> Result<(u64, u64)> {
        let tx = self.db.begin_read()?;
        let table = tx.open_table(TABLE)?;
        let (mut entries, mut bytes) = (0, 0);
        for entry in table.iter()? {
            let (key, value) = entry?;
            entries += 1;
            bytes += (key.value().len() + value.value().len()) as u64;
        }
        Ok((entries, bytes))
    }
}
