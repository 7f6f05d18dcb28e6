//! [`Bucket`]: the read view of a bucket, shared by both kinds of transaction.
use crate::error::Result;
use crate::iter::{Cursor, Iter};
use rbolt_btree::{Pages, TreeView};
use rbolt_page::{BucketValue, Pgid};
use std::collections::BTreeMap;
use std::ops::RangeBounds;

use super::state::{BucketName, BucketState, prefix_end};

/// A bucket read through a transaction: lookups, cursors and iteration, all borrowing from
/// the transaction without copying. Values are borrowed for as long as the bucket handle.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut fruit = tx.create_bucket(b"fruit")?;
///     fruit.put(b"apple", b"red")?;
///     fruit.put(b"pear", b"green")?;
///     Ok::<_, rbolt::Error>(())
/// })?;
/// db.view(|tx| {
///     let fruit = tx.bucket(b"fruit")?.expect("created above");
///     assert_eq!(fruit.get(b"pear")?, Some(&b"green"[..]));
///     let keys: Vec<&[u8]> = fruit.iter().map(|e| e.map(|e| e.key())).collect::<Result<_, _>>()?;
///     assert_eq!(keys, [&b"apple"[..], b"pear"]);
///     Ok::<_, rbolt::Error>(())
/// })?;
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Bucket<'a> {
    pub(crate) view: TreeView<'a>,
    pub(crate) sequence: u64,
    pub(crate) children: Option<&'a BTreeMap<BucketName, BucketState>>,
}

