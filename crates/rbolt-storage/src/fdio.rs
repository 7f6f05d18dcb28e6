//! Positioned I/O on an open file, shared by [`FileStorage`](crate::FileStorage) and
//! [`SimFile`](crate::SimFile) so that the simulated file runs the same loops as the real one.
//!
//! Portable calls (std's positioned reads and writes, syncs and length changes) serve every
//! Unix. Two Linux calls do better where they exist and each has a portable fallback:
//! `pwritev` (one system call for a run of pages; the fallback writes each buffer in turn) and
//! `fallocate` (space that cannot run out later; the fallback extends the file sparsely). The
//! feature `portable-fallback` makes Linux run the fallbacks, so the code other platforms run
//! is tested here. Syncs go through std, which picks `fdatasync` on Linux and `F_FULLFSYNC` on
//! Apple systems, where `fsync` does not reach the disk's cache.

use std::fs::File;
use std::io::{self, IoSlice};
use std::os::unix::fs::FileExt;

use smallvec::SmallVec;

use crate::{IOV_MAX, WRITE_BYTES_MAX};

/// Buffers one vectored write keeps on the stack before its list goes to the heap.
const IOV_INLINE: usize = 32;

/// Whether this build uses the Linux-only calls (`pwritev`, `fallocate`, `memfd_create`).
pub(crate) const LINUX_CALLS: bool =
    cfg!(all(target_os = "linux", not(feature = "portable-fallback")));

/// The file's length.
pub(super) fn len(file: &File) -> io::Result<u64> {
    Ok(file.metadata()?.len())
}

