//! Model tests: both implementations against a plain `BTreeSet`/`BTreeMap` restatement of
//! bbolt's freelist semantics, over random transaction histories; plus unit tests of the
//! pieces.

use crate::{ArrayFreelist, Freelist, FreelistError, SpanFreelist, merge_pgids};
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use rbolt_page::{FreelistPage, PAGE_HEADER_SIZE, Pgid, Txid, freelist_page_size, write_freelist};
use std::collections::{BTreeMap, BTreeSet};

/// Number of random histories per model test: enough to hit every branch (rollback after
/// allocations, ranges between readers, the 0xFFFF rule in the big variant) in well under a
/// second each.
const HISTORIES: u64 = 300;

/// One freeing transaction's pending spans in the model: (start, n_pages, allocated_by).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct ModelTx {
    spans: Vec<(u64, u64, Option<u64>)>,
    last_begin: Option<u64>,
}

/// The freelist semantics in the plainest form: sets of ids and linear scans.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Model {
    free: BTreeSet<u64>,
    pending: BTreeMap<u64, ModelTx>,
    allocs: BTreeMap<u64, u64>,
    /// Per open transaction: run start → (n_pages, allocation record it replaced).
    undo: BTreeMap<u64, BTreeMap<u64, (u64, Option<u64>)>>,
    /// Per open transaction: the ids `trim_tail` cut off.
    trims: BTreeMap<u64, Vec<u64>>,
}

impl Model {
    /// Every pending page: pgid → (freed_by, allocated_by or 0).
    fn pending_pages(&self) -> BTreeMap<u64, (u64, u64)> {
        let mut pages = BTreeMap::new();
        for (&txid, tx) in &self.pending {
            for &(start, n_pages, allocated_by) in &tx.spans {
                for id in start..start + n_pages {
                    pages.insert(id, (txid, allocated_by.unwrap_or(0)));
                }
            }
        }
        pages
    }

    fn allocate(&mut self, txid: u64, n_pages: u64) -> Option<u64> {
        let mut run_start = 0;
        let mut run_len = 0;
        let mut previous = None;
        let mut found = None;
        for &id in &self.free {
            if previous == Some(id.wrapping_sub(1)) {
                run_len += 1;
            } else {
                run_start = id;
                run_len = 1;
            }
            previous = Some(id);
            if run_len == n_pages {
                found = Some(run_start);
                break;
            }
        }
        let start = found?;
        for id in start..start + n_pages {
            self.free.remove(&id);
        }
        let replaced = self.allocs.insert(start, txid);
        self.undo
            .entry(txid)
            .or_default()
            .insert(start, (n_pages, replaced));
        Some(start)
    }

    fn free(&mut self, txid: u64, pgid: u64, overflow: u32) -> Result<(), FreelistError> {
        if pgid < 2 {
            return Err(FreelistError::MetaPage { pgid: Pgid(pgid) });
        }
        let Some(last) = pgid.checked_add(u64::from(overflow)) else {
            return Err(FreelistError::SpanTooLong {
                pgid: Pgid(pgid),
                overflow,
            });
        };
        let own_run = self.undo.get(&txid).is_some_and(|runs| {
            runs.iter()
                .any(|(&start, &(n_pages, _))| start <= last && pgid < start + n_pages)
        });
        if self.allocs.get(&pgid) == Some(&txid) || own_run {
            return Err(FreelistError::OwnAllocation {
                txid: Txid(txid),
                pgid: Pgid(pgid),
            });
        }
        let pending = self.pending_pages();
        if let Some(taken) =
            (pgid..=last).find(|id| self.free.contains(id) || pending.contains_key(id))
        {
            return Err(FreelistError::AlreadyFreed { pgid: Pgid(taken) });
        }
        let allocated_by = self.allocs.remove(&pgid);
        self.pending.entry(txid).or_default().spans.push((
            pgid,
            u64::from(overflow) + 1,
            allocated_by,
        ));
        Ok(())
    }

    fn release(&mut self, up_to: u64) {
        let released: Vec<u64> = self
            .pending
            .range(..=up_to)
            .map(|(&txid, _)| txid)
            .collect();
        for txid in released {
            for (start, n_pages, _) in self.pending.remove(&txid).unwrap().spans {
                self.free.extend(start..start + n_pages);
            }
        }
    }

