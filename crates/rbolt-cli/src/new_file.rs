//! The files commands make — `compact`'s copy, the database a new `import` creates, a
//! surgery's repaired copy, `export --output` — and how they come into being so that they are
//! safe to swap in: each is written under a temporary name beside its destination, synced by
//! the command, then put at its name without replacing anything there, and the directory is
//! synced, all before the command reports success. Whoever looks at the destination finds no
//! file or the whole synced one; a failed command leaves nothing, a crash at worst a
//! temporary file named `.NAME.rbolt-tmp-...`.
//!
//! "Without replacing": the file goes in place with `link(2)`, which fails when the name
//! exists (also when it came into being while the command ran), then the temporary name is
//! removed. A file system without hard links gets a rename after a last check that the name
//! is still free. The one thing that may be replaced is an empty file, such as `mktemp`
//! leaves for a script to fill: it holds nothing to lose.

use anyhow::{Context, Result, anyhow, bail};
use std::path::{Path, PathBuf};

/// A file being made at `dest`, under a temporary name until [`NewFile::publish`].
#[derive(Debug)]
pub struct NewFile {
    temp: PathBuf,
    dest: PathBuf,
    /// `dest` was an empty file when the command began: it is replaced.
    replaces_empty: bool,
    published: bool,
}

impl NewFile {
    /// Checks that `dest` can be made — no file there, or an empty regular file — and picks
    /// a temporary name beside it that is not taken. Creates nothing: the caller makes the
    /// temporary file at [`NewFile::temp`] (a database opened there, a file created there).
    pub fn begin(dest: &Path) -> Result<NewFile> {
        let replaces_empty = match std::fs::symlink_metadata(dest) {
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => false,
            Err(error) => {
                return Err(anyhow!(error).context(format!("cannot look at {}", dest.display())));
            }
            Ok(meta) if meta.is_dir() => bail!("{} is a directory", dest.display()),
            Ok(meta) if meta.is_file() && meta.len() == 0 => true,
            Ok(_) => bail!(
                "{} already exists; this command writes a new file and never replaces one \
                 (remove it, or name another file)",
                dest.display()
            ),
        };
        let name = dest
            .file_name()
            .ok_or_else(|| anyhow!("{} names no file", dest.display()))?;
        // The process id keeps runs apart, the random part names from earlier runs that had
        // this process's id and crashed.
        let temp = loop {
            let mut temp_name = std::ffi::OsString::from(".");
            temp_name.push(name);
            temp_name.push(format!(
                ".rbolt-tmp-{}-{:08x}",
                std::process::id(),
                fastrand::u32(..)
            ));
            let temp = dest.with_file_name(temp_name);
            if std::fs::symlink_metadata(&temp).is_err() {
                break temp;
            }
        };
        Ok(NewFile {
            temp,
            dest: dest.to_owned(),
            replaces_empty,
            published: false,
        })
    }

    /// Where the file is made until it is published.
    pub fn temp(&self) -> &Path {
        &self.temp
    }

    /// Puts the temporary file, complete and synced by the caller (and closed, for a
    /// database), at the destination without replacing a file that came there meanwhile,
    /// and syncs the directory so that the name survives a crash.
    pub fn publish(mut self) -> Result<()> {
        let dest_taken = || {
            anyhow!(
                "{} already exists (it was made while this command ran); the new file is not \
                 put in its place",
                self.dest.display()
            )
        };
        if self.replaces_empty {
            // Still an empty regular file, or gone: nothing is lost by putting ours there.
            if std::fs::symlink_metadata(&self.dest)
                .is_ok_and(|meta| !meta.is_file() || meta.len() > 0)
            {
                return Err(dest_taken());
            }
            self.rename()?;
        } else {
            match std::fs::hard_link(&self.temp, &self.dest) {
                Ok(()) => {
                    self.published = true;
                    std::fs::remove_file(&self.temp).with_context(|| {
                        format!("cannot remove the temporary {}", self.temp.display())
                    })?;
                }
                Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                    return Err(dest_taken());
                }
                // No hard links here (some file systems have none): a rename, the name
                // checked just before.
                Err(_) => {
                    if std::fs::symlink_metadata(&self.dest).is_ok() {
                        return Err(dest_taken());
                    }
                    self.rename()?;
                }
            }
        }
        rbolt_storage::sync_parent_dir(&self.dest)
            .with_context(|| format!("cannot sync the folder of {}", self.dest.display()))
    }

    fn rename(&mut self) -> Result<()> {
        std::fs::rename(&self.temp, &self.dest).with_context(|| {
            format!(
                "cannot move {} to {}",
                self.temp.display(),
                self.dest.display()
            )
        })?;
        self.published = true;
        Ok(())
    }
}

impl Drop for NewFile {
    /// A file that was never published is of no use to anyone: removed, whatever stopped it.
    fn drop(&mut self) {
        if !self.published {
            let _ = std::fs::remove_file(&self.temp);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::NewFile;

    #[test]
    fn a_file_is_published_once_and_never_over_another() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("out");
        let new = NewFile::begin(&dest).unwrap();
        assert!(new.temp().starts_with(dir.path()));
        assert!(!new.temp().exists(), "begin creates nothing");
        std::fs::write(new.temp(), b"made").unwrap();
        let temp = new.temp().to_owned();
        new.publish().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"made");
        assert!(!temp.exists(), "the temporary name is gone");
        // Now the name is taken: refused at the start...
        let error = NewFile::begin(&dest).unwrap_err().to_string();
        assert!(error.contains("already exists"), "{error}");
        // ...and at the end, for a file made while the command ran.
        let other = dir.path().join("other");
        let new = NewFile::begin(&other).unwrap();
        std::fs::write(new.temp(), b"ours").unwrap();
        std::fs::write(&other, b"theirs").unwrap();
        let temp = new.temp().to_owned();
        let error = new.publish().unwrap_err().to_string();
        assert!(error.contains("made while this command ran"), "{error}");
        assert_eq!(std::fs::read(&other).unwrap(), b"theirs");
        assert!(!temp.exists(), "a file never published is removed");
    }

    #[test]
    fn an_empty_file_is_replaced_and_a_directory_refused() {
        let dir = tempfile::tempdir().unwrap();
        let dest = dir.path().join("mktemp");
        std::fs::write(&dest, b"").unwrap();
        let new = NewFile::begin(&dest).unwrap();
        std::fs::write(new.temp(), b"filled").unwrap();
        new.publish().unwrap();
        assert_eq!(std::fs::read(&dest).unwrap(), b"filled");
        // Filled meanwhile: not replaced.
        let dest = dir.path().join("mktemp2");
        std::fs::write(&dest, b"").unwrap();
        let new = NewFile::begin(&dest).unwrap();
        std::fs::write(new.temp(), b"ours").unwrap();
        std::fs::write(&dest, b"theirs").unwrap();
        assert!(new.publish().is_err());
        assert_eq!(std::fs::read(&dest).unwrap(), b"theirs");
        let error = NewFile::begin(dir.path()).unwrap_err().to_string();
        assert!(error.contains("is a directory"), "{error}");
    }
}
