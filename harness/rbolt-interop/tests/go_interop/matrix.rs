//! The cases: one file each, written by rbolt and Go in turns. Together they cover every page
//! size from 512 to 65,536 bytes, both freelist kinds on both sides, a freelist kept or not
//! on either side, either side creating the file, auto-shrink, vacuum steps and a whole
//! vacuum, non-durable commits, values of 1 to 10 MB, more than 65,535 free ids at once, and
//! buckets nested 200 deep.

use rbolt::FreelistKind;

/// Which side writes a round.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    Rbolt = 0,
    Go = 1,
}

/// One file's life.
#[derive(Clone, Debug)]
pub struct Case {
    pub seed: u64,
    pub page_size: usize,
    /// Who creates the file and writes the first round; the other side writes the next.
    pub creator: Side,
    /// Rounds of writes, alternating sides.
    pub rounds: usize,
    /// Transactions per round, and operations per transaction.
    pub txs: usize,
    pub ops: usize,
    pub rbolt_freelist: FreelistKind,
    pub rbolt_no_freelist_sync: bool,
    /// Go's freelist type: "array" or "map".
    pub go_freelist: &'static str,
    pub go_no_freelist_sync: bool,
    pub auto_shrink: bool,
    /// Some rbolt rounds end with a whole `Db::vacuum` (which cuts the file to its mark).
    pub whole_vacuum: bool,
    /// rbolt rounds mix `Durability::None` commits with durable ones.
    pub durability_mix: bool,
    /// rbolt rounds open with `Options::one_sync`: their durable commits sync once, and
    /// their metas are in rbolt's one-sync form until the close writes one in Go's (issue 51).
    pub one_sync: bool,
    /// Values of 1 to 10 MB.
    pub big: bool,
    /// A chain of buckets this deep (0: none), made by the creator's first round.
    pub deep: usize,
    /// The creator's first round frees more than 65,535 pages at once.
    pub big_freelist: bool,
    /// Every rbolt round ends by deleting every bucket and vacuuming the file to the few
    /// pages left.
    pub wipe: bool,
}

/// Every page size bbolt's writer supports that the suite covers.
const PAGE_SIZES: [usize; 8] = [512, 1024, 2048, 4096, 8192, 16384, 32768, 65536];

/// The seeds of the ordinary cases (`RBOLT_GO_SEEDS`): one a page size in the fast tier,
/// three in CI's.
fn seeds() -> u64 {
    let per_size = PAGE_SIZES.len() as u64;
    rbolt_testkit::tier::size("RBOLT_GO_SEEDS", per_size, 3 * per_size, 12 * per_size)
}

pub fn cases() -> Vec<Case> {
    let mut cases: Vec<Case> = (0..seeds())
        .map(|i| {
            let bit = |n: u64| (i >> n) & 1 == 1;
            Case {
                seed: 1000 + i,
                page_size: PAGE_SIZES[i as usize % PAGE_SIZES.len()],
                creator: if bit(0) ^ bit(3) {
                    Side::Go
                } else {
                    Side::Rbolt
                },
                rounds: 4,
                txs: 3,
                ops: 150,
                rbolt_freelist: if bit(1) {
                    FreelistKind::Span
                } else {
                    FreelistKind::Array
                },
                rbolt_no_freelist_sync: i % 3 == 1,
                go_freelist: if bit(2) { "map" } else { "array" },
                go_no_freelist_sync: i % 5 == 2,
                auto_shrink: i % 4 == 3,
                whole_vacuum: i % 6 == 5,
                durability_mix: i % 2 == 0,
                one_sync: i % 3 != 2,
                big: false,
                deep: 0,
                big_freelist: false,
                wipe: false,
            }
        })
        .collect();
    let base = cases[0].clone();
    // More than 65,535 free ids at once (four 10 MB values at 512-byte pages), each side
    // creating.
    for (seed, page_size, creator) in [(2001, 512, Side::Rbolt), (2002, 512, Side::Go)] {
        cases.push(Case {
            seed,
            page_size,
            creator,
            big_freelist: true,
            ops: 50,
            ..base.clone()
        });
    }
    // Values of 1 to 10 MB.
    for (seed, page_size, creator) in [(2003, 4096, Side::Rbolt), (2004, 16384, Side::Go)] {
        cases.push(Case {
            seed,
            page_size,
            creator,
            big: true,
            ops: 50,
            ..base.clone()
        });
    }
    // Buckets nested 200 deep.
    for (seed, page_size, creator) in [(2005, 1024, Side::Go), (2006, 8192, Side::Rbolt)] {
        cases.push(Case {
            seed,
            page_size,
            creator,
            deep: 200,
            ..base.clone()
        });
    }
    // A file emptied and vacuumed to a few pages, at every page size below 4 KiB.
    for (seed, page_size) in [(2007, 512), (2008, 1024), (2009, 2048)] {
        cases.push(Case {
            seed,
            page_size,
            creator: Side::Rbolt,
            wipe: true,
            ..base.clone()
        });
    }
    cases
}
