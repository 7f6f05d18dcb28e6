//! The storage seam: `FileStorage` against a real file, `SimFile`'s durability model, crash
//! images and fault plans.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use rbolt_storage::{
    CrashProfile, FaultError, FaultPlan, FileOptions, FileStorage, IOV_MAX, Mapping, OpCounts,
    OpKind, OpenError, SECTOR_SIZE, SimFile, Storage,
};

const ENOSPC: i32 = 28;
const EIO: i32 = 5;

fn temp_path() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("db");
    (dir, path)
}

fn open(path: &Path, options: FileOptions) -> FileStorage {
    FileStorage::open(path, options).unwrap()
}

fn read(storage: &dyn Storage, offset: u64, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    storage.read_exact_at(&mut buf, offset).unwrap();
    buf
}

/// Buffers of lengths 0..=6 cycling, with distinct contents, and their concatenation.
fn many_buffers(n: usize) -> (Vec<Vec<u8>>, Vec<u8>) {
    let bufs: Vec<Vec<u8>> = (0..n)
        .map(|i| (0..i % 7).map(|j| (i * 7 + j) as u8).collect())
        .collect();
    let concatenated = bufs.concat();
    (bufs, concatenated)
}

/// The same behaviour from every Storage, whatever is behind it.
fn check_round_trip(storage: &dyn Storage) {
    assert!(storage.is_empty().unwrap());
    storage.write_all_at(b"hello", 0).unwrap();
    storage.write_all_at(b"world", 4096).unwrap();
    assert_eq!(storage.len().unwrap(), 4101);
    assert_eq!(read(storage, 0, 5), b"hello");
    assert_eq!(read(storage, 4096, 5), b"world");
    // The gap reads as zeros.
    assert_eq!(read(storage, 5, 4091), vec![0; 4091]);

    let mut past_end = [0u8; 10];
    let error = storage.read_exact_at(&mut past_end, 4096).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::UnexpectedEof);

    storage.write_vectored_at(&[b"ab", b"", b"cd"], 1).unwrap();
    assert_eq!(read(storage, 0, 6), b"habcd\0");
    storage.sync_data().unwrap();
    storage.sync_all().unwrap();
}

fn check_vectored_across_iov_max(storage: &dyn Storage) {
    let n = IOV_MAX * 2 + 500;
    let (bufs, expected) = many_buffers(n);
    let slices: Vec<&[u8]> = bufs.iter().map(Vec::as_slice).collect();
    storage.write_vectored_at(&slices, 100).unwrap();
    assert_eq!(storage.len().unwrap(), 100 + expected.len() as u64);
    assert_eq!(read(storage, 100, expected.len()), expected);
    assert_eq!(read(storage, 0, 100), vec![0; 100]);
}

fn check_map_sees_later_writes(storage: &dyn Storage) {
    storage.grow(8192).unwrap();
    let mapping = storage.map(1 << 20).unwrap();
    assert_eq!(mapping.len(), 1 << 20);
    mapping.advise_random().unwrap();
    storage.write_all_at(b"after mapping", 100).unwrap();
    assert_eq!(&mapping[100..113], b"after mapping");
    // Growth into the reserved address space shows through the same mapping.
    storage.grow(16384).unwrap();
    storage
        .write_vectored_at(&[b"grown ", b"into"], 12000)
        .unwrap();
    assert_eq!(&mapping[12000..12010], b"grown into");
    mapping.lock(16384).unwrap();
    mapping.unlock().unwrap();
    assert_eq!(&mapping[..1], &[0]);
}

// ---------------------------------------------------------------------------------------------
// FileStorage

#[test]
fn file_storage_round_trip() {
    let (_dir, path) = temp_path();
    let storage = open(&path, FileOptions::new());
    assert_eq!(storage.path(), Some(path.as_path()));
    check_round_trip(&storage);
}

#[test]
fn file_storage_creates_with_mode_and_reopens() {
    let (_dir, path) = temp_path();
    {
        let storage = open(&path, FileOptions::new());
        storage.write_all_at(b"kept", 0).unwrap();
        storage.sync_data().unwrap();
    }
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600, "mode {mode:o}");
    let storage = open(&path, FileOptions::new().create(false));
    assert_eq!(read(&storage, 0, 4), b"kept");
}

#[test]
fn file_storage_open_missing_without_create_fails() {
    let (_dir, path) = temp_path();
    for options in [
        FileOptions::new().create(false),
        // A read-only open never creates the file.
        FileOptions::new().read_only(true).create(true),
    ] {
        match FileStorage::open(&path, options) {
            Err(OpenError::Open {
                path: reported,
                source,
            }) => {
                assert_eq!(reported, path);
                assert_eq!(source.kind(), io::ErrorKind::NotFound);
            }
            other => panic!("expected OpenError::Open, got {other:?}"),
        }
        assert!(!path.exists());
    }
}

