//! Hot backup and compaction.

use crate::bucket::BucketMut;
use crate::db::Db;
use crate::error::{Error, Result};
use crate::storage::{FileOptions, FileStorage, Storage};
use crate::tx::{ReadTx, WriteTx};
use crate::walk::WalkStep;
use rbolt_page::{Meta, write_meta};
use std::io::Write;
use std::path::Path;

/// Bytes copied from the file per read while streaming a backup.
const COPY_CHUNK_BYTES: usize = 1 << 20;

impl ReadTx<'_> {
    /// Writes a consistent copy of this snapshot to `w` while writers go on: both metas
    /// (this snapshot's meta, and the same with the previous txid), then every page up to the
    /// high-water mark, read from the file. Returns the bytes written.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| tx.create_bucket("b")?.put("k", "v"))?;
    /// let mut backup = Vec::new();
    /// let written = db.begin_read()?.write_to(&mut backup)?;
    /// assert_eq!(written, backup.len() as u64);
    /// // The bytes are a database file of their own.
    /// std::fs::write(dir.path().join("copy"), &backup).unwrap();
    /// let copy = rbolt::Db::open(dir.path().join("copy"))?;
    /// assert_eq!(copy.begin_read()?.bucket("b")?.unwrap().get("k")?, Some(&b"v"[..]));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn write_to(&self, mut w: impl Write) -> Result<u64> {
        let engine = self.engine;
        let page_size = engine.page_size;
        let meta = *self.meta();
        let io_out = |e: std::io::Error| Error::io(None, e);
        // Page txid % 2 gets this meta, the other page the same with the txid before it, so
        // each meta page's header names its own page.
        let mut metas = [vec![0u8; page_size], vec![0u8; page_size]];
        for txid in [meta.txid, meta.txid.saturating_sub(1)] {
            let m = Meta { txid, ..meta };
            write_meta(&mut metas[(txid % 2) as usize], &m);
        }
        for page in &metas {
            w.write_all(page).map_err(io_out)?;
        }
        let total = meta.pgid * page_size as u64;
        let mut offset = 2 * page_size as u64;
        let mut chunk = vec![0u8; COPY_CHUNK_BYTES.max(page_size)];
        while offset < total {
            let len = ((total - offset) as usize).min(chunk.len());
            engine
                .storage
                .read_exact_at(&mut chunk[..len], offset)
                .map_err(|e| Error::io(engine.path(), e))?;
            w.write_all(&chunk[..len]).map_err(io_out)?;
            offset += len as u64;
        }
        w.flush().map_err(io_out)?;
        Ok(total)
    }

    /// Writes a consistent copy of this snapshot to a file at `path` (replacing any file
    /// there) and syncs it, and the directory too when the file is new. The file is locked as
    /// a database file is, and not waited for: a path another handle has open is an error,
    /// never overwritten. Writes go out in pieces of at most 64 KiB.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| tx.create_bucket("b")?.put("k", "v"))?;
    /// let snapshot = db.begin_read()?;
    /// db.update(|tx| tx.bucket_mut("b")?.unwrap().put("k", "later"))?; // writers go on
    /// let written = snapshot.copy_file(dir.path().join("backup"))?;
    /// assert_eq!(written, std::fs::metadata(dir.path().join("backup")).unwrap().len());
    /// let backup = rbolt::Db::open(dir.path().join("backup"))?;
    /// // The copy is the snapshot, not the file as it is now.
    /// assert_eq!(backup.begin_read()?.bucket("b")?.unwrap().get("k")?, Some(&b"v"[..]));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn copy_file(&self, path: impl AsRef<Path>) -> Result<u64> {
        let path = path.as_ref();
        let io = |e| Error::io(Some(path), e);
        let options = FileOptions::new().lock_timeout(Some(std::time::Duration::ZERO));
        let storage = FileStorage::open(path, options).map_err(|e| io(e.into()))?;
        storage.clear().map_err(io)?;
        let mut writer = crate::storage::StorageWriter::new(&storage);
        let written = self.write_to(&mut writer)?;
        writer.flush().map_err(io)?;
        storage.sync_all().map_err(io)?;
        Ok(written)
    }
}

