//! The vacuum's planner: a walk of every tree of a snapshot, and the plan of one step — which
//! sparse leaves to merge and which pages at the top of the file to move below the lowest of
//! them — tried on the allocator's planning face (`rbolt_freelist::Allocator::plan`), which
//! allocates through the same code as the step's commit: so the step lands as planned and
//! never raises the high-water mark (see the parent module).

use crate::error::{Error, Result};
use crate::walk::{Damage, EntryAt, PageAt, PageWalk, Visitor, freelist_span};
use rbolt_btree::Pages;
use rbolt_freelist::{Allocator, AnyFreelist, FreeRuns, Freelist};
use rbolt_page::{
    BranchPage, BucketValue, LeafPage, Meta, Pgid, element_page_size, freelist_page_size,
    leaf_entry_size, pages_for,
};
use std::collections::BTreeSet;

/// The most pages' worth of entries one repack merges into a node (which spill then cuts
/// into full pages): bounds the pages one touched leaf can pull into a step.
pub(super) const REPACK_PAGES_MAX: usize = 16;

/// A live page of the snapshot, as the vacuum plans with it.
struct Live {
    pgid: u64,
    n_pages: u64,
    /// Index in `Kept::lives` of the page that points at it: its parent branch, or for the
    /// root of a nested bucket the leaf that holds the bucket. `None`: the root bucket's root.
    parent: Option<usize>,
    /// Index of its bucket in `Kept::paths`.
    path: usize,
    /// Its depth in its bucket's tree (0: the root).
    depth: usize,
    /// A key whose path from the bucket's root passes through it: its first key.
    key: Vec<u8>,
    /// For a page under a branch: the branch and its index there.
    slot: Option<(Pgid, usize)>,
    /// For a leaf less than `REPACK_FULL_PERCENT` full under a branch: where it hangs.
    sparse: Option<Sparse>,
}

/// A sparse leaf: its parent branch and index there, the bytes of its entries in all, and the
/// bytes of each (element, key and value), which decide how a merge cuts it into pages.
#[derive(Clone)]
struct Sparse {
    parent: Pgid,
    slot: usize,
    entries_len: usize,
    entries: Vec<u32>,
}

/// What a walk of the snapshot's trees found: every live tree page.
struct Walked {
    /// The buckets, each as (index of its parent here, its name); index 0 is the root bucket.
    /// Parent links rather than whole paths, so deep nesting costs no more than its buckets.
    paths: Vec<(usize, Vec<u8>)>,
    lives: Vec<Live>,
    /// The pages of every tree.
    tree_pages: u64,
    /// A leaf that uses fewer bytes is sparse: `REPACK_FULL_PERCENT` of a page.
    full: usize,
}

/// A walk of the snapshot's trees and what the planner derives from it, kept across the steps
/// of one `Db::vacuum`: walking every page for every step made a vacuum cost its steps times
/// the file (341 s at 10M keys; issue 52). A step plans from what is kept: the groups of
/// sparse leaves not merged yet, the pages not rewritten yet, highest first, each found again
/// by its bucket, key and depth (so a page another writer moved or split since is still
/// reached); the free set, the freelist and the figures are the step's own. Nothing the
/// commit writes depends on the walk being current: it bounds where pages land (the cut,
/// and never past the mark), and a step planned from an old walk that finds nothing to do
/// or cannot commit walks again (see the parent module).
pub(super) struct Kept {
    pub(super) paths: Vec<(usize, Vec<u8>)>,
    lives: Vec<Live>,
    tree_pages: u64,
    /// The groups of sparse leaves worth merging, highest first; those before `groups_done`
    /// were merged by a step.
    groups: Vec<Group>,
    groups_done: usize,
    /// Indexes in `lives`, the highest page first.
    order: Vec<usize>,
    /// Lives a step rewrote since the walk (moved below its cut, merged, or on the path of
    /// either): no longer where the walk found them.
    rewritten: Vec<bool>,
    /// Whether no step has committed since the walk: its page ids are the snapshot's.
    pub(super) fresh: bool,
}

