//! Attacks on readers in other processes (issue 50) from outside, as the fault model says
//! machines and users do: the database file replaced by a rename while its writer runs, the
//! lock file replaced by a symbolic link, a FIFO or a new file while processes use it, slots
//! forged by a hostile process, a reader stopped by `SIGSTOP` through churn, a vacuum and a
//! shrink, every slot taken at once by threads, and a reader opening thousands of times.
//! Children are this test binary run again (`processes::child_process`, actions `attack-*`).

use super::processes::{Process, check_snapshot, child_command, read_only, write_round};
use rbolt::{Db, Error, Options};
use rbolt_testkit::tier;
use std::io::{BufRead, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::process::Command;

/// The children's actions, from `processes::child_process`.
pub(super) fn child(what: &str, path: &Path) -> String {
    match what {
        "attack-which" => child_which(path),
        "attack-slots" => child_slots(path),
        "attack-open-writer" => match Db::open(path) {
            Ok(db) => format!("opened {}", db.reader_processes().is_ok()),
            Err(error) => format!("{:?} {error}", error.kind()),
        },
        other => panic!("unknown child action {other}"),
    }
}

/// Opens read-only and says what `which`/`name` holds (`name ...`), or the open's error.
fn child_which(path: &Path) -> String {
    let db = match Db::open_with(path, read_only()) {
        Ok(db) => db,
        Err(error) => return format!("{:?} {error}", error.kind()),
    };
    let read = db.view(|tx| {
        let bucket = tx.bucket("which")?.expect("bucket which");
        let name = bucket.get("name")?.expect("key name");
        Ok::<_, Error>(String::from_utf8_lossy(name).into_owned())
    });
    match read {
        Ok(name) => format!("name {name}"),
        Err(error) => format!("{:?} {error}", error.kind()),
    }
}

/// Opens and closes a read-only handle `RBOLT_ATTACK_OPENS` times, each reading a snapshot
/// checked against the model; then takes every slot of the table with transactions held by
/// eight threads of one handle, says whether one more begins, and on a line of stdin checks
/// every held snapshot again (the writer committed meanwhile), lets them go and begins again.
fn child_slots(path: &Path) -> String {
    let opens: u64 = std::env::var("RBOLT_ATTACK_OPENS")
        .unwrap()
        .parse()
        .unwrap();
    for _ in 0..opens {
        let db = Db::open_with(path, read_only()).unwrap();
        let tx = db.begin_read().unwrap();
        if let Err(error) = check_snapshot(&tx) {
            return format!("wrong {error}");
        }
    }
    let db = Db::open_with(path, read_only()).unwrap();
    let slots = rbolt::storage::READER_SLOTS;
    let (held, go) = (std::sync::Barrier::new(9), std::sync::Barrier::new(9));
    std::thread::scope(|scope| {
        for thread in 0..8 {
            let (db, held, go) = (&db, &held, &go);
            scope.spawn(move || {
                let count = slots / 8 + usize::from(thread < slots % 8);
                let txs: Vec<_> = (0..count).map(|_| db.begin_read().unwrap()).collect();
                let rounds: Vec<u64> = txs.iter().map(|tx| check_snapshot(tx).unwrap()).collect();
                held.wait();
                go.wait();
                // The writer churned meanwhile: every snapshot still reads the same.
                for (tx, round) in txs.iter().zip(rounds) {
                    assert_eq!(check_snapshot(tx), Ok(round), "after the writer's commits");
                }
            });
        }
        held.wait();
        let one_more = match db.begin_read() {
            Ok(_) => "began".to_string(),
            Err(error) => format!("refused {error}"),
        };
        println!("CHILD full {one_more}");
        std::io::stdout().flush().unwrap();
        let mut line = String::new();
        std::io::stdin().lock().read_line(&mut line).unwrap();
        go.wait();
    });
    match db.begin_read().map(|tx| check_snapshot(&tx)) {
        Ok(Ok(_)) => "done".into(),
        Ok(Err(error)) => format!("wrong {error}"),
        Err(error) => format!("no transaction after the threads left: {error}"),
    }
}

/// A bucket `big` of `n` values of 500 bytes.
fn fill_big(db: &Db, n: u32) {
    db.update(|tx| {
        let mut big = tx.create_bucket_if_not_exists("big")?;
        for i in 0..n {
            big.put(i.to_be_bytes(), [7u8; 500])?;
        }
        Ok::<_, Error>(())
    })
    .unwrap();
}

/// `mv restored.db app.db` while the writer of the old `app.db` runs, and a writer (here a
/// table-less one: Go bbolt's `flock`, taken by hand) on the new file: a read-only open of
/// `app.db` must read the new file or be refused, never read the new file through the meta
/// the old file's writer publishes in the lock file both share by name (before the fix: the
/// reader attached to the old writer's table and read the new, smaller file with the old
/// file's meta, past its end).
#[test]
fn a_reader_of_a_database_replaced_by_rename_never_reads_the_old_writers_meta() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let old = Db::open(&path).unwrap();
    old.update(|tx| tx.create_bucket("which")?.put("name", "old"))
        .unwrap();
    fill_big(&old, 3000);
    let restored = dir.path().join("restored");
    let db = Db::open(&restored).unwrap();
    db.update(|tx| tx.create_bucket("which")?.put("name", "new"))
        .unwrap();
    db.close().unwrap();
    std::fs::remove_file(rbolt::storage::lock_file_path(&restored)).unwrap();
    std::fs::rename(&restored, &path).unwrap();
    let new_writer = std::fs::File::open(&path).unwrap();
    rustix::fs::flock(&new_writer, rustix::fs::FlockOperation::LockExclusive).unwrap();
    let answer = Process::start(which_command(&path)).finish();
    assert!(
        answer.starts_with("Locked") && answer.contains("another file"),
        "beside a writer of the new file, the read is refused: {answer}"
    );
    // The old writer runs on, and once the new file's writer leaves, the file is read.
    fill_big(&old, 10);
    drop(new_writer);
    assert_eq!(Process::start(which_command(&path)).finish(), "name new");
}

