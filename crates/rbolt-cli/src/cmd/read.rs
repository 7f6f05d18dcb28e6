//! The read commands that go through the database: `version`, `info`, `buckets`, `keys`,
//! `get`, `stats`, `inspect`. Each opens the file read-only with a shared lock and reads one
//! snapshot.

use super::{find_bucket, parse_names, show_path};
use crate::format::{Format, ParseFormat, format_bytes, go_quote, hex, push_go_json_string};
use crate::open::{FileArgs, open_read};
use anyhow::{Result, anyhow, bail};
use clap::Args;
use rbolt::{Bucket, BucketStats, WalkStep};
use serde::Serialize;
use std::ffi::OsString;
use std::io::Write;

/// `rbolt version`.
pub fn version() -> Result<()> {
    let mut w = crate::out::stdout();
    writeln!(w, "rbolt Version: {}", env!("CARGO_PKG_VERSION"))?;
    writeln!(w, "File Format Version: {}", rbolt_page::VERSION)?;
    writeln!(w, "Rust Version: {}", env!("RBOLT_RUSTC_VERSION"))?;
    writeln!(
        w,
        "OS/Arch: {}/{}",
        std::env::consts::OS,
        std::env::consts::ARCH
    )?;
    crate::out::flush(w)
}

/// Arguments of `info`.
#[derive(Args, Debug)]
pub struct InfoArgs {
    #[command(flatten)]
    pub file: FileArgs,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
}

#[derive(Serialize)]
struct Info {
    page_size: usize,
    version: u32,
    meta_page: u64,
    txid: u64,
    root: u64,
    freelist: Option<u64>,
    hwm: u64,
    flags: u32,
    checksum: String,
    file_size: u64,
}

/// `rbolt info PATH`: bbolt prints the page size only; this prints it first, then the rest of
/// the meta in use.
pub fn info(args: &InfoArgs) -> Result<()> {
    let db = open_read(&args.file.path, &args.file.lock)?;
    let tx = db.begin_read()?;
    let meta = *tx.meta();
    let info = Info {
        page_size: db.page_size(),
        version: meta.version,
        meta_page: meta.txid % 2,
        txid: meta.txid,
        root: meta.root.root,
        freelist: meta.has_freelist().then_some(meta.freelist),
        hwm: meta.pgid,
        flags: meta.flags,
        checksum: format!("{:016x}", meta.checksum),
        file_size: std::fs::metadata(&args.file.path)?.len(),
    };
    let mut w = crate::out::stdout();
    if args.json {
        serde_json::to_writer(&mut w, &info)?;
        writeln!(w)?;
    } else {
        writeln!(w, "Page Size: {}", info.page_size)?;
        writeln!(w, "Version: {}", info.version)?;
        writeln!(w, "Meta Page: {}", info.meta_page)?;
        writeln!(w, "Txn ID: {}", info.txid)?;
        writeln!(w, "Root: <pgid={}>", info.root)?;
        match info.freelist {
            Some(pgid) => writeln!(w, "Freelist: <pgid={pgid}>")?,
            None => writeln!(w, "Freelist: <none> (not persisted)")?,
        }
        writeln!(w, "HWM: <pgid={}>", info.hwm)?;
        writeln!(w, "Flags: {:08x}", info.flags)?;
        writeln!(w, "Checksum: {}", info.checksum)?;
        writeln!(w, "File Size: {} bytes", info.file_size)?;
    }
    crate::out::flush(w)
}

/// Arguments of `buckets`.
#[derive(Args, Debug)]
pub struct BucketsArgs {
    #[command(flatten)]
    pub file: FileArgs,
    /// How to print bucket names (bbolt prints the raw bytes).
    #[arg(long, short = 'f', value_enum, default_value = "bytes")]
    pub format: Format,
}

/// `rbolt buckets PATH`: the top-level bucket names, one a line.
pub fn buckets(args: &BucketsArgs) -> Result<()> {
    let db = open_read(&args.file.path, &args.file.lock)?;
    let tx = db.begin_read()?;
    let mut w = crate::out::stdout();
    for entry in tx.buckets() {
        let entry = entry?;
        if entry.is_bucket() {
            crate::format::writeln_bytes(&mut w, entry.key(), args.format)?;
        }
    }
    crate::out::flush(w)
}

