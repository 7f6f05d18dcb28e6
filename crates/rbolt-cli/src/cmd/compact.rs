//! `rbolt compact`: copies every bucket, key and sequence into a new file with packed pages.
//!
//! The copy runs here rather than through `rbolt::compact` so it can report progress; it does
//! the same thing with the same public calls (fill percent 1.0, a commit every `--tx-max-size`
//! bytes of keys and values).

use super::in_file;
use super::transfer::BatchWriter;
use crate::open::{LockArgs, open_read};
use crate::progress::{Counter, Unit};
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use rbolt::{Bucket, Db, Options};
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
    #[arg(long, default_value_t = 65536)]
    pub tx_max_size: u64,
    /// Do not sync the new file while writing it (faster; not crash-safe until it is done).
    #[arg(long)]
    pub no_sync: bool,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// `rbolt compact -o DST SRC`: prints `X -> Y bytes (gain=Z.ZZx)` as bbolt does. The new file
/// keeps the source's page size (bbolt's uses the OS page size) and permissions.
pub fn compact(args: &CompactArgs) -> Result<()> {
    in_file(&args.path, compact_inner(args))
}

fn compact_inner(args: &CompactArgs) -> Result<()> {
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
    let result = copy(&src, &dst, args.tx_max_size);
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
    tx_max_size: u64,
    counter: Counter,
}

impl Copier<'_> {
    /// Commits first when `bytes` more would pass the transaction size.
    fn account(&mut self, bytes: u64) -> Result<()> {
        if self.tx_max_size != 0 && self.in_tx + bytes > self.tx_max_size {
            self.writer.commit()?;
            self.in_tx = 0;
        }
        self.in_tx += bytes;
        self.counter.add(1);
        Ok(())
    }
}

fn copy(src: &Db, dst: &Db, tx_max_size: u64) -> Result<()> {
    let tx = src.begin_read()?;
    let mut copier = Copier {
        writer: BatchWriter::new(dst, 1.0)?,
        in_tx: 0,
        tx_max_size,
        counter: Counter::new(crate::progress::spinner("compacting", Unit::Items, false)),
    };
    let mut path = Vec::new();
    let root = tx.root();
    for entry in root.iter() {
        let entry = entry?;
        // The root holds buckets only; anything else has no place in the copy.
        if let Some(bucket) = root.bucket(entry.key())? {
            copy_bucket(&mut copier, &mut path, entry.key(), &bucket)?;
        }
    }
    copier.counter.finish();
    copier.writer.finish()
}

fn copy_bucket(
    copier: &mut Copier<'_>,
    path: &mut Vec<Vec<u8>>,
    name: &[u8],
    bucket: &Bucket<'_>,
) -> Result<()> {
    if path.len() >= rbolt::BUCKET_DEPTH_MAX {
        bail!(
            "buckets nest deeper than {} levels (a cycle?)",
            rbolt::BUCKET_DEPTH_MAX
        );
    }
    path.push(name.to_vec());
    copier.account(name.len() as u64)?;
    copier.writer.bucket(path, bucket.sequence())?;
    for entry in bucket.iter() {
        let entry = entry?;
        match entry.value() {
            Some(value) => {
                copier.account((entry.key().len() + value.len()) as u64)?;
                copier.writer.put(path, entry.key(), value)?;
            }
            None => {
                let child = bucket
                    .bucket(entry.key())?
                    .ok_or_else(|| anyhow!("a nested bucket cannot be opened"))?;
                copy_bucket(copier, path, entry.key(), &child)?;
            }
        }
    }
    path.pop();
    Ok(())
}
