//! Integration tests of rbolt-btree: the tree's edits against a `BTreeMap`, the Go bbolt
//! fixtures read through the cursor, and allocation counts of the read path.

mod alloc_count;
mod corrupt;
mod edits;
mod fixtures;
mod free;
mod pages;
mod support;
mod sweep;
mod touch;
