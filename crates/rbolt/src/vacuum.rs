//! A file that shrinks while in use: lowering the high-water mark past free pages at the end
//! of the file, truncating the file once no reader can need the cut pages, and the online
//! vacuum that moves live pages from the end of the file into free pages nearer its start.
//!
//! Everything here is an ordinary commit or follows one, so the commit protocol's guarantees
//! hold unchanged:
//!
//! - **Lowering the mark** happens inside a commit (`WriteTx::shrink`): the free run that ends
//!   at the high-water mark leaves the free set (`Freelist::trim_tail`) before the freelist
//!   page is sized and written, and the meta carries the lower mark. Only free pages are cut,
//!   never pending ones (an open reader may see those), so the freelist lists no id at or past
//!   the new mark, as Go bbolt requires. A failed commit rolls the cut back with the rest.
//! - **Truncating the file** comes after: once the meta with the lower mark is durable (no
//!   unsynced commit is outstanding) and no open reader started from an older snapshot, whose
//!   mapping and high-water mark may reach the tail ([`Truncate`]). Until then the truncation
//!   waits in the writer state, and is tried again after every commit and when a reader ends.
//!   The file is never shorter than the newest meta's mark times the page size, so an open
//!   never reports `Error::Truncated` for it, crash or not: a truncation that a crash loses
//!   leaves a longer file, which is sound.
//! - **The vacuum** ([`Db::vacuum_step`], [`Db::vacuum`]) picks the live pages with the highest
//!   ids for which the freelist has lower free pages, and touches the path from each bucket's
//!   root to each of them (`Tree::repack_key`, which also merges the sparse leaves that follow
//!   a sparse leaf, so that spill writes them as full pages), so that copy-on-write writes
//!   them again into the lowest free pages (the allocator is first fit) and frees the old ids;
//!   the commit then lowers the mark past whatever is free at the end. Every step is one durable commit that
//!   takes the writer for a bounded time, so other writers interleave and readers never wait.

use crate::db::{Db, Writer};
use crate::error::{Error, Result};
use crate::walk::{PageSet, enter_page, not_a_tree_page};
use rbolt_btree::Pages;
use rbolt_freelist::{AnyFreelist, Freelist};
use rbolt_page::{BucketValue, LeafPage, Meta, PageKind, PageRef, Pgid, Txid};
use std::collections::{BTreeMap, BTreeSet};
use std::ops::ControlFlow;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Pages one vacuum step moves when the caller does not say: a commit of about 4 MiB of
/// page writes at the default page size, a few milliseconds of holding the writer.
pub const VACUUM_STEP_PAGES_DEFAULT: usize = 1024;

/// Steps in a row that move nothing but lower the mark, after which a vacuum stops: each
/// frees the previous step's freelist page, which may sit at the end, so two are usually
/// enough; the bound keeps a vacuum finite whatever the allocator does.
const SHRINK_STEPS_MAX: usize = 4;

/// The most pages' worth of entries one repack merges into a node (which spill then cuts
/// into full pages): bounds the pages one touched leaf can pull into a step.
const REPACK_PAGES_MAX: usize = 4;

/// A truncation of the file waiting for older readers to end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Truncate {
    /// The length to cut the file to: at least the high-water mark of every commit since
    /// `after`, times the page size.
    pub(crate) len: u64,
    /// The commit that lowered the mark: readers of older snapshots may reach past `len`.
    pub(crate) after: Txid,
}

/// The shortest file Go bbolt opens: its `Open` reads the first 4 KiB to find the page size,
/// and refuses a file shorter than that (`ErrInvalid`), whatever its page size.
const GO_OPEN_LEN_MIN: u64 = 4096;

/// The length auto-shrink leaves a file whose pages end at `needed` bytes: what growth from
/// there would make it, so that a file near its size does not shrink and grow by turns.
fn slack_len(needed: u64, options: &crate::Options, page_size: u64) -> u64 {
    crate::alloc::grown_len(
        needed,
        options.alloc_size.max(page_size),
        page_size,
        options.max_size,
    )
}

