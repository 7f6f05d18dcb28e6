//! `export` and `import`: the whole content of a database as JSON lines in the manifest format
//! of the fixtures' `*.manifest.jsonl` files (tests/data/bbolt/README.md), and back. The lines
//! themselves are `rbolt-manifest`'s to write and parse.
//!
//! ```text
//! {"bucket":["top"],"sequence":0}
//! {"bucket":["top"],"key":"6b6579","value":"76616c7565"}
//! {"bucket":["top","child"],"sequence":42}
//! ```
//!
//! Depth-first in key order: a nested bucket comes at the position of its name among its
//! parent's keys, as its own line followed by its whole subtree. Both directions stream: export
//! holds one bucket path, import one line and one transaction's edits.

use super::write::bucket_mut;
use crate::open::{FileArgs, LockArgs, open_read, open_write};
use crate::progress::{Counter, Unit};
use anyhow::{Context, Result, bail};
use clap::Args;
use rbolt::{Bucket, Db, Options, WalkStep, WriteTx};
use rbolt_manifest::Entry;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;

/// Arguments of `export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    pub file: FileArgs,
    /// Write to this file instead of standard output.
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
}

/// `rbolt export PATH`: every bucket (with its sequence) and every key, one JSON object a line.
pub fn export(args: &ExportArgs) -> Result<()> {
    let db = open_read(&args.file.path, &args.file.lock)?;
    let tx = db.begin_read()?;
    let stdout_busy = args.output.is_none();
    let mut counter = Counter::new(crate::progress::spinner(
        "exporting",
        Unit::Items,
        stdout_busy,
    ));
    let mut path = Vec::new();
    match &args.output {
        None => {
            let mut w = crate::out::stdout();
            export_bucket(&mut w, &mut path, &tx.root(), &mut counter)?;
            crate::out::flush(w)?;
        }
        Some(output) => {
            if crate::open::same_file(output, &args.file.path) {
                bail!("--output names the database itself");
            }
            let file = std::fs::File::create(output)
                .with_context(|| format!("cannot create {}", output.display()))?;
            let mut w = std::io::BufWriter::with_capacity(1 << 16, file);
            export_bucket(&mut w, &mut path, &tx.root(), &mut counter)
                .and_then(|()| w.flush().map_err(Into::into))
                .with_context(|| format!("cannot write {}", output.display()))?;
        }
    }
    counter.finish();
    Ok(())
}

fn export_bucket(
    w: &mut impl Write,
    path: &mut Vec<Vec<u8>>,
    bucket: &Bucket<'_>,
    counter: &mut Counter,
) -> Result<()> {
    let mut walk = bucket.walk();
    let mut prefix = rbolt_manifest::line_prefix(path);
    while let Some(step) = walk.next_step() {
        match step? {
            WalkStep::Value { key, value } => {
                if path.is_empty() {
                    bail!(
                        "the root bucket holds a value (key {}), which the export format cannot carry",
                        crate::format::hex(key)
                    );
                }
                rbolt_manifest::write_value_line(w, &prefix, key, value)?;
                counter.add(1);
            }
            WalkStep::Enter { name, bucket } => {
                path.push(name.to_vec());
                prefix = rbolt_manifest::line_prefix(path);
                rbolt_manifest::write_sequence_line(w, &prefix, bucket.sequence())?;
            }
            WalkStep::Leave => {
                path.pop();
                prefix = rbolt_manifest::line_prefix(path);
            }
        }
    }
    Ok(())
}

/// Writes into a database in transactions of bounded size: `import` and `compact` use it.
pub struct BatchWriter<'db> {
    db: &'db Db,
    tx: Option<WriteTx<'db>>,
    fill_percent: f64,
}

impl<'db> BatchWriter<'db> {
    /// Starts the first transaction. `fill_percent` is used for every bucket written.
    pub fn new(db: &'db Db, fill_percent: f64) -> Result<BatchWriter<'db>> {
        Ok(BatchWriter {
            db,
            tx: Some(db.begin_write()?),
            fill_percent,
        })
    }

    fn tx(&mut self) -> &mut WriteTx<'db> {
        self.tx
            .as_mut()
            .expect("a transaction is open until finish")
    }

    /// Commits what was written so far and starts the next transaction.
    pub fn commit(&mut self) -> Result<()> {
        self.tx.take().expect("a transaction is open").commit()?;
        self.tx = Some(self.db.begin_write()?);
        Ok(())
    }

    /// Commits the last transaction.
    pub fn finish(mut self) -> Result<()> {
        self.tx.take().expect("a transaction is open").commit()?;
        Ok(())
    }

