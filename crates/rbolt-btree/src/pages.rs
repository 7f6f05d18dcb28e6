//! Where the tree reads committed pages from.

use rbolt_page::{
    Corruption, EMPTY_LEAF, PageHeader, Pgid, Reason, Result, check_overflow, check_pgid,
};

/// A source of committed pages: the database's memory mapping in production, a byte vector in
/// tests. Page `p` starts at byte `p * page_size` of `data()`; pages at or past the high-water
/// mark do not exist.
pub trait PageSource {
    /// All readable bytes. At least `high_water() * page_size()` long.
    fn data(&self) -> &[u8];
    /// The page size.
    fn page_size(&self) -> usize;
    /// One past the last page in use.
    fn high_water(&self) -> Pgid;

    /// The pages as the tree reads them.
    fn pages(&self) -> Result<Pages<'_>> {
        Pages::new(self.data(), self.page_size(), self.high_water())
    }
}

/// A checked, copyable handle on a page source: what the tree code actually holds.
#[derive(Clone, Copy, Debug)]
pub struct Pages<'a> {
    data: &'a [u8],
    page_size: usize,
    high_water: Pgid,
}

impl<'a> Pages<'a> {
    /// Pages of `page_size` bytes in `data`, in use below `high_water`. Fails when `data` is
    /// shorter than the high-water mark says.
    pub fn new(data: &'a [u8], page_size: usize, high_water: Pgid) -> Result<Pages<'a>> {
        let needed = u128::from(high_water.0) * page_size as u128;
        // A page holds at least a header: an empty leaf.
        if page_size < EMPTY_LEAF.len() || needed > data.len() as u128 {
            return Err(Corruption::new(
                Pgid(0),
                Reason::HighWaterPastEnd {
                    high_water: high_water.0,
                    file_len: data.len() as u64,
                },
            ));
        }
        Ok(Pages {
            data,
            page_size,
            high_water,
        })
    }

    /// No pages at all: for trees that live entirely in memory.
    pub fn empty(page_size: usize) -> Pages<'static> {
        Pages {
            data: &[],
            page_size,
            high_water: Pgid(0),
        }
    }

    /// All readable bytes.
    #[inline]
    pub fn data(&self) -> &'a [u8] {
        self.data
    }

    /// The page size.
    #[inline]
    pub fn page_size(&self) -> usize {
        self.page_size
    }

    /// One past the last page in use.
    #[inline]
    pub fn high_water(&self) -> Pgid {
        self.high_water
    }

    /// The span of page `pgid` (the page and its overflow pages), referred to by `owner`.
    /// Checks the id is a tree page below the high-water mark, the header names it, and the
    /// overflow stays below the high-water mark.
    #[inline]
    pub fn page(&self, owner: Pgid, pgid: Pgid) -> Result<&'a [u8]> {
        self.page_and_header(owner, pgid).map(|(bytes, _)| bytes)
    }

    /// [`Pages::page`], with the header it read and checked.
    #[inline]
    pub fn page_and_header(&self, owner: Pgid, pgid: Pgid) -> Result<(&'a [u8], PageHeader)> {
        check_pgid("child", owner, pgid, self.high_water)?;
        // pgid < high_water and high_water * page_size <= data.len(): no overflow, in bounds.
        let start = pgid.0 as usize * self.page_size;
        let header = PageHeader::read(&self.data[start..]).ok_or_else(|| {
            let what = "the page header";
            Corruption::new(pgid, Reason::OutsideTheFile { what })
        })?;
        if header.id != pgid.0 {
            return Err(Corruption::new(
                pgid,
                Reason::IdMismatch { found: header.id },
            ));
        }
        check_overflow(pgid, header.overflow, self.high_water)?;
        let end = start + (header.overflow as usize + 1) * self.page_size;
        Ok((&self.data[start..end], header))
    }

    /// The position of `slice` within `data()`, if it lies there.
    #[inline]
    pub fn position_of(&self, slice: &[u8]) -> Option<u64> {
        let base = self.data.as_ptr() as usize;
        let start = slice.as_ptr() as usize;
        let offset = start.checked_sub(base)?;
        (offset + slice.len() <= self.data.len()).then_some(offset as u64)
    }
}

impl PageSource for Pages<'_> {
    fn data(&self) -> &[u8] {
        self.data
    }
    fn page_size(&self) -> usize {
        self.page_size
    }
    fn high_water(&self) -> Pgid {
        self.high_water
    }
    fn pages(&self) -> Result<Pages<'_>> {
        Ok(*self)
    }
}

/// A page source over bytes held in memory (a whole file read into a vector, for instance).
#[derive(Clone, Debug)]
pub struct MemPages {
    /// The file's bytes.
    pub data: Vec<u8>,
    /// The page size.
    pub page_size: usize,
    /// One past the last page in use.
    pub high_water: Pgid,
}

impl PageSource for MemPages {
    fn data(&self) -> &[u8] {
        &self.data
    }
    fn page_size(&self) -> usize {
        self.page_size
    }
    fn high_water(&self) -> Pgid {
        self.high_water
    }
}