#[test]
fn file_storage_vectored_writes_across_iov_max() {
    let (_dir, path) = temp_path();
    check_vectored_across_iov_max(&open(&path, FileOptions::new()));
}

#[test]
fn file_storage_grow_never_shrinks() {
    let (_dir, path) = temp_path();
    let storage = open(&path, FileOptions::new());
    storage.grow(8192).unwrap();
    assert_eq!(storage.len().unwrap(), 8192);
    storage.grow(4096).unwrap();
    assert_eq!(storage.len().unwrap(), 8192);
    storage.write_all_at(&[7; 100], 10_000).unwrap();
    storage.grow(9000).unwrap();
    storage.grow(0).unwrap();
    assert_eq!(storage.len().unwrap(), 10_100);
    assert_eq!(read(&storage, 10_000, 100), vec![7; 100]);
    storage.grow(1 << 20).unwrap();
    assert_eq!(storage.len().unwrap(), 1 << 20);
    assert_eq!(read(&storage, 10_000, 100), vec![7; 100]);
}

#[test]
fn file_storage_shrink_never_grows() {
    let (_dir, path) = temp_path();
    let storage = open(&path, FileOptions::new());
    storage.write_all_at(&[7; 10_000], 0).unwrap();
    storage.shrink(20_000).unwrap();
    assert_eq!(storage.len().unwrap(), 10_000);
    storage.shrink(4096).unwrap();
    assert_eq!(storage.len().unwrap(), 4096);
    assert_eq!(read(&storage, 0, 4096), vec![7; 4096]);
    storage.sync_data().unwrap();
    // Read-only storage refuses, untouched.
    drop(storage);
    let reader = open(&path, FileOptions::new().read_only(true));
    let error = reader.shrink(0).unwrap_err();
    assert_eq!(error.kind(), io::ErrorKind::PermissionDenied);
    assert_eq!(reader.len().unwrap(), 4096);
}

#[test]
fn file_storage_map_sees_later_writes() {
    let (_dir, path) = temp_path();
    check_map_sees_later_writes(&open(&path, FileOptions::new()));
}

#[test]
fn file_storage_read_only_rejects_writes_without_touching_the_file() {
    let (_dir, path) = temp_path();
    open(&path, FileOptions::new())
        .write_all_at(b"original", 0)
        .unwrap();
    let storage = open(&path, FileOptions::new().read_only(true));
    assert!(storage.is_read_only());
    let attempts: [(&str, io::Result<()>); 5] = [
        ("write_all_at", storage.write_all_at(b"changed", 0)),
        (
            "write_vectored_at",
            storage.write_vectored_at(&[b"changed"], 0),
        ),
        ("grow", storage.grow(1 << 20)),
        ("sync_data", storage.sync_data()),
        ("sync_all", storage.sync_all()),
    ];
    for (name, result) in attempts {
        let error = result.expect_err(name);
        assert_eq!(
            error.kind(),
            io::ErrorKind::PermissionDenied,
            "{name}: {error}"
        );
    }
    assert_eq!(storage.len().unwrap(), 8);
    assert_eq!(read(&storage, 0, 8), b"original");
    // Reading through a mapping works read-only.
    assert_eq!(&storage.map(8).unwrap()[..], b"original");
}

/// Takes `flock` on `path` through a descriptor of its own, as another process (bbolt, say)
/// would: the lock `FileStorage` must wait for. (Two `FileStorage`s of one process refuse each
/// other at once instead; see `file_storage_refuses_a_second_open_in_the_process`.)
fn foreign_lock(path: &Path, exclusive: bool) -> std::fs::File {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(path)
        .unwrap();
    let operation = if exclusive {
        rustix::fs::FlockOperation::LockExclusive
    } else {
        rustix::fs::FlockOperation::LockShared
    };
    rustix::fs::flock(&file, operation).unwrap();
    file
}

#[test]
fn file_storage_refuses_a_second_open_in_the_process() {
    let (_dir, path) = temp_path();
    let already = |result: Result<FileStorage, OpenError>| {
        assert!(
            matches!(&result, Err(OpenError::AlreadyOpen { .. })),
            "{result:?}"
        );
        assert_eq!(
            io::Error::from(result.unwrap_err()).kind(),
            io::ErrorKind::ResourceBusy
        );
    };
    let writer = open(&path, FileOptions::new());
    // No timeout would wait for ever on the process's own lock: it fails at once instead.
    already(FileStorage::open(&path, FileOptions::new()));
    already(FileStorage::open(&path, FileOptions::new().read_only(true)));
    drop(writer);
    let reader = open(&path, FileOptions::new().read_only(true));
    let second_reader = open(&path, FileOptions::new().read_only(true));
    already(FileStorage::open(&path, FileOptions::new()));
    drop((reader, second_reader));
    // Another name for the same file is the same file.
    let link = path.with_extension("link");
    std::fs::hard_link(&path, &link).unwrap();
    let writer = open(&path, FileOptions::new());
    already(FileStorage::open(&link, FileOptions::new()));
    drop(writer);
    open(&link, FileOptions::new());
}

