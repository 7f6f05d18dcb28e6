//! rbolt through its facade: one bucket, `Db::update`-style transactions.

use super::{Engine, Notes, Result, data_file, fail, value_ok};
use crate::workload::note_mapped_bytes;
use crate::workload::{Key, value_of};
use rbolt::storage::{FileOptions, FileStorage};
use rbolt::{Db, Durability, Options};
use std::path::Path;
use std::sync::Arc;

const BUCKET: &[u8] = b"bench";

/// What `compact` commits at a time into the copy: 64 MiB (the CLI's default is bbolt's
/// 64 KiB, thousands of commits at 10M keys; LMDB's compacting copy has no commits at all).
const COMPACT_TX_BYTES: u64 = 64 << 20;

pub struct Rbolt {
    db: Db,
    /// The file, kept to read how many bytes went to it as copies into its mapping rather
    /// than by write system calls (`FileStorage::copied_bytes`).
    file: Arc<FileStorage>,
    /// What each write transaction asks for (`WriteTx::set_durability`).
    durability: Durability,
    /// What a synced transaction asks for: `Durability::Immediate` (two syncs), or
    /// `Durability::OneSync` when `RBOLT_COMPARE_ONE_SYNC` is set (issue 51).
    durable: Durability,
}

impl Engine for Rbolt {
    const NAME: &'static str = "rbolt";
    const NOTES: Notes = Notes {
        sorted_load: "fill percent 1.0 on the bucket (`BucketMut::set_fill_percent`)",
        durable: "default options: pwritev, fdatasync, meta write, fdatasync",
        sync_off: "`WriteTx::set_durability(Durability::None)` per transaction (both fdatasyncs skipped; the first durable commit after them syncs them too); a page written again before a sync is a copy into a writable mapping of the file, not a pwrite (64-bit Linux: ext4, tmpfs)",
        rust_heap_only: true,
    };

    fn create(dir: &Path) -> Result<Rbolt> {
        let db = Rbolt::open(dir)?;
        db.db.update(|tx| tx.create_bucket(BUCKET).map(|_| ()))?;
        Ok(db)
    }

    const REOPENS: bool = true;

    fn open(dir: &Path) -> Result<Rbolt> {
        // What `Db::open` does, with the file kept.
        let file = Arc::new(FileStorage::open(data_file(dir), FileOptions::new())?);
        let db = Db::open_storage(file.clone(), Options::default())?;
        let durable = if std::env::var_os("RBOLT_COMPARE_ONE_SYNC").is_some() {
            Durability::OneSync
        } else {
            Durability::Immediate
        };
        Ok(Rbolt {
            db,
            file,
            durability: durable,
            durable,
        })
    }

    fn check(&self) -> Option<Result<()>> {
        Some(
            self.db
                .view(|tx| Ok::<_, rbolt::Error>(tx.check()))
                .map_err(Into::into)
                .and_then(|errors| match errors.first() {
                    None => Ok(()),
                    Some(first) => Err(fail(format!(
                        "check: {} errors, first {first}",
                        errors.len()
                    ))),
                }),
        )
    }

    fn backup(&self, dir: &Path) -> Option<Result<()>> {
        let copy = || -> Result<()> {
            self.db.begin_read()?.copy_file(data_file(dir))?;
            Ok(())
        };
        Some(copy())
    }

    fn compact(&self, dir: &Path) -> Option<Result<()>> {
        let copy = || -> Result<()> {
            let dst = Db::open(data_file(dir))?;
            rbolt::compact(&dst, &self.db, COMPACT_TX_BYTES)?;
            dst.close()?;
            Ok(())
        };
        Some(copy())
    }

    const VACUUMS: bool = true;

    fn vacuum(&self) -> Option<Result<()>> {
        let options = rbolt::VacuumOptions::default();
        Some(
            self.db
                .vacuum(options, |_| std::ops::ControlFlow::Continue(()))
                .map(|_| ())
                .map_err(Into::into),
        )
    }

    fn set_sync(&mut self, sync: bool) -> Result<()> {
        self.durability = if sync { self.durable } else { Durability::None };
        Ok(())
    }

    fn put_tx(&self, keys: &[Key], sorted: bool) -> Result<()> {
        self.db.update(|tx| {
            tx.set_durability(self.durability);
            let mut bucket = tx.bucket_mut(BUCKET)?.expect("created at open");
            if sorted {
                bucket.set_fill_percent(1.0);
            }
            for key in keys {
                bucket.put(key, value_of(key))?;
            }
            Ok::<_, rbolt::Error>(())
        })?;
        note_mapped_bytes(self.file.copied_bytes());
        Ok(())
    }

    fn delete_tx(&self, keys: &[Key]) -> Result<()> {
        self.db.update(|tx| {
            tx.set_durability(self.durability);
            let mut bucket = tx.bucket_mut(BUCKET)?.expect("created at open");
            for key in keys {
                bucket.delete(key)?;
            }
            Ok::<_, rbolt::Error>(())
        })?;
        note_mapped_bytes(self.file.copied_bytes());
        Ok(())
    }

    fn page_size(&self) -> Option<u64> {
        // `Options::page_size` 0, the default: 4096 (`PAGE_SIZE_DEFAULT`) for a new file.
        Some(self.db.page_size() as u64)
    }

    fn get_tx(&self, keys: &[Key], order: &mut dyn Iterator<Item = usize>) -> Result<u64> {
        let tx = self.db.begin_read()?;
        let bucket = tx.bucket(BUCKET)?.ok_or_else(|| fail("no bucket"))?;
        let mut found = 0;
        for i in order {
            let key = &keys[i];
            if bucket.get(key)?.is_some_and(|value| value_ok(key, value)) {
                found += 1;
            }
        }
        Ok(found)
    }

    fn scan(&self) -> Result<(u64, u64)> {
        let tx = self.db.begin_read()?;
        let bucket = tx.bucket(BUCKET)?.ok_or_else(|| fail("no bucket"))?;
        let (mut entries, mut bytes) = (0, 0);
        for entry in bucket.iter() {
            let entry = entry?;
            entries += 1;
            bytes += (entry.key().len() + entry.raw_value().len()) as u64;
        }
        Ok((entries, bytes))
    }
}
