//! Readers in other processes against readers on threads of the writer's process (issue 50):
//! a writer thread commits 100-key transactions without syncs for the whole run while two
//! readers do random gets in read transactions of `RBOLT_READERS_GETS` gets each (default 10);
//! the readers are threads of this process in one cell and processes (this benchmark run
//! again, reading through the writer's `<db>-lock` reader table) in the other. Printed: the
//! readers' gets/s and the writer's keys/s, each cell's median of `RBOLT_READERS_REPEAT`
//! interleaved runs (default 5) of `RBOLT_READERS_SECS` seconds (default 3), and the ratio
//! processes/threads (issue 50's target: within 5%).
//!
//! Not a criterion benchmark: it measures rates across processes. Run it in release:
//! `cargo bench -p rbolt-bench --bench reader_processes` (`RBOLT_READERS_KEYS`, default
//! 1,000,000; `RBOLT_READERS_DIR`, default the system's temp dir). Linux only (the reader
//! table); elsewhere the reader processes cannot open beside the writer and it says so.

use rbolt::{Db, Durability, Options};
use rbolt_testkit::rng::Rng;
use std::io::{BufRead, BufReader, Write};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Barrier;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const VALUE: [u8; 100] = [0x5A; 100];
const WRITER_TX_KEYS: usize = 100;
const READERS: usize = 2;
const CHILD: &str = "RBOLT_READERS_CHILD";

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// The `i`th key of the loaded set (16 bytes, spread by a multiplicative hash).
fn key(i: u64) -> [u8; 16] {
    let mut key = [0u8; 16];
    key[..8].copy_from_slice(&i.wrapping_mul(0x9E37_79B9_7F4A_7C15).to_be_bytes());
    key[8..].copy_from_slice(&i.to_be_bytes());
    key
}

fn load(path: &Path, n: u64) {
    let db = Db::open(path).expect("open");
    for start in (0..n).step_by(100_000) {
        db.update(|tx| {
            tx.set_durability(Durability::None);
            let mut b = tx.create_bucket_if_not_exists("b")?;
            for i in start..(start + 100_000).min(n) {
                b.put(key(i), VALUE)?;
            }
            Ok::<_, rbolt::Error>(())
        })
        .expect("load");
    }
    db.close().expect("close");
}

/// The calling thread's minor page faults so far (field 10 of `/proc/thread-self/stat`; 0
/// where there is no such file).
fn thread_minor_faults() -> u64 {
    let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap_or_default();
    // The command name (field 2) is in parentheses and may hold spaces: count after it.
    let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
    after
        .split_whitespace()
        .nth(7)
        .and_then(|f| f.parse().ok())
        .unwrap_or(0)
}

/// Random gets of loaded keys until `stop`, in transactions of `per_tx` gets: the gets done
/// and the thread's minor page faults while doing them.
fn read_loop(db: &Db, seed: u64, n: u64, per_tx: u64, stop: &AtomicBool) -> (u64, u64) {
    let mut rng = Rng::new(seed);
    let mut gets = 0;
    let faults = thread_minor_faults();
    while !stop.load(Ordering::Relaxed) {
        let tx = db.begin_read().expect("begin");
        let b = tx.bucket("b").expect("bucket").expect("loaded");
        for _ in 0..per_tx {
            let found = b.get(key(rng.below(n))).expect("get");
            assert!(found.is_some(), "a loaded key is missing");
        }
        gets += per_tx;
    }
    (gets, thread_minor_faults() - faults)
}

/// The child: opens read-only beside the writer, says `ready`, reads from `go` on stdin until
/// stdin's next line, and answers its gets.
fn child(path: &Path, n: u64, per_tx: u64, seed: u64) {
    let db = Db::open_with(path, Options::default().read_only(true)).expect("open beside");
    assert!(db.reads_beside_writer(), "the writer is there");
    let mut stdin = BufReader::new(std::io::stdin());
    let mut line = String::new();
    println!("ready");
    stdin.read_line(&mut line).expect("go");
    let stop = AtomicBool::new(false);
    let (gets, faults) = std::thread::scope(|s| {
        let reader = s.spawn(|| read_loop(&db, seed, n, per_tx, &stop));
        line.clear();
        let _ = stdin.read_line(&mut line);
        stop.store(true, Ordering::Relaxed);
        reader.join().expect("reader")
    });
    println!("gets {gets} {faults}");
}

/// One run's figures.
struct Figures {
    gets_per_sec: f64,
    keys_per_sec: f64,
    /// The readers' minor page faults per 1,000 gets.
    faults_per_kget: f64,
}

