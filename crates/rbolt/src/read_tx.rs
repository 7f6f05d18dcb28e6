//! The read transaction: a snapshot of one commit, pinned for as long as it lives.

use crate::bucket::Bucket;
use crate::engine::Engine;
use crate::engine::readers::ReaderSlot;
use crate::engine::snapshot::Snapshot;
use crate::engine::snapshot::pages_of;
use crate::error::{Error, Result};
use crate::iter::{Entry, Iter};
use rbolt_btree::Pages;
use rbolt_page::{Corruption, Meta, Pgid, Reason, Txid};

/// A read transaction: a consistent snapshot of the database as of one commit, for as long as
/// it lives. Writers go on committing meanwhile; the pages it reads are not reused until it
/// ends. Values it returns borrow from it.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| tx.create_bucket("b")?.put("k", "old"))?;
/// let snapshot = db.begin_read()?;
/// db.update(|tx| tx.bucket_mut("b")?.unwrap().put("k", "new"))?;
/// // The snapshot still reads the commit it began at; a new one reads the latest.
/// assert_eq!(snapshot.bucket("b")?.unwrap().get("k")?, Some(&b"old"[..]));
/// assert_eq!(db.begin_read()?.bucket("b")?.unwrap().get("k")?, Some(&b"new"[..]));
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Debug)]
pub struct ReadTx<'db> {
    pub(crate) engine: &'db Engine,
    snapshot: Snapshot,
    slot: Option<ReaderSlot>,
    /// The slot of the writer's reader table this transaction is registered in, on a
    /// read-only handle beside a writer of another process.
    process_slot: Option<rbolt_storage::ClaimedSlot>,
}

impl Engine {
    /// Starts a read transaction on the newest committed state ([`crate::Db::begin_read`]).
    pub(crate) fn begin_read(&self) -> Result<ReadTx<'_>> {
        self.check_poisoned()?;
        if let Some(beside) = &self.beside_writer {
            let (snapshot, process_slot) = beside.begin(self)?;
            let slot = self.readers.enter(snapshot.meta.txid());
            self.counters.tx_begun();
            return Ok(ReadTx {
                engine: self,
                snapshot,
                slot: Some(slot),
                process_slot: Some(process_slot),
            });
        }
        let (snapshot, slot) = {
            let current = self
                .current
                .read()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            // Registering under the lock means a writer that publishes after us finds us.
            let slot = self.readers.enter(current.meta.txid());
            (current.clone(), slot)
        };
        self.counters.tx_begun();
        Ok(ReadTx {
            engine: self,
            snapshot,
            slot: Some(slot),
            process_slot: None,
        })
    }
}

