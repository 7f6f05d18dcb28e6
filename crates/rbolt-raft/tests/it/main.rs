//! rbolt-raft's integration tests: openraft's storage suite on rbolt files, reopen after every
//! kind of write, a three-node cluster that loses its leader, and SIGKILL during writes.

mod cluster;
mod common;
mod kill;
mod power_loss;
mod reader;
mod reopen;
mod suite;

#[path = "../../examples/kv_cluster/app.rs"]
mod app;
