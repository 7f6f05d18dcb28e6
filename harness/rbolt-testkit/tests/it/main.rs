//! The testkit's own tests: the counting allocator counts what it says it counts (so the
//! zero-allocation tests that lean on it can fail), and FNV-1a hashes as its reference says.

mod alloc;
mod fnv;
