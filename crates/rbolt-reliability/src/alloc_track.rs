//! A global allocator that remembers, per thread, the largest single allocation since the
//! last [`reset`]: the hostile-file suite asserts that no file makes rbolt allocate more than
//! the file could justify. A test binary opts in with
//! `#[global_allocator] static ALLOC: TrackingAlloc = TrackingAlloc;`.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

thread_local! {
    // Const-initialised and without a destructor: touching it never allocates.
    static PEAK: Cell<usize> = const { Cell::new(0) };
}

/// The system allocator, plus a per-thread record of the largest request.
#[derive(Clone, Copy, Debug, Default)]
pub struct TrackingAlloc;

fn note(size: usize) {
    let _ = PEAK.try_with(|peak| {
        if size > peak.get() {
            peak.set(size);
        }
    });
}

// SAFETY: every method forwards to `System` with the caller's arguments unchanged, so it
// upholds `GlobalAlloc`'s contract exactly as `System` does; `note` only touches a
// thread-local `Cell` and never allocates.
unsafe impl GlobalAlloc for TrackingAlloc {
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

/// Forgets this thread's largest allocation.
pub fn reset() {
    PEAK.with(|peak| peak.set(0));
}

/// The largest single allocation this thread made since [`reset`] (0 when the tracking
/// allocator is not installed).
pub fn peak() -> usize {
    PEAK.with(Cell::get)
}

/// Whether [`TrackingAlloc`] is the global allocator of this process.
pub fn installed() -> bool {
    static INSTALLED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *INSTALLED.get_or_init(probe)
}

fn probe() -> bool {
    reset();
    let probe: Vec<u8> = Vec::with_capacity(123_457);
    let seen = peak() >= 123_457;
    drop(std::hint::black_box(probe));
    reset();
    seen
}
