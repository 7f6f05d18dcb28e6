//! Starting a node: its checks, its storage, its Raft, its server, the first start of a
//! cluster, and the watcher that logs what Raft does and stops the node if its storage fails.

use crate::app::{Access, App};
use crate::context::Ctx;
use crate::identity::{
    self, CLUSTER_ID_FILE, INITIAL_PEERS_FILE, REMOVED_FILE, check_node_id, cluster_id_for,
    peers_text, read_record, write_record,
};
use crate::kv::{KvConfig, KvMachine, KvRaft, KvStateMachine};
use crate::limits::{Limits, REPLICATION_BATCH_BYTES};
use crate::network::Network;
use crate::observe::Metrics;
use crate::server;
use crate::snapshot_transfer::Partial;
use crate::space::Space;
use crate::space::StoreObserver;
use crate::tls::TlsFiles;
use anyhow::{Context, bail};
use openraft::error::{InitializeError, RaftError};
use openraft::type_config::async_runtime::WatchReceiver;
use openraft::{BasicNode, Raft, RaftMetrics, ServerState};
use std::collections::BTreeMap;
use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;

pub use crate::identity::{NODE_ID_FILE, parse_peers};

/// Whether a node may bootstrap a cluster (etcd's `--initial-cluster-state`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum InitialState {
    /// A new cluster: a node in `--peers` whose directory is new initializes it.
    #[default]
    New,
    /// An existing cluster: the node never initializes; it waits to be added.
    Existing,
}

/// What a node needs to start.
#[derive(Clone, Debug)]
pub struct NodeOptions {
    /// Its id, unique in the cluster.
    pub id: u64,
    /// Its directory: the log, the state, the snapshot and the identity records.
    pub data_dir: PathBuf,
    /// Where it listens for peers and clients. Its connections to peers leave from this
    /// address's IP (unless it is unspecified, `0.0.0.0`).
    pub listen: SocketAddr,
    /// Where it serves only `/metrics` and the health checks, in plain HTTP
    /// (`--listen-metrics`), if anywhere.
    pub listen_metrics: Option<SocketAddr>,
    /// The initial members of the cluster, this node included, by id: `host:port` each. Read
    /// only when the directory is new (see [`InitialState`]); empty for a node that joins.
    pub peers: BTreeMap<u64, String>,
    /// Whether it may bootstrap.
    pub initial_state: InitialState,
    /// The cluster's token (`--initial-cluster-token`); without one, the cluster id is derived
    /// from the initial membership.
    pub cluster_token: Option<String>,
    /// Raft's timing and snapshot policy.
    pub raft: RaftTiming,
    /// The request limits.
    pub limits: Limits,
    /// TLS files.
    pub tls: TlsFiles,
    /// Who may do what.
    pub access: Access,
    /// Listen on a non-loopback address without TLS and client authentication.
    pub insecure: bool,
    /// The store's quota in bytes (`--quota-backend-bytes`, 0: none; see [`crate::space`]).
    pub quota_bytes: u64,
    /// The space reserve a full disk gives back, in bytes (`--space-reserve-bytes`, 0: none).
    pub reserve_bytes: u64,
    /// Apply batches commit without syncs, the state file synced once every this many
    /// entries (`--apply-sync-every`; 0 or 1: every batch durable). See
    /// `rbolt_raft::StateMachine::set_sync_every`.
    pub apply_sync_every: u64,
}

/// Raft's timing and snapshot policy for a node.
#[derive(Clone, Copy, Debug)]
pub struct RaftTiming {
    /// The leader's heartbeat, in milliseconds.
    pub heartbeat_ms: u64,
    /// The shortest election timeout, in milliseconds; the longest is twice this.
    pub election_timeout_ms: u64,
    /// A snapshot is built every this many applied entries (the log before it is then purged).
    pub snapshot_every: u64,
    /// Entries kept in the log behind the last snapshot, for followers that lag a little.
    pub logs_to_keep: u64,
}

impl Default for RaftTiming {
    fn default() -> Self {
        RaftTiming {
            heartbeat_ms: 100,
            election_timeout_ms: 500,
            snapshot_every: 10_000,
            logs_to_keep: 1000,
        }
    }
}