/// Arguments of `keys`.
#[derive(Args, Debug)]
pub struct KeysArgs {
    #[command(flatten)]
    pub file: FileArgs,
    /// The bucket, then the names of nested buckets down to the one to list.
    #[arg(required = true, num_args = 1.., value_name = "BUCKET")]
    pub buckets: Vec<OsString>,
    /// How to print keys.
    #[arg(long, short = 'f', value_enum, default_value = "auto")]
    pub format: Format,
    /// How bucket names on the command line are written (new in rbolt: reaches binary names).
    #[arg(long, value_enum, default_value = "ascii-encoded")]
    pub bucket_format: ParseFormat,
}

/// `rbolt keys PATH BUCKET [SUBBUCKET...]`: every key of the bucket, nested bucket names
/// included, streamed.
pub fn keys(args: &KeysArgs) -> Result<()> {
    let names = parse_names(&args.buckets, args.bucket_format)?;
    let db = open_read(&args.file.path, &args.file.lock)?;
    let tx = db.begin_read()?;
    let bucket = find_bucket(&tx, &names)?;
    let mut w = crate::out::stdout();
    for entry in bucket.iter() {
        crate::format::writeln_bytes(&mut w, entry?.key(), args.format)?;
    }
    crate::out::flush(w)
}

/// Arguments of `get`.
#[derive(Args, Debug)]
pub struct GetArgs {
    #[command(flatten)]
    pub file: FileArgs,
    /// The bucket, then the names of nested buckets down to the one that holds the key.
    #[arg(required = true, num_args = 1.., value_name = "BUCKET")]
    pub buckets: Vec<OsString>,
    /// The key.
    pub key: OsString,
    /// How the key on the command line is written.
    #[arg(long, value_enum, default_value = "ascii-encoded")]
    pub parse_format: ParseFormat,
    /// How bucket names on the command line are written (new in rbolt: reaches binary names).
    #[arg(long, value_enum, default_value = "ascii-encoded")]
    pub bucket_format: ParseFormat,
    /// How to print the value.
    #[arg(long, short = 'f', value_enum, default_value = "auto")]
    pub format: Format,
}

/// `rbolt get PATH BUCKET... KEY`.
pub fn get(args: &GetArgs) -> Result<()> {
    let names = parse_names(&args.buckets, args.bucket_format)?;
    let key = crate::format::parse_arg(&args.key, args.parse_format, "key")?;
    if key.is_empty() {
        bail!("key required");
    }
    let db = open_read(&args.file.path, &args.file.lock)?;
    let tx = db.begin_read()?;
    let bucket = find_bucket(&tx, &names)?;
    let value = bucket.get(&key)?.ok_or_else(|| {
        let shown = format!("key {} (hex {})", go_quote(&key), hex(&key));
        if bucket.bucket(&key).ok().flatten().is_some() {
            anyhow!(
                "{shown} in bucket {} is a nested bucket, not a value",
                show_path(&names)
            )
        } else {
            anyhow!("{shown} not found in bucket {}", show_path(&names))
        }
    })?;
    let mut w = crate::out::stdout();
    crate::format::writeln_bytes(&mut w, value, args.format)?;
    crate::out::flush(w)
}

/// Arguments of `stats`.
#[derive(Args, Debug)]
pub struct StatsArgs {
    #[command(flatten)]
    pub file: FileArgs,
    /// Count only the top-level buckets whose names start with these bytes.
    #[arg(default_value = "")]
    pub prefix: OsString,
    /// Print one JSON object (bbolt's `BucketStats` field names) instead of text.
    #[arg(long)]
    pub json: bool,
}

