//! The interoperability suite against the real Go bbolt. Its test `go_interop`
//! (`tests/go_interop/`) builds the Go program in `tests/go-interop/` (Go bbolt's `tx.Check`,
//! a dump in the manifest format, a seeded random workload, a writer that dies mid-commit) and
//! lets rbolt and Go bbolt write the same files in turns, each checking and reading what the
//! other wrote; and, in its crash rounds, lets Go open files that a killed rbolt process left
//! with commits made without syncs. Without Go it reports that it skipped;
//! `RBOLT_GO_INTEROP=require` (what `.ci/run` sets) makes a missing Go a failure.
//!
//! The library is the crash rounds' rbolt process ([`crash`], run by the binary
//! `rbolt-interop-crash-writer`) and its workload, which the suite replays into its model of
//! each acknowledged state, and the reader process of the round with a reader beside the
//! writer ([`beside`], the same binary's `read-beside`). It does no I/O but through rbolt's
//! public API.
#![forbid(unsafe_code)]

pub mod beside;
pub mod crash;