fn which_command(path: &Path) -> Command {
    child_command("attack-which", path)
}

/// A lock file name that is a symbolic link (planted in a shared directory, say) is not
/// followed: before the fix the writer extended the file it names to the table's length,
/// gave it the database's permissions and wrote its header into it.
#[test]
fn a_lock_file_that_is_a_symbolic_link_is_not_followed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let victim = dir.path().join("victim");
    std::fs::write(&victim, b"precious contents").unwrap();
    std::fs::set_permissions(&victim, std::fs::Permissions::from_mode(0o604)).unwrap();
    std::os::unix::fs::symlink(&victim, rbolt::storage::lock_file_path(&path)).unwrap();
    let db = Db::open(&path).unwrap();
    commit_rounds(&db, 1..3);
    let victim_now = std::fs::read(&victim).unwrap();
    assert!(
        victim_now == b"precious contents",
        "the link's target was written: {} bytes now",
        victim_now.len()
    );
    let mode = std::fs::metadata(&victim).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o604, "the link's target keeps its permissions");
    // Without a table, readers are refused, saying why.
    let answer = Process::start(which_command(&path)).finish();
    assert!(answer.starts_with("Locked"), "{answer}");
}

fn commit_rounds(db: &Db, rounds: std::ops::Range<u64>) {
    for round in rounds {
        db.update(|tx| write_round(tx, round)).unwrap();
    }
}