/// `BucketStats` with bbolt's field names, for `--json`.
#[derive(Serialize)]
#[serde(rename_all = "PascalCase")]
struct StatsJson {
    bucket_count: usize,
    #[serde(rename = "BranchPageN")]
    branch_page_n: usize,
    #[serde(rename = "BranchOverflowN")]
    branch_overflow_n: usize,
    #[serde(rename = "LeafPageN")]
    leaf_page_n: usize,
    #[serde(rename = "LeafOverflowN")]
    leaf_overflow_n: usize,
    #[serde(rename = "KeyN")]
    key_n: usize,
    depth: usize,
    branch_alloc: usize,
    branch_inuse: usize,
    leaf_alloc: usize,
    leaf_inuse: usize,
    #[serde(rename = "BucketN")]
    bucket_n: usize,
    #[serde(rename = "InlineBucketN")]
    inline_bucket_n: usize,
    inline_bucket_inuse: usize,
    /// The reader table's slots, when the file has a live writer (issue 50): absent
    /// otherwise, so that the object is bbolt's.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    reader_processes: Vec<super::readers::ReaderSlotStats>,
}

/// `part * 100 / whole` truncated, computed in single precision as bbolt's Go code does, so
/// the percentages agree to the digit.
fn percent(part: usize, whole: usize) -> i64 {
    if whole == 0 {
        return 0;
    }
    (part as f32 * 100.0 / whole as f32) as i64
}

/// `rbolt stats PATH [PREFIX]`: the sum of the statistics of the matching top-level buckets.
pub fn stats(args: &StatsArgs) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    let prefix = args.prefix.as_bytes();
    let db = open_read(&args.file.path, &args.file.lock)?;
    let tx = db.begin_read()?;
    let root = tx.root();
    let mut s = BucketStats::default();
    let mut count = 0;
    for entry in root.iter() {
        let entry = entry?;
        if !entry.is_bucket() || !entry.key().starts_with(prefix) {
            continue;
        }
        let bucket = root.bucket(entry.key())?.ok_or_else(|| {
            anyhow!(
                "bucket {} vanished",
                format_bytes(entry.key(), Format::Auto)
            )
        })?;
        s.add(&bucket.stats()?);
        count += 1;
    }
    let readers = super::readers::reader_slots(&db)?;
    drop(tx);
    let mut w = crate::out::stdout();
    if args.json {
        let json = StatsJson {
            bucket_count: count,
            branch_page_n: s.branch_page_n,
            branch_overflow_n: s.branch_overflow_n,
            leaf_page_n: s.leaf_page_n,
            leaf_overflow_n: s.leaf_overflow_n,
            key_n: s.key_n,
            depth: s.depth,
            branch_alloc: s.branch_alloc,
            branch_inuse: s.branch_inuse,
            leaf_alloc: s.leaf_alloc,
            leaf_inuse: s.leaf_inuse,
            bucket_n: s.bucket_n,
            inline_bucket_n: s.inline_bucket_n,
            inline_bucket_inuse: s.inline_bucket_inuse,
            reader_processes: readers.into_iter().map(Into::into).collect(),
        };
        serde_json::to_writer(&mut w, &json)?;
        writeln!(w)?;
        return crate::out::flush(w);
    }
    writeln!(w, "Aggregate statistics for {count} buckets\n")?;
    writeln!(w, "Page count statistics")?;
    writeln!(w, "\tNumber of logical branch pages: {}", s.branch_page_n)?;
    writeln!(
        w,
        "\tNumber of physical branch overflow pages: {}",
        s.branch_overflow_n
    )?;
    writeln!(w, "\tNumber of logical leaf pages: {}", s.leaf_page_n)?;
    writeln!(
        w,
        "\tNumber of physical leaf overflow pages: {}",
        s.leaf_overflow_n
    )?;
    writeln!(w, "Tree statistics")?;
    writeln!(w, "\tNumber of keys/value pairs: {}", s.key_n)?;
    writeln!(w, "\tNumber of levels in B+tree: {}", s.depth)?;
    writeln!(w, "Page size utilization")?;
    writeln!(
        w,
        "\tBytes allocated for physical branch pages: {}",
        s.branch_alloc
    )?;
    writeln!(
        w,
        "\tBytes actually used for branch data: {} ({}%)",
        s.branch_inuse,
        percent(s.branch_inuse, s.branch_alloc)
    )?;
    writeln!(
        w,
        "\tBytes allocated for physical leaf pages: {}",
        s.leaf_alloc
    )?;
    writeln!(
        w,
        "\tBytes actually used for leaf data: {} ({}%)",
        s.leaf_inuse,
        percent(s.leaf_inuse, s.leaf_alloc)
    )?;
    writeln!(w, "Bucket statistics")?;
    writeln!(w, "\tTotal number of buckets: {}", s.bucket_n)?;
    writeln!(
        w,
        "\tTotal number on inlined buckets: {} ({}%)",
        s.inline_bucket_n,
        percent(s.inline_bucket_n, s.bucket_n)
    )?;
    writeln!(
        w,
        "\tBytes used for inlined buckets: {} ({}%)",
        s.inline_bucket_inuse,
        percent(s.inline_bucket_inuse, s.leaf_inuse)
    )?;
    super::readers::write_text(&mut w, &readers)?;
    crate::out::flush(w)
}

