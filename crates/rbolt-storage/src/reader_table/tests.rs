//! The reader table's protocol within one process: open file description locks of two opens
//! of the lock file conflict as those of two processes do.

use super::*;

/// The database file the tests' tables stand for (device, inode): any, the same for all.
const DB_FILE: (u64, u64) = (1, 2);

fn writer(dir: &Path) -> ReaderTable {
    ReaderTable::open_for_writer(&dir.join("db"), 0o600, DB_FILE).unwrap()
}

#[test]
fn a_reader_attaches_only_while_a_writer_holds_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let missing = ReaderTable::open_for_reader(&db, DB_FILE).unwrap_err();
    assert!(
        missing.0.contains("cannot open the lock file"),
        "{}",
        missing.0
    );
    let table = writer(dir.path());
    assert_eq!(table.writer_pid(), std::process::id());
    let reader = ReaderTable::open_for_reader(&db, DB_FILE).unwrap();
    let mut buf = [0u8; PUBLISHED_BYTES_MAX];
    assert_eq!(
        reader.read_published(&mut buf),
        None,
        "nothing published yet"
    );
    table.publish(b"meta of txid 7");
    let (len, generation) = reader.read_published(&mut buf).unwrap();
    assert_eq!(&buf[..len], b"meta of txid 7");
    assert_eq!(generation % 2, 0);
    assert_eq!(reader.generation(), generation);
    table.publish(b"meta of txid 8, longer than the one before");
    assert!(reader.generation() > generation);
    drop(table);
    let gone = ReaderTable::open_for_reader(&db, DB_FILE).unwrap_err();
    assert!(gone.0.contains("no rbolt writer"), "{}", gone.0);
}

#[test]
fn the_writer_sees_live_slots_and_clears_dead_ones() {
    let dir = tempfile::tempdir().unwrap();
    let table = writer(dir.path());
    let reader = ReaderTable::open_for_reader(&dir.path().join("db"), DB_FILE).unwrap();
    let slot = reader.claim_slot(41).unwrap();
    let idle = reader.claim_slot(42).unwrap();
    assert_ne!(slot.index(), idle.index());
    slot.begin(5, 8192);
    let mut live = Vec::new();
    table.live_readers(&mut live, u64::MAX).unwrap();
    assert_eq!(live.len(), 1, "{live:?}");
    assert_eq!(
        (live[0].txid, live[0].len, live[0].handle),
        (Some(5), 8192, 41)
    );
    assert!(table.slots().unwrap().iter().all(|s| s.pid_seen));
    assert_eq!(
        table.slots().unwrap().len(),
        2,
        "both claimed slots are listed"
    );
    // A process that died inside a transaction: its words stay, its lock is gone.
    let dead = idle.index();
    std::mem::forget(idle);
    ofd::unlock(&reader.shared.file, slot_lock_byte(dead), 1).unwrap();
    reader.slot_word(dead, S_TXID).store(3, Ordering::SeqCst);
    live.clear();
    table.live_readers(&mut live, u64::MAX).unwrap();
    assert_eq!(
        live.iter().map(|s| s.index).collect::<Vec<_>>(),
        [slot.index()]
    );
    assert_eq!(
        reader.slot_word(dead, S_TXID).load(Ordering::SeqCst),
        0,
        "cleared"
    );
    slot.end();
    live.clear();
    table.live_readers(&mut live, u64::MAX).unwrap();
    assert!(live.is_empty());
    drop(slot);
    assert!(table.slots().unwrap().is_empty());
}

#[test]
fn a_writer_resets_a_table_no_live_reader_holds_and_repairs_a_torn_header() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let table = writer(dir.path());
    table.publish(b"x");
    let generation = table.generation();
    // Leftovers of readers that died, and a header torn by anything.
    table.slot_word(3, S_TXID).store(9, Ordering::SeqCst);
    table.slot_word(3, S_PID).store(1234, Ordering::SeqCst);
    table.word(H_MAGIC).store(0xdead, Ordering::SeqCst);
    drop(table);
    let table = writer(dir.path());
    assert!(table.header_valid());
    assert_eq!(table.slot_word(3, S_TXID).load(Ordering::SeqCst), 0);
    assert!(table.generation() > generation, "generations never go back");
    assert_eq!(table.generation() % 2, 1, "unavailable until published");
    // With a live reader the slots stay, and a torn header is written again.
    let reader = ReaderTable::open_for_reader(&db, DB_FILE).unwrap();
    let slot = reader.claim_slot(1).unwrap();
    slot.begin(4, 4096);
    table.word(H_VERSION).store(77, Ordering::SeqCst);
    drop(table);
    let table = writer(dir.path());
    assert!(table.header_valid());
    let mut live = Vec::new();
    table.live_readers(&mut live, u64::MAX).unwrap();
    assert_eq!(live.len(), 1);
    // A lock file cut short (a torn or damaged file) is grown back to its length.
    drop((slot, reader, table));
    std::fs::OpenOptions::new()
        .write(true)
        .open(lock_file_path(&db))
        .unwrap()
        .set_len(100)
        .unwrap();
    let table = writer(dir.path());
    assert!(table.header_valid());
    let len = std::fs::metadata(lock_file_path(&db)).unwrap().len();
    assert_eq!(len, LOCK_FILE_LEN as u64);
}

