//! The reader table's protocol within one process: open file description locks of two opens
//! of the lock file conflict as those of two processes do.

use super::*;

fn writer(dir: &Path) -> ReaderTable {
    ReaderTable::open_for_writer(&dir.join("db"), 0o600).unwrap()
}

#[test]
fn a_reader_attaches_only_while_a_writer_holds_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("db");
    let missing = ReaderTable::open_for_reader(&db).unwrap_err();
    assert!(
        missing.0.contains("cannot open the lock file"),
        "{}",
        missing.0
    );
    let table = writer(dir.path());
    assert_eq!(table.writer_pid(), std::process::id());
    let reader = ReaderTable::open_for_reader(&db).unwrap();
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
    let gone = ReaderTable::open_for_reader(&db).unwrap_err();
    assert!(gone.0.contains("no rbolt writer"), "{}", gone.0);
}

#[test]
fn the_writer_sees_live_slots_and_clears_dead_ones() {
    let dir = tempfile::tempdir().unwrap();
    let table = writer(dir.path());
    let reader = ReaderTable::open_for_reader(&dir.path().join("db")).unwrap();
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
    let reader = ReaderTable::open_for_reader(&db).unwrap();
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
    let reader = ReaderTable::open_for_reader(&dir.path().join("db")).unwrap();
    let slots: Vec<ClaimedSlot> = (0..READER_SLOTS as u64)
        .map(|h| reader.claim_slot(h).unwrap())
        .collect();
    let full = reader.claim_slot(999).unwrap_err();
    assert_eq!(full.kind(), io::ErrorKind::ResourceBusy);
    drop(slots);
    assert!(reader.claim_slot(999).is_ok());
}
