//! The testkit's own tests: the counting allocator counts what it says it counts (so the
//! zero-allocation tests that lean on it can fail), FNV-1a hashes as its reference says, and
//! the generator shuffles.

mod alloc;
mod fnv;
mod rng;
