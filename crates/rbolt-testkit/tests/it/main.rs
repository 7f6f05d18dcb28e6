//! The testkit's own tests: the counting allocator counts what it says it counts (so the
//! zero-allocation tests that lean on it can fail).

mod alloc;