fn expect_lock_timeout(result: Result<FileStorage, OpenError>, timeout: Duration) {
    match result {
        Err(error @ OpenError::LockTimeout { .. }) => {
            assert!(error.is_lock_timeout());
            assert!(matches!(error, OpenError::LockTimeout { timeout: t, .. } if t == timeout));
            assert_eq!(io::Error::from(error).kind(), io::ErrorKind::TimedOut);
        }
        other => panic!("expected a lock timeout, got {other:?}"),
    }
}

#[test]
fn file_storage_exclusive_lock_times_out() {
    let (_dir, path) = temp_path();
    let _holder = foreign_lock(&path, true);
    let timeout = Duration::from_millis(50);
    let start = Instant::now();
    expect_lock_timeout(
        FileStorage::open(&path, FileOptions::new().lock_timeout(Some(timeout))),
        timeout,
    );
    let waited = start.elapsed();
    assert!(waited >= timeout, "gave up after {waited:?}");
    assert!(waited < Duration::from_millis(1000), "waited {waited:?}");

    // Zero tries once; shared waits for an exclusive holder too.
    let start = Instant::now();
    expect_lock_timeout(
        FileStorage::open(&path, FileOptions::new().lock_timeout(Some(Duration::ZERO))),
        Duration::ZERO,
    );
    expect_lock_timeout(
        FileStorage::open(
            &path,
            FileOptions::new()
                .read_only(true)
                .lock_timeout(Some(Duration::ZERO)),
        ),
        Duration::ZERO,
    );
    assert!(start.elapsed() < Duration::from_millis(500));
}

#[test]
fn file_storage_shared_locks_coexist_and_exclude_a_writer() {
    let (_dir, path) = temp_path();
    drop(open(&path, FileOptions::new()));
    let read_only = FileOptions::new()
        .read_only(true)
        .lock_timeout(Some(Duration::ZERO));
    // A FileStorage reader shares the file with another process's reader...
    let first = foreign_lock(&path, false);
    drop(open(&path, read_only));
    let second = foreign_lock(&path, false);
    // ...and a writer waits for them.
    expect_lock_timeout(
        FileStorage::open(&path, FileOptions::new().lock_timeout(Some(Duration::ZERO))),
        Duration::ZERO,
    );
    drop((first, second));
    // Once the readers are gone the writer gets the lock.
    open(
        &path,
        FileOptions::new().lock_timeout(Some(Duration::from_millis(500))),
    );
}

#[test]
fn file_storage_lock_released_on_drop_wakes_a_waiter() {
    let (_dir, path) = temp_path();
    let holder = foreign_lock(&path, true);
    let hold = Duration::from_millis(100);
    let start = Instant::now();
    let releaser = thread::spawn(move || {
        thread::sleep(hold);
        drop(holder);
    });
    // No timeout: waits as long as it takes.
    let storage = open(&path, FileOptions::new());
    let waited = start.elapsed();
    releaser.join().unwrap();
    assert!(
        waited >= hold,
        "got the lock after {waited:?}, while it was held"
    );
    storage.write_all_at(b"mine", 0).unwrap();
    drop(storage);

    // And with a timeout longer than the hold, the polling path gets it too.
    let holder = foreign_lock(&path, true);
    let start = Instant::now();
    let releaser = thread::spawn(move || {
        thread::sleep(hold);
        drop(holder);
    });
    open(
        &path,
        FileOptions::new().lock_timeout(Some(Duration::from_secs(5))),
    );
    assert!(start.elapsed() >= hold);
    releaser.join().unwrap();
}

#[test]
fn storages_are_object_safe_and_shareable() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Mapping>();
    send_sync::<SimFile>();
    send_sync::<FileStorage>();
    let (_dir, path) = temp_path();
    let storages: Vec<Arc<dyn Storage>> = vec![
        Arc::new(open(&path, FileOptions::new())),
        Arc::new(SimFile::new().unwrap()),
    ];
    for storage in storages {
        let mapping = {
            storage.write_all_at(&[1; 4096], 0).unwrap();
            storage.map(4096).unwrap()
        };
        let reader = thread::spawn(move || mapping.iter().map(|&b| u64::from(b)).sum::<u64>());
        assert_eq!(reader.join().unwrap(), 4096);
    }
}

// ---------------------------------------------------------------------------------------------
// SimFile as a Storage

