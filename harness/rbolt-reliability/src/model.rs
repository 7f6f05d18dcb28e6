//! The model a database is compared with: a tree of buckets, as `rbolt-fixtures` defines it
//! and reads a database into.

pub use rbolt_fixtures::read::{NESTING_MAX, read_bucket, read_db};
pub use rbolt_fixtures::{Bucket as Tree, Item};
use rbolt_testkit::fnv::Fnv1a64;

/// A bucket path: the top-level name, then nested names.
pub type Path = Vec<Vec<u8>>;

/// The top-level bucket holding the workload's progress.
pub const PROGRESS_BUCKET: &[u8] = b"progress";
/// The key in [`PROGRESS_BUCKET`] holding the number of the last committed workload step.
pub const STEP_KEY: &[u8] = b"step";

/// The bucket at `path` in `tree`, if there is one.
pub fn bucket_at<'a>(tree: &'a Tree, path: &[Vec<u8>]) -> Option<&'a Tree> {
    let mut bucket = tree;
    for name in path {
        match bucket.entries.get(name)? {
            Item::Bucket(child) => bucket = child,
            Item::Value(_) => return None,
        }
    }
    Some(bucket)
}

/// The bucket at `path` in `tree`, for editing, if there is one.
pub fn bucket_at_mut<'a>(tree: &'a mut Tree, path: &[Vec<u8>]) -> Option<&'a mut Tree> {
    let mut bucket = tree;
    for name in path {
        match bucket.entries.get_mut(name)? {
            Item::Bucket(child) => bucket = child,
            Item::Value(_) => return None,
        }
    }
    Some(bucket)
}

/// The workload step a state was committed by (0 before the first step).
pub fn progress(tree: &Tree) -> u64 {
    match bucket_at(tree, &[PROGRESS_BUCKET.to_vec()]).and_then(|b| b.entries.get(STEP_KEY)) {
        Some(Item::Value(value)) if value.len() == 8 => {
            u64::from_be_bytes(value.as_slice().try_into().expect("8 bytes"))
        }
        _ => 0,
    }
}

/// A 64-bit digest of a tree's whole content (FNV-1a over a canonical encoding: numbers as 8
/// little-endian bytes, byte strings after their length), printed with each acknowledgement
/// of the kill loop.
pub fn digest(tree: &Tree) -> u64 {
    let mut hash = Fnv1a64::new();
    digest_into(tree, &mut hash);
    hash.finish()
}

fn digest_into(tree: &Tree, hash: &mut Fnv1a64) {
    hash.write(&tree.sequence.to_le_bytes());
    hash.write(&(tree.entries.len() as u64).to_le_bytes());
    for (key, item) in &tree.entries {
        digest_bytes(key, hash);
        match item {
            Item::Value(value) => {
                hash.write(&0u64.to_le_bytes());
                digest_bytes(value, hash);
            }
            Item::Bucket(child) => {
                hash.write(&1u64.to_le_bytes());
                digest_into(child, hash);
            }
        }
    }
}

fn digest_bytes(bytes: &[u8], hash: &mut Fnv1a64) {
    hash.write(&(bytes.len() as u64).to_le_bytes());
    hash.write(bytes);
}

/// A short description of how two trees differ, for failure messages.
pub fn describe_difference(expected: &Tree, actual: &Tree) -> String {
    fn walk(expected: &Tree, actual: &Tree, path: &mut Vec<String>) -> Option<String> {
        let here = path.join("/");
        let here = || format!("/{here}");
        if expected.sequence != actual.sequence {
            return Some(format!(
                "{}: sequence {} != {}",
                here(),
                expected.sequence,
                actual.sequence
            ));
        }
        for (key, item) in &expected.entries {
            let name = String::from_utf8_lossy(key).into_owned();
            match (item, actual.entries.get(key)) {
                (_, None) => return Some(format!("{}: missing key {name}", here())),
                (Item::Value(a), Some(Item::Value(b))) if a != b => {
                    return Some(format!(
                        "{}: key {name}: value of {} bytes != {} bytes",
                        here(),
                        a.len(),
                        b.len()
                    ));
                }
                (Item::Bucket(a), Some(Item::Bucket(b))) => {
                    path.push(name);
                    let found = walk(a, b, path);
                    path.pop();
                    if found.is_some() {
                        return found;
                    }
                }
                (Item::Value(_), Some(Item::Value(_))) => {}
                _ => return Some(format!("{}: key {name}: bucket vs value", here())),
            }
        }
        actual
            .entries
            .keys()
            .find(|key| !expected.entries.contains_key(*key))
            .map(|key| {
                format!(
                    "{}: unexpected key {}",
                    here(),
                    String::from_utf8_lossy(key)
                )
            })
    }
    walk(expected, actual, &mut Vec::new()).unwrap_or_else(|| "no difference".into())
}

/// The freelist's figures in `stats` (free pages, pending pages, free bytes, freelist bytes),
/// to compare before and after a failed commit.
pub fn freelist_counts(stats: &rbolt::DbStats) -> (usize, usize, usize, usize) {
    (
        stats.free_page_n,
        stats.pending_page_n,
        stats.free_alloc,
        stats.freelist_inuse,
    )
}
