//! Tests of the page allocator: its planning face against the real one over random commits,
//! the strategy's choice, the runs it hands out, and refusals that take nothing.

use crate::{
    Allocator, AnyFreelist, FreeRuns, Freelist, FreelistError, FreelistKind, Limits,
    RUNS_AFTER_PAGES, Strategy,
};
use quickcheck::{Arbitrary, Gen, QuickCheck, TestResult};
use rbolt_page::{Pgid, Txid};

const PAGE: usize = 4096;
const TXID: Txid = Txid(7);

/// A freelist of `kind` whose free ids are `ids`, and the allocator over it.
fn allocator(kind: FreelistKind, ids: &[u64], high_water: u64, max_size: u64) -> Allocator {
    let mut freelist = AnyFreelist::new(kind);
    let ids: Vec<Pgid> = ids.iter().map(|&id| Pgid(id)).collect();
    freelist.rebuild(&ids).unwrap();
    let limits = Limits {
        page_size: PAGE,
        max_size,
    };
    Allocator::new(freelist, TXID, Pgid(high_water), limits)
}

/// A commit's calls, at random: maybe a vacuum step's, then allocations, the end of the
/// spill, maybe the tail cut off, then a last allocation (the freelist page).
#[derive(Clone, Debug)]
struct Commit {
    free: Vec<bool>,
    span_freelist: bool,
    durable: bool,
    shrinking: bool,
    max_pages: Option<u8>,
    step: Option<(Vec<u8>, u8, u8)>,
    allocations: Vec<u8>,
    freelist_pages: u8,
}

impl Arbitrary for Commit {
    fn arbitrary(g: &mut Gen) -> Commit {
        let len = usize::arbitrary(g) % 200;
        // Dense, sparse and mixed free sets.
        let density = u8::arbitrary(g) % 4;
        let free = (0..len).map(|_| u8::arbitrary(g) % 4 < density).collect();
        let n = usize::arbitrary(g) % 150;
        let allocations = (0..n)
            .map(|_| match u8::arbitrary(g) % 10 {
                0 => 2 + u8::arbitrary(g) % 4,
                _ => 1,
            })
            .collect();
        Commit {
            free,
            span_freelist: bool::arbitrary(g),
            durable: bool::arbitrary(g),
            shrinking: u8::arbitrary(g) % 4 == 0,
            max_pages: Option::arbitrary(g),
            step: (u8::arbitrary(g) % 3 == 0).then(|| {
                let spans = Vec::<u8>::arbitrary(g)
                    .into_iter()
                    .take(3)
                    .map(|n| 2 + n % 3)
                    .collect();
                (spans, u8::arbitrary(g), u8::arbitrary(g))
            }),
            allocations,
            freelist_pages: u8::arbitrary(g) % 3,
        }
    }
}

/// Makes `commit`'s calls on `alloc` and returns every answer and the state after.
type Answers = (
    Vec<Option<Pgid>>,
    Vec<Result<Pgid, FreelistError>>,
    Pgid,
    Vec<Pgid>,
);

fn run<F: crate::FreePages>(alloc: &mut Allocator<F>, commit: &Commit) -> Answers {
    let mut answers = Vec::new();
    let mut reserved = Vec::new();
    let high_water = alloc.high_water().0;
    if let Some((spans, cut, mark)) = &commit.step {
        let spans: Vec<u64> = spans.iter().map(|&n| u64::from(n)).collect();
        let cut = Pgid(u64::from(*cut) % (high_water + 1));
        let mark = Pgid(high_water + u64::from(*mark) % 8);
        reserved = alloc.vacuum_step(&spans, Some(cut), mark);
    }
    alloc.choose_strategy(commit.durable, commit.shrinking);
    for &n_pages in &commit.allocations {
        answers.push(alloc.allocate(usize::from(n_pages)));
    }
    alloc.end_spill();
    if commit.shrinking {
        alloc.trim_tail();
    }
    if commit.freelist_pages > 0 {
        answers.push(alloc.allocate(usize::from(commit.freelist_pages)));
    }
    let free = alloc.free_set().ids().collect();
    (reserved, answers, alloc.high_water(), free)
}