#[test]
fn sim_round_trip() {
    let sim = SimFile::new().unwrap();
    assert_eq!(sim.path(), None);
    check_round_trip(&sim);
}

#[test]
fn sim_vectored_writes_across_iov_max_are_one_pending_write() {
    let sim = SimFile::new().unwrap();
    check_vectored_across_iov_max(&sim);
    assert_eq!(sim.counts().write_vectored, 1);
    let live = sim.live_image().unwrap();
    // One write: a crash keeps it whole or drops it whole.
    for seed in 0..64 {
        let image = sim.crash_image(CrashProfile::Random, seed);
        assert!(image == live || image.is_empty(), "seed {seed}");
    }
    assert_eq!(sim.crash_image(CrashProfile::KeepAll, 0), live);
}

#[test]
fn sim_map_sees_later_writes() {
    check_map_sees_later_writes(&SimFile::new().unwrap());
}

// ---------------------------------------------------------------------------------------------
// SimFile durability and crash images

#[test]
fn sim_sync_makes_pending_operations_durable() {
    let sim = SimFile::new().unwrap();
    sim.write_all_at(b"first", 0).unwrap();
    assert!(sim.has_pending());
    assert_eq!(sim.durable_image(), b"");
    sim.sync_data().unwrap();
    assert!(!sim.has_pending());
    assert_eq!(sim.durable_image(), b"first");

    sim.write_all_at(b"FI", 0).unwrap();
    sim.grow(10).unwrap();
    assert_eq!(sim.durable_image(), b"first");
    assert_eq!(sim.live_image().unwrap(), b"FIrst\0\0\0\0\0");
    assert_eq!(sim.crash_image(CrashProfile::DropAll, 1), b"first");
    assert_eq!(
        sim.crash_image(CrashProfile::KeepAll, 1),
        b"FIrst\0\0\0\0\0"
    );

    sim.sync_all().unwrap();
    assert_eq!(sim.durable_image(), b"FIrst\0\0\0\0\0");
    for profile in CrashProfile::ALL {
        assert_eq!(
            sim.crash_image(profile, 3),
            b"FIrst\0\0\0\0\0",
            "{profile:?}"
        );
    }
}

/// A durable image of 8 sectors and two pending writes that touch sectors 1-2 and 6-9 (the
/// second extends the file by two sectors). Returns the file and the four images keeping
/// neither, the first, the second, or both writes.
fn two_pending_writes() -> (SimFile, [Vec<u8>; 4]) {
    let sector = SECTOR_SIZE as usize;
    let durable: Vec<u8> = (0..8 * sector).map(|i| (i / sector) as u8 | 0x80).collect();
    let sim = SimFile::from_image(durable.clone()).unwrap();
    let first = vec![0x11; 2 * sector];
    let second = vec![0x22; 4 * sector];
    sim.write_all_at(&first, SECTOR_SIZE).unwrap();
    sim.write_vectored_at(&[&second[..sector], &second[sector..]], 6 * SECTOR_SIZE)
        .unwrap();

    let apply = |image: &mut Vec<u8>, offset: usize, bytes: &[u8]| {
        if image.len() < offset + bytes.len() {
            image.resize(offset + bytes.len(), 0);
        }
        image[offset..offset + bytes.len()].copy_from_slice(bytes);
    };
    let mut with_first = durable.clone();
    apply(&mut with_first, sector, &first);
    let mut with_second = durable.clone();
    apply(&mut with_second, 6 * sector, &second);
    let mut with_both = with_first.clone();
    apply(&mut with_both, 6 * sector, &second);
    assert_eq!(sim.live_image().unwrap(), with_both);
    (sim, [durable, with_first, with_second, with_both])
}

/// The sectors of `image` that equal neither the durable nor the live image's.
fn foreign_sectors(image: &[u8], durable: &[u8], live: &[u8]) -> Vec<usize> {
    let sector = SECTOR_SIZE as usize;
    let at = |bytes: &[u8], i: usize| bytes.get(i * sector..(i + 1) * sector).map(<[u8]>::to_vec);
    let zeros = vec![0u8; sector];
    (0..image.len().div_ceil(sector))
        .filter(|&i| {
            let got = at(image, i).unwrap();
            // Past the durable end, a dropped sector reads as zeros.
            let old = at(durable, i).unwrap_or_else(|| zeros.clone());
            got != old && Some(got) != at(live, i)
        })
        .collect()
}