/// After a commit of `meta` (published, writer still held): keeps a waiting truncation above
/// the new mark, plans one if this commit shrank (`shrink`), and truncates if nothing stands
/// in the way. A failed truncation is forgotten: the commit is done, and a file longer than
/// its pages is sound.
pub(crate) fn after_commit(db: &Db, writer: &mut Writer, meta: &Meta, shrink: bool) {
    let page_size = db.page_size as u64;
    let needed = meta.pgid.saturating_mul(page_size);
    if let Some(truncate) = writer.truncate.as_mut() {
        truncate.len = truncate.len.max(needed);
    }
    if shrink {
        let target = slack_len(needed, &db.options, page_size);
        if writer.file_len > target && writer.truncate.is_none_or(|t| t.len > target) {
            writer.truncate = Some(Truncate {
                len: target,
                after: meta.txid(),
            });
        }
    }
    let _ = truncate_if_unseen(db, writer);
}

/// After a reader ended: if a truncation waits (perhaps for this reader), tries it, unless a
/// writer is busy (its commit will try).
pub(crate) fn after_reader(db: &Db) {
    if !db.truncate_wanted.load(Ordering::Acquire) {
        return;
    }
    if let Ok(mut writer) = db.writer.try_lock() {
        let _ = truncate_if_unseen(db, &mut writer);
    }
}

/// When the handle closes: a truncation still waiting (its reader ended while a writer was
/// busy, and nothing committed since) is done now that no reader is left.
pub(crate) fn on_close(db: &Db) {
    if !db.truncate_wanted.load(Ordering::Acquire) {
        return;
    }
    let mut writer = db
        .writer
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let _ = truncate_if_unseen(db, &mut writer);
}

/// Cuts the file to the waiting truncation's length if its meta is durable and no reader of
/// an older snapshot is open; returns whether it cut. Call with the writer held.
fn truncate_if_unseen(db: &Db, writer: &mut Writer) -> Result<bool> {
    let Some(truncate) = writer.truncate else {
        db.truncate_wanted.store(false, Ordering::Release);
        return Ok(false);
    };
    if truncate.len >= writer.file_len {
        writer.truncate = None;
        db.truncate_wanted.store(false, Ordering::Release);
        return Ok(false);
    }
    db.truncate_wanted.store(true, Ordering::Release);
    // The lower mark must be durable first: a crash must not find an older meta, whose mark
    // lies past the cut, as the newest.
    if db.poisoned.load(Ordering::Acquire) || db.unsynced.load(Ordering::Acquire) {
        return Ok(false);
    }
    // A reader registers under the lock that publishing takes, so one that took an older
    // snapshot is in the registry by now; new readers start from the newest, at or after
    // `truncate.after`, whose marks are all within `truncate.len`.
    let mut readers = std::mem::take(&mut writer.readers_scratch);
    readers.clear();
    db.readers.collect(&mut readers);
    let blocked = readers.iter().any(|&txid| txid < truncate.after);
    writer.readers_scratch = readers;
    if blocked {
        return Ok(false);
    }
    writer.truncate = None;
    db.truncate_wanted.store(false, Ordering::Release);
    failpoint!("vacuum::before-truncate");
    match db.storage.shrink(truncate.len) {
        Ok(()) => {
            writer.file_len = truncate.len;
            Ok(true)
        }
        // A storage that cannot shrink keeps its length: sound, only longer than it needs.
        Err(error) if error.kind() == std::io::ErrorKind::Unsupported => Ok(false),
        Err(error) => Err(Error::io(db.storage.path(), error)),
    }
}

/// How [`Db::vacuum`] runs.
///
/// ```
/// let options = rbolt::VacuumOptions::default();
/// assert_eq!(options.pages_per_step, rbolt::VACUUM_STEP_PAGES_DEFAULT);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct VacuumOptions {
    /// The most pages one step (one commit) chooses to move; the paths above them are
    /// rewritten too. Smaller steps hold the writer for less time; larger ones commit less.
    pub pages_per_step: usize,
}

