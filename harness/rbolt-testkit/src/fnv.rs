//! FNV-1a (Fowler, Noll, Vo), the one copy test support hashes with: digests of a database's
//! content, values derived from keys, benchmark keys spread as bbolt's benchmarks spread
//! them, and an oracle for the meta checksum that does not share rbolt-page's code.
//!
//! Library crates keep their own where the hash is part of what they do (rbolt-page's meta
//! checksum, the CLI's surgery digest, the raft node's cluster id): they must not link test
//! support.

/// The 64-bit offset basis: the hash of no bytes.
pub const OFFSET_BASIS_64: u64 = 0xcbf2_9ce4_8422_2325;
/// The 64-bit FNV prime.
pub const PRIME_64: u64 = 0x0000_0100_0000_01b3;
/// The 32-bit offset basis: the hash of no bytes.
pub const OFFSET_BASIS_32: u32 = 0x811c_9dc5;
/// The 32-bit FNV prime.
pub const PRIME_32: u32 = 0x0100_0193;

/// FNV-1a 64 over bytes given in pieces: the same hash as [`fnv1a64`] of the pieces joined.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fnv1a64 {
    hash: u64,
}

impl Default for Fnv1a64 {
    fn default() -> Fnv1a64 {
        Fnv1a64::new()
    }
}

impl Fnv1a64 {
    /// A hash of no bytes yet.
    pub fn new() -> Fnv1a64 {
        Fnv1a64 {
            hash: OFFSET_BASIS_64,
        }
    }

    /// Hashes `bytes` after what came before.
    pub fn write(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            self.hash = (self.hash ^ u64::from(byte)).wrapping_mul(PRIME_64);
        }
    }

    /// The hash of every byte written so far.
    pub fn finish(&self) -> u64 {
        self.hash
    }
}

/// FNV-1a 64 of `bytes`.
pub fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut hash = Fnv1a64::new();
    hash.write(bytes);
    hash.finish()
}

/// FNV-1a 32 of `bytes` (Go's `hash/fnv.New32a`, which bbolt's benchmarks make keys with).
pub fn fnv1a32(bytes: &[u8]) -> u32 {
    bytes.iter().fold(OFFSET_BASIS_32, |hash, &byte| {
        (hash ^ u32::from(byte)).wrapping_mul(PRIME_32)
    })
}