/// The planning face answers every call as the allocator over the real freelist does, for
/// either freelist, whatever the strategy, limits, reservations and cut: the vacuum's planner
/// can trust it instead of modelling the commit.
#[test]
fn the_planning_face_allocates_exactly_as_the_commit_does() {
    fn property(commit: Commit) -> TestResult {
        let ids: Vec<u64> = commit
            .free
            .iter()
            .enumerate()
            .filter(|&(_, &free)| free)
            .map(|(at, _)| at as u64 + 2)
            .collect();
        let high_water = commit.free.len() as u64 + 2;
        let max_size = commit
            .max_pages
            .map_or(0, |n| (high_water + u64::from(n)) * PAGE as u64);
        let kind = if commit.span_freelist {
            FreelistKind::Span
        } else {
            FreelistKind::Array
        };
        let mut real = allocator(kind, &ids, high_water, max_size);
        let mut plan: Allocator<FreeRuns> = real.plan();
        let planned = run(&mut plan, &commit);
        let done = run(&mut real, &commit);
        if planned != done {
            return TestResult::error(format!("plan {planned:?}\ncommit {done:?}"));
        }
        // The plan changed nothing of the freelist; the commit's rollback undoes it all.
        real.free_set_mut().rollback(TXID);
        let after: Vec<u64> = real.free_set().free_ids().map(|id| id.0).collect();
        TestResult::from_bool(after == ids)
    }
    QuickCheck::new()
        .tests(400)
        .quickcheck(property as fn(Commit) -> TestResult);
}

#[test]
fn only_a_durable_commit_that_may_grow_the_file_prefers_runs() {
    let cases = [
        // (durable, shrinking, max_size, vacuum step, strategy)
        (true, false, 0, false, Strategy::Runs),
        (false, false, 0, false, Strategy::LowestFirst),
        (true, true, 0, false, Strategy::LowestFirst),
        (true, false, 1 << 20, false, Strategy::LowestFirst),
        (true, false, 0, true, Strategy::LowestFirst),
    ];
    for (durable, shrinking, max_size, step, expected) in cases {
        let mut alloc = allocator(FreelistKind::Array, &[4, 5], 10, max_size);
        if step {
            alloc.vacuum_step(&[], None, Pgid(10));
        }
        assert_eq!(alloc.choose_strategy(durable, shrinking), expected);
        assert_eq!(alloc.strategy(), expected);
    }
}

/// Under `Runs`, once past its first pages a commit takes the free runs of two or more in
/// order and then the high-water mark, leaving isolated free pages free; the end of the spill
/// gives back what it took of its last run and did not use.
#[test]
fn runs_skip_isolated_pages_and_give_back_what_they_did_not_use() {
    // Isolated pages 2, 4, 6; runs 10..13 and 20..22; a file of 1000 pages (few isolated).
    let ids = [2, 4, 6, 10, 11, 12, 20, 21];
    let mut alloc = allocator(FreelistKind::Span, &ids, 1000, 0);
    assert_eq!(alloc.choose_strategy(true, false), Strategy::Runs);
    // The first pages are lowest first (the isolated ones, then the runs' pages).
    let first: Vec<u64> = (0..RUNS_AFTER_PAGES)
        .map(|_| alloc.allocate(1).unwrap().0)
        .collect();
    assert!(first.starts_with(&ids));
    assert_eq!(first[8], 1000, "then the high-water mark");
    let mut alloc = allocator(FreelistKind::Span, &ids, 1000, 0);
    alloc.choose_strategy(true, false);
    for _ in 0..RUNS_AFTER_PAGES {
        alloc.allocate(4).unwrap();
    }
    // Past its first pages: the runs (the multi-page allocations took from the high water).
    let next: Vec<u64> = (0..4).map(|_| alloc.allocate(1).unwrap().0).collect();
    assert_eq!(next, [10, 11, 12, 20]);
    alloc.end_spill();
    let free: Vec<u64> = alloc.free_set().free_ids().map(|id| id.0).collect();
    assert_eq!(
        free,
        [2, 4, 6, 21],
        "page 21 went back, the isolated pages stayed"
    );
    assert_eq!(alloc.strategy(), Strategy::LowestFirst);
    assert_eq!(alloc.allocate(1).unwrap(), Pgid(2));
}