impl Default for VacuumOptions {
    fn default() -> VacuumOptions {
        VacuumOptions {
            pages_per_step: VACUUM_STEP_PAGES_DEFAULT,
        }
    }
}

impl VacuumOptions {
    /// Sets `pages_per_step` (at least 1).
    ///
    /// ```
    /// use std::ops::ControlFlow;
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// // at least 1
    /// assert_eq!(rbolt::VacuumOptions::default().pages_per_step(0).pages_per_step, 1);
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for i in 0u32..5000 {
    ///         b.put(i.to_be_bytes(), [7; 100])?;
    ///     }
    ///     Ok(())
    /// })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut("b")?.unwrap();
    ///     for i in 0u32..4500 {
    ///         b.delete(i.to_be_bytes())?;
    ///     }
    ///     Ok(())
    /// })?;
    /// // Small steps: more commits, each holding the writer for less time.
    /// let options = rbolt::VacuumOptions::default().pages_per_step(4);
    /// let report = db.vacuum(options, |_| ControlFlow::Continue(()))?;
    /// assert!(report.steps > 1 && report.file_len < report.file_len_before);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    #[must_use]
    pub fn pages_per_step(mut self, pages_per_step: usize) -> VacuumOptions {
        self.pages_per_step = pages_per_step.max(1);
        self
    }
}

/// What one [`Db::vacuum_step`] did and what is left.
///
/// ```
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut b = tx.create_bucket("b")?;
///     for i in 0u32..5000 {
///         b.put(i.to_be_bytes(), [7; 100])?;
///     }
///     Ok(())
/// })?;
/// db.update(|tx| {
///     let mut b = tx.bucket_mut("b")?.unwrap();
///     for i in 0u32..4500 {
///         b.delete(i.to_be_bytes())?;
///     }
///     Ok(())
/// })?;
/// let high_water = db.begin_read()?.meta().pgid;
/// let step = db.vacuum_step(64)?;
/// assert!(step.committed && step.pages_moved > 0);
/// assert!(step.live_pages < high_water);
/// // The pages the first step freed at the end can be cut by the next.
/// let next = db.vacuum_step(64)?;
/// assert!(next.high_water < high_water);
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VacuumStep {
    /// Tree pages chosen and moved to lower ids by this step's commit (0: nothing could move;
    /// the step may still have committed, to move the freelist page or lower the mark).
    pub pages_moved: u64,
    /// Pages the step expects to give back by merging sparse neighbouring leaves anywhere in
    /// the file (two into one, or more into fewer).
    pub pages_merged: u64,
    /// Whether the step committed (it does when it moved pages or could lower the mark).
    pub committed: bool,
    /// The high-water mark after the step, in pages.
    pub high_water: u64,
    /// The pages in use as the step began: metas, freelist and every tree page. A file
    /// packed without gaps would end here.
    pub live_pages: u64,
    /// Pages in use at or past `live_pages` as the step began: what still has to move. A
    /// finished vacuum can leave a few: spans of several pages (large values) for which no
    /// run of free pages below is long enough.
    pub pages_to_go: u64,
}

/// Where a [`Db::vacuum`] stands: passed to its progress callback after every step, and
/// returned at the end.
///
/// ```
/// use std::ops::ControlFlow;
/// # let dir = tempfile::tempdir().unwrap();
/// # let db = rbolt::Db::open(dir.path().join("db"))?;
/// db.update(|tx| {
///     let mut b = tx.create_bucket("b")?;
///     for i in 0u32..5000 {
///         b.put(i.to_be_bytes(), [7; 100])?;
///     }
///     Ok(())
/// })?;
/// db.update(|tx| {
///     let mut b = tx.bucket_mut("b")?.unwrap();
///     for i in 0u32..4500 {
///         b.delete(i.to_be_bytes())?;
///     }
///     Ok(())
/// })?;
/// // Stop after the first step; a later vacuum picks up where it left off.
/// let options = rbolt::VacuumOptions::default().pages_per_step(8);
/// let first = db.vacuum(options, |_| ControlFlow::Break(()))?;
/// assert_eq!(first.steps, 1);
/// let rest = db.vacuum(rbolt::VacuumOptions::default(), |_| ControlFlow::Continue(()))?;
/// assert!(rest.file_len < first.file_len_before);
/// assert_eq!(rest.file_len, db.file_len()?);
/// # Ok::<(), rbolt::Error>(())
/// ```
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[non_exhaustive]
pub struct VacuumProgress {
    /// Steps (commits) made.
    pub steps: u64,
    /// Pages moved to lower ids.
    pub pages_moved: u64,
    /// Pages given back by merging sparse leaves (as planned).
    pub pages_merged: u64,
    /// The high-water mark now, in pages.
    pub high_water: u64,
    /// The pages in use (see [`VacuumStep::live_pages`]).
    pub live_pages: u64,
    /// Pages in use still past where a packed file would end (see [`VacuumStep::pages_to_go`]).
    pub pages_to_go: u64,
    /// Bytes between the high-water mark and where a packed file would end: how much more
    /// the file could shrink.
    pub bytes_to_go: u64,
    /// The file's length when the vacuum began.
    pub file_len_before: u64,
    /// The file's length now.
    pub file_len: u64,
    /// Time since the vacuum began.
    pub elapsed: Duration,
    /// Whether the vacuum ran to its end (not stopped by the callback).
    pub finished: bool,
}

/// A live page the vacuum could move: where it is, how long, and how to reach it.
struct Candidate {
    pgid: Pgid,
    n_pages: u64,
    /// Index of the bucket path in `Plan::paths`.
    path: usize,
    /// A key whose path from the bucket's root passes through the page: its first key.
    key: Vec<u8>,
}

/// What a vacuum step will touch, and the figures it reports.
#[derive(Default)]
struct Plan {
    /// The buckets found, each as (index of its parent here, its name); index 0 is the root
    /// bucket. Parent links rather than whole paths, so deep nesting costs no more than
    /// its buckets.
    paths: Vec<(usize, Vec<u8>)>,
    /// (bucket path, key) pairs to touch, deduplicated.
    targets: BTreeSet<(usize, Vec<u8>)>,
    pages_moved: u64,
    pages_merged: u64,
    live_pages: u64,
    pages_to_go: u64,
    /// Whether the page just below the high-water mark is free: a commit would lower it.
    tail_free: bool,
    /// Whether the freelist page would move down: every commit writes it to the lowest free
    /// run that fits, so a commit moves it without touching anything.
    freelist_moves: bool,
}

/// `Candidate::path` of the freelist page, which no tree holds.
const PATH_FREELIST: usize = usize::MAX;

/// A tree page to visit, in the bucket at `path`; `slot` is its parent branch and index there.
struct Visit {
    owner: Pgid,
    pgid: Pgid,
    depth: usize,
    path: usize,
    slot: Option<(Pgid, usize)>,
}

/// A leaf less than `REPACK_FULL_PERCENT` full, with where it hangs: two such leaves side by
/// side whose entries fit one page are a page a repack gives back.
struct SparseLeaf {
    slot: (Pgid, usize),
    used: usize,
    path: usize,
    key: Vec<u8>,
}

/// Walks every tree of the snapshot (`pages`, `meta`) with explicit stacks and chooses up to
/// `pages_max` live pages to move: highest ids first, each only where the free set (as the
/// allocator would hand it out, first fit) has room below it.
fn plan(pages: Pages<'_>, meta: &Meta, freelist: &AnyFreelist, pages_max: usize) -> Result<Plan> {
    let high_water = meta.pgid;
    // The free set as runs (start → length), as first fit sees it.
    let mut runs: BTreeMap<u64, u64> = BTreeMap::new();
    let mut last_run: Option<(u64, u64)> = None;
    for id in freelist.free_ids() {
        last_run = match last_run {
            Some((start, len)) if start + len == id.0 => Some((start, len + 1)),
            Some(run) => {
                runs.insert(run.0, run.1);
                Some((id.0, 1))
            }
            None => Some((id.0, 1)),
        };
    }
    if let Some((start, len)) = last_run {
        runs.insert(start, len);
    }
    let lowest_free = runs.keys().next().copied().unwrap_or(high_water);
    let mut plan = Plan {
        paths: vec![(0, Vec::new())],
        tail_free: last_run.is_some_and(|(start, len)| start + len == high_water),
        ..Plan::default()
    };

    // Every page in use, counted; those above the lowest free id kept as candidates.
    let mut seen = PageSet::new(meta.high_water());
    let mut live_pages = 2u64;
    let mut in_use: Vec<(u64, u64)> = Vec::new();
    let mut candidates: Vec<Candidate> = Vec::new();
    if meta.has_freelist() {
        let span = pages.page(Pgid(0), meta.freelist_pgid())?;
        let n_pages = u64::from(PageRef::new(span, meta.freelist_pgid())?.header().overflow) + 1;
        live_pages += n_pages;
        in_use.push((meta.freelist, n_pages));
        if meta.freelist > lowest_free {
            candidates.push(Candidate {
                pgid: meta.freelist_pgid(),
                n_pages,
                path: PATH_FREELIST,
                key: Vec::new(),
            });
        }
    }
    let mut stack = vec![Visit {
        owner: Pgid(0),
        pgid: meta.root_pgid(),
        depth: 0,
        path: 0,
        slot: None,
    }];
    let page_size = pages.page_size();
    let full = page_size * rbolt_btree::REPACK_FULL_PERCENT / 100;
    let mut sparse: Vec<SparseLeaf> = Vec::new();
    while let Some(visit) = stack.pop() {
        let page = enter_page(pages, visit.owner, visit.pgid, visit.depth, &mut seen)?;
        let n_pages = u64::from(page.header().overflow) + 1;
        live_pages += n_pages;
        in_use.push((visit.pgid.0, n_pages));
        let first_key = match page.kind()? {
            PageKind::Branch => {
                let branch = page.branch()?;
                for index in 0..branch.len() {
                    stack.push(Visit {
                        owner: visit.pgid,
                        pgid: branch.child(index)?,
                        depth: visit.depth + 1,
                        path: visit.path,
                        slot: Some((visit.pgid, index)),
                    });
                }
                if !branch.is_empty() {
                    Some(branch.key(0)?)
                } else {
                    None
                }
            }
            PageKind::Leaf => {
                let leaf = page.leaf()?;
                push_buckets(&leaf, visit.path, &mut plan.paths, &mut stack)?;
                let used = leaf.payload_len()?;
                if let Some(slot) = visit.slot
                    && used < full
                    && !leaf.is_empty()
                {
                    sparse.push(SparseLeaf {
                        slot,
                        used,
                        path: visit.path,
                        key: leaf.key(0)?.to_vec(),
                    });
                }
                if !leaf.is_empty() {
                    Some(leaf.key(0)?)
                } else {
                    None
                }
            }
            kind => return Err(not_a_tree_page(visit.pgid, kind)),
        };
        if visit.pgid.0 > lowest_free {
            candidates.push(Candidate {
                pgid: visit.pgid,
                n_pages,
                path: visit.path,
                // An empty page is a lone root leaf (rebalancing removes any other): every
                // key leads to it.
                key: first_key.map_or_else(|| vec![0], <[u8]>::to_vec),
            });
        }
    }
    plan.live_pages = live_pages;
    plan.pages_to_go = in_use
        .iter()
        .filter(|&&(pgid, _)| pgid >= live_pages)
        .map(|&(_, n_pages)| n_pages)
        .sum();

    // Highest first, each into the run first fit would give it, while that run is lower.
    candidates.sort_unstable_by_key(|candidate| std::cmp::Reverse(candidate.pgid));
    let pages_max = pages_max.max(1) as u64;
    for candidate in candidates {
        let n = candidate.n_pages;
        if plan.pages_moved > 0 && plan.pages_moved + n > pages_max {
            break;
        }
        let slot = runs
            .iter()
            .find(|&(_, &len)| len >= n)
            .map(|(&start, &len)| (start, len));
        let Some((start, len)) = slot.filter(|&(start, _)| start < candidate.pgid.0) else {
            if n == 1 {
                // No free page below this one, so none below any lower one either.
                break;
            }
            continue;
        };
        runs.remove(&start);
        if len > n {
            runs.insert(start + n, len - n);
        }
        if candidate.path == PATH_FREELIST {
            // Not counted as moved: every commit rewrites the freelist wherever first fit
            // puts it, so counting it would make every step look like progress.
            plan.freelist_moves = true;
        } else {
            plan.pages_moved += n;
            plan.targets.insert((candidate.path, candidate.key));
        }
    }
    // Then, with what is left of the budget, sparse neighbours to merge wherever they lie: the
    // pages they give back are the holes later steps move the end of the file into.
    sparse.sort_unstable_by_key(|leaf| leaf.slot);
    let mut index = 0;
    while index + 1 < sparse.len() && plan.pages_moved + plan.pages_merged < pages_max {
        let (left, right) = (&sparse[index], &sparse[index + 1]);
        let neighbours = left.slot.0 == right.slot.0 && left.slot.1 + 1 == right.slot.1;
        if neighbours && left.used + right.used - rbolt_page::PAGE_HEADER_SIZE <= page_size {
            plan.pages_merged += 1;
            plan.targets.insert((left.path, left.key.clone()));
            // The right one goes into the left; the next pair starts after it.
            index += 2;
        } else {
            index += 1;
        }
    }
    Ok(plan)
}

/// The names from the root bucket down to bucket `index` of `paths` (empty for the root).
fn bucket_names(paths: &[(usize, Vec<u8>)], mut index: usize) -> Vec<&[u8]> {
    let mut names = Vec::new();
    while index != 0 {
        let (parent, name) = &paths[index];
        debug_assert!(*parent < index, "a bucket is found after its parent");
        names.push(name.as_slice());
        index = *parent;
    }
    names.reverse();
    names
}

/// Queues the root pages of the buckets nested in `leaf` (in bucket `path`), through inline
/// buckets too, each with its own path.
fn push_buckets(
    leaf: &LeafPage<'_>,
    path: usize,
    paths: &mut Vec<(usize, Vec<u8>)>,
    stack: &mut Vec<Visit>,
) -> Result<()> {
    let mut inline_stack = vec![(*leaf, path)];
    while let Some((leaf, path)) = inline_stack.pop() {
        for index in 0..leaf.len() {
            let entry = leaf.entry(index)?;
            if !entry.is_bucket() {
                continue;
            }
            let value = BucketValue::parse(entry.value, leaf.pgid())?;
            paths.push((path, entry.key.to_vec()));
            let child = paths.len() - 1;
            match value.inline {
                Some(inline) => inline_stack.push((inline, child)),
                None => stack.push(Visit {
                    owner: leaf.pgid(),
                    pgid: value.header.root_pgid(),
                    depth: 0,
                    path: child,
                    slot: None,
                }),
            }
        }
    }
    Ok(())
}

impl Db {
    /// One step of an online vacuum, as one ordinary durable write transaction: chooses up
    /// to `pages_max` live pages near the end of the file for which lower free pages exist,
    /// rewrites the paths through them (so copy-on-write moves them to the lowest free
    /// pages), and commits with the high-water mark lowered past whatever is free at the end
    /// of the file. The file itself is cut once that meta is durable and no reader of an
    /// older snapshot is open (perhaps later, when such a reader ends).
    ///
    /// Takes the writer for one commit, like any write transaction; readers go on. A step
    /// that finds nothing to move and nothing to cut commits nothing. Pages freed by a step
    /// become reusable (and cuttable) once no reader can see them, usually at the next step.
    /// An error leaves the database as it was, like any failed commit.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for i in 0u32..5000 {
    ///         b.put(i.to_be_bytes(), [7; 100])?;
    ///     }
    ///     Ok(())
    /// })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut("b")?.unwrap();
    ///     for i in 0u32..4500 {
    ///         b.delete(i.to_be_bytes())?;
    ///     }
    ///     Ok(())
    /// })?;
    /// let before = db.begin_read()?.meta().pgid;
    /// let mut steps = 0;
    /// loop {
    ///     let step = db.vacuum_step(32)?;
    ///     steps += 1;
    ///     if !step.committed || step.pages_to_go == 0 {
    ///         break;
    ///     }
    /// }
    /// assert!(steps > 1);
    /// assert!(db.begin_read()?.meta().pgid < before);
    /// assert_eq!(db.begin_read()?.check(), []);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn vacuum_step(&self, pages_max: usize) -> Result<VacuumStep> {
        let mut tx = self.begin_write()?;
        let plan = {
            let (pages, meta, freelist) = tx.vacuum_view();
            plan(pages, meta, freelist, pages_max)?
        };
        let mut step = VacuumStep {
            pages_moved: plan.pages_moved,
            pages_merged: plan.pages_merged,
            committed: false,
            high_water: tx.vacuum_view().1.pgid,
            live_pages: plan.live_pages,
            pages_to_go: plan.pages_to_go,
        };
        if plan.targets.is_empty() && !plan.tail_free && !plan.freelist_moves {
            tx.rollback();
            return Ok(step);
        }
        for (path, key) in &plan.targets {
            let names = bucket_names(&plan.paths, *path);
            let Some(mut bucket) = tx.bucket_at(&names)? else {
                debug_assert!(false, "a bucket the walk found is missing");
                continue;
            };
            let shared = bucket.tx;
            let pages = shared.pages();
            let mut core = shared.core.borrow_mut();
            let core = &mut *core;
            let state = bucket.state_mut();
            // Full pages where the step merges sparse leaves, as compaction writes them.
            state.tree.set_fill_percent(1.0);
            state.tree.repack_key(
                pages,
                &mut core.arena,
                &mut core.alloc,
                key,
                REPACK_PAGES_MAX * self.page_size,
            )?;
        }
        tx.force = true;
        tx.shrink = true;
        tx.commit()?;
        step.committed = true;
        step.high_water = self.snapshot().meta.pgid;
        Ok(step)
    }

