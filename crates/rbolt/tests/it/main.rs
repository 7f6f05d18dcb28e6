//! rbolt's integration tests: one binary, one module per area.

mod basics;
mod fixtures;
mod storage;
mod support;