/// With many isolated free pages (an eighth of the file or more) `Runs` takes them lowest
/// first after all: the file would grow too much for the pages it leaves.
#[test]
fn runs_give_way_when_isolated_pages_are_many() {
    let ids: Vec<u64> = (1..=100).map(|i| i * 2).chain([300, 301]).collect();
    let mut alloc = allocator(FreelistKind::Array, &ids, 400, 0);
    alloc.choose_strategy(true, false);
    for _ in 0..RUNS_AFTER_PAGES / 5 + 1 {
        alloc.allocate(5).unwrap();
    }
    assert_eq!(alloc.allocate(1).unwrap(), Pgid(2));
}

/// A refused allocation takes nothing: not a page of the free set, not the high-water mark.
#[test]
fn allocations_past_the_size_limit_or_the_mark_take_nothing() {
    let mut alloc = allocator(FreelistKind::Array, &[3], 10, 12 * PAGE as u64);
    assert_eq!(
        alloc.allocate(3),
        Err(FreelistError::MaxSizeReached {
            max_size: 12 * PAGE as u64
        })
    );
    assert_eq!(alloc.high_water(), Pgid(10));
    assert_eq!(alloc.allocate(2).unwrap(), Pgid(10));
    assert_eq!(alloc.allocate(1).unwrap(), Pgid(3));
    assert!(alloc.allocate(1).is_err());
    assert_eq!(alloc.pages_allocated(), 3);

    let mut alloc = allocator(FreelistKind::Span, &[3], 10, 0);
    alloc.vacuum_step(&[], Some(Pgid(8)), Pgid(11));
    assert_eq!(alloc.allocate(1).unwrap(), Pgid(3));
    assert_eq!(alloc.allocated_past_cut(), 0, "page 3 lies below the cut");
    assert_eq!(
        alloc.allocate(2),
        Err(FreelistError::MarkReached {
            mark: Pgid(11),
            max_size: 11 * PAGE as u64
        })
    );
    assert_eq!(alloc.allocate(1).unwrap(), Pgid(10));
    assert_eq!(alloc.allocated_past_cut(), 1);
    assert_eq!(alloc.high_water(), Pgid(11));
}

/// A vacuum step's reserved runs go to allocations of their size before first fit, and the
/// ones no allocation took go back at the end of the spill.
#[test]
fn reserved_runs_are_handed_out_by_size_and_the_rest_go_back() {
    let ids = [2, 3, 5, 6, 7, 9];
    let mut alloc = allocator(FreelistKind::Array, &ids, 20, 0);
    let reserved = alloc.vacuum_step(&[2, 3, 4], None, Pgid(20));
    assert_eq!(reserved, [None, Some(Pgid(5)), Some(Pgid(2))]);
    assert_eq!(alloc.allocate(1).unwrap(), Pgid(9));
    assert_eq!(alloc.allocate(2).unwrap(), Pgid(2));
    alloc.end_spill();
    let free: Vec<u64> = alloc.free_set().free_ids().map(|id| id.0).collect();
    assert_eq!(free, [5, 6, 7]);
}

