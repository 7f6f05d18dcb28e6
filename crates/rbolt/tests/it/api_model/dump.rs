//! One canonical text of a whole bucket tree, written the same way from the model and from a
//! read transaction: the reader process sends it for its snapshot, the parent writes it for
//! the model's state, and the two are compared line by line (the first difference printed
//! with the bucket's path, keys and values shown short).
//!
//! The text is a list of lines, buckets one after the other (not nested, so that chains of
//! 1,000 buckets cost a line each): the root first, then each nested bucket in the order of a
//! depth-first walk by key. A bucket's block is its header, `B <block> <parent block> <name>
//! <sequence>`, then its entries in key order: `V <key> <value>` or `N <name>` for a nested
//! bucket. Bytes are hex (`-` for none).

use super::model::{Bytes, Item, Model};
use rbolt::Bucket;

/// Appends `bytes` in hex (`-` when empty) to `out`.
fn hex(bytes: &[u8], out: &mut String) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    if bytes.is_empty() {
        out.push('-');
        return;
    }
    out.reserve(bytes.len() * 2);
    for &byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 15)]));
    }
}

/// The bytes of a hex field, `None` if it is not one.
fn unhex(text: &str) -> Option<Vec<u8>> {
    if text == "-" {
        return Some(Vec::new());
    }
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|at| u8::from_str_radix(text.get(at..at + 2)?, 16).ok())
        .collect()
}

fn header(block: usize, parent: usize, name: &[u8], sequence: u64) -> String {
    let mut line = format!("B {block} {parent} ");
    hex(name, &mut line);
    line.push_str(&format!(" {sequence}"));
    line
}

fn value(key: &[u8], value: &[u8]) -> String {
    let mut line = String::from("V ");
    hex(key, &mut line);
    line.push(' ');
    hex(value, &mut line);
    line
}

fn nested(name: &[u8]) -> String {
    let mut line = String::from("N ");
    hex(name, &mut line);
    line
}

/// The canonical text of `model`.
pub fn of_model(model: &Model) -> Vec<String> {
    let mut lines = Vec::new();
    // (the bucket, its parent's block, its name)
    let mut stack: Vec<(&Model, usize, &[u8])> = vec![(model, 0, b"")];
    let mut blocks = 0;
    while let Some((bucket, parent, name)) = stack.pop() {
        let block = blocks;
        blocks += 1;
        lines.push(header(block, parent, name, bucket.sequence));
        let mut children = Vec::new();
        for (key, item) in &bucket.entries {
            match item {
                Item::Value(bytes) => lines.push(value(key, bytes)),
                Item::Bucket(child) => {
                    lines.push(nested(key));
                    children.push((child, block, key.as_slice()));
                }
            }
        }
        stack.extend(children.into_iter().rev());
    }
    lines
}

