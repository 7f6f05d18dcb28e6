//! Opening: meta selection, recovery of a damaged meta, rejection of impossible ones.

use crate::support::{assert_clean, read_db, within};
use rbolt::{Db, Error, Options};
use std::time::Duration;

fn two_states(
    dir: &std::path::Path,
    page_size: usize,
) -> (
    std::path::PathBuf,
    rbolt_fixtures::Bucket,
    rbolt_fixtures::Bucket,
) {
    let path = dir.join("db");
    let db = Db::open_with(&path, Options::default().page_size(page_size)).unwrap();
    db.update(|tx| tx.create_bucket(b"b")?.put(b"k", b"old"))
        .unwrap();
    let old = read_db(&db).unwrap();
    db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"k", b"new"))
        .unwrap();
    let new = read_db(&db).unwrap();
    (path, old, new)
}

fn newest_meta_page(path: &std::path::Path, page_size: usize) -> usize {
    let bytes = std::fs::read(path).unwrap();
    let txid = |page: usize| {
        let meta = rbolt_page::Meta::read_unchecked(&bytes[page * page_size..]).unwrap();
        meta.txid
    };
    if txid(0) > txid(1) { 0 } else { 1 }
}

#[test]
fn a_damaged_newest_meta_falls_back_to_the_other() {
    for page_size in [4096, 16384] {
        let dir = tempfile::tempdir().unwrap();
        let (path, old, new) = two_states(dir.path(), page_size);
        assert!(read_db(&Db::open(&path).unwrap()).unwrap() == new);
        let newest = newest_meta_page(&path, page_size);
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[newest * page_size + 16 + 40] ^= 0x01; // a bit of the freelist id: checksum fails
        std::fs::write(&path, &bytes).unwrap();
        let db = Db::open(&path).unwrap();
        assert!(read_db(&db).unwrap() == old, "page size {page_size}");
        assert_clean(&db);
    }
}

#[test]
fn a_damaged_meta_0_is_found_past_by_probing_for_meta_1() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _old, new) = two_states(dir.path(), 16384);
    let mut bytes = std::fs::read(&path).unwrap();
    if newest_meta_page(&path, 16384) == 0 {
        // Make meta 1 the newest by committing once more.
        let db = Db::open(&path).unwrap();
        db.update(|tx| tx.bucket_mut(b"b")?.unwrap().put(b"k", b"new"))
            .unwrap();
        drop(db);
        bytes = std::fs::read(&path).unwrap();
    }
    bytes[..80].fill(0xFF);
    std::fs::write(&path, &bytes).unwrap();
    let db = Db::open_with(&path, Options::default().read_only(true)).unwrap();
    assert_eq!(db.page_size(), 16384);
    assert!(read_db(&db).unwrap() == new);
}

#[test]
fn metas_past_the_end_of_the_file_are_rejected() {
    let dir = tempfile::tempdir().unwrap();
    let (path, _, _) = two_states(dir.path(), 4096);
    let file = std::fs::OpenOptions::new().write(true).open(&path).unwrap();
    file.set_len(4 * 4096).unwrap();
    drop(file);
    let error = Db::open(&path).unwrap_err();
    assert!(
        matches!(error, Error::Truncated { actual, .. } if actual == 4 * 4096),
        "{error}"
    );
    assert!(error.to_string().contains("truncated"), "{error}");
}

#[test]
fn not_a_database_and_other_versions_are_typed_errors() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("text");
    std::fs::write(&path, vec![b'x'; 64 * 1024]).unwrap();
    let error = Db::open(&path).unwrap_err();
    assert!(matches!(error, Error::Invalid { .. }), "{error}");
    let path = dir.path().join("short");
    std::fs::write(&path, b"bolt").unwrap();
    let error = Db::open(&path).unwrap_err();
    assert!(matches!(error, Error::Invalid { .. }), "{error}");
    // Version 1 in both metas, checksums fixed up.
    let (path, _, _) = two_states(dir.path(), 4096);
    let mut bytes = std::fs::read(&path).unwrap();
    for page in 0..2 {
        let start = page * 4096;
        let mut meta = rbolt_page::Meta::read_unchecked(&bytes[start..]).unwrap();
        meta.version = 1;
        rbolt_page::write_meta(
            &mut bytes[start..start + 4096],
            &rbolt_page::Meta {
                txid: meta.txid,
                ..meta
            },
        );
    }
    std::fs::write(&path, &bytes).unwrap();
    assert!(matches!(
        Db::open(&path),
        Err(Error::VersionMismatch { .. })
    ));
}

/// The file at `path`, locked as another process that has it open holds it (within one
/// process a second open fails at once, whatever the options).
fn held_elsewhere(path: &std::path::Path) -> std::fs::File {
    let held = std::fs::File::open(path).unwrap();
    rustix::fs::flock(&held, rustix::fs::FlockOperation::LockExclusive).unwrap();
    held
}

