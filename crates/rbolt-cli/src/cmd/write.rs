//! `put` and `delete`: small edits in one transaction each (bbolt's tool has neither). They
//! open the file read-write with an exclusive lock, and never create a file that is missing.

use super::{parse_names, show_path};
use crate::format::{ParseFormat, go_quote, hex};
use crate::open::{FileArgs, LockArgs, open_write};
use anyhow::{Context, Result, anyhow, bail};
use clap::Args;
use rbolt::{BucketMut, Options, WriteTx};
use std::ffi::OsString;
use std::path::PathBuf;

/// The bucket at `names` in `tx`, open for writing; missing buckets are created when `create`,
/// else reported.
pub fn bucket_mut<'t>(
    tx: &'t mut WriteTx<'_>,
    names: &[Vec<u8>],
    create: bool,
) -> Result<BucketMut<'t>> {
    let path: Vec<&[u8]> = names.iter().map(Vec::as_slice).collect();
    let on_path = || format!("bucket {}", show_path(names));
    if create {
        return tx.create_bucket_path(&path).with_context(on_path);
    }
    tx.bucket_path_mut(&path)
        .with_context(on_path)?
        .ok_or_else(|| anyhow!("bucket not found: {}", show_path(names)))
}

/// Arguments of `put`.
#[derive(Args, Debug)]
#[command(override_usage = "rbolt put [OPTIONS] <PATH> <BUCKET>... <KEY> <VALUE>")]
pub struct PutArgs {
    /// The database file (it must exist).
    pub path: PathBuf,
    /// The bucket, the names of nested buckets, the key, then the value.
    #[arg(required = true, num_args = 3.., value_names = ["BUCKET", "KEY", "VALUE"])]
    pub args: Vec<OsString>,
    /// How the key and the value on the command line are written.
    #[arg(long, value_enum, default_value = "ascii-encoded")]
    pub parse_format: ParseFormat,
    /// How bucket names on the command line are written.
    #[arg(long, value_enum, default_value = "ascii-encoded")]
    pub bucket_format: ParseFormat,
    /// Create the bucket (and its parents) when missing, instead of failing.
    #[arg(long, short = 'p')]
    pub create_buckets: bool,
    #[command(flatten)]
    pub lock: LockArgs,
}

/// `rbolt put PATH BUCKET... KEY VALUE`.
pub fn put(args: &PutArgs) -> Result<()> {
    let [buckets @ .., key, value] = args.args.as_slice() else {
        unreachable!("clap requires three arguments");
    };
    let names = parse_names(buckets, args.bucket_format)?;
    let key = crate::format::parse_arg(key, args.parse_format, "key")?;
    let value = crate::format::parse_arg(value, args.parse_format, "value")?;
    let db = open_write(&args.path, &args.lock, false, Options::default())?;
    let mut tx = db.begin_write()?;
    bucket_mut(&mut tx, &names, args.create_buckets)?
        .put(&key, &value)
        .with_context(|| format!("cannot put key {}", go_quote(&key)))?;
    tx.commit()?;
    Ok(())
}

/// Arguments of `delete`.
#[derive(Args, Debug)]
#[command(
    override_usage = "rbolt delete [OPTIONS] <PATH> <BUCKET>... <KEY>\n       \
                          rbolt delete --bucket [OPTIONS] <PATH> <BUCKET>..."
)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub file: FileArgs,
    /// The bucket, the names of nested buckets, then the key (with --bucket: the path of the
    /// bucket to delete).
    #[arg(required = true, num_args = 1.., value_names = ["BUCKET", "KEY"])]
    pub args: Vec<OsString>,
    /// Delete the bucket the arguments name, and everything in it, instead of a key.
    #[arg(long)]
    pub bucket: bool,
    /// How the key on the command line is written.
    #[arg(long, value_enum, default_value = "ascii-encoded")]
    pub parse_format: ParseFormat,
    /// How bucket names on the command line are written.
    #[arg(long, value_enum, default_value = "ascii-encoded")]
    pub bucket_format: ParseFormat,
}

/// `rbolt delete PATH BUCKET... KEY` or `rbolt delete --bucket PATH BUCKET...`. A missing key
/// or bucket is an error, and nothing is written then.
pub fn delete(args: &DeleteArgs) -> Result<()> {
    if args.bucket {
        let names = parse_names(&args.args, args.bucket_format)?;
        let (name, parent) = names.split_last().expect("clap requires one argument");
        let db = open_write(&args.file.path, &args.file.lock, false, Options::default())?;
        let mut tx = db.begin_write()?;
        let deleted = if parent.is_empty() {
            tx.delete_bucket(name)
        } else {
            bucket_mut(&mut tx, parent, false)?.delete_bucket(name)
        };
        deleted.map_err(|e| match e {
            rbolt::Error::BucketNotFound => anyhow!("bucket not found: {}", show_path(&names)),
            e => anyhow!(e).context(format!("cannot delete bucket {}", show_path(&names))),
        })?;
        tx.commit()?;
        return Ok(());
    }
    let [buckets @ .., key] = args.args.as_slice() else {
        unreachable!("clap requires one argument");
    };
    if buckets.is_empty() {
        bail!("a bucket and a key are required (or --bucket to delete a bucket)");
    }
    let names = parse_names(buckets, args.bucket_format)?;
    let key = crate::format::parse_arg(key, args.parse_format, "key")?;
    let db = open_write(&args.file.path, &args.file.lock, false, Options::default())?;
    let mut tx = db.begin_write()?;
    let mut bucket = bucket_mut(&mut tx, &names, false)?;
    let deleted = bucket.delete(&key).map_err(|e| match e {
        rbolt::Error::IncompatibleValue => anyhow!(
            "key {} holds a nested bucket; use --bucket to delete a bucket",
            go_quote(&key)
        ),
        e => anyhow!(e),
    })?;
    if !deleted {
        bail!(
            "key {} (hex {}) not found in bucket {}",
            go_quote(&key),
            hex(&key),
            show_path(&names)
        );
    }
    drop(bucket);
    tx.commit()?;
    Ok(())
}