/// The canonical text of the tree under `root` (a read transaction's), or what failed.
pub fn of_tree(root: Bucket<'_>) -> Result<Vec<String>, String> {
    let mut lines = Vec::new();
    let mut stack: Vec<(Bucket<'_>, usize, Vec<u8>)> = vec![(root, 0, Vec::new())];
    let mut blocks = 0;
    while let Some((bucket, parent, name)) = stack.pop() {
        let block = blocks;
        blocks += 1;
        lines.push(header(block, parent, &name, bucket.sequence()));
        let mut children = Vec::new();
        for entry in bucket.iter() {
            let entry = entry.map_err(|e| format!("block {block}: {e}"))?;
            match entry.value() {
                Some(bytes) => lines.push(value(entry.key(), bytes)),
                None => {
                    lines.push(nested(entry.key()));
                    let child = bucket
                        .bucket(entry.key())
                        .map_err(|e| format!("block {block}: {e}"))?
                        .ok_or_else(|| {
                            format!(
                                "block {block}: {:?} is listed as a bucket but does not open",
                                Bytes(entry.key().to_vec())
                            )
                        })?;
                    children.push((child, block, entry.key().to_vec()));
                }
            }
        }
        stack.extend(children.into_iter().rev());
    }
    Ok(lines)
}

/// A line of the text, readable: hex fields shown as short byte strings.
fn readable(line: Option<&String>) -> String {
    let Some(line) = line else {
        return "nothing (the text ended)".into();
    };
    let fields: Vec<&str> = line.split(' ').collect();
    let bytes = |at: usize| {
        fields
            .get(at)
            .and_then(|f| unhex(f))
            .map_or_else(|| "??".to_string(), |b| format!("{:?}", Bytes(b)))
    };
    match fields.first() {
        Some(&"B") => format!(
            "the bucket {} (block {}) with sequence {}",
            bytes(3),
            fields.get(1).unwrap_or(&"?"),
            fields.get(4).unwrap_or(&"?")
        ),
        Some(&"V") => format!("the value {} = {}", bytes(1), bytes(2)),
        Some(&"N") => format!("the nested bucket {}", bytes(1)),
        Some(&"E") => format!("a failed read: {}", &line[2..]),
        _ => format!("a line that is not of the text: {line:.80}"),
    }
}

/// The path of names to `block`, from the headers in `lines` (the block numbering of the
/// text both sides agree on up to the first difference).
fn path_of(lines: &[String], block: usize) -> Vec<Bytes> {
    // block -> (parent, name)
    let mut headers = std::collections::HashMap::new();
    for line in lines {
        let fields: Vec<&str> = line.split(' ').collect();
        if let ["B", block, parent, name, _] = fields[..]
            && let (Ok(block), Ok(parent)) = (block.parse::<usize>(), parent.parse::<usize>())
        {
            headers.insert(block, (parent, unhex(name).unwrap_or_default()));
        }
    }
    let mut path = Vec::new();
    let mut at = block;
    while at != 0 {
        let Some((parent, name)) = headers.get(&at) else {
            break;
        };
        path.push(Bytes(name.clone()));
        at = *parent;
    }
    path.reverse();
    path
}

/// `Ok` when `found` (the reader's text) equals `wanted` (the model's), else the first
/// difference, readable.
pub fn compare(found: &[String], wanted: &[String]) -> Result<(), String> {
    let Some(at) = (0..found.len().max(wanted.len())).find(|&i| found.get(i) != wanted.get(i))
    else {
        return Ok(());
    };
    // The block the difference is in: the last header before it (the same on both sides).
    let block = wanted[..at.min(wanted.len())]
        .iter()
        .rev()
        .find_map(|line| line.strip_prefix("B "))
        .and_then(|rest| rest.split(' ').next()?.parse().ok())
        .unwrap_or(0);
    Err(format!(
        "line {at} of {} (the model's: {}), in bucket {:?}: the reader process has {}, the \
         model has {}",
        found.len(),
        wanted.len(),
        path_of(&wanted[..at.min(wanted.len())], block),
        readable(found.get(at)),
        readable(wanted.get(at)),
    ))
}

#[test]
fn the_first_difference_is_named_with_its_bucket() {
    let mut model = Model::default();
    let mut inner = Model::default();
    inner
        .entries
        .insert(b"k".to_vec(), Item::Value(b"v".to_vec()));
    model
        .entries
        .insert(b"a".to_vec(), Item::Bucket(inner.clone()));
    let wanted = of_model(&model);
    assert_eq!(compare(&wanted, &wanted), Ok(()));
    inner
        .entries
        .insert(b"k".to_vec(), Item::Value(b"w".to_vec()));
    model.entries.insert(b"a".to_vec(), Item::Bucket(inner));
    let found = of_model(&model);
    let error = compare(&found, &wanted).unwrap_err();
    assert!(
        error.contains("in bucket [\"a\"]") && error.contains("\"k\" = \"w\""),
        "{error}"
    );
}