impl RaftTiming {
    /// The openraft configuration.
    pub fn config(&self) -> anyhow::Result<Arc<openraft::Config>> {
        let config = openraft::Config {
            cluster_name: "rbolt-raft-node".into(),
            heartbeat_interval: self.heartbeat_ms,
            election_timeout_min: self.election_timeout_ms,
            election_timeout_max: self.election_timeout_ms * 2,
            // The timeout of each request of a snapshot transfer: a chunk, or the install (to
            // which the transfer adds time by the file's size); nothing bounds the whole.
            install_snapshot_timeout: 60_000,
            snapshot_policy: openraft::SnapshotPolicy::LogsSinceLast(self.snapshot_every),
            max_in_snapshot_log_to_keep: self.logs_to_keep,
            // A follower whose log went back (its data directory lost or replaced, the
            // documented recovery from a damaged log) is sent its entries again from the
            // start, rather than left unmatched for ever (openraft without this asserts, in
            // a debug build, that it never happens). That node withholds its vote until it
            // has them again (`Ctx::withhold_votes_until`).
            allow_log_reversion: Some(true),
            ..Default::default()
        };
        Ok(Arc::new(config.validate().context("Raft configuration")?))
    }
}

/// The shortest peer secret accepted: a guess must not be feasible.
pub const PEER_SECRET_BYTES_MIN: usize = 16;

/// Checks the options that do not need the directory.
fn check_options(options: &NodeOptions) -> anyhow::Result<()> {
    if !options.peers.is_empty() && !options.peers.contains_key(&options.id) {
        bail!(
            "--peers lists the initial members; it must include this node ({})",
            options.id
        );
    }
    if let Some(token) = &options.cluster_token {
        identity::check_cluster_token(token)?;
    }
    options.tls.check(options.access.peer_mtls)?;
    if options.access.peer_mtls {
        options.tls.check_peer_cert()?;
    }
    if let Some(secret) = &options.access.peer_secret
        && (secret.len() < PEER_SECRET_BYTES_MIN || !secret.bytes().all(|b| b.is_ascii_graphic()))
    {
        bail!(
            "the peer secret (--peer-secret-file) must be at least {PEER_SECRET_BYTES_MIN} \
             printable ASCII characters without spaces (e.g. `openssl rand -hex 32`)"
        );
    }
    if options.access.client_auth_reads
        && options.access.client_token.is_none()
        && !options.access.peer_mtls
    {
        bail!("--client-auth-reads needs --client-token-file or --peer-mtls (client certificates)");
    }
    let loopback = options.listen.ip().is_loopback();
    // A peer's word moves terms and writes the log: off loopback, peers prove who they are
    // whatever else is waived.
    if !loopback && !options.access.peers_authenticated() {
        bail!(
            "refusing to listen on {} without peer authentication: anyone who reaches it could \
             append to the log or depose the leader with a forged peer message; give every \
             node --peer-mtls (certificates with serverAuth and clientAuth) or the same \
             --peer-secret-file (--insecure does not waive this)",
            options.listen
        );
    }
    if !loopback && options.access.peer_secret.is_some() && !options.tls.enabled() {
        tracing::warn!(listen = %options.listen, "the peer secret travels in clear without TLS: anyone who can watch the network can act as a peer");
    }
    let protected = options.tls.enabled()
        && (options.access.client_token.is_some() || options.access.peer_mtls);
    if !loopback && !protected && !options.insecure {
        bail!(
            "refusing to listen on {} without TLS (--tls-cert, --tls-key) and client \
             authentication (--client-token-file or --peer-mtls): anyone who reaches it could \
             write to the store and join its Raft; give them, or --insecure on a network you trust",
            options.listen
        );
    }
    Ok(())
}

