//! Positioned I/O on a file descriptor, shared by [`FileStorage`](super::FileStorage) and
//! [`SimFile`](super::SimFile) so that the simulated file runs the same loops as the real one.

use std::io::{self, IoSlice};
use std::os::fd::BorrowedFd;

use rustix::io::Errno;

use super::IOV_MAX;
use smallvec::SmallVec;

/// Buffers one vectored write keeps on the stack before its list goes to the heap.
const IOV_INLINE: usize = 32;

/// The file's length from `fstat`.
pub(super) fn len(fd: BorrowedFd<'_>) -> io::Result<u64> {
    let stat = rustix::fs::fstat(fd)?;
    u64::try_from(stat.st_size).map_err(|_| io::Error::other("fstat reported a negative size"))
}

/// Fills `buf` from `offset`, retrying on `EINTR` and continuing short reads.
pub(super) fn read_exact_at(
    fd: BorrowedFd<'_>,
    mut buf: &mut [u8],
    mut offset: u64,
) -> io::Result<()> {
    while !buf.is_empty() {
        match rustix::io::pread(fd, &mut *buf, offset) {
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
            Err(Errno::INTR) => {}
            Err(errno) => return Err(errno.into()),
        }
    }
    Ok(())
}

/// Writes all of `buf` at `offset`, retrying on `EINTR` and continuing short writes.
pub(super) fn write_all_at(fd: BorrowedFd<'_>, mut buf: &[u8], mut offset: u64) -> io::Result<()> {
    while !buf.is_empty() {
        match rustix::io::pwrite(fd, buf, offset) {
            Ok(0) => return Err(write_zero()),
            Ok(n) => {
                buf = &buf[n..];
                offset += n as u64;
            }
            Err(Errno::INTR) => {}
            Err(errno) => return Err(errno.into()),
        }
    }
    Ok(())
}

/// Writes `bufs` back to back from `offset` with `pwritev`, at most [`IOV_MAX`] buffers per
/// call, retrying on `EINTR` and continuing short writes where they stopped.
pub(super) fn write_vectored_at(
    fd: BorrowedFd<'_>,
    bufs: &[&[u8]],
    mut offset: u64,
) -> io::Result<()> {
    // Chunks of IOV_MAX, because the kernel rejects longer lists with EINVAL. (rustix's
    // linux_raw backend also clamps the list, which would surface as a short write that the loop
    // below continues; splitting here does not rely on that backend detail.) One vector is
    // reused for every chunk, so the allocation is bounded by IOV_MAX entries however many
    // buffers the caller passes; inline for the common case (a write of at most 64 KiB is 16
    // pages of 4 KiB), so that a small commit's writes allocate nothing.
    let mut slices: SmallVec<[IoSlice<'_>; IOV_INLINE]> =
        SmallVec::with_capacity(bufs.len().min(IOV_MAX));
    for chunk in bufs.chunks(IOV_MAX) {
        slices.clear();
        // Empty buffers would make a fully written chunk look like a zero-length write.
        slices.extend(
            chunk
                .iter()
                .filter(|buf| !buf.is_empty())
                .map(|buf| IoSlice::new(buf)),
        );
        let mut remaining = &mut slices[..];
        while !remaining.is_empty() {
            match rustix::io::pwritev(fd, remaining, offset) {
                Ok(0) => return Err(write_zero()),
                Ok(n) => {
                    offset += n as u64;
                    IoSlice::advance_slices(&mut remaining, n);
                }
                Err(Errno::INTR) => {}
                Err(errno) => return Err(errno.into()),
            }
        }
    }
    Ok(())
}

/// `fdatasync`, retrying on `EINTR`.
pub(super) fn sync_data(fd: BorrowedFd<'_>) -> io::Result<()> {
    retry_on_interrupt(|| rustix::fs::fdatasync(fd))
}

/// `fsync`, retrying on `EINTR`.
pub(super) fn sync_all(fd: BorrowedFd<'_>) -> io::Result<()> {
    retry_on_interrupt(|| rustix::fs::fsync(fd))
}

/// Runs `op` until it returns something other than `EINTR`.
pub(super) fn retry_on_interrupt<T>(
    mut op: impl FnMut() -> rustix::io::Result<T>,
) -> io::Result<T> {
    loop {
        match op() {
            Err(Errno::INTR) => {}
            result => return result.map_err(io::Error::from),
        }
    }
}

fn write_zero() -> io::Error {
    io::Error::new(io::ErrorKind::WriteZero, "the file accepted no more bytes")
}
