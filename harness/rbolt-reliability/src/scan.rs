//! A full scan of a database that may be corrupt: every bucket, nested ones included, read
//! forwards and backwards, a few keys looked up. Its own work is bounded (no recursion, a cap
//! on entries and nesting), so what it measures is rbolt's.

use crate::model::{Item, NESTING_MAX, Path, Tree, bucket_at_mut};
use rbolt::{Bucket, Db};

/// Why a scan stopped early.
#[derive(Debug)]
pub enum ScanError {
    /// rbolt returned an error (the good outcome on a corrupt file).
    Db(rbolt::Error),
    /// One bucket yielded more entries than the file can hold: rbolt walked some pages again
    /// and again.
    Overrun {
        /// The cap that was reached.
        entries_max: u64,
    },
    /// A bucket root page reached twice, buckets nested deeper than the model's
    /// `NESTING_MAX`, or more buckets than the file can hold: bucket values that point back at
    /// their ancestors. rbolt cannot see this when a caller
    /// opens nested buckets one by one; its check reports such pages as reached twice.
    Nesting,
}

impl From<rbolt::Error> for ScanError {
    fn from(error: rbolt::Error) -> ScanError {
        ScanError::Db(error)
    }
}

/// What a scan read.
#[derive(Debug)]
pub struct Scan {
    /// The content (the root's sequence is 0).
    pub tree: Tree,
    /// Entries read, both directions counted.
    pub entries: u64,
    /// Whether every bucket read the same backwards as forwards, and lookups agreed.
    pub consistent: bool,
}

/// The most entries a file of `file_len` bytes can hold, times a margin: every entry needs a
/// 16-byte element on some page, and a valid file reaches each page once.
pub fn entries_max(file_len: u64) -> u64 {
    4 * (file_len / 16) + 1024
}

/// Scans the whole database. `entries_max` caps the entries of each bucket and the number of
/// buckets.
pub fn scan_db(db: &Db, entries_max: u64) -> Result<Scan, ScanError> {
    let tx = db.begin_read()?;
    scan_buckets(tx.root(), entries_max)
}

/// Scans `root` and every bucket nested in it, without the page statistics.
pub fn scan_buckets(root: Bucket<'_>, entries_max: u64) -> Result<Scan, ScanError> {
    let mut scan = Scan {
        tree: Tree::default(),
        entries: 0,
        consistent: true,
    };
    let mut roots = std::collections::HashSet::from([root.root().0]);
    let mut stack: Vec<(Path, Bucket<'_>)> = vec![(Vec::new(), root)];
    let mut buckets = 0u64;
    while let Some((path, bucket)) = stack.pop() {
        buckets += 1;
        if path.len() > NESTING_MAX || buckets > entries_max {
            return Err(ScanError::Nesting);
        }
        let mut forward = Vec::new();
        for entry in bucket.iter() {
            let entry = entry?;
            forward.push((entry.key(), entry.value()));
            if forward.len() as u64 > entries_max {
                return Err(ScanError::Overrun { entries_max });
            }
        }
        let mut backward = Vec::new();
        for entry in bucket.iter().rev() {
            let entry = entry?;
            backward.push((entry.key(), entry.value()));
            if backward.len() as u64 > entries_max {
                return Err(ScanError::Overrun { entries_max });
            }
        }
        scan.entries += (forward.len() + backward.len()) as u64;
        backward.reverse();
        if forward != backward {
            scan.consistent = false;
        }
        let probes = [0, forward.len() / 2, forward.len().saturating_sub(1)];
        for &index in probes.iter().filter(|&&i| i < forward.len()) {
            let (key, value) = forward[index];
            if value.is_some() && bucket.get(key)? != value {
                scan.consistent = false;
            }
        }
        let target = bucket_at_mut(&mut scan.tree, &path).expect("parents are scanned first");
        target.sequence = if path.is_empty() {
            0
        } else {
            bucket.sequence()
        };
        for (key, value) in &forward {
            let item = match value {
                Some(value) => Item::Value(value.to_vec()),
                None => Item::Bucket(Tree::default()),
            };
            target.entries.insert(key.to_vec(), item);
        }
        for (key, value) in forward {
            if value.is_some() {
                continue;
            }
            if let Some(child) = bucket.bucket(key)? {
                // A sound file reaches each bucket root page once: a second time is a bucket
                // value pointing back at an ancestor, which would nest for ever.
                let root = child.root().0;
                if root != 0 && !roots.insert(root) {
                    return Err(ScanError::Nesting);
                }
                let mut child_path = path.clone();
                child_path.push(key.to_vec());
                stack.push((child_path, child));
            } else {
                scan.consistent = false;
            }
        }
    }
    Ok(scan)
}