/// Decides the cluster the directory belongs to, recording it on a first start; warns when
/// `--peers` differs from the membership the directory was bootstrapped with. Also returns
/// the membership a bootstrap from this directory uses: the one recorded at its first start
/// when there is one (a node whose log is still empty, killed before the first entry reached
/// it, must not bootstrap a changed `--peers` into a cluster of its own), else `--peers`.
fn resolve_cluster(dir: &Path, options: &NodeOptions, fresh: bool) -> anyhow::Result<ClusterOf> {
    let token = options.cluster_token.as_deref();
    let given = peers_text(&options.peers);
    if let Some(recorded) = read_record(dir, CLUSTER_ID_FILE)? {
        if let Some(token) = token
            && token != recorded
        {
            bail!(
                "{} belongs to cluster {recorded:?}, not {token:?} (--initial-cluster-token): \
                 it is another cluster's data directory",
                dir.display()
            );
        }
        let initial = read_record(dir, INITIAL_PEERS_FILE)?.unwrap_or_default();
        if !options.peers.is_empty() && given != initial {
            tracing::warn!(
                given = %given,
                bootstrapped_with = %initial,
                cluster = %recorded,
                "--peers differs from the membership this directory was bootstrapped with; it is read only at bootstrap: kept are the cluster id and the membership in the log (change it with add-learner, change-members, remove-learner)"
            );
        }
        let bootstrap = if options.peers.is_empty() || initial.is_empty() {
            // No `--peers`: no bootstrap, as before. Recorded by an older version, without
            // the membership: the options', as then.
            options.peers.clone()
        } else {
            parse_peers(&initial).with_context(|| {
                format!(
                    "the membership recorded in {}",
                    dir.join(INITIAL_PEERS_FILE).display()
                )
            })?
        };
        return Ok((Some(recorded), bootstrap));
    }
    let bootstraps = options.initial_state == InitialState::New && !options.peers.is_empty();
    let cluster = match (bootstraps, token) {
        (true, _) => Some(cluster_id_for(token, &options.peers, "")),
        (false, Some(token)) => Some(token.to_owned()),
        (false, None) => None,
    };
    if !fresh {
        tracing::warn!(cluster = ?cluster, "no cluster id recorded in this directory (written by an older version): recording the one the options give");
    }
    if let Some(cluster) = &cluster {
        write_record(dir, CLUSTER_ID_FILE, cluster)?;
        if bootstraps {
            write_record(dir, INITIAL_PEERS_FILE, &given)?;
        }
    }
    Ok((cluster, options.peers.clone()))
}

/// The cluster a directory belongs to (if known) and the membership a bootstrap from it uses
/// (see `resolve_cluster`).
type ClusterOf = (Option<String>, BTreeMap<u64, String>);

/// The node's storage, checked: the directory's node id, that it was not removed, every log
/// entry's checksum, and its cluster.
fn open_storage(
    options: &NodeOptions,
) -> anyhow::Result<(rbolt_raft::LogStore<KvConfig>, KvStateMachine, ClusterOf)> {
    let dir = &options.data_dir;
    let fresh = !dir.join(NODE_ID_FILE).exists();
    let (log, state) = rbolt_raft::open::<KvConfig, _>(dir, KvMachine)?;
    check_node_id(dir, options.id)?;
    for partial in crate::snapshot_transfer::keep_partials(dir) {
        match partial {
            Partial::Kept { name, held, length } => {
                tracing::info!(%name, held, length, "a partial snapshot kept: its transfer resumes");
            }
            Partial::Deleted { name, why } => {
                tracing::warn!(%name, why, "a partial snapshot deleted");
            }
        }
    }
    if let Some(index) = read_record(dir, REMOVED_FILE)? {
        bail!(
            "node {} was removed from its cluster (membership change at index {index}, \
             recorded in {}); its data directory is no longer a member's: delete it, then add \
             the node again as a new learner",
            options.id,
            dir.join(REMOVED_FILE).display()
        );
    }
    let entries = log.verify().context(
        "the log is damaged: move this data directory aside and start the node on a new one; \
         it catches up from the leader",
    )?;
    tracing::debug!(entries, "log verified");
    let cluster = resolve_cluster(dir, options, fresh)?;
    Ok((log, state, cluster))
}

