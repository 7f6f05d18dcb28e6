//! [`CountingAlloc`]: the system allocator, plus counts a test or benchmark can read.
//!
//! A binary opts in with `#[global_allocator] static ALLOC: CountingAlloc = CountingAlloc;`,
//! then asks one of three questions:
//! - [`count_allocations`]: how many allocations this thread made while a closure ran, exact
//!   even while other tests run on other threads (the zero-allocation read-path tests);
//! - [`start_counting`] / [`stop_counting`]: how many allocations every thread made between
//!   the two (benchmarks whose engine may allocate on threads of its own);
//! - [`peak`] after [`reset_peak`]: the largest single request this thread made (the
//!   hostile-file suite: no file may make the database allocate more than it could justify).
//!
//! Counting touches only atomics and const-initialised thread-locals without destructors, so
//! the allocator never allocates itself; a reallocation counts as an allocation.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// The system allocator, counting as this module describes.
#[derive(Clone, Copy, Debug, Default)]
pub struct CountingAlloc;

static PROCESS_COUNTING: AtomicBool = AtomicBool::new(false);
static PROCESS_ALLOCATIONS: AtomicU64 = AtomicU64::new(0);

thread_local! {
    static THREAD_COUNTING: Cell<bool> = const { Cell::new(false) };
    static THREAD_ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
    static THREAD_PEAK: Cell<usize> = const { Cell::new(0) };
}

/// Records one allocation of `size` bytes.
#[inline]
fn note(size: usize) {
    if PROCESS_COUNTING.load(Ordering::Relaxed) {
        PROCESS_ALLOCATIONS.fetch_add(1, Ordering::Relaxed);
    }
    // `try_with`: allocations during thread teardown must not panic.
    let _ = THREAD_PEAK.try_with(|peak| {
        if size > peak.get() {
            peak.set(size);
        }
    });
    let _ = THREAD_COUNTING.try_with(|counting| {
        if counting.get() {
            let _ = THREAD_ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
        }
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so the
// `GlobalAlloc` contract holds exactly as it does for `System`; `note` touches only atomics
// and const-initialised thread-locals, which never allocate.
unsafe impl GlobalAlloc for CountingAlloc {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded unchanged; the caller upholds `alloc`'s contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        note(layout.size());
        // SAFETY: forwarded unchanged; the caller upholds `alloc_zeroed`'s contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged; `ptr` came from `System` through this allocator.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        note(new_size);
        // SAFETY: forwarded unchanged; `ptr` came from `System` through this allocator.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

/// Runs `f` and returns what it returned and how many allocations (and reallocations) this
/// thread made meanwhile; 0 when [`CountingAlloc`] is not the global allocator.
pub fn count_allocations<T>(f: impl FnOnce() -> T) -> (T, u64) {
    THREAD_ALLOCATIONS.with(|n| n.set(0));
    THREAD_COUNTING.with(|counting| counting.set(true));
    let value = f();
    THREAD_COUNTING.with(|counting| counting.set(false));
    (value, THREAD_ALLOCATIONS.with(Cell::get))
}

/// Starts counting the allocations of every thread, from zero.
pub fn start_counting() {
    PROCESS_ALLOCATIONS.store(0, Ordering::SeqCst);
    PROCESS_COUNTING.store(true, Ordering::SeqCst);
}

/// Stops counting and returns the allocations of every thread since [`start_counting`].
pub fn stop_counting() -> u64 {
    PROCESS_COUNTING.store(false, Ordering::SeqCst);
    PROCESS_ALLOCATIONS.load(Ordering::SeqCst)
}

/// Forgets this thread's largest allocation.
pub fn reset_peak() {
    THREAD_PEAK.with(|peak| peak.set(0));
}

/// The largest single allocation this thread made since [`reset_peak`] (0 when
/// [`CountingAlloc`] is not the global allocator).
pub fn peak() -> usize {
    THREAD_PEAK.with(Cell::get)
}

/// Whether [`CountingAlloc`] is the global allocator of this process.
pub fn installed() -> bool {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSTALLED.get_or_init(|| {
        let ((), allocations) = count_allocations(|| {
            drop(std::hint::black_box(Vec::<u8>::with_capacity(123)));
        });
        allocations > 0
    })
}