impl Kept {
    /// Records what a committed step did: the lives it rewrote and the groups it merged.
    pub(super) fn record(&mut self, plan: &Plan) {
        for &index in &plan.rewritten {
            self.rewritten[index] = true;
        }
        self.groups_done += plan.groups_taken;
        self.fresh = false;
    }
}

/// What a vacuum step will do, and the figures it reports.
#[derive(Default)]
pub(super) struct Plan {
    /// Pages to move: (bucket path, key, depth), deduplicated.
    pub(super) moves: BTreeSet<(usize, Vec<u8>, usize)>,
    /// Sparse leaves to repack with their sparse right siblings: (bucket path, first key).
    pub(super) merges: BTreeSet<(usize, Vec<u8>)>,
    /// The sizes of the multi-page runs the rewritten pages need, largest first: reserved
    /// before anything else is allocated, so that single pages cannot break up their runs.
    pub(super) spans: Vec<u64>,
    /// Where the moved pages were: every page the commit writes is meant to land below it.
    pub(super) cut: Option<u64>,
    /// No run below the cut takes the freelist: the step writes none (bbolt's files may go
    /// without one; the vacuum's last commit writes it).
    pub(super) skip_freelist: bool,
    pub(super) pages_moved: u64,
    pub(super) pages_merged: u64,
    pub(super) live_pages: u64,
    pub(super) pages_to_go: u64,
    pub(super) tail_free: u64,
    /// The freelist page would move down: first fit has a lower run for it.
    pub(super) freelist_moves: bool,
    /// Indexes in the kept lives of every page the step rewrites (see [`Kept::record`]).
    rewritten: Vec<usize>,
    /// Groups of the kept ones the step merges: the next ones.
    groups_taken: usize,
}

impl Plan {
    /// Whether committing the plan changes the file.
    pub(super) fn does_something(&self) -> bool {
        !self.moves.is_empty()
            || !self.merges.is_empty()
            || self.tail_free > 0
            || self.freelist_moves
    }
}

/// Where a page of the survey hangs: the index in `Kept::lives` of what points at it (none
/// for the root bucket's root), and the index of its bucket in `Kept::paths`.
#[derive(Clone, Copy)]
struct Under {
    live: Option<usize>,
    path: usize,
}

impl<'a> Visitor<'a> for Walked {
    type Token = Under;
    type Error = Error;

    fn damage(&mut self, damage: Damage) -> Result<()> {
        Err(damage.into())
    }

    fn page(&mut self, at: &PageAt<'a>, under: Under) -> Result<Option<Under>> {
        let n_pages = u64::from(at.page.header().overflow) + 1;
        self.tree_pages += n_pages;
        let index = self.lives.len();
        // Its first key and whether it is sparse, once its kind is read (`branch`, `leaf`).
        self.lives.push(Live {
            pgid: at.pgid().0,
            n_pages,
            parent: under.live,
            path: under.path,
            depth: at.depth,
            key: Vec::new(),
            slot: at.slot.map(|slot| (at.owner, slot)),
            sparse: None,
        });
        Ok(Some(Under {
            live: Some(index),
            path: under.path,
        }))
    }

    fn branch(&mut self, _at: &PageAt<'a>, branch: &BranchPage<'a>, under: Under) -> Result<()> {
        let Some(live) = under.live.and_then(|index| self.lives.get_mut(index)) else {
            return Ok(());
        };
        if !branch.is_empty() {
            live.key = branch.key(0)?.to_vec();
        }
        Ok(())
    }

    fn leaf(&mut self, at: &PageAt<'a>, leaf: &LeafPage<'a>, under: Under) -> Result<()> {
        let used = leaf.payload_len()?;
        let sparse = match at.slot {
            Some(slot) if used < self.full && !leaf.is_empty() => {
                let mut entries = Vec::with_capacity(leaf.len());
                for entry_index in 0..leaf.len() {
                    let entry = leaf.entry(entry_index)?;
                    let len = leaf_entry_size(entry.key.len(), entry.value.len());
                    entries.push(len as u32);
                }
                Some(Sparse {
                    parent: at.owner,
                    slot,
                    entries_len: entries.iter().map(|&len| len as usize).sum(),
                    entries,
                })
            }
            _ => None,
        };
        let Some(live) = under.live.and_then(|index| self.lives.get_mut(index)) else {
            return Ok(());
        };
        // An empty page is a lone root leaf (rebalancing removes any other): every key leads
        // to it.
        if !leaf.is_empty() {
            live.key = leaf.key(0)?.to_vec();
        }
        live.sparse = sparse;
        Ok(())
    }

