//! The pages a committing transaction writes: ids from the [`Allocator`] (which alone decides
//! where pages go), buffers, the file's growth, and the writes that put them in the file. The
//! page buffers are the node arena's (the writer's one pool of them): the tree hands its
//! nodes' images over, the pages filled here (the freelist) are taken from it, and every
//! single-page buffer goes back to it once written or dropped.

use crate::error::{Error, Result};
use crate::storage::Storage;
use rbolt_btree::{Arena, PageAlloc};
use rbolt_freelist::{Allocator, AnyFreelist, Freelist};
use rbolt_page::{PageRun, Pgid, Txid};
use smallvec::SmallVec;
use std::sync::Arc;

/// Dirty pages are written out once they hold this many bytes, so a huge commit needs little
/// memory for page buffers.
pub(crate) const DIRTY_FLUSH_BYTES: usize = 8 * 1024 * 1024;
/// Room in the list of dirty pages at the start of a transaction (a few hundred pages is a
/// small transaction's commit), so that it grows once or not at all.
const DIRTY_INITIAL: usize = 256;
/// A page buffer being filled: its first page and bytes (a whole number of pages).
#[derive(Debug)]
pub(crate) struct Dirty {
    pgid: Pgid,
    buf: Box<[u8]>,
}

/// The pages a write transaction writes: their ids from the [`Allocator`], their buffers until
/// written, the file's growth and the write calls.
#[derive(Debug)]
pub(crate) struct PageWrites {
    /// Where every page goes: the one allocator (see `rbolt_freelist::Allocator`).
    pub(crate) allocator: Allocator,
    pub(crate) page_size: usize,
    dirty: Vec<Dirty>,
    dirty_bytes: usize,
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) file_len: u64,
    max_size: u64,
    alloc_size: u64,
    /// The file grew in this transaction. Growth is not synced when it happens but by the
    /// commit's first sync, an fsync then (for a commit without syncs, by the next durable
    /// commit's): one sync per commit that grows instead of two.
    pub(crate) grew_without_sync: bool,
    /// Write calls made, for the transaction's stats.
    pub(crate) write_calls: u64,
    /// Set for a commit without syncs: every page extent the tree writes is listed in
    /// `written` with its digest, for the meta's [`rbolt_page::PagesDigest`].
    pub(crate) digest_writes: bool,
    /// The extents written and their digests (when `digest_writes`); the list's memory is the
    /// writer's, from one transaction to the next.
    pub(crate) written: Vec<(Pgid, u128)>,
    /// Set for a one-sync commit: every run `flush` writes is listed in `runs`, and its
    /// [`rbolt_page::run_digest`] added into `runs_digest`, for the meta that names them.
    pub(crate) record_runs: bool,
    /// The runs written (when `record_runs`), in the order written.
    pub(crate) runs: Vec<PageRun>,
    /// The sum modulo 2^128 of the runs' digests.
    pub(crate) runs_digest: u128,
}

/// The smallest file the growth policy makes.
const FILE_LEN_MIN: u64 = 32 * 1024;
/// Growth leaves room for this fraction of the file's length (1/32: about 3%) past what it
/// must hold, at least [`GROWTH_MIN`] and at most `alloc_size`: so a loaded file is at most
/// a few percent longer than its pages, where bbolt's doubling and fixed 16 MiB steps make a
/// 19 MiB database a 32 MiB file. Growth stays amortised: a file that grows by a few percent
/// at a time grows about 22 times per doubling, each a `fallocate` whose sync is the commit's
/// own (its first sync is an fsync then).
const GROWTH_DIVISOR: u64 = 32;
/// The least room growth leaves (a small file grows in steps of at least this).
const GROWTH_MIN: u64 = 64 * 1024;

/// The length growth gives a file that must hold `len` bytes: `len` plus a thirty-second of
/// it (at least [`GROWTH_MIN`], at most `alloc_size`; at least [`FILE_LEN_MIN`] in all);
/// whole pages, and never past `max_size` (0: no limit) unless `len` itself is.
pub(crate) fn grown_len(len: u64, alloc_size: u64, page_size: u64, max_size: u64) -> u64 {
    let room = (len / GROWTH_DIVISOR).clamp(GROWTH_MIN.min(alloc_size), alloc_size);
    let target = len.saturating_add(room).max(FILE_LEN_MIN);
    let target = target.div_ceil(page_size).saturating_mul(page_size);
    if max_size > 0 {
        target.min(max_size).max(len)
    } else {
        target
    }
}

impl PageWrites {
    pub(crate) fn new(
        allocator: Allocator,
        page_size: usize,
        storage: Arc<dyn Storage>,
        file_len: u64,
        options: &crate::Options,
    ) -> PageWrites {
        PageWrites {
            allocator,
            page_size,
            dirty: Vec::new(),
            dirty_bytes: 0,
            storage,
            file_len,
            max_size: options.max_size,
            alloc_size: options.alloc_size.max(page_size as u64),
            grew_without_sync: false,
            write_calls: 0,
            digest_writes: false,
            written: Vec::new(),
            record_runs: false,
            runs: Vec::new(),
            runs_digest: 0,
        }
    }

    /// The transaction's id.
    pub(crate) fn txid(&self) -> Txid {
        self.allocator.txid()
    }

    /// The freelist, to free pages into.
    pub(crate) fn freelist(&mut self) -> &mut AnyFreelist {
        self.allocator.free_set_mut()
    }

    fn io(&self, error: std::io::Error) -> Error {
        Error::io(self.storage.path(), error)
    }

