//! Any bytes as a database file: open read-only and read-write, check, scan everything.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    rbolt_reliability::fuzz::open_bytes(data);
});
