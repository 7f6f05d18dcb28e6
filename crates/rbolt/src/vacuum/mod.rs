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
//! - **Truncating the file** comes after: once a meta with a mark that low is durable (the
//!   durable meta is what a power loss brings back; after a commit without syncs, the cut
//!   waits for the next durable point) and no open reader started from an older snapshot,
//!   whose mapping and high-water mark may reach the tail ([`Truncate`]). Until then the truncation
//!   waits in the writer state, and is tried again after every commit and when a reader ends.
//!   The file is never shorter than the newest meta's mark times the page size, so an open
//!   never reports `Error::Truncated` for it, crash or not: a truncation that a crash loses
//!   leaves a longer file, which is sound.
//! - **The vacuum** ([`Db::vacuum_step`], [`Db::vacuum`]) moves the live pages at the top of
//!   the file below the lowest of them: a step takes the highest pages (within its budget) for
//!   which everything the commit will write — the pages, the pages above each of them up to
//!   the root, which copy-on-write rewrites too, and the freelist page — fits in the free pages
//!   below that cut, as the allocator hands them out (multi-page runs reserved first, largest
//!   first; then single pages, the lowest; then the freelist). It touches each page down to
//!   its own depth (`Tree::touch_to_depth`: nothing below it is rewritten), merges sparse
//!   sibling leaves with what is left of the budget (`Tree::repack_key`), and commits; the old
//!   ids are freed, and the next step cuts them off the end. A page no free run below it can
//!   take stays, and the pages under it still move (making room for it later). A step never
//!   raises the mark: one whose commit would is refused before anything is written. With no
//!   room for the freelist page below the cut, a step writes none (bbolt's format allows it)
//!   and the vacuum's last commit writes it again. Every step is one durable commit (whatever
//!   `Options::no_sync` says) that takes the writer for a bounded time, so other writers
//!   interleave and readers never wait.

mod plan;

use crate::db::Db;
use crate::engine::Truncate;
use crate::engine::shrink::truncate_if_unseen;
use crate::error::{Error, Result};
use plan::{Kept, REPACK_PAGES_MAX, bucket_names, plan, survey};
use rbolt_page::Pgid;
use std::ops::ControlFlow;
use std::time::{Duration, Instant};

/// Pages one vacuum step moves when the caller does not say: a commit of about 4 MiB of
/// page writes at the default page size, a few milliseconds of holding the writer.
pub const VACUUM_STEP_PAGES_DEFAULT: usize = 1024;

/// Steps in a row that commit without progress (no lower mark, no fewer pages to go, no
/// fewer pages in use) after which a vacuum stops: the figures lag a step (pages freed by one
/// step are cut by the next), so a few are allowed; the bound keeps a vacuum finite whatever
/// the allocator does.
const SHRINK_STEPS_MAX: usize = 4;

/// The shortest file Go bbolt opens: its `Open` reads the first 4 KiB to find the page size,
/// and refuses a file shorter than that (`ErrInvalid`), whatever its page size.
const GO_OPEN_LEN_MIN: u64 = 4096;

