//! Hostile files: small valid databases of several shapes, corrupted every way we can think
//! of — every bit of both metas and the freelist page flipped, truncation at and around every
//! page boundary, field-aware mutations of ids, flags, counts, overflows and offsets, cycles
//! and DAGs of branch pages, nesting bombs, files that are no database at all, and many
//! random multi-byte mutations. Opening (read-only and read-write), checking and fully
//! scanning each must end in `Ok` or a typed error: never a panic, an abort, a hang, a stack
//! overflow, or a mapping or allocation larger than the file. A meta flip must give an error or
//! the other meta's state, never different data.
//!
//! One file per part: `watch` (what rbolt asks of the storage, and the bounds), `case` (one
//! case run and judged), `watchdog` (a worker that gives up on a hung case), `shapes` (the
//! valid files), `fields` (their structure, field by field), `crafted` (files made by hand and
//! mutations), `suite` (the plan and the batches in child processes) and `child` (the child's
//! side of it, reached only through `rbolt-crash-child`).

mod case;
pub(crate) mod child;
mod crafted;
mod fields;
mod shapes;
mod suite;
mod watch;
mod watchdog;

pub use case::{Expect, Tally, evaluate};
pub use crafted::{crafted_files, cycles, not_databases, random_mutation};
pub use fields::{Field, fields, fix_meta_checksum};
pub use shapes::{SHAPE_PAGE_SIZE, Shape, shapes};
pub use suite::{HostileConfig, HostileReport, run};
pub use watch::Watch;
pub use watchdog::Runner;
