//! The model a database is compared with: a tree of buckets, as `rbolt-fixtures` defines it
//! and reads a database into.

pub use rbolt_fixtures::read::{NESTING_MAX, read_bucket, read_db};
pub use rbolt_fixtures::{Bucket as Tree, Item};

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

/// A 64-bit digest of a tree's whole content (FNV-1a over a canonical encoding), printed with
/// each acknowledgement of the kill loop.
pub fn digest(tree: &Tree) -> u64 {
    let mut hash = Fnv::default();
    digest_into(tree, &mut hash);
    hash.0
}

fn digest_into(tree: &Tree, hash: &mut Fnv) {
    hash.u64(tree.sequence);
    hash.u64(tree.entries.len() as u64);
    for (key, item) in &tree.entries {
        hash.bytes(key);
        match item {
            Item::Value(value) => {
                hash.u64(0);
                hash.bytes(value);
            }
            Item::Bucket(child) => {
                hash.u64(1);
                digest_into(child, hash);
            }
        }
    }
}

struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Fnv {
        Fnv(0xCBF2_9CE4_8422_2325)
    }
}

impl Fnv {
    fn u64(&mut self, n: u64) {
        for byte in n.to_le_bytes() {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01B3);
        }
    }

    fn bytes(&mut self, bytes: &[u8]) {
        self.u64(bytes.len() as u64);
        for &byte in bytes {
            self.0 = (self.0 ^ u64::from(byte)).wrapping_mul(0x0100_0000_01B3);
        }
    }
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