/// How [`Db::vacuum`] runs.
///
/// ```
/// let options = rbolt::VacuumOptions::default();
/// assert_eq!(options.pages_per_step, rbolt::VACUUM_STEP_PAGES_DEFAULT);
/// ```
#[derive(Clone, Debug)]
#[non_exhaustive]
pub struct VacuumOptions {
    /// The most pages one step (one commit) chooses to move (at least one); the pages above
    /// them are rewritten too. Smaller steps hold the writer for less time; larger ones commit
    /// less, and move pages whose paths are long (deeply nested buckets) while the file still
    /// has room for what such a move rewrites.
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
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut("b")?.unwrap();
    ///     for i in 0u32..4500 {
    ///         b.delete(i.to_be_bytes())?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
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
///     Ok::<_, rbolt::Error>(())
/// })?;
/// db.update(|tx| {
///     let mut b = tx.bucket_mut("b")?.unwrap();
///     for i in 0u32..4500 {
///         b.delete(i.to_be_bytes())?;
///     }
///     Ok::<_, rbolt::Error>(())
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
    /// Tree pages this step's commit moved from the top of the file to lower ids (0: nothing
    /// could move without growing the file; the step may still have committed, to merge
    /// sparse leaves, move the freelist page down or cut the free end).
    pub pages_moved: u64,
    /// Pages the step expects to give back by merging sparse neighbouring leaves anywhere in
    /// the file (two into one, or more into fewer).
    pub pages_merged: u64,
    /// Whether the step committed: it does only when it moves pages, merges leaves, moves the
    /// freelist page down or cuts the free end of the file. A vacuum that has done what it can
    /// reports `false`.
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
    /// Whether the step walked every tree of the file to plan: always for a `vacuum_step`;
    /// in a [`Db::vacuum`], its first step and one whose walk had nothing left to plan.
    pub walked: bool,
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
///     Ok::<_, rbolt::Error>(())
/// })?;
/// db.update(|tx| {
///     let mut b = tx.bucket_mut("b")?.unwrap();
///     for i in 0u32..4500 {
///         b.delete(i.to_be_bytes())?;
///     }
///     Ok::<_, rbolt::Error>(())
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
    /// The pages in use (see [`VacuumStep::live_pages`]); in the last report, as the vacuum
    /// left the file.
    pub live_pages: u64,
    /// Pages in use still past where a packed file would end (see [`VacuumStep::pages_to_go`]):
    /// as the last step began, and in the last report (`finished`) as the vacuum left the
    /// file. It can go up from one step to the next: merged leaves lower `live_pages`, where
    /// a packed file would end, and pages just below the old end then count as still to go.
    pub pages_to_go: u64,
    /// Bytes between the high-water mark and where a packed file would end: how much more
    /// the file could shrink.
    pub bytes_to_go: u64,
    /// The file's length when the vacuum began.
    pub file_len_before: u64,
    /// The file's length now.
    pub file_len: u64,
    /// Whole-file walks the steps planned from (see [`VacuumStep::walked`]): a few per
    /// vacuum, not one per step.
    pub walks: u64,
    /// Time since the vacuum began.
    pub elapsed: Duration,
    /// Whether the vacuum ran to its end (not stopped by the callback).
    pub finished: bool,
}