impl<'a> Bucket<'a> {
    /// The value of `key`; `None` when absent or when `key` holds a nested bucket.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("k", "v")?;
    ///     b.create_bucket("child")?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let b = tx.bucket("b")?.unwrap();
    ///     assert_eq!(b.get("k")?, Some(&b"v"[..]));
    ///     assert_eq!(b.get("missing")?, None);
    ///     assert_eq!(b.get("child")?, None); // a nested bucket is not a value
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    #[inline]
    pub fn get(&self, key: impl AsRef<[u8]>) -> Result<Option<&'a [u8]>> {
        let key = key.as_ref();
        Ok(match self.view.get(key)? {
            Some(entry) if !entry.is_bucket() => Some(entry.value),
            _ => None,
        })
    }

    /// The nested bucket `name`, if there is one.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut users = tx.create_bucket("users")?;
    ///     users.create_bucket("alice")?.put("age", "42")?;
    ///     users.put("count", "1")?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let users = tx.bucket("users")?.unwrap();
    ///     let alice = users.bucket("alice")?.expect("a nested bucket");
    ///     assert_eq!(alice.get("age")?, Some(&b"42"[..]));
    ///     assert!(users.bucket("count")?.is_none()); // a value, not a bucket
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn bucket(&self, name: impl AsRef<[u8]>) -> Result<Option<Bucket<'a>>> {
        let name = name.as_ref();
        if let Some(children) = self.children
            && let Some(child) = children.get(name)
        {
            return Ok(Some(Bucket {
                view: child.tree.view(self.view.pages()),
                sequence: child.sequence,
                children: Some(&child.children),
            }));
        }
        let Some(entry) = self.view.get(name)? else {
            return Ok(None);
        };
        if !entry.is_bucket() {
            return Ok(None);
        }
        Ok(Some(Bucket::from_value(self.view.pages(), entry.value)?))
    }

    /// The bucket whose value is `value`, read from `pages`.
    pub(crate) fn from_value(pages: rbolt_btree::Pages<'a>, value: &'a [u8]) -> Result<Bucket<'a>> {
        let parsed = BucketValue::parse(value, Pgid(0))?;
        let view = match parsed.inline {
            Some(inline) => TreeView::from_inline(pages, inline.bytes()),
            None => TreeView::from_page(pages, parsed.header.root_pgid()),
        };
        Ok(Bucket {
            view,
            sequence: parsed.header.sequence,
            children: None,
        })
    }

    /// The bucket's sequence number.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.set_sequence(41)?;
    ///     b.next_sequence()?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     assert_eq!(tx.bucket("b")?.unwrap().sequence(), 42);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The committed root page of the bucket (0 for an inline or edited one).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     tx.create_bucket("small")?.put("k", "v")?; // small enough to live inline
    ///     let mut big = tx.create_bucket("big")?;
    ///     for i in 0u32..1000 {
    ///         big.put(i.to_be_bytes(), [0u8; 100])?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     assert_eq!(tx.bucket("small")?.unwrap().root(), rbolt::Pgid(0));
    ///     assert!(tx.bucket("big")?.unwrap().root().0 >= 2); // a page of its own
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn root(&self) -> Pgid {
        self.view.root_pgid().unwrap_or(Pgid(0))
    }

    /// A cursor over the bucket's entries, values and nested buckets alike.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("a", "1")?;
    ///     b.put("b", "2")?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let mut cursor = tx.bucket("b")?.unwrap().cursor();
    ///     assert_eq!(cursor.last()?.map(|e| e.key()), Some(&b"b"[..]));
    ///     assert_eq!(cursor.prev()?.and_then(|e| e.value()), Some(&b"1"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn cursor(&self) -> Cursor<'a> {
        Cursor::new(self.view.cursor())
    }

    /// All entries in key order; double-ended.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for (k, v) in [("b", "2"), ("a", "1"), ("c", "3")] {
    ///         b.put(k, v)?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let b = tx.bucket("b")?.unwrap();
    ///     let values: Vec<&[u8]> =
    ///         b.iter().map(|e| e.map(|e| e.value().unwrap())).collect::<Result<_, _>>()?;
    ///     assert_eq!(values, [b"1", b"2", b"3"]);
    ///     let last = b.iter().next_back().transpose()?.map(|e| e.key());
    ///     assert_eq!(last, Some(&b"c"[..]));
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn iter(&self) -> Iter<'a> {
        Iter::new(
            self.view,
            (std::ops::Bound::Unbounded, std::ops::Bound::Unbounded),
        )
    }

    /// The entries whose keys lie in `range`, in key order; double-ended. The bounds are any
    /// byte strings: `range("a".."c")`, `range(&b"k"[..]..)`, `range(start..=end)`.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("letters")?;
    ///     for key in ["a", "b", "c", "d"] {
    ///         b.put(key, "x")?;
    ///     }
    ///     let keys: Vec<&[u8]> = b.range("b".."d").map(|e| e.map(|e| e.key())).collect::<Result<_, _>>()?;
    ///     assert_eq!(keys, [b"b", b"c"]);
    ///     let last: Vec<&[u8]> = b.range("c"..).rev().map(|e| e.map(|e| e.key())).collect::<Result<_, _>>()?;
    ///     assert_eq!(last, [b"d", b"c"]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn range<K: AsRef<[u8]>>(&self, range: impl RangeBounds<K>) -> Iter<'a> {
        Iter::new(
            self.view,
            (
                range.start_bound().map(|k| k.as_ref()),
                range.end_bound().map(|k| k.as_ref()),
            ),
        )
    }

    /// The entries whose keys start with `prefix`, in key order; double-ended.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("users")?;
    ///     for key in ["alice", "al", "bob", "alfred", "albert"] {
    ///         b.put(key, "")?;
    ///     }
    ///     let al: Vec<&[u8]> = b.prefix("al").map(|e| e.map(|e| e.key())).collect::<Result<_, _>>()?;
    ///     assert_eq!(al, [&b"al"[..], b"albert", b"alfred", b"alice"]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn prefix(&self, prefix: impl AsRef<[u8]>) -> Iter<'a> {
        let prefix = prefix.as_ref();
        let end = prefix_end(prefix);
        Iter::new(
            self.view,
            (
                std::ops::Bound::Included(prefix),
                match &end {
                    Some(end) => std::ops::Bound::Excluded(end.as_slice()),
                    None => std::ops::Bound::Unbounded,
                },
            ),
        )
    }

    /// A walk over this bucket and every bucket nested in it, depth first in key order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut root = tx.create_bucket("root")?;
    ///     root.put("a", "1")?;
    ///     root.create_bucket("sub")?.put("b", "2")?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let mut walk = tx.bucket("root")?.unwrap().walk();
    ///     let mut values = Vec::new();
    ///     while let Some(step) = walk.next_step() {
    ///         if let rbolt::WalkStep::Value { key, .. } = step? {
    ///             values.push((walk.path().len(), key));
    ///         }
    ///     }
    ///     assert_eq!(values, [(0, &b"a"[..]), (1, &b"b"[..])]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn walk(&self) -> crate::Walk<'a> {
        crate::Walk::new(*self)
    }

    /// Calls `f` with every key and its value (`None` for a nested bucket), in key order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("k", "v")?;
    ///     b.create_bucket("child")?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let mut seen = Vec::new();
    ///     tx.bucket("b")?.unwrap().for_each(|key, value| {
    ///         seen.push((key, value));
    ///         Ok(())
    ///     })?;
    ///     assert_eq!(seen, [(&b"child"[..], None), (&b"k"[..], Some(&b"v"[..]))]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn for_each(
        &self,
        mut f: impl FnMut(&'a [u8], Option<&'a [u8]>) -> Result<()>,
    ) -> Result<()> {
        for entry in self.iter() {
            let entry = entry?;
            f(entry.key(), entry.value())?;
        }
        Ok(())
    }

    /// Calls `f` with the name of every nested bucket, in key order.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.create_bucket("x")?;
    ///     b.put("value", "skipped")?;
    ///     b.create_bucket("y")?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let mut names = Vec::new();
    ///     tx.bucket("b")?.unwrap().for_each_bucket(|name| {
    ///         names.push(name);
    ///         Ok(())
    ///     })?;
    ///     assert_eq!(names, [b"x", b"y"]);
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn for_each_bucket(&self, mut f: impl FnMut(&'a [u8]) -> Result<()>) -> Result<()> {
        for entry in self.iter() {
            let entry = entry?;
            if entry.is_bucket() {
                f(entry.key())?;
            }
        }
        Ok(())
    }
}

impl BucketState {
    /// The read view of this bucket.
    pub(crate) fn view<'a>(&'a self, pages: Pages<'a>) -> Bucket<'a> {
        Bucket {
            view: self.tree.view(pages),
            sequence: self.sequence,
            children: Some(&self.children),
        }
    }
}
