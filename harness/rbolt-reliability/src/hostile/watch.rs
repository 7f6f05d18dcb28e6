//! What rbolt asks of the storage while it reads a hostile file, and the most a file of a
//! given size can justify: a mapping larger than the file's power of two, or one allocation
//! larger than a few copies of the file, is a failure.

use rbolt::storage::{Claim, Mapping, SimFile, Storage};
use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};

/// A [`SimFile`] that remembers the largest mapping and read asked of it.
#[derive(Debug)]
pub struct Watch {
    inner: SimFile,
    map_len_max: AtomicUsize,
    read_len_max: AtomicUsize,
}

impl Watch {
    /// Watches `inner`.
    pub fn new(inner: SimFile) -> Watch {
        Watch {
            inner,
            map_len_max: AtomicUsize::new(0),
            read_len_max: AtomicUsize::new(0),
        }
    }

    /// The largest mapping asked for, in bytes.
    pub fn map_len_max(&self) -> usize {
        self.map_len_max.load(Ordering::Relaxed)
    }
}

impl Storage for Watch {
    fn len(&self) -> io::Result<u64> {
        self.inner.len()
    }

    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> io::Result<()> {
        self.read_len_max.fetch_max(buf.len(), Ordering::Relaxed);
        self.inner.read_exact_at(buf, offset)
    }

    fn write_all_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_all_at(buf, offset)
    }

    fn read_durable(&self, buf: &mut [u8], offset: u64) -> io::Result<bool> {
        self.inner.read_durable(buf, offset)
    }

    fn write_whole_at(&self, buf: &[u8], offset: u64) -> io::Result<()> {
        self.inner.write_whole_at(buf, offset)
    }

    fn write_vectored_at(&self, bufs: &[&[u8]], offset: u64) -> io::Result<()> {
        self.inner.write_vectored_at(bufs, offset)
    }

    fn sync_data(&self) -> io::Result<()> {
        self.inner.sync_data()
    }

    fn sync_all(&self) -> io::Result<()> {
        self.inner.sync_all()
    }

    fn grow(&self, len: u64) -> io::Result<()> {
        self.inner.grow(len)
    }

    fn shrink(&self, len: u64) -> io::Result<()> {
        self.inner.shrink(len)
    }

    fn map(&self, len: usize) -> io::Result<Mapping> {
        self.map_len_max.fetch_max(len, Ordering::Relaxed);
        self.inner.map(len)
    }

    fn path(&self) -> Option<&Path> {
        None
    }

    fn claim(&self) -> io::Result<Claim> {
        self.inner.claim()
    }
}

/// The largest mapping a file of `file_len` bytes justifies: rbolt maps powers of two from
/// 32 KiB, and a new file has 4 pages of at most 4 KiB (the default page size).
pub(super) fn map_bound(file_len: u64) -> usize {
    file_len.max(4 * 4096).next_power_of_two().max(32 * 1024) as usize
}

/// The largest single allocation a file of `file_len` bytes justifies: a few copies of the
/// file (the test's own image included), or 1 MiB for small files.
pub(super) fn alloc_bound(file_len: u64) -> usize {
    (4 * file_len as usize).max(1 << 20)
}
