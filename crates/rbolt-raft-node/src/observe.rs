//! What a node tells its operator: log lines through `tracing` (one per leader change,
//! election, membership change, snapshot and error), and [`Metrics`] in Prometheus' text
//! format for `GET /metrics`.

use prometheus_client::encoding::text::encode;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};
use std::time::{Duration, Instant};
use tracing::Metadata;
use tracing::callsite::Identifier;
use tracing_subscriber::filter::{LevelFilter, Targets, dynamic_filter_fn};
use tracing_subscriber::layer::{Filter, Layer, SubscriberExt};
use tracing_subscriber::util::SubscriberInitExt;

/// How often one kind of repeated warning (a peer that is down, a foreign node knocking) is
/// logged, at most.
pub const WARN_EVERY: Duration = Duration::from_secs(10);

/// How log lines are written (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line of text per event, for a terminal.
    #[default]
    Text,
    /// One JSON object per line (`timestamp`, `level`, `fields` with `message`, `target`),
    /// for a log collector.
    Json,
}

/// Installs the log subscriber: lines on stderr, in `format`, at `level` and above for this
/// node, and for openraft at `warn` and above unless `level` is `debug` or `trace` (openraft's
/// `info` is a line per RPC). Below `debug`, each of openraft's log lines is written at most
/// once every [`WARN_EVERY`] (per place in its code): it warns again on every retry to a peer
/// that is down, a few dozen lines a second.
pub fn init_logging(level: LevelFilter, format: LogFormat) {
    let debugging = level >= LevelFilter::DEBUG;
    let openraft = if debugging {
        level
    } else {
        level.min(LevelFilter::WARN)
    };
    let filter = Targets::new()
        .with_target("openraft", openraft)
        .with_default(level);
    let limited = (!debugging).then(openraft_repeats_limited);
    let lines = tracing_subscriber::fmt::layer().with_writer(std::io::stderr);
    // A second call (tests that start nodes in one process) keeps the first subscriber.
    let _ = match format {
        LogFormat::Text => tracing_subscriber::registry()
            .with(lines.with_filter(limited))
            .with(filter)
            .try_init(),
        LogFormat::Json => tracing_subscriber::registry()
            .with(lines.json().with_filter(limited))
            .with(filter)
            .try_init(),
    };
}

/// A filter that passes each of openraft's events at most once every [`WARN_EVERY`] per call
/// site, and every other event.
fn openraft_repeats_limited<S>() -> impl Filter<S> {
    let last: Mutex<HashMap<Identifier, Instant>> = Mutex::new(HashMap::new());
    dynamic_filter_fn(move |meta: &Metadata<'_>, _| {
        if !meta.is_event() || !meta.target().starts_with("openraft") {
            return true;
        }
        let mut last = last.lock().unwrap_or_else(PoisonError::into_inner);
        let now = Instant::now();
        match last.get(&meta.callsite()) {
            Some(at) if now.duration_since(*at) < WARN_EVERY => false,
            _ => {
                last.insert(meta.callsite(), now);
                true
            }
        }
    })
}

/// Labels of [`Metrics::refused`]: why a client request was refused before it was proposed.
pub type ReasonLabel = Vec<(&'static str, &'static str)>;