/// One run.
fn run(path: &Path, processes: bool, n: u64, per_tx: u64, secs: u64, seed: u64) -> Figures {
    let db = Db::open(path).expect("open the writer");
    let stop = AtomicBool::new(false);
    let keys = AtomicU64::new(0);
    let mut children = Vec::new();
    if processes {
        for r in 0..READERS {
            let mut child = Command::new(std::env::current_exe().expect("exe"))
                .env(
                    CHILD,
                    format!("{} {n} {per_tx} {}", path.display(), seed + r as u64),
                )
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .spawn()
                .expect("spawn a reader");
            let mut out = BufReader::new(child.stdout.take().expect("stdout"));
            let mut line = String::new();
            out.read_line(&mut line).expect("ready");
            assert_eq!(line.trim(), "ready");
            children.push((child, out));
        }
    }
    let start = Barrier::new(1 + if processes { 0 } else { READERS } + 1);
    let figures = std::thread::scope(|s| {
        let writer = s.spawn(|| {
            let mut rng = Rng::new(seed ^ 0xABCD);
            start.wait();
            while !stop.load(Ordering::Relaxed) {
                db.update(|tx| {
                    tx.set_durability(Durability::None);
                    let mut b = tx.bucket_mut("b")?.expect("loaded");
                    for _ in 0..WRITER_TX_KEYS {
                        b.put(key(rng.below(n)), VALUE)?;
                    }
                    Ok::<_, rbolt::Error>(())
                })
                .expect("write");
                keys.fetch_add(WRITER_TX_KEYS as u64, Ordering::Relaxed);
            }
        });
        let readers: Vec<_> = (0..if processes { 0 } else { READERS })
            .map(|r| {
                let (db, stop, start) = (&db, &stop, &start);
                s.spawn(move || {
                    start.wait();
                    read_loop(db, seed + r as u64, n, per_tx, stop)
                })
            })
            .collect();
        for (child, _) in &mut children {
            writeln!(child.stdin.as_mut().expect("stdin"), "go").expect("go");
        }
        start.wait();
        let began = Instant::now();
        std::thread::sleep(Duration::from_secs(secs));
        stop.store(true, Ordering::Relaxed);
        for (child, _) in &mut children {
            writeln!(child.stdin.as_mut().expect("stdin"), "stop").expect("stop");
        }
        let elapsed = began.elapsed();
        writer.join().expect("writer");
        let (mut gets, mut faults) = (0, 0);
        for (g, f) in readers.into_iter().map(|r| r.join().expect("reader")) {
            gets += g;
            faults += f;
        }
        for (mut child, mut out) in children.drain(..) {
            let mut line = String::new();
            out.read_line(&mut line).expect("gets");
            let counts: Vec<u64> = line
                .trim()
                .strip_prefix("gets ")
                .expect("gets line")
                .split(' ')
                .map(|c| c.parse().expect("count"))
                .collect();
            gets += counts[0];
            faults += counts[1];
            assert!(child.wait().expect("wait").success());
        }
        (gets, faults, elapsed)
    });
    let (gets, faults, elapsed) = figures;
    let secs = elapsed.as_secs_f64();
    Figures {
        gets_per_sec: gets as f64 / secs,
        keys_per_sec: keys.load(Ordering::Relaxed) as f64 / secs,
        faults_per_kget: faults as f64 * 1000.0 / gets.max(1) as f64,
    }
}

fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn main() {
    let n = env_or("RBOLT_READERS_KEYS", 1_000_000).max(1);
    let per_tx = env_or("RBOLT_READERS_GETS", 10).max(1);
    if let Ok(args) = std::env::var(CHILD) {
        let args: Vec<&str> = args.split(' ').collect();
        let parse = |i: usize| args[i].parse::<u64>().expect("child argument");
        child(Path::new(args[0]), parse(1), parse(2), parse(3));
        return;
    }
    let secs = env_or("RBOLT_READERS_SECS", 3);
    let repeat = env_or("RBOLT_READERS_REPEAT", 5).max(1);
    let base = std::env::var_os("RBOLT_READERS_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let dir = tempfile::tempdir_in(base).expect("temp dir");
    let path = dir.path().join("db");
    load(&path, n);
    let (mut threads, mut processes) = (Vec::new(), Vec::new());
    for r in 0..repeat {
        // Interleaved, and alternating which goes first.
        for cell in [r % 2 == 1, r % 2 == 0] {
            let figures = run(&path, cell, n, per_tx, secs, 1 + r);
            if cell {
                processes.push(figures)
            } else {
                threads.push(figures)
            }
        }
    }
    let gets = |cells: &[Figures]| median(cells.iter().map(|c| c.gets_per_sec).collect());
    let keys = |cells: &[Figures]| median(cells.iter().map(|c| c.keys_per_sec).collect());
    let faults = |cells: &[Figures]| median(cells.iter().map(|c| c.faults_per_kget).collect());
    println!(
        "N = {n}, {per_tx} gets a read transaction, medians of {repeat} interleaved runs of {secs} s"
    );
    println!(
        "| readers | gets/s (2 readers) | writer keys/s | readers' minor faults / 1,000 gets |"
    );
    println!("|---|---|---|---|");
    for (name, cells) in [("2 threads", &threads), ("2 processes", &processes)] {
        println!(
            "| {name} | {:.0} | {:.0} | {:.2} |",
            gets(cells),
            keys(cells),
            faults(cells)
        );
    }
    println!(
        "| processes/threads | {:.3} | {:.3} | |",
        gets(&processes) / gets(&threads),
        keys(&processes) / keys(&threads)
    );
}