impl Db {
    /// One step of an online vacuum, as one ordinary durable write transaction (whatever
    /// `Options::no_sync` says): moves up to `pages_max` of the live pages at the top of the
    /// file below the lowest of them, where everything the commit writes for them fits (the
    /// pages above each of them are rewritten too), merges sparse sibling leaves with what is
    /// left of the budget, and commits with the high-water mark lowered past whatever is free
    /// at the end of the file. A step never raises the mark. The file itself is cut once that
    /// meta is durable and no reader of an older snapshot is open (perhaps later, when such a
    /// reader ends).
    ///
    /// Takes the writer for one commit, like any write transaction; readers go on. A step
    /// that finds nothing to move, merge or cut commits nothing (`committed: false`). Pages
    /// freed by a step become reusable (and cuttable) once no reader can see them, usually at
    /// the next step. An error leaves the database as it was, like any failed commit.
    ///
    /// ```
    /// # let dir = tempfile::tempdir().unwrap();
    /// # let db = rbolt::Db::open(dir.path().join("db"))?;
    /// db.update(|tx| {
    ///     let mut b = tx.create_bucket("b")?;
    ///     for i in 0u32..5000 {
    ///         b.put(i.to_be_bytes(), [7; 100])?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut("b")?.unwrap();
    ///     for i in 0u32..4500 {
    ///         b.delete(i.to_be_bytes())?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
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
        self.step_with(pages_max, &mut None)
    }

    /// A [`vacuum_step`](Db::vacuum_step) planned from `kept` (walked first when `None` or,
    /// if it is older than the snapshot, when the plan it gives does nothing); `kept` is
    /// updated with what the step did. A step from an older walk that cannot commit (the
    /// file has no room below its mark for what it rewrites) leaves `kept` as `None`: the
    /// next step walks again.
    fn step_with(&self, pages_max: usize, kept: &mut Option<Kept>) -> Result<VacuumStep> {
        let mut tx = self.begin_write()?;
        let (plan, walked) = self.plan_step(&mut tx, pages_max, kept)?;
        let Some(kept_now) = kept.as_mut() else {
            unreachable!("planning keeps a walk");
        };
        let fresh = kept_now.fresh;
        let mark = tx.vacuum_view().1.pgid;
        let mut step = VacuumStep {
            pages_moved: plan.pages_moved,
            pages_merged: plan.pages_merged,
            committed: false,
            high_water: mark,
            live_pages: plan.live_pages,
            pages_to_go: plan.pages_to_go,
            walked,
        };
        if !plan.does_something() {
            tx.rollback();
            return Ok(step);
        }
        // Multi-page runs first, largest first, the cut and the mark, as the plan placed them
        // (the plan made this same call on the allocator's planning face).
        tx.allocator_mut()
            .vacuum_step(&plan.spans, plan.cut.map(Pgid), Pgid(mark));
        self.rewrite_planned(&mut tx, &plan, kept_now)?;
        tx.commit_unchanged = true;
        tx.shrink = true;
        tx.skip_freelist = plan.skip_freelist;
        // Every step is durable, whatever the handle's default: a vacuum is for giving the
        // file's tail back, which waits for a durable meta with the lower mark.
        tx.set_durability(crate::Durability::Immediate);
        match tx.commit() {
            Ok(()) => {}
            Err(Error::MaxSizeReached { max_size })
                if max_size == mark.saturating_mul(self.engine.page_size as u64) =>
            {
                step.pages_moved = 0;
                step.pages_merged = 0;
                if !fresh {
                    *kept = None;
                }
                return Ok(step);
            }
            Err(error) => return Err(error),
        }
        kept_now.record(&plan);
        step.committed = true;
        step.high_water = self.engine.snapshot().meta.pgid;
        // Pages meant to move that landed at or past the cut after all did not move.
        let past_cut = self.engine.lock_writer().past_cut;
        step.pages_moved = step.pages_moved.saturating_sub(past_cut);
        let path = self.engine.storage.path();
        let VacuumStep {
            pages_moved: moved,
            pages_merged: merged,
            ..
        } = step;
        crate::trace::vacuum_step(path, true, moved, merged, step.high_water, step.pages_to_go);
        Ok(step)
    }

    /// The plan of a step in `tx` from `kept` (walked first when `None`, or again when it is
    /// older than the snapshot and has nothing left to plan); whether it walked.
    fn plan_step(
        &self,
        tx: &mut crate::WriteTx<'_>,
        pages_max: usize,
        kept: &mut Option<Kept>,
    ) -> Result<(plan::Plan, bool)> {
        let mut walked = false;
        loop {
            let alloc = tx.allocation_plan();
            let (pages, meta, freelist) = tx.vacuum_view();
            let kept_now = match kept {
                Some(kept) => kept,
                None => {
                    walked = true;
                    kept.insert(survey(pages, meta)?)
                }
            };
            let writes_freelist = !self.engine.options.no_freelist_sync;
            let plan = plan(
                pages,
                meta,
                freelist,
                alloc,
                pages_max,
                writes_freelist,
                kept_now,
            )?;
            if plan.does_something() || kept_now.fresh {
                return Ok((plan, walked));
            }
            // Nothing left to do by the old walk: walk the snapshot as it is now.
            *kept = None;
        }
    }

    /// Rewrites in `tx` what `plan` moves (the pages on each planned path, to its depth) and
    /// merges (sparse leaves repacked from each planned key), finding buckets by `kept`'s
    /// paths.
    fn rewrite_planned(
        &self,
        tx: &mut crate::WriteTx<'_>,
        plan: &plan::Plan,
        kept: &Kept,
    ) -> Result<()> {
        for (path, key, depth) in &plan.moves {
            // A bucket another writer deleted since an older walk: nothing to move.
            let Some(mut bucket) = planned_bucket(tx, kept, *path)? else {
                continue;
            };
            let shared = bucket.tx;
            let pages = shared.pages();
            let mut core = shared.core.borrow_mut();
            let state = bucket.state_mut();
            state
                .tree
                .touch_to_depth(pages, &mut core.arena, key, *depth)?;
        }
        for (path, key) in &plan.merges {
            let Some(mut bucket) = planned_bucket(tx, kept, *path)? else {
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
                &mut core.writes,
                key,
                REPACK_PAGES_MAX * self.engine.page_size,
            )?;
        }
        Ok(())
    }

    /// Vacuums the database online: [`vacuum_step`](Db::vacuum_step)s of
    /// `options.pages_per_step` pages while they make progress (a lower mark, fewer pages to
    /// go or fewer pages in use; it stops when a step commits nothing, or after a few steps
    /// without progress), then cuts the file to its high-water mark exactly (but not below the
    /// 4 KiB Go bbolt needs to open a file), if no reader of an older snapshot is open,
    /// otherwise when the last such reader ends, and syncs. No step grows the file, so a vacuum
    /// works on a file at its `max_size` too. A vacuum of a vacuumed file commits nothing.
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
    ///     Ok::<_, rbolt::Error>(())
    /// })?;
    /// db.update(|tx| {
    ///     let mut b = tx.bucket_mut(b"b")?.unwrap();
    ///     for i in 0..19_000u32 {
    ///         b.delete(i.to_be_bytes())?;
    ///     }
    ///     Ok::<_, rbolt::Error>(())
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
        let mark_before = self.engine.snapshot().meta.pgid;
        // A step that commits moves pages below its cut, merges sparse leaves or cuts the free
        // tail; the vacuum goes on while that shows as progress — a lower mark, fewer pages
        // to go or fewer pages in use — and stops after a few steps in a row without.
        let mut stalls = Stalls {
            best: (u64::MAX, u64::MAX, u64::MAX),
            count: 0,
            rewalked: false,
        };
        // A bound whatever happens: every page of the file moved a few times over.
        let steps_max = self
            .engine
            .snapshot()
            .meta
            .pgid
            .saturating_mul(2)
            .saturating_add(SHRINK_STEPS_MAX as u64);
        // The walk of the snapshot the steps plan from, kept while it serves (see `Kept`).
        let mut kept = None;
        loop {
            let step_started = Instant::now();
            let from_old_walk = kept.as_ref().is_some_and(|kept: &Kept| !kept.fresh);
            let step = self.step_with(options.pages_per_step, &mut kept)?;
            let step_took = step_started.elapsed();
            report.walks += u64::from(step.walked);
            if !step.committed {
                if from_old_walk && kept.is_none() {
                    // Planned from an old walk, and it could not commit: walk again.
                    continue;
                }
                break;
            }
            report.pages_moved += step.pages_moved;
            report.pages_merged += step.pages_merged;
            report.steps += 1;
            self.fill_progress(&mut report, &step, started)?;
            let now = (step.high_water, step.pages_to_go, step.live_pages);
            if stalls.stop(now, &mut kept) {
                break;
            }
            if progress(&report).is_break() {
                return Ok(report);
            }
            if report.steps >= steps_max {
                break;
            }
            // Writers that wait for the lock or take it get at least as long between steps
            // as the step held it (without, a writer beside the vacuum could get almost no
            // turn: issue 52's scale rows).
            self.engine.turns.share(&self.engine.writer, step_took);
        }
        self.finish_vacuum(&mut report, mark_before, started)?;
        let _ = progress(&report);
        Ok(report)
    }

    /// The end of a vacuum that ran to its end: the freelist written if a step dropped it,
    /// the file cut to its mark, and `report` made the file's as the vacuum leaves it.
    fn finish_vacuum(
        &self,
        report: &mut VacuumProgress,
        mark_before: u64,
        started: Instant,
    ) -> Result<()> {
        self.write_freelist_if_dropped(mark_before)?;
        self.truncate_to_high_water()?;
        // A step's figures are those it began with; the last report is of the file as the
        // vacuum leaves it.
        (report.live_pages, report.pages_to_go) = self.vacuum_survey()?;
        report.high_water = self.engine.snapshot().meta.pgid;
        report.bytes_to_go = report
            .high_water
            .saturating_sub(report.live_pages)
            .saturating_mul(self.engine.page_size as u64);
        report.file_len = self.file_len()?;
        report.elapsed = started.elapsed();
        report.finished = true;
        let path = self.engine.storage.path();
        crate::trace::vacuum_done(path, report.steps, report.file_len_before, report.file_len);
        Ok(())
    }

    /// A step with no room for the freelist page below its cut wrote none; once the vacuum is
    /// done, one commit writes it again (where first fit puts it, the tail cut off first), so
    /// that the file keeps a freelist as the options say.
    /// Never past `mark_max` (where the vacuum began): a file with no room for its freelist
    /// then keeps none, which bbolt's format allows, until a later commit writes one.
    fn write_freelist_if_dropped(&self, mark_max: u64) -> Result<()> {
        if self.engine.options.no_freelist_sync || self.engine.snapshot().meta.has_freelist() {
            return Ok(());
        }
        let mut tx = self.begin_write()?;
        if tx.vacuum_view().1.has_freelist() {
            return Ok(());
        }
        tx.commit_unchanged = true;
        tx.shrink = true;
        tx.allocator_mut().vacuum_step(&[], None, Pgid(mark_max));
        tx.set_durability(crate::Durability::Immediate);
        match tx.commit() {
            Err(Error::MaxSizeReached { max_size })
                if max_size == mark_max.saturating_mul(self.engine.page_size as u64) =>
            {
                Ok(())
            }
            result => result,
        }
    }

    /// The pages in use and the pages in use past where a packed file would end, as the file
    /// is now (the survey a step begins with, in a transaction rolled back).
    fn vacuum_survey(&self) -> Result<(u64, u64)> {
        let mut tx = self.begin_write()?;
        let plan = {
            let alloc = tx.allocation_plan();
            let (pages, meta, freelist) = tx.vacuum_view();
            let kept = survey(pages, meta)?;
            let writes_freelist = !self.engine.options.no_freelist_sync;
            plan(pages, meta, freelist, alloc, 1, writes_freelist, &kept)?
        };
        tx.rollback();
        Ok((plan.live_pages, plan.pages_to_go))
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
            .saturating_mul(self.engine.page_size as u64);
        report.file_len = self.file_len()?;
        report.elapsed = started.elapsed();
        Ok(())
    }

    /// Cuts the file to exactly the high-water mark when it is longer (never below 4 KiB, which
    /// Go bbolt needs to open it), and syncs; waits for nothing: with readers of older
    /// snapshots open, the cut happens when the last ends.
    fn truncate_to_high_water(&self) -> Result<()> {
        self.engine.check_not_writer()?;
        let mut writer = self.engine.lock_writer();
        self.engine.check_poisoned()?;
        let meta = self.engine.snapshot().meta;
        // Go bbolt opens a file by reading its first 4 KiB: no cut leaves less.
        let needed = meta
            .pgid
            .saturating_mul(self.engine.page_size as u64)
            .max(GO_OPEN_LEN_MIN);
        if writer.file_len > needed && writer.truncate.is_none_or(|t| t.len > needed) {
            writer.truncate = Some(Truncate {
                len: needed,
                after: meta.txid(),
            });
        }
        if truncate_if_unseen(&self.engine, &mut writer)? {
            self.engine.storage.sync_data().map_err(|e| {
                self.engine.poison();
                Error::io(self.engine.storage.path(), e)
            })?;
        }
        Ok(())
    }
}

