//! The workloads, identical for every engine: keys from a fixed seed, the same order of
//! operations, the same checks. Only the calls inside [`Engine`] differ.

use crate::engines::{Engine, Result, fail};
use rbolt_testkit::alloc::{start_counting, stop_counting};
use serde_json::{Value, json};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

pub const KEY_LEN: usize = 16;
pub const VALUE_LEN: usize = 100;
pub type Key = [u8; KEY_LEN];

/// Single-key durable commits of phase (d).
pub const COMMITS: usize = 1_000;
/// Transactions and keys per transaction of phase (e).
pub const BATCHES: usize = 1_000;
pub const BATCH_KEYS: usize = 100;
/// Keys per transaction of the delete phase (f).
pub const DELETE_TX_KEYS: usize = 10_000;
/// Gets per read transaction of the readers in phase (g).
pub const READ_TX_GETS: usize = 1_000;
/// Reader threads of phase (g).
pub const READERS: usize = 2;
/// Transactions a second of the writer in phase (g0), held to this pace for every engine:
/// below what each engine's writer makes unthrottled in (g) at N = 1M (jammdb's, durable
/// whatever it is asked, excepted). The report's labels (xtask) and docs/BENCHMARKS.md name
/// this pace; the phase records it as `txs_per_sec_target`.
pub const PACED_TXS_PER_SEC: u32 = 200;
/// Writes of the fdatasync reference measured before phase (d).
const SYNC_REFERENCE_WRITES: usize = 200;
/// Keys of the sorted load checked by lookups afterwards (not timed).
const SORTED_CHECKS: usize = 10_000;

pub struct Config {
    pub n: usize,
    pub seed: u64,
    /// Where the engine's stores go (created, emptied at the end).
    pub dir: PathBuf,
    /// How long phase (g) runs.
    pub rw: Duration,
    /// The loads (a) and (a2) commit this many keys a transaction (all N in one by default;
    /// the scale runs use 100,000, as issue 52 asks).
    pub load_tx_keys: usize,
    /// Adds the rows that depend on the file's size (`crate::scale`).
    pub scale: bool,
}

/// The workloads' generator: `rbolt-testkit`'s SplitMix64, the same stream on every machine,
/// with the draws the workloads make.
pub struct Rng(rbolt_testkit::rng::Rng);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(rbolt_testkit::rng::Rng::new(seed))
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }

    pub fn key(&mut self) -> Key {
        let mut key = [0u8; KEY_LEN];
        key[..8].copy_from_slice(&self.next_u64().to_le_bytes());
        key[8..].copy_from_slice(&self.next_u64().to_le_bytes());
        key
    }

    /// A uniform index below `n` (`n` far below 2^32, so the bias is negligible).
    pub fn below(&mut self, n: usize) -> usize {
        (((self.next_u64() >> 32) * n as u64) >> 32) as usize
    }
}

pub fn keys(seed: u64, n: usize) -> Vec<Key> {
    let mut rng = Rng::new(seed);
    (0..n).map(|_| rng.key()).collect()
}

/// A random permutation of `0..n` (Fisher-Yates).
fn permutation(seed: u64, n: usize) -> Vec<u32> {
    let mut rng = Rng::new(seed);
    let mut order: Vec<u32> = (0..n as u32).collect();
    for i in (1..n).rev() {
        order.swap(i, rng.below(i + 1));
    }
    order
}

/// The value stored under `key`: the key, then bytes derived from it, so a lookup that
/// returns another key's value fails the check.
#[inline]
pub fn value_of(key: &Key) -> [u8; VALUE_LEN] {
    let mut value = [0u8; VALUE_LEN];
    value[..KEY_LEN].copy_from_slice(key);
    for (i, byte) in value[KEY_LEN..].iter_mut().enumerate() {
        *byte = key[i % KEY_LEN] ^ (i as u8).wrapping_mul(31);
    }
    value
}

/// Peak resident set size of this process so far (`VmHWM`), in KiB.
pub fn peak_rss_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmHWM:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

/// Bytes this process has passed to write system calls so far (`wchar` in /proc/self/io):
/// with the phase deltas, how much each engine writes for the same work.
pub fn written_bytes() -> u64 {
    proc_io("wchar:")
}