/// A commit without syncs at the size limit is refused when the durable point after it could
/// not place its freelist page, and the check takes nothing.
#[test]
fn room_for_the_freelist_is_checked_without_taking_it() {
    let mut alloc = allocator(FreelistKind::Array, &[4], 10, 10 * PAGE as u64);
    assert_eq!(alloc.ensure_room_for_freelist(), Ok(()));
    assert_eq!(alloc.free_set().free_count(), 1);
    alloc.allocate(1).unwrap();
    assert!(matches!(
        alloc.ensure_room_for_freelist(),
        Err(FreelistError::MaxSizeReached { .. })
    ));
    let mut roomy = allocator(FreelistKind::Array, &[], 10, 11 * PAGE as u64);
    assert_eq!(roomy.ensure_room_for_freelist(), Ok(()));
}

/// Over the freelist and over the plan's copy alike, the free set says whether it is empty.
#[test]
fn the_free_set_says_when_it_is_empty() {
    use crate::FreePages;
    for kind in [FreelistKind::Array, FreelistKind::Span] {
        let mut alloc = allocator(kind, &[5], 10, 0);
        let mut plan = alloc.plan();
        assert!(!FreePages::is_empty(alloc.free_set()), "{kind:?}");
        assert!(!FreePages::is_empty(plan.free_set()), "{kind:?}");
        assert_eq!(alloc.allocate(1), Ok(Pgid(5)));
        assert_eq!(plan.allocate(1), Ok(Pgid(5)));
        assert!(FreePages::is_empty(alloc.free_set()), "{kind:?}");
        assert!(FreePages::is_empty(plan.free_set()), "{kind:?}");
    }
}

/// Pages taken from the high-water mark are recorded as the transaction's, so that once freed
/// they are released between long readers like pages taken from the free set.
#[test]
fn pages_from_the_high_water_mark_are_released_after_the_readers_before_them() {
    let mut alloc = allocator(FreelistKind::Span, &[], 10, 0);
    assert_eq!(alloc.allocate(2), Ok(Pgid(10)));
    let mut freelist = alloc.into_freelist();
    freelist.commit(TXID);
    freelist.free(Txid(8), Pgid(10), 1).unwrap();
    freelist.commit(Txid(8));
    // A reader at 6 saw neither: the pages were allocated (7) and freed (8) after it.
    freelist.release_pending(&[Txid(6)]);
    assert_eq!(
        freelist.free_ids().collect::<Vec<_>>(),
        [Pgid(10), Pgid(11)]
    );
}

/// Both faces answer `take_pages` and `put_back_pages` alike, for no pages and for pages that
/// are free already too: the plan is only as good as its agreement with the freelist.
#[test]
fn both_faces_refuse_to_take_no_pages_or_give_back_free_ones() {
    use crate::FreePages;
    let alloc = allocator(FreelistKind::Array, &[5, 6], 10, 0);
    let mut plan = alloc.plan();
    let mut freelist = alloc.into_freelist();
    assert!(!FreePages::take_pages(&mut freelist, TXID, Pgid(5), 0));
    assert!(!FreePages::take_pages(
        plan.free_set_mut(),
        TXID,
        Pgid(5),
        0
    ));
    assert!(FreePages::take_pages(plan.free_set_mut(), TXID, Pgid(5), 2));
    assert!(FreePages::put_back_pages(
        plan.free_set_mut(),
        TXID,
        Pgid(5),
        2
    ));
    for (start, n_pages) in [(6, 1), (7, 0)] {
        assert!(!FreePages::put_back_pages(
            &mut freelist,
            TXID,
            Pgid(start),
            n_pages
        ));
        let plan_free = plan.free_set_mut();
        assert!(!FreePages::put_back_pages(
            plan_free,
            TXID,
            Pgid(start),
            n_pages
        ));
    }
    assert_eq!(FreePages::len(plan.free_set()), 2);
}

