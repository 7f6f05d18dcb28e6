//! [`WriteMap`]: rewrites of pages the page cache holds dirty, made as copies into a shared
//! writable mapping of the file instead of one `pwrite` each.
//!
//! A commit without a sync writes a few hundred scattered pages, one system call each, and the
//! kernel's part of such a commit (the call, `ext4_block_write_begin`, the copy) is most of its
//! time: measured here, 1.3 µs for a 4 KiB `pwrite` into a cached page against 0.45 µs for the
//! same copy into a mapping whose page is already dirty. Where the page is clean the copy
//! takes a write fault first, which costs about what the call does (the same figure with a
//! sync after every transaction: 8.7 µs against 9.0 µs).
//!
//! What a copy changes, against a `pwrite` of the same bytes:
//! - Nothing in the page cache: both dirty the same cached page, which every mapping of the
//!   file shows at once, and Linux's `fdatasync` writes back pages dirtied through a mapping
//!   as it does the others. So a power loss can leave nothing that it could not before.
//! - A kill of the process can stop a copy at any byte, where a `pwrite` of one page lands
//!   whole or not at all. The database writes its meta last, with a checksum, and only a
//!   commit that skips its syncs writes it as a copy: a meta torn by a kill fails its checksum
//!   and the file opens at the commit before, which that commit's caller never saw return.
//! - How a failure shows: a `pwrite` returns an error, while a copy that the kernel cannot
//!   back kills the process with `SIGBUS`. Nothing committed is lost by that (a durable commit
//!   has synced; an unsynced one is in the page cache), but the process ends instead of
//!   seeing an error. So copies go only where the common failures cannot happen:
//!   - on Linux, 64-bit, with 4 KiB pages, built without `portable-fallback`;
//!   - on ext4 and tmpfs, which rewrite an allocated block in place, so a rewrite never needs
//!     new space (a copy-on-write filesystem such as btrfs needs space for every rewrite, and
//!     so does XFS for a file whose blocks a reflinked copy shares);
//!   - below the length up to which `fallocate` from offset 0 has allocated the file's blocks
//!     (the file's growth does that; a file with holes, as Go's `ftruncate` growth leaves, is
//!     allocated once before its first copy), and never past a shrink;
//!   - on pages this handle has written in the last few seconds and not synced since: they
//!     are normally still dirty, so they are in the page cache and the copy reads nothing from
//!     the disk (a `pwrite` of a whole page never reads one), and after the first copy the next
//!     ones take no fault at all. A sync cleans them (and write-protects the mapping's pages),
//!     so a commit that syncs writes each page once with a `pwrite`, as before. The set is also
//!     forgotten every [`DIRTY_EPOCH`], well inside the kernel's 30 s before it writes dirty
//!     pages back, after which they could be evicted and a copy would read them back. Writeback
//!     can still come sooner (another process's `sync`, dirty memory past the kernel's
//!     background threshold); a page cleaned so and then evicted is read back by the copy's
//!     fault, which fails only where a read of it through the readers' mapping fails too.
//!
//!   What is left is the filesystem failing under the process (an ext4 journal abort, a
//!   shutdown): a copy then raises `SIGBUS` where a `pwrite` would fail with `EIO` or `EROFS`.
//!   A read through the readers' mapping of a page the disk cannot read does the same already.
//!
//! Every other write is a `pwrite` as before, and so is every write when the mapping cannot
//! be made.

use std::fs::File;
use std::io;
use std::time::{Duration, Instant};

use memmap2::{MmapOptions, MmapRaw};

/// The granularity at which written pages are remembered: the system's page, which copies
/// require to be 4 KiB (`rewrites_in_place`), so that every page a copy touches is one whose
/// blocks the bound and the dirty set speak for.
const GRAIN: u64 = 4096;

/// The smallest writable mapping made; it doubles from there as the file grows.
const MAP_MIN: u64 = 1 << 24;

/// How long pages written count as dirty without a sync: the kernel writes a dirty page back
/// after 30 s by default (`dirty_expire_centisecs`), after which it is clean and may be evicted.
const DIRTY_EPOCH: Duration = Duration::from_secs(5);

