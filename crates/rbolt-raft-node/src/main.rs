//! `rbolt-raft-node`: runs one replica of the replicated key/value store (`serve`), seeds a
//! new node from a backup (`restore`), or talks to one as a client (`put`, `get`, `delete`,
//! `status`, `members`, `add-learner`, `remove-learner`, `change-members`, `transfer-leader`,
//! `health`, `alarm list`, `alarm disarm`, `vacuum`, `snapshot save`).

use anyhow::{Context, bail};
use clap::{Parser, Subcommand};
use rbolt_raft_node::app::Access;
use rbolt_raft_node::client::Client;
use rbolt_raft_node::identity::{
    self, CLUSTER_ID_FILE, INITIAL_PEERS_FILE, NODE_ID_FILE, cluster_id_for, peers_text,
    read_record,
};
use rbolt_raft_node::kv::KvConfig;
use rbolt_raft_node::limits::{Limits, MAX_REQUEST_BYTES_DEFAULT};
use rbolt_raft_node::node::{self, InitialState, NodeOptions, RaftTiming};
use rbolt_raft_node::observe::LogFormat;
use rbolt_raft_node::tls::TlsFiles;
use std::collections::BTreeSet;
use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::time::Duration;
use tracing_subscriber::filter::LevelFilter;

#[derive(Parser)]
#[command(name = "rbolt-raft-node", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct ServeArgs {
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
    /// initializes the cluster with exactly these (with --initial-cluster-state new). Read only
    /// when the directory is new; leave out to join an existing cluster (as a learner, added
    /// with `add-learner`).
    #[arg(long, default_value = "")]
    peers: String,
    /// `new`: a node in --peers with a new directory bootstraps the cluster; `existing`: it
    /// never does, it waits to be added.
    #[arg(long, value_enum, default_value_t = InitialState::New)]
    initial_cluster_state: InitialState,
    /// The cluster's name, the same on every node: recorded at bootstrap, carried on every
    /// peer message and checked (a node of another cluster is refused). Without it the
    /// cluster id is derived from --peers.
    #[arg(long)]
    initial_cluster_token: Option<String>,
    /// The largest value (and client request body) accepted, in bytes. Give every node the
    /// same.
    #[arg(long, default_value_t = MAX_REQUEST_BYTES_DEFAULT)]
    max_request_bytes: usize,
    /// The bytes of a snapshot file one request to a follower carries (a snapshot goes in
    /// chunks, each with its own timeout, and a cut transfer goes on from what the follower
    /// holds).
    #[arg(long, default_value_t = rbolt_raft_node::limits::SNAPSHOT_CHUNK_BYTES_DEFAULT)]
    snapshot_chunk_bytes: usize,
    /// The least severe log lines written: error, warn, info, debug or trace.
    #[arg(long, default_value = "info")]
    log_level: LevelFilter,
    /// How log lines are written: text (one line per event) or json (one JSON object per
    /// line, for a log collector).
    #[arg(long, value_enum, default_value_t = LogFormat::Text)]
    log_format: LogFormat,
    /// A second address serving only /metrics and the health checks (/livez, /readyz,
    /// /health), in plain HTTP and without credentials, for a monitoring system that must not
    /// reach the client and peer API (etcd's --listen-metrics-urls).
    #[arg(long)]
    listen_metrics: Option<SocketAddr>,
    /// The node's certificate chain (PEM): it then serves HTTPS to clients and peers.
    #[arg(long)]
    tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long)]
    tls_key: Option<PathBuf>,
    /// The certificate authority (PEM) the node checks its peers' certificates against.
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// Peers must present a certificate signed by --tls-ca that names the extended key usages
    /// serverAuth and clientAuth (mutual TLS; this node's --tls-cert must too). A certificate
    /// signed by --tls-ca, a client's with clientAuth alone included, authorizes a client's
    /// writes.
    #[arg(long)]
    peer_mtls: bool,
    /// A file holding the token clients must send (Authorization: Bearer TOKEN) to write,
    /// change the membership or take a backup.
    #[arg(long)]
    client_token_file: Option<PathBuf>,
    /// Reads (keys, dumps, members, status) need the client token or a client certificate,
    /// as writes do; health checks and metrics stay open.
    #[arg(long)]
    client_auth_reads: bool,
    /// A file holding the cluster's peer secret (its first line; the same file on every node):
    /// every peer RPC carries it, and one without it is refused. Off loopback a node needs
    /// this or --peer-mtls.
    #[arg(long)]
    peer_secret_file: Option<PathBuf>,
    /// Listen on a non-loopback address without TLS and client authentication (peers must
    /// still authenticate: --peer-mtls or --peer-secret-file).
    #[arg(long)]
    insecure: bool,
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
    /// The store's quota in bytes (0: none): once the pages in use of a member's state file
    /// pass it, the member raises the NOSPACE alarm and the cluster refuses puts (507) until an
    /// operator frees space and runs `alarm disarm`; reads and deletes go on (etcd's
    /// --quota-backend-bytes).
    #[arg(long, default_value_t = 0)]
    quota_backend_bytes: u64,
    /// Bytes of disk the node keeps in a reserve file (`space-reserve` in --data-dir) and
    /// gives back to its stores when the disk fills, so that a full disk raises the NOSPACE
    /// alarm instead of stopping the node (0: none). It is written while the disk has room
    /// for it twice over.
    #[arg(long, default_value_t = rbolt_raft_node::space::SPACE_RESERVE_BYTES_DEFAULT)]
    space_reserve_bytes: u64,
    /// Apply committed entries to the state file without syncing it, and sync it once every
    /// this many entries (0 or 1: every apply batch is durable, two more fdatasyncs per
    /// write). The log is the durable record: after a power loss the node applies the entries
    /// since the last sync again from it.
    #[arg(long, default_value_t = APPLY_SYNC_EVERY_DEFAULT)]
    apply_sync_every: u64,
}

