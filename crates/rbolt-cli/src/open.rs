//! Opening databases for the commands: existence checks, the lock timeout, and errors that
//! name the file.

use anyhow::{Result, anyhow, bail};
use clap::Args;
use rbolt::{Db, Options};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The database file a command works on, and how long to wait for its lock.
#[derive(Args, Clone, Debug)]
pub struct FileArgs {
    /// The database file.
    pub path: PathBuf,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// How long to wait for the file lock.
#[derive(Args, Clone, Debug)]
pub struct LockArgs {
    /// How long to wait for the file lock when another process holds it: a Go-style duration
    /// (`500ms`, `5s`, `1m`), or `inf` to wait as long as it takes (bbolt's behaviour). The
    /// default, `0s`, tries once and fails at once, so a script never hangs on a file a live
    /// server has open.
    #[arg(long, value_name = "DURATION", default_value = "0s", value_parser = parse_timeout)]
    pub timeout: LockTimeout,
}

/// A lock timeout: a finite wait, or none.
#[derive(Clone, Copy, Debug)]
pub struct LockTimeout(pub Option<Duration>);

fn parse_timeout(text: &str) -> Result<LockTimeout, String> {
    match text {
        "inf" | "infinite" | "forever" => Ok(LockTimeout(None)),
        _ => crate::duration::parse(text).map(|d| LockTimeout(Some(d))),
    }
}

impl LockArgs {
    /// The facade's option: `None` waits for ever.
    pub fn lock_timeout(&self) -> Option<Duration> {
        self.timeout.0
    }
}

/// Fails with a clear message when `path` does not name a regular file.
pub fn check_exists(path: &Path) -> Result<()> {
    match std::fs::metadata(path) {
        Ok(meta) if meta.is_dir() => {
            bail!("{} is a directory, not a database file", path.display())
        }
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            bail!("database file {} does not exist", path.display())
        }
        Err(e) => Err(anyhow!(e).context(format!("cannot open {}", path.display()))),
    }
}

/// Whether `a` and `b` name the same existing file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    match (std::fs::metadata(a), std::fs::metadata(b)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// Turns an open error into one line that names the file and says what to do about a lock.
pub fn open_error(path: &Path, error: rbolt::Error, lock: &LockArgs) -> anyhow::Error {
    match error {
        rbolt::Error::Locked {
            beside_writer: Some(reason),
            ..
        } => anyhow!(
            "{} is locked by another process that writes it, and this read-only command cannot \
             read beside it ({reason}); pass --timeout 5s (or inf) to wait for it to close",
            path.display()
        ),
        rbolt::Error::Timeout { .. } | rbolt::Error::Locked { .. } => match lock.lock_timeout() {
            Some(d) if d.is_zero() => anyhow!(
                "{} is locked by another process that has the database open; \
                 pass --timeout 5s (or inf) to wait for it",
                path.display()
            ),
            _ => anyhow!(
                "{} is still locked by another process after waiting {}",
                path.display(),
                crate::duration::go_string(lock.lock_timeout().unwrap_or_default())
            ),
        },
        // These already name the file.
        e @ (rbolt::Error::Invalid { .. }
        | rbolt::Error::VersionMismatch { .. }
        | rbolt::Error::Checksum { .. }
        | rbolt::Error::Io { .. }) => anyhow!(e),
        e => anyhow!(e).context(format!("cannot open {}", path.display())),
    }
}

/// Opens an existing database read-only, with a shared lock.
pub fn open_read(path: &Path, lock: &LockArgs) -> Result<Db> {
    check_exists(path)?;
    let options = Options::default()
        .read_only(true)
        .lock_timeout(lock.lock_timeout());
    Db::open_with(path, options).map_err(|e| open_error(path, e, lock))
}

/// Opens a database for writing, with an exclusive lock. `create`: make the file when missing.
pub fn open_write(path: &Path, lock: &LockArgs, create: bool, options: Options) -> Result<Db> {
    if !create || path.exists() {
        check_exists(path)?;
    }
    let options = options.read_only(false).lock_timeout(lock.lock_timeout());
    Db::open_with(path, options).map_err(|e| open_error(path, e, lock))
}