/// The state behind [`FileStorage`](crate::FileStorage)'s writes through a mapping (see the
/// module documentation). Lives behind a mutex: the writer copies, `grow`, `shrink` and
/// `clear` move the bounds, and no copy runs while a bound moves.
#[derive(Debug)]
pub(crate) struct WriteMap {
    /// Whether this file may be written through a mapping at all (system, build, filesystem).
    enabled: bool,
    /// The writable mapping, from offset 0, made at the first copy and remade larger when the
    /// file outgrows it. Its length may exceed the file's (reserved address space, never
    /// touched past `allocated`).
    map: Option<MmapRaw>,
    /// Bytes from offset 0 whose blocks are allocated and within the file.
    allocated: u64,
    /// The file's length when allocating its holes last failed (0: never).
    unallocatable: u64,
    /// One bit per [`GRAIN`] bytes: written by this handle since its last sync and since
    /// `epoch`, so cached and dirty.
    dirty: Vec<u64>,
    /// When `dirty` was last emptied.
    epoch: Instant,
    /// Writes made as copies.
    copies: u64,
    /// Bytes written as copies.
    copied_bytes: u64,
}

impl WriteMap {
    /// The state for `file`, opened read-write (`writable`) or not.
    pub(crate) fn new(file: &File, writable: bool) -> WriteMap {
        WriteMap {
            enabled: writable && rewrites_in_place(file),
            map: None,
            allocated: 0,
            unallocatable: 0,
            dirty: Vec::new(),
            epoch: Instant::now(),
            copies: 0,
            copied_bytes: 0,
        }
    }

    /// Writes `bufs` back to back from `offset`: as a copy into the mapping when every page
    /// it touches qualifies (the module documentation), else with `write` (the system calls),
    /// after which its pages count as dirty.
    pub(crate) fn write(
        &mut self,
        file: &File,
        bufs: &[&[u8]],
        offset: u64,
        write: impl FnOnce() -> io::Result<()>,
    ) -> io::Result<()> {
        let len: u64 = bufs.iter().map(|buf| buf.len() as u64).sum();
        let end = match offset.checked_add(len) {
            Some(end) if self.enabled && len > 0 => end,
            _ => return write(),
        };
        if self.epoch.elapsed() >= DIRTY_EPOCH {
            self.synced();
        }
        if self.dirty(offset, end)
            && self.ensure_allocated(file, end)
            && let Some(map) = self.ensure_mapped(file, end)
        {
            let mut at = offset as usize; // below `end`, which the mapping's length exceeds
            for buf in bufs {
                // SAFETY: the destination, [at, at + buf.len()), lies within the mapping
                // (`ensure_mapped` made it at least `end` bytes long, and it is replaced only
                // under the same `&mut self`) and below `allocated`, which never exceeds the
                // file's length and comes down before any shrink, under the same lock: the
                // copy touches no page past the end of the file. Those blocks are allocated on
                // a filesystem that rewrites in place, and the pages were written in the last
                // few seconds without a sync since, so they are normally dirty in the page
                // cache: the fault of a first copy needs no new space and reads nothing from
                // the disk (a page written back early and evicted is read back; what can fail
                // then, or otherwise, is the disk or the filesystem itself, see the module
                // documentation: a `SIGBUS`, never a write outside the file). The bytes are file pages the database writes through this
                // storage in any case, which no reader reads while they are being written (the
                // contract of `Storage::map`), so the copy races no read, and no Rust
                // reference covers this mapping. The source is the caller's slice: every
                // caller passes its own buffers, never the bytes of this file.
                unsafe {
                    std::ptr::copy_nonoverlapping(buf.as_ptr(), map.add(at), buf.len());
                }
                at += buf.len();
            }
            self.copies += 1;
            self.copied_bytes += len;
            return Ok(());
        }
        write()?;
        // Bounded, so that a write far past the allocated length (a sparse file's) cannot make
        // the set huge; such pages are copied into once the file's growth has allocated them.
        if end <= self.allocated.max(MAP_MIN).saturating_mul(2) {
            self.mark_dirty(offset, end);
        }
        Ok(())
    }