    /// Makes sure the bucket at `path` exists (and its parents), with `sequence`.
    pub fn bucket(&mut self, path: &[Vec<u8>], sequence: u64) -> Result<()> {
        let fill_percent = self.fill_percent;
        if let Some((_, parent)) = path.split_last()
            && !parent.is_empty()
        {
            // The parent holds the new bucket's name: pack it as tightly as its keys.
            bucket_mut(self.tx(), parent, true)?.set_fill_percent(fill_percent);
        }
        let mut bucket = bucket_mut(self.tx(), path, true)?;
        bucket.set_fill_percent(fill_percent);
        // Setting the sequence marks the bucket changed; skip it when there is nothing to set.
        if bucket.sequence() != sequence {
            bucket.set_sequence(sequence)?;
        }
        Ok(())
    }

    /// Puts `key` = `value` into the bucket at `path`, created when missing.
    pub fn put(&mut self, path: &[Vec<u8>], key: &[u8], value: &[u8]) -> Result<()> {
        let fill_percent = self.fill_percent;
        let mut bucket = bucket_mut(self.tx(), path, true)?;
        bucket.set_fill_percent(fill_percent);
        bucket
            .put(key, value)
            .with_context(|| format!("cannot put key {}", crate::format::go_quote(key)))
    }
}

/// Arguments of `import`.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The database file; created when missing.
    pub path: PathBuf,
    /// Read from this file instead of standard input (`-` is standard input too).
    #[arg(long, short = 'i', value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Lines per transaction: each batch is committed before the next is read, so an
    /// interrupted import keeps the batches committed so far.
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_size: u64,
    /// How full split pages are made (bbolt's fill percent, 0.1 to 1.0).
    #[arg(long, default_value_t = 0.5)]
    pub fill_percent: f64,
    /// The page size of a new file (an existing file keeps its own).
    #[arg(long, default_value_t = rbolt::PAGE_SIZE_DEFAULT)]
    pub page_size: usize,
    /// Skip the two fdatasyncs of each commit; one sync at the end makes the result durable.
    #[arg(long)]
    pub no_sync: bool,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// `rbolt import PATH`: reads `export`'s lines into a new or existing file. Keys already there
/// are overwritten; buckets are created as needed.
pub fn import(args: &ImportArgs) -> Result<()> {
    if !(0.1..=1.0).contains(&args.fill_percent) {
        bail!("--fill-percent must be between 0.1 and 1.0");
    }
    let input = args.input.as_ref().filter(|p| p.as_os_str() != "-");
    let (reader, name, len): (Box<dyn Read>, String, Option<u64>) = match input {
        Some(path) => {
            let file = std::fs::File::open(path)
                .with_context(|| format!("cannot open {}", path.display()))?;
            let len = file.metadata().ok().map(|m| m.len());
            (Box::new(file), path.display().to_string(), len)
        }
        None => (
            Box::new(std::io::stdin().lock()),
            "standard input".to_owned(),
            None,
        ),
    };
    let options = Options::default()
        .page_size(args.page_size)
        .no_sync(args.no_sync);
    let created = !args.path.exists();
    let db = open_write(&args.path, &args.lock, true, options)?;
    let result = import_into(&db, args, reader, &name, len);
    drop(db);
    if result.is_err() && created {
        // A new file that did not receive the whole input is of no use to anyone.
        let _ = std::fs::remove_file(&args.path);
    }
    result
}

fn import_into(
    db: &Db,
    args: &ImportArgs,
    reader: Box<dyn Read>,
    name: &str,
    len: Option<u64>,
) -> Result<()> {
    let bar = match len {
        Some(len) => crate::progress::bar(len, Unit::Bytes, "importing", false),
        None => crate::progress::spinner("importing", Unit::Bytes, false),
    };
    let mut counter = Counter::new(bar);
    let mut reader = BufReader::with_capacity(1 << 16, reader);
    let mut writer = BatchWriter::new(db, args.fill_percent)?;
    let mut text = String::new();
    let mut in_batch = 0u64;
    let mut number = 0u64;
    loop {
        text.clear();
        let read = reader
            .read_line(&mut text)
            .with_context(|| format!("cannot read {name}"))?;
        if read == 0 {
            break;
        }
        number += 1;
        counter.add(read as u64);
        let line = text.trim_end_matches(['\n', '\r']);
        if line.is_empty() {
            continue;
        }
        apply_line(&mut writer, line).with_context(|| format!("line {number} of {name}"))?;
        in_batch += 1;
        if in_batch >= args.batch_size {
            writer.commit()?;
            in_batch = 0;
        }
    }
    writer.finish()?;
    if args.no_sync {
        db.sync()?;
    }
    counter.finish();
    Ok(())
}

fn apply_line(writer: &mut BatchWriter<'_>, line: &str) -> Result<()> {
    let line = rbolt_manifest::parse_line(line)?;
    match line.entry {
        Entry::Sequence(sequence) => writer.bucket(&line.bucket, sequence),
        Entry::Value { key, value } => writer.put(&line.bucket, &key, &value),
    }
}