    fn bucket(
        &mut self,
        at: &EntryAt<'a>,
        _value: &BucketValue<'a>,
        under: Under,
    ) -> Result<Option<Under>> {
        self.paths.push((under.path, at.entry.key.to_vec()));
        Ok(Some(Under {
            live: under.live,
            path: self.paths.len() - 1,
        }))
    }
}

/// Walks every tree of the snapshot (`pages`, `meta`) with the page walker, and derives what
/// the steps plan with.
pub(super) fn survey(pages: Pages<'_>, meta: &Meta) -> Result<Kept> {
    let mut walked = Walked {
        paths: vec![(0, Vec::new())],
        lives: Vec::new(),
        tree_pages: 0,
        full: pages.page_size() * rbolt_btree::REPACK_FULL_PERCENT / 100,
    };
    let root = Under {
        live: None,
        path: 0,
    };
    PageWalk::new(pages).tree(&mut walked, Pgid(0), meta.root_pgid(), root)?;
    let groups = merge_groups(&walked.lives, pages.page_size());
    let lives = walked.lives;
    let mut order: Vec<usize> = (0..lives.len()).collect();
    order.sort_unstable_by_key(|&index| std::cmp::Reverse(lives[index].pgid));
    Ok(Kept {
        paths: walked.paths,
        rewritten: vec![false; lives.len()],
        lives,
        tree_pages: walked.tree_pages,
        groups,
        groups_done: 0,
        order,
        fresh: true,
    })
}

/// The pages in use (metas, freelist, trees) and those of them at or past where a packed file
/// would end. From the walk while it is current; after a step, from the freelist: every page
/// below the mark is in use or on the freelist (free or pending).
fn figures(
    kept: &Kept,
    meta: &Meta,
    freelist: &AnyFreelist,
    span: Option<(u64, u64)>,
) -> (u64, u64) {
    if kept.fresh {
        let live_pages = 2 + span.map_or(0, |(_, n_pages)| n_pages) + kept.tree_pages;
        let in_use = span.into_iter();
        let in_use = in_use.chain(kept.lives.iter().map(|live| (live.pgid, live.n_pages)));
        let to_go = in_use
            .filter(|&(pgid, _)| pgid >= live_pages)
            .map(|(_, n_pages)| n_pages)
            .sum();
        return (live_pages, to_go);
    }
    let live_pages = meta.pgid.saturating_sub(freelist.count() as u64);
    let on_freelist = freelist.free_ids().chain(freelist.pending().ids());
    let unused_past = on_freelist.filter(|pgid| pgid.0 >= live_pages).count() as u64;
    let to_go = meta
        .pgid
        .saturating_sub(live_pages)
        .saturating_sub(unused_past);
    (live_pages, to_go)
}

/// The pages a commit writes for the pages it rewrites: single pages and runs.
#[derive(Clone, Default)]
struct Demand {
    singles: u64,
    spans: Vec<u64>,
    /// Pages the merges free beyond what they allocate (at most).
    given_back: u64,
}

/// Adds live page `index` and every page above it that is not dirty yet to `dirty`, and what
/// they need to `demand`.
fn dirty_path(lives: &[Live], index: usize, dirty: &mut [bool], demand: &mut Demand) {
    let mut next = Some(index);
    while let Some(at) = next {
        if dirty[at] {
            return;
        }
        dirty[at] = true;
        match lives[at].n_pages {
            1 => demand.singles += 1,
            n => demand.spans.push(n),
        }
        next = lives[at].parent;
    }
}

/// Where the freelist page of a step lands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum FreelistFit {
    /// In a free run below the free tail (or the file keeps no freelist).
    Below,
    /// In the free tail the commit cuts off: the mark comes down by the tail less its pages.
    Tail,
    /// Nowhere without raising the mark: the step writes none.
    Nowhere,
}

