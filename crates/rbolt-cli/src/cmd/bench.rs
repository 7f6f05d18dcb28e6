//! `rbolt bench`: bbolt's synthetic benchmark, flag for flag, printing the same two result
//! lines, so `bbolt bench ARGS` and `rbolt bench ARGS` run side by side. A header before them
//! (bbolt prints none) names what was measured: key and value sizes, count, transactions,
//! modes, syncs, page size and fill percent.
//!
//! Writes put `--count` keys into the bucket `bench` (or into nested buckets below it), in
//! transactions of `--batch-size` keys; reads then scan or look up every key, again and again
//! for at least a second, in one read transaction. Keys are `--key-size` bytes whose first
//! four are a big-endian `u32` (sequential from 1, or random); values are `--value-size`
//! zero bytes.
//!
//! Differences from bbolt's: the default `--count` is 1,000,000 rather than 1,000, so that a
//! bare `rbolt bench` measures something (it runs in seconds); progress is a bar on a terminal
//! instead of lines on stderr; the profiling flags are accepted and ignored (use `perf`); and
//! `--path` must not name an existing file, because the file is deleted afterwards.

use crate::duration::go_string;
use crate::progress::{Counter, Unit};
use anyhow::{Context, Result, anyhow, bail};
use clap::{ArgAction, Args, ValueEnum};
use fastrand::Rng;
use rbolt::{Db, Options};
use std::io::Write;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// The bucket every benchmark writes into.
const BENCH_BUCKET: &[u8] = b"bench";
/// Reads repeat until they have run this long (bbolt's rule).
const READ_TIME_MIN: Duration = Duration::from_secs(1);
/// Keys written when `--count` is not given.
const COUNT_DEFAULT: u64 = 1_000_000;

/// How keys are written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum WriteMode {
    /// Sequential keys.
    Seq,
    /// Random keys.
    Rnd,
    /// Sequential keys, each batch in a new nested bucket.
    SeqNest,
    /// Random keys, each batch in a new nested bucket.
    RndNest,
    /// Sequential keys; each batch first deletes a tenth of the previous batch's keys.
    SeqDel,
}

/// How keys are read.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ReadMode {
    /// Cursor scans of every key.
    Seq,
    /// Point lookups of every written key, in random order.
    Rnd,
}

/// Arguments of `bench` (bbolt's flags; booleans also take Go's `--flag=true|false`).
#[derive(Args, Debug)]
pub struct BenchArgs {
    /// Accepted for bbolt compatibility; profiling is not built in (use perf).
    #[arg(long, default_value = "rw", value_name = "MODE")]
    pub profile_mode: String,
    /// How keys are written.
    #[arg(long, value_enum, default_value = "seq")]
    pub write_mode: WriteMode,
    /// How keys are read.
    #[arg(long, value_enum, default_value = "seq")]
    pub read_mode: ReadMode,
    /// Keys to write.
    #[arg(long, default_value_t = COUNT_DEFAULT, value_parser = clap::value_parser!(u64).range(1..))]
    pub count: u64,
    /// Keys per write transaction (0: all in one); must divide --count.
    #[arg(long, default_value_t = 0)]
    pub batch_size: u64,
    /// Bytes per key (at least 4).
    #[arg(long, default_value_t = 8)]
    pub key_size: usize,
    /// Bytes per value.
    #[arg(long, default_value_t = 32)]
    pub value_size: usize,
    /// Accepted for bbolt compatibility and ignored.
    #[arg(long, value_name = "FILE")]
    pub cpuprofile: Option<String>,
    /// Accepted for bbolt compatibility and ignored.
    #[arg(long, value_name = "FILE")]
    pub memprofile: Option<String>,
    /// Accepted for bbolt compatibility and ignored.
    #[arg(long, value_name = "FILE")]
    pub blockprofile: Option<String>,
    /// How full split pages are made.
    #[arg(long, default_value_t = 0.5)]
    pub fill_percent: f64,
    /// Skip the fdatasyncs of each commit.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set, default_value = "false")]
    pub no_sync: bool,
    /// Keep the database file afterwards (its path is printed on stderr).
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set, default_value = "false")]
    pub work: bool,
    /// The database file to create (default: a new file in the temporary directory).
    #[arg(long, value_name = "FILE")]
    pub path: Option<PathBuf>,
    /// Print results as Go's `testing` benchmarks do.
    #[arg(long, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = ArgAction::Set, default_value = "false")]
    pub gobench_output: bool,
    /// Page size of the new file, in bytes.
    #[arg(long, default_value_t = rbolt::PAGE_SIZE_DEFAULT)]
    pub page_size: usize,
    /// Initial size of the memory mapping, in bytes.
    #[arg(long, default_value_t = 0)]
    pub initial_mmap_size: usize,
}

