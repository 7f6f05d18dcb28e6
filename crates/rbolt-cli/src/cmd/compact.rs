//! `rbolt compact`: copies every bucket, key and sequence into a new file with packed pages.
//!
//! The copy runs here rather than through `rbolt::compact` so it can report progress; it does
//! the same thing with the same public calls (fill percent 1.0, a commit every `--tx-max-size`
//! bytes of keys and values). The copy is made under a temporary name and put at `--output`
//! only when it is whole, durable and cut to the pages it uses ([`seal`]), so a script that
//! swaps it in for the source never swaps in less.

use super::transfer::BatchWriter;
use crate::new_file::NewFile;
use crate::open::{LockArgs, open_read};
use crate::progress::{Counter, Unit};
use anyhow::{Context, Result, bail};
use clap::Args;
use rbolt::{Db, Options, VacuumOptions, WalkStep};
use std::io::Write;
use std::ops::ControlFlow;
use std::path::{Path, PathBuf};

/// Arguments of `compact`.
#[derive(Args, Debug)]
pub struct CompactArgs {
    /// The new, compacted file: it must not exist (or be an empty file, as `mktemp` makes).
    #[arg(long, short = 'o', value_name = "DST")]
    pub output: PathBuf,
    /// The database to compact; it is only read.
    #[arg(value_name = "SRC")]
    pub path: PathBuf,
    /// Commit the copy every this many bytes of keys and values (0: one transaction).
    #[arg(long = "tx-max-size", default_value_t = 65536)]
    pub tx_size_max: u64,
    /// Commit the copy without syncs (faster); it is synced once, whole, before it is put at
    /// --output, either way.
    #[arg(long)]
    pub no_sync: bool,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// `rbolt compact -o DST SRC`: prints `X -> Y bytes (gain=Z.ZZx)` as bbolt does, both the
/// sizes of the files as they are on disk once the copy is in place. The new file keeps the
/// source's page size (bbolt's uses the OS page size) and permissions.
pub fn compact(args: &CompactArgs) -> Result<()> {
    crate::open::check_exists(&args.path)?;
    if crate::open::same_file(&args.output, &args.path) {
        bail!("--output names the source file; compact writes a new file");
    }
    let new = NewFile::begin(&args.output)?;
    let src_meta = std::fs::metadata(&args.path)?;
    let src = open_read(&args.path, &args.lock)?;
    // No lock file beside the temporary name: it would be left behind by the rename.
    let options = Options::default()
        .page_size(src.page_size())
        .no_sync(args.no_sync)
        .readers_beside_writer(false);
    let dst = Db::open_with(new.temp(), options)
        .with_context(|| format!("cannot create {}", new.temp().display()))?;
    copy(&src, &dst, args.tx_size_max)
        .and_then(|root_sequence| seal(dst, new.temp(), root_sequence))
        .with_context(|| format!("compaction into {} failed", args.output.display()))?;
    drop(src);
    std::fs::set_permissions(new.temp(), src_meta.permissions())
        .with_context(|| format!("cannot set the permissions of {}", new.temp().display()))?;
    new.publish()?;
    let initial = src_meta.len();
    let size = std::fs::metadata(&args.output)?.len();
    let mut w = crate::out::stdout();
    writeln!(
        w,
        "{initial} -> {size} bytes (gain={:.2}x)",
        initial as f64 / size as f64
    )?;
    crate::out::flush(w)
}

/// Makes a database file this command filled (`compact`'s copy, the database of a new
/// `import`), at `path` and not yet in place, ready to be: every commit durable (also those
/// made without syncs), the file cut to the pages it uses — not to the growth step it was
/// allocated in — by a vacuum, which also moves down the few pages that the copy's last
/// commits left above free ones, the handle closed, and both metas written anew with the root
/// bucket's sequence (`raw::settle_metas`: the public API sets neither). Each step syncs what
/// it wrote.
pub fn seal(db: Db, path: &Path, root_sequence: u64) -> Result<()> {
    db.sync()?;
    let options = VacuumOptions::default().pages_per_step(SEAL_STEP_PAGES);
    db.vacuum(options, |_| ControlFlow::Continue(()))?;
    db.close()?;
    crate::raw::settle_metas(path, root_sequence)
}

/// Pages a vacuum step of [`seal`] may move: no other writer waits for a copy, so one step
/// may take them all (a step plans over the whole file, so fewer steps cost less).
const SEAL_STEP_PAGES: usize = 1 << 20;

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

/// Copies everything of `src` into `dst`; returns the root bucket's sequence, for [`seal`]
/// (no public call sets it).
fn copy(src: &Db, dst: &Db, tx_size_max: u64) -> Result<u64> {
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
    copier.writer.finish()?;
    Ok(root.sequence())
}