/// Bytes engines have written into their files through a writable mapping so far, which
/// `wchar` does not see: an engine that does so stores its running total here after each
/// write transaction ([`note_mapped_bytes`]).
static MAPPED_BYTES: AtomicU64 = AtomicU64::new(0);

/// Records that the engine has written `total` bytes through a mapping since it opened.
pub fn note_mapped_bytes(total: u64) {
    MAPPED_BYTES.store(total, Ordering::Relaxed);
}

/// Write system calls this process has made so far (`syscw` in /proc/self/io): `write`,
/// `pwrite`, `writev` and `pwritev` each count one, whatever their size.
pub fn write_calls() -> u64 {
    proc_io("syscw:")
}

/// One counter of /proc/self/io (every thread's, the exited ones' included); 0 if unreadable.
fn proc_io(field: &str) -> u64 {
    let io = std::fs::read_to_string("/proc/self/io").unwrap_or_default();
    io.lines()
        .find_map(|line| line.strip_prefix(field))
        .and_then(|rest| rest.trim().parse().ok())
        .unwrap_or(0)
}

/// Clock ticks per second of the times in /proc/*/stat: `USER_HZ`, which the kernel fixes at
/// 100 for that interface on every architecture Linux builds this for (`getconf CLK_TCK`),
/// whatever its internal tick rate.
const USER_HZ: f64 = 100.0;

/// This process's /proc/self/stat line (every thread's figures, exited threads' included);
/// empty if unreadable.
fn read_stat() -> String {
    std::fs::read_to_string("/proc/self/stat").unwrap_or_default()
}

/// User plus system CPU time, `utime` + `stime` of a /proc/PID/stat line, in clock ticks of
/// 1/`USER_HZ` s; 0 if it is not one.
///
/// Resolution: one tick, 10 ms, for each of the two fields, so a phase's delta is good to
/// about ±20 ms; over the 1,000 transactions of (d) or (e) that is ±20 µs a transaction.
/// `getrusage(RUSAGE_SELF)` would give microseconds but needs `libc`, which this crate does
/// not depend on.
fn stat_cpu_ticks(stat: &str) -> u64 {
    stat_field(stat, 14) + stat_field(stat, 15)
}

/// `stime` of a /proc/PID/stat line, 0 if it is not one: system CPU time alone, what the
/// kernel spent for the process (for a store mostly its write and sync calls and its page
/// faults), in the ticks and with the resolution of [`stat_cpu_ticks`].
fn stat_sys_ticks(stat: &str) -> u64 {
    stat_field(stat, 15)
}

/// Field `field` (numbered from 1, as proc(5) does) of a /proc/PID/stat line as a number,
/// for a field after the command name; 0 if there is none.
fn stat_field(stat: &str, field: usize) -> u64 {
    // The command name (field 2) is in brackets and may hold spaces or brackets itself, so
    // the fields are counted from the last `)`: state is field 3, utime 14, stime 15.
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0;
    };
    field
        .checked_sub(3)
        .and_then(|index| rest.split_whitespace().nth(index))
        .and_then(|f| f.parse::<u64>().ok())
        .unwrap_or(0)
}

/// The calling thread's first two schedstat figures, in nanoseconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sched {
    /// Time on a CPU, user and system time together. The kernel brings a running thread's
    /// figure up to date at each scheduler tick and switch, so a reading lags by at most one
    /// tick (1 to 10 ms); over a phase of a second that is well under 1%.
    pub cpu_ns: u64,
    /// Time runnable but waiting for a CPU (the run queue).
    pub runq_ns: u64,
}

/// [`Sched`] of the calling thread, from /proc/thread-self/schedstat; `None` if the kernel
/// has no schedstat (`CONFIG_SCHED_INFO` off).
pub fn thread_sched() -> Option<Sched> {
    parse_schedstat(&std::fs::read_to_string("/proc/thread-self/schedstat").ok()?)
}

fn parse_schedstat(line: &str) -> Option<Sched> {
    let mut fields = line.split_whitespace().map(str::parse::<u64>);
    Some(Sched {
        cpu_ns: fields.next()?.ok()?,
        runq_ns: fields.next()?.ok()?,
    })
}

/// What the process has used so far, read at a phase's edges.
#[derive(Clone, Copy)]
struct Usage {
    written: u64,
    /// Bytes read from the disk (`read_bytes`: reads and page faults the page cache did not
    /// answer).
    read: u64,
    mapped: u64,
    write_calls: u64,
    cpu_ticks: u64,
    sys_ticks: u64,
}