    fn release_range(&mut self, begin: u64, end: u64) {
        if begin > end {
            return;
        }
        for (_, tx) in self.pending.range_mut(begin..=end) {
            if tx.last_begin == Some(begin) {
                continue;
            }
            let mut kept = Vec::new();
            for &(start, n_pages, allocated_by) in &tx.spans {
                if (begin..=end).contains(&allocated_by.unwrap_or(0)) {
                    self.free.extend(start..start + n_pages);
                } else {
                    kept.push((start, n_pages, allocated_by));
                }
            }
            tx.spans = kept;
            tx.last_begin = Some(begin);
        }
        self.pending.retain(|_, tx| !tx.spans.is_empty());
    }

    fn release_pending(&mut self, readers: &[u64]) {
        let mut readers = readers.to_vec();
        readers.sort_unstable();
        let oldest = readers.first().copied().unwrap_or(u64::MAX);
        if oldest > 0 {
            self.release(oldest - 1);
        }
        let mut begin = oldest;
        for reader in readers {
            if reader > 0 {
                self.release_range(begin, reader - 1);
            }
            begin = reader + 1;
        }
        self.release_range(begin, u64::MAX);
    }

    /// Releases every pending page that no open reader and not the durable meta `durable`
    /// can reach, stated page by page: a reader at `r` keeps a page allocated at or before `r`
    /// and freed at or after it; the durable meta keeps one allocated at or before `durable`
    /// and freed after it.
    fn release_pending_durable(&mut self, readers: &[u64], durable: u64) {
        for tx in self.pending.values_mut() {
            tx.last_begin = None;
        }
        let freed_by: Vec<u64> = self.pending.keys().copied().collect();
        for freed in freed_by {
            let tx = self.pending.get_mut(&freed).unwrap();
            let mut kept = Vec::new();
            for &(start, n_pages, allocated_by) in &tx.spans {
                let allocated = allocated_by.unwrap_or(0);
                let by_reader = readers.iter().any(|&r| allocated <= r && r <= freed);
                let by_durable = allocated <= durable && durable < freed;
                if by_reader || by_durable {
                    kept.push((start, n_pages, allocated_by));
                } else {
                    self.free.extend(start..start + n_pages);
                }
            }
            tx.spans = kept;
        }
        self.pending.retain(|_, tx| !tx.spans.is_empty());
    }

    fn rollback(&mut self, txid: u64) {
        if let Some(tx) = self.pending.remove(&txid) {
            for (start, _, allocated_by) in tx.spans {
                if let Some(allocated_by) = allocated_by {
                    self.allocs.insert(start, allocated_by);
                }
            }
        }
        self.free
            .extend(self.trims.remove(&txid).unwrap_or_default());
        for (start, (n_pages, replaced)) in self.undo.remove(&txid).unwrap_or_default() {
            match replaced {
                Some(previous) => self.allocs.insert(start, previous),
                None => self.allocs.remove(&start),
            };
            self.free.extend(start..start + n_pages);
        }
    }

    /// Undoes the allocation `txid` made at `start`, if any.
    fn unallocate(&mut self, txid: u64, start: u64) -> bool {
        let Some((n_pages, replaced)) = self.undo.get_mut(&txid).and_then(|r| r.remove(&start))
        else {
            return false;
        };
        if self.undo.get(&txid).is_some_and(BTreeMap::is_empty) {
            self.undo.remove(&txid);
        }
        match replaced {
            Some(previous) => self.allocs.insert(start, previous),
            None => self.allocs.remove(&start),
        };
        self.free.extend(start..start + n_pages);
        true
    }

    /// Takes `start..start + n_pages` when all of it is free, each page an allocation of
    /// its own.
    fn allocate_pages(&mut self, txid: u64, start: u64, n_pages: u64) -> bool {
        let Some(end) = start.checked_add(n_pages) else {
            return false;
        };
        if n_pages == 0 || start < 2 || !(start..end).all(|id| self.free.contains(&id)) {
            return false;
        }
        for id in start..end {
            self.free.remove(&id);
            let replaced = self.allocs.insert(id, txid);
            self.undo.entry(txid).or_default().insert(id, (1, replaced));
        }
        true
    }

    /// Gives back `start..start + n_pages` when each is a one-page allocation of `txid`.
    fn unallocate_pages(&mut self, txid: u64, start: u64, n_pages: u64) -> bool {
        let Some(end) = start.checked_add(n_pages) else {
            return false;
        };
        let own = |id| {
            self.undo
                .get(&txid)
                .and_then(|runs| runs.get(&id))
                .is_some_and(|&(n, _)| n == 1)
        };
        if n_pages == 0 || !(start..end).all(own) {
            return false;
        }
        for id in start..end {
            assert!(self.unallocate(txid, id));
        }
        true
    }