/// Operations done and the time they took.
#[derive(Clone, Copy, Debug, Default)]
struct Results {
    ops: u64,
    duration: Duration,
}

impl Results {
    /// Time per operation, truncated to whole nanoseconds (Go's duration division).
    fn op_duration(&self) -> Duration {
        if self.ops == 0 {
            return Duration::ZERO;
        }
        Duration::from_nanos((self.duration.as_nanos() / u128::from(self.ops)) as u64)
    }

    fn ops_per_second(&self) -> u64 {
        match self.op_duration().as_nanos() {
            0 => 0,
            nanos => (1_000_000_000 / nanos) as u64,
        }
    }
}

/// Where keys come from: counting up from 1, or random.
struct KeySource {
    next: u32,
    random: bool,
}

impl KeySource {
    fn next(&mut self, rng: &mut Rng) -> u32 {
        if self.random {
            rng.u32(..)
        } else {
            self.next = self.next.wrapping_add(1);
            self.next
        }
    }
}

/// Removes the benchmark's file when the run ends, however it ends.
struct RemoveOnDrop(Option<PathBuf>);

impl Drop for RemoveOnDrop {
    fn drop(&mut self) {
        if let Some(path) = self.0.take() {
            let _ = std::fs::remove_file(path);
        }
    }
}

/// `rbolt bench`.
pub fn bench(args: BenchArgs) -> Result<()> {
    if args.batch_size > 0 && !args.count.is_multiple_of(args.batch_size) {
        bail!("the number of iterations must be divisible by the batch size");
    }
    if args.key_size < 4 {
        bail!("--key-size must be at least 4 (keys hold a 32-bit number)");
    }
    if !(0.1..=1.0).contains(&args.fill_percent) {
        bail!("--fill-percent must be between 0.1 and 1.0");
    }
    for (flag, value) in [
        ("--cpuprofile", &args.cpuprofile),
        ("--memprofile", &args.memprofile),
        ("--blockprofile", &args.blockprofile),
    ] {
        if value.is_some() {
            let _ = writeln!(
                std::io::stderr(),
                "rbolt: {flag} is not supported and is ignored (profile with perf instead)"
            );
        }
    }
    let path = match &args.path {
        Some(path) => {
            if path.exists() {
                bail!(
                    "{} already exists; bench creates its file and deletes it afterwards",
                    path.display()
                );
            }
            path.clone()
        }
        None => {
            let nanos = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.subsec_nanos());
            std::env::temp_dir().join(format!("rbolt-bench-{}-{nanos}", std::process::id()))
        }
    };
    let _cleanup = if args.work {
        let _ = writeln!(std::io::stderr(), "work: {}", path.display());
        RemoveOnDrop(None)
    } else {
        RemoveOnDrop(Some(path.clone()))
    };
    let options = Options::default()
        .page_size(args.page_size)
        .initial_mmap_size(args.initial_mmap_size)
        .no_sync(args.no_sync);
    let db = Db::open_with(&path, options)
        .with_context(|| format!("cannot create {}", path.display()))?;
    // Seeded from the clock and the thread, like Go's `rand`: each run draws other keys.
    let mut rng = Rng::new();

    let (write, mut keys) = run_writes(&db, &args, &mut rng).context("write")?;
    if args.read_mode == ReadMode::Rnd {
        if args.write_mode == WriteMode::SeqDel {
            // Some written keys were deleted again: look up the ones that are left.
            keys = surviving_keys(&db)?;
        }
        rng.shuffle(&mut keys);
    }
    let read = run_reads(&db, &args, &keys).context("read")?;

    let mut w = crate::out::stdout();
    write_header(&mut w, &args)?;
    if args.gobench_output {
        let width = "BenchmarkWrite".len().max("BenchmarkRead".len());
        writeln!(w, "{:<width$}\t{}", "BenchmarkWrite", gobench(&write))?;
        writeln!(w, "{:<width$}\t{}", "BenchmarkRead", gobench(&read))?;
    } else {
        for (name, results) in [("Write", write), ("Read", read)] {
            writeln!(
                w,
                "# {name}\t{}(ops)\t{}\t({}/op)\t({} op/sec)",
                results.ops,
                go_string(results.duration),
                go_string(results.op_duration()),
                results.ops_per_second()
            )?;
        }
    }
    writeln!(w)?;
    crate::out::flush(w)
}