impl Usage {
    fn now() -> Usage {
        // One reading of the stat line for both CPU figures.
        let stat = read_stat();
        Usage {
            written: written_bytes(),
            read: proc_io("read_bytes:"),
            mapped: MAPPED_BYTES.load(Ordering::Relaxed),
            write_calls: write_calls(),
            cpu_ticks: stat_cpu_ticks(&stat),
            sys_ticks: stat_sys_ticks(&stat),
        }
    }
}

/// (apparent length, allocated bytes) of every file under `dir`.
pub(crate) fn dir_size(dir: &Path) -> (u64, u64) {
    use std::os::unix::fs::MetadataExt;
    let mut total = (0, 0);
    let Ok(entries) = std::fs::read_dir(dir) else {
        return total;
    };
    for entry in entries.flatten() {
        let Ok(meta) = entry.metadata() else { continue };
        if meta.is_dir() {
            let (len, disk) = dir_size(&entry.path());
            total.0 += len;
            total.1 += disk;
        } else {
            total.0 += meta.len();
            total.1 += meta.blocks() * 512;
        }
    }
    total
}

/// Phase results in the order they ran.
pub(crate) struct Phases {
    engine: &'static str,
    /// The store's directory, whose size each phase records.
    pub(crate) dir: PathBuf,
    list: Vec<(&'static str, Value)>,
    /// The usage at the end of the previous phase, or wherever [`Phases::restart`] was last
    /// called: a phase is charged with what happened since.
    since: Usage,
}

impl Phases {
    /// Starts the next phase's counters here, so that what ran since the last phase (setup,
    /// the sync reference, an untimed commit) is charged to no phase.
    pub(crate) fn restart(&mut self) {
        self.since = Usage::now();
    }

