//! Test support for every rbolt crate: the database files Go bbolt wrote (in
//! `tests/data/bbolt`, gzip-compressed), their manifests parsed into a model, and the manifest
//! format written back out.
//!
//! This crate is a dev-dependency only. It reads nothing outside the repository.

use flate2::read::GzDecoder;
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::Read;
use std::path::{Path, PathBuf};

/// Every fixture, smallest first.
pub const NAMES: &[&str] = &[
    "empty",
    "small",
    "pagesize-16k",
    "bigfreelist",
    "overflow",
    "hashmap",
    "nofreelistsync",
    "deep",
];

/// The directory that holds the fixtures.
pub fn data_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/data/bbolt")
}

fn read_gz(path: &Path) -> Vec<u8> {
    let file = std::fs::File::open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()));
    let mut out = Vec::new();
    GzDecoder::new(file)
        .read_to_end(&mut out)
        .unwrap_or_else(|e| panic!("gunzip {}: {e}", path.display()));
    out
}

/// The bytes of fixture `name`'s database file.
pub fn db_bytes(name: &str) -> Vec<u8> {
    read_gz(&data_dir().join(format!("{name}.db.gz")))
}

/// Writes fixture `name`'s database into `dir` as `NAME.db` and returns its path.
pub fn write_db(name: &str, dir: &Path) -> PathBuf {
    let path = dir.join(format!("{name}.db"));
    std::fs::write(&path, db_bytes(name)).expect("write fixture copy");
    path
}

/// The text of fixture `name`'s manifest.
pub fn manifest_text(name: &str) -> String {
    String::from_utf8(read_gz(
        &data_dir().join(format!("{name}.manifest.jsonl.gz")),
    ))
    .expect("manifest is UTF-8")
}

/// Fixture `name`'s content, parsed from its manifest.
pub fn manifest(name: &str) -> Bucket {
    Bucket::from_manifest(&manifest_text(name))
}

/// Fixture `name`'s summary (`NAME.json`).
pub fn summary(name: &str) -> Value {
    let path = data_dir().join(format!("{name}.json"));
    let text = std::fs::read_to_string(&path).expect("read summary");
    serde_json::from_str(&text).expect("summary is JSON")
}

/// A bucket's logical content: its sequence and its entries in key order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Bucket {
    /// The bucket's sequence number.
    pub sequence: u64,
    /// Keys and what they hold.
    pub entries: BTreeMap<Vec<u8>, Item>,
}

/// What a key of a bucket holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Item {
    /// A plain value.
    Value(Vec<u8>),
    /// A nested bucket.
    Bucket(Bucket),
}

impl Bucket {
    /// Parses manifest lines into the root bucket (whose entries are the top-level buckets).
    pub fn from_manifest(text: &str) -> Bucket {
        let mut root = Bucket::default();
        for (number, line) in text.lines().enumerate() {
            let value: Value = serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("manifest line {}: {e}", number + 1));
            let path: Vec<Vec<u8>> = value["bucket"]
                .as_array()
                .expect("bucket path")
                .iter()
                .map(parse_name)
                .collect();
            let bucket = root.bucket_path_mut(&path);
            if let Some(sequence) = value.get("sequence") {
                bucket.sequence = sequence.as_u64().expect("sequence is an integer");
            } else {
                let key = parse_hex(value["key"].as_str().expect("key"));
                let val = parse_hex(value["value"].as_str().expect("value"));
                bucket.entries.insert(key, Item::Value(val));
            }
        }
        root
    }

    /// The bucket at `path`, created (empty) where missing.
    pub fn bucket_path_mut(&mut self, path: &[Vec<u8>]) -> &mut Bucket {
        let mut bucket = self;
        for name in path {
            let item = bucket
                .entries
                .entry(name.clone())
                .or_insert_with(|| Item::Bucket(Bucket::default()));
            bucket = match item {
                Item::Bucket(child) => child,
                Item::Value(_) => panic!("manifest path crosses a value"),
            };
        }
        bucket
    }

    /// The nested bucket named `name`.
    pub fn bucket(&self, name: &[u8]) -> Option<&Bucket> {
        match self.entries.get(name)? {
            Item::Bucket(bucket) => Some(bucket),
            Item::Value(_) => None,
        }
    }

    /// Number of plain key/value pairs here and in every nested bucket.
    pub fn key_count(&self) -> usize {
        self.entries
            .values()
            .map(|item| match item {
                Item::Value(_) => 1,
                Item::Bucket(bucket) => bucket.key_count(),
            })
            .sum()
    }

    /// Number of buckets nested here, at any depth.
    pub fn bucket_count(&self) -> usize {
        self.entries
            .values()
            .map(|item| match item {
                Item::Value(_) => 0,
                Item::Bucket(bucket) => 1 + bucket.bucket_count(),
            })
            .sum()
    }

    /// Writes the content in manifest form (this is the root bucket: its sequence is not
    /// written).
    pub fn to_manifest(&self) -> String {
        let mut out = String::new();
        let mut path = Vec::new();
        self.write_entries(&mut path, &mut out);
        out
    }

    fn write_entries(&self, path: &mut Vec<Vec<u8>>, out: &mut String) {
        for (key, item) in &self.entries {
            match item {
                Item::Value(value) => {
                    out.push_str("{\"bucket\":");
                    write_path(path, out);
                    let _ = writeln!(
                        out,
                        ",\"key\":\"{}\",\"value\":\"{}\"}}",
                        hex(key),
                        hex(value)
                    );
                }
                Item::Bucket(bucket) => {
                    path.push(key.clone());
                    out.push_str("{\"bucket\":");
                    write_path(path, out);
                    let _ = writeln!(out, ",\"sequence\":{}}}", bucket.sequence);
                    bucket.write_entries(path, out);
                    path.pop();
                }
            }
        }
    }
}

fn parse_name(value: &Value) -> Vec<u8> {
    match value {
        Value::String(text) => text.as_bytes().to_vec(),
        Value::Object(map) => parse_hex(map["hex"].as_str().expect("hex name")),
        other => panic!("unexpected bucket name {other}"),
    }
}

/// Lowercase hex of `bytes`.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// Bytes of lowercase or uppercase hex text.
pub fn parse_hex(text: &str) -> Vec<u8> {
    assert!(text.len().is_multiple_of(2), "odd hex length");
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&text[i..i + 2], 16).expect("hex digit"))
        .collect()
}

fn write_path(path: &[Vec<u8>], out: &mut String) {
    out.push('[');
    for (i, name) in path.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        match std::str::from_utf8(name) {
            Ok(text) if !text.chars().any(char::is_control) => {
                out.push('"');
                for c in text.chars() {
                    if c == '"' || c == '\\' {
                        out.push('\\');
                    }
                    out.push(c);
                }
                out.push('"');
            }
            _ => {
                let _ = write!(out, "{{\"hex\":\"{}\"}}", hex(name));
            }
        }
    }
    out.push(']');
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_manifest_round_trips_and_matches_its_summary() {
        for name in NAMES {
            let text = manifest_text(name);
            let content = Bucket::from_manifest(&text);
            assert_eq!(content.to_manifest(), text, "{name}");
            let summary = summary(name);
            assert_eq!(
                content.key_count() as u64,
                summary["n_keys"].as_u64().unwrap(),
                "{name}"
            );
            assert_eq!(
                content.bucket_count() as u64,
                summary["n_buckets"].as_u64().unwrap(),
                "{name}"
            );
        }
    }
}