/// `--apply-sync-every` unless given: a sync every thousand entries costs nothing measurable,
/// and a power loss makes a node apply at most that many entries again at its start.
const APPLY_SYNC_EVERY_DEFAULT: u64 = 1000;

#[derive(Subcommand)]
enum Command {
    /// Runs a node until SIGINT or SIGTERM (a leader hands leadership over first, and the
    /// requests in flight are answered).
    Serve(Box<ServeArgs>),
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
    /// Prints the node's health check; exits 1 unless it is healthy.
    Health {
        #[command(flatten)]
        node: NodeArg,
    },
    /// Prints the members, with each one's replication progress when asked of the leader.
    Members {
        #[command(flatten)]
        node: NodeArg,
    },
    /// Adds a node as a learner (it receives the log, does not vote); returns once it has
    /// caught up. A node that does not answer is refused unless --force.
    AddLearner {
        #[command(flatten)]
        node: NodeArg,
        /// The new node's id.
        #[arg(long)]
        id: u64,
        /// The address it listens on.
        #[arg(long)]
        addr: String,
        /// Add it even if it does not answer yet (it catches up once it does).
        #[arg(long)]
        force: bool,
    },
    /// Removes a learner.
    RemoveLearner {
        #[command(flatten)]
        node: NodeArg,
        /// The learner's id.
        #[arg(long)]
        id: u64,
    },
    /// Makes exactly these nodes the voters (IDs separated by commas); a learner among them
    /// must have caught up.
    ChangeMembers {
        #[command(flatten)]
        node: NodeArg,
        voters: String,
    },
    /// Hands leadership to another voter.
    TransferLeader {
        #[command(flatten)]
        node: NodeArg,
        /// The voter to lead.
        #[arg(long)]
        to: u64,
    },
    /// Alarms: `alarm list`, `alarm disarm` (after freeing space).
    Alarm {
        #[command(subcommand)]
        command: AlarmCommand,
    },
    /// Runs the online vacuum of the node's own files (not the leader's): free pages at their
    /// ends go back to the filesystem; writes go on meanwhile.
    Vacuum {
        #[command(flatten)]
        node: NodeArg,
    },
    /// Backups: `snapshot save FILE`.
    Snapshot {
        #[command(subcommand)]
        command: SnapshotCommand,
    },
    /// Seeds a new node's data directory from a backup, for a new cluster with --peers as
    /// its voters. Restore each new node from the same backup with the same --peers.
    Restore {
        /// The backup (`snapshot save`'s file).
        #[arg(long)]
        backup: PathBuf,
        /// The new node's id.
        #[arg(long)]
        id: u64,
        /// Its data directory (must not hold a node).
        #[arg(long)]
        data_dir: PathBuf,
        /// The new cluster's voters, this node included: ID=HOST:PORT,...
        #[arg(long)]
        peers: String,
        /// The new cluster's token (else derived from --peers and the backup).
        #[arg(long)]
        initial_cluster_token: Option<String>,
    },
}