#[test]
fn a_locked_file_fails_at_once_by_default() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(Db::open(&path).unwrap());
    let held = held_elsewhere(&path);
    // A wait would hang here; the guard fails the test instead.
    let opened = within(Duration::from_secs(20), move || Db::open(path).map(drop));
    let error = opened.unwrap_err();
    assert!(matches!(error, Error::Locked { .. }), "{error}");
    assert_eq!(error.kind(), rbolt::ErrorKind::Locked);
    let message = error.to_string();
    assert!(
        message.contains("locked by another process") && message.contains("lock_timeout"),
        "{message}"
    );
    drop(held);
}

#[test]
fn waiting_for_the_lock_for_ever_is_asked_for() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(Db::open(&path).unwrap());
    let held = held_elsewhere(&path);
    let (send, receive) = std::sync::mpsc::channel();
    let opener = std::thread::spawn(move || {
        let opened = Db::open_with(&path, Options::default().lock_timeout(None));
        let _ = send.send(opened.map(drop));
    });
    // Still waiting while the lock is held...
    assert!(
        receive.recv_timeout(Duration::from_millis(200)).is_err(),
        "the open returned while another process held the lock"
    );
    // ...and opened once it is released.
    drop(held);
    let opened = receive
        .recv_timeout(Duration::from_secs(20))
        .expect("the open hung");
    opened.unwrap();
    opener.join().unwrap();
}

#[test]
fn a_locked_file_times_out() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    drop(Db::open(&path).unwrap());
    let _held = held_elsewhere(&path);
    let error = Db::open_with(
        &path,
        Options::default().lock_timeout(Some(Duration::from_millis(50))),
    )
    .unwrap_err();
    assert!(matches!(error, Error::Timeout { .. }), "{error}");
}

/// `.ci/run` runs this suite a second time with `rbolt-storage/portable-fallback` and
/// `RBOLT_EXPECT_PORTABLE=1`: the storage under every test must then be the portable one, the
/// code macOS and the BSDs run.
#[test]
fn the_storage_calls_are_the_ones_the_build_asked_for() {
    let portable = std::env::var_os("RBOLT_EXPECT_PORTABLE").is_some_and(|v| v == "1");
    assert_eq!(
        rbolt::storage::LINUX_CALLS,
        cfg!(target_os = "linux") && !portable,
        "RBOLT_EXPECT_PORTABLE={portable}"
    );
}

/// Issue 49, item 1: an I/O error at open says what the operating system said and what to do
/// about it, not only "I/O error on <path>".
#[test]
fn an_open_that_fails_says_why_and_what_to_do() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-dir").join("db");
    let error = Db::open(&missing).unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, Error::Io { .. }), "{error:?}");
    for part in [
        "no-such-dir",
        "No such file or directory",
        "create the directory",
    ] {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
    let error = Db::open(dir.path()).unwrap_err();
    let message = error.to_string();
    assert!(matches!(error, Error::Io { .. }), "{error:?}");
    for part in ["Is a directory", "name a file inside it"] {
        assert!(message.contains(part), "{message:?} lacks {part:?}");
    }
}

/// Issue 49, item 7: a size limit below an empty database (its 4 pages) could be neither kept
/// nor written under: the open that would create the file refuses it before any file is made.
/// (An existing file may be larger than its limit: it then cannot grow.)
#[test]
fn a_size_limit_below_an_empty_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    for max_size in [1, 16 * 1024 - 1] {
        let error = Db::open_with(&path, Options::default().max_size(max_size)).unwrap_err();
        assert!(matches!(error, Error::InvalidOptions { .. }), "{error:?}");
        assert!(error.to_string().contains("smaller than an empty database"));
        assert!(!path.exists(), "the refused open made a file");
    }
    let db = Db::open_with(&path, Options::default().max_size(16 * 1024)).unwrap();
    assert!(db.update(|tx| tx.create_bucket("b").map(drop)).is_err());
    db.close().unwrap();
    let db = Db::open_with(&path, Options::default().max_size(1)).unwrap();
    assert!(db.begin_read().is_ok());
}

/// The same refusal where the storage is given (`Db::open_storage`, which creates the
/// database in an empty storage): nothing is written to it.
#[test]
fn a_size_limit_below_an_empty_database_is_refused_on_a_given_storage() {
    use rbolt::storage::{SimFile, Storage};
    let sim = SimFile::new().unwrap();
    let options = Options::default().page_size(4096).max_size(4 * 4096 - 1);
    let error = Db::open_storage(std::sync::Arc::new(sim.clone()), options).unwrap_err();
    assert!(matches!(error, Error::InvalidOptions { .. }), "{error:?}");
    assert_eq!(
        sim.len().unwrap(),
        0,
        "the refused open wrote to the storage"
    );
    let options = Options::default().page_size(4096).max_size(4 * 4096);
    assert!(Db::open_storage(std::sync::Arc::new(sim), options).is_ok());
}