    /// The file grew to `len` with its blocks allocated from offset 0 (`fallocate`).
    pub(crate) fn allocated_to(&mut self, len: u64) {
        self.allocated = self.allocated.max(len);
    }

    /// The file is about to be cut to `len`: nothing at or past it is copied into again until
    /// the file has grown back, and its pages are no longer cached.
    pub(crate) fn cut_to(&mut self, len: u64) {
        self.allocated = self.allocated.min(len);
        let kept = len.div_ceil(GRAIN); // grains that keep a byte of the file
        self.dirty.truncate(kept.div_ceil(64) as usize);
        if let Some(last) = self.dirty.last_mut()
            && !kept.is_multiple_of(64)
        {
            *last &= (1 << (kept % 64)) - 1;
        }
    }

    /// The file was synced: its pages are clean now.
    pub(crate) fn synced(&mut self) {
        self.dirty.fill(0);
        self.epoch = Instant::now();
    }

    /// How many writes were made as copies into the mapping.
    #[cfg(test)]
    pub(crate) fn copies(&self) -> u64 {
        self.copies
    }

    /// Whether this file may be copied into (until a failed allocation says otherwise).
    pub(crate) fn enabled(&self) -> bool {
        self.enabled
    }

    /// How many bytes were written as copies into the mapping.
    pub(crate) fn copied_bytes(&self) -> u64 {
        self.copied_bytes
    }

    /// Whether every grain of [offset, end) was written since the last sync.
    fn dirty(&self, offset: u64, end: u64) -> bool {
        (offset / GRAIN..end.div_ceil(GRAIN)).all(|grain| {
            self.dirty
                .get((grain / 64) as usize)
                .is_some_and(|word| word & (1 << (grain % 64)) != 0)
        })
    }

    /// Marks every grain of [offset, end) as written since the last sync.
    fn mark_dirty(&mut self, offset: u64, end: u64) {
        let last = end.div_ceil(GRAIN);
        let words = last.div_ceil(64) as usize;
        if self.dirty.len() < words {
            self.dirty.resize(words, 0);
        }
        for grain in offset / GRAIN..last {
            self.dirty[(grain / 64) as usize] |= 1 << (grain % 64);
        }
    }

    /// Whether [0, end) is allocated and within the file, allocating the file's holes first
    /// if it can: `false` when it cannot, and then the write is a system call, as it would
    /// have been without this. A failed allocation is not retried until the file's length
    /// changes.
    fn ensure_allocated(&mut self, file: &File, end: u64) -> bool {
        if end <= self.allocated {
            return true;
        }
        let Ok(len) = crate::fdio::len(file) else {
            return false;
        };
        if end > len || len == self.unallocatable {
            return false;
        }
        match crate::fdio::allocate_in_place(file, len) {
            Ok(true) => {
                self.allocated = len;
                true
            }
            // The filesystem cannot allocate ahead: never copy into this file.
            Ok(false) => {
                self.enabled = false;
                false
            }
            // No space for the holes, say: the write goes on as a system call.
            Err(_) => {
                self.unallocatable = len;
                false
            }
        }
    }

    /// The mapping's start, the mapping made or remade first to reach at least `end`; `None`
    /// when it cannot be (address space, `vm.max_map_count`): the write is then a system call.
    fn ensure_mapped(&mut self, file: &File, end: u64) -> Option<*mut u8> {
        let old = match &self.map {
            Some(map) if map.len() as u64 >= end => return Some(map.as_mut_ptr()),
            Some(map) => map.len() as u64,
            None => 0,
        };
        let len = end
            .max(old.saturating_mul(2))
            .max(MAP_MIN)
            .next_multiple_of(GRAIN);
        let len = usize::try_from(len).ok()?;
        // Past the file's end it is only address space, which nothing touches (copies stay
        // below `allocated`). The old mapping is unmapped when replaced; the pages it dirtied
        // stay dirty in the page cache.
        let map = MmapOptions::new().len(len).map_raw(file).ok()?;
        Some(self.map.insert(map).as_mut_ptr())
    }
}

