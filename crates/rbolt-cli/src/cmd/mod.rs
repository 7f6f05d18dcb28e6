//! One module per group of commands, each with its clap arguments and its function.

pub mod bench;
pub mod check;
pub mod compact;
pub mod pages;
pub mod read;
pub mod readers;
pub mod surgery;
pub mod transfer;
pub mod vacuum;
pub mod write;

use crate::format::{Format, ParseFormat, format_bytes};
use anyhow::{Result, anyhow};
use rbolt::{Bucket, ReadTx};
use std::ffi::OsString;

/// Bucket names given on the command line, as bytes.
pub fn parse_names(names: &[OsString], format: ParseFormat) -> Result<Vec<Vec<u8>>> {
    names
        .iter()
        .map(|name| crate::format::parse_arg(name, format, "bucket name"))
        .collect()
}

/// A bucket path for messages: each name shown as `auto` shows it, joined by `/`.
pub fn show_path(names: &[Vec<u8>]) -> String {
    names
        .iter()
        .map(|name| format_bytes(name, Format::Auto))
        .collect::<Vec<_>>()
        .join("/")
}

/// The bucket at `names` (top-level name first), or an error naming the path.
pub fn find_bucket<'t>(tx: &'t ReadTx<'_>, names: &[Vec<u8>]) -> Result<Bucket<'t>> {
    let not_found = || anyhow!("bucket not found: {}", show_path(names));
    let (first, rest) = names.split_first().ok_or_else(not_found)?;
    let mut bucket = tx.bucket(first)?.ok_or_else(not_found)?;
    for name in rest {
        bucket = bucket.bucket(name)?.ok_or_else(not_found)?;
    }
    Ok(bucket)
}

/// Names `path` in the error of a command working on it, unless the message names it already
/// (the facade's open errors do). The dispatchers (`main`'s `run`, `surgery::run`) call it, so
/// that no command has to.
pub fn in_file<T>(path: &std::path::Path, result: Result<T>) -> Result<T> {
    result.map_err(|error| {
        let shown = path.display().to_string();
        if format!("{error:#}").contains(&shown) {
            error
        } else {
            error.context(shown)
        }
    })
}