/// The bucket at the kept walk's path `path` in `tx`, or `None` where another writer deleted
/// it since an older walk, or put a value under one of its names (`IncompatibleValue` from the
/// path, which is no error of the vacuum's: there is nothing to move there).
fn planned_bucket<'t>(
    tx: &'t mut crate::WriteTx<'_>,
    kept: &Kept,
    path: usize,
) -> Result<Option<crate::BucketMut<'t>>> {
    let names = bucket_names(&kept.paths, path);
    match tx.bucket_at(&names) {
        Ok(None) | Err(Error::IncompatibleValue) if !kept.fresh => Ok(None),
        Ok(None) => {
            debug_assert!(false, "a bucket the walk found is missing");
            Ok(None)
        }
        found => found,
    }
}

/// A [`Db::vacuum`]'s stop rule: the best figures its steps reached (mark, pages to go, pages
/// in use), and how many steps in a row bettered none.
struct Stalls {
    best: (u64, u64, u64),
    count: usize,
    /// Whether the kept walk was dropped for this run of stalls already.
    rewalked: bool,
}

impl Stalls {
    /// Takes a committed step's figures `now`; whether the vacuum stops. Steps planned from
    /// an old walk stall where a fresh one would not (the pages at the top are no longer the
    /// ones it found, after merges and moves): such a stall walks again, once, before it
    /// stops the vacuum (a vacuum of a disturbed file ended with 9% more pages than one that
    /// walked for every step).
    fn stop(&mut self, now: (u64, u64, u64), kept: &mut Option<Kept>) -> bool {
        let best = self.best;
        if now.0 < best.0 || now.1 < best.1 || now.2 < best.2 {
            self.best = (best.0.min(now.0), best.1.min(now.1), best.2.min(now.2));
            self.count = 0;
            self.rewalked = false;
            return false;
        }
        self.count += 1;
        if self.count < SHRINK_STEPS_MAX {
            return false;
        }
        if !self.rewalked && kept.as_ref().is_some_and(|kept| !kept.fresh) {
            *kept = None;
            self.count = 0;
            self.rewalked = true;
            return false;
        }
        true
    }
}
