//! Counters: of the database, of transactions, and of buckets' pages.

use crate::bucket::read::Bucket;
use crate::bucket::state::{BucketName, BucketState};
use crate::error::{Error, Result};
use crate::walk::{Damage, EntryAt, PageAt, PageWalk, Visitor};
use rbolt_btree::Pages;
use rbolt_page::{BranchPage, BucketValue, Corruption, LeafPage, Pgid, Reason};
use std::collections::BTreeMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What a write transaction did (bbolt's `TxStats`). bbolt's `NodeDeref` has no counterpart:
/// rbolt's nodes never copy keys out of the mapping, so there is nothing to dereference.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// let tx = db.begin_write()?;
/// let mut b = tx.create_bucket("b")?;
/// for i in 0u32..2000 {
///     b.put(i.to_be_bytes(), [0u8; 64])?;
/// }
/// drop(b);
/// tx.commit()?;
/// // A committed transaction's counters are added to the database's.
/// let stats: rbolt::TxStats = db.stats().tx_stats;
/// assert!(stats.split > 0 && stats.spill > 0); // the leaf grew past one page
/// assert!(stats.page_count > 0 && stats.page_alloc == stats.page_count * db.page_size() as u64);
/// assert!(stats.writes > 0);
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TxStats {
    /// Pages allocated.
    pub page_count: u64,
    /// Bytes of the pages allocated.
    pub page_alloc: u64,
    /// Nodes made from pages to be edited.
    pub node_count: u64,
    /// Nodes split (inside the transaction or at commit).
    pub split: u64,
    /// Nodes merged or removed by rebalancing.
    pub rebalance: u64,
    /// Pages written by spill.
    pub spill: u64,
    /// Vectored writes of data pages, plus the meta write.
    pub writes: u64,
    /// Time spent rebalancing.
    pub rebalance_time: Duration,
    /// Time spent writing nodes into page buffers.
    pub spill_time: Duration,
    /// Time spent writing and syncing.
    pub write_time: Duration,
    /// Time the whole commit took.
    pub commit_time: Duration,
}

impl TxStats {
    fn add(&mut self, other: &TxStats) {
        self.page_count += other.page_count;
        self.page_alloc += other.page_alloc;
        self.node_count += other.node_count;
        self.split += other.split;
        self.rebalance += other.rebalance;
        self.spill += other.spill;
        self.writes += other.writes;
        self.rebalance_time += other.rebalance_time;
        self.spill_time += other.spill_time;
        self.write_time += other.write_time;
        self.commit_time += other.commit_time;
    }
}

/// The database's counters (bbolt's `DB.Stats`).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| tx.create_bucket("b")?.put("k", "v"))?;
/// db.update(|tx| tx.bucket_mut("b")?.unwrap().put("k", "w"))?;
/// let reader = db.begin_read()?;
/// let stats: rbolt::DbStats = db.stats();
/// assert_eq!(stats.open_tx_n, 1);
/// assert!(stats.tx_n >= 1); // read transactions begun
/// assert_eq!(stats.write_tx_n, 2);
/// assert!(stats.free_page_n + stats.pending_page_n > 0); // the pages the second commit replaced
/// drop(reader);
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DbStats {
    /// Sums over every committed write transaction.
    pub tx_stats: TxStats,
    /// Write transactions committed.
    pub write_tx_n: u64,
    /// Pages on the freelist, free now.
    pub free_page_n: usize,
    /// Pages freed but still visible to an open reader.
    pub pending_page_n: usize,
    /// Bytes in free pages.
    pub free_alloc: usize,
    /// Bytes the freelist page takes.
    pub freelist_inuse: usize,
    /// Read transactions started.
    pub tx_n: u64,
    /// Read transactions open now.
    pub open_tx_n: usize,
}

/// Counters updated as transactions run.
#[derive(Debug, Default)]
pub(crate) struct StatCounters {
    read_tx: AtomicU64,
    write_tx: AtomicU64,
    tx_stats: Mutex<TxStats>,
    free_page_n: AtomicU64,
    pending_page_n: AtomicU64,
    freelist_inuse: AtomicU64,
}

impl StatCounters {
    pub(crate) fn tx_begun(&self) {
        self.read_tx.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn tx_committed(&self, stats: &TxStats) {
        self.write_tx.fetch_add(1, Ordering::Relaxed);
        self.tx_stats
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .add(stats);
    }

    /// Publishes the freelist's figures for `Db::stats`.
    pub(crate) fn freelist_changed(&self, freelist: &impl rbolt_freelist::Freelist) {
        self.free_page_n
            .store(freelist.free_count() as u64, Ordering::Relaxed);
        self.pending_page_n
            .store(freelist.pending_count() as u64, Ordering::Relaxed);
        self.freelist_inuse
            .store(freelist.write_size() as u64, Ordering::Relaxed);
    }

    pub(crate) fn snapshot(&self, page_size: usize, open_tx_n: usize) -> DbStats {
        let free_page_n = self.free_page_n.load(Ordering::Relaxed) as usize;
        let pending_page_n = self.pending_page_n.load(Ordering::Relaxed) as usize;
        let freelist_inuse = self.freelist_inuse.load(Ordering::Relaxed) as usize;
        let free_alloc = free_page_n * page_size;
        DbStats {
            tx_stats: self
                .tx_stats
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .clone(),
            write_tx_n: self.write_tx.load(Ordering::Relaxed),
            free_page_n,
            pending_page_n,
            free_alloc,
            freelist_inuse,
            tx_n: self.read_tx.load(Ordering::Relaxed),
            open_tx_n,
        }
    }
}

/// Page and key counts of a bucket and the buckets nested in it (bbolt's `BucketStats`,
/// computed the same way so the numbers compare).
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut big = tx.create_bucket("big")?;
///     for i in 0u32..2000 {
///         big.put(i.to_be_bytes(), [0u8; 64])?;
///     }
///     big.create_bucket("small")?.put("k", "v")?;
///     Ok::<_, rbolt::Error>(())
/// })?;
/// let stats: rbolt::BucketStats = db.begin_read()?.bucket("big")?.unwrap().stats()?;
/// assert_eq!(stats.key_n, 2002); // 2000 keys, the name "small", and its key
/// assert_eq!((stats.bucket_n, stats.inline_bucket_n), (2, 1));
/// assert!(stats.branch_page_n >= 1 && stats.leaf_page_n > 1 && stats.depth >= 2);
/// assert!(stats.leaf_inuse <= stats.leaf_alloc);
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BucketStats {
    /// Branch pages.
    pub branch_page_n: usize,
    /// Overflow pages of branch pages.
    pub branch_overflow_n: usize,
    /// Leaf pages (of buckets that are not inline).
    pub leaf_page_n: usize,
    /// Overflow pages of leaf pages.
    pub leaf_overflow_n: usize,
    /// Entries of leaves: keys, and names of nested buckets.
    pub key_n: usize,
    /// Levels: of this bucket's tree plus the deepest nested bucket's.
    pub depth: usize,
    /// Bytes of branch pages.
    pub branch_alloc: usize,
    /// Bytes of branch pages in use.
    pub branch_inuse: usize,
    /// Bytes of leaf pages.
    pub leaf_alloc: usize,
    /// Bytes of leaf pages in use.
    pub leaf_inuse: usize,
    /// Buckets, this one included.
    pub bucket_n: usize,
    /// Buckets stored inline.
    pub inline_bucket_n: usize,
    /// Bytes of inline buckets' pages.
    pub inline_bucket_inuse: usize,
}

impl BucketStats {
    /// Adds `other`'s counts (depth: the larger of the two).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     tx.create_bucket("a")?.put("k", "v")?;
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("k1", "v")?;
    ///     b.put("k2", "v")?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// let tx = db.begin_read()?;
    /// let mut total = rbolt::BucketStats::default();
    /// tx.for_each(|_, bucket| {
    ///     total.add(&bucket.stats()?);
    ///     Ok(())
    /// })?;
    /// assert_eq!((total.key_n, total.bucket_n), (3, 2));
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn add(&mut self, other: &BucketStats) {
        self.branch_page_n += other.branch_page_n;
        self.branch_overflow_n += other.branch_overflow_n;
        self.leaf_page_n += other.leaf_page_n;
        self.leaf_overflow_n += other.leaf_overflow_n;
        self.key_n += other.key_n;
        self.depth = self.depth.max(other.depth);
        self.branch_alloc += other.branch_alloc;
        self.branch_inuse += other.branch_inuse;
        self.leaf_alloc += other.leaf_alloc;
        self.leaf_inuse += other.leaf_inuse;
        self.bucket_n += other.bucket_n;
        self.inline_bucket_n += other.inline_bucket_n;
        self.inline_bucket_inuse += other.inline_bucket_inuse;
    }
}

/// The buckets a write transaction holds open below one bucket, by name.
type OpenBuckets = BTreeMap<BucketName, BucketState>;

/// Where a bucket's tree is, for the stats walk.
enum StatsRoot<'a> {
    /// A committed tree; in a write transaction, with the buckets opened in it, which hold
    /// their edits (the tree's own values for them are as of the last commit).
    Page(Pgid, Option<&'a OpenBuckets>),
    Inline(&'a [u8]),
    /// Edited in a write transaction: its entries and nested buckets are counted as they are
    /// now; it has no pages of its own until commit.
    Edited(Bucket<'a>),
}

impl<'a> StatsRoot<'a> {
    fn of(bucket: &Bucket<'a>) -> StatsRoot<'a> {
        match (bucket.view.root_inline(), bucket.view.root_pgid()) {
            (Some(inline), _) => StatsRoot::Inline(inline),
            (None, Some(pgid)) => StatsRoot::Page(pgid, bucket.children),
            (None, None) => StatsRoot::Edited(*bucket),
        }
    }
}

/// One bucket's counts: its own tree's, and the sum over the buckets nested in it.
struct BucketCounts {
    own: BucketStats,
    nested: BucketStats,
    parent: Option<usize>,
}

impl BucketCounts {
    fn new(own: BucketStats, parent: Option<usize>) -> BucketCounts {
        BucketCounts {
            own: BucketStats { bucket_n: 1, ..own },
            nested: BucketStats::default(),
            parent,
        }
    }
}

/// The counts of an inline bucket, whose page is `leaf` (bbolt does not count the buckets
/// nested in one).
fn inline_counts(leaf: &LeafPage<'_>) -> BucketStats {
    BucketStats {
        inline_bucket_n: 1,
        key_n: leaf.len(),
        inline_bucket_inuse: leaf.in_use_len(),
        depth: 1,
        ..BucketStats::default()
    }
}

/// The stats walk's visitor: every bucket counted so far, parents before the buckets nested
/// in them, and the buckets still to count.
struct Counter<'a> {
    pages: Pages<'a>,
    buckets: Vec<BucketCounts>,
    /// Buckets to count after the walk, each with the index of the bucket it is nested in:
    /// those a write transaction holds open, which its state describes, not the pages.
    work: Vec<(StatsRoot<'a>, Option<usize>)>,
}

/// What the stats walk carries down a tree: the index of its bucket in `Counter::buckets`,
/// and the buckets the transaction holds open in it.
type InBucket<'a> = (usize, Option<&'a OpenBuckets>);

impl<'a> Visitor<'a> for Counter<'a> {
    type Token = InBucket<'a>;
    type Error = Error;

    fn damage(&mut self, damage: Damage) -> Result<()> {
        Err(damage.into())
    }

    fn page(&mut self, at: &PageAt<'a>, inside: InBucket<'a>) -> Result<Option<InBucket<'a>>> {
        let own = &mut self.buckets[inside.0].own;
        own.depth = own.depth.max(at.depth + 1);
        Ok(Some(inside))
    }

    fn branch(
        &mut self,
        at: &PageAt<'a>,
        branch: &BranchPage<'a>,
        inside: InBucket<'a>,
    ) -> Result<()> {
        let own = &mut self.buckets[inside.0].own;
        own.branch_page_n += 1;
        own.branch_overflow_n += at.page.header().overflow as usize;
        if !branch.is_empty() {
            own.branch_inuse += branch.in_use_len();
        }
        Ok(())
    }

    fn leaf(&mut self, at: &PageAt<'a>, leaf: &LeafPage<'a>, inside: InBucket<'a>) -> Result<()> {
        let own = &mut self.buckets[inside.0].own;
        own.key_n += leaf.len();
        own.leaf_page_n += 1;
        own.leaf_inuse += leaf.in_use_len();
        own.leaf_overflow_n += at.page.header().overflow as usize;
        Ok(())
    }

    fn bucket(
        &mut self,
        at: &EntryAt<'a>,
        value: &BucketValue<'a>,
        inside: InBucket<'a>,
    ) -> Result<Option<InBucket<'a>>> {
        if let Some(child) = inside.1.and_then(|open| open.get(at.entry.key)) {
            // Open in the transaction: counted from its state, after the walk.
            let child = Bucket {
                view: child.tree.view(self.pages),
                sequence: child.sequence,
                children: Some(&child.children),
            };
            self.work.push((StatsRoot::of(&child), Some(inside.0)));
            return Ok(None);
        }
        let index = self.buckets.len();
        let own = value.inline.as_ref().map(inline_counts).unwrap_or_default();
        self.buckets.push(BucketCounts::new(own, Some(inside.0)));
        // An inline bucket is counted whole here.
        Ok(value.inline.is_none().then_some((index, None)))
    }
}

/// bbolt's `Bucket.Stats`, computed without recursion: the page walker's (every page entered
/// once, from an explicit stack), and the buckets a write transaction holds open from a list
/// of its own, so neither deep nesting nor pages shared in a corrupt file can exhaust the
/// stack or the clock.
pub(crate) fn bucket_stats(bucket: &Bucket<'_>) -> Result<BucketStats> {
    let pages = bucket.view.pages();
    let mut walk = PageWalk::new(pages);
    let mut counter = Counter {
        pages,
        buckets: Vec::new(),
        work: vec![(StatsRoot::of(bucket), None)],
    };
    while let Some((root, parent)) = counter.work.pop() {
        let index = counter.buckets.len();
        match root {
            StatsRoot::Inline(bytes) => {
                let own = inline_counts(&LeafPage::inline(bytes, Pgid(0))?);
                counter.buckets.push(BucketCounts::new(own, parent));
            }
            StatsRoot::Edited(edited) => {
                let mut own = BucketStats {
                    depth: 1,
                    ..BucketStats::default()
                };
                let mut nested = Vec::new();
                for entry in edited.iter() {
                    let entry = entry?;
                    own.key_n += 1;
                    if entry.is_bucket() {
                        let child = edited.bucket(entry.key())?.ok_or_else(|| {
                            Error::from(Corruption::new(Pgid(0), Reason::NotABucket))
                        })?;
                        nested.push((StatsRoot::of(&child), Some(index)));
                    }
                }
                counter.buckets.push(BucketCounts::new(own, parent));
                // Counted in key order, like the buckets of a page.
                counter.work.extend(nested.into_iter().rev());
            }
            StatsRoot::Page(root, open) => {
                counter
                    .buckets
                    .push(BucketCounts::new(BucketStats::default(), parent));
                walk.tree(&mut counter, Pgid(0), root, (index, open))?;
            }
        }
    }
    // Nested buckets come after their parent: fold them in from the last.
    let page_size = pages.page_size();
    let buckets = &mut counter.buckets;
    let mut total = BucketStats::default();
    for index in (0..buckets.len()).rev() {
        let counts = &buckets[index];
        let mut stats = counts.own;
        stats.branch_alloc = (stats.branch_page_n + stats.branch_overflow_n) * page_size;
        stats.leaf_alloc = (stats.leaf_page_n + stats.leaf_overflow_n) * page_size;
        stats.depth += counts.nested.depth;
        stats.add(&counts.nested);
        match counts.parent {
            Some(parent) => buckets[parent].nested.add(&stats),
            None => total = stats,
        }
    }
    Ok(total)
}

// The buckets' `stats` live beside what they count, so the bucket handles need nothing from
// here.
impl Bucket<'_> {
    /// Page and key counts of this bucket and every bucket nested in it (bbolt's
    /// `Bucket.Stats`).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("a", "1")?;
    ///     b.create_bucket("child")?.put("b", "2")?;
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.view(|tx| {
    ///     let stats = tx.bucket("b")?.unwrap().stats()?;
    ///     assert_eq!(stats.key_n, 3); // "a", "child" and the child's "b"
    ///     assert_eq!(stats.bucket_n, 2); // the bucket and its child
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn stats(&self) -> Result<BucketStats> {
        bucket_stats(self)
    }
}

impl crate::bucket::write::BucketMut<'_> {
    /// Page and key counts of this bucket and its nested buckets.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     b.put("a", "1")?;
    ///     b.put("b", "2")?;
    ///     assert_eq!(b.stats()?.key_n, 2); // counts this transaction's writes
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn stats(&self) -> Result<BucketStats> {
        self.as_bucket().stats()
    }
}