    /// Vacuums the database online: [`vacuum_step`](Db::vacuum_step)s of
    /// `options.pages_per_step` pages until nothing more can move and the end of the file is
    /// cut, then cuts the file to its high-water mark exactly (but not below the 4 KiB Go bbolt
    /// needs to open a file), if no reader of an older snapshot is open, otherwise when the
    /// last such reader ends, and syncs.
    ///
    /// `progress` is called after every step; returning `ControlFlow::Break` stops the vacuum
    /// there. Every step is a commit, so a vacuum stopped (or crashed) at any point resumes by
    /// running again. Readers never wait; other writers wait at most one step. Pages an open
    /// reader can still see are neither reused nor cut until it ends: run the vacuum again
    /// afterwards to finish (a reader open since before the vacuum holds the old pages of
    /// everything moved).
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// use std::ops::ControlFlow;
    /// let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket(b"b")?;
    ///     for i in 0..20_000u32 {
    ///         b.put(i.to_be_bytes(), [7; 100])?;
    ///     }
    ///     Ok(())
    /// })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut(b"b")?.unwrap();
    ///     for i in 0..19_000u32 {
    ///         b.delete(i.to_be_bytes())?;
    ///     }
    ///     Ok(())
    /// })?;
    /// let report = db.vacuum(rbolt::VacuumOptions::default(), |_| ControlFlow::Continue(()))?;
    /// assert!(report.file_len < report.file_len_before);
    /// # Ok::<(), rbolt::Error>(())
    /// ```
    pub fn vacuum(
        &self,
        options: VacuumOptions,
        mut progress: impl FnMut(&VacuumProgress) -> ControlFlow<()>,
    ) -> Result<VacuumProgress> {
        let started = Instant::now();
        let mut report = VacuumProgress {
            file_len_before: self.file_len()?,
            ..VacuumProgress::default()
        };
        // Every step that commits moves a page down or lowers the mark, so a vacuum ends; the
        // bound only guards against an allocator that stops behaving as planned.
        let steps_max = self
            .snapshot()
            .meta
            .pgid
            .saturating_add(SHRINK_STEPS_MAX as u64);
        let mut idle_steps = 0;
        // Merges must shrink the pages in use: steps that merge without doing so (a plan that
        // misjudged a page) end the vacuum after a few.
        let mut live_best = u64::MAX;
        let mut merge_stalls = 0;
        loop {
            let high_water_before = self.snapshot().meta.pgid;
            let step = self.vacuum_step(options.pages_per_step)?;
            report.pages_moved += step.pages_moved;
            report.pages_merged += step.pages_merged;
            report.steps += u64::from(step.committed);
            self.fill_progress(&mut report, &step, started)?;
            let lowered = step.high_water < high_water_before;
            if step.live_pages < live_best {
                live_best = step.live_pages;
                merge_stalls = 0;
            } else if step.pages_merged > 0 {
                merge_stalls += 1;
            }
            if step.pages_moved == 0 && (step.pages_merged == 0 || merge_stalls > SHRINK_STEPS_MAX)
            {
                idle_steps += 1;
                if !lowered || idle_steps >= SHRINK_STEPS_MAX {
                    break;
                }
            } else {
                idle_steps = 0;
            }
            if progress(&report).is_break() {
                return Ok(report);
            }
            if report.steps >= steps_max {
                break;
            }
            // Let a writer waiting for the lock take it between steps.
            std::thread::yield_now();
        }
        self.truncate_to_high_water()?;
        report.file_len = self.file_len()?;
        report.elapsed = started.elapsed();
        report.finished = true;
        let _ = progress(&report);
        Ok(report)
    }

