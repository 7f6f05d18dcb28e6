//! Pages for a committing transaction: ids from the freelist or the high-water mark, and the
//! writes that put them in the file. The page buffers are the node arena's (the writer's one
//! pool of them): the tree hands its nodes' images over, the pages filled here (the freelist)
//! are taken from it, and every single-page buffer goes back to it once written or dropped.

use crate::error::{Error, Result};
use crate::storage::Storage;
use rbolt_btree::{Arena, PageAlloc};
use rbolt_freelist::{AnyFreelist, Freelist};
use rbolt_page::{Pgid, Txid};
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

/// What the write transaction allocates with, and where its pages go.
#[derive(Debug)]
pub(crate) struct TxAlloc {
    pub(crate) txid: Txid,
    pub(crate) page_size: usize,
    pub(crate) freelist: AnyFreelist,
    /// One past the last page allocated: the new high-water mark.
    pub(crate) high_water: Pgid,
    dirty: Vec<Dirty>,
    dirty_bytes: usize,
    pub(crate) storage: Arc<dyn Storage>,
    pub(crate) file_len: u64,
    pub(crate) max_size: u64,
    pub(crate) alloc_size: u64,
    /// The file grew in this transaction. Growth is not synced when it happens but by the
    /// commit's first sync, an fsync then (for a commit without syncs, by the next durable
    /// commit's): one sync per commit that grows instead of two.
    pub(crate) grew_without_sync: bool,
    /// Pages allocated and bytes written, for the transaction's stats.
    pub(crate) pages_allocated: u64,
    pub(crate) writes: u64,
    /// Runs taken ahead of need (a vacuum step's multi-page pages, see `reserve`): handed out
    /// by size before any other run, so that single pages cannot break them up first.
    reserved: Vec<(usize, Pgid)>,
    /// A vacuum step's cut: pages it moves lie at or past it, and every page the commit
    /// writes is meant to land below it. Allocations at or past it are counted in
    /// `allocated_past_cut`.
    pub(crate) cut: Option<Pgid>,
    pub(crate) allocated_past_cut: u64,
    /// The high-water mark the commit may not pass (a vacuum step's): an allocation past it
    /// fails at once, before any page of the commit is written.
    pub(crate) high_water_max: Option<Pgid>,
    /// Single pages come from free runs of two or more and then the high-water mark, leaving
    /// isolated free pages free (see [`Runs`]): set by a durable commit that may grow the file.
    pub(crate) prefer_runs: bool,
    runs: Runs,
    /// Set for a commit without syncs: every page extent the tree writes is listed in
    /// `written` with its digest, for the meta's [`rbolt_page::PagesDigest`].
    pub(crate) digest_writes: bool,
    /// The extents written and their digests (when `digest_writes`); the list's memory is the
    /// writer's, from one transaction to the next.
    pub(crate) written: Vec<(Pgid, u128)>,
}

/// A durable commit's single pages once it has taken [`RUNS_AFTER_PAGES`]: each contiguous
/// run of page ids is one write call, and a big commit of pages taken lowest first from a
/// fragmented free set writes almost as many runs as pages (an isolated free page between two
/// others ends a run, and each transaction that deletes at random frees thousands such: see
/// `docs/BENCHMARKS.md`, issue 26, row (f)). So such a commit skips the isolated free pages:
/// it hands out the free runs of two or more pages, lowest first, each page after the one
/// before, and then pages from the high-water mark — while the isolated free pages are under
/// [`RUNS_FREE_DIVISOR`]th of the file, so the file grows by at most that fraction for the
/// pages left free, and first fit takes them again once there are more.
#[derive(Debug, Default)]
enum Runs {
    /// Not looked at yet in this transaction.
    #[default]
    Unknown,
    /// Isolated free pages are plenty, or the commit is done with runs: lowest first.
    Off,
    /// Handing out `next..end`, then the runs from `runs[index]` on.
    On {
        runs: Vec<(Pgid, u64)>,
        index: usize,
        next: u64,
        end: u64,
    },
}

/// A commit takes its first pages lowest first: a small one writes few runs whatever it
/// takes, and growing the file for it would leave a free page behind at every commit.
const RUNS_AFTER_PAGES: u64 = 64;
/// Runs are preferred while the isolated free pages are fewer than the file's pages over this.
const RUNS_FREE_DIVISOR: u64 = 8;

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