#[test]
fn every_slot_taken_is_an_error_not_a_wait() {
    let dir = tempfile::tempdir().unwrap();
    let _table = writer(dir.path());
    let reader = ReaderTable::open_for_reader(&dir.path().join("db"), DB_FILE).unwrap();
    let slots: Vec<ClaimedSlot> = (0..READER_SLOTS as u64)
        .map(|h| reader.claim_slot(h).unwrap())
        .collect();
    let full = reader.claim_slot(999).unwrap_err();
    assert_eq!(full.kind(), io::ErrorKind::ResourceBusy);
    drop(slots);
    assert!(reader.claim_slot(999).is_ok());
}

/// Word `at` (a byte offset) of the lock file's bytes, as another process reads them.
fn word_at(bytes: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(bytes[at..at + WORD].try_into().unwrap())
}

/// Processes of different builds share the lock file: its bytes and its locks are where the
/// module's documentation says, not only where this build looks for them.
#[test]
fn the_lock_file_has_the_documented_layout() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let table = writer(dir.path());
    assert_eq!(table.path(), lock_file_path(&db));
    table.publish(b"a meta of 19 bytes.");
    let reader = ReaderTable::open_for_reader(&db, DB_FILE).unwrap();
    let first = reader.claim_slot(7).unwrap();
    let second = reader.claim_slot(8).unwrap();
    assert_eq!((first.index(), second.index()), (0, 1));
    let before = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();
    second.begin(41, 12288);
    let after = SystemTime::now().duration_since(UNIX_EPOCH).unwrap();

    let bytes = std::fs::read(lock_file_path(&db)).unwrap();
    assert_eq!(
        bytes.len(),
        8192,
        "a 512-byte header and 120 slots of 64 bytes"
    );
    let pid = u64::from(std::process::id());
    assert_eq!(&bytes[0..8], b"rboltRT1", "magic");
    assert_eq!(word_at(&bytes, 8), 1, "version");
    assert_eq!(word_at(&bytes, 16), 120, "slot count");
    assert_eq!(word_at(&bytes, 24), pid, "writer's pid");
    assert_eq!(word_at(&bytes, 32), table.generation(), "generation");
    assert_eq!(word_at(&bytes, 32) % 2, 0, "a whole record");
    assert_eq!(word_at(&bytes, 40), 19, "record's length");
    assert_eq!(&bytes[64..83], b"a meta of 19 bytes.");
    let slot = 512 + 64;
    assert_eq!(word_at(&bytes, slot), pid, "slot's pid");
    assert_eq!(word_at(&bytes, slot + 8), 8, "slot's handle");
    assert_eq!(word_at(&bytes, slot + 16), 42, "txid + 1");
    assert_eq!(word_at(&bytes, slot + 24), 12288, "bytes it may read");
    let since = word_at(&bytes, slot + 32);
    assert!(
        (before.as_secs()..=after.as_secs()).contains(&since),
        "began at {since}"
    );
    assert!(
        bytes[512 + 128..].iter().all(|&b| b == 0),
        "unclaimed slots are zeros"
    );

    // The locks, as a third open file description sees them.
    let other = OpenOptions::new()
        .read(true)
        .write(true)
        .open(lock_file_path(&db))
        .unwrap();
    assert!(ofd::is_locked(&other, 0, 1).unwrap(), "the writer's byte");
    for index in 0..4u64 {
        let byte = 512 + 64 * index;
        assert_eq!(
            ofd::is_locked(&other, byte, 1).unwrap(),
            index < 2,
            "slot {index}'s lock at byte {byte}"
        );
    }
}

/// A writer lock held when the database's own lock is free is an earlier writer's, held by a
/// forked child: waited for a little, taken when released, given up on after the wait.
#[test]
fn a_writer_waits_a_little_for_a_held_writer_lock() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let earlier = writer(dir.path());
    let start = std::time::Instant::now();
    let busy = ReaderTable::open_for_writer(&db, 0o600, DB_FILE).unwrap_err();
    assert_eq!(busy.kind(), io::ErrorKind::ResourceBusy, "{busy}");
    assert!(
        start.elapsed() >= WRITER_LOCK_WAIT,
        "gave up after {:?}",
        start.elapsed()
    );
    let release = std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(20));
        drop(earlier);
    });
    let table = ReaderTable::open_for_writer(&db, 0o600, DB_FILE).unwrap();
    release.join().unwrap();
    assert_eq!(table.writer_pid(), std::process::id());
}

