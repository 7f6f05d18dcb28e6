//! Creating a node's directories and files so that a crash at any moment of a first start
//! leaves either nothing or a whole, durable file behind.
//!
//! A directory entry is durable only once its parent directory is synced, so every directory
//! this crate creates is followed by a sync of its parent. A new rbolt file is built under a
//! temporary name (its buckets and format key included), synced, then linked to its real name
//! (which fails if another process got there first) and its directory synced: a process killed
//! at any moment of its first start leaves the real name absent or complete. The temporary
//! names end in [`TMP_SUFFIX`], so `StateMachine::open` deletes any left by a crash.

use crate::error::{Error, Result};
use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

/// Files being written (snapshots being built or received, a state file being replaced, a
/// new file being created) end in this; any left by a crash are deleted at open.
pub const TMP_SUFFIX: &str = ".tmp";

/// The marker file of a restore under way: `restore_with` writes it (durably) before
/// anything else in the directory and deletes it last, so a restore killed at any point leaves
/// it behind. A directory that holds it is not a node: opening it is refused
/// ([`Error::RestoreUnfinished`]), and a restore into it starts over.
pub const RESTORING_FILE: &str = "restoring";

/// Refuses `dir` if it holds a restore that did not finish ([`RESTORING_FILE`]).
pub(crate) fn refuse_unfinished(dir: &Path) -> Result<()> {
    let marker = dir.join(RESTORING_FILE);
    if marker.exists() {
        return Err(Error::RestoreUnfinished {
            dir: dir.to_path_buf(),
            marker,
        });
    }
    Ok(())
}

/// Numbers the temporary files of this process's file creations.
static CREATE_SEQ: AtomicU64 = AtomicU64::new(0);

/// Makes a rename or a new entry in `dir` durable.
pub(crate) fn sync_dir(dir: &Path) -> Result<()> {
    File::open(dir)
        .and_then(|d| d.sync_all())
        .map_err(Error::io(dir))
}

/// The directory `path` lives in (`.` for a bare file name).
fn parent_of(path: &Path) -> &Path {
    match path.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent,
        _ => Path::new("."),
    }
}

/// Creates `dir` and any missing ancestors, syncing the parent of each directory it creates,
/// so the whole path survives a crash once this returns.
pub(crate) fn create_dir_durable(dir: &Path) -> Result<()> {
    // The missing directories, deepest first, found by walking up (bounded by the path's
    // number of components).
    let mut missing: Vec<&Path> = Vec::new();
    let mut at = Some(dir);
    while let Some(path) = at {
        if path.as_os_str().is_empty() || path.is_dir() {
            break;
        }
        missing.push(path);
        at = path.parent();
    }
    for path in missing.into_iter().rev() {
        match fs::create_dir(path) {
            Ok(()) => sync_dir(parent_of(path))?,
            // Another process made it meanwhile; it syncs its parent itself, but a sync here
            // costs little and does not depend on that process surviving.
            Err(error) if error.kind() == io::ErrorKind::AlreadyExists && path.is_dir() => {
                sync_dir(parent_of(path))?;
            }
            Err(error) => return Err(Error::io(path)(error)),
        }
    }
    Ok(())
}

/// Opens the rbolt file at `path` with `options`. If there is none, builds one under a
/// temporary name with `prepare` run in one write transaction, syncs it, and links it to
/// `path`, so that `path` never names a file that was not fully prepared.
pub(crate) fn open_or_create(
    path: &Path,
    options: &rbolt::Options,
    prepare: impl FnOnce(&mut rbolt::WriteTx<'_>) -> Result<()>,
) -> Result<rbolt::Db> {
    if !path.exists() && !options.read_only {
        create(path, options, prepare)?;
    }
    Ok(rbolt::Db::open_with(path, options.clone())?)
}

fn create(
    path: &Path,
    options: &rbolt::Options,
    prepare: impl FnOnce(&mut rbolt::WriteTx<'_>) -> Result<()>,
) -> Result<()> {
    let dir = parent_of(path);
    let tmp = creating_path(path);
    // A file of this name can only be the leftover of a dead process that had this pid.
    match fs::remove_file(&tmp) {
        Ok(()) => {}
        Err(error) if error.kind() == io::ErrorKind::NotFound => {}
        Err(error) => return Err(Error::io(&tmp)(error)),
    }
    let built = (|| {
        let db = rbolt::Db::open_with(&tmp, options.clone())?;
        let mut tx = db.begin_write()?;
        prepare(&mut tx)?;
        tx.commit()?;
        drop(db);
        // rbolt syncs its commits (unless `no_sync`); this makes the file durable either way.
        File::open(&tmp)
            .and_then(|f| f.sync_all())
            .map_err(Error::io(&tmp))
    })();
    let linked = built.and_then(|()| match fs::hard_link(&tmp, path) {
        Ok(()) => Ok(()),
        // Another process created it first: use theirs.
        Err(error) if error.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        Err(error) => Err(Error::io(path)(error)),
    });
    let removed = fs::remove_file(&tmp).map_err(Error::io(&tmp));
    linked?;
    removed?;
    sync_dir(dir)
}

/// A temporary name beside `path` for building it, unique to this process and call.
fn creating_path(path: &Path) -> PathBuf {
    let seq = CREATE_SEQ.fetch_add(1, Ordering::Relaxed);
    let name = path
        .file_name()
        .map_or_else(|| "db".into(), |n| n.to_string_lossy().into_owned());
    parent_of(path).join(format!(
        "{name}.creating-{}-{seq}{}",
        std::process::id(),
        TMP_SUFFIX
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_directories_are_created_and_an_existing_one_is_fine() {
        let root = tempfile::tempdir().expect("tempdir");
        let deep = root.path().join("a/b/c");
        create_dir_durable(&deep).expect("create");
        assert!(deep.is_dir());
        create_dir_durable(&deep).expect("again");
        let file = root.path().join("a/file");
        fs::write(&file, b"x").expect("write");
        assert!(
            create_dir_durable(&file.join("d")).is_err(),
            "a file in the way is an error"
        );
    }

    #[test]
    fn a_created_file_is_prepared_and_no_temporary_file_remains() {
        let root = tempfile::tempdir().expect("tempdir");
        let path = root.path().join("x.db");
        let options = crate::rbolt_options();
        let db = open_or_create(&path, &options, |tx| {
            tx.create_bucket(b"made")?;
            Ok(())
        })
        .expect("create");
        assert!(
            db.view(|tx| Ok::<_, rbolt::Error>(tx.bucket(b"made")?.is_some()))
                .expect("view")
        );
        drop(db);
        // The second open finds the file and does not prepare it again.
        let db = open_or_create(&path, &options, |_| {
            Err(Error::invalid("prepare must not run on an existing file"))
        })
        .expect("reopen");
        drop(db);
        let names: Vec<String> = fs::read_dir(root.path())
            .expect("read_dir")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(names, vec!["x.db".to_owned()]);
    }

    #[test]
    fn a_failed_prepare_leaves_nothing() {
        let root = tempfile::tempdir().expect("tempdir");
        let path = root.path().join("x.db");
        let result = open_or_create(&path, &crate::rbolt_options(), |_| {
            Err(Error::invalid("refused"))
        });
        assert!(matches!(result, Err(Error::Invalid(_))), "{result:?}");
        assert_eq!(fs::read_dir(root.path()).expect("read_dir").count(), 0);
    }
}
