//! rbolt's integration tests: one binary, one module per area.

mod api;
mod api_model;
mod async_tx;
mod basics;
mod buffers;
mod check;
mod closures;
mod commit;
mod concurrency;
mod durability;
mod faults;
mod fixtures;
mod go_writer;
mod histories;
mod one_sync;
mod one_sync_attacks;
mod open;
mod processes;
mod processes_kills;
mod ranges;
mod readme;
mod regressions;
mod support;
mod tracing;
mod typed;
mod vacuum;