/// Where the step's commit puts what `demand` asks and then `freelist_pages` more, asked of
/// the allocator's planning face with the calls the step and its commit make: the step's
/// reserved runs, cut and `mark`, the spill's allocations, the end of the spill, the tail cut
/// off, the freelist page. `None`: a page the step rewrites would land at or past `cut` (or
/// nowhere below the mark); `Some(fit)`: all of them land below it, and where the freelist
/// page goes.
fn place(
    alloc: &Allocator<FreeRuns>,
    mark: u64,
    cut: u64,
    demand: &Demand,
    freelist_pages: u64,
) -> Option<FreelistFit> {
    let mut alloc = alloc.clone();
    alloc.vacuum_step(&demand.spans, Some(Pgid(cut)), Pgid(mark));
    alloc.choose_strategy(true, true);
    let spans = demand.spans.iter().copied();
    let singles = std::iter::repeat_n(1, demand.singles as usize);
    for n_pages in spans.chain(singles) {
        let pgid = alloc.allocate(n_pages as usize).ok()?;
        if pgid.0 + n_pages > cut {
            return None;
        }
    }
    if freelist_pages == 0 {
        return Some(FreelistFit::Below);
    }
    alloc.end_spill();
    let tail = alloc.trim_tail();
    Some(match alloc.allocate(freelist_pages as usize) {
        Ok(pgid) if pgid < tail => FreelistFit::Below,
        Ok(_) => FreelistFit::Tail,
        Err(_) => FreelistFit::Nowhere,
    })
}

/// Sparse sibling leaves that `Tree::repack_key` merges from the first: consecutive under one
/// parent, each less than `REPACK_FULL_PERCENT` full, together within `REPACK_PAGES_MAX` pages.
struct Group {
    /// Indexes in `Kept::lives`, the first leaf first; and the sibling after the last, which
    /// the merge reads (makes a node of) to see that it does not fit, so the commit rewrites
    /// it too.
    leaves: Vec<usize>,
    stopper: Option<usize>,
    /// Pages the merge gives back.
    given_back: u64,
    /// The highest of their pages: groups near the top of the file merge first.
    top: u64,
}

/// The groups of sparse leaves worth merging (they give back a page or more).
fn merge_groups(lives: &[Live], page_size: usize) -> Vec<Group> {
    let mut sparse: Vec<(&Sparse, usize)> = lives
        .iter()
        .enumerate()
        .filter_map(|(index, live)| live.sparse.as_ref().map(|sparse| (sparse, index)))
        .collect();
    sparse.sort_unstable_by_key(|&(leaf, _)| (leaf.parent, leaf.slot));
    let by_slot: std::collections::HashMap<(Pgid, usize), usize> = lives
        .iter()
        .enumerate()
        .filter_map(|(index, live)| live.slot.map(|slot| (slot, index)))
        .collect();
    let bytes_max = REPACK_PAGES_MAX * page_size;
    let mut groups = Vec::new();
    let mut at = 0;
    while at < sparse.len() {
        let (leaf, _) = sparse[at];
        let mut total = leaf.entries_len;
        let mut end = at + 1;
        while end < sparse.len() {
            let (next, _) = sparse[end];
            if next.parent != leaf.parent
                || next.slot != leaf.slot + (end - at)
                || element_page_size(total + next.entries_len) > bytes_max
            {
                break;
            }
            total += next.entries_len;
            end += 1;
        }
        let leaves: Vec<usize> = sparse[at..end].iter().map(|&(_, index)| index).collect();
        let sizes: Vec<u32> = sparse[at..end]
            .iter()
            .flat_map(|(leaf, _)| leaf.entries.iter().copied())
            .collect();
        let after = pieces_of(&sizes, page_size);
        if leaves.len() as u64 > after {
            let top = leaves.iter().map(|&i| lives[i].pgid).max().unwrap_or(0);
            let stopper = by_slot
                .get(&(leaf.parent, leaf.slot + leaves.len()))
                .copied();
            groups.push(Group {
                given_back: leaves.len() as u64 - after,
                leaves,
                stopper,
                top,
            });
        }
        at = end;
    }
    groups.sort_unstable_by_key(|group| std::cmp::Reverse(group.top));
    groups
}

