//! The interoperability suite against the real Go bbolt; the crate has no library. Its test
//! `go_interop` (`tests/go_interop/`) builds the Go program in `tests/go-interop/` (Go
//! bbolt's `tx.Check`, a dump in the manifest format, a seeded random workload) and lets
//! rbolt and Go bbolt write the same files in turns, each checking and reading what the
//! other wrote. Without Go it reports that it skipped; `RBOLT_GO_INTEROP=require` (what
//! `.ci/run` sets) makes a missing Go a failure.
#![forbid(unsafe_code)]
