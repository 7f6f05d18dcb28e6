//! [`Mapping`]: a read-only shared memory mapping of the database file.

use std::ffi::c_void;
use std::fmt;
use std::io;
use std::ops::Deref;

use memmap2::{Advice, Mmap};

/// A read-only, shared memory mapping of the first [`len`](Mapping::len) bytes of a
/// [`Storage`](crate::Storage)'s file, made by [`Storage::map`](crate::Storage::map).
///
/// The mapping may be longer than the file (address space reserved for growth). Bytes written
/// through the storage after mapping show up in it. It is immutable, so it can be shared
/// between threads and reference-counted by the transactions that read through it; dropping
/// it unmaps it.
///
/// ```
/// use rbolt_storage::{FileOptions, FileStorage, Storage};
/// # let dir = tempfile::tempdir().unwrap();
/// let storage = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
/// storage.grow(4096).unwrap();
/// let map = storage.map(4096).unwrap();
/// storage.write_all_at(b"written later", 0).unwrap();
/// assert_eq!(&map[..13], b"written later"); // writes through the storage show in the mapping
/// ```
pub struct Mapping {
    mmap: Mmap,
}

impl Mapping {
    pub(super) fn new(mmap: Mmap) -> Mapping {
        Mapping { mmap }
    }

    /// The length of the mapping in bytes, which may exceed the file's.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage, Storage};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let storage = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
    /// storage.grow(4096).unwrap();
    /// let map = storage.map(1 << 20).unwrap(); // room for the file to grow into
    /// assert_eq!(map.len(), 1 << 20);
    /// assert!(map.len() as u64 > storage.len().unwrap());
    /// ```
    pub fn len(&self) -> usize {
        self.mmap.len()
    }

    /// Whether the mapping is zero bytes long.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage, Storage};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let storage = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
    /// storage.grow(4096).unwrap();
    /// assert!(!storage.map(4096).unwrap().is_empty());
    /// ```
    pub fn is_empty(&self) -> bool {
        self.mmap.is_empty()
    }

    /// Locks the first `len` bytes of the mapping into RAM (`mlock`; bbolt's `Mlock` option).
    ///
    /// `len` is clamped to the mapping's length. It should not exceed the file's length: the
    /// kernel faults every locked page in, and a page past the end of the file cannot be, so
    /// the call fails with `ENOMEM`. Fails with `EPERM` or `ENOMEM` when `RLIMIT_MEMLOCK` is
    /// too small.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage, Storage};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let storage = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
    /// storage.grow(4096).unwrap();
    /// let map = storage.map(4096).unwrap();
    /// match map.lock(4096) {
    ///     Ok(()) => map.unlock().unwrap(),
    ///     // A small RLIMIT_MEMLOCK refuses the lock; that is an error, not a crash.
    ///     Err(e) => assert!(matches!(
    ///         e.kind(),
    ///         std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::OutOfMemory
    ///     )),
    /// }
    /// map.lock(0).unwrap(); // nothing to lock
    /// ```
    pub fn lock(&self, len: usize) -> io::Result<()> {
        let len = len.min(self.mmap.len());
        if len == 0 {
            return Ok(());
        }
        let ptr = self.mmap.as_ptr().cast::<c_void>().cast_mut();
        // SAFETY: rustix requires the page-rounded range [ptr, ptr + len) to be valid to read
        // with ptr's provenance. ptr is the start of this live mapping (it stays mapped while
        // `self` is borrowed), the mapping starts on a page boundary, and len is clamped to the
        // mapping's length, whose pages are all part of it. mlock only pins those pages; it
        // neither reads nor writes through the pointer, so no Rust reference is affected.
        // memmap2 can only lock a whole mapping, which fails once it reaches past the file.
        unsafe { rustix::mm::mlock(ptr, len)? };
        Ok(())
    }

    /// Unlocks the whole mapping (`munlock`); pages that were never locked are unaffected.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage, Storage};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let storage = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
    /// storage.grow(4096).unwrap();
    /// let map = storage.map(4096).unwrap();
    /// map.unlock().unwrap(); // unlocking pages never locked is fine
    /// assert_eq!(map.len(), 4096);
    /// ```
    pub fn unlock(&self) -> io::Result<()> {
        self.mmap.unlock()
    }

    /// Tells the kernel that access will be random (`MADV_RANDOM`), as bbolt does, so it does
    /// not read ahead around each page fault: B+tree lookups jump between pages.
    ///
    /// ```
    /// use rbolt_storage::{FileOptions, FileStorage, Storage};
    /// # let dir = tempfile::tempdir().unwrap();
    /// let storage = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
    /// storage.write_all_at(&[7u8; 4096], 0).unwrap();
    /// let map = storage.map(4096).unwrap();
    /// map.advise_random().unwrap(); // a hint: the bytes read the same
    /// assert!(map.iter().all(|&b| b == 7));
    /// ```
    pub fn advise_random(&self) -> io::Result<()> {
        self.mmap.advise(Advice::Random)
    }
}

impl Deref for Mapping {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        &self.mmap
    }
}

impl AsRef<[u8]> for Mapping {
    fn as_ref(&self) -> &[u8] {
        &self.mmap
    }
}

impl fmt::Debug for Mapping {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // The contents can be gigabytes; the address and length identify the mapping.
        f.debug_struct("Mapping")
            .field("ptr", &self.mmap.as_ptr())
            .field("len", &self.mmap.len())
            .finish()
    }
}