/// Whether `file` lies on a filesystem that rewrites an allocated block in place, on a system
/// and build where copies are made at all (see the module documentation).
#[cfg(all(
    target_os = "linux",
    target_pointer_width = "64",
    not(feature = "portable-fallback")
))]
fn rewrites_in_place(file: &File) -> bool {
    const EXT4: u64 = 0xEF53; // ext2, ext3 and ext4 share it
    const TMPFS: u64 = 0x0102_1994;
    if rustix::param::page_size() as u64 != GRAIN {
        return false;
    }
    match rustix::fs::fstatfs(file) {
        #[allow(
            clippy::unnecessary_cast,
            reason = "the field's type differs between architectures (u64 on some, i64 on x86-64); \
                      the magic numbers fit in 32 bits"
        )]
        Ok(stat) => matches!(stat.f_type as u64, EXT4 | TMPFS),
        Err(_) => false,
    }
}

#[cfg(not(all(
    target_os = "linux",
    target_pointer_width = "64",
    not(feature = "portable-fallback")
)))]
fn rewrites_in_place(_file: &File) -> bool {
    false
}

#[cfg(test)]
mod tests {
    use std::fs::{File, OpenOptions};
    use std::time::Instant;

    use super::{GRAIN, MAP_MIN, WriteMap, rewrites_in_place};
    use crate::fdio;

    const PAGE: u64 = GRAIN;

    /// A file of `pages` pages in a temporary directory, and a write map over it (`enabled`
    /// as the system allows, or off).
    fn file_and_map(pages: u64, enabled: bool) -> (tempfile::TempDir, File, WriteMap) {
        let dir = tempfile::tempdir().unwrap();
        let file = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(dir.path().join("file"))
            .unwrap();
        let mut map = WriteMap::new(&file, enabled);
        grow(&file, &mut map, pages);
        (dir, file, map)
    }

    /// Grows the file to `pages` pages as `FileStorage::grow` does: `true` when its blocks
    /// were allocated.
    fn grow(file: &File, map: &mut WriteMap, pages: u64) -> bool {
        let allocated = fdio::allocate(file, pages * PAGE).unwrap();
        if allocated {
            map.allocated_to(pages * PAGE);
        }
        allocated
    }

    /// Cuts the file to `pages` pages as `FileStorage::shrink` does.
    fn cut(file: &File, map: &mut WriteMap, pages: u64) {
        map.cut_to(pages * PAGE);
        file.set_len(pages * PAGE).unwrap();
    }

    /// Writes `byte` over page `page` through `map`, and reads it back: `true` when the write
    /// was a copy, `false` when it was the system call. (The dirty set's epoch is reset first:
    /// these tests are about which pages count as dirty, not about how long.)
    fn put(map: &mut WriteMap, file: &File, page: u64, byte: u8) -> bool {
        map.epoch = Instant::now();
        let copies = map.copies();
        let buf = [byte; PAGE as usize];
        let mut called = false;
        map.write(file, &[&buf], page * PAGE, || {
            called = true;
            fdio::write_all_at(file, &buf, page * PAGE)
        })
        .unwrap();
        let copied = map.copies() > copies;
        assert_ne!(
            called, copied,
            "page {page}: a copy and a system call, or neither"
        );
        let mut back = [0; PAGE as usize];
        fdio::read_exact_at(file, &mut back, page * PAGE).unwrap();
        assert_eq!(back, buf, "page {page}");
        copied
    }

    #[test]
    fn a_map_that_is_not_enabled_never_copies() {
        let (_dir, file, mut map) = file_and_map(4, false);
        assert!(!map.enabled());
        for byte in 1..4 {
            assert!(!put(&mut map, &file, 1, byte));
        }
        assert!(map.map.is_none());
    }

