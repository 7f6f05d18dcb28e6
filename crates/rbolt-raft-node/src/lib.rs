//! rbolt-raft-node: a key/value store replicated with Raft, one process per replica, each
//! replica's log and state in rbolt files (through `rbolt-raft`).
//!
//! A node serves one HTTP/1.1 port for both its peers and its clients (hyper, plain TCP):
//! openraft's RPCs as JSON (append entries, vote) and a streamed rbolt file (install
//! snapshot), and a client API: `PUT`, `DELETE` and `GET /kv/KEY` (linearizable through the
//! leader, or `?read=local`), `GET /kv`, `GET /status`, and membership changes. A follower
//! answers requests for the leader with a `307` redirect to it. The `rbolt-raft-node` binary
//! runs a node (`serve`) and is also a client of one (`put`, `get`, ...); see the README.
//!
//! It owns the network and the process; storage, durability and snapshots are
//! `rbolt-raft`'s. It has no `unsafe`.

#![forbid(unsafe_code)]

pub mod api;
pub mod client;
pub mod http;
pub mod kv;
pub mod network;
pub mod node;
pub mod server;