#[derive(Subcommand)]
enum AlarmCommand {
    /// Prints the raised alarms as JSON.
    List {
        #[command(flatten)]
        node: NodeArg,
    },
    /// Clears every alarm (through the leader); a member still short of space raises its
    /// alarm again.
    Disarm {
        #[command(flatten)]
        node: NodeArg,
    },
}

#[derive(Subcommand)]
enum SnapshotCommand {
    /// Writes a backup to FILE: one consistent rbolt copy of the state machine, checked, from
    /// a running node (through the leader, or --local) or a stopped node's --data-dir.
    Save {
        file: PathBuf,
        #[command(flatten)]
        node: NodeArg,
        /// The node's own state, without asking the leader (for a cluster without a quorum).
        #[arg(long)]
        local: bool,
        /// Read a stopped node's data directory instead of asking a running node.
        #[arg(long)]
        data_dir: Option<PathBuf>,
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
    /// Talk HTTPS, trusting this certificate authority (PEM).
    #[arg(long)]
    tls_ca: Option<PathBuf>,
    /// A client certificate (PEM) to present (a node with --peer-mtls takes it for writes).
    #[arg(long)]
    tls_cert: Option<PathBuf>,
    /// The key of --tls-cert.
    #[arg(long)]
    tls_key: Option<PathBuf>,
    /// A file holding the client token (or set RBOLT_RAFT_TOKEN).
    #[arg(long)]
    token_file: Option<PathBuf>,
}

/// Reads a token file: its first line.
fn read_token(path: &Path) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(path).with_context(|| path.display().to_string())?;
    let token = text.lines().next().unwrap_or("").trim().to_owned();
    if token.is_empty() {
        bail!("{} holds no token", path.display());
    }
    Ok(token)
}