/// Runs node `options` until `shutdown` completes (or its storage fails: then an error), then
/// stops Raft and returns.
pub async fn run(
    options: NodeOptions,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> anyhow::Result<()> {
    check_options(&options)?;
    let config = options.raft.config()?;
    let opened = {
        let options = options.clone();
        tokio::task::spawn_blocking(move || open_storage(&options)).await?
    };
    let (log, state, (cluster, peers)) =
        opened.with_context(|| format!("opening {}", options.data_dir.display()))?;
    let NodeOptions {
        id,
        data_dir,
        listen,
        initial_state,
        ..
    } = options.clone();
    let (metrics, space) = observe_storage(&options, &log, &state).await?;
    let ctx = Arc::new(Ctx::new(
        id,
        data_dir.clone(),
        options.limits,
        cluster,
        metrics,
        Arc::clone(&space),
    ));
    let server_tls = options.tls.server(options.access.peer_mtls)?;
    let client_tls = options.tls.client(options.access.peer_mtls)?;
    if server_tls.is_some() && client_tls.is_none() {
        bail!("--tls-ca is needed with --tls-cert: nodes check each other's certificates with it");
    }
    let listener = tokio::net::TcpListener::bind(listen)
        .await
        .with_context(|| format!("listening on {listen}"))?;
    let metrics_listener = match options.listen_metrics {
        Some(address) => Some(
            tokio::net::TcpListener::bind(address)
                .await
                .with_context(|| format!("listening on {address} (--listen-metrics)"))?,
        ),
        None => None,
    };
    let local = (!listen.ip().is_unspecified()).then(|| listen.ip());
    let client = crate::http::client_with(local, client_tls);
    let reader = log.reader();
    let raft = Raft::new(
        id,
        config,
        Network::new(
            Arc::clone(&ctx),
            client.clone(),
            options.access.peer_secret.clone(),
        ),
        log,
        state.clone(),
    )
    .await
    .context("starting Raft")?;
    // Raft's metrics hold placeholders (no log, no leader, term 0) until its task has loaded
    // the log and published them; a `/status` served meanwhile tells a peer that asks
    // (`ask_peers`) that this node is new, and a peer restarted empty took that for a first
    // start and bootstrapped (CI, on a loaded machine). A question through the task's queue
    // returns after that first publication.
    raft.is_initialized().await.context("starting Raft")?;
    let _ = ctx.raft.set(raft.clone());
    let app = Arc::new(App::new(
        Arc::clone(&ctx),
        raft.clone(),
        state,
        reader,
        options.access.clone(),
        client,
    ));
    let failed = {
        let ctx = Arc::clone(&ctx);
        async move { ctx.failed.notified().await }
    };
    let stop = {
        let app = Arc::clone(&app);
        async move {
            tokio::select! {
                () = shutdown => stopping(&app).await,
                () = failed => {}
            }
        }
    };
    let mut serving = tokio::spawn(server::serve(listener, Arc::clone(&app), server_tls, stop));
    // The metrics listener serves as long as this function runs.
    let _metrics_serving = metrics_listener.map(|listener| {
        AbortOnDrop(tokio::spawn(server::serve_metrics(
            listener,
            Arc::clone(&app),
        )))
    });
    tokio::spawn(watch(raft.clone(), Arc::clone(&ctx)));
    tokio::spawn(crate::alarm::watch(Arc::clone(&app)));
    let log_serving = || {
        tracing::info!(
            id,
            %listen,
            data_dir = %data_dir.display(),
            cluster = %ctx.cluster(),
            tls = app.scheme == "https",
            "serving"
        );
    };
    if initial_state == InitialState::New && !peers.is_empty() {
        // A stop while it waits for its peers ends the wait.
        tokio::select! {
            bootstrapped = bootstrap_unless_running(&app, &peers) => {
                bootstrapped?;
                log_serving();
                serving.await?;
            }
            served = &mut serving => served?,
        }
    } else {
        log_serving();
        serving.await?;
    }
    drain(&app).await;
    // A store write waiting for space fails now, so that Raft can stop.
    space.stop();
    let _ = raft.shutdown().await;
    if let Some(crate::context::Stopped::StorageFailed(reason)) = ctx.stopped() {
        bail!("storage failed: {reason}");
    }
    tracing::info!(id, "stopped");
    Ok(())
}

/// A task that ends when this is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// The node's metrics and space, given to its stores as their observer (the space reserve
/// written first, if there is room for it), and the state machine's syncs.
async fn observe_storage(
    options: &NodeOptions,
    log: &rbolt_raft::LogStore<KvConfig>,
    state: &KvStateMachine,
) -> anyhow::Result<(Arc<Metrics>, Arc<Space>)> {
    let metrics = Arc::new(Metrics::new(&options.data_dir));
    let space = Arc::new(Space::new(
        &options.data_dir,
        options.quota_bytes,
        options.reserve_bytes,
        Arc::clone(&metrics),
    ));
    {
        let space = Arc::clone(&space);
        tokio::task::spawn_blocking(move || space.ensure_reserve()).await?;
    }
    let observer = Arc::new(StoreObserver {
        metrics: Arc::clone(&metrics),
        space: Arc::clone(&space),
    });
    log.set_observer(observer.clone());
    log.set_read_bytes_max(REPLICATION_BATCH_BYTES);
    state.set_observer(observer);
    state.set_sync_every(options.apply_sync_every);
    Ok((metrics, space))
}

/// How long a leader that is asked to stop waits for the voter it hands leadership to.
pub const HAND_OFF_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);
/// How long a stopping node waits for the requests in flight to be answered.
pub const DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(5);