/// What the run measured, before its results: in the normal output one `# Setup` line of
/// tab-separated fields, like the result lines after it; with `--gobench-output`, Go's
/// `key: value` configuration lines, which `benchstat` reads as the run's settings.
fn write_header(w: &mut impl Write, args: &BenchArgs) -> std::io::Result<()> {
    let batch_size = if args.batch_size == 0 {
        args.count
    } else {
        args.batch_size
    };
    let transactions = args.count / batch_size;
    let syncs = if args.no_sync { "off" } else { "on" };
    let (write_mode, read_mode) = (flag_value(args.write_mode), flag_value(args.read_mode));
    if args.gobench_output {
        let fields = [
            ("count", args.count.to_string()),
            ("key-size", args.key_size.to_string()),
            ("value-size", args.value_size.to_string()),
            ("batch-size", batch_size.to_string()),
            ("write-mode", write_mode),
            ("read-mode", read_mode),
            ("sync", syncs.to_owned()),
            ("page-size", args.page_size.to_string()),
            ("fill-percent", args.fill_percent.to_string()),
        ];
        for (key, value) in fields {
            writeln!(w, "{key}: {value}")?;
        }
        return Ok(());
    }
    let plural = |n: u64, word: &str| {
        if n == 1 {
            format!("{n} {word}")
        } else {
            format!("{n} {word}s")
        }
    };
    writeln!(
        w,
        "# Setup\t{} of {} bytes, values of {} bytes\t{} of {}, syncs {syncs}\t\
         write-mode {write_mode}, read-mode {read_mode}\tpage size {}, fill percent {}",
        plural(args.count, "key"),
        args.key_size,
        args.value_size,
        plural(transactions, "write transaction"),
        plural(batch_size, "key"),
        args.page_size,
        args.fill_percent,
    )
}

/// How `value` is spelled on the command line.
fn flag_value(value: impl ValueEnum) -> String {
    value
        .to_possible_value()
        .map_or_else(String::new, |value| value.get_name().to_owned())
}

/// A written key: the nested bucket's number (for nested modes) and the key's number.
type KeyId = (u32, u32);

fn key_bytes(buf: &mut [u8], id: u32) -> &[u8] {
    buf[..4].copy_from_slice(&id.to_be_bytes());
    buf
}

fn run_writes(db: &Db, args: &BenchArgs, rng: &mut Rng) -> Result<(Results, Vec<KeyId>)> {
    let count = args.count;
    let batch_size = if args.batch_size == 0 {
        count
    } else {
        args.batch_size
    };
    let nested = matches!(args.write_mode, WriteMode::SeqNest | WriteMode::RndNest);
    let mut source = KeySource {
        next: 0,
        random: matches!(args.write_mode, WriteMode::Rnd | WriteMode::RndNest),
    };
    let keep_keys = args.read_mode == ReadMode::Rnd && args.write_mode != WriteMode::SeqDel;
    let mut keys = Vec::with_capacity(if keep_keys { count as usize } else { 0 });
    let mut counter = Counter::new(crate::progress::bar(count, Unit::Items, "writing", false));
    let mut key = vec![0u8; args.key_size];
    let mut name = vec![0u8; args.key_size];
    let value = vec![0u8; args.value_size];
    let delete_n = (batch_size as f64 * 0.1).ceil() as usize;
    let mut previous_batch: Vec<u32> = Vec::new();
    let mut ops = 0u64;
    let started = Instant::now();
    for _ in 0..count / batch_size {
        let tx = db.begin_write()?;
        let mut top = tx.create_bucket_if_not_exists(BENCH_BUCKET)?;
        top.set_fill_percent(args.fill_percent);
        if nested {
            let bucket_id = source.next(rng);
            let mut bucket = top.create_bucket_if_not_exists(key_bytes(&mut name, bucket_id))?;
            bucket.set_fill_percent(args.fill_percent);
            for _ in 0..batch_size {
                let id = source.next(rng);
                bucket.put(key_bytes(&mut key, id), &value)?;
                if keep_keys {
                    keys.push((bucket_id, id));
                }
                ops += 1;
                counter.add(1);
            }
        } else {
            if args.write_mode == WriteMode::SeqDel {
                for &id in previous_batch.iter().take(delete_n) {
                    top.delete(key_bytes(&mut key, id))?;
                }
                previous_batch.clear();
            }
            for _ in 0..batch_size {
                let id = source.next(rng);
                top.put(key_bytes(&mut key, id), &value)?;
                if keep_keys {
                    keys.push((0, id));
                }
                if args.write_mode == WriteMode::SeqDel {
                    previous_batch.push(id);
                }
                ops += 1;
                counter.add(1);
            }
        }
        drop(top);
        tx.commit()?;
    }
    let duration = started.elapsed();
    counter.finish();
    Ok((Results { ops, duration }, keys))
}

