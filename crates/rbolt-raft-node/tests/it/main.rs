//! rbolt-raft-node's tests on real processes: three `rbolt-raft-node serve` processes on
//! loopback addresses, SIGKILLed under load (over plain TCP and over TLS), killed during
//! snapshot installs and during their first start, and partitioned (an isolated leader; the
//! partition suite: faults between the nodes while clients write and read, every key checked
//! linearizable); a regression test for each defect of issue 23; a sweep of bad input over
//! every route and RPC; health, metrics, logs, backups and restores (killed at every step); plus the client API and
//! the command line.
//!
//! The cluster tests run one at a time ([`cluster::SERIAL`]): each is timing-sensitive, and
//! the machine has two cores.

mod api;
mod cluster;
mod faults;
mod kill;
mod linearizable;
mod ops;
mod partition;
mod partition_suite;
mod readme;
mod regressions;
mod restore_crash;
mod snapshot;
mod snapshot_attacks;
mod snapshot_transfer;
mod space;
mod sweep;
mod sync_failure;
mod tls;
mod votes;
