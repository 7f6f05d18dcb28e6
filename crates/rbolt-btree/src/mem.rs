//! An in-memory page store: a file image that trees spill into and read back from. For
//! tests and benchmarks of this crate and its users; the database has its own.

use crate::node::arena::Arena;
use crate::pages::Pages;
use crate::tree::PageAlloc;
use rbolt_page::{Corruption, Pgid, Reason};
use std::collections::BTreeSet;

/// A file image in memory: pages 0 and 1 are reserved (the metas' place), trees live above.
#[derive(Debug)]
pub struct MemStore {
    data: Vec<u8>,
    page_size: usize,
    high_water: Pgid,
    alloc: MemAlloc,
}

/// The allocating half of a [`MemStore`], borrowed separately from its pages.
#[derive(Debug)]
pub struct MemAlloc {
    page_size: usize,
    next: Pgid,
    free: BTreeSet<Pgid>,
    freed_now: BTreeSet<Pgid>,
    allocated_now: Vec<(Pgid, usize)>,
    dirty: Vec<(Pgid, Box<[u8]>)>,
    reuse: bool,
}

impl MemStore {
    /// An empty store of `page_size` pages. With `reuse`, freed pages are allocated again
    /// after the commit that freed them.
    pub fn new(page_size: usize, reuse: bool) -> MemStore {
        MemStore {
            data: vec![0; 2 * page_size],
            page_size,
            high_water: Pgid(2),
            alloc: MemAlloc {
                page_size,
                next: Pgid(2),
                free: BTreeSet::new(),
                freed_now: BTreeSet::new(),
                allocated_now: Vec::new(),
                dirty: Vec::new(),
                reuse,
            },
        }
    }

    /// The committed pages, and the allocator for the transaction under way.
    pub fn parts(&mut self) -> (Pages<'_>, &mut MemAlloc) {
        let pages = Pages::new(&self.data, self.page_size, self.high_water)
            .expect("a MemStore's image covers its high-water mark");
        (pages, &mut self.alloc)
    }

    /// The committed pages.
    pub fn pages(&self) -> Pages<'_> {
        Pages::new(&self.data, self.page_size, self.high_water)
            .expect("a MemStore's image covers its high-water mark")
    }

    /// The page ids free for reuse.
    pub fn free_pages(&self) -> &BTreeSet<Pgid> {
        &self.alloc.free
    }

    /// One past the last page in use.
    pub fn high_water(&self) -> Pgid {
        self.high_water
    }

    /// Makes what was written visible and what was freed reusable.
    pub fn commit(&mut self) {
        let alloc = &mut self.alloc;
        self.high_water = alloc.next;
        self.data
            .resize(self.high_water.0 as usize * self.page_size, 0);
        for (pgid, buf) in alloc.dirty.drain(..) {
            let start = pgid.0 as usize * self.page_size;
            self.data[start..start + buf.len()].copy_from_slice(&buf);
        }
        alloc.free.append(&mut alloc.freed_now);
        alloc.allocated_now.clear();
    }

    /// Forgets what was written and freed since the last commit.
    pub fn rollback(&mut self) {
        let alloc = &mut self.alloc;
        alloc.dirty.clear();
        alloc.freed_now.clear();
        for (pgid, n_pages) in alloc.allocated_now.drain(..) {
            for offset in 0..n_pages as u64 {
                let id = pgid.add(offset);
                if id < self.high_water {
                    alloc.free.insert(id);
                }
            }
        }
        alloc.next = self.high_water;
    }
}

impl MemAlloc {
    fn take_run(&mut self, n_pages: usize) -> Option<Pgid> {
        if !self.reuse {
            return None;
        }
        let mut run_start = None;
        let mut run_len = 0;
        let mut previous = None;
        for &id in &self.free {
            if previous.is_some_and(|p: Pgid| p.0 + 1 == id.0) {
                run_len += 1;
            } else {
                run_start = Some(id);
                run_len = 1;
            }
            previous = Some(id);
            if run_len == n_pages {
                break;
            }
        }
        let start = run_start.filter(|_| run_len == n_pages)?;
        for offset in 0..n_pages as u64 {
            self.free.remove(&start.add(offset));
        }
        Some(start)
    }
}

impl PageAlloc for MemAlloc {
    type Error = Corruption;

    fn allocate(&mut self, n_pages: usize) -> Result<Pgid, Corruption> {
        let pgid = match self.take_run(n_pages) {
            Some(pgid) => pgid,
            None => {
                let pgid = self.next;
                self.next = pgid.add(n_pages as u64);
                pgid
            }
        };
        self.allocated_now.push((pgid, n_pages));
        Ok(pgid)
    }

    /// Keeps `buf` until [`MemStore::commit`] copies it into the image (and drops it: the
    /// store's buffers never go back to an arena).
    fn write(&mut self, pgid: Pgid, buf: Box<[u8]>, _arena: &mut Arena) -> Result<(), Corruption> {
        let n_pages = self
            .allocated_now
            .iter()
            .rev()
            .find(|(id, _)| *id == pgid)
            .map(|&(_, n)| n);
        assert_eq!(
            n_pages.map(|n| n * self.page_size),
            Some(buf.len()),
            "page {pgid} written with {} bytes that were not allocated for it",
            buf.len()
        );
        self.dirty.push((pgid, buf));
        Ok(())
    }

    fn free(&mut self, pgid: Pgid, overflow: u32) -> Result<(), Corruption> {
        for offset in 0..=u64::from(overflow) {
            let id = pgid.add(offset);
            if id.0 < 2 || self.free.contains(&id) || !self.freed_now.insert(id) {
                return Err(Corruption::new(id, Reason::Other("page freed twice")));
            }
        }
        Ok(())
    }
}