/// How many pages spill cuts a leaf of entries of `sizes` bytes into, with the fill percent at
/// 1.0 (as `rbolt_btree`'s fill policy does: each piece takes entries while they fit a page,
/// and at least one; the rest goes on once it fits).
fn pieces_of(sizes: &[u32], page_size: usize) -> u64 {
    let fits = |from: usize| {
        element_page_size(sizes[from..].iter().map(|&s| s as usize).sum::<usize>()) <= page_size
    };
    let mut pieces = 0;
    let mut start = 0;
    while start < sizes.len() {
        pieces += 1;
        if fits(start) || sizes.len() - start < 2 {
            break;
        }
        let mut used = element_page_size(0);
        let mut end = start;
        while end < sizes.len() - 1 {
            let len = sizes[end] as usize;
            if end > start && used + len > page_size {
                break;
            }
            used += len;
            end += 1;
        }
        start = end;
    }
    pieces
}

/// The largest `k` in `0..=n` for which `fits(k - 1)` holds (for `k > 0`), given that fitting
/// is monotone: a longer prefix asks more and offers no more room.
fn longest_fitting(n: usize, fits: impl Fn(usize) -> bool) -> usize {
    let (mut low, mut high) = (0, n);
    while low < high {
        let mid = low + (high - low) / 2;
        if fits(mid) {
            low = mid + 1;
        } else {
            high = mid;
        }
    }
    low
}