impl NodeArg {
    fn client(&self) -> anyhow::Result<Client> {
        let timeout = Duration::try_from_secs_f64(self.timeout).context("--timeout")?;
        let files = TlsFiles {
            cert: self.tls_cert.clone(),
            key: self.tls_key.clone(),
            ca: self.tls_ca.clone(),
        };
        let tls = files.client(self.tls_cert.is_some())?;
        let token = match &self.token_file {
            Some(path) => Some(read_token(path)?),
            None => std::env::var("RBOLT_RAFT_TOKEN").ok(),
        };
        // Writes go under request ids: one whose outcome is unknown is sent again safely.
        Ok(Client::new()
            .with_timeout(timeout)
            .with_tls(tls)
            .with_token(token)
            .with_request_ids(true))
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

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    rbolt_raft_node::observe::init_logging(args.log_level, args.log_format);
    let client_token = args
        .client_token_file
        .as_deref()
        .map(read_token)
        .transpose()?;
    let options = NodeOptions {
        id: args.id,
        data_dir: args.data_dir,
        listen: args.listen,
        listen_metrics: args.listen_metrics,
        peers: node::parse_peers(&args.peers).context("--peers")?,
        initial_state: args.initial_cluster_state,
        cluster_token: args.initial_cluster_token,
        raft: RaftTiming {
            heartbeat_ms: args.heartbeat_ms,
            election_timeout_ms: args.election_timeout_ms,
            snapshot_every: args.snapshot_every,
            logs_to_keep: args.logs_to_keep,
        },
        limits: Limits::new(args.max_request_bytes)?
            .with_snapshot_chunk_bytes(args.snapshot_chunk_bytes)?,
        tls: TlsFiles {
            cert: args.tls_cert,
            key: args.tls_key,
            ca: args.tls_ca,
        },
        access: Access {
            client_token,
            peer_mtls: args.peer_mtls,
            peer_secret: args
                .peer_secret_file
                .as_deref()
                .map(read_token)
                .transpose()
                .context("--peer-secret-file")?,
            client_auth_reads: args.client_auth_reads,
        },
        insecure: args.insecure,
        quota_bytes: args.quota_backend_bytes,
        reserve_bytes: args.space_reserve_bytes,
        apply_sync_every: args.apply_sync_every,
    };
    let result = node::run(options, stop_signal()).await;
    if let Err(e) = &result {
        tracing::error!(error = %format!("{e:#}"), "the node stops");
    }
    result
}

/// Writes `bytes` to `file` durably (temporary name, sync, rename), checking first that they
/// are a sound backup; returns its last applied index.
fn save_backup(file: &Path, bytes: Option<&[u8]>, data_dir: Option<&Path>) -> anyhow::Result<u64> {
    let tmp = file.with_extension("partial");
    let written = (|| {
        match (bytes, data_dir) {
            (Some(bytes), _) => {
                let mut out = std::fs::File::create(&tmp)?;
                out.write_all(bytes)?;
                out.sync_all()?;
            }
            (None, Some(dir)) => {
                let state = dir.join(rbolt_raft::STATE_FILE);
                let options = rbolt_raft::rbolt_options()
                    .read_only(true)
                    .lock_timeout(Some(Duration::from_secs(2)));
                let db = rbolt::Db::open_with(&state, options)
                    .with_context(|| format!("{} (is the node stopped?)", state.display()))?;
                db.begin_read()?.copy_file(&tmp)?;
                std::fs::File::open(&tmp)?.sync_all()?;
            }
            (None, None) => bail!("nothing to save"),
        }
        let (last, _) =
            rbolt_raft::check_backup::<KvConfig>(&tmp).context("the backup does not check")?;
        std::fs::rename(&tmp, file)?;
        anyhow::Ok(last.map_or(0, |id| id.index))
    })();
    if written.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    written
}

/// Refuses `dir` if it is recorded as another node's than `id`.
fn check_node_id_if_any(dir: &Path, id: u64) -> anyhow::Result<()> {
    match read_record(dir, NODE_ID_FILE)? {
        Some(found) if found.trim() != id.to_string() => {
            bail!("{} belongs to node {found}, not node {id}", dir.display())
        }
        _ => Ok(()),
    }
}

fn restore(
    backup: &Path,
    id: u64,
    data_dir: &Path,
    peers: &str,
    token: Option<&str>,
) -> anyhow::Result<serde_json::Value> {
    let peers = node::parse_peers(peers).context("--peers")?;
    if !peers.contains_key(&id) {
        bail!("--peers must include this node ({id})");
    }
    if let Some(token) = token {
        identity::check_cluster_token(token)?;
    }
    let voters: BTreeSet<u64> = peers.keys().copied().collect();
    let nodes = peers
        .iter()
        .map(|(id, addr)| (*id, openraft::BasicNode { addr: addr.clone() }))
        .collect::<std::collections::BTreeMap<_, _>>();
    let membership = openraft::Membership::new(vec![voters], nodes).context("the membership")?;
    let (last, _) = rbolt_raft::check_backup::<KvConfig>(backup)
        .with_context(|| format!("{} is not a sound backup", backup.display()))?;
    let term = last.as_ref().map_or(0, |l| l.leader_id.term);
    let index = last.as_ref().map_or(0, |l| l.index);
    // A directory of another node's id is refused before anything changes (not when it holds
    // an unfinished restore: that starts over).
    if !data_dir.join(rbolt_raft::RESTORING_FILE).exists() {
        check_node_id_if_any(data_dir, id)?;
    }
    let cluster = cluster_id_for(token, &peers, &format!("restored {index}"));
    let (id_text, peers_text) = (format!("{id}\n"), format!("{}\n", peers_text(&peers)));
    let cluster_text = format!("{cluster}\n");
    // The records go in with the restore, so a crash part way leaves the directory marked as
    // an unfinished restore (a node refuses it; this command, run again, starts over).
    let start = rbolt_raft::restore_with::<KvConfig>(
        backup,
        data_dir,
        membership,
        openraft::Vote::new(term, id),
        &[
            (NODE_ID_FILE, id_text.as_bytes()),
            (CLUSTER_ID_FILE, cluster_text.as_bytes()),
            (INITIAL_PEERS_FILE, peers_text.as_bytes()),
        ],
    )?;
    Ok(serde_json::json!({
        "data_dir": data_dir.display().to_string(),
        "cluster": cluster,
        "starts_after_index": start.index,
    }))
}

async fn run(command: Command) -> anyhow::Result<ExitCode> {
    match command {
        Command::Serve(args) => serve(*args).await?,
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
        Command::Health { node } => {
            let health = node.client()?.retrying(false).health(&node.node).await?;
            print_json(&health)?;
            if !health.ok {
                return Ok(ExitCode::FAILURE);
            }
        }
        Command::Members { node } => print_json(&node.client()?.members(&node.node).await?)?,
        Command::AddLearner {
            node,
            id,
            addr,
            force,
        } => {
            let client = node.client()?;
            print_json(&client.add_learner(&node.node, id, &addr, force).await?)?;
        }
        Command::RemoveLearner { node, id } => {
            print_json(&node.client()?.remove_learner(&node.node, id).await?)?;
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
        Command::TransferLeader { node, to } => {
            print_json(&node.client()?.transfer_leader(&node.node, to).await?)?;
        }
        Command::Alarm {
            command: AlarmCommand::List { node },
        } => print_json(&node.client()?.alarms(&node.node).await?)?,
        Command::Alarm {
            command: AlarmCommand::Disarm { node },
        } => print_json(&node.client()?.disarm_alarms(&node.node).await?)?,
        Command::Vacuum { node } => print_json(&node.client()?.vacuum(&node.node).await?)?,
        Command::Snapshot {
            command:
                SnapshotCommand::Save {
                    file,
                    node,
                    local,
                    data_dir,
                },
        } => {
            let bytes = match &data_dir {
                Some(_) => None,
                None => Some(node.client()?.backup(&node.node, local).await?),
            };
            let last = tokio::task::spawn_blocking(move || {
                let last = save_backup(&file, bytes.as_deref(), data_dir.as_deref())?;
                anyhow::Ok((file, last))
            })
            .await??;
            print_json(&serde_json::json!({
                "file": last.0.display().to_string(),
                "last_applied_index": last.1,
                "checked": true,
            }))?;
        }
        Command::Restore {
            backup,
            id,
            data_dir,
            peers,
            initial_cluster_token,
        } => {
            let done = tokio::task::spawn_blocking(move || {
                restore(
                    &backup,
                    id,
                    &data_dir,
                    &peers,
                    initial_cluster_token.as_deref(),
                )
            })
            .await??;
            print_json(&done)?;
        }
    }
    Ok(ExitCode::SUCCESS)
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    // A test build's failpoints, from `FAILPOINTS`, for the process's whole life.
    #[cfg(feature = "_failpoints")]
    let _failpoints = fail::FailScenario::setup();
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