#[test]
fn sim_crash_profiles_stay_within_their_sets() {
    let (sim, [durable, with_first, with_second, with_both]) = two_pending_writes();
    let live = with_both.clone();
    let whole = [&durable, &with_first, &with_second, &with_both];
    // Sectors no pending write touched: 0, 3, 4, 5.
    let untouched = [0, 3, 4, 5];
    let sector = SECTOR_SIZE as usize;
    let seeds = 0..300;

    for seed in seeds.clone() {
        assert_eq!(sim.crash_image(CrashProfile::KeepAll, seed), live);
        assert_eq!(sim.crash_image(CrashProfile::DropAll, seed), durable);
    }

    let mut seen = [false; 4];
    for seed in seeds.clone() {
        let image = sim.crash_image(CrashProfile::Random, seed);
        let found = whole.iter().position(|&w| *w == image);
        seen[found.unwrap_or_else(|| panic!("seed {seed}: not a whole-write image"))] = true;
    }
    assert_eq!(seen, [true; 4], "Random should reach every combination");

    let mut torn_seen = false;
    for seed in seeds.clone() {
        let image = sim.crash_image(CrashProfile::Torn, seed);
        assert_eq!(
            image,
            sim.crash_image(CrashProfile::Torn, seed),
            "seed {seed}: not reproducible"
        );
        assert!(
            image.len() == durable.len() || image.len() == live.len(),
            "seed {seed}"
        );
        let foreign = foreign_sectors(&image, &durable, &live);
        assert!(
            foreign.is_empty(),
            "seed {seed}: sectors {foreign:?} are from neither image"
        );
        torn_seen |= !whole.contains(&&image);
    }
    assert!(torn_seen, "Torn never tore a write");

    let mut garbage_seen = false;
    for seed in seeds {
        let image = sim.crash_image(CrashProfile::Garbage, seed);
        assert_eq!(
            image,
            sim.crash_image(CrashProfile::Garbage, seed),
            "seed {seed}: not reproducible"
        );
        assert!(
            image.len() == durable.len() || image.len() == live.len(),
            "seed {seed}"
        );
        for i in untouched {
            let range = i * sector..(i + 1) * sector;
            assert_eq!(
                image[range.clone()],
                durable[range],
                "seed {seed}: sector {i}"
            );
        }
        garbage_seen |= !foreign_sectors(&image, &durable, &live).is_empty();
    }
    assert!(garbage_seen, "Garbage never garbled a sector");
}

/// Asserts the lengths crash images of `sim` take over 64 seeds: `kept` when every pending
/// length change survives, `dropped` when none does, either one under the other profiles.
fn assert_crash_lengths(sim: &SimFile, kept: usize, dropped: usize) {
    for profile in CrashProfile::ALL {
        let mut lens: Vec<usize> = (0..64)
            .map(|seed| sim.crash_image(profile, seed).len())
            .collect();
        lens.sort_unstable();
        lens.dedup();
        let mut expected = match profile {
            CrashProfile::KeepAll => vec![kept],
            CrashProfile::DropAll => vec![dropped],
            _ => vec![kept, dropped],
        };
        expected.sort_unstable();
        assert_eq!(lens, expected, "{profile:?}");
    }
}

#[test]
fn sim_dropped_growth_leaves_the_file_short() {
    let sim = SimFile::new().unwrap();
    sim.write_all_at(&[1; 4096], 0).unwrap();
    sim.sync_data().unwrap();
    sim.grow(16384).unwrap();
    // Growing to a smaller length changes nothing and records nothing.
    sim.grow(100).unwrap();
    assert_eq!(sim.len().unwrap(), 16384);
    assert_eq!(sim.crash_image(CrashProfile::DropAll, 0).len(), 4096);
    assert_eq!(sim.crash_image(CrashProfile::KeepAll, 0).len(), 16384);
    assert_crash_lengths(&sim, 16384, 4096);
}

#[test]
fn sim_lost_truncation_keeps_the_old_length() {
    let sim = SimFile::new().unwrap();
    sim.write_all_at(&[1; 16384], 0).unwrap();
    sim.sync_data().unwrap();
    sim.shrink(4096).unwrap();
    // Shrinking to a larger length changes nothing and records nothing.
    sim.shrink(8192).unwrap();
    assert_eq!(sim.len().unwrap(), 4096);
    assert_eq!(sim.live_image().unwrap(), vec![1; 4096]);
    assert!(sim.has_pending());
    assert_crash_lengths(&sim, 4096, 16384);
    // A lost truncation keeps the old bytes too, not zeros.
    assert_eq!(sim.crash_image(CrashProfile::DropAll, 0), vec![1; 16384]);
    // Synced, the truncation is durable under every profile.
    sim.sync_data().unwrap();
    assert_eq!(sim.durable_image().len(), 4096);
    for profile in CrashProfile::ALL {
        assert_eq!(sim.crash_image(profile, 3).len(), 4096, "{profile:?}");
    }
    // A growth after a kept shrink reads zeros where the cut bytes were.
    sim.grow(8192).unwrap();
    let image = sim.crash_image(CrashProfile::KeepAll, 0);
    assert_eq!(&image[..4096], &[1; 4096][..]);
    assert_eq!(&image[4096..], &[0; 4096][..]);
}