    /// Records a phase that took `secs` and committed `txs` write transactions, with the
    /// store's size after it and what the process wrote and spent on the CPU during it.
    pub(crate) fn record(&mut self, name: &'static str, secs: f64, txs: u64, extra: Value) {
        if std::env::var_os("RBOLT_COMPARE_MARKS").is_some() {
            // For `perf record -k CLOCK_MONOTONIC`: the phase's window on the clock `Instant`
            // reads on Linux, so a profile can be cut to one phase (`perf report --time`).
            let end = Instant::now();
            let start = end - Duration::from_secs_f64(secs);
            eprintln!("mark {name} {start:?} {end:?}");
        }
        let end = Usage::now();
        // An engine reopened between phases starts its count again.
        let mapped = end.mapped.saturating_sub(self.since.mapped);
        let (file_bytes, disk_bytes) = dir_size(&self.dir);
        eprintln!(
            "[{}] {name}: {secs:.3} s, files {:.1} MiB",
            self.engine,
            file_bytes as f64 / (1 << 20) as f64
        );
        let mut value = json!({
            "secs": secs,
            "file_bytes": file_bytes,
            "disk_bytes": disk_bytes,
            // What went to the file either way: by write system calls and through a mapping.
            "written_bytes": end.written - self.since.written + mapped,
            "mapped_bytes": mapped,
            "read_bytes": end.read - self.since.read,
            "write_calls": end.write_calls - self.since.write_calls,
            "cpu_secs": (end.cpu_ticks - self.since.cpu_ticks) as f64 / USER_HZ,
            "sys_cpu_secs": (end.sys_ticks - self.since.sys_ticks) as f64 / USER_HZ,
            "txs": txs,
        });
        if let (Value::Object(map), Value::Object(more)) = (&mut value, extra) {
            map.extend(more);
        }
        self.list.push((name, value));
        // Measuring the store and printing the progress line (stderr counts in `wchar`) are
        // the harness's, not the next phase's.
        self.restart();
    }
}

pub(crate) fn time<T>(f: impl FnOnce() -> Result<T>) -> Result<(f64, T)> {
    let start = Instant::now();
    let value = f()?;
    Ok((start.elapsed().as_secs_f64(), value))
}

fn percentile(sorted: &[f64], p: usize) -> f64 {
    sorted[(sorted.len() * p / 100).min(sorted.len() - 1)]
}

/// Runs phases (a) to (g) on one store, then (a2) on a second one, and returns the JSON
/// line the driver reads.
pub fn run<E: Engine>(config: &Config) -> Result<Value> {
    let n = config.n;
    let keys = keys(config.seed, n);
    let read_order = permutation(config.seed ^ 0xb, n);
    let delete_order = permutation(config.seed ^ 0xf, n);
    let baseline_rss_kib = peak_rss_kib();

    let dir = config.dir.join("random");
    std::fs::create_dir_all(&dir)?;
    let mut phases = Phases {
        engine: E::NAME,
        dir: dir.clone(),
        list: Vec::new(),
        since: Usage::now(),
    };
    let mut db = E::create(&dir)?;
    let page_size = db.page_size();
    phases.restart();

    // (a) N random keys in one durable transaction (or in transactions of
    // `config.load_tx_keys`).
    let (secs, txs) = time(|| load(&db, &keys, false, config.load_tx_keys))?;
    phases.record("load_random", secs, txs, json!({}));
    let load_rss_kib = peak_rss_kib();
    if config.scale {
        db = crate::scale::after_load(db, &mut phases)?;
    }

    // (b) N random point reads in one read transaction, allocations counted.
    start_counting();
    let (secs, found) = time(|| db.get_tx(&keys, &mut read_order.iter().map(|&i| i as usize)))?;
    let allocations = stop_counting();
    if found != n as u64 {
        return Err(fail(format!(
            "get: {found} of {n} keys found with their value"
        )));
    }
    phases.record(
        "get_random",
        secs,
        0,
        json!({ "allocs_per_op": allocations as f64 / n as f64 }),
    );

    // (c) a full forward scan.
    let (secs, (entries, bytes)) = time(|| db.scan())?;
    if entries != n as u64 || bytes != (n * (KEY_LEN + VALUE_LEN)) as u64 {
        return Err(fail(format!("scan: {entries} entries, {bytes} bytes")));
    }
    phases.record("scan", secs, 0, json!({}));

    // (d) single-key durable commits, each timed, and what one pwrite + fdatasync costs on
    // this filesystem right now, as a floor.
    let sync_p50_us = sync_reference(&dir)?;
    let commit_keys = self::keys(config.seed ^ 0xd, COMMITS);
    let mut latencies = Vec::with_capacity(COMMITS);
    phases.restart();
    let start = Instant::now();
    for key in &commit_keys {
        let (secs, ()) = time(|| db.put_tx(std::slice::from_ref(key), false))?;
        latencies.push(secs * 1e6);
    }
    let secs = start.elapsed().as_secs_f64();
    latencies.sort_by(f64::total_cmp);
    phases.record(
        "commit_durable",
        secs,
        // One commit a key; a failed one ends the run.
        commit_keys.len() as u64,
        json!({
            "p50_us": percentile(&latencies, 50),
            "p99_us": percentile(&latencies, 99),
            "max_us": latencies[latencies.len() - 1],
            "sync_p50_us": sync_p50_us,
        }),
    );

    // (e) transactions of random keys with durability off.
    db.set_sync(false)?;
    let batch_keys = self::keys(config.seed ^ 0xe, BATCHES * BATCH_KEYS);
    let batches = batch_keys.chunks(BATCH_KEYS);
    let batch_txs = batches.len() as u64;
    // Heap allocations of the whole phase (transactions, commits, writes) per key put.
    phases.restart();
    start_counting();
    let (secs, ()) = time(|| {
        batches
            .into_iter()
            .try_for_each(|chunk| db.put_tx(chunk, false))
    })?;
    let allocations = stop_counting();
    phases.record(
        "batch_nosync",
        secs,
        batch_txs,
        json!({ "allocs_per_op": allocations as f64 / batch_keys.len() as f64 }),
    );
    db.set_sync(true)?;
    // One untimed durable commit (rewriting a key of (e)) makes what (e) left unsynced or
    // deferred durable now, so (f) is not charged for it; its bytes are not (f)'s either.
    db.put_tx(&batch_keys[..1], false)?;

    // (f) delete half the loaded keys, in random order, durable transactions.
    let doomed: Vec<Key> = delete_order[..n / 2]
        .iter()
        .map(|&i| keys[i as usize])
        .collect();
    let deletes = doomed.chunks(DELETE_TX_KEYS);
    // (N/2) / DELETE_TX_KEYS rounded up: the last transaction takes what is left.
    let delete_txs = deletes.len() as u64;
    phases.restart();
    let (secs, ()) = time(|| {
        deletes
            .into_iter()
            .try_for_each(|chunk| db.delete_tx(chunk))
    })?;
    phases.record("delete_half", secs, delete_txs, json!({}));
    drop(doomed);

    // (g0) readers beside a writer held to one pace for every engine, rewriting surviving
    // keys (the same values): every engine's store holds the same keys throughout, so the
    // readers' rate compares read paths beside equal writer work. Durability off.
    db.set_sync(false)?;
    let survivors: Vec<Key> = delete_order[n / 2..]
        .iter()
        .map(|&i| keys[i as usize])
        .collect();
    phases.restart();
    let rw = read_write(&db, &survivors, config, WriterLoad::PacedRewrites)?;
    let secs = rw.secs;
    phases.record(
        "read_write_paced",
        secs,
        rw.txs,
        json!({
            "reads_per_sec": rw.reads as f64 / secs,
            "writes_per_sec": rw.writes as f64 / secs,
            "txs_per_sec_target": PACED_TXS_PER_SEC,
        }),
    );

    // (g) readers and a writer at once, durability off for the writer.
    phases.restart();
    let rw = read_write(&db, &survivors, config, WriterLoad::Unthrottled)?;
    let secs = rw.secs;
    let mut extra = json!({
        "reads_per_sec": rw.reads as f64 / secs,
        "writes_per_sec": rw.writes as f64 / secs,
        "reads": rw.reads,
        "writes": rw.writes,
    });
    if let Some(writer) = rw.writer {
        extra["writer_cpu_secs"] = json!(writer.cpu);
        extra["writer_runq_secs"] = json!(writer.runq);
        extra["writer_blocked_secs"] = json!(writer.blocked);
    }
    phases.record("read_write", secs, rw.txs, extra);
    if config.scale {
        crate::scale::vacuum_beside_writer(&db, &survivors, config, &mut phases)?;
        crate::scale::open_after_kill(db, config, &mut phases)?;
    } else {
        drop(db);
    }
    std::fs::remove_dir_all(&dir)?;
    drop(survivors);

    // (a2) N sorted keys into an empty store through the engine's append path.
    let mut sorted = keys;
    sorted.sort_unstable();
    let dir = config.dir.join("sorted");
    std::fs::create_dir_all(&dir)?;
    phases.dir = dir.clone();
    let db = E::create(&dir)?;
    phases.restart();
    let (secs, txs) = time(|| load(&db, &sorted, true, config.load_tx_keys))?;
    phases.record("load_sorted", secs, txs, json!({}));
    let step = (n / SORTED_CHECKS).max(1);
    let checked = db.get_tx(&sorted, &mut (0..n).step_by(step))?;
    if checked != n.div_ceil(step) as u64 {
        return Err(fail("sorted load: keys missing"));
    }
    drop(db);
    std::fs::remove_dir_all(&dir)?;

    let notes = E::NOTES;
    Ok(json!({
        "engine": E::NAME,
        "n": n,
        "seed": config.seed,
        "rw_secs": config.rw.as_secs_f64(),
        // What the report divides bytes written by to count pages; null where the engine has
        // no fixed page (sled).
        "page_size": page_size,
        "phases": Value::Object(
            phases.list.into_iter().map(|(name, value)| (name.to_string(), value)).collect()
        ),
        "rss_kib": {
            "baseline": baseline_rss_kib,
            "after_load": load_rss_kib,
            "peak": peak_rss_kib(),
        },
        "notes": {
            "sorted_load": notes.sorted_load,
            "durable": notes.durable,
            "sync_off": notes.sync_off,
            "rust_heap_only": notes.rust_heap_only,
        },
    }))
}

/// Puts `keys` in durable transactions of `per_tx` keys; the transactions committed.
fn load<E: Engine>(db: &E, keys: &[Key], sorted: bool, per_tx: usize) -> Result<u64> {
    let chunks = keys.chunks(per_tx.max(1));
    let txs = chunks.len() as u64;
    chunks
        .into_iter()
        .try_for_each(|chunk| db.put_tx(chunk, sorted))?;
    Ok(txs)
}

/// The child of the scale row "open after a kill": reopens the store in `dir`, commits
/// `KILL_CHILD_TXS` transactions of `BATCH_KEYS` new keys without syncs, then ends the process
/// at once (no destructor runs, nothing is closed or flushed: what a SIGKILL right after the
/// last commit leaves). Returns only on an error.
pub fn kill_child<E: Engine>(dir: &Path, seed: u64) -> Result<()> {
    let mut db = E::open(dir)?;
    db.set_sync(false)?;
    let keys = keys(seed ^ 0xc1, KILL_CHILD_TXS * BATCH_KEYS);
    for chunk in keys.chunks(BATCH_KEYS) {
        db.put_tx(chunk, false)?;
    }
    eprintln!(
        "[{}] kill child: {KILL_CHILD_TXS} commits without syncs, exiting",
        E::NAME
    );
    std::process::exit(0);
}

/// Transactions the child of "open after a kill" commits without syncs before it dies.
pub const KILL_CHILD_TXS: usize = 100;

/// The median of `SYNC_REFERENCE_WRITES` 4 KiB `pwrite`s, each followed by `fdatasync`, to
/// a scratch file beside the store, in microseconds.
fn sync_reference(dir: &Path) -> Result<f64> {
    use std::os::unix::fs::FileExt;
    let path = dir.join("sync-reference");
    let file = std::fs::File::create(&path)?;
    let page = [0x5a_u8; 4096];
    let mut latencies = Vec::with_capacity(SYNC_REFERENCE_WRITES);
    for i in 0..SYNC_REFERENCE_WRITES {
        let start = Instant::now();
        file.write_all_at(&page, (i % 16 * page.len()) as u64)?;
        file.sync_data()?;
        latencies.push(start.elapsed().as_secs_f64() * 1e6);
    }
    drop(file);
    std::fs::remove_file(&path)?;
    latencies.sort_by(f64::total_cmp);
    Ok(percentile(&latencies, 50))
}

/// What phase (g) did.
struct ReadWrite {
    /// Gets the readers made, all found.
    reads: u64,
    /// Keys the writer put.
    writes: u64,
    /// Transactions the writer committed.
    txs: u64,
    /// What the writer's thread did over its loop (`thread_sched`).
    writer: Option<WriterTime>,
    secs: f64,
}

/// The writer thread's time over phase (g)'s loop, in seconds.
#[derive(Clone, Copy, Debug, PartialEq)]
struct WriterTime {
    /// On a CPU.
    cpu: f64,
    /// Runnable, waiting for a CPU.
    runq: f64,
    /// Neither: blocked (on a lock, a sync, a page fault's read), the loop's wall time less
    /// the other two, or 0 where the three readings' lag makes that negative.
    blocked: f64,
}

impl WriterTime {
    fn between(start: Sched, end: Sched, wall_secs: f64) -> WriterTime {
        let cpu = end.cpu_ns.saturating_sub(start.cpu_ns) as f64 / 1e9;
        let runq = end.runq_ns.saturating_sub(start.runq_ns) as f64 / 1e9;
        WriterTime {
            cpu,
            runq,
            blocked: (wall_secs - cpu - runq).max(0.0),
        }
    }
}

/// What the writer of phases (g0) and (g) commits.
#[derive(Clone, Copy, PartialEq, Eq)]
enum WriterLoad {
    /// (g): new random keys, as fast as the engine takes them.
    Unthrottled,
    /// (g0): surviving keys again, at `PACED_TXS_PER_SEC` (or slower, where the engine cannot
    /// keep up: the rate written is in the report).
    PacedRewrites,
}

/// Phases (g0) and (g): `READERS` threads doing random gets of surviving keys, in read
/// transactions of `READ_TX_GETS`, while one writer (the calling thread) commits
/// `BATCH_KEYS`-key transactions of `load`, for `config.rw`.
fn read_write<E: Engine>(
    db: &E,
    survivors: &[Key],
    config: &Config,
    load: WriterLoad,
) -> Result<ReadWrite> {
    let stop = AtomicBool::new(false);
    let reads = AtomicU64::new(0);
    let start = Instant::now();
    let (txs, writer) = std::thread::scope(|s| -> Result<(u64, Option<WriterTime>)> {
        let mut readers = Vec::new();
        for reader in 0..READERS {
            let (stop, reads) = (&stop, &reads);
            readers.push(s.spawn(move || -> Result<()> {
                let mut rng = Rng::new(config.seed ^ 0x9 ^ ((reader as u64) << 32));
                while !stop.load(Ordering::Relaxed) {
                    let mut picks = (0..READ_TX_GETS).map(|_| rng.below(survivors.len()));
                    let found = db.get_tx(survivors, &mut picks)?;
                    if found != READ_TX_GETS as u64 {
                        stop.store(true, Ordering::Relaxed);
                        return Err(fail("read-write: a surviving key was not found"));
                    }
                    reads.fetch_add(found, Ordering::Relaxed);
                }
                Ok(())
            }));
        }
        let mut rng = Rng::new(config.seed ^ 0x77);
        let mut txs = 0u64;
        let mut batch = [[0u8; KEY_LEN]; BATCH_KEYS];
        let (sched_start, loop_start) = (thread_sched(), Instant::now());
        let result = loop {
            if start.elapsed() >= config.rw || stop.load(Ordering::Relaxed) {
                break Ok(txs);
            }
            match load {
                WriterLoad::Unthrottled => batch.iter_mut().for_each(|key| *key = rng.key()),
                WriterLoad::PacedRewrites => {
                    let due = Duration::from_secs_f64(txs as f64 / f64::from(PACED_TXS_PER_SEC));
                    if let Some(wait) = due.checked_sub(loop_start.elapsed()) {
                        std::thread::sleep(wait);
                    }
                    batch
                        .iter_mut()
                        .for_each(|key| *key = survivors[rng.below(survivors.len())]);
                }
            }
            if let Err(error) = db.put_tx(&batch, false) {
                break Err(error);
            }
            txs += 1;
        };
        let loop_secs = loop_start.elapsed().as_secs_f64();
        let writer = sched_start
            .zip(thread_sched())
            .map(|(start, end)| WriterTime::between(start, end, loop_secs));
        stop.store(true, Ordering::Relaxed);
        for reader in readers {
            reader.join().map_err(|_| fail("reader panicked"))??;
        }
        Ok((result?, writer))
    })?;
    Ok(ReadWrite {
        reads: reads.load(Ordering::Relaxed),
        writes: txs * BATCH_KEYS as u64,
        txs,
        writer,
        secs: start.elapsed().as_secs_f64(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_ticks_count_from_the_last_bracket() {
        // A command name with a space and a `)` of its own; utime 7, stime 5.
        let line = "4242 (a b) c) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0 9 0 0";
        assert_eq!(stat_cpu_ticks(line), 12);
        assert_eq!(stat_sys_ticks(line), 5);
        assert_eq!(stat_cpu_ticks(""), 0);
        assert_eq!(stat_sys_ticks("4242 (x) S"), 0);
    }

    #[test]
    fn schedstat_gives_cpu_and_run_queue_time() {
        assert_eq!(
            parse_schedstat("123 456 7\n"),
            Some(Sched {
                cpu_ns: 123,
                runq_ns: 456
            })
        );
        assert_eq!(parse_schedstat("123"), None);
        assert_eq!(parse_schedstat("x 1 2"), None);
        let start = Sched {
            cpu_ns: 1_000_000_000,
            runq_ns: 500_000_000,
        };
        let end = Sched {
            cpu_ns: 3_000_000_000,
            runq_ns: 1_500_000_000,
        };
        // 2 s on a CPU and 1 s waiting for one of a 4 s loop: blocked for the other second.
        let time = WriterTime::between(start, end, 4.0);
        assert_eq!((time.cpu, time.runq, time.blocked), (2.0, 1.0, 1.0));
        // Readings that lag the wall clock never make a negative blocked time.
        assert_eq!(WriterTime::between(start, end, 2.5).blocked, 0.0);
    }

    #[test]
    fn cpu_time_grows_with_work() {
        // Spin until this thread has run 50 ms on a CPU: at least 4 ticks of 10 ms more for
        // the process, whatever the machine's load (descheduled time does not count).
        let (process, thread) = (
            stat_cpu_ticks(&read_stat()),
            thread_sched().expect("schedstat").cpu_ns,
        );
        let mut x = 0u64;
        while thread_sched().expect("schedstat").cpu_ns - thread < 50_000_000 {
            for i in 0..10_000 {
                x = std::hint::black_box(x.wrapping_mul(31).wrapping_add(i));
            }
        }
        assert!(
            stat_cpu_ticks(&read_stat()) - process >= 4,
            "{} ticks",
            stat_cpu_ticks(&read_stat()) - process
        );
    }
}