/// Every key left in the bench bucket (not timed).
fn surviving_keys(db: &Db) -> Result<Vec<KeyId>> {
    let tx = db.begin_read()?;
    let bucket = tx
        .bucket(BENCH_BUCKET)?
        .ok_or_else(|| anyhow!("the bench bucket is missing"))?;
    bucket
        .iter()
        .map(|entry| {
            let entry = entry?;
            let id = entry
                .key()
                .first_chunk::<4>()
                .ok_or_else(|| anyhow!("a key shorter than 4 bytes"))?;
            Ok((0, u32::from_be_bytes(*id)))
        })
        .collect()
}

fn run_reads(db: &Db, args: &BenchArgs, keys: &[KeyId]) -> Result<Results> {
    let nested = matches!(args.write_mode, WriteMode::SeqNest | WriteMode::RndNest);
    let tx = db.begin_read()?;
    let top = tx
        .bucket(BENCH_BUCKET)?
        .ok_or_else(|| anyhow!("the bench bucket is missing"))?;
    let mut counter = Counter::new(crate::progress::spinner("reading", Unit::Items, false));
    let invalid = || anyhow!("invalid value");
    let mut key = vec![0u8; args.key_size];
    let mut name = vec![0u8; args.key_size];
    let mut ops = 0u64;
    let started = Instant::now();
    loop {
        let mut n = 0u64;
        match (args.read_mode, nested) {
            (ReadMode::Seq, false) => {
                for entry in top.iter() {
                    n += 1;
                    entry?.value().ok_or_else(invalid)?;
                }
            }
            (ReadMode::Seq, true) => {
                for entry in top.iter() {
                    let entry = entry?;
                    if let Some(bucket) = top.bucket(entry.key())? {
                        for entry in bucket.iter() {
                            n += 1;
                            entry?.value().ok_or_else(invalid)?;
                        }
                    }
                }
            }
            (ReadMode::Rnd, false) => {
                for &(_, id) in keys {
                    n += 1;
                    top.get(key_bytes(&mut key, id))?.ok_or_else(invalid)?;
                }
            }
            (ReadMode::Rnd, true) => {
                for &(bucket_id, id) in keys {
                    if let Some(bucket) = top.bucket(key_bytes(&mut name, bucket_id))? {
                        n += 1;
                        bucket.get(key_bytes(&mut key, id))?.ok_or_else(invalid)?;
                    }
                }
            }
        }
        ops += n;
        counter.add(n);
        let expected = match args.write_mode {
            WriteMode::Seq | WriteMode::SeqNest => Some(args.count),
            _ => None,
        };
        if let Some(expected) = expected
            && n != expected
        {
            bail!("iteration mismatch: expected {expected} reads, got {n}");
        }
        if started.elapsed() >= READ_TIME_MIN {
            break;
        }
    }
    let duration = started.elapsed();
    counter.finish();
    Ok(Results { ops, duration })
}

/// Go's `testing.BenchmarkResult.String()` for a run of `results.ops` operations.
fn gobench(results: &Results) -> String {
    let mut out = format!("{:8}", results.ops);
    if results.ops == 0 {
        return out;
    }
    let ns = results.duration.as_nanos() as f64 / results.ops as f64;
    if ns != 0.0 {
        out.push('\t');
        out.push_str(&pretty_ns(ns));
    }
    out
}

/// Go's benchmark number layout: wide numbers without decimals, small ones with four
/// significant digits, the decimal points aligned.
fn pretty_ns(x: f64) -> String {
    let y = x.abs();
    let (width, precision) = if y == 0.0 || y >= 999.95 {
        (10, 0)
    } else if y >= 99.995 {
        (12, 1)
    } else if y >= 9.9995 {
        (13, 2)
    } else if y >= 0.99995 {
        (14, 3)
    } else if y >= 0.099995 {
        (15, 4)
    } else if y >= 0.0099995 {
        (16, 5)
    } else if y >= 0.00099995 {
        (17, 6)
    } else {
        (18, 7)
    };
    format!("{x:width$.precision$} ns/op")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn result_arithmetic_is_gos() {
        let results = Results {
            ops: 3,
            duration: Duration::from_nanos(1000),
        };
        assert_eq!(results.op_duration(), Duration::from_nanos(333));
        assert_eq!(results.ops_per_second(), 3_003_003);
        assert_eq!(Results::default().ops_per_second(), 0);
    }

    #[test]
    fn gobench_layout() {
        assert_eq!(pretty_ns(1234.4), "      1234 ns/op");
        assert_eq!(pretty_ns(123.45), "       123.5 ns/op");
        assert_eq!(pretty_ns(12.345), "        12.35 ns/op");
        assert_eq!(pretty_ns(1.2345), "         1.234 ns/op");
        let results = Results {
            ops: 1000,
            duration: Duration::from_micros(250),
        };
        assert_eq!(gobench(&results), "    1000\t       250.0 ns/op");
    }
}