    fn commit(&mut self, txid: u64) {
        self.undo.retain(|&open, _| open > txid);
        self.trims.retain(|&open, _| open > txid);
    }

    /// Cuts the free ids just below `high_water` off, one by one, and returns the new mark.
    fn trim_tail(&mut self, txid: u64, high_water: u64) -> u64 {
        let mut mark = high_water;
        while mark > 2 && self.free.remove(&(mark - 1)) {
            self.trims.entry(txid).or_default().push(mark - 1);
            mark -= 1;
        }
        mark
    }

    /// The page bytes a freelist in this state must write.
    fn page(&self, pgid: Pgid) -> Vec<u8> {
        let mut ids: Vec<Pgid> = self.free.iter().copied().map(Pgid).collect();
        ids.extend(self.pending_pages().keys().copied().map(Pgid));
        ids.sort_unstable();
        let mut page = vec![0; freelist_page_size(ids.len())];
        write_freelist(&mut page, pgid, 0, ids.into_iter());
        page
    }
}

/// One step of a random history.
#[derive(Clone, Debug)]
enum Op {
    /// The current writer allocates `n` pages (from the freelist or the high-water mark).
    Allocate(u8),
    /// The current writer frees one of the pages in use (possibly its own: an error).
    Free(u16),
    /// Frees an arbitrary span; run only when the model says it fails, to check errors.
    FreeBad {
        pgid: u64,
        overflow: u32,
    },
    Commit,
    Rollback,
    OpenReader,
    CloseReader(u8),
    /// Commits, then releases up to this many transactions before the last committed one.
    Release(u8),
    /// Commits, then releases a range of txids near the current one.
    ReleaseRange(u8, u8),
    /// Commits, then releases what the open readers cannot see.
    ReleasePending,
    /// Commits, then releases what neither the open readers nor the durable meta of this many
    /// transactions before the last committed one can see.
    ReleasePendingDurable(u8),
    /// Writes the page, reads it into fresh freelists with the pending pages restored,
    /// compares; and reloads the live freelists from it.
    WriteReload,
    /// Commits, then rebuilds the free set from the free and pending ids.
    Rebuild,
    /// The current writer cuts the free pages at the top off and lowers the high-water mark.
    TrimTail,
    /// The current writer gives back one of the runs it allocated (or a page it never did).
    Unallocate(u16),
    /// The current writer takes pages it picks: from a free id (or any id), this many.
    AllocatePages(u16, u8),
    /// The current writer gives back pages it took one by one: from one of them, this many.
    UnallocatePages(u16, u8),
}

impl Arbitrary for Op {
    fn arbitrary(g: &mut Gen) -> Op {
        let small = |g: &mut Gen| *g.choose(&[0u8, 1, 2, 3, 4, 5, 6, 7]).unwrap();
        match u8::arbitrary(g) % 32 {
            0..=5 => Op::Allocate(*g.choose(&[1u8, 1, 1, 2, 2, 3, 4, 6]).unwrap()),
            6..=10 => Op::Free(u16::arbitrary(g)),
            11 => {
                let pgid = *g
                    .choose(&[0u64, 1, 2, 3, 5, 8, 13, 21, 34, 55, u64::MAX - 1])
                    .unwrap();
                Op::FreeBad {
                    pgid,
                    overflow: u32::from(small(g)),
                }
            }
            12..=13 => Op::Commit,
            14 => Op::Rollback,
            15..=16 => Op::OpenReader,
            17 => Op::CloseReader(u8::arbitrary(g)),
            18 => Op::Release(small(g)),
            19 => Op::ReleaseRange(small(g), small(g)),
            20..=21 => Op::ReleasePending,
            22 => Op::WriteReload,
            23 => Op::Rebuild,
            24..=25 => Op::ReleasePendingDurable(small(g)),
            26 => Op::Unallocate(u16::arbitrary(g)),
            27..=28 => Op::AllocatePages(u16::arbitrary(g), *g.choose(&[1u8, 1, 2, 3, 5]).unwrap()),
            29 => Op::UnallocatePages(u16::arbitrary(g), *g.choose(&[1u8, 1, 2, 3]).unwrap()),
            _ => Op::TrimTail,
        }
    }
}

