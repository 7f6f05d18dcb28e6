//! A walk over a bucket and every bucket nested in it: what copies, exports and dumps use.
//!
//! Buckets nest without limit (Go bbolt has none), so the walk keeps an explicit stack; and a
//! corrupt file whose bucket values point back at an ancestor would nest for ever, so a bucket
//! root page reached a second time ends the walk with an error (a sound file reaches every page
//! once).

use crate::bucket::Bucket;
use crate::error::Result;
use crate::iter::Iter;
use rbolt_page::{Corruption, Pgid, Reason};
use std::collections::HashSet;

/// One step of a [`Walk`].
///
/// ```
/// use rbolt::WalkStep;
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut a = tx.create_bucket("a")?;
///     a.create_bucket("b")?.put("k", "v")?;
///     a.put("z", "1")?;
///     Ok::<_, rbolt::Error>(())
/// })?;
/// db.view(|tx| {
///     let mut walk = tx.bucket("a")?.unwrap().walk();
///     let mut trace = Vec::new();
///     while let Some(step) = walk.next_step() {
///         trace.push(match step? {
///             WalkStep::Enter { name, .. } => format!("enter {}", String::from_utf8_lossy(name)),
///             WalkStep::Value { key, .. } => format!("value {}", String::from_utf8_lossy(key)),
///             WalkStep::Leave => "leave".to_string(),
///         });
///     }
///     assert_eq!(trace, ["enter b", "value k", "leave", "value z"]);
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub enum WalkStep<'a> {
    /// A key and its value, in the bucket [`Walk::path`] names.
    Value {
        /// The key.
        key: &'a [u8],
        /// Its value.
        value: &'a [u8],
    },
    /// A nested bucket was entered: [`Walk::path`] now ends with its name, and the steps that
    /// follow are its content, until the matching [`WalkStep::Leave`].
    Enter {
        /// The bucket's name in its parent.
        name: &'a [u8],
        /// The bucket.
        bucket: Bucket<'a>,
    },
    /// The bucket last entered is done; [`Walk::path`] lost its last name.
    Leave,
}

/// A depth-first walk, in key order, over a bucket and everything nested in it; see
/// [`Bucket::walk`]. Not an `Iterator`, so that [`Walk::path`] can be read between steps.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut a = tx.create_bucket(b"a")?;
///     a.put(b"k", b"v")?;
///     a.create_bucket(b"b")?.put(b"x", b"y")
/// })?;
/// db.view(|tx| {
///     let mut walk = tx.bucket(b"a")?.expect("created above").walk();
///     let mut lines = Vec::new();
///     while let Some(step) = walk.next_step() {
///         if let rbolt::WalkStep::Value { key, .. } = step? {
///             lines.push((walk.path().concat(), key.to_vec()));
///         }
///     }
///     // Key order: the bucket "b" comes before the key "k".
///     assert_eq!(lines, [(b"b".to_vec(), b"x".to_vec()), (b"".to_vec(), b"k".to_vec())]);
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Debug)]
pub struct Walk<'a> {
    stack: Vec<(Iter<'a>, Bucket<'a>)>,
    path: Vec<&'a [u8]>,
    roots: HashSet<u64>,
}

impl<'a> Walk<'a> {
    pub(crate) fn new(bucket: Bucket<'a>) -> Walk<'a> {
        let mut roots = HashSet::new();
        let root = bucket.root();
        if root.0 != 0 {
            roots.insert(root.0);
        }
        Walk {
            stack: vec![(bucket.iter(), bucket)],
            path: Vec::new(),
            roots,
        }
    }

    /// The names from the walked bucket down to the bucket the last step is in (empty for the
    /// walked bucket itself).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| tx.create_bucket_path(&["a", "b", "c"])?.put("k", "v"))?;
    /// db.view(|tx| {
    ///     let mut walk = tx.bucket("a")?.unwrap().walk();
    ///     assert!(walk.path().is_empty());
    ///     while let Some(step) = walk.next_step() {
    ///         if let rbolt::WalkStep::Value { .. } = step? {
    ///             assert_eq!(walk.path(), [b"b", b"c"]); // below "a": "b", then "c"
    ///         }
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn path(&self) -> &[&'a [u8]] {
        &self.path
    }

    /// The next step; `None` when the walk is done. After an error the walk is done too.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut a = tx.create_bucket("a")?;
    ///     for i in 0u8..10 {
    ///         a.create_bucket([i])?.put("k", "v")?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let mut walk = tx.bucket("a")?.unwrap().walk();
    ///     let mut values = 0;
    ///     while let Some(step) = walk.next_step() {
    ///         values += matches!(step?, rbolt::WalkStep::Value { .. }) as usize;
    ///     }
    ///     assert_eq!(values, 10);
    ///     assert!(walk.next_step().is_none()); // done stays done
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn next_step(&mut self) -> Option<Result<WalkStep<'a>>> {
        let result = self.step();
        if !matches!(result, Some(Ok(_))) {
            self.stack.clear();
        }
        result
    }

    fn step(&mut self) -> Option<Result<WalkStep<'a>>> {
        let depth = self.stack.len();
        let (iter, bucket) = self.stack.last_mut()?;
        let Some(entry) = iter.next() else {
            self.stack.pop();
            if depth == 1 {
                return None;
            }
            self.path.pop();
            return Some(Ok(WalkStep::Leave));
        };
        let entry = match entry {
            Ok(entry) => entry,
            Err(error) => return Some(Err(error)),
        };
        if let Some(value) = entry.value() {
            return Some(Ok(WalkStep::Value {
                key: entry.key(),
                value,
            }));
        }
        let child = match bucket.bucket(entry.key()) {
            Ok(Some(child)) => child,
            Ok(None) => {
                return Some(Err(Corruption::new(Pgid(0), Reason::NotABucket).into()));
            }
            Err(error) => return Some(Err(error)),
        };
        let root = child.root();
        if root.0 != 0 && !self.roots.insert(root.0) {
            return Some(Err(Corruption::new(root, Reason::BucketCycle).into()));
        }
        self.path.push(entry.key());
        self.stack.push((child.iter(), child));
        Some(Ok(WalkStep::Enter {
            name: entry.key(),
            bucket: child,
        }))
    }
}
