//! The read transaction: a snapshot of one commit, pinned for as long as it lives.

use crate::bucket::Bucket;
use crate::db::{Db, Snapshot};
use crate::error::{Error, Result};
use crate::iter::{Entry, Iter};
use crate::readers::ReaderSlot;
use crate::tx::pages_of;
use rbolt_btree::Pages;
use rbolt_page::{Corruption, Meta, Pgid, Reason, Txid};

/// A read transaction: a consistent snapshot of the database as of one commit, for as long as
/// it lives. Writers go on committing meanwhile; the pages it reads are not reused until it
/// ends. Values it returns borrow from it.
#[derive(Debug)]
pub struct ReadTx<'db> {
    db: &'db Db,
    snapshot: Snapshot,
    slot: Option<ReaderSlot>,
}

impl<'db> ReadTx<'db> {
    pub(crate) fn new(db: &'db Db, snapshot: Snapshot, slot: ReaderSlot) -> ReadTx<'db> {
        ReadTx {
            db,
            snapshot,
            slot: Some(slot),
        }
    }

    /// The database.
    pub fn db(&self) -> &'db Db {
        self.db
    }

    /// The id of the commit this transaction reads.
    pub fn id(&self) -> Txid {
        self.snapshot.meta.txid()
    }

    /// The meta this transaction reads.
    pub fn meta(&self) -> &Meta {
        &self.snapshot.meta
    }

    /// Bytes of the database as of this snapshot (high-water mark times page size).
    pub fn size(&self) -> u64 {
        self.snapshot.meta.pgid * self.db.page_size as u64
    }

    /// The committed pages of this snapshot.
    pub(crate) fn pages(&self) -> Pages<'_> {
        pages_of(
            &self.snapshot.map,
            self.db.page_size,
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
    pub fn raw_pages(&self) -> Result<&[u8]> {
        if !self.db.is_read_only() {
            return Err(Error::RawAccessNeedsReadOnly);
        }
        let len = self.snapshot.meta.pgid * self.db.page_size as u64;
        Ok(&self.snapshot.map[..len as usize])
    }

    /// The root bucket, whose entries are the top-level buckets.
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
    pub fn buckets(&self) -> Iter<'_> {
        self.root().iter()
    }

    /// Calls `f` with the name and bucket of every top-level bucket, in order.
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
    pub fn check(&self) -> Vec<crate::CheckError> {
        crate::check::check(self.pages(), &self.snapshot.meta)
    }

    /// Checks the tree at page `root` and every bucket below it as [`ReadTx::check`] does,
    /// but not the whole file (bbolt's `check --from-page`): for looking at one damaged
    /// subtree.
    pub fn check_from(&self, root: Pgid) -> Vec<crate::CheckError> {
        crate::check::check_from(self.pages(), &self.snapshot.meta, root)
    }

    /// The free pages of this snapshot, ascending: the ids its freelist page lists (pending
    /// ones included), or, in a file that keeps no freelist, every page below the high-water
    /// mark that nothing reaches.
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
                    Reason::Other(if id.0 < 2 {
                        "the freelist lists a meta page"
                    } else {
                        "the freelist lists a page past the high-water mark"
                    }),
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
        if let Some(slot) = self.slot.take() {
            self.db.readers.leave(slot);
            crate::vacuum::after_reader(self.db);
        }
    }
}