/// The freelists under test, the model, and the database around them.
struct World {
    array: ArrayFreelist,
    span: SpanFreelist,
    model: Model,
    /// The current write transaction.
    txid: u64,
    high_water: u64,
    /// Pages in use: (first page, overflow).
    in_use: Vec<(u64, u32)>,
    readers: Vec<u64>,
    /// The state when the current write transaction began, for rollback.
    at_tx_start: (ArrayFreelist, SpanFreelist, Model, u64, Vec<(u64, u32)>),
}

impl World {
    /// A file whose pages `2..2 + initial.len()` are free where `initial` says so, read from a
    /// page or rebuilt from the ids.
    fn new(initial: &[bool], from_page: bool) -> World {
        let high_water = 2 + initial.len() as u64;
        let free: Vec<Pgid> = (2..high_water)
            .filter(|&id| initial[(id - 2) as usize])
            .map(Pgid)
            .collect();
        let in_use = (2..high_water)
            .filter(|&id| !initial[(id - 2) as usize])
            .map(|id| (id, 0))
            .collect();
        let mut array = ArrayFreelist::new();
        let mut span = SpanFreelist::new();
        if from_page {
            let mut page = vec![0; freelist_page_size(free.len())];
            write_freelist(&mut page, Pgid(high_water), 0, free.iter().copied());
            let page = FreelistPage::new(&page, Pgid(high_water)).unwrap();
            array.read(&page, Pgid(high_water)).unwrap();
            span.read(&page, Pgid(high_water)).unwrap();
        } else {
            let mut shuffled = free.clone();
            shuffled.reverse();
            array.rebuild(&shuffled).unwrap();
            span.rebuild(&shuffled).unwrap();
        }
        let model = Model {
            free: free.iter().map(|id| id.0).collect(),
            ..Model::default()
        };
        let at_tx_start = (
            array.clone(),
            span.clone(),
            model.clone(),
            high_water,
            Vec::new(),
        );
        let mut world = World {
            array,
            span,
            model,
            txid: 2,
            high_water,
            in_use,
            readers: Vec::new(),
            at_tx_start,
        };
        world.begin();
        world
    }

    /// Remembers the state at the start of a write transaction.
    fn begin(&mut self) {
        self.at_tx_start = (
            self.array.clone(),
            self.span.clone(),
            self.model.clone(),
            self.high_water,
            self.in_use.clone(),
        );
    }

    fn commit(&mut self) {
        let txid = Txid(self.txid);
        self.array.commit(txid);
        self.span.commit(txid);
        self.model.commit(self.txid);
        self.txid += 1;
        self.begin();
    }