    #[test]
    fn an_empty_write_is_the_system_call_not_a_copy() {
        let (_dir, file, mut map) = file_and_map(4, true);
        put(&mut map, &file, 1, 1);
        for offset in [PAGE, PAGE + 10] {
            let mut called = false;
            map.write(&file, &[], offset, || {
                called = true;
                Ok(())
            })
            .unwrap();
            assert!(called, "an empty write at {offset} went nowhere");
        }
        assert_eq!(map.copies(), 0);
    }

    /// Only the pages written count as dirty: not the ones below them.
    #[test]
    fn only_the_pages_written_are_copied_into() {
        let (_dir, file, mut map) = file_and_map(16, true);
        let on = map.enabled();
        assert!(!put(&mut map, &file, 12, 1));
        assert!(!put(&mut map, &file, 2, 2), "page 2 was never written");
        assert_eq!(put(&mut map, &file, 12, 3), on);
        assert_eq!(put(&mut map, &file, 2, 4), on);
    }

    /// Far into a grown file (past twice the smallest mapping, where a write not yet allocated
    /// is not remembered), a page written once is copied into when written again.
    #[test]
    fn pages_far_into_a_grown_file_are_copied_into_when_rewritten() {
        let pages = 2 * MAP_MIN / PAGE + 16;
        let (_dir, file, mut map) = file_and_map(1, true);
        let on = grow(&file, &mut map, pages) && map.enabled();
        let far = pages - 8;
        assert!(!put(&mut map, &file, far, 1));
        assert_eq!(put(&mut map, &file, far, 2), on);
    }

    /// A cut forgets the pages past it, which are no longer cached (grown back, they are
    /// written with the system call), and keeps those below it, whether or not it falls on a
    /// word of the dirty set's bits (64 pages).
    #[test]
    fn a_cut_forgets_the_pages_past_it_and_keeps_those_below() {
        for (pages, kept) in [(16, 8), (128, 64), (128, 70)] {
            let (_dir, file, mut map) = file_and_map(pages, true);
            let on = map.enabled();
            for page in 0..pages {
                put(&mut map, &file, page, 1);
            }
            cut(&file, &mut map, kept);
            grow(&file, &mut map, pages);
            for page in [kept - 1, kept - 5, 3] {
                assert_eq!(
                    put(&mut map, &file, page, 2),
                    on,
                    "{page} below a cut at {kept}"
                );
            }
            for page in [kept, kept + 3, pages - 1] {
                assert!(
                    !put(&mut map, &file, page, 2),
                    "{page} past a cut at {kept}"
                );
            }
        }
    }

    /// A mapping long enough for a copy is used again, not remade (doubling).
    #[test]
    fn a_mapping_long_enough_is_kept() {
        let (_dir, file, mut map) = file_and_map(4, true);
        for byte in 1..6 {
            put(&mut map, &file, 1, byte);
        }
        let len = map.map.as_ref().map(|map| map.len() as u64);
        assert_eq!(len, map.enabled().then_some(MAP_MIN));
    }

    /// Copies go only to files on ext4 or tmpfs, on 64-bit Linux with 4 KiB pages, without
    /// the portable fallback; never to a file of another filesystem (procfs here).
    #[test]
    fn only_files_on_ext4_and_tmpfs_are_copied_into() {
        let dir = tempfile::tempdir().unwrap();
        let file = File::create(dir.path().join("file")).unwrap();
        #[cfg(target_os = "linux")]
        let expected = {
            #[allow(
                clippy::unnecessary_cast,
                reason = "the field's type differs between architectures"
            )]
            let kind = rustix::fs::fstatfs(&file).unwrap().f_type as u64;
            crate::LINUX_CALLS
                && cfg!(target_pointer_width = "64")
                && rustix::param::page_size() as u64 == GRAIN
                && matches!(kind, 0xEF53 | 0x0102_1994)
        };
        #[cfg(not(target_os = "linux"))]
        let expected = false;
        assert_eq!(rewrites_in_place(&file), expected);
        #[cfg(target_os = "linux")]
        assert!(!rewrites_in_place(
            &File::open("/proc/self/status").unwrap()
        ));
    }
}