impl<'db> ReadTx<'db> {
    /// The id of the commit this transaction reads.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// let before = db.begin_read()?.id();
    /// db.update(|tx| tx.create_bucket("b").map(drop))?;
    /// assert_eq!(db.begin_read()?.id(), rbolt::Txid(before.0 + 1));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn id(&self) -> Txid {
        self.snapshot.meta.txid()
    }

    /// The meta this transaction reads.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// let tx = db.begin_read()?;
    /// let meta = tx.meta();
    /// assert_eq!(meta.page_size as usize, db.page_size());
    /// assert_eq!(meta.txid(), tx.id());
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn meta(&self) -> &Meta {
        &self.snapshot.meta
    }

    /// Bytes of the database as of this snapshot (high-water mark times page size).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// let tx = db.begin_read()?;
    /// assert_eq!(tx.size(), tx.meta().pgid * db.page_size() as u64);
    /// assert!(tx.size() <= db.file_len()?); // the file may hold room to grow into
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn size(&self) -> u64 {
        self.snapshot.meta.pgid * self.engine.page_size as u64
    }

    /// The committed pages of this snapshot.
    pub(crate) fn pages(&self) -> Pages<'_> {
        pages_of(
            &self.snapshot.map,
            self.engine.page_size,
            self.snapshot.meta.high_water(),
        )
    }

    /// The bytes of this snapshot's pages, page `n` at `n * page_size`, up to its high-water
    /// mark: for tools that read pages directly (`rbolt pages`, `rbolt check --from-page`).
    ///
    /// Only a read-only handle gives them out ([`Error::RawAccessNeedsReadOnly`] otherwise):
    /// a writer rewrites the metas and reuses free pages while readers live, which is sound
    /// for the pages a snapshot reaches but not for raw bytes borrowed from anywhere. On a
    /// read-only handle no writer exists (the shared file lock keeps them out), so nothing
    /// below the high-water mark changes while the bytes are borrowed.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// let path = dir.path().join("db");
    /// let db = rbolt::Db::open(&path)?;
    /// assert!(matches!(
    ///     db.begin_read()?.raw_pages(),
    ///     Err(rbolt::Error::RawAccessNeedsReadOnly)
    /// ));
    /// db.close()?;
    /// let db = rbolt::Db::open_with(&path, rbolt::Options::default().read_only(true))?;
    /// let tx = db.begin_read()?;
    /// let pages = tx.raw_pages()?;
    /// assert_eq!(pages.len() as u64, tx.size());
    /// // Page 0 is a meta page: the magic number follows its 16-byte page header.
    /// assert_eq!(pages[16..20], rbolt::page::MAGIC.to_le_bytes());
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn raw_pages(&self) -> Result<&[u8]> {
        if !self.engine.options.read_only || self.engine.beside_writer.is_some() {
            return Err(Error::RawAccessNeedsReadOnly);
        }
        let len = self.snapshot.meta.pgid * self.engine.page_size as u64;
        Ok(&self.snapshot.map[..len as usize])
    }

    /// The root bucket, whose entries are the top-level buckets.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| tx.create_bucket("users").map(drop))?;
    /// let tx = db.begin_read()?;
    /// let root = tx.root();
    /// let users = root.get("users")?; // a bucket, not a value
    /// assert_eq!(users, None);
    /// assert!(root.bucket("users")?.is_some());
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn root(&self) -> Bucket<'_> {
        let meta = &self.snapshot.meta;
        Bucket {
            view: rbolt_btree::TreeView::from_page(self.pages(), meta.root_pgid()),
            sequence: meta.root.sequence,
            children: None,
        }
    }

    /// The top-level bucket `name`, if it exists.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// # db.update(|tx| tx.create_bucket("users")?.put("alice", "admin"))?;
    /// let tx = db.begin_read()?;
    /// let users = tx.bucket("users")?.expect("created");
    /// assert_eq!(users.get("alice")?, Some(&b"admin"[..]));
    /// assert!(tx.bucket("nobody")?.is_none());
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn bucket(&self, name: impl AsRef<[u8]>) -> Result<Option<Bucket<'_>>> {
        let name = name.as_ref();
        self.root().bucket(name)
    }

    /// The top-level buckets, by name in order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     tx.create_bucket("b")?;
    ///     tx.create_bucket("a")?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// let tx = db.begin_read()?;
    /// let names: Vec<&[u8]> = tx.buckets().map(|e| e.map(|e| e.key())).collect::<Result<_, _>>()?;
    /// assert_eq!(names, [b"a", b"b"]);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn buckets(&self) -> Iter<'_> {
        self.root().iter()
    }

    /// Calls `f` with the name and bucket of every top-level bucket, in order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     tx.create_bucket("a")?.put("k", "v")?;
    ///     tx.create_bucket("b")?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// let mut sizes = Vec::new();
    /// db.begin_read()?.for_each(|name, bucket| {
    ///     sizes.push((name.to_vec(), bucket.iter().count()));
    ///     Ok(())
    /// })?;
    /// assert_eq!(sizes, [(b"a".to_vec(), 1), (b"b".to_vec(), 0)]);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn for_each(&self, mut f: impl FnMut(&[u8], Bucket<'_>) -> Result<()>) -> Result<()> {
        let root = self.root();
        for entry in root.iter() {
            let entry: Entry<'_> = entry?;
            if let Some(bucket) = root.bucket(entry.key())? {
                f(entry.key(), bucket)?;
            }
        }
        Ok(())
    }

    /// Checks the snapshot's consistency: every page reachable once, of the right kind and
    /// not free; every page below the high-water mark reachable or free; keys in order.
    /// Returns every problem found (none for a sound file). Never panics on a corrupt file.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for i in 0u32..2000 {
    ///         b.put(i.to_be_bytes(), [7u8; 64])?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// assert_eq!(db.begin_read()?.check(), []);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn check(&self) -> Vec<crate::CheckError> {
        crate::check::check(self.pages(), &self.snapshot.meta)
    }

    /// Checks the tree at page `root` and every bucket below it as [`ReadTx::check`] does,
    /// but not the whole file (bbolt's `check --from-page`): for looking at one damaged
    /// subtree.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for i in 0u32..2000 {
    ///         b.put(i.to_be_bytes(), [7u8; 64])?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// let tx = db.begin_read()?;
    /// let root = tx.bucket("b")?.unwrap().root();
    /// assert_eq!(tx.check_from(root), []);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn check_from(&self, root: Pgid) -> Vec<crate::CheckError> {
        crate::check::check_from(self.pages(), &self.snapshot.meta, root)
    }

    /// The free pages of this snapshot, ascending: the ids its freelist page lists (pending
    /// ones included), or, in a file that keeps no freelist, every page below the high-water
    /// mark that nothing reaches.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for i in 0u32..2000 {
    ///         b.put(i.to_be_bytes(), [7u8; 64])?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.update(|tx| tx.delete_bucket("b"))?;
    /// let tx = db.begin_read()?;
    /// let free = tx.free_page_ids()?;
    /// assert!(free.len() > 10); // the bucket's pages
    /// assert!(free.windows(2).all(|w| w[0] < w[1])); // ascending, each once
    /// assert!(free.iter().all(|id| id.0 >= 2 && id.0 < tx.meta().pgid));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn free_page_ids(&self) -> Result<Vec<Pgid>> {
        let meta = &self.snapshot.meta;
        let pages = self.pages();
        if meta.has_freelist() {
            let span = pages.page(Pgid(0), meta.freelist_pgid())?;
            let page = rbolt_page::FreelistPage::new(span, meta.freelist_pgid())?;
            let mut ids: Vec<Pgid> = page.iter().collect();
            ids.sort_unstable();
            if let Some(id) = ids.iter().find(|id| id.0 < 2 || **id >= meta.high_water()) {
                return Err(Corruption::new(
                    meta.freelist_pgid(),
                    Reason::OutsideTheFile {
                        what: if id.0 < 2 {
                            "a freelist entry (a meta page)"
                        } else {
                            "a freelist entry (past the high-water mark)"
                        },
                    },
                )
                .into());
            }
            ids.dedup();
            return Ok(ids);
        }
        let reachable = crate::walk::reachable_pages(pages, meta)?;
        Ok((2..meta.pgid)
            .filter(|&id| !reachable.contains(id))
            .map(Pgid)
            .collect())
    }
}

impl Drop for ReadTx<'_> {
    fn drop(&mut self) {
        if let (Some(slot), Some(beside)) = (self.process_slot.take(), &self.engine.beside_writer) {
            beside.give_back(slot);
        }
        if let Some(slot) = self.slot.take() {
            self.engine.readers.leave(slot);
            crate::engine::shrink::after_reader(self.engine);
        }
    }
}