/// Every metric a node exports.
pub struct Metrics {
    registry: Registry,
    dir: PathBuf,
    /// 1 while this node knows a leader.
    pub has_leader: Gauge,
    /// 1 while this node is the leader.
    pub is_leader: Gauge,
    /// The current term.
    pub term: Gauge,
    /// The last applied log index.
    pub applied_index: Gauge,
    /// The last committed log index this node knows.
    pub committed_index: Gauge,
    /// Times this node saw a leader other than the one it knew (none included): once per
    /// leader seen, not also when it loses sight of one.
    pub leader_changes: Counter,
    /// Elections this node started.
    pub elections: Counter,
    /// Membership changes seen.
    pub membership_changes: Counter,
    /// Client writes proposed that did not commit (not leader, leader lost, refused entry).
    pub proposals_failed: Counter,
    /// Client requests refused before anything was proposed, by reason.
    pub requests_refused: Family<ReasonLabel, Counter>,
    /// Peer RPCs refused (wrong cluster, removed member, malformed frame), by reason.
    pub peer_rpcs_refused: Family<ReasonLabel, Counter>,
    /// Entries the state machine refused (see `Machine::refused`).
    pub entries_refused: Counter,
    /// Snapshots built and installed.
    pub snapshots: Family<ReasonLabel, Counter>,
    /// Bytes of snapshot chunks this node appended to the snapshots it receives (a transfer
    /// resumed from a partial copy kept across a restart adds only what it lacked).
    pub snapshot_bytes_received: Counter,
    /// Seconds from proposing a client write to its acknowledgement (committed and applied).
    pub commit_seconds: Histogram,
    /// Seconds an apply batch took, its durable commit included.
    pub apply_seconds: Histogram,
    /// Seconds a durable commit of the log took (two `fdatasync`s).
    pub fsync_seconds: Histogram,
    /// 1 once the node's storage failed (the process exits).
    pub storage_failed: Gauge,
    /// 1 while a store write waits for space (the disk is full).
    pub storage_full: Gauge,
    /// Store writes that failed for want of space (each retried).
    pub no_space_errors: Counter,
    /// 1 while a NOSPACE alarm is raised (puts are refused cluster-wide).
    pub alarm_active: Gauge,
    /// `--quota-backend-bytes` (0: none).
    pub quota_backend_bytes: Gauge,
    /// The bytes the pages in use of the state file take.
    pub store_in_use_bytes: Gauge,
    /// Bytes free on the disk of the data directory.
    pub disk_free_bytes: Gauge,
}

fn latency_histogram() -> Histogram {
    // 100 µs to about 3 s.
    Histogram::new(exponential_buckets(0.0001, 2.0, 16))
}

