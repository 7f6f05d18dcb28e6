//! rbolt-raft-node: a key/value store replicated with Raft, one process per replica, each
//! replica's log and state in rbolt files (through `rbolt-raft`).
//!
//! A node serves one HTTP/1.1 port for both its peers and its clients (hyper, over TCP or
//! rustls TLS): openraft's RPCs in binary frames that name the cluster (append entries, vote)
//! and a snapshot's rbolt file in chunks that resume, checked end to end, and a client API:
//! `PUT`, `DELETE` and `GET /kv/KEY` (linearizable through the leader, or `?read=local`),
//! `GET /kv`, status, health checks, Prometheus metrics, backups, membership changes, the
//! NOSPACE alarms and the online vacuum. A follower answers requests for the leader with a
//! `307` redirect to it. Every request is checked against the
//! node's limits before anything is proposed. The `rbolt-raft-node` binary runs a node
//! (`serve`), seeds one from a backup (`restore`), and is also a client of one (`put`, `get`,
//! `snapshot save`, ...); see the README.
//!
//! It owns the network and the process; storage, durability and snapshots are
//! `rbolt-raft`'s. It has no `unsafe`.

#![forbid(unsafe_code)]

pub mod alarm;
pub mod api;
pub mod app;
pub mod client;
pub mod context;
pub mod http;
pub mod identity;
pub mod kv;
pub mod limits;
pub mod maintenance;
pub mod membership;
pub mod network;
pub mod node;
pub mod observe;
pub mod peer;
pub mod server;
pub mod snapshot_transfer;
pub mod space;
pub mod tls;
pub mod wire;