/// The node is asked to stop: every answer closes its connection from now on, and a leader
/// hands leadership over while it still serves.
async fn stopping(app: &App) {
    app.stopping
        .store(true, std::sync::atomic::Ordering::Release);
    hand_off(&app.raft, app.id()).await;
}

/// A leader asked to stop (SIGTERM) hands leadership to the voter it has replicated the most
/// to, and waits (at most [`HAND_OFF_TIMEOUT`]) until that voter leads, still serving: writes
/// that reach it meanwhile are redirected to the new leader once there is one. Without this,
/// the cluster would wait an election timeout and an election for a new leader.
async fn hand_off(raft: &KvRaft, id: u64) {
    let m = raft.metrics().borrow_watched().clone();
    if m.current_leader != Some(id) {
        return;
    }
    let voters: Vec<u64> = m.membership_config.membership().voter_ids().collect();
    let successor = m.replication.as_ref().and_then(|matched| {
        matched
            .iter()
            .filter(|(node, _)| **node != id && voters.contains(node))
            .max_by_key(|(_, log_id)| log_id.as_ref().map(|l| l.index))
            .map(|(node, _)| *node)
    });
    let Some(to) = successor else { return };
    if raft.trigger().transfer_leader(to).await.is_err() {
        return;
    }
    let mut watch = raft.metrics();
    let moved = tokio::time::timeout(HAND_OFF_TIMEOUT, async {
        loop {
            let now = watch.borrow_watched().clone();
            if now.current_leader.is_some_and(|l| l != id) {
                return now.current_leader;
            }
            if watch.changed().await.is_err() {
                return None;
            }
        }
    })
    .await;
    match moved {
        Ok(Some(leader)) => tracing::info!(to = leader, "stopping: leadership handed over"),
        _ => tracing::warn!(
            to,
            "stopping: the leadership hand-over did not finish in time"
        ),
    }
}

/// Waits (at most [`DRAIN_TIMEOUT`]) until every request in flight has been answered; no new
/// connection is accepted by then.
async fn drain(app: &App) {
    let deadline = tokio::time::Instant::now() + DRAIN_TIMEOUT;
    while app.in_flight() > 0 && tokio::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    if app.in_flight() > 0 {
        tracing::warn!(
            in_flight = app.in_flight(),
            "stopping with requests still in flight"
        );
    }
}

/// How long a node with an empty log waits for each peer's status before it bootstraps.
pub const PEER_STATUS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// What the initial peers say of the cluster when this node's log is empty.
#[derive(Debug, PartialEq, Eq)]
enum PeersSay {
    /// The cluster has run: `peer` knows a leader, or holds entries past the initial
    /// membership. The node must not bootstrap; it withholds its vote until it holds
    /// `committed` (at least 1), the highest commit index the peers reported.
    Running {
        peer: u64,
        term: u64,
        committed: u64,
    },
    /// A majority of the initial members (this node counted) answered with an empty log and
    /// no leader: a first start, which this node may bootstrap.
    FirstStart,
    /// Too few answered to tell: wait and ask again.
    Unknown,
}

