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
//! parent's keys, as its own line followed by its whole subtree. The root bucket's sequence,
//! when it is not 0, is a line of its own before everything (`{"bucket":[],"sequence":N}`).
//! `export --format text|auto` writes keys and values as `{"text":"..."}` where their bytes
//! are UTF-8 (or printable), hex where not; `import` reads every spelling. Both directions
//! stream: export holds one bucket path, import one line and one transaction's edits.

use super::write::bucket_mut;
use crate::new_file::NewFile;
use crate::open::{FileArgs, LockArgs, open_read, open_write};
use crate::progress::{Counter, Unit};
use anyhow::{Context, Result, anyhow, bail};
use clap::{Args, ValueEnum};
use rbolt::{Bucket, Db, Options, WalkStep, WriteTx};
use rbolt_manifest::{Entry, Spelled};
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;

/// How `export` spells keys and values.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum ExportFormat {
    /// Lowercase hex, every key and value: the fixtures' manifests, byte for byte, and what
    /// every earlier rbolt reads.
    Hex,
    /// `{"text":"..."}` where the bytes are printable UTF-8 (as `get --format auto` decides),
    /// hex where not.
    Auto,
    /// `{"text":"..."}` wherever the bytes are UTF-8 (control characters escaped), hex where
    /// not.
    Text,
}

impl ExportFormat {
    fn spell(self, bytes: &[u8]) -> Spelled<'_> {
        let text = match self {
            ExportFormat::Hex => None,
            ExportFormat::Auto if !crate::format::is_printable(bytes) => None,
            ExportFormat::Auto | ExportFormat::Text => std::str::from_utf8(bytes).ok(),
        };
        text.map_or(Spelled::Hex(bytes), Spelled::Text)
    }
}

/// Arguments of `export`.
#[derive(Args, Debug)]
pub struct ExportArgs {
    #[command(flatten)]
    pub file: FileArgs,
    /// Write to this new file instead of standard output (it must not exist, or be empty).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub output: Option<PathBuf>,
    /// How keys and values are spelled. Every spelling imports back to the same bytes.
    #[arg(long, value_enum, default_value = "hex")]
    pub format: ExportFormat,
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
    let root = tx.root();
    let mut write_all = |w: &mut dyn Write| -> Result<()> {
        if root.sequence() != 0 {
            rbolt_manifest::write_sequence_line(
                w,
                &rbolt_manifest::line_prefix(&path),
                root.sequence(),
            )?;
        }
        export_bucket(w, &mut path, &root, args.format, &mut counter)
    };
    match &args.output {
        None => {
            let mut w = crate::out::stdout();
            write_all(&mut w)?;
            crate::out::flush(w)?;
        }
        Some(output) => {
            if crate::open::same_file(output, &args.file.path) {
                bail!("--output names the database itself");
            }
            let new = NewFile::begin(output)?;
            let file = std::fs::File::create_new(new.temp())
                .with_context(|| format!("cannot create {}", new.temp().display()))?;
            let mut w = std::io::BufWriter::with_capacity(1 << 16, file);
            write_all(&mut w)
                .and_then(|()| {
                    let file = w.into_inner().map_err(|e| anyhow!(e.into_error()))?;
                    file.sync_all()?;
                    Ok(())
                })
                .with_context(|| format!("cannot write {}", output.display()))?;
            new.publish()?;
        }
    }
    counter.finish();
    Ok(())
}

fn export_bucket(
    w: &mut dyn Write,
    path: &mut Vec<Vec<u8>>,
    bucket: &Bucket<'_>,
    format: ExportFormat,
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
                rbolt_manifest::write_value_line_as(
                    w,
                    &prefix,
                    format.spell(key),
                    format.spell(value),
                )?;
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
    /// Starts the first transaction. `fill_percent` is set on every bucket written.
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

    /// The bucket at `path`, created when missing, with the fill percent set.
    fn bucket_mut(&mut self, path: &[Vec<u8>]) -> Result<rbolt::BucketMut<'_>> {
        let fill_percent = self.fill_percent;
        let mut bucket = bucket_mut(self.tx(), path, true)?;
        bucket.set_fill_percent(fill_percent);
        Ok(bucket)
    }

    /// Makes sure the bucket at `path` exists (and its parents), with `sequence`.
    pub fn bucket(&mut self, path: &[Vec<u8>], sequence: u64) -> Result<()> {
        if let Some((_, parent)) = path.split_last()
            && !parent.is_empty()
        {
            // The parent holds the new bucket's name: pack it as tightly as its keys.
            self.bucket_mut(parent)?;
        }
        let mut bucket = self.bucket_mut(path)?;
        // Setting the sequence marks the bucket changed; skip it when there is nothing to set.
        if bucket.sequence() != sequence {
            bucket.set_sequence(sequence)?;
        }
        Ok(())
    }

    /// Puts `key` = `value` into the bucket at `path`, created when missing.
    pub fn put(&mut self, path: &[Vec<u8>], key: &[u8], value: &[u8]) -> Result<()> {
        self.bucket_mut(path)?
            .put(key, value)
            .with_context(|| format!("cannot put key {}", crate::format::go_quote(key)))
    }
}