impl Metrics {
    /// The metrics of the node whose data directory is `dir` (its file sizes are read when
    /// the metrics are).
    pub fn new(dir: &Path) -> Metrics {
        let mut registry = Registry::with_prefix("rbolt_raft");
        let metrics = Metrics {
            registry: Registry::default(),
            dir: dir.to_path_buf(),
            has_leader: Gauge::default(),
            is_leader: Gauge::default(),
            term: Gauge::default(),
            applied_index: Gauge::default(),
            committed_index: Gauge::default(),
            leader_changes: Counter::default(),
            elections: Counter::default(),
            membership_changes: Counter::default(),
            proposals_failed: Counter::default(),
            requests_refused: Family::default(),
            peer_rpcs_refused: Family::default(),
            entries_refused: Counter::default(),
            snapshots: Family::default(),
            snapshot_bytes_received: Counter::default(),
            commit_seconds: latency_histogram(),
            apply_seconds: latency_histogram(),
            fsync_seconds: latency_histogram(),
            storage_failed: Gauge::default(),
            storage_full: Gauge::default(),
            no_space_errors: Counter::default(),
            alarm_active: Gauge::default(),
            quota_backend_bytes: Gauge::default(),
            store_in_use_bytes: Gauge::default(),
            disk_free_bytes: Gauge::default(),
        };
        let r = &mut registry;
        r.register(
            "has_leader",
            "1 while this node knows a leader",
            metrics.has_leader.clone(),
        );
        r.register(
            "is_leader",
            "1 while this node leads",
            metrics.is_leader.clone(),
        );
        r.register("term", "The current term", metrics.term.clone());
        r.register(
            "applied_index",
            "The last applied log index",
            metrics.applied_index.clone(),
        );
        r.register(
            "committed_index",
            "The last committed log index this node knows",
            metrics.committed_index.clone(),
        );
        r.register(
            "leader_changes",
            "Times this node saw a new leader",
            metrics.leader_changes.clone(),
        );
        r.register(
            "elections",
            "Elections this node started",
            metrics.elections.clone(),
        );
        r.register(
            "membership_changes",
            "Membership changes seen",
            metrics.membership_changes.clone(),
        );
        r.register(
            "proposals_failed",
            "Client writes proposed that did not commit",
            metrics.proposals_failed.clone(),
        );
        r.register(
            "requests_refused",
            "Client requests refused before proposing, by reason",
            metrics.requests_refused.clone(),
        );
        r.register(
            "peer_rpcs_refused",
            "Peer RPCs refused, by reason",
            metrics.peer_rpcs_refused.clone(),
        );
        r.register(
            "entries_refused",
            "Committed entries the state machine refused",
            metrics.entries_refused.clone(),
        );
        r.register(
            "snapshots",
            "Snapshots built and installed",
            metrics.snapshots.clone(),
        );
        r.register(
            "snapshot_bytes_received",
            "Bytes of snapshot chunks this node received and kept",
            metrics.snapshot_bytes_received.clone(),
        );
        r.register(
            "commit_seconds",
            "Seconds from proposing a client write to its acknowledgement",
            metrics.commit_seconds.clone(),
        );
        r.register(
            "apply_seconds",
            "Seconds an apply batch took, its durable commit included",
            metrics.apply_seconds.clone(),
        );
        r.register(
            "fsync_seconds",
            "Seconds a durable commit of the log took",
            metrics.fsync_seconds.clone(),
        );
        r.register(
            "storage_failed",
            "1 once the node's storage failed",
            metrics.storage_failed.clone(),
        );
        r.register(
            "storage_full",
            "1 while a store write waits for space",
            metrics.storage_full.clone(),
        );
        r.register(
            "no_space_errors",
            "Store writes that failed for want of space (each retried)",
            metrics.no_space_errors.clone(),
        );
        r.register(
            "alarm_nospace",
            "1 while a NOSPACE alarm is raised: puts are refused cluster-wide",
            metrics.alarm_active.clone(),
        );
        r.register(
            "quota_backend_bytes",
            "The store's quota in bytes (0: none)",
            metrics.quota_backend_bytes.clone(),
        );
        r.register(
            "store_in_use_bytes",
            "Bytes the pages in use of the state file take",
            metrics.store_in_use_bytes.clone(),
        );
        r.register(
            "disk_free_bytes",
            "Bytes free on the disk of the data directory",
            metrics.disk_free_bytes.clone(),
        );
        Metrics {
            registry,
            ..metrics
        }
    }

    /// The metrics as Prometheus text, with the data files' sizes read now.
    pub fn render(&self) -> String {
        let mut text = String::new();
        if encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        // File sizes are read at scrape time; `encode` ends with "# EOF", so they go before.
        let eof = text.rfind("# EOF").unwrap_or(text.len());
        let mut sizes = String::from(
            "# HELP rbolt_raft_db_size_bytes Size of the node's data files.\n\
             # TYPE rbolt_raft_db_size_bytes gauge\n",
        );
        for file in [
            rbolt_raft::LOG_FILE,
            rbolt_raft::STATE_FILE,
            rbolt_raft::SNAPSHOT_FILE,
        ] {
            let bytes = std::fs::metadata(self.dir.join(file)).map_or(0, |m| m.len());
            sizes.push_str(&format!(
                "rbolt_raft_db_size_bytes{{file=\"{file}\"}} {bytes}\n"
            ));
        }
        text.insert_str(eof, &sizes);
        text
    }

    /// Counts a client request refused for `reason`.
    pub fn refused(&self, reason: &'static str) {
        self.requests_refused
            .get_or_create(&vec![("reason", reason)])
            .inc();
    }

    /// Counts a peer RPC refused for `reason`.
    pub fn peer_refused(&self, reason: &'static str) {
        self.peer_rpcs_refused
            .get_or_create(&vec![("reason", reason)])
            .inc();
    }
}
