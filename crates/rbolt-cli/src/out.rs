//! Standard output: buffered, locked once, and quiet when the reader goes away.

use std::io::{self, BufWriter, IsTerminal, StdoutLock, Write};

/// Bytes buffered before a write to stdout: large enough that streaming a million keys makes
/// few system calls.
const STDOUT_BUFFER_BYTES: usize = 64 * 1024;

/// Buffered, locked standard output. Flush it before returning; errors are returned, and a
/// closed pipe is recognised by [`is_broken_pipe`].
pub fn stdout() -> BufWriter<StdoutLock<'static>> {
    BufWriter::with_capacity(STDOUT_BUFFER_BYTES, io::stdout().lock())
}

/// Whether the error comes from writing to a pipe whose reader has gone (`rbolt keys ... |
/// head`): not a failure of ours, so it ends the command quietly.
pub fn is_broken_pipe(error: &anyhow::Error) -> bool {
    error.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// The terminal's width when stdout is a terminal; `None` when output goes elsewhere (then
/// nothing is shortened).
pub fn terminal_width() -> Option<usize> {
    if !io::stdout().is_terminal() {
        return None;
    }
    console::Term::stdout()
        .size_checked()
        .map(|(_, cols)| usize::from(cols))
        .filter(|&cols| cols > 0)
}

/// Flushes `w`, turning the error into one that names stdout.
pub fn flush(mut w: impl Write) -> anyhow::Result<()> {
    w.flush()
        .map_err(|e| anyhow::Error::new(e).context("cannot write to standard output"))
}
