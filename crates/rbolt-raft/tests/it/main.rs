//! rbolt-raft's integration tests: openraft's storage suite on rbolt files, reopen after every
//! kind of write, and a three-node cluster that loses its leader. SIGKILL during writes is
//! the `kill` test target (tests/kill), which runs its own children.

mod cluster;
mod common;
mod power_loss;
mod reader;
mod reopen;
mod suite;

#[path = "../../examples/kv_cluster/app.rs"]
mod app;