    fn step(&mut self, op: &Op) {
        let txid = Txid(self.txid);
        match *op {
            Op::Allocate(n) => {
                let n = u64::from(n);
                let expected = self.model.allocate(self.txid, n);
                assert_eq!(
                    self.array.allocate(txid, n as usize).map(|id| id.0),
                    expected
                );
                assert_eq!(
                    self.span.allocate(txid, n as usize).map(|id| id.0),
                    expected
                );
                let start = expected.unwrap_or_else(|| {
                    // No run: the database grows, as the facade does.
                    self.high_water += n;
                    self.high_water - n
                });
                self.in_use.push((start, (n - 1) as u32));
            }
            Op::Free(pick) => {
                if self.in_use.is_empty() {
                    return;
                }
                let index = usize::from(pick) % self.in_use.len();
                let (pgid, overflow) = self.in_use[index];
                let expected = self.model.free(self.txid, pgid, overflow);
                self.check_free(txid, Pgid(pgid), overflow, &expected);
                if expected.is_ok() {
                    self.in_use.swap_remove(index);
                }
            }
            Op::FreeBad { pgid, overflow } => {
                let mut model = self.model.clone();
                let expected = model.free(self.txid, pgid, overflow);
                if expected.is_err() {
                    self.check_free(txid, Pgid(pgid), overflow, &expected);
                }
            }
            Op::Commit => self.commit(),
            Op::Rollback => {
                self.array.rollback(txid);
                self.span.rollback(txid);
                self.model.rollback(self.txid);
                let (array, span, model, high_water, in_use) = self.at_tx_start.clone();
                // Exactly the state before the transaction, internals included.
                assert_eq!(self.array, array, "array rollback is not exact");
                assert_eq!(self.span, span, "span rollback is not exact");
                assert_eq!(self.model, model, "model rollback is not exact");
                self.high_water = high_water;
                self.in_use = in_use;
            }
            Op::OpenReader => self.readers.push(self.txid - 1),
            Op::CloseReader(pick) => {
                if !self.readers.is_empty() {
                    let index = usize::from(pick) % self.readers.len();
                    self.readers.swap_remove(index);
                }
            }
            Op::Release(back) => {
                self.commit();
                let up_to = (self.txid - 1).saturating_sub(u64::from(back) % 4);
                self.array.release(Txid(up_to));
                self.span.release(Txid(up_to));
                self.model.release(up_to);
                // Releases run between write transactions: the next one starts after it.
                self.begin();
            }
            Op::ReleaseRange(begin, end) => {
                self.commit();
                let begin = self.txid.saturating_sub(u64::from(begin));
                let end = self.txid.saturating_sub(u64::from(end));
                self.array.release_range(Txid(begin), Txid(end));
                self.span.release_range(Txid(begin), Txid(end));
                self.model.release_range(begin, end);
                // Releases run between write transactions: the next one starts after it.
                self.begin();
            }
            Op::ReleasePending => {
                self.commit();
                let readers: Vec<Txid> = self.readers.iter().copied().map(Txid).collect();
                self.array.release_pending(&readers);
                self.span.release_pending(&readers);
                self.model.release_pending(&self.readers);
                // Releases run between write transactions: the next one starts after it.
                self.begin();
            }
            Op::ReleasePendingDurable(back) => {
                self.commit();
                let durable = (self.txid - 1).saturating_sub(u64::from(back) % 6);
                let readers: Vec<Txid> = self.readers.iter().copied().map(Txid).collect();
                self.array.release_pending_durable(&readers, Txid(durable));
                self.span.release_pending_durable(&readers, Txid(durable));
                self.model.release_pending_durable(&self.readers, durable);
                // Releases run between write transactions: the next one starts after it.
                self.begin();
            }
            Op::Unallocate(pick) => {
                // One of this transaction's runs from the free set, or any page in use.
                let own: Vec<u64> = self
                    .model
                    .undo
                    .get(&self.txid)
                    .map(|runs| runs.keys().copied().collect())
                    .unwrap_or_default();
                let candidates: Vec<u64> = if own.is_empty() || pick % 4 == 0 {
                    self.in_use.iter().map(|&(pgid, _)| pgid).collect()
                } else {
                    own
                };
                let Some(&pgid) = candidates.get(usize::from(pick) % candidates.len().max(1))
                else {
                    return;
                };
                let expected = self.model.unallocate(self.txid, pgid);
                assert_eq!(self.array.unallocate(txid, Pgid(pgid)), expected);
                assert_eq!(self.span.unallocate(txid, Pgid(pgid)), expected);
                if expected {
                    self.in_use.retain(|&(start, _)| start != pgid);
                }
            }
            Op::TrimTail => {
                let expected = self.model.trim_tail(self.txid, self.high_water);
                let high_water = Pgid(self.high_water);
                assert_eq!(self.array.trim_tail(txid, high_water).0, expected);
                assert_eq!(self.span.trim_tail(txid, high_water).0, expected);
                assert!(
                    self.in_use
                        .iter()
                        .all(|&(pgid, overflow)| pgid + u64::from(overflow) < expected),
                    "a page in use lies past the trimmed mark"
                );
                self.high_water = expected;
            }
            Op::AllocatePages(pick, n) => {
                let free: Vec<u64> = self.model.free.iter().copied().collect();
                let start = match free.get(usize::from(pick) % free.len().max(1)) {
                    Some(&id) if pick % 5 != 0 => id,
                    // Any id, free or not, in the file or past it: mostly refused.
                    _ => u64::from(pick) % (self.high_water + 2),
                };
                let n = u64::from(n);
                let before = (self.array.clone(), self.span.clone());
                let expected = self.model.allocate_pages(self.txid, start, n);
                let pgid = Pgid(start);
                assert_eq!(self.array.allocate_pages(txid, pgid, n as usize), expected);
                assert_eq!(self.span.allocate_pages(txid, pgid, n as usize), expected);
                if expected {
                    self.in_use.extend((start..start + n).map(|id| (id, 0)));
                } else {
                    assert_eq!(
                        before,
                        (self.array.clone(), self.span.clone()),
                        "refused take"
                    );
                }
            }
            Op::UnallocatePages(pick, n) => {
                let own: Vec<u64> = self
                    .model
                    .undo
                    .get(&self.txid)
                    .map(|runs| {
                        runs.iter()
                            .filter(|(_, (n_pages, _))| *n_pages == 1)
                            .map(|(&start, _)| start)
                            .collect()
                    })
                    .unwrap_or_default();
                let Some(&start) = own.get(usize::from(pick) % own.len().max(1)) else {
                    return;
                };
                let n = u64::from(n);
                let before = (self.array.clone(), self.span.clone());
                let expected = self.model.unallocate_pages(self.txid, start, n);
                let pgid = Pgid(start);
                assert_eq!(
                    self.array.unallocate_pages(txid, pgid, n as usize),
                    expected
                );
                assert_eq!(self.span.unallocate_pages(txid, pgid, n as usize), expected);
                if expected {
                    self.in_use
                        .retain(|&(id, _)| !(start..start + n).contains(&id));
                } else {
                    assert_eq!(
                        before,
                        (self.array.clone(), self.span.clone()),
                        "refused give-back"
                    );
                }
            }
            Op::WriteReload => self.write_reload(),
            Op::Rebuild => {
                self.commit();
                let mut ids: Vec<Pgid> = self.model.free.iter().copied().map(Pgid).collect();
                ids.extend(self.model.pending_pages().keys().copied().map(Pgid));
                ids.reverse();
                self.array.rebuild(&ids).unwrap();
                self.span.rebuild(&ids).unwrap();
                // Releases run between write transactions: the next one starts after it.
                self.begin();
            }
        }
    }

