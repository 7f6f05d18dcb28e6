//! Buckets: named trees of keys and values, nested at any depth. `state.rs` holds an open
//! bucket's state and the operations on it, `read.rs` the read view [`Bucket`], `write.rs`
//! the write handle [`BucketMut`], `ranges.rs` its deletes by range, prefix and predicate.

pub(crate) mod ranges;
pub(crate) mod read;
pub(crate) mod state;
pub(crate) mod write;

pub use read::Bucket;
pub use write::BucketMut;