/// Arguments of `inspect`.
#[derive(Args, Debug)]
pub struct InspectArgs {
    #[command(flatten)]
    pub file: FileArgs,
}

/// `rbolt inspect PATH`: the bucket tree as bbolt prints it (Go's `json.MarshalIndent` with
/// four spaces), written as it is walked rather than built in memory first.
pub fn inspect(args: &InspectArgs) -> Result<()> {
    let db = open_read(&args.file.path, &args.file.lock)?;
    let tx = db.begin_read()?;
    let mut w = crate::out::stdout();
    let root = tx.root();
    // One entry per open object: whether it has a "buckets" array, and whether an element
    // was written into it yet.
    // The reader processes of a live writer, a field of the root object after bbolt's.
    let readers = super::readers::inspect_field(&super::readers::reader_slots(&db)?)?;
    let keep_open = !readers.is_empty();
    let mut open = vec![(open_object(&mut w, b"root", &root, 0, keep_open)?, false)];
    let mut walk = root.walk();
    while let Some(step) = walk.next_step() {
        match step? {
            WalkStep::Value { .. } => {}
            WalkStep::Enter { name, bucket } => {
                let depth = open.len();
                let (_, written) = open.last_mut().expect("the root is open");
                if *written {
                    w.write_all(b",\n")?;
                }
                *written = true;
                write!(w, "{}        ", "    ".repeat(2 * (depth - 1)))?;
                open.push((open_object(&mut w, name, &bucket, depth, false)?, false));
            }
            WalkStep::Leave => close_object(&mut w, open.pop(), open.len())?,
        }
    }
    match open.pop() {
        Some((true, _)) => write!(w, "\n    ]{readers}\n}}")?,
        _ if keep_open => write!(w, "{readers}\n}}")?,
        _ => {}
    }
    w.write_all(b"\n")?;
    crate::out::flush(w)
}

/// Writes the start of `bucket`'s object at nesting `depth` and returns whether it has a
/// "buckets" array to fill; an object without one is written whole, unless `keep_open` (the
/// caller adds fields and closes it).
fn open_object(
    w: &mut impl Write,
    name: &[u8],
    bucket: &Bucket<'_>,
    depth: usize,
    keep_open: bool,
) -> Result<bool> {
    // One pass to count, so the fields come out in bbolt's order (name, keyN, buckets)
    // without holding the children in memory.
    let mut key_n = 0usize;
    let mut has_children = false;
    for entry in bucket.iter() {
        if entry?.is_bucket() {
            has_children = true;
        } else {
            key_n += 1;
        }
    }
    let pad = "    ".repeat(2 * depth);
    let mut text = String::from("{\n");
    text.push_str(&pad);
    text.push_str("    \"name\": ");
    push_go_json_string(&mut text, name);
    text.push_str(&format!(",\n{pad}    \"keyN\": {key_n}"));
    if has_children {
        text.push_str(&format!(",\n{pad}    \"buckets\": [\n"));
    } else if !keep_open {
        text.push_str(&format!("\n{pad}}}"));
    }
    w.write_all(text.as_bytes())?;
    Ok(has_children)
}

/// Ends the object `open_object` started at nesting `depth`, if it was left open.
fn close_object(w: &mut impl Write, object: Option<(bool, bool)>, depth: usize) -> Result<()> {
    if let Some((true, _)) = object {
        let pad = "    ".repeat(2 * depth);
        write!(w, "\n{pad}    ]\n{pad}}}")?;
    }
    Ok(())
}