/// Asks each of `peers` of this node's cluster for its status (see [`PeersSay`]). A node
/// whose data was lost (a damaged log's directory moved aside) starts like a new one: if it
/// bootstrapped while the cluster it belonged to had run, or voted before it held what the
/// cluster had committed, it could elect a leader without an acknowledged write (issue 47,
/// item 6). Peers of another cluster (a foreign data directory, `--peers` reused) do not
/// count.
async fn ask_peers(app: &App, peers: &BTreeMap<u64, String>) -> PeersSay {
    let headers: Vec<(&str, String)> = app
        .access
        .client_token
        .iter()
        .map(|token| (crate::api::HEADER_AUTHORIZATION, format!("Bearer {token}")))
        .collect();
    let mut fresh = 1; // this node
    let mut running: Option<(u64, u64)> = None;
    let mut committed = 0;
    for (&peer, addr) in peers.iter().filter(|(id, _)| **id != app.id()) {
        let answer = crate::http::send_limited(
            &app.probe,
            addr,
            hyper::Method::GET,
            crate::api::PATH_STATUS,
            &headers,
            crate::http::full(Vec::new()),
            PEER_STATUS_TIMEOUT,
            crate::limits::SMALL_RPC_BYTES_MAX,
        )
        .await;
        let Some(status) = answer
            .ok()
            .filter(|a| a.status == hyper::StatusCode::OK)
            .and_then(|a| serde_json::from_slice::<crate::api::Status>(&a.body).ok())
            .filter(|status| status.cluster == app.ctx.cluster())
        else {
            continue;
        };
        let has_run = (status.leader.is_some() && status.term > 0)
            || status.last_log_index.is_some_and(|last| last >= 1);
        if has_run {
            running.get_or_insert((peer, status.term));
            committed = committed.max(status.committed.unwrap_or(0));
        } else {
            fresh += 1;
        }
    }
    match running {
        Some((peer, term)) => PeersSay::Running {
            peer,
            term,
            committed: committed.max(1),
        },
        None if fresh * 2 > peers.len() => PeersSay::FirstStart,
        None => PeersSay::Unknown,
    }
}

/// How often a node with an empty log asks its peers again while too few answer.
const ASK_PEERS_EVERY: std::time::Duration = std::time::Duration::from_millis(100);

/// Bootstraps the cluster with `peers` at its first start (see [`PeersSay`]): not when the
/// cluster has run, and not before a majority of its initial members answered.
async fn bootstrap_unless_running(app: &App, peers: &BTreeMap<u64, String>) -> anyhow::Result<()> {
    let mut waiting_logged = false;
    loop {
        if app.raft.is_initialized().await.unwrap_or(true) || app.ctx.stopped().is_some() {
            return Ok(());
        }
        match ask_peers(app, peers).await {
            PeersSay::Running {
                peer,
                term,
                committed,
            } => {
                app.ctx.withhold_votes_until(committed);
                tracing::warn!(
                    peer,
                    term,
                    committed,
                    "this node's log is empty and the cluster already runs (node {peer} is in \
                     term {term}): it does not bootstrap, it waits for the leader's entries, and \
                     withholds its vote until it holds index {committed}; if it was a member \
                     whose data was lost, remove it and add it back as a learner"
                );
                return Ok(());
            }
            PeersSay::FirstStart => return bootstrap(&app.raft, peers).await,
            PeersSay::Unknown => {
                if !waiting_logged {
                    waiting_logged = true;
                    tracing::info!(
                        "this node's log is empty: it bootstraps the cluster once a majority \
                         of the initial members answer that theirs are empty too"
                    );
                }
                tokio::time::sleep(ASK_PEERS_EVERY).await;
            }
        }
    }
}

/// Initializes the cluster with `peers` as its voters, unless this node's Raft already is
/// (from its log, or because another member's initialization reached it first).
async fn bootstrap(raft: &KvRaft, peers: &BTreeMap<u64, String>) -> anyhow::Result<()> {
    if raft.is_initialized().await? {
        return Ok(());
    }
    let members: BTreeMap<u64, BasicNode> = peers
        .iter()
        .map(|(id, addr)| (*id, BasicNode { addr: addr.clone() }))
        .collect();
    match raft.initialize(members).await {
        Ok(()) | Err(RaftError::APIError(InitializeError::NotAllowed(_))) => Ok(()),
        Err(e) => Err(e).context("initializing the cluster"),
    }
}