#[test]
fn sim_from_image_round_trip_and_crash_during_recovery() {
    let image: Vec<u8> = (0..3000u32).map(|i| (i * 31 % 251) as u8).collect();
    let sim = SimFile::from_image(image.clone()).unwrap();
    assert_eq!(sim.len().unwrap(), 3000);
    assert_eq!(read(&sim, 0, 3000), image);
    assert_eq!(sim.durable_image(), image);
    assert_eq!(sim.live_image().unwrap(), image);
    assert_eq!(&sim.map(3000).unwrap()[..], &image[..]);
    for profile in CrashProfile::ALL {
        assert_eq!(sim.crash_image(profile, 9), image, "{profile:?}");
    }

    // Recovery writes, then crashes again before syncing.
    sim.write_all_at(b"recovering", 0).unwrap();
    sim.crash();
    assert!(sim.write_all_at(b"more", 0).is_err());
    assert_eq!(sim.crash_image(CrashProfile::DropAll, 0), image);
    let reopened = SimFile::from_image(sim.crash_image(CrashProfile::KeepAll, 0)).unwrap();
    let mut expected = image.clone();
    expected[..10].copy_from_slice(b"recovering");
    assert_eq!(read(&reopened, 0, 3000), expected);
    assert_eq!(reopened.op_count(), 1);
}

#[test]
fn sim_mapping_is_coherent_with_writes() {
    let sim = SimFile::from_image(vec![0xEE; 8192]).unwrap();
    let before = sim.map(8192).unwrap();
    let copy = sim.clone();
    copy.write_all_at(b"shared handle", 4096).unwrap();
    let after = sim.map(8192).unwrap();
    assert_eq!(&before[4096..4109], b"shared handle");
    assert_eq!(&before[..], &after[..]);
    // A crash image does not change what the mapping shows.
    let _ = sim.crash_image(CrashProfile::Garbage, 5);
    assert_eq!(&before[4096..4109], b"shared handle");
}

// ---------------------------------------------------------------------------------------------
// SimFile faults, crashes and counters

/// One call of each kind, in a form that can be run against any SimFile.
fn call(sim: &SimFile, kind: OpKind) -> io::Result<()> {
    match kind {
        OpKind::Len => sim.len().map(drop),
        OpKind::Read => sim.read_exact_at(&mut [0; 4], 0),
        OpKind::Write => sim.write_all_at(b"wxyz", 0),
        OpKind::WriteVectored => sim.write_vectored_at(&[b"wx", b"yz"], 4),
        OpKind::SyncData => sim.sync_data(),
        OpKind::SyncAll => sim.sync_all(),
        OpKind::Grow => sim.grow(sim.live_image().unwrap().len() as u64 + 512),
        OpKind::Map => sim.map(4096).map(drop),
        OpKind::Shrink => sim.shrink(sim.live_image().unwrap().len().saturating_sub(1) as u64),
        other => panic!("no call for {other:?}"),
    }
}

const ALL_KINDS: [OpKind; 9] = [
    OpKind::Len,
    OpKind::Read,
    OpKind::Write,
    OpKind::WriteVectored,
    OpKind::SyncData,
    OpKind::SyncAll,
    OpKind::Grow,
    OpKind::Map,
    OpKind::Shrink,
];

#[test]
fn sim_fault_fires_at_exactly_op_n_for_every_kind() {
    for kind in ALL_KINDS {
        for error in [FaultError::NoSpace, FaultError::Io] {
            let sim = SimFile::from_image(vec![0; 16]).unwrap();
            let n = sim.op_count() + 2;
            sim.set_fault_plan(FaultPlan::new().fail_at(n, error));
            call(&sim, kind).unwrap();
            call(&sim, kind).unwrap();
            let before = (
                sim.live_image().unwrap(),
                sim.durable_image(),
                sim.has_pending(),
            );
            let failed = call(&sim, kind).expect_err("op n must fail");
            let expected = if error == FaultError::NoSpace {
                ENOSPC
            } else {
                EIO
            };
            assert_eq!(failed.raw_os_error(), Some(expected), "{kind:?}");
            // A failed operation does nothing.
            let after = (
                sim.live_image().unwrap(),
                sim.durable_image(),
                sim.has_pending(),
            );
            assert_eq!(
                before, after,
                "{kind:?} changed the file although it failed"
            );
            call(&sim, kind).unwrap();
            assert_eq!(sim.op_count(), n + 2);
            assert_eq!(sim.op_log(), vec![kind; 4]);
        }
    }
}