    /// Frees in both freelists and checks they did what the model did; a failing free must
    /// leave everything as it was.
    fn check_free(
        &mut self,
        txid: Txid,
        pgid: Pgid,
        overflow: u32,
        expected: &Result<(), FreelistError>,
    ) {
        let (array, span) = (self.array.clone(), self.span.clone());
        assert_eq!(&self.array.free(txid, pgid, overflow), expected);
        assert_eq!(&self.span.free(txid, pgid, overflow), expected);
        if expected.is_err() {
            assert_eq!(self.array, array, "failed free changed the array");
            assert_eq!(self.span, span, "failed free changed the span");
        }
    }

    fn write_reload(&mut self) {
        let pgid = Pgid(self.high_water);
        let page = self.check_pages(pgid);
        let view = FreelistPage::new(&page, pgid).unwrap();
        let high_water = Pgid(self.high_water);
        // A fresh freelist that reads the page gets every id as free...
        let mut fresh_array = ArrayFreelist::new();
        fresh_array.read(&view, high_water).unwrap();
        assert_eq!(fresh_array.free_count(), self.array.count());
        // ...and one with the pending pages restored first gets the same free set back.
        let mut fresh_span = SpanFreelist::new();
        let mut fresh_array = ArrayFreelist::new();
        for page in self.array.pending().iter() {
            fresh_array.free(page.freed_by, page.pgid, 0).unwrap();
            fresh_span.free(page.freed_by, page.pgid, 0).unwrap();
            fresh_array.commit(page.freed_by);
            fresh_span.commit(page.freed_by);
        }
        fresh_array.reload(&view, high_water).unwrap();
        fresh_span.reload(&view, high_water).unwrap();
        for fresh in [&fresh_array as &dyn Freelist, &fresh_span] {
            assert!(
                fresh.free_ids().eq(self.array.free_ids()),
                "free ids after reload"
            );
            assert!(
                fresh.pending().ids().eq(self.array.pending().ids()),
                "pending after reload"
            );
        }
        // Reloading the live freelists from their own page changes nothing.
        let (array, span) = (self.array.clone(), self.span.clone());
        self.array.reload(&view, high_water).unwrap();
        self.span.reload(&view, high_water).unwrap();
        assert_eq!(self.array, array);
        assert_eq!(self.span, span);
    }

    /// Both freelists write the page the model says, and return it.
    fn check_pages(&self, pgid: Pgid) -> Vec<u8> {
        let expected = self.model.page(pgid);
        let mut array_page = vec![0xAB; self.array.write_size() + 8];
        let mut span_page = vec![0xCD; self.span.write_size() + 8];
        assert_eq!(
            self.array.write_into(&mut array_page, pgid, 0),
            expected.len()
        );
        assert_eq!(
            self.span.write_into(&mut span_page, pgid, 0),
            expected.len()
        );
        assert_eq!(array_page[..expected.len()], expected[..], "array page");
        assert_eq!(span_page[..expected.len()], expected[..], "span page");
        expected
    }