/// Logs one line per election, leader change and membership change, and stops the node when
/// Raft stops on a storage failure.
async fn watch(raft: KvRaft, ctx: Arc<Ctx>) {
    let mut rx = raft.metrics();
    let mut last: Option<RaftMetrics<KvConfig>> = None;
    let mut last_leader: Option<u64> = None;
    loop {
        let now = rx.borrow_watched().clone();
        report(&ctx, last.as_ref(), &now, &mut last_leader);
        // Ends a withheld vote once the entries are in (logged then, not at the next vote).
        ctx.votes_withheld(now.last_log_index);
        if let Err(fatal) = &now.running_state {
            // `Stopped` is a shutdown asked for (a signal, a removal); anything else is Raft
            // stopping on its storage.
            if !matches!(fatal, openraft::error::Fatal::Stopped) && ctx.stopped().is_none() {
                ctx.storage_failed(fatal.to_string());
            }
            return;
        }
        last = Some(now);
        if rx.changed().await.is_err() {
            return;
        }
    }
}

/// `last_leader`: the last leader this node knew, kept across calls.
fn report(
    ctx: &Ctx,
    last: Option<&RaftMetrics<KvConfig>>,
    now: &RaftMetrics<KvConfig>,
    last_leader: &mut Option<u64>,
) {
    let m = &ctx.metrics;
    let was = |f: fn(&RaftMetrics<KvConfig>) -> bool| last.is_some_and(f);
    if now.state == ServerState::Leader
        && last.is_none_or(|l| l.state != ServerState::Leader || l.current_term != now.current_term)
    {
        ctx.became_leader(now.current_term);
    }
    if now.state == ServerState::Candidate && !was(|l| l.state == ServerState::Candidate) {
        m.elections.inc();
        tracing::info!(term = now.current_term, "election started");
    }
    if last.is_none_or(|l| l.current_leader != now.current_leader) {
        // Once per leader seen, as etcd's `leader_changes_seen_total`: a failover is one
        // change (to the new leader), not two (to none, then to it), and a leader lost from
        // view and seen again (Raft's metrics can flip through none while the term stays; CI
        // counted three changes for two leaders) is none.
        if let Some(leader) = now.current_leader {
            if last.is_some() && *last_leader != Some(leader) {
                m.leader_changes.inc();
            }
            *last_leader = Some(leader);
        }
        match now.current_leader {
            Some(leader) => tracing::info!(leader, term = now.current_term, "leader changed"),
            None => tracing::info!(term = now.current_term, "no leader known"),
        }
    }
    let index =
        |m: &RaftMetrics<KvConfig>| m.membership_config.log_id().as_ref().map(|id| id.index);
    if last.is_none_or(|l| index(l) != index(now)) {
        if last.is_some() {
            m.membership_changes.inc();
        }
        let membership = now.membership_config.membership();
        let voters: Vec<u64> = membership.voter_ids().collect();
        let learners: Vec<u64> = membership.learner_ids().collect();
        tracing::info!(index = ?index(now), ?voters, ?learners, "membership");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A leader lost from view and seen again is no change; each new leader is one.
    #[test]
    fn leader_changes_count_new_leaders_not_flips_through_none() {
        let dir = tempfile::tempdir().expect("tempdir");
        let metrics = Arc::new(Metrics::new(dir.path()));
        let space = Arc::new(crate::space::Space::new(
            dir.path(),
            0,
            0,
            Arc::clone(&metrics),
        ));
        let limits = Limits::new(crate::limits::MAX_REQUEST_BYTES_DEFAULT).expect("limits");
        let ctx = Ctx::new(1, dir.path().to_path_buf(), limits, None, metrics, space);
        let mut last: Option<RaftMetrics<KvConfig>> = None;
        let mut last_leader = None;
        for (leader, term) in [
            (None, 0),
            (Some(2), 1),
            (None, 1),
            (Some(2), 1),
            (None, 2),
            (Some(1), 2),
            (Some(1), 2),
        ] {
            let mut now = RaftMetrics::<KvConfig>::new_initial(1);
            now.current_leader = leader;
            now.current_term = term;
            report(&ctx, last.as_ref(), &now, &mut last_leader);
            last = Some(now);
        }
        assert_eq!(ctx.metrics.leader_changes.get(), 2);
    }
}
