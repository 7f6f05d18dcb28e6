//! Operation sequences (puts, deletes, nested buckets, commits, rollbacks, reopens, power
//! cuts, crashes mid-commit) against a model, over a simulated file.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rbolt_reliability::fuzz::ops(data);
});