/// Copies every bucket, key and sequence of `src` into `dst`, packing pages full; commits
/// every `tx_max_size` bytes of keys and values (0: one transaction). The copy drops what the
/// source no longer uses, leaked pages included. `dst` should be empty. Values and the
/// sequence of the root bucket, which only files written by other tools can have, are copied
/// too. Iterative: buckets nest without limit.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let src = rbolt::Db::open(dir.path().join("src"))?;
/// src.update(|tx| {
///     let mut b = tx.create_bucket("b")?;
///     for i in 0u32..5000 {
///         b.put(i.to_be_bytes(), [1u8; 100])?;
///     }
///     b.set_sequence(9)?;
///     Ok::<_, rbolt::Error>(())
/// })?;
/// src.update(|tx| {
///     let mut b = tx.bucket_mut("b")?.unwrap();
///     for i in 0u32..4900 {
///         b.delete(i.to_be_bytes())?;
///     }
///     Ok::<_, rbolt::Error>(())
/// })?;
/// let dst = rbolt::Db::open(dir.path().join("dst"))?;
/// rbolt::compact(&dst, &src, 64 * 1024)?;
/// assert!(dst.file_len()? < src.file_len()?);
/// let tx = dst.begin_read()?;
/// let b = tx.bucket("b")?.unwrap();
/// assert_eq!((b.iter().count(), b.sequence()), (100, 9));
/// # Ok::<(), rbolt::Error>(())
/// ```
pub fn compact(dst: &Db, src: &Db, tx_max_size: u64) -> Result<()> {
    let src_tx = src.begin_read()?;
    let mut state = Compactor {
        dst,
        tx: Some(dst.begin_write()?),
        size: 0,
        tx_max_size,
    };
    let root = src_tx.root();
    if root.sequence() != 0 {
        state.tx().set_root_sequence(root.sequence());
    }
    let mut walk = root.walk();
    while let Some(step) = walk.next_step() {
        match step? {
            WalkStep::Value { key, value } => state.put(walk.path(), key, value)?,
            WalkStep::Enter { bucket, .. } => state.bucket(walk.path(), bucket.sequence())?,
            WalkStep::Leave => {}
        }
    }
    state.tx.take().expect("a transaction is open").commit()
}

struct Compactor<'db> {
    dst: &'db Db,
    tx: Option<WriteTx<'db>>,
    size: u64,
    tx_max_size: u64,
}

impl<'db> Compactor<'db> {
    fn account(&mut self, bytes: u64) -> Result<()> {
        if self.tx_max_size != 0 && self.size + bytes > self.tx_max_size {
            self.tx.take().expect("a transaction is open").commit()?;
            self.tx = Some(self.dst.begin_write()?);
            self.size = 0;
        }
        self.size += bytes;
        Ok(())
    }

    fn tx(&mut self) -> &mut WriteTx<'db> {
        self.tx.as_mut().expect("a transaction is open")
    }

    /// The bucket at `path` (the root for an empty path), open for writing.
    fn bucket_at<'t>(tx: &'t mut WriteTx<'db>, path: &[&[u8]]) -> Result<BucketMut<'t>> {
        let mut bucket = tx.bucket_at(path)?.ok_or(Error::BucketNotFound)?;
        bucket.set_fill_percent(1.0);
        Ok(bucket)
    }

    /// Creates the bucket at `path` with `sequence`.
    fn bucket(&mut self, path: &[&[u8]], sequence: u64) -> Result<()> {
        self.account(path.last().map_or(0, |k| k.len() as u64))?;
        let (name, parent) = path.split_last().expect("a bucket path is not empty");
        let mut parent = Self::bucket_at(self.tx(), parent)?;
        let mut child = parent.create_bucket(name)?;
        child.set_sequence(sequence)
    }

    fn put(&mut self, path: &[&[u8]], key: &[u8], value: &[u8]) -> Result<()> {
        self.account((key.len() + value.len()) as u64)?;
        Self::bucket_at(self.tx(), path)?.put(key, value)
    }
}