#[test]
fn a_reader_refuses_a_short_lock_file_or_a_damaged_header() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    std::fs::write(lock_file_path(&db), [0u8; 100]).unwrap();
    let short = ReaderTable::open_for_reader(&db, DB_FILE).unwrap_err();
    assert!(short.0.contains("is 100 bytes"), "{}", short.0);

    let table = writer(dir.path());
    for (index, what) in [
        (H_MAGIC, "magic"),
        (H_VERSION, "version"),
        (H_SLOTS, "slots"),
    ] {
        let good = table.word(index).load(Ordering::SeqCst);
        table.word(index).store(good ^ 0x100, Ordering::SeqCst);
        let damaged = ReaderTable::open_for_reader(&db, DB_FILE).unwrap_err();
        assert!(
            damaged.0.contains("no valid header"),
            "{what}: {}",
            damaged.0
        );
        table.word(index).store(good, Ordering::SeqCst);
    }
    assert!(ReaderTable::open_for_reader(&db, DB_FILE).is_ok());
}

#[test]
fn a_writer_that_never_published_leaves_no_record_to_read() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let mut buf = [0u8; PUBLISHED_BYTES_MAX];
    for _ in 0..3 {
        let _table = writer(dir.path());
        let reader = ReaderTable::open_for_reader(&db, DB_FILE).unwrap();
        assert_eq!(reader.read_published(&mut buf), None);
        assert_eq!(reader.generation() % 2, 1);
    }
}

#[test]
fn a_reader_sees_the_writer_close() {
    let dir = tempfile::tempdir().unwrap();
    let table = writer(dir.path());
    let reader = ReaderTable::open_for_reader(&dir.path().join("db"), DB_FILE).unwrap();
    assert_eq!(reader.writer_pid(), std::process::id());
    table.writer_closed();
    assert_eq!(reader.writer_pid(), 0);
}

/// A slot reading the writer's newest txid or later pins nothing yet: taken as it is, with
/// no system call, even when its process is gone; an older one is checked and cleared if dead.
#[test]
fn the_writer_checks_only_slots_older_than_its_newest_txid() {
    let dir = tempfile::tempdir().unwrap();
    let table = writer(dir.path());
    let reader = ReaderTable::open_for_reader(&dir.path().join("db"), DB_FILE).unwrap();
    let (older, newest) = (reader.claim_slot(1).unwrap(), reader.claim_slot(2).unwrap());
    older.begin(9, 4096);
    newest.begin(10, 4096);
    // Both processes died inside their transactions: their locks are gone, their words stay.
    let (older, newest) = (older.index(), newest.index());
    for index in [older, newest] {
        ofd::unlock(&reader.shared.file, slot_lock_byte(index), 1).unwrap();
    }
    let mut live = Vec::new();
    table.live_readers(&mut live, 10).unwrap();
    let listed: Vec<(usize, Option<u64>)> = live.iter().map(|s| (s.index, s.txid)).collect();
    assert_eq!(listed, [(newest, Some(10))]);
    let txid_word = |index| table.slot_word(index, S_TXID).load(Ordering::SeqCst);
    assert_eq!(txid_word(older), 0, "the older dead slot is cleared");
    assert_eq!(txid_word(newest), 11, "the newest is left as it is");
    // Once the writer's newest txid passes it, the dead slot is checked and cleared too.
    live.clear();
    table.live_readers(&mut live, 11).unwrap();
    assert!(live.is_empty(), "{live:?}");
    assert_eq!(txid_word(newest), 0);
}

/// A live slot whose process id is not seen from here (a child in another PID namespace, or
/// one that inherited the descriptor) is listed, with `pid_seen` false.
#[test]
fn a_live_slot_of_a_pid_not_seen_from_here_is_listed_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let table = writer(dir.path());
    let reader = ReaderTable::open_for_reader(&dir.path().join("db"), DB_FILE).unwrap();
    let ours = reader.claim_slot(1).unwrap();
    let theirs = reader.claim_slot(2).unwrap();
    // Above Linux's largest possible process id (2^22).
    let unseen: u32 = 0x3fff_fff0;
    reader
        .slot_word(theirs.index(), S_PID)
        .store(u64::from(unseen), Ordering::SeqCst);
    let slots: Vec<(usize, u32, bool)> = table
        .slots()
        .unwrap()
        .iter()
        .map(|s| (s.index, s.pid, s.pid_seen))
        .collect();
    assert_eq!(
        slots,
        [
            (ours.index(), std::process::id(), true),
            (theirs.index(), unseen, false)
        ]
    );
}

/// A lock call that fails for another reason than a holder (here a write lock through a
/// descriptor opened read-only) is an error, not a slot taken as held by someone.
#[test]
fn a_failed_lock_call_is_an_error_not_a_held_lock() {
    let dir = tempfile::tempdir().unwrap();
    let _table = writer(dir.path());
    let read_only = File::open(lock_file_path(&dir.path().join("db"))).unwrap();
    let error = ofd::try_lock(&read_only, slot_lock_byte(5), 1).unwrap_err();
    assert_eq!(error.raw_os_error(), Some(libc::EBADF), "{error}");
}