    fn fill_progress(
        &self,
        report: &mut VacuumProgress,
        step: &VacuumStep,
        started: Instant,
    ) -> Result<()> {
        report.high_water = step.high_water;
        report.live_pages = step.live_pages;
        report.pages_to_go = step.pages_to_go;
        report.bytes_to_go = step
            .high_water
            .saturating_sub(step.live_pages)
            .saturating_mul(self.page_size as u64);
        report.file_len = self.file_len()?;
        report.elapsed = started.elapsed();
        Ok(())
    }

    /// Cuts the file to exactly the high-water mark when it is longer (never below 4 KiB, which
    /// Go bbolt needs to open it), and syncs; waits for nothing: with readers of older
    /// snapshots open, the cut happens when the last ends.
    fn truncate_to_high_water(&self) -> Result<()> {
        self.check_not_writer()?;
        let mut writer = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        self.check_poisoned()?;
        let meta = self.snapshot().meta;
        // Go bbolt opens a file by reading its first 4 KiB: no cut leaves less.
        let needed = meta
            .pgid
            .saturating_mul(self.page_size as u64)
            .max(GO_OPEN_LEN_MIN);
        if writer.file_len > needed && writer.truncate.is_none_or(|t| t.len > needed) {
            writer.truncate = Some(Truncate {
                len: needed,
                after: meta.txid(),
            });
        }
        if truncate_if_unseen(self, &mut writer)? {
            self.storage.sync_data().map_err(|e| {
                self.poison();
                Error::io(self.storage.path(), e)
            })?;
        }
        Ok(())
    }
}