/// Fills `buf` from `offset`, retrying on `EINTR` and continuing short reads. (Over any
/// [`FileExt`], so that a test can interrupt and shorten its reads.)
pub(super) fn read_exact_at(
    file: &impl FileExt,
    mut buf: &mut [u8],
    mut offset: u64,
) -> io::Result<()> {
    while !buf.is_empty() {
        match file.read_at(buf, offset) {
            Ok(0) => {
                return Err(io::Error::new(
                    io::ErrorKind::UnexpectedEof,
                    format!(
                        "read of {} bytes at offset {offset} ends past the end of the file",
                        buf.len()
                    ),
                ));
            }
            Ok(n) => {
                let rest = buf;
                buf = &mut rest[n..];
                offset += n as u64;
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(())
}

/// The two positioned writes the loops below are made of, so that a test can watch every call.
pub(super) trait PositionedWrite {
    /// One `pwrite`: writes some prefix of `buf` at `offset`, returns its length.
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize>;
    /// One `pwritev`: writes some prefix of the concatenated `slices` (none empty) at
    /// `offset`, returns its length.
    fn write_slices_at(&self, slices: &[IoSlice<'_>], offset: u64) -> io::Result<usize>;
}

impl PositionedWrite for File {
    fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
        FileExt::write_at(self, buf, offset)
    }

    fn write_slices_at(&self, slices: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
        #[cfg(all(target_os = "linux", not(feature = "portable-fallback")))]
        return Ok(rustix::io::pwritev(self, slices, offset)?);
        // The portable fallback: a vectored write may stop after any byte, so writing only
        // the first buffer is one, and the loop goes on with the next.
        #[cfg(not(all(target_os = "linux", not(feature = "portable-fallback"))))]
        FileExt::write_at(self, &slices[0], offset)
    }
}

/// Writes all of `buf` at `offset`, in writes of at most [`WRITE_BYTES_MAX`] bytes, retrying
/// on `EINTR` and continuing short writes.
pub(super) fn write_all_at(
    file: &impl PositionedWrite,
    buf: &[u8],
    mut offset: u64,
) -> io::Result<()> {
    for mut chunk in buf.chunks(WRITE_BYTES_MAX) {
        while !chunk.is_empty() {
            match file.write_at(chunk, offset) {
                Ok(0) => return Err(write_zero()),
                Ok(n) => {
                    chunk = &chunk[n..];
                    offset += n as u64;
                }
                Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
                Err(error) => return Err(error),
            }
        }
    }
    Ok(())
}

/// Writes `bufs` back to back from `offset` (with `pwritev` on Linux): calls of at most
/// [`WRITE_BYTES_MAX`] bytes and [`IOV_MAX`] buffers (a buffer longer than the room left in a
/// call is split), retrying on `EINTR` and continuing short writes where they stopped.
pub(super) fn write_vectored_at(
    file: &impl PositionedWrite,
    bufs: &[&[u8]],
    mut offset: u64,
) -> io::Result<()> {
    // One list reused for every call, inline for the common case (a write of at most 64 KiB
    // is 16 pages of 4 KiB), so that a small commit's writes allocate nothing. (The kernel
    // rejects lists longer than IOV_MAX with EINVAL; splitting here does not rely on a
    // backend's clamping.)
    let mut slices: SmallVec<[IoSlice<'_>; IOV_INLINE]> = SmallVec::new();
    let mut call_len = 0;
    for buf in bufs {
        let mut rest: &[u8] = buf;
        while !rest.is_empty() {
            let take = rest.len().min(WRITE_BYTES_MAX - call_len);
            slices.push(IoSlice::new(&rest[..take]));
            call_len += take;
            rest = &rest[take..];
            if call_len == WRITE_BYTES_MAX || slices.len() == IOV_MAX {
                offset = write_slices(file, &mut slices, offset)?;
                slices.clear();
                call_len = 0;
            }
        }
    }
    if !slices.is_empty() {
        write_slices(file, &mut slices, offset)?;
    }
    Ok(())
}

/// Writes all of `slices` (none empty) at `offset`, continuing short writes; returns the
/// offset after them.
fn write_slices(
    file: &impl PositionedWrite,
    slices: &mut [IoSlice<'_>],
    mut offset: u64,
) -> io::Result<u64> {
    let mut remaining = slices;
    while !remaining.is_empty() {
        match file.write_slices_at(remaining, offset) {
            Ok(0) => return Err(write_zero()),
            Ok(n) => {
                offset += n as u64;
                IoSlice::advance_slices(&mut remaining, n);
            }
            Err(error) if error.kind() == io::ErrorKind::Interrupted => {}
            Err(error) => return Err(error),
        }
    }
    Ok(offset)
}

/// Makes the file at least `len` bytes long, the space allocated where the system can
/// (`fallocate` on Linux), else a sparse extension with the same length. `true` when the
/// space from offset 0 to `len` is allocated.
pub(super) fn allocate(file: &File, len: u64) -> io::Result<bool> {
    if allocate_in_place(file, len)? {
        return Ok(true);
    }
    // Some filesystems (and tmpfs on old kernels) cannot preallocate, nor can the portable
    // calls; a sparse extension still gives the right length, only without the promise that
    // writes below it cannot fail with ENOSPC.
    file.set_len(len)?;
    Ok(false)
}

/// Allocates the file's space from offset 0 to `len` (`fallocate` on Linux), growing it to
/// `len` if shorter; `false`, changing nothing, where the system or filesystem cannot.
pub(super) fn allocate_in_place(file: &File, len: u64) -> io::Result<bool> {
    #[cfg(all(target_os = "linux", not(feature = "portable-fallback")))]
    return linux::fallocate(file, len);
    #[cfg(not(all(target_os = "linux", not(feature = "portable-fallback"))))]
    {
        let _ = (file, len);
        Ok(false)
    }
}

/// A file for a [`SimFile`](crate::SimFile)'s contents that no other handle can reach: an
/// anonymous `memfd` on Linux, else a file created in the temporary directory and unlinked at
/// once, so that nothing is left behind.
#[cfg(feature = "sim")]
pub(super) fn anonymous_file() -> io::Result<File> {
    #[cfg(all(target_os = "linux", not(feature = "portable-fallback")))]
    return linux::memfd();
    #[cfg(not(all(target_os = "linux", not(feature = "portable-fallback"))))]
    portable_anonymous_file()
}

/// [`anonymous_file`] from portable calls.
#[cfg(all(
    feature = "sim",
    not(all(target_os = "linux", not(feature = "portable-fallback")))
))]
fn portable_anonymous_file() -> io::Result<File> {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let pid = std::process::id();
    create_unlinked(&std::env::temp_dir(), || {
        format!(
            "rbolt-simfile-{pid}-{}",
            NEXT.fetch_add(1, Ordering::Relaxed)
        )
    })
}

/// A new file in `dir` under the first of the `names` that no file has yet, unlinked at once,
/// so that nothing is left behind. (Built for the tests on every system, so that the Linux
/// runs test the portable code too.)
#[cfg(any(
    test,
    all(
        feature = "sim",
        not(all(target_os = "linux", not(feature = "portable-fallback")))
    )
))]
fn create_unlinked(dir: &std::path::Path, mut names: impl FnMut() -> String) -> io::Result<File> {
    use std::os::unix::fs::OpenOptionsExt;
    loop {
        let path = dir.join(names());
        match std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&path)
        {
            Ok(file) => {
                std::fs::remove_file(&path)?;
                return Ok(file);
            }
            // Left by a process with the same id (one that crashed between creating and
            // unlinking it): try the next name.
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists => {}
            Err(error) => return Err(error),
        }
    }
}

