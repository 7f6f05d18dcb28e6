//! Counters: of the database, of transactions, and of buckets' pages.

use crate::bucket::{BUCKET_DEPTH_MAX, Bucket};
use crate::error::Result;
use rbolt_btree::{DEPTH_MAX, Pages, TreeView};
use rbolt_page::{
    BRANCH_ELEMENT_SIZE, BucketValue, Corruption, LEAF_ELEMENT_SIZE, LeafPage, PAGE_HEADER_SIZE,
    PageKind, PageRef, Pgid, Reason,
};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// What a write transaction did (bbolt's `TxStats`). bbolt's `NodeDeref` has no counterpart:
/// rbolt's nodes never copy keys out of the mapping, so there is nothing to dereference.
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

    pub(crate) fn snapshot(
        &self,
        free_page_n: usize,
        pending_page_n: usize,
        free_alloc: usize,
        freelist_inuse: usize,
        open_tx_n: usize,
    ) -> DbStats {
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

/// Bytes a leaf page uses, as bbolt counts them.
fn leaf_used(leaf: &LeafPage<'_>) -> usize {
    match leaf
        .len()
        .checked_sub(1)
        .and_then(|last| leaf.element(last).map(|e| (last, e)))
    {
        Some((last, e)) => {
            PAGE_HEADER_SIZE
                + LEAF_ELEMENT_SIZE * last
                + e.pos as usize
                + e.ksize as usize
                + e.vsize as usize
        }
        None => PAGE_HEADER_SIZE,
    }
}

pub(crate) fn bucket_stats(bucket: &Bucket<'_>) -> Result<BucketStats> {
    tree_stats(bucket.view.pages(), &bucket.view, 0)
}

fn tree_stats(pages: Pages<'_>, view: &TreeView<'_>, bucket_depth: usize) -> Result<BucketStats> {
    if bucket_depth >= BUCKET_DEPTH_MAX {
        return Err(crate::bucket::bucket_too_deep());
    }
    let mut stats = BucketStats {
        bucket_n: 1,
        ..BucketStats::default()
    };
    let mut sub = BucketStats::default();
    if let Some(inline) = view.root_inline() {
        stats.inline_bucket_n = 1;
        let leaf = LeafPage::inline(inline, Pgid(0))?;
        stats.key_n = leaf.len();
        stats.inline_bucket_inuse = leaf_used(&leaf);
        stats.depth = 1;
    } else if let Some(root) = view.root_pgid() {
        page_stats(pages, Pgid(0), root, 0, bucket_depth, &mut stats, &mut sub)?;
    } else {
        // An edited tree in a write transaction: count its entries only.
        let mut cursor = view.cursor();
        let mut entry = cursor.first()?;
        while entry.is_some() {
            stats.key_n += 1;
            entry = cursor.next()?;
        }
        stats.depth = 1;
    }
    stats.branch_alloc = (stats.branch_page_n + stats.branch_overflow_n) * pages.page_size();
    stats.leaf_alloc = (stats.leaf_page_n + stats.leaf_overflow_n) * pages.page_size();
    stats.depth += sub.depth;
    stats.add(&sub);
    Ok(stats)
}

fn page_stats(
    pages: Pages<'_>,
    owner: Pgid,
    pgid: Pgid,
    depth: usize,
    bucket_depth: usize,
    stats: &mut BucketStats,
    sub: &mut BucketStats,
) -> Result<()> {
    if depth >= DEPTH_MAX {
        return Err(Corruption::new(
            pgid,
            Reason::TooDeep {
                depth_max: DEPTH_MAX,
            },
        )
        .into());
    }
    let page = PageRef::new(pages.page(owner, pgid)?, pgid)?;
    stats.depth = stats.depth.max(depth + 1);
    match page.kind()? {
        PageKind::Leaf => {
            let leaf = page.leaf()?;
            stats.key_n += leaf.len();
            stats.leaf_page_n += 1;
            stats.leaf_inuse += leaf_used(&leaf);
            stats.leaf_overflow_n += page.header().overflow as usize;
            for index in 0..leaf.len() {
                let entry = leaf.entry(index)?;
                if entry.is_bucket() {
                    let value = BucketValue::parse(entry.value, pgid)?;
                    let child = match value.inline {
                        Some(_) => TreeView::from_inline(
                            pages,
                            &entry.value[rbolt_page::BUCKET_HEADER_SIZE..],
                        ),
                        None => TreeView::from_page(pages, value.header.root_pgid()),
                    };
                    sub.add(&tree_stats(pages, &child, bucket_depth + 1)?);
                }
            }
        }
        PageKind::Branch => {
            let branch = page.branch()?;
            stats.branch_page_n += 1;
            stats.branch_overflow_n += page.header().overflow as usize;
            if let Some(last) = branch.len().checked_sub(1)
                && let Some(e) = branch.element(last)
            {
                stats.branch_inuse += PAGE_HEADER_SIZE
                    + BRANCH_ELEMENT_SIZE * last
                    + e.pos as usize
                    + e.ksize as usize;
            }
            for index in 0..branch.len() {
                page_stats(
                    pages,
                    pgid,
                    branch.child(index)?,
                    depth + 1,
                    bucket_depth,
                    stats,
                    sub,
                )?;
            }
        }
        kind => {
            return Err(Corruption::new(
                pgid,
                Reason::WrongKind {
                    expected: PageKind::Leaf,
                    flags: kind.flags(),
                },
            )
            .into());
        }
    }
    Ok(())
}
