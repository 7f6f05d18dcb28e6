//! The `rbolt` binary, run as a user would run it, on the Go bbolt fixtures and on damaged
//! copies of them.

mod bench;
mod beside_attacks;
mod beside_writer;
mod cli;
mod damaged;
mod fixtures;
mod go_writer;
mod memory;
mod nesting;
mod roundtrip;
mod support;
mod surgery;
mod swap_in;