#[test]
fn sim_fail_from_fails_every_later_operation() {
    let sim = SimFile::new().unwrap();
    sim.write_all_at(b"ok", 0).unwrap();
    sim.set_fault_plan(FaultPlan::new().fail_from(sim.op_count() + 1, FaultError::Io));
    sim.len().unwrap();
    for kind in ALL_KINDS.into_iter().chain(ALL_KINDS) {
        assert_eq!(
            call(&sim, kind).unwrap_err().raw_os_error(),
            Some(EIO),
            "{kind:?}"
        );
    }
    // Lifting the plan lets operations through again.
    sim.set_fault_plan(FaultPlan::new());
    assert_eq!(sim.len().unwrap(), 2);
}

#[test]
fn sim_short_write_writes_a_prefix_then_fails() {
    for kind in [OpKind::Write, OpKind::WriteVectored] {
        let sim = SimFile::new().unwrap();
        let data: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
        sim.set_fault_plan(FaultPlan::new().short_write_at(0, 1000, FaultError::NoSpace));
        let result = match kind {
            OpKind::Write => sim.write_all_at(&data, 0),
            _ => sim.write_vectored_at(&[&data[..600], &data[600..]], 0),
        };
        assert_eq!(result.unwrap_err().raw_os_error(), Some(ENOSPC), "{kind:?}");
        assert_eq!(sim.live_image().unwrap(), &data[..1000], "{kind:?}");
        // The prefix is pending like any write.
        assert_eq!(sim.crash_image(CrashProfile::KeepAll, 0), &data[..1000]);
        assert_eq!(sim.crash_image(CrashProfile::DropAll, 0), b"");
    }
    // On anything but a write it is a plain failure.
    let sim = SimFile::new().unwrap();
    sim.set_fault_plan(FaultPlan::new().short_write_at(0, 10, FaultError::Io));
    assert_eq!(sim.sync_data().unwrap_err().raw_os_error(), Some(EIO));
}

#[test]
fn sim_crash_freezes_the_image() {
    let sim = SimFile::new().unwrap();
    sim.write_all_at(b"synced", 0).unwrap();
    sim.sync_data().unwrap();
    sim.write_all_at(b"SY", 0).unwrap();
    let n = sim.op_count();
    sim.set_fault_plan(FaultPlan::new().crash_at(n));
    assert!(sim.write_all_at(b"lost", 0).is_err());
    assert_eq!(sim.crashed_at(), Some(n));
    for kind in ALL_KINDS {
        assert!(call(&sim, kind).is_err(), "{kind:?} after the crash");
    }
    // Lifting the plan does not undo the crash.
    sim.set_fault_plan(FaultPlan::new());
    assert!(sim.sync_data().is_err());
    assert_eq!(sim.op_count(), n + 2 + ALL_KINDS.len() as u64);

    assert_eq!(sim.durable_image(), b"synced");
    assert_eq!(sim.live_image().unwrap(), b"SYnced");
    assert_eq!(sim.crash_image(CrashProfile::KeepAll, 0), b"SYnced");
    assert_eq!(sim.crash_image(CrashProfile::DropAll, 0), b"synced");
}

/// A small commit: data pages written in one vectored call after growing, fdatasync, meta
/// written, fdatasync.
fn commit(storage: &dyn Storage, tx: u8) -> io::Result<()> {
    let page = [tx; 1024];
    storage.grow(4096 * (u64::from(tx) + 2))?;
    storage.sync_all()?;
    storage.write_vectored_at(&[&page, &page], 4096 * (u64::from(tx) + 1))?;
    storage.sync_data()?;
    storage.write_all_at(&[tx; 16], u64::from(tx % 2) * 16)?;
    storage.sync_data()
}

#[test]
fn sim_crash_at_every_point_reflects_exactly_the_earlier_operations() {
    let reference = SimFile::new().unwrap();
    for tx in 1..=3 {
        commit(&reference, tx).unwrap();
    }
    let total = reference.op_count();
    assert_eq!(total, 18);
    for n in 0..=total {
        let crashed = SimFile::new().unwrap();
        crashed.set_fault_plan(FaultPlan::new().crash_at(n));
        let results: Vec<io::Result<()>> = (1..=3).map(|tx| commit(&crashed, tx)).collect();
        assert_eq!(
            results.iter().all(Result::is_ok),
            n == total,
            "crash at {n}"
        );

        // Replay the first n operations of the reference run on a file that never crashes.
        let replay = SimFile::new().unwrap();
        replay.set_fault_plan(FaultPlan::new().fail_from(n, FaultError::Io));
        for tx in 1..=3 {
            let _ = commit(&replay, tx);
        }
        assert_eq!(crashed.crashed_at(), (n < total).then_some(n));
        assert_eq!(
            crashed.durable_image(),
            replay.durable_image(),
            "crash at {n}"
        );
        for profile in CrashProfile::ALL {
            for seed in 0..4 {
                assert_eq!(
                    crashed.crash_image(profile, seed),
                    replay.crash_image(profile, seed),
                    "crash at {n}, {profile:?}, seed {seed}"
                );
            }
        }
    }
}

