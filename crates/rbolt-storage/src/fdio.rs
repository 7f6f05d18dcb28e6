//! Positioned I/O on a file descriptor, shared by [`FileStorage`](crate::FileStorage) and
//! [`SimFile`](crate::SimFile) so that the simulated file runs the same loops as the real one.

use std::io::{self, IoSlice};
use std::os::fd::BorrowedFd;

use rustix::io::Errno;

use crate::{IOV_MAX, WRITE_BYTES_MAX};
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

/// Writes all of `buf` at `offset`, in writes of at most [`WRITE_BYTES_MAX`] bytes, retrying
/// on `EINTR` and continuing short writes.
pub(super) fn write_all_at(fd: BorrowedFd<'_>, buf: &[u8], mut offset: u64) -> io::Result<()> {
    for mut chunk in buf.chunks(WRITE_BYTES_MAX) {
        while !chunk.is_empty() {
            match rustix::io::pwrite(fd, chunk, offset) {
                Ok(0) => return Err(write_zero()),
                Ok(n) => {
                    chunk = &chunk[n..];
                    offset += n as u64;
                }
                Err(Errno::INTR) => {}
                Err(errno) => return Err(errno.into()),
            }
        }
    }
    Ok(())
}

/// Writes `bufs` back to back from `offset` with `pwritev`: calls of at most
/// [`WRITE_BYTES_MAX`] bytes and [`IOV_MAX`] buffers (a buffer longer than the room left in a
/// call is split), retrying on `EINTR` and continuing short writes where they stopped.
pub(super) fn write_vectored_at(
    fd: BorrowedFd<'_>,
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
                offset = write_slices(fd, &mut slices, offset)?;
                slices.clear();
                call_len = 0;
            }
        }
    }
    if !slices.is_empty() {
        write_slices(fd, &mut slices, offset)?;
    }
    Ok(())
}

/// One `pwritev` of `slices` (none empty) at `offset`, continued until all is written; returns
/// the offset after it.
fn write_slices(
    fd: BorrowedFd<'_>,
    slices: &mut [IoSlice<'_>],
    mut offset: u64,
) -> io::Result<u64> {
    let mut remaining = slices;
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
    Ok(offset)
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
