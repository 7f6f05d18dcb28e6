//! rbolt-raft-node's tests on real processes: three `rbolt-raft-node serve` processes on
//! loopback addresses, SIGKILLed under load, killed during snapshot installs and during their
//! first start, and partitioned; plus the client API and the command line.
//!
//! The cluster tests run one at a time ([`cluster::SERIAL`]): each is timing-sensitive, and
//! the machine has two cores.

mod api;
mod cluster;
mod kill;
mod partition;
mod snapshot;
