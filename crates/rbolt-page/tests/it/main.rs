//! rbolt-page's integration tests, one binary: the Go bbolt fixtures read through the crate's
//! views and written again with its builders (`fixtures`), property tests feeding arbitrary and
//! damaged bytes to every decoder (`fuzz`), and edge cases (`edges`). `support` holds a small
//! page reader and tree walker built on the public API only.

mod edges;
mod fixtures;
mod fuzz;
mod sizes;
mod support;
