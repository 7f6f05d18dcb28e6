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

#[cfg(test)]
mod tests {
    use crate::{FileOptions, FileStorage, Storage};

    /// A file of `len` bytes of `byte`, its storage and a mapping of `map_len` bytes.
    fn mapped(
        len: usize,
        byte: u8,
        map_len: usize,
    ) -> (tempfile::TempDir, FileStorage, super::Mapping) {
        let dir = tempfile::tempdir().unwrap();
        let storage = FileStorage::open(dir.path().join("file"), FileOptions::new()).unwrap();
        storage.write_all_at(&vec![byte; len], 0).unwrap();
        let map = storage.map(map_len).unwrap();
        (dir, storage, map)
    }

    /// This process's `name:` line of /proc/self/status, in kB (`None` where there is none).
    fn status_kb(name: &str) -> Option<u64> {
        let status = std::fs::read_to_string("/proc/self/status").ok()?;
        status
            .lines()
            .find_map(|line| line.strip_prefix(name))
            .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
    }

    /// The `VmFlags` of the mapping that starts at `addr`, from /proc/self/smaps.
    fn vm_flags(addr: usize) -> Option<String> {
        let smaps = std::fs::read_to_string("/proc/self/smaps").ok()?;
        let start = format!("{addr:x}-");
        let mut lines = smaps.lines().skip_while(|line| !line.starts_with(&start));
        lines.next()?;
        lines
            .find_map(|line| line.strip_prefix("VmFlags:"))
            .map(str::to_string)
    }

    #[test]
    fn a_mapping_reads_the_file_by_deref_and_as_ref_and_says_its_length() {
        let (_dir, _storage, map) = mapped(8192, 0x5a, 8192);
        assert_eq!(map.len(), 8192);
        assert!(!map.is_empty());
        let bytes: &[u8] = map.as_ref();
        assert_eq!(bytes.len(), 8192);
        assert!(bytes.iter().all(|&b| b == 0x5a));
        assert_eq!(&map[..], bytes);
        let shown = format!("{map:?}");
        assert!(shown.starts_with("Mapping {"), "{shown}");
        assert!(shown.contains("len: 8192"), "{shown}");
        assert!(shown.contains(&format!("{:?}", map.as_ptr())), "{shown}");
    }

    #[test]
    fn an_empty_mapping_is_empty() {
        let (_dir, _storage, map) = mapped(4096, 1, 0);
        assert!(map.is_empty());
        assert_eq!(map.len(), 0);
    }

    /// `lock` pins the pages it is asked for (the process's `VmLck` grows by them), `unlock`
    /// lets them go, a lock past the end of the file fails (its pages cannot be faulted in),
    /// and a lock of nothing does nothing. Linux only (`VmLck`); where `RLIMIT_MEMLOCK` is
    /// too small for 16 KiB the lock's refusal is the tested error instead.
    #[cfg(target_os = "linux")]
    #[test]
    fn lock_pins_the_pages_asked_for_and_unlock_lets_them_go() {
        let (_dir, _storage, map) = mapped(16384, 3, 1 << 20);
        let before = status_kb("VmLck:").expect("VmLck in /proc/self/status");
        match map.lock(16384) {
            Ok(()) => {
                let locked = status_kb("VmLck:").unwrap();
                assert!(locked >= before + 16, "VmLck {before} kB, then {locked} kB");
                map.unlock().unwrap();
                let after = status_kb("VmLck:").unwrap();
                assert!(
                    after + 16 <= locked,
                    "VmLck {locked} kB after unlock: {after} kB"
                );
            }
            Err(e) => assert!(matches!(
                e.kind(),
                std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::OutOfMemory
            )),
        }
        map.lock(0).unwrap();
        assert_eq!(
            status_kb("VmLck:").unwrap(),
            before,
            "a lock of nothing locked something"
        );
        // Past the file's 16 KiB: the kernel cannot fault those pages in.
        let past = map.lock(1 << 20);
        assert!(past.is_err(), "a lock past the end of the file succeeded");
        map.unlock().unwrap();
    }

    /// `advise_random` sets the mapping's random-access advice (`rr` in its `VmFlags`).
    #[cfg(target_os = "linux")]
    #[test]
    fn advise_random_marks_the_mapping_for_random_access() {
        let (_dir, _storage, map) = mapped(8192, 9, 8192);
        let addr = map.as_ptr() as usize;
        let flags = vm_flags(addr).expect("the mapping in /proc/self/smaps");
        assert!(!flags.split_whitespace().any(|f| f == "rr"), "{flags}");
        map.advise_random().unwrap();
        let flags = vm_flags(addr).unwrap();
        assert!(flags.split_whitespace().any(|f| f == "rr"), "{flags}");
    }
}