/// Sends `signal` (`STOP`, `CONT`) to process `pid` with kill(1).
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([format!("-{signal}"), pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill -{signal} {pid}");
}

/// A reader process stopped by `SIGSTOP` while it holds a snapshot (a debugger, a job
/// control ^Z, a frozen cgroup): the writer commits, grows the file, empties it, vacuums and
/// auto-shrinks meanwhile; the file is not cut under the stopped reader, which reads its
/// snapshot whole once continued; the cut comes after it left.
#[test]
fn a_reader_stopped_by_sigstop_keeps_its_snapshot_through_churn_vacuum_and_shrink() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, Options::default().auto_shrink(true)).unwrap();
    commit_rounds(&db, 90..96);
    let mut holder = Process::spawn("hold", &path);
    let (round, _, reads) = super::processes::held(&holder.answer());
    assert_eq!(round, 95);
    let stopped = Stopped::new(holder.child.id());
    commit_rounds(&db, 96..150);
    fill_big(&db, 4000);
    let grown = db.file_len().unwrap();
    assert!(grown > 8 * reads, "the file grew: {grown} against {reads}");
    db.update(|tx| tx.delete_bucket("big")).unwrap();
    db.vacuum(rbolt::VacuumOptions::default(), |_| {
        std::ops::ControlFlow::Continue(())
    })
    .unwrap();
    commit_rounds(&db, 150..260);
    assert!(
        db.begin_read().unwrap().size() < grown / 4,
        "the high-water mark came down"
    );
    assert_eq!(
        db.file_len().unwrap(),
        grown,
        "the file was cut while a stopped reader process read an older snapshot"
    );
    let slots = db.reader_processes().unwrap();
    assert_eq!(slots.len(), 1, "a stopped reader is live: {slots:?}");
    drop(stopped);
    assert_eq!(holder.ask(), "same");
    assert_eq!(holder.finish(), "done");
    commit_rounds(&db, 260..262);
    let shrunk = db.file_len().unwrap();
    assert!(
        shrunk < grown / 4,
        "the file shrank once the reader left: {shrunk} of {grown}"
    );
}

/// A process stopped by `SIGSTOP`, continued when dropped (a failed assertion included).
struct Stopped(u32);

impl Stopped {
    fn new(pid: u32) -> Stopped {
        signal(pid, "STOP");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        // No assertion here: this may run while a failed one unwinds.
        let _ = Command::new("kill")
            .args(["-CONT".to_string(), self.0.to_string()])
            .status();
    }
}

/// Every slot of the table taken at once by threads of one reader process (each holding
/// transactions): one more transaction is refused with an error, not a panic, a hang or a
/// slot shared; the writer commits meanwhile and lists them all; they come back when the
/// threads end. Before that, the same process opens and closes a read-only handle thousands
/// of times (CI tier): a slot leaked by a close would make the table run out early.
#[test]
fn slots_run_out_cleanly_and_thousands_of_opens_leak_none() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, Options::default().no_sync(true)).unwrap();
    commit_rounds(&db, 1..3);
    let opens = tier::size("RBOLT_ATTACK_OPENS", 1_000, 10_000, 100_000);
    let mut command = child_command("attack-slots", &path);
    command.env("RBOLT_ATTACK_OPENS", opens.to_string());
    let mut reader = Process::start(command);
    let full = reader.answer();
    assert!(
        full.starts_with("full refused") && full.contains("reader slots"),
        "{full}"
    );
    assert_eq!(
        db.reader_processes().unwrap().len(),
        rbolt::storage::READER_SLOTS
    );
    commit_rounds(&db, 3..140);
    assert_eq!(reader.ask(), "done");
    assert!(reader.child.wait().unwrap().success());
    commit_rounds(&db, 140..142);
    assert_eq!(db.reader_processes().unwrap(), vec![]);
}

/// Writes slot `index` of the lock file by hand, as a hostile or buggy process could: its
/// process id, handle, txid + 1, length and start time, with no lock held.
fn forge_slot(lock: &Path, index: usize, words: [u64; 5]) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new().write(true).open(lock).unwrap();
    let bytes: Vec<u8> = words.iter().flat_map(|w| w.to_le_bytes()).collect();
    file.write_all_at(&bytes, 512 + 64 * index as u64).unwrap();
}

