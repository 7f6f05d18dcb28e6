//! What a power loss leaves of a [`SimFile`](super::SimFile)'s unsynced writes: the crash
//! profiles, the fate of each write (kept, dropped, torn by sector, garbled), and the seeded
//! generator that decides them.

use std::ops::Range;

use super::SECTOR_SIZE;

/// Which unsynced operations survive in a [`SimFile::crash_image`].
///
/// Pending operations are decided one by one, oldest first, with a seeded RNG, and the
/// survivors are applied to the durable image in their original order. A write that survives
/// at all (even with no sector kept) extends the image to its end, as if the file's size had
/// reached the disk before its data; the sectors it did not keep read as the durable image had
/// them, or as zeros past the durable end. A surviving growth extends the image to its length;
/// a dropped one leaves the file shorter than later metadata may expect.
///
/// ```
/// use rbolt_storage::{CrashProfile, SimFile, Storage};
/// let sim = SimFile::new().unwrap();
/// sim.write_all_at(&[1u8; 1024], 0).unwrap();
/// sim.sync_data().unwrap();
/// sim.write_all_at(&[2u8; 1024], 0).unwrap(); // two sectors, unsynced
/// for profile in CrashProfile::ALL {
///     for seed in 0..8 {
///         let image = sim.crash_image(profile, seed);
///         assert_eq!(image.len(), 1024);
///         if profile != CrashProfile::Garbage {
///             // Each sector is whole: old or new, never a mix within it.
///             for sector in image.chunks(512) {
///                 assert!(sector.iter().all(|&b| b == 1) || sector.iter().all(|&b| b == 2));
///             }
///         }
///     }
/// }
/// assert_eq!(sim.crash_image(CrashProfile::Torn, 3), sim.crash_image(CrashProfile::Torn, 3));
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum CrashProfile {
    /// Every pending operation survives: the image is the live file, as if it had been synced.
    KeepAll,
    /// No pending operation survives: the image is the durable file.
    DropAll,
    /// Each pending operation survives whole or is dropped whole, with even odds.
    Random,
    /// Each pending write is kept, dropped, torn to a prefix of its sectors, or torn to a
    /// random subset of its sectors, with even odds; each length change is kept or dropped.
    Torn,
    /// As [`Torn`](CrashProfile::Torn), and in addition half of the writes have some of their
    /// sectors filled with random bytes, as a device losing power mid-sector can leave them.
    Garbage,
}

impl CrashProfile {
    /// Whether a crash image keeps an unsynced change of the file's length (a growth or a
    /// truncation): always, never, or by a coin.
    pub(super) fn keeps_length_change(self, rng: &mut SplitMix64) -> bool {
        match self {
            CrashProfile::KeepAll => true,
            CrashProfile::DropAll => false,
            CrashProfile::Random | CrashProfile::Torn | CrashProfile::Garbage => rng.coin(),
        }
    }

    /// Every profile, for tests that loop over all of them.
    pub const ALL: [CrashProfile; 5] = [
        CrashProfile::KeepAll,
        CrashProfile::DropAll,
        CrashProfile::Random,
        CrashProfile::Torn,
        CrashProfile::Garbage,
    ];
}

/// What a crash does to one pending write.
pub(super) enum WriteFate {
    Keep,
    Drop,
    /// Some sectors are kept, some dropped (`false`), some replaced by garbage (`None`).
    Sectors(Vec<Option<bool>>),
}

/// Decides what a crash under `profile` does to a pending write covering `n_sectors` sectors.
pub(super) fn write_fate(
    profile: CrashProfile,
    n_sectors: usize,
    rng: &mut SplitMix64,
) -> WriteFate {
    let torn = |rng: &mut SplitMix64| -> WriteFate {
        match rng.below(4) {
            0 => WriteFate::Keep,
            1 => WriteFate::Drop,
            2 => {
                // A prefix of the sectors reached the disk: a write cut off in the middle.
                let kept = rng.below(n_sectors as u64) as usize;
                WriteFate::Sectors((0..n_sectors).map(|sector| Some(sector < kept)).collect())
            }
            _ => WriteFate::Sectors((0..n_sectors).map(|_| Some(rng.coin())).collect()),
        }
    };
    match profile {
        CrashProfile::KeepAll => WriteFate::Keep,
        CrashProfile::DropAll => WriteFate::Drop,
        CrashProfile::Random => {
            if rng.coin() {
                WriteFate::Keep
            } else {
                WriteFate::Drop
            }
        }
        CrashProfile::Torn => torn(rng),
        CrashProfile::Garbage => {
            let fate = torn(rng);
            if !rng.coin() {
                return fate;
            }
            let mut sectors = match fate {
                WriteFate::Keep => vec![Some(true); n_sectors],
                WriteFate::Drop => vec![Some(false); n_sectors],
                WriteFate::Sectors(sectors) => sectors,
            };
            // At least one sector is garbage, so a garbage write never looks clean.
            let first = rng.below(n_sectors as u64) as usize;
            sectors[first] = None;
            for sector in &mut sectors {
                if rng.below(4) == 0 {
                    *sector = None;
                }
            }
            WriteFate::Sectors(sectors)
        }
    }
}

/// The sector-aligned pieces of the write `[offset, offset + len)`: whole sectors, except where
/// the write starts or ends inside one.
pub(super) fn sectors(offset: u64, len: usize) -> impl Iterator<Item = Range<u64>> {
    let end = offset + len as u64;
    let first_sector = offset / SECTOR_SIZE;
    let end_sector = end.div_ceil(SECTOR_SIZE);
    (first_sector..end_sector).map(move |sector| {
        (sector * SECTOR_SIZE).max(offset)..((sector + 1) * SECTOR_SIZE).min(end)
    })
}

/// SplitMix64 (Steele, Lea and Flood): a tiny, well-mixed generator; crash images only need
/// reproducible choices, not cryptographic ones. It is the one copy outside `rbolt-testkit`'s
/// `rng` on purpose: this is library code (the `sim` feature ships in the crate), and a
/// library crate must not link a test-support crate.
pub(super) struct SplitMix64 {
    state: u64,
}

impl SplitMix64 {
    pub(super) fn new(seed: u64) -> SplitMix64 {
        SplitMix64 { state: seed }
    }

    pub(super) fn next_u64(&mut self) -> u64 {
        self.state = self.state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.state;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n`; the modulo bias is irrelevant for the small `n` used here.
    pub(super) fn below(&mut self, n: u64) -> u64 {
        debug_assert!(n > 0, "below(0) has no possible result");
        self.next_u64() % n
    }

    pub(super) fn coin(&mut self) -> bool {
        self.next_u64() & 1 == 1
    }

    pub(super) fn fill(&mut self, bytes: &mut [u8]) {
        for chunk in bytes.chunks_mut(8) {
            let random = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&random[..chunk.len()]);
        }
    }
}