impl TxAlloc {
    pub(crate) fn new(
        txid: Txid,
        page_size: usize,
        freelist: AnyFreelist,
        high_water: Pgid,
        storage: Arc<dyn Storage>,
        file_len: u64,
        options: &crate::Options,
    ) -> TxAlloc {
        TxAlloc {
            txid,
            page_size,
            freelist,
            high_water,
            dirty: Vec::new(),
            dirty_bytes: 0,
            storage,
            file_len,
            max_size: options.max_size,
            alloc_size: options.alloc_size.max(page_size as u64),
            grew_without_sync: false,
            pages_allocated: 0,
            writes: 0,
            reserved: Vec::new(),
            cut: None,
            allocated_past_cut: 0,
            high_water_max: None,
            prefer_runs: false,
            runs: Runs::Unknown,
            digest_writes: false,
            written: Vec::new(),
        }
    }

    /// The next page of a free run of two or more (see [`Runs`]), or `None` when there is no
    /// run left or runs are not preferred.
    fn run_page(&mut self) -> Option<Pgid> {
        if matches!(self.runs, Runs::Unknown) {
            let runs = free_runs(&self.freelist);
            let in_runs: u64 = runs.iter().map(|&(_, n_pages)| n_pages).sum();
            let isolated = self.freelist.free_count() as u64 - in_runs;
            self.runs = if isolated.saturating_mul(RUNS_FREE_DIVISOR) < self.high_water.0 {
                Runs::On {
                    runs,
                    index: 0,
                    next: 0,
                    end: 0,
                }
            } else {
                Runs::Off
            };
        }
        let Runs::On {
            runs,
            index,
            next,
            end,
        } = &mut self.runs
        else {
            return None;
        };
        loop {
            if *next < *end {
                *next += 1;
                return Some(Pgid(*next - 1));
            }
            let &(start, n_pages) = runs.get(*index)?;
            *index += 1;
            // Taken whole now, as pages of their own, so that what the commit does not use
            // goes back in one piece (`return_runs`). A multi-page allocation may have taken
            // part of it since the runs were listed: then it is skipped.
            if self
                .freelist
                .allocate_pages(self.txid, start, n_pages as usize)
            {
                (*next, *end) = (start.0, start.0 + n_pages);
            }
        }
    }

    /// Gives back what the commit took of its last free run and did not use, and ends the
    /// preference for runs: the pages allocated after it (the freelist page) are lowest first.
    pub(crate) fn return_runs(&mut self) {
        if let Runs::On { next, end, .. } = self.runs
            && next < end
        {
            let given_back =
                self.freelist
                    .unallocate_pages(self.txid, Pgid(next), (end - next) as usize);
            debug_assert!(given_back, "the run at {next} was not this transaction's");
        }
        self.runs = Runs::Off;
        self.prefer_runs = false;
    }

    /// Takes the lowest free run of `n_pages` now, to be handed out by the next allocation of
    /// that many pages; returns it, or `None` when the free set has no such run.
    pub(crate) fn reserve(&mut self, n_pages: usize) -> Option<Pgid> {
        let pgid = self.freelist.allocate(self.txid, n_pages)?;
        self.reserved.push((n_pages, pgid));
        Some(pgid)
    }

    /// Gives the reserved runs no allocation took back to the free set.
    pub(crate) fn return_reserved(&mut self) {
        for (_, pgid) in self.reserved.drain(..) {
            let given_back = self.freelist.unallocate(self.txid, pgid);
            debug_assert!(
                given_back,
                "a reserved run at {pgid} was not this transaction's"
            );
        }
    }

    fn io(&self, error: std::io::Error) -> Error {
        Error::io(self.storage.path(), error)
    }

    /// Takes `n_pages` contiguous page ids: a reserved run of that size, the lowest free run,
    /// or the high-water mark.
    pub(crate) fn allocate_ids(&mut self, n_pages: usize) -> Result<Pgid> {
        let pgid = self.take_ids(n_pages)?;
        if self.cut.is_some_and(|cut| pgid >= cut) {
            self.allocated_past_cut += n_pages as u64;
        }
        Ok(pgid)
    }

