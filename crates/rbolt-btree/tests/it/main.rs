//! Integration tests of rbolt-btree: a model test against `BTreeMap`, the Go bbolt fixtures
//! read through the cursor, and allocation counts of the read path.

mod alloc_count;
mod corrupt;
mod fixtures;
mod model;
mod support;
mod touch;
