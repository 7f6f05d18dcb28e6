//! Test support for every rbolt crate: the database files Go bbolt wrote (in
//! `tests/data/bbolt`, gzip-compressed), their manifests parsed into a model and written back
//! out (the format itself is `rbolt-manifest`'s), a database read into the same model
//! (`read`, feature `read`), and [`rng`], the seeded generator tests and suites draw their
//! cases from.
//!
//! This crate is a dev-dependency only (and a dependency of the reliability suites). It reads
//! nothing outside the repository.

/// The seeded generator; it lives in `rbolt-testkit`, which has no dependencies, so that
/// the benchmark harnesses can share it without this crate's.
pub use rbolt_testkit::rng;

#[cfg(feature = "read")]
pub mod read;

use flate2::read::GzDecoder;
pub use rbolt_manifest::hex;
use rbolt_manifest::{Entry, Line};
use serde_json::Value;
use std::collections::BTreeMap;
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
            let Line { bucket, entry } = rbolt_manifest::parse_line(line)
                .unwrap_or_else(|e| panic!("manifest line {}: {e}", number + 1));
            let bucket = root.bucket_path_mut(&bucket);
            match entry {
                Entry::Sequence(sequence) => bucket.sequence = sequence,
                Entry::Value { key, value } => {
                    bucket.entries.insert(key, Item::Value(value));
                }
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
        let mut out = Vec::new();
        let mut path = Vec::new();
        self.write_entries(&mut path, &mut out);
        String::from_utf8(out).expect("manifest lines are UTF-8")
    }

    fn write_entries(&self, path: &mut Vec<Vec<u8>>, out: &mut Vec<u8>) {
        let prefix = rbolt_manifest::line_prefix(path);
        for (key, item) in &self.entries {
            match item {
                Item::Value(value) => {
                    rbolt_manifest::write_value_line(out, &prefix, key, value)
                        .expect("writing to a vector cannot fail");
                }
                Item::Bucket(bucket) => {
                    path.push(key.clone());
                    rbolt_manifest::write_sequence_line(
                        out,
                        &rbolt_manifest::line_prefix(path),
                        bucket.sequence,
                    )
                    .expect("writing to a vector cannot fail");
                    bucket.write_entries(path, out);
                    path.pop();
                }
            }
        }
    }
}

/// A bucket name as the fixtures' summaries and manifests spell it: a string, or
/// `{"hex": "..."}`.
pub fn parse_name(value: &Value) -> Vec<u8> {
    rbolt_manifest::parse_name(value).unwrap_or_else(|| panic!("unexpected bucket name {value}"))
}

/// Bytes of lowercase or uppercase hex text.
pub fn parse_hex(text: &str) -> Vec<u8> {
    rbolt_manifest::parse_hex(text).unwrap_or_else(|e| panic!("{e}"))
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