/// Arguments of `import`.
#[derive(Args, Debug)]
pub struct ImportArgs {
    /// The database file. A missing (or empty) one is made under a temporary name and put
    /// here once the whole input is in it; an existing one gets the input merged in.
    pub path: PathBuf,
    /// Read from this file instead of standard input (`-` is standard input too).
    #[arg(long, short = 'i', value_name = "FILE")]
    pub input: Option<PathBuf>,
    /// Lines per transaction, so memory stays bounded: each batch is committed before the next
    /// is read (into an existing file, an interrupted import keeps the batches committed so
    /// far).
    #[arg(long, default_value_t = 100_000, value_parser = clap::value_parser!(u64).range(1..))]
    pub batch_size: u64,
    /// How full split pages are made (bbolt's fill percent, 0.1 to 1.0). The default, 1.0, is
    /// `compact`'s: input in key order, as `export` writes it, fills every page, whatever the
    /// batch size.
    #[arg(long, default_value_t = 1.0)]
    pub fill_percent: f64,
    /// The page size of a new file (an existing file keeps its own).
    #[arg(long, default_value_t = rbolt::PAGE_SIZE_DEFAULT)]
    pub page_size: usize,
    /// Skip the two fdatasyncs of each commit; the result is synced once, at the end, before
    /// the command succeeds.
    #[arg(long)]
    pub no_sync: bool,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// `rbolt import PATH`: reads `export`'s lines into a new or existing file. Keys already there
/// are overwritten; buckets are created as needed. A new file is cut to the pages it uses, as
/// `compact` cuts its copy.
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
    let existing = std::fs::symlink_metadata(&args.path).is_ok_and(|meta| meta.len() > 0);
    if existing {
        let db = open_write(&args.path, &args.lock, false, options)?;
        let root_sequence = db.begin_read()?.root().sequence();
        let source = Source { reader, name, len };
        import_into(&db, args, source, RootSequence::Keep(root_sequence))?;
        return db.close().map_err(Into::into);
    }
    let new = NewFile::begin(&args.path)?;
    // No lock file beside the temporary name: it would be left behind by the rename.
    let db = Db::open_with(new.temp(), options.readers_beside_writer(false))
        .with_context(|| format!("cannot create {}", new.temp().display()))?;
    let source = Source { reader, name, len };
    let root_sequence = import_into(&db, args, source, RootSequence::Set(0))?;
    super::compact::seal(db, new.temp(), root_sequence)?;
    new.publish()
}

/// Where the lines come from.
struct Source {
    reader: Box<dyn Read>,
    /// For messages: the file's name, or "standard input".
    name: String,
    /// The input's length, when it is a file: the progress bar's end.
    len: Option<u64>,
}

/// What a line giving the root bucket's sequence may do.
#[derive(Clone, Copy, Debug)]
enum RootSequence {
    /// Into a new file: the last such line's sequence is set at the end.
    Set(u64),
    /// Into an existing file, whose root has this sequence: only no change is possible, since
    /// the sequence is set on the meta page of a file not yet in place (`raw::settle_metas`).
    Keep(u64),
}

/// Reads every line into `db`; returns the root bucket's sequence the input gives.
fn import_into(db: &Db, args: &ImportArgs, source: Source, root: RootSequence) -> Result<u64> {
    let Source { reader, name, len } = source;
    let bar = match len {
        Some(len) => crate::progress::bar(len, Unit::Bytes, "importing", false),
        None => crate::progress::spinner("importing", Unit::Bytes, false),
    };
    let mut counter = Counter::new(bar);
    let mut reader = BufReader::with_capacity(1 << 16, reader);
    let mut writer = BatchWriter::new(db, args.fill_percent)?;
    let mut root = root;
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
        apply_line(&mut writer, line, &mut root)
            .with_context(|| format!("line {number} of {name}"))?;
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
    Ok(match root {
        RootSequence::Set(sequence) | RootSequence::Keep(sequence) => sequence,
    })
}

fn apply_line(writer: &mut BatchWriter<'_>, line: &str, root: &mut RootSequence) -> Result<()> {
    let line = rbolt_manifest::parse_line(line)?;
    match line.entry {
        Entry::Sequence(sequence) if line.bucket.is_empty() => match root {
            RootSequence::Set(set) => {
                *set = sequence;
                Ok(())
            }
            RootSequence::Keep(kept) if *kept == sequence => Ok(()),
            RootSequence::Keep(kept) => bail!(
                "the root bucket's sequence is {kept} in the existing database and {sequence} \
                 in the input: rbolt can set it only in a new file (import into one, or \
                 leave this line out)"
            ),
        },
        Entry::Sequence(sequence) => writer.bucket(&line.bucket, sequence),
        Entry::Value { key, .. } if line.bucket.is_empty() => bail!(
            "a value in the root bucket (key {}): the root holds only buckets",
            crate::format::hex(&key)
        ),
        Entry::Value { key, value } => writer.put(&line.bucket, &key, &value),
    }
}