/// Slots forged in the table (live process ids, an ancient txid, txids past the newest,
/// absurd lengths, but no slot lock held): the writer neither keeps pages for them nor
/// refuses to cut the file, lists none of them, and does not crash.
#[test]
fn forged_slots_pin_nothing_and_block_no_shrink() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open_with(&path, Options::default().auto_shrink(true)).unwrap();
    commit_rounds(&db, 90..97);
    let lock = rbolt::storage::lock_file_path(&path);
    let me = u64::from(std::process::id());
    forge_slot(&lock, 0, [me, 1, 1, 1 << 40, 0]);
    forge_slot(&lock, 7, [1, 2, 3, u64::MAX, u64::MAX]);
    forge_slot(&lock, 50, [me, 3, u64::MAX, u64::MAX, 1]);
    forge_slot(&lock, 119, [u64::MAX, u64::MAX, u64::MAX - 1, 0, 0]);
    commit_rounds(&db, 97..120);
    let len = db.file_len().unwrap();
    commit_rounds(&db, 120..300);
    assert_eq!(db.file_len().unwrap(), len, "freed pages were reused");
    assert_eq!(db.reader_processes().unwrap(), vec![]);
    fill_big(&db, 4000);
    let grown = db.file_len().unwrap();
    forge_slot(&lock, 3, [me, 4, 2, u64::MAX, 0]);
    db.update(|tx| tx.delete_bucket("big")).unwrap();
    commit_rounds(&db, 300..310);
    assert!(
        db.file_len().unwrap() < grown / 2,
        "a forged slot held back the cut"
    );
    // A real reader process still reads beside the writer.
    let mut holder = Process::spawn("hold", &path);
    assert_eq!(super::processes::held(&holder.answer()).0, 309);
    assert_eq!(holder.finish(), "done");
}

/// The lock file replaced while the writer runs and a reader process reads (deleted and made
/// anew by another process, zeros or garbage, or a FIFO): new read-only opens are refused at
/// once, saying why, and never read through the impostor; the attached reader's snapshot stays
/// protected (it shares the writer's table, the old file); the writer's next open rebuilds a
/// table readers attach to, or runs without one when the name is not a regular file.
#[test]
fn a_lock_file_replaced_while_in_use_fails_new_readers_closed() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let lock = rbolt::storage::lock_file_path(&path);
    for replacement in ["zeros", "garbage", "fifo", "short"] {
        let db = Db::open(&path).unwrap();
        db.update(|tx| tx.create_bucket_if_not_exists("which")?.put("name", "db"))
            .unwrap();
        commit_rounds(&db, 90..97);
        let mut holder = Process::spawn("hold", &path);
        let (round, _, _) = super::processes::held(&holder.answer());
        std::fs::remove_file(&lock).unwrap();
        let len = rbolt::storage::LOCK_FILE_LEN;
        match replacement {
            "zeros" => std::fs::write(&lock, vec![0; len]).unwrap(),
            "garbage" => std::fs::write(&lock, vec![0x5a; len]).unwrap(),
            "short" => std::fs::write(&lock, b"x").unwrap(),
            _ => assert!(
                Command::new("mkfifo")
                    .arg(&lock)
                    .status()
                    .unwrap()
                    .success()
            ),
        }
        let answer = Process::start(which_command(&path)).finish();
        assert!(answer.starts_with("Locked"), "{replacement}: {answer}");
        commit_rounds(&db, 97..200);
        assert_eq!(holder.ask(), "same", "{replacement}");
        assert_eq!(holder.finish(), "done");
        assert!(round > 0);
        drop(db);
        let db = Db::open(&path).unwrap();
        let answer = Process::start(which_command(&path)).finish();
        if replacement == "fifo" {
            assert!(answer.starts_with("Locked"), "{replacement}: {answer}");
            drop(db);
            std::fs::remove_file(&lock).unwrap();
        } else {
            assert_eq!(answer, "name db", "{replacement}: rebuilt");
        }
    }
}

/// A tmpfs of `size` mounted on a new directory in `dir`, unmounted when dropped; `None` where
/// this process may not mount (not root, or in a container that forbids it).
struct Tmpfs(std::path::PathBuf);

impl Tmpfs {
    fn mount(dir: &Path, size: &str) -> Option<Tmpfs> {
        let at = dir.join("tmpfs");
        std::fs::create_dir(&at).unwrap();
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(&at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|status| status.success());
        mounted.then_some(Tmpfs(at))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(&self.0).status();
    }
}

