//! The counting allocator, installed in this test binary, sees allocations in each of its three
//! ways of counting; without it the zero-allocation tests elsewhere would pass vacuously.

use rbolt_testkit::alloc::{
    CountingAlloc, count_allocations, installed, peak, reset_peak, start_counting, stop_counting,
};
use std::hint::black_box;

#[global_allocator]
static ALLOC: CountingAlloc = CountingAlloc;

#[test]
fn counts_this_threads_allocations() {
    assert!(installed());
    let (vec, allocations) = count_allocations(|| black_box(vec![1u8; 64]));
    assert_eq!(vec.len(), 64);
    assert_eq!(allocations, 1);
    let ((), none) = count_allocations(|| black_box(()));
    assert_eq!(none, 0);
    let (grown, allocations) = count_allocations(|| {
        let mut v: Vec<u8> = Vec::with_capacity(1);
        v.extend_from_slice(&[0; 100]);
        black_box(v)
    });
    assert_eq!(grown.len(), 100);
    assert_eq!(allocations, 2, "an allocation and a reallocation");
}

#[test]
fn counts_every_threads_allocations() {
    start_counting();
    std::thread::scope(|scope| {
        scope.spawn(|| drop(black_box(vec![0u8; 10])));
    });
    let allocations = stop_counting();
    assert!(
        allocations >= 1,
        "the other thread's allocation was not counted"
    );
}

#[test]
fn remembers_the_largest_request() {
    reset_peak();
    drop(black_box(vec![0u8; 1 << 20]));
    drop(black_box(vec![0u8; 10]));
    assert!(peak() >= 1 << 20);
    reset_peak();
    assert_eq!(peak(), 0);
}