/// The plan gives back the rest of the last free run at the end of the spill, as the commit
/// does (`runs_skip_isolated_pages_and_give_back_what_they_did_not_use`).
#[test]
fn the_plan_gives_back_what_its_runs_did_not_use() {
    let ids = [2, 4, 6, 10, 11, 12, 20, 21];
    let mut plan = allocator(FreelistKind::Span, &ids, 1000, 0).plan();
    assert_eq!(plan.txid(), TXID);
    plan.choose_strategy(true, false);
    for _ in 0..RUNS_AFTER_PAGES {
        plan.allocate(4).unwrap();
    }
    let next: Vec<u64> = (0..4).map(|_| plan.allocate(1).unwrap().0).collect();
    assert_eq!(next, [10, 11, 12, 20]);
    plan.end_spill();
    let free: Vec<u64> = crate::FreePages::ids(plan.free_set())
        .map(|id| id.0)
        .collect();
    assert_eq!(free, [2, 4, 6, 21]);
}

/// Under `Runs`, the commit's first `RUNS_AFTER_PAGES` pages are lowest first and the next
/// one is a run's: not one page earlier, not one later.
#[test]
fn runs_start_right_after_the_first_pages() {
    let mut alloc = allocator(FreelistKind::Array, &[2, 4, 500, 501, 502], 1000, 0);
    alloc.choose_strategy(true, false);
    let first = RUNS_AFTER_PAGES as usize - 1;
    assert_eq!(alloc.allocate(first), Ok(Pgid(1000)));
    assert_eq!(
        alloc.allocate(1),
        Ok(Pgid(2)),
        "the last of the first pages"
    );
    assert_eq!(
        alloc.allocate(1),
        Ok(Pgid(500)),
        "the first page after them"
    );
}

/// The isolated free pages `Runs` weighs against the file are the free pages outside runs:
/// two here, against a file of 1,101 pages, so runs are preferred.
#[test]
fn runs_weigh_only_the_pages_outside_runs() {
    let ids: Vec<u64> = [2, 4].into_iter().chain(300..400).collect();
    let mut alloc = allocator(FreelistKind::Span, &ids, 1000, 0);
    alloc.choose_strategy(true, false);
    assert_eq!(alloc.allocate(101), Ok(Pgid(1000)));
    assert_eq!(alloc.allocate(1), Ok(Pgid(300)));
}

/// At exactly an eighth of the file in isolated free pages (20 of 160), `Runs` gives way.
#[test]
fn runs_give_way_at_exactly_an_eighth_isolated() {
    let ids: Vec<u64> = [2]
        .into_iter()
        .chain(10..80)
        .chain((82..=118).step_by(2))
        .collect();
    let mut alloc = allocator(FreelistKind::Array, &ids, 160, 0);
    alloc.choose_strategy(true, false);
    assert_eq!(alloc.allocate(RUNS_AFTER_PAGES as usize), Ok(Pgid(10)));
    assert_eq!(alloc.allocate(1), Ok(Pgid(2)));
}

/// The end of the spill gives back all that is left of the last run, not only its next page.
#[test]
fn the_end_of_the_spill_gives_back_the_whole_rest_of_the_last_run() {
    let ids = [2, 4, 6, 10, 11, 12, 20, 21, 22, 23];
    let mut alloc = allocator(FreelistKind::Array, &ids, 1000, 0);
    alloc.choose_strategy(true, false);
    assert_eq!(alloc.allocate(RUNS_AFTER_PAGES as usize), Ok(Pgid(1000)));
    let next: Vec<u64> = (0..4).map(|_| alloc.allocate(1).unwrap().0).collect();
    assert_eq!(next, [10, 11, 12, 20]);
    alloc.end_spill();
    let free: Vec<u64> = alloc.free_set().free_ids().map(|id| id.0).collect();
    assert_eq!(free, [2, 4, 6, 21, 22, 23]);
}

/// A shrinking commit's cut lowers the high-water mark past the free pages at the end of the
/// file and says where it now is.
#[test]
fn trimming_the_tail_lowers_the_high_water_mark() {
    let mut alloc = allocator(FreelistKind::Span, &[3, 7, 8, 9], 10, 0);
    assert_eq!(alloc.trim_tail(), Pgid(7));
    assert_eq!(alloc.high_water(), Pgid(7));
    assert_eq!(alloc.free_set().free_ids().collect::<Vec<_>>(), [Pgid(3)]);
}