    /// Everything observable agrees with the model, and the internals are consistent.
    fn check(&self) {
        self.array.core().check_invariants();
        self.span.core().check_invariants();
        let free: Vec<Pgid> = self.model.free.iter().copied().map(Pgid).collect();
        let pending = self.model.pending_pages();
        for freelist in [&self.array as &dyn Freelist, &self.span] {
            assert_eq!(freelist.free_count(), free.len());
            assert_eq!(freelist.pending_count(), pending.len());
            assert_eq!(freelist.count(), free.len() + pending.len());
            assert_eq!(freelist.free_ids().len(), free.len());
            assert!(freelist.free_ids().eq(free.iter().copied()), "free ids");
            let mut pages: Vec<(u64, (u64, u64))> = freelist
                .pending()
                .iter()
                .map(|page| (page.pgid.0, (page.freed_by.0, page.allocated_by.0)))
                .collect();
            pages.sort_unstable();
            assert!(
                pages
                    .iter()
                    .copied()
                    .eq(pending.iter().map(|(&k, &v)| (k, v))),
                "pending"
            );
            assert!(
                freelist
                    .pending()
                    .ids()
                    .eq(pending.keys().copied().map(Pgid))
            );
            for id in 0..self.high_water + 2 {
                let freed = self.model.free.contains(&id) || pending.contains_key(&id);
                assert_eq!(freelist.is_freed(Pgid(id)), freed, "is_freed({id})");
                let freed_by = pending.get(&id).map(|&(txid, _)| Txid(txid));
                assert_eq!(freelist.pending().freed_by(Pgid(id)), freed_by);
            }
        }
        self.check_pages(Pgid(self.high_water));
    }
}

fn run_history(initial: Vec<bool>, from_page: bool, ops: Vec<Op>) -> TestResult {
    let mut world = World::new(&initial, from_page);
    world.check();
    for op in &ops {
        world.step(op);
        world.check();
    }
    TestResult::passed()
}

#[test]
fn random_histories_of_small_files_give_both_freelists_bbolts_answers_and_pages() {
    QuickCheck::new()
        .tests(HISTORIES)
        .quickcheck(run_history as fn(Vec<bool>, bool, Vec<Op>) -> TestResult);
}

#[test]
fn random_histories_of_large_fragmented_freelists_give_both_freelists_bbolts_answers_and_pages() {
    // Freelists of a few hundred ids with long histories: exercises the array's block moves
    // and the span's length classes beyond what tiny files reach.
    fn large(seed: Vec<bool>, from_page: bool, ops: Vec<Op>) -> TestResult {
        let initial: Vec<bool> = seed.iter().cycle().take(seed.len() * 8).copied().collect();
        run_history(initial, from_page, ops)
    }
    QuickCheck::new()
        .tests(HISTORIES / 3)
        .rng(Gen::new(200))
        .quickcheck(large as fn(Vec<bool>, bool, Vec<Op>) -> TestResult);
}

/// Runs of `(start, n_pages)` into the ids they cover.
fn ids_of(runs: &[(u64, u64)]) -> Vec<Pgid> {
    runs.iter()
        .flat_map(|&(start, n)| (start..start + n).map(Pgid))
        .collect()
}

/// Allocating `n_pages` from free `runs` takes `expected` in both implementations.
fn check_allocate(runs: &[(u64, u64)], n_pages: usize, expected: Option<u64>) {
    let mut array = ArrayFreelist::new();
    let mut span = SpanFreelist::new();
    array.rebuild(&ids_of(runs)).unwrap();
    span.rebuild(&ids_of(runs)).unwrap();
    assert_eq!(
        array.allocate(Txid(5), n_pages).map(|id| id.0),
        expected,
        "array {runs:?} n={n_pages}"
    );
    assert_eq!(
        span.allocate(Txid(5), n_pages).map(|id| id.0),
        expected,
        "span {runs:?} n={n_pages}"
    );
    array.core().check_invariants();
    span.core().check_invariants();
    assert!(array.free_ids().eq(span.free_ids()));
}

#[test]
fn allocate_is_first_fit() {
    check_allocate(&[], 1, None);
    check_allocate(&[(3, 1)], 0, None);
    check_allocate(&[(3, 1)], 1, Some(3));
    check_allocate(&[(3, 1)], 2, None);
    check_allocate(&[(3, 2), (9, 4), (20, 3)], 3, Some(9));
    check_allocate(&[(3, 2), (9, 4), (20, 3)], 4, Some(9));
    check_allocate(&[(3, 2), (9, 4), (20, 3)], 5, None);
    // The lowest fitting run wins over a better-sized higher one.
    check_allocate(&[(3, 1), (5, 10), (30, 2)], 2, Some(5));
    check_allocate(&[(40, 9), (60, 2), (70, 5)], 2, Some(40));
    check_allocate(&[(2, 1), (4, 1), (6, 1), (8, 3)], 3, Some(8));
}