/// Plans a vacuum step within `pages_max` pages from `kept`: first merges of sparse sibling
/// leaves, which give pages back while free pages are there to merge into (a packed file has
/// none), highest first; then, with the rest of the budget, moves of the live pages at the top
/// of the file below the lowest of them (the cut), as many as fit there with the pages above
/// them that the commit rewrites too. The model is what the commit allocates: reserved runs
/// for multi-page pages, the lowest free pages for single ones, then the freelist.
pub(super) fn plan(
    pages: Pages<'_>,
    meta: &Meta,
    freelist: &AnyFreelist,
    alloc: Allocator<FreeRuns>,
    pages_max: usize,
    writes_freelist: bool,
    kept: &Kept,
) -> Result<Plan> {
    let span = freelist_span(pages, meta)?.map(|(pgid, n_pages)| (pgid.0, n_pages));
    let (live_pages, pages_to_go) = figures(kept, meta, freelist, span);
    let tail_free = alloc.free_set().tail_len(Pgid(meta.pgid));
    let pages_max = pages_max.max(1) as u64;
    let page_size = pages.page_size();
    let lives = &kept.lives;
    let limit = meta.pgid - tail_free;
    // The freelist after the step holds at most what it holds now, its own old pages and what
    // the merges give back: every other page freed is one allocated from the free set.
    let old_freelist = span.map_or(0, |(_, n_pages)| n_pages);
    let freelist_count = freelist.count();
    let freelist_pages = |demand: &Demand| -> u64 {
        if !writes_freelist {
            return 0;
        }
        let count = freelist_count + (old_freelist + demand.given_back) as usize + 1;
        pages_for(freelist_page_size(count), page_size) as u64
    };
    let fit =
        |cut: u64, demand: &Demand| place(&alloc, meta.pgid, cut, demand, freelist_pages(demand));

    // Merges, highest first, while the budget lasts and their pages fit below the free tail.
    let groups = &kept.groups[kept.groups_done..];
    let mut dirty = vec![false; lives.len()];
    let mut demand = Demand::default();
    let mut merge_demands: Vec<Demand> = Vec::new();
    let mut merged_leaves = 0;
    for group in groups {
        merged_leaves += group.leaves.len() as u64;
        if merged_leaves > pages_max {
            break;
        }
        for &index in group.leaves.iter().chain(&group.stopper) {
            dirty_path(lives, index, &mut dirty, &mut demand);
        }
        demand.given_back += group.given_back;
        merge_demands.push(demand.clone());
    }
    let merges = longest_fitting(merge_demands.len(), |k| {
        fit(limit, &merge_demands[k]).is_some()
    });
    let mut dirty = vec![false; lives.len()];
    let mut demand = Demand::default();
    for group in &groups[..merges] {
        for &index in group.leaves.iter().chain(&group.stopper) {
            dirty_path(lives, index, &mut dirty, &mut demand);
        }
        demand.given_back += group.given_back;
    }
    let budget = pages_max.saturating_sub(
        groups[..merges]
            .iter()
            .map(|group| group.leaves.len() as u64)
            .sum(),
    );

    // Moves: the highest pages first. A page no free run below it can take is pinned where
    // it is: the pages under it can still move, to make room for it later. The budget counts
    // the pages chosen to move (at least one when nothing merges), not those above them.
    // Pages a step of this vacuum rewrote are below its cut already.
    let fits_below = |live: &Live| {
        let below = alloc
            .free_set()
            .first_fit_below(live.n_pages as usize, Pgid(live.pgid));
        below.is_some()
    };
    let mut prefixes: Vec<(usize, Demand)> = Vec::new();
    let mut trial_dirty = dirty.clone();
    let mut trial = demand.clone();
    let mut moving = 0;
    for &index in &kept.order {
        let live = &lives[index];
        if kept.rewritten[index] || !fits_below(live) {
            continue;
        }
        moving += live.n_pages;
        if moving > budget && !(prefixes.is_empty() && merges == 0) {
            break;
        }
        dirty_path(lives, index, &mut trial_dirty, &mut trial);
        prefixes.push((index, trial.clone()));
    }
    let chosen = longest_fitting(prefixes.len(), |k| {
        fit(lives[prefixes[k].0].pgid, &prefixes[k].1).is_some()
    });
    let cut = chosen.checked_sub(1).map(|k| lives[prefixes[k].0].pgid);
    if let Some(k) = chosen.checked_sub(1) {
        demand = prefixes[k].1.clone();
    }

    let mut plan = Plan {
        cut,
        live_pages,
        pages_to_go,
        tail_free,
        groups_taken: merges,
        ..Plan::default()
    };
    for &(index, _) in &prefixes[..chosen] {
        let live = &lives[index];
        plan.pages_moved += live.n_pages;
        plan.moves.insert((live.path, live.key.clone(), live.depth));
        dirty_path(lives, index, &mut dirty, &mut Demand::default());
    }
    plan.rewritten = (0..lives.len()).filter(|&index| dirty[index]).collect();
    for group in &groups[..merges] {
        let first = &lives[group.leaves[0]];
        plan.pages_merged += group.given_back;
        plan.merges.insert((first.path, first.key.clone()));
    }
    let freelist_fit = fit(cut.unwrap_or(limit), &demand).unwrap_or(FreelistFit::Nowhere);
    plan.spans = demand.spans.clone();
    plan.spans.sort_unstable_by(|a, b| b.cmp(a));
    let moves_pages = !plan.moves.is_empty() || !plan.merges.is_empty();
    plan.skip_freelist = writes_freelist && freelist_fit == FreelistFit::Nowhere;
    let freelist_after = freelist_pages(&demand);
    // A step that writes no freelist needs no pages for it: then any free page below counts.
    plan.freelist_moves = span.is_some_and(|(pgid, _)| {
        let n_pages = freelist_after.max(1) as usize;
        let free = alloc.free_set();
        free.first_fit_below(n_pages, Pgid(pgid)).is_some()
    });
    // Cutting the free tail helps only if the freelist page does not take all of its place;
    // and a step that only cuts must not drop the freelist (the vacuum's last commit would
    // write it past the mark again).
    let tail_useful = match freelist_fit {
        FreelistFit::Below => true,
        FreelistFit::Tail => tail_free > freelist_after,
        FreelistFit::Nowhere => moves_pages,
    };
    if !tail_useful {
        plan.tail_free = 0;
    }
    if !moves_pages && freelist_fit == FreelistFit::Nowhere {
        plan.skip_freelist = false;
    }
    Ok(plan)
}

/// The names from the root bucket down to bucket `index` of `paths` (empty for the root).
pub(super) fn bucket_names(paths: &[(usize, Vec<u8>)], mut index: usize) -> Vec<&[u8]> {
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
