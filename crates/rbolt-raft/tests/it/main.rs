//! rbolt-raft's integration tests: openraft's storage suite on rbolt files, reopen after every
//! kind of write, a three-node cluster that loses its leader, and what keeps one entry or a
//! damaged file from stopping a node (refused entries, entry checksums, backup and restore). SIGKILL during writes is
//! the `kill` test target (tests/kill), which runs its own children.

mod cluster;
mod common;
mod no_space;
mod power_loss;
mod reader;
mod reopen;
mod suite;
mod total;
mod unsynced;

#[path = "../../examples/kv_cluster/app.rs"]
mod app;