/// The lock file is made with its space allocated, not as a sparse file: on a full filesystem
/// (the database on a tmpfs that filled up, the lock file deleted meanwhile), the writer's
/// first store into a hole of its shared mapping raised SIGBUS and killed the writer at its
/// open. Where this process can mount a tmpfs (root), the full one is tried for real in a child
/// writer process (red before the fix: the child died of SIGBUS); elsewhere only the lock
/// file's blocks are checked, which the writer's reset of the slots allocates too, so that half
/// alone does not catch a sparse lock file.
#[test]
fn a_full_filesystem_fails_the_lock_file_instead_of_killing_the_writer() {
    use std::os::unix::fs::MetadataExt;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let db = Db::open(&path).unwrap();
    let lock = std::fs::metadata(rbolt::storage::lock_file_path(&path)).unwrap();
    assert!(
        lock.blocks() * 512 >= rbolt::storage::LOCK_FILE_LEN as u64,
        "the lock file is sparse: {} blocks",
        lock.blocks()
    );
    drop(db);
    let Some(tmpfs) = Tmpfs::mount(dir.path(), "256k") else {
        println!("cannot mount a tmpfs here: the full-filesystem half did not run");
        return;
    };
    let path = tmpfs.0.join("db");
    let db = Db::open(&path).unwrap();
    commit_rounds(&db, 1..3);
    drop(db);
    std::fs::remove_file(rbolt::storage::lock_file_path(&path)).unwrap();
    let mut filler = std::fs::File::create(tmpfs.0.join("filler")).unwrap();
    while filler.write_all(&[1u8; 4096]).is_ok() {}
    drop(filler);
    let answer = Process::start(child_command("attack-open-writer", &path)).finish();
    assert_eq!(answer, "opened true", "the writer opens, without a table");
    drop(tmpfs);
}

/// The lock file takes the database file's permissions, whatever the writer's umask and
/// whatever mode a stale lock file had: readers allowed to read the database can write their
/// slots, and no one else can. The writer is a child process run under `umask 077`.
#[test]
fn the_lock_file_takes_the_database_files_permissions_under_any_umask() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let lock = rbolt::storage::lock_file_path(&path);
    drop(Db::open(&path).unwrap());
    let mode_of = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    for (mode, fresh) in [(0o664, true), (0o640, false), (0o600, false), (0o666, true)] {
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(mode)).unwrap();
        if fresh {
            std::fs::remove_file(&lock).unwrap();
        }
        let child = child_command("attack-open-writer", &path);
        let mut command = Command::new("sh");
        command
            .arg("-c")
            .arg("umask 077 && exec \"$0\" \"$@\"")
            .arg(child.get_program())
            .args(child.get_args())
            .envs(child.get_envs().filter_map(|(k, v)| Some((k, v?))));
        assert_eq!(Process::start(command).finish(), "opened true");
        assert_eq!(
            mode_of(&lock),
            mode,
            "the lock file's mode (database {mode:o})"
        );
        assert_eq!(mode_of(&path), mode, "the database's mode is left alone");
    }
}

/// The database path a symbolic link to a missing file (helper-22's finding in the storage
/// crate, seen here through `Db::open`): the open spun forever, the exclusive create finding
/// the link's name taken and the plain open finding nothing behind it. It now fails, creating
/// nothing through the link. (The open runs on a thread: a regression hangs it, and the test
/// fails after a minute instead of hanging the suite.)
#[test]
fn a_database_path_that_is_a_link_to_nothing_fails_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    let target = dir.path().join("missing");
    std::os::unix::fs::symlink(&target, &path).unwrap();
    let (done, result) = std::sync::mpsc::channel();
    let opener = path.clone();
    std::thread::spawn(move || {
        let _ = done.send(Db::open(&opener).map(drop).map_err(|e| e.to_string()));
    });
    let opened = result
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the open of a link to nothing still spins");
    let error = opened.expect_err("a link to nothing opened");
    assert!(!target.exists(), "a file was created through the link");
    eprintln!("a link to nothing: {error}");
}