/// Inserting `runs` into free `before` gives `after` in both implementations.
fn check_insert(before: &[(u64, u64)], runs: &[(u64, u64)], after: &[(u64, u64)]) {
    let mut array = ArrayFreelist::new();
    let mut span = SpanFreelist::new();
    array.rebuild(&ids_of(before)).unwrap();
    span.rebuild(&ids_of(before)).unwrap();
    for &(start, n) in runs {
        array.free(Txid(7), Pgid(start), (n - 1) as u32).unwrap();
        span.free(Txid(7), Pgid(start), (n - 1) as u32).unwrap();
    }
    array.release(Txid(7));
    span.release(Txid(7));
    array.core().check_invariants();
    span.core().check_invariants();
    assert_eq!(array.free_ids().collect::<Vec<_>>(), ids_of(after), "array");
    assert_eq!(span.free_ids().collect::<Vec<_>>(), ids_of(after), "span");
}

#[test]
fn release_merges_runs() {
    check_insert(&[], &[(5, 1)], &[(5, 1)]);
    check_insert(&[(5, 1)], &[(6, 1)], &[(5, 2)]);
    check_insert(&[(5, 1)], &[(4, 1)], &[(4, 2)]);
    check_insert(&[(5, 1), (7, 1)], &[(6, 1)], &[(5, 3)]);
    check_insert(
        &[(10, 5)],
        &[(2, 3), (30, 1), (15, 2)],
        &[(2, 3), (10, 7), (30, 1)],
    );
    check_insert(
        &[(3, 1), (9, 1), (20, 1)],
        &[(21, 4), (4, 5)],
        &[(3, 7), (20, 5)],
    );
    check_insert(
        &[(50, 2), (60, 2)],
        &[(2, 1), (3, 1), (4, 1)],
        &[(2, 3), (50, 2), (60, 2)],
    );
}

#[test]
fn merge_pgids_interleaves() {
    fn check(a: &[u64], b: &[u64], expected: &[u64]) {
        let mut dst = vec![0u8; expected.len() * 8];
        let written = merge_pgids(
            &mut dst,
            a.iter().copied().map(Pgid),
            b.iter().copied().map(Pgid),
        );
        assert_eq!(written, expected.len());
        let got: Vec<u64> = dst
            .chunks_exact(8)
            .map(|slot| u64::from_le_bytes(slot.try_into().unwrap()))
            .collect();
        assert_eq!(got, expected);
    }
    check(&[], &[], &[]);
    check(&[3], &[], &[3]);
    check(&[], &[3], &[3]);
    check(&[2, 5, 9], &[3, 4, 10, 11], &[2, 3, 4, 5, 9, 10, 11]);
    check(&[7, 8], &[2, 3], &[2, 3, 7, 8]);
}

#[test]
fn merge_pgids_leaves_spare_slots_alone() {
    let mut dst = vec![0xFFu8; 24];
    assert_eq!(merge_pgids(&mut dst, [Pgid(4)], [Pgid(2)]), 2);
    assert_eq!(dst[16..], [0xFF; 8]);
}

#[test]
fn page_header_counts_past_0xffff() {
    // 0xFFFF ids and more put the count in the first slot; both implementations agree.
    let ids: Vec<Pgid> = (2..2 + 0xFFFF + 3).map(Pgid).collect();
    let mut array = ArrayFreelist::new();
    let mut span = SpanFreelist::new();
    array.rebuild(&ids).unwrap();
    span.rebuild(&ids).unwrap();
    let mut page = vec![0; array.write_size()];
    assert_eq!(
        array.write_into(&mut page, Pgid(9), 3),
        freelist_page_size(ids.len())
    );
    assert_eq!(
        page[PAGE_HEADER_SIZE..PAGE_HEADER_SIZE + 8],
        (ids.len() as u64).to_le_bytes()
    );
    let mut span_page = vec![0; span.write_size()];
    span.write_into(&mut span_page, Pgid(9), 3);
    assert_eq!(page, span_page);
    let view = FreelistPage::new(&page, Pgid(9)).unwrap();
    assert!(view.has_extended_count());
    assert!(view.iter().eq(ids.iter().copied()));
}

mod edges;