/// The Linux calls, compiled only there (and not with `portable-fallback`).
#[cfg(all(target_os = "linux", not(feature = "portable-fallback")))]
mod linux {
    use std::fs::File;
    use std::io;

    use rustix::fs::FallocateFlags;
    use rustix::io::Errno;

    /// `fallocate` from offset 0 to `len`: from 0, not from the old end, so that holes left
    /// below the old end (by an earlier truncation or a write past the end) are backed too,
    /// at little cost for ranges already allocated. `false` where the filesystem cannot.
    pub(super) fn fallocate(file: &File, len: u64) -> io::Result<bool> {
        loop {
            match rustix::fs::fallocate(file, FallocateFlags::empty(), 0, len) {
                Ok(()) => return Ok(true),
                Err(Errno::INTR) => {}
                Err(Errno::OPNOTSUPP) => return Ok(false),
                Err(errno) => return Err(errno.into()),
            }
        }
    }

    /// Reads what the device holds for the 4 KiB block of `path` at `block` (a multiple of
    /// 4096) into `buf` (4096 bytes, 4096-aligned), bypassing the page cache (`O_DIRECT`).
    /// `Ok(None)` where the filesystem does not take `O_DIRECT` (tmpfs before Linux 6.6, say);
    /// `Ok(Some(n))`: `n` bytes read (fewer at the end of the file).
    pub(super) fn read_direct(
        path: &std::path::Path,
        buf: &mut [u8],
        block: u64,
    ) -> io::Result<Option<usize>> {
        use rustix::fs::{Mode, OFlags};
        let flags = OFlags::RDONLY | OFlags::DIRECT | OFlags::CLOEXEC;
        let fd = match rustix::fs::open(path, flags, Mode::empty()) {
            Ok(fd) => fd,
            Err(Errno::INVAL) => return Ok(None),
            Err(errno) => return Err(errno.into()),
        };
        loop {
            match rustix::io::pread(&fd, &mut *buf, block) {
                Ok(n) => return Ok(Some(n)),
                Err(Errno::INTR) => {}
                Err(Errno::INVAL) => return Ok(None),
                Err(errno) => return Err(errno.into()),
            }
        }
    }

    /// An anonymous in-memory file, closed on exec.
    #[cfg(feature = "sim")]
    pub(super) fn memfd() -> io::Result<File> {
        let fd = rustix::fs::memfd_create("rbolt-simfile", rustix::fs::MemfdFlags::CLOEXEC)?;
        Ok(File::from(fd))
    }
}

/// What the device holds at `[offset, offset + buf.len())` of the file at `path`, bypassing
/// the page cache, into `buf` (within one 4 KiB block): `false` where that cannot be read
/// (no `O_DIRECT`: another system, the portable build, a filesystem that refuses it).
pub(super) fn read_durable(
    path: &std::path::Path,
    buf: &mut [u8],
    offset: u64,
) -> io::Result<bool> {
    const BLOCK: u64 = 4096;
    let block = offset / BLOCK * BLOCK;
    let within = (offset - block) as usize;
    if within + buf.len() > BLOCK as usize {
        return Ok(false);
    }
    #[cfg(all(target_os = "linux", not(feature = "portable-fallback")))]
    {
        // An aligned block inside a buffer twice its size: `O_DIRECT` wants the memory, the
        // offset and the length aligned to the device's block.
        let mut space = vec![0u8; 2 * BLOCK as usize];
        let start = space.as_ptr().align_offset(BLOCK as usize);
        let aligned = &mut space[start..start + BLOCK as usize];
        let Some(n) = linux::read_direct(path, aligned, block)? else {
            return Ok(false);
        };
        // Past the end of the file the device holds nothing: zeros.
        aligned[n.min(BLOCK as usize)..].fill(0);
        buf.copy_from_slice(&aligned[within..within + buf.len()]);
        Ok(true)
    }
    #[cfg(not(all(target_os = "linux", not(feature = "portable-fallback"))))]
    {
        let _ = (path, buf, within);
        Ok(false)
    }
}

fn write_zero() -> io::Error {
    io::Error::new(io::ErrorKind::WriteZero, "the file accepted no more bytes")
}