#[test]
fn sim_counts_every_call_by_kind() {
    let sim = SimFile::new().unwrap();
    sim.len().unwrap();
    let start = sim.counts();
    commit(&sim, 1).unwrap();
    let commit_counts = sim.counts().since(start);
    assert_eq!(
        commit_counts.sync_data, 2,
        "a durable commit makes exactly two fdatasyncs"
    );
    assert_eq!(commit_counts.sync_all, 1);
    assert_eq!(commit_counts.syncs(), 3);
    assert_eq!(commit_counts.write_vectored, 1);
    assert_eq!(commit_counts.write, 1);
    assert_eq!(commit_counts.writes(), 2);
    assert_eq!(commit_counts.grow, 1);
    assert_eq!(commit_counts.total(), 6);

    // Failed calls count too.
    sim.set_fault_plan(FaultPlan::new().fail_from(0, FaultError::Io));
    for kind in ALL_KINDS {
        let _ = call(&sim, kind);
    }
    let counts = sim.counts();
    assert_eq!(counts.since(counts), OpCounts::default());
    assert_eq!(
        [
            counts.len,
            counts.read,
            counts.write,
            counts.write_vectored,
            counts.sync_data
        ],
        [2, 1, 2, 2, 3]
    );
    assert_eq!([counts.sync_all, counts.grow, counts.map], [2, 2, 1]);
    assert_eq!(counts.total(), sim.op_count());
    let log = sim.op_log();
    assert_eq!(log[0], OpKind::Len);
    assert_eq!(log[log.len() - ALL_KINDS.len()..], ALL_KINDS);
}

/// The filesystems the tests run on: the temporary directory's, and tmpfs where there is one;
/// with whether it is tmpfs.
fn dirs_and_tmpfs() -> Vec<(tempfile::TempDir, bool)> {
    let mut dirs = vec![(tempfile::tempdir().unwrap(), false)];
    if Path::new("/dev/shm").is_dir()
        && let Ok(dir) = tempfile::tempdir_in("/dev/shm")
    {
        dirs.push((dir, true));
    }
    dirs
}

/// `read_durable` reads the device past the page cache (`O_DIRECT`) where there is one: on the
/// disk the tests run on it sees what was written and synced.
#[test]
fn read_durable_reads_the_device() {
    for (dir, tmpfs) in dirs_and_tmpfs() {
        let storage = open(&dir.path().join("file"), FileOptions::new());
        storage.write_all_at(&[9; 8192], 0).unwrap();
        storage.sync_data().unwrap();
        let mut buf = [0u8; 100];
        // Across a 4 KiB boundary: never told.
        assert!(!storage.read_durable(&mut buf, 4090).unwrap(), "{dir:?}");
        let told = storage.read_durable(&mut buf, 4096 + 100).unwrap();
        let linux = cfg!(target_os = "linux") && rbolt_storage::LINUX_CALLS;
        // tmpfs, which has no device, takes `O_DIRECT` since Linux 6.6 (its memory is what it
        // holds) and refuses it before.
        if linux && !tmpfs {
            assert!(told, "{dir:?}");
        } else if !linux {
            assert!(!told, "{dir:?}");
        }
        if told {
            assert_eq!(buf, [9; 100], "{dir:?}");
            // Past the end of the file the device holds nothing: zeros.
            assert!(storage.read_durable(&mut buf, 3 * 4096).unwrap());
            assert_eq!(buf, [0; 100], "{dir:?}");
        }
    }
}

/// A meta is the commit point: a kill must leave it whole or not written, so it is never a
/// copy into the mapping (a kill can cut a copy at any byte), even where a rewrite of the same
/// bytes with `write_all_at` is one.
#[test]
fn whole_writes_are_never_copies() {
    for (dir, _) in dirs_and_tmpfs() {
        let storage = open(&dir.path().join("file"), FileOptions::new());
        storage.grow(16 * 4096).unwrap();
        let map = storage.map(1 << 20).unwrap();
        storage.write_all_at(&[1; 112], 0).unwrap();
        storage.write_whole_at(&[2; 112], 0).unwrap();
        storage.write_whole_at(&[3; 112], 0).unwrap();
        assert_eq!(storage.copied_bytes(), 0, "{dir:?}");
        assert_eq!(&map[..112], &[3; 112][..]);
        // The same rewrite through `write_all_at` is a copy where copies are made: the test
        // above can see one.
        storage.write_all_at(&[4; 112], 0).unwrap();
        let expected = if storage.copies_rewrites() { 112 } else { 0 };
        assert_eq!(storage.copied_bytes(), expected, "{dir:?}");
        assert_eq!(&map[..112], &[4; 112][..]);
    }
}
