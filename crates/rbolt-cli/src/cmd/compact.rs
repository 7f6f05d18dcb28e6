//! `rbolt compact`: copies every bucket, key and sequence into a new file with packed pages.
//!
//! The copy runs here rather than through `rbolt::compact` so it can report progress; it does
//! the same thing with the same public calls (fill percent 1.0, a commit every `--tx-max-size`
//! bytes of keys and values).

use super::transfer::BatchWriter;
use crate::open::{LockArgs, open_read};
use crate::progress::{Counter, Unit};
use anyhow::{Context, Result, bail};
use clap::Args;
use rbolt::{Db, Options, WalkStep};
use std::io::Write;
use std::path::PathBuf;

/// Arguments of `compact`.
#[derive(Args, Debug)]
pub struct CompactArgs {
    /// The new, compacted file (it must not exist, or be empty).
    #[arg(long, short = 'o', value_name = "DST")]
    pub output: PathBuf,
    /// The database to compact; it is only read.
    #[arg(value_name = "SRC")]
    pub path: PathBuf,
    /// Commit the copy every this many bytes of keys and values (0: one transaction).
    #[arg(long = "tx-max-size", default_value_t = 65536)]
    pub tx_size_max: u64,
    /// Do not sync the new file while writing it (faster; not crash-safe until it is done).
    #[arg(long)]
    pub no_sync: bool,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// `rbolt compact -o DST SRC`: prints `X -> Y bytes (gain=Z.ZZx)` as bbolt does. The new file
/// keeps the source's page size (bbolt's uses the OS page size) and permissions.
pub fn compact(args: &CompactArgs) -> Result<()> {
    crate::open::check_exists(&args.path)?;
    if let Ok(meta) = std::fs::metadata(&args.output)
        && meta.len() > 0
    {
        bail!(
            "the output file {} already exists; compact writes a new file",
            args.output.display()
        );
    }
    let src_meta = std::fs::metadata(&args.path)?;
    let src = open_read(&args.path, &args.lock)?;
    let options = Options::default()
        .page_size(src.page_size())
        .no_sync(args.no_sync);
    let dst = Db::open_with(&args.output, options)
        .with_context(|| format!("cannot create {}", args.output.display()))?;
    let result = copy(&src, &dst, args.tx_size_max);
    drop(dst);
    if let Err(error) = result {
        // A half-written copy is worth nothing and would stop the next attempt.
        let _ = std::fs::remove_file(&args.output);
        return Err(error.context(format!("compaction into {} failed", args.output.display())));
    }
    let _ = std::fs::set_permissions(&args.output, src_meta.permissions());
    let initial = src_meta.len();
    let size = std::fs::metadata(&args.output)?.len();
    if size == 0 {
        bail!("the compacted file {} is empty", args.output.display());
    }
    let mut w = crate::out::stdout();
    writeln!(
        w,
        "{initial} -> {size} bytes (gain={:.2}x)",
        initial as f64 / size as f64
    )?;
    crate::out::flush(w)
}

/// What the copy has written into the current transaction.
struct Copier<'db> {
    writer: BatchWriter<'db>,
    in_tx: u64,
    tx_size_max: u64,
    counter: Counter,
}

impl Copier<'_> {
    /// Commits first when `bytes` more would pass the transaction size.
    fn account(&mut self, bytes: u64) -> Result<()> {
        if self.tx_size_max != 0 && self.in_tx + bytes > self.tx_size_max {
            self.writer.commit()?;
            self.in_tx = 0;
        }
        self.in_tx += bytes;
        self.counter.add(1);
        Ok(())
    }
}

fn copy(src: &Db, dst: &Db, tx_size_max: u64) -> Result<()> {
    let tx = src.begin_read()?;
    let mut copier = Copier {
        writer: BatchWriter::new(dst, 1.0)?,
        in_tx: 0,
        tx_size_max,
        counter: Counter::new(crate::progress::spinner("compacting", Unit::Items, false)),
    };
    let root = tx.root();
    let mut walk = root.walk();
    let mut path: Vec<Vec<u8>> = Vec::new();
    while let Some(step) = walk.next_step() {
        match step? {
            WalkStep::Enter { name, bucket } => {
                path.push(name.to_vec());
                copier.account(name.len() as u64)?;
                copier.writer.bucket(&path, bucket.sequence())?;
            }
            WalkStep::Value { key, value } => {
                // The root holds buckets only; Go bbolt cannot put a value there.
                if path.is_empty() {
                    bail!(
                        "the root bucket holds a value (key {}), which compaction cannot carry",
                        crate::format::hex(key)
                    );
                }
                copier.account((key.len() + value.len()) as u64)?;
                copier.writer.put(&path, key, value)?;
            }
            WalkStep::Leave => {
                path.pop();
            }
        }
    }
    copier.counter.finish();
    copier.writer.finish()
}