#[cfg(test)]
mod tests {
    use std::cell::{Cell, RefCell};
    use std::io::{self, IoSlice};
    use std::os::unix::fs::FileExt;

    use super::{PositionedWrite, create_unlinked, read_exact_at, write_all_at, write_vectored_at};
    use crate::{IOV_MAX, WRITE_BYTES_MAX};

    /// A file in memory that records each call's buffers and bytes, writes at most `short`
    /// bytes per call and fails every third call with `EINTR`.
    #[derive(Default)]
    struct Recorder {
        bytes: RefCell<Vec<u8>>,
        calls: RefCell<Vec<(usize, usize)>>,
        short: usize,
    }

    impl Recorder {
        fn write(&self, parts: &[&[u8]], offset: u64) -> io::Result<usize> {
            let mut calls = self.calls.borrow_mut();
            let len: usize = parts.iter().map(|p| p.len()).sum();
            calls.push((parts.len(), len));
            if calls.len().is_multiple_of(3) {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let take = len.min(self.short);
            let data: Vec<u8> = parts.concat();
            let mut bytes = self.bytes.borrow_mut();
            let start = usize::try_from(offset).unwrap();
            if bytes.len() < start + take {
                bytes.resize(start + take, 0);
            }
            bytes[start..start + take].copy_from_slice(&data[..take]);
            Ok(take)
        }
    }

    impl PositionedWrite for Recorder {
        fn write_at(&self, buf: &[u8], offset: u64) -> io::Result<usize> {
            self.write(&[buf], offset)
        }
        fn write_slices_at(&self, slices: &[IoSlice<'_>], offset: u64) -> io::Result<usize> {
            let parts: Vec<&[u8]> = slices.iter().map(|s| &**s).collect();
            self.write(&parts, offset)
        }
    }

    #[test]
    fn every_call_carries_at_most_64_kib_and_iov_max_buffers_and_all_bytes_arrive() {
        // Pages of 64 KiB and 256 KiB (a page_size(65536) creation writes four pages in one
        // buffer), runs of 4 KiB pages past IOV_MAX, odd sizes that straddle the cap.
        let big: Vec<u8> = (0..256 * 1024).map(|i| (i % 251) as u8).collect();
        let small: Vec<u8> = (0..4096).map(|i| (i % 13) as u8).collect();
        let odd: Vec<u8> = (0..70_001).map(|i| (i % 7) as u8).collect();
        let cases: Vec<Vec<&[u8]>> = vec![
            vec![&big],
            vec![&small; IOV_MAX + 7],
            vec![&odd, &small, &odd],
            vec![&small[..1]; 2 * IOV_MAX + 1],
        ];
        for short in [usize::MAX, 4096, 1000] {
            for bufs in &cases {
                let file = Recorder {
                    short,
                    ..Recorder::default()
                };
                write_vectored_at(&file, bufs, 512).unwrap();
                let want: Vec<u8> = bufs.concat();
                assert_eq!(&file.bytes.borrow()[512..], &want[..]);
                for &(buffers, len) in file.calls.borrow().iter() {
                    assert!(len <= WRITE_BYTES_MAX, "a call of {len} bytes");
                    assert!(buffers <= IOV_MAX, "a call of {buffers} buffers");
                }
                let file = Recorder {
                    short,
                    ..Recorder::default()
                };
                write_all_at(&file, &big, 0).unwrap();
                assert_eq!(&file.bytes.borrow()[..], &big[..]);
                assert!(
                    file.calls
                        .borrow()
                        .iter()
                        .all(|&(_, len)| len <= WRITE_BYTES_MAX)
                );
            }
        }
    }

    #[test]
    fn a_file_that_takes_no_bytes_is_an_error_not_a_loop() {
        let file = Recorder {
            short: 0,
            ..Recorder::default()
        };
        let error = write_vectored_at(&file, &[b"abc"], 0).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::WriteZero);
        let error = write_all_at(&file, b"abc", 0).unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::WriteZero);
    }

    /// A file in memory that reads at most `short` bytes per call and fails every third call
    /// with `EINTR`, or, with `broken`, fails every call with `EIO`; panics past 10,000 calls
    /// (a loop that retries an error it should return).
    struct Reader {
        bytes: Vec<u8>,
        short: usize,
        broken: bool,
        calls: Cell<usize>,
    }

    impl Reader {
        fn new(bytes: Vec<u8>, short: usize, broken: bool) -> Reader {
            let calls = Cell::new(0);
            Reader {
                bytes,
                short,
                broken,
                calls,
            }
        }
    }