    fn take_ids(&mut self, n_pages: usize) -> Result<Pgid> {
        self.pages_allocated += n_pages as u64;
        if let Some(index) = self.reserved.iter().position(|&(n, _)| n == n_pages) {
            return Ok(self.reserved.swap_remove(index).1);
        }
        if n_pages == 1 && self.prefer_runs && self.pages_allocated > RUNS_AFTER_PAGES {
            if let Some(pgid) = self.run_page() {
                return Ok(pgid);
            }
            // No run left: the high-water mark (`prefer_runs` is for files without a size
            // limit).
            if matches!(self.runs, Runs::On { .. }) {
                return Ok(self.take_high_water(1));
            }
        }
        if let Some(pgid) = self.freelist.allocate(self.txid, n_pages) {
            return Ok(pgid);
        }
        let end = self.high_water.0 + n_pages as u64;
        if self.max_size > 0 && end.saturating_mul(self.page_size as u64) > self.max_size {
            return Err(Error::MaxSizeReached {
                max_size: self.max_size,
            });
        }
        if let Some(max) = self.high_water_max
            && end > max.0
        {
            return Err(Error::MaxSizeReached {
                max_size: max.0.saturating_mul(self.page_size as u64),
            });
        }
        Ok(self.take_high_water(n_pages))
    }

    /// Fails with [`Error::MaxSizeReached`] when a durable point after this commit (`Db::sync`,
    /// a durable commit, the close) could not place its freelist page: no free run of the
    /// pages it needs and no room for them below `max_size`. A commit without syncs checks it
    /// before it writes anything, so that the file can always be made durable: refused, it
    /// changes nothing, where the durable point's failure would leave the commits before it
    /// to the next open of this boot.
    pub(crate) fn ensure_room_for_freelist(&mut self) -> Result<()> {
        if self.max_size == 0 {
            return Ok(());
        }
        // What the durable point's page holds: every free and pending id then, which are the
        // ones now (it frees no page of its own: a commit without syncs has no freelist page).
        let n_pages = rbolt_page::pages_for(self.freelist.write_size(), self.page_size);
        let end = self.high_water.0 + n_pages as u64;
        if end.saturating_mul(self.page_size as u64) <= self.max_size {
            return Ok(());
        }
        if let Some(pgid) = self.freelist.allocate(self.txid, n_pages) {
            let given_back = self.freelist.unallocate(self.txid, pgid);
            debug_assert!(given_back, "the run at {pgid} was just taken");
            return Ok(());
        }
        Err(Error::MaxSizeReached {
            max_size: self.max_size,
        })
    }

    /// Takes `n_pages` at the high-water mark.
    fn take_high_water(&mut self, n_pages: usize) -> Pgid {
        let pgid = self.high_water;
        let end = pgid.0 + n_pages as u64;
        self.high_water = Pgid(end);
        // Recorded so that, once freed, these pages can be released between long readers.
        self.freelist.record_allocation(self.txid, pgid, n_pages);
        pgid
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
        let pgid = self.allocate_ids(n_pages)?;
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
            self.writes += 1;
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
    pub(crate) fn with_dirty_list(mut self, mut list: Vec<Dirty>) -> TxAlloc {
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

impl PageAlloc for TxAlloc {
    type Error = Error;

    fn allocate(&mut self, n_pages: usize) -> Result<Pgid> {
        self.allocate_ids(n_pages)
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
        self.freelist
            .free(self.txid, pgid, overflow)
            .map_err(Error::from)
    }
}

/// The free runs of two or more pages, ascending: start and length.
fn free_runs(freelist: &AnyFreelist) -> Vec<(Pgid, u64)> {
    let mut runs = Vec::new();
    let mut ids = freelist.free_ids();
    let Some(first) = ids.next() else {
        return runs;
    };
    let (mut start, mut n_pages) = (first.0, 1u64);
    for id in ids.chain(std::iter::once(Pgid(u64::MAX))) {
        if id.0 == start + n_pages {
            n_pages += 1;
            continue;
        }
        if n_pages >= 2 {
            runs.push((Pgid(start), n_pages));
        }
        (start, n_pages) = (id.0, 1);
    }
    runs
}
