//! `rbolt-raft-node`: runs one replica of the replicated key/value store (`serve`), or talks
//! to one as a client (`put`, `get`, `delete`, `status`, `add-learner`, `change-members`).

use anyhow::Context;
use clap::{Parser, Subcommand};
use rbolt_raft_node::client::Client;
use rbolt_raft_node::node::{self, NodeOptions, RaftTiming};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

#[derive(Parser)]
#[command(name = "rbolt-raft-node", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Runs a node until SIGINT or SIGTERM.
    Serve {
        /// This node's id, unique in the cluster.
        #[arg(long)]
        id: u64,
        /// Its data directory (created if missing).
        #[arg(long)]
        data_dir: PathBuf,
        /// The address it listens on for peers and clients.
        #[arg(long)]
        listen: SocketAddr,
        /// The initial members, this node included: ID=HOST:PORT,... A new node among them
        /// initializes the cluster with exactly these. Leave out to join an existing cluster
        /// (as a learner, added with `add-learner`).
        #[arg(long, default_value = "")]
        peers: String,
        /// The leader's heartbeat interval, in milliseconds.
        #[arg(long, default_value_t = RaftTiming::default().heartbeat_ms)]
        heartbeat_ms: u64,
        /// The shortest election timeout, in milliseconds (the longest is twice this).
        #[arg(long, default_value_t = RaftTiming::default().election_timeout_ms)]
        election_timeout_ms: u64,
        /// Build a snapshot (and purge the log) every this many entries.
        #[arg(long, default_value_t = RaftTiming::default().snapshot_every)]
        snapshot_every: u64,
        /// Entries kept in the log behind a snapshot.
        #[arg(long, default_value_t = RaftTiming::default().logs_to_keep)]
        logs_to_keep: u64,
    },
    /// Sets KEY to VALUE (through the leader; done means committed and applied).
    Put {
        #[command(flatten)]
        node: NodeArg,
        key: String,
        value: String,
    },
    /// Prints the value of KEY (linearizable through the leader, or --local).
    Get {
        #[command(flatten)]
        node: NodeArg,
        key: String,
        /// Read this node's state without asking the leader (fast, possibly stale).
        #[arg(long)]
        local: bool,
    },
    /// Deletes KEY (through the leader).
    Delete {
        #[command(flatten)]
        node: NodeArg,
        key: String,
    },
    /// Prints every key and value as JSON.
    Dump {
        #[command(flatten)]
        node: NodeArg,
        /// Read this node's state without asking the leader.
        #[arg(long)]
        local: bool,
    },
    /// Prints the node's view of the cluster as JSON.
    Status {
        #[command(flatten)]
        node: NodeArg,
    },
    /// Adds a node as a learner (it receives the log, does not vote); returns once it has
    /// caught up.
    AddLearner {
        #[command(flatten)]
        node: NodeArg,
        /// The new node's id.
        #[arg(long)]
        id: u64,
        /// The address it listens on.
        #[arg(long)]
        addr: String,
    },
    /// Makes exactly these nodes the voters (IDs separated by commas).
    ChangeMembers {
        #[command(flatten)]
        node: NodeArg,
        voters: String,
    },
}

#[derive(clap::Args)]
struct NodeArg {
    /// Any node of the cluster: requests for the leader are redirected to it.
    #[arg(long, default_value = "127.0.0.1:7001")]
    node: String,
    /// Seconds a request may take, redirects included.
    #[arg(long, default_value_t = 10.0)]
    timeout: f64,
}

impl NodeArg {
    fn client(&self) -> anyhow::Result<Client> {
        let timeout = Duration::try_from_secs_f64(self.timeout).context("--timeout")?;
        Ok(Client::new().with_timeout(timeout))
    }
}

/// Completes on SIGINT or SIGTERM.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // No signal handling: run until killed.
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
}

fn print_json<T: serde::Serialize>(value: &T) -> anyhow::Result<()> {
    println!("{}", serde_json::to_string_pretty(value)?);
    Ok(())
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve {
            id,
            data_dir,
            listen,
            peers,
            heartbeat_ms,
            election_timeout_ms,
            snapshot_every,
            logs_to_keep,
        } => {
            let options = NodeOptions {
                id,
                data_dir,
                listen,
                peers: node::parse_peers(&peers)?,
                raft: RaftTiming {
                    heartbeat_ms,
                    election_timeout_ms,
                    snapshot_every,
                    logs_to_keep,
                },
            };
            node::run(options, stop_signal()).await?;
        }
        Command::Put { node, key, value } => {
            print_json(&node.client()?.put(&node.node, &key, &value).await?)?;
        }
        Command::Get { node, key, local } => {
            match node.client()?.get(&node.node, &key, local).await? {
                Some(value) => println!("{value}"),
                None => {
                    eprintln!("{key}: no such key");
                    return Ok(ExitCode::from(2));
                }
            }
        }
        Command::Delete { node, key } => {
            print_json(&node.client()?.delete(&node.node, &key).await?)?;
        }
        Command::Dump { node, local } => {
            print_json(&node.client()?.dump(&node.node, local).await?)?;
        }
        Command::Status { node } => print_json(&node.client()?.status(&node.node).await?)?,
        Command::AddLearner { node, id, addr } => {
            print_json(&node.client()?.add_learner(&node.node, id, &addr).await?)?;
        }
        Command::ChangeMembers { node, voters } => {
            let voters = voters
                .split(',')
                .map(|v| {
                    v.trim()
                        .parse::<u64>()
                        .with_context(|| format!("voter {v:?}"))
                })
                .collect::<anyhow::Result<Vec<u64>>>()?;
            print_json(&node.client()?.change_members(&node.node, voters).await?)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("rbolt-raft-node: starting the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match runtime.block_on(run(cli.command)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("rbolt-raft-node: {e:#}");
            ExitCode::FAILURE
        }
    }
}