    impl FileExt for Reader {
        fn read_at(&self, buf: &mut [u8], offset: u64) -> io::Result<usize> {
            let calls = self.calls.get() + 1;
            self.calls.set(calls);
            assert!(calls <= 10_000, "an error retried forever");
            if self.broken {
                return Err(io::Error::from_raw_os_error(
                    rustix::io::Errno::IO.raw_os_error(),
                ));
            }
            if calls.is_multiple_of(3) {
                return Err(io::ErrorKind::Interrupted.into());
            }
            let start = usize::try_from(offset).unwrap().min(self.bytes.len());
            let take = buf.len().min(self.short).min(self.bytes.len() - start);
            buf[..take].copy_from_slice(&self.bytes[start..start + take]);
            Ok(take)
        }
        fn write_at(&self, _: &[u8], _: u64) -> io::Result<usize> {
            unreachable!("a reader is not written")
        }
    }

    #[test]
    fn reads_continue_where_a_short_read_stopped_and_retry_interrupted_calls() {
        let bytes: Vec<u8> = (0..5000).map(|i| (i % 251) as u8).collect();
        for short in [usize::MAX, 1000, 7] {
            let file = Reader::new(bytes.clone(), short, false);
            let mut buf = vec![0; 3000];
            read_exact_at(&file, &mut buf, 1500).unwrap();
            assert_eq!(buf, bytes[1500..4500], "reads of at most {short} bytes");
            // Past the end: an error, after reading what there is.
            let mut buf = vec![0; 600];
            let error = read_exact_at(&file, &mut buf, 4500).unwrap_err();
            assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);
        }
    }

    #[test]
    fn an_error_other_than_eintr_is_returned_not_retried() {
        let file = Reader::new(vec![0; 100], usize::MAX, true);
        let error = read_exact_at(&file, &mut [0; 10], 0).unwrap_err();
        assert_eq!(
            error.raw_os_error(),
            Some(rustix::io::Errno::IO.raw_os_error())
        );
        assert_eq!(file.calls.get(), 1);
    }

    /// A file whose every write fails with `EIO`; panics past 100 calls.
    #[derive(Default)]
    struct Broken {
        calls: Cell<usize>,
    }

    impl Broken {
        fn fail(&self) -> io::Result<usize> {
            self.calls.set(self.calls.get() + 1);
            assert!(self.calls.get() <= 100, "an error retried forever");
            Err(io::Error::from_raw_os_error(
                rustix::io::Errno::IO.raw_os_error(),
            ))
        }
    }

    impl PositionedWrite for Broken {
        fn write_at(&self, _: &[u8], _: u64) -> io::Result<usize> {
            self.fail()
        }
        fn write_slices_at(&self, _: &[IoSlice<'_>], _: u64) -> io::Result<usize> {
            self.fail()
        }
    }

    #[test]
    fn a_write_error_other_than_eintr_is_returned_not_retried() {
        let eio = Some(rustix::io::Errno::IO.raw_os_error());
        let file = Broken::default();
        assert_eq!(
            write_all_at(&file, b"abc", 0).unwrap_err().raw_os_error(),
            eio
        );
        assert_eq!(file.calls.get(), 1);
        let file = Broken::default();
        let error = write_vectored_at(&file, &[b"abc", b"de"], 0).unwrap_err();
        assert_eq!(error.raw_os_error(), eio);
        assert_eq!(file.calls.get(), 1);
    }

    /// A run of pages goes in as few calls as the caps allow: full calls of 64 KiB (16 pages
    /// of 4 KiB), or of IOV_MAX buffers, then the rest; not a call per buffer.
    #[test]
    fn vectored_writes_fill_each_call_up_to_the_caps() {
        let page = [5u8; 4096];
        let tiny = [6u8; 1];
        let pages: Vec<&[u8]> = vec![&page; 33];
        let tinies: Vec<&[u8]> = vec![&tiny; 2 * IOV_MAX + 1];
        let cases = [
            (pages, [(16, 65536), (16, 65536), (1, 4096), (1, 4096)]),
            (
                tinies,
                [(IOV_MAX, IOV_MAX), (IOV_MAX, IOV_MAX), (1, 1), (1, 1)],
            ),
        ];
        // (The third call of each fails with EINTR and is made again.)
        for (bufs, calls) in cases {
            let file = Recorder {
                short: usize::MAX,
                ..Recorder::default()
            };
            write_vectored_at(&file, &bufs, 0).unwrap();
            assert_eq!(*file.calls.borrow(), calls);
            assert_eq!(*file.bytes.borrow(), bufs.concat());
        }
    }

    /// The portable `SimFile` backing: names already taken are skipped (not truncated), and
    /// the file is unlinked at once, its handle still reading and writing.
    #[test]
    fn an_anonymous_file_skips_names_taken_and_leaves_no_name_behind() {
        let dir = tempfile::tempdir().unwrap();
        for taken in ["a", "b"] {
            std::fs::write(dir.path().join(taken), b"old").unwrap();
        }
        let mut names = ["a", "b", "c"].into_iter();
        let file = create_unlinked(dir.path(), || names.next().unwrap().to_owned()).unwrap();
        assert_eq!(names.next(), None, "a free name was skipped");
        FileExt::write_at(&file, b"new", 0).unwrap();
        let mut buf = [0; 3];
        file.read_at(&mut buf, 0).unwrap();
        assert_eq!(&buf, b"new");
        for taken in ["a", "b"] {
            assert_eq!(std::fs::read(dir.path().join(taken)).unwrap(), b"old");
        }
        let mut left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|entry| entry.unwrap().file_name())
            .collect();
        left.sort();
        assert_eq!(left, ["a", "b"]);
    }

    #[test]
    fn an_anonymous_file_fails_on_an_error_other_than_a_taken_name() {
        let dir = tempfile::tempdir().unwrap();
        let mut tries = 0;
        let error = create_unlinked(&dir.path().join("missing"), || {
            tries += 1;
            assert!(tries <= 100, "an error retried forever");
            format!("file-{tries}")
        })
        .unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::NotFound);
        assert_eq!(tries, 1);
    }

    /// Which of the first `pages` system pages of the file under `map` the page cache holds.
    #[cfg(all(target_os = "linux", not(feature = "portable-fallback")))]
    fn cached(map: &crate::Mapping, pages: usize) -> Vec<bool> {
        let mut vec = vec![0u8; pages];
        // SAFETY: `map` is a live mapping of at least `pages` system pages (the caller maps
        // that many), and `vec` has one byte for each; `mincore` only writes those bytes and
        // touches no page of the mapping.
        let rc = unsafe {
            libc::mincore(
                map.as_ptr().cast_mut().cast(),
                pages * crate::system_page_size(),
                vec.as_mut_ptr(),
            )
        };
        assert_eq!(rc, 0, "mincore: {}", io::Error::last_os_error());
        vec.iter().map(|&byte| byte & 1 == 1).collect()
    }

    /// Linux: a durable read reads the device (`O_DIRECT`), not the page cache, which it
    /// leaves as it was (a read through the cache would fill it), and takes any range within
    /// one 4 KiB block, up to the block's last byte. Where the filesystem refuses `O_DIRECT`
    /// or keeps the dropped pages cached, there is nothing to check.
    #[cfg(all(target_os = "linux", not(feature = "portable-fallback")))]
    #[test]
    fn a_durable_read_bypasses_the_page_cache_up_to_the_end_of_its_block() {
        use crate::{FileOptions, FileStorage, Storage};
        use rustix::fs::Advice;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("file");
        let page = crate::system_page_size();
        let bytes: Vec<u8> = (0..2 * page).map(|i| (i % 251) as u8).collect();
        let storage = FileStorage::open(&path, FileOptions::new()).unwrap();
        storage.write_all_at(&bytes, 0).unwrap();
        storage.sync_all().unwrap();
        let mut buf = [0u8; 16];
        if !super::read_durable(&path, &mut buf, 0).unwrap() {
            eprintln!("no O_DIRECT on {}: nothing to check", dir.path().display());
            return;
        }
        assert_eq!(buf, bytes[..16]);
        assert!(super::read_durable(&path, &mut buf, 4080).unwrap());
        assert_eq!(buf, bytes[4080..4096]);
        assert!(!super::read_durable(&path, &mut [0; 17], 4080).unwrap());
        let map = storage.map(2 * page).unwrap();
        rustix::fs::fadvise(
            std::fs::File::open(&path).unwrap(),
            0,
            None,
            Advice::DontNeed,
        )
        .unwrap();
        if cached(&map, 2)[1] {
            eprintln!("the page cache kept a dropped page: nothing to check");
            return;
        }
        let at = (page + 100) as u64;
        assert!(super::read_durable(&path, &mut buf, at).unwrap());
        assert_eq!(buf, bytes[page + 100..page + 116]);
        assert!(
            !cached(&map, 2)[1],
            "the durable read went through the page cache"
        );
    }
}