    /// Queues `buf` to be written at `pgid`.
    pub(crate) fn push(&mut self, pgid: Pgid, buf: Box<[u8]>) {
        self.dirty_bytes += buf.len();
        self.dirty.push(Dirty { pgid, buf });
    }

    /// Allocates `n_pages` and returns them with a buffer from `arena` to fill (its content
    /// unspecified: every byte must be written); queue it with `push`.
    pub(crate) fn allocate_buffer(
        &mut self,
        n_pages: usize,
        arena: &mut Arena,
    ) -> Result<(Pgid, Box<[u8]>)> {
        let pgid = self.allocator.allocate(n_pages)?;
        Ok((pgid, arena.take(n_pages * self.page_size)))
    }

    /// Grows the file to hold `len` bytes, with room past it (`grown_len`), leaving the sync
    /// to the commit (`grew_without_sync`).
    pub(crate) fn ensure_file_len(&mut self, len: u64) -> Result<()> {
        if len <= self.file_len {
            return Ok(());
        }
        let target = grown_len(len, self.alloc_size, self.page_size as u64, self.max_size);
        failpoint!("commit::grow");
        self.storage.grow(target).map_err(|e| self.io(e))?;
        self.grew_without_sync = true;
        self.file_len = target;
        Ok(())
    }

    /// Writes every queued page, in page order, each contiguous run with one vectored write,
    /// and gives the buffers back to `arena` (which keeps the single-page ones).
    pub(crate) fn flush(&mut self, arena: &mut Arena) -> Result<()> {
        if self.dirty.is_empty() {
            return Ok(());
        }
        self.dirty.sort_unstable_by_key(|d| d.pgid);
        let page_size = self.page_size as u64;
        // Whatever these pages held is no longer a checked page once the writes start.
        for dirty in &self.dirty {
            arena.forget_checked(dirty.pgid, dirty.buf.len() as u64 / page_size);
        }
        let last = self.dirty.last().expect("not empty");
        let end = last.pgid.0 * page_size + last.buf.len() as u64;
        self.ensure_file_len(end)?;
        // Inline for the runs small commits make (a run of more pages spills to the heap).
        let mut run: SmallVec<[&[u8]; 16]> = SmallVec::new();
        let mut start = 0;
        while start < self.dirty.len() {
            let first = self.dirty[start].pgid;
            let mut next_pgid = first.0 + (self.dirty[start].buf.len() as u64 / page_size);
            run.clear();
            run.push(&self.dirty[start].buf);
            let mut end = start + 1;
            while end < self.dirty.len() && self.dirty[end].pgid.0 == next_pgid {
                run.push(&self.dirty[end].buf);
                next_pgid += self.dirty[end].buf.len() as u64 / page_size;
                end += 1;
            }
            // One call of the storage, which writes it in system calls of at most
            // `WRITE_BYTES_MAX` bytes.
            self.storage
                .write_vectored_at(&run, first.0 * page_size)
                .map_err(|e| Error::io(self.storage.path(), e))?;
            self.write_calls += 1;
            if self.record_runs {
                self.runs.push(PageRun {
                    start: first,
                    n_pages: next_pgid - first.0,
                });
                let digest = rbolt_page::run_digest(first, &run);
                self.runs_digest = self.runs_digest.wrapping_add(digest);
            }
            start = end;
            failpoint!("commit::after-first-data-write");
        }
        drop(run);
        self.recycle(arena);
        Ok(())
    }

    /// Gives the queued pages' buffers back to `arena`, forgetting the pages (written by
    /// `flush`, or dropped unwritten by a rollback).
    pub(crate) fn recycle(&mut self, arena: &mut Arena) {
        arena.recycle(self.dirty.drain(..).map(|dirty| dirty.buf));
        self.dirty_bytes = 0;
    }

    /// Queues this transaction's dirty pages in `list`, the writer's from the transaction
    /// before (emptied, its room kept), so that a warm writer's transaction allocates none.
    pub(crate) fn with_dirty_list(mut self, mut list: Vec<Dirty>) -> PageWrites {
        list.clear();
        list.reserve(DIRTY_INITIAL);
        self.dirty = list;
        self
    }

    /// The emptied list of dirty pages, for the writer's next transaction
    /// (`with_dirty_list`).
    pub(crate) fn take_dirty_list(&mut self, arena: &mut Arena) -> Vec<Dirty> {
        self.recycle(arena);
        std::mem::take(&mut self.dirty)
    }
}

impl PageAlloc for PageWrites {
    type Error = Error;

    fn allocate(&mut self, n_pages: usize) -> Result<Pgid> {
        Ok(self.allocator.allocate(n_pages)?)
    }

    fn write(&mut self, pgid: Pgid, buf: Box<[u8]>, arena: &mut Arena) -> Result<()> {
        // Every buffer queued before this one is complete: write them out when many, and their
        // buffers serve the nodes still to be written.
        if self.dirty_bytes >= DIRTY_FLUSH_BYTES {
            self.flush(arena)?;
        }
        if buf.len() == self.page_size {
            // A node's image: a checked page once the commit is done.
            arena.stage_checked(pgid);
        }
        if self.digest_writes {
            // Now, while the node's image is in the cache it was just written in.
            let digest = rbolt_page::page_digest(pgid, &buf);
            self.written.push((pgid, digest));
        }
        self.push(pgid, buf);
        Ok(())
    }

    fn free(&mut self, pgid: Pgid, overflow: u32) -> Result<()> {
        let txid = self.allocator.txid();
        self.freelist()
            .free(txid, pgid, overflow)
            .map_err(Error::from)
    }
}
