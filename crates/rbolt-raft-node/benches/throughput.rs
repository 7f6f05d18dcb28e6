//! Durable write throughput of a three-node cluster beside a single rbolt `Db`, on the same
//! machine, measured in interleaved repeats (medians printed, ratios from the same run), for
//! each number of concurrent writers asked for; optionally beside another build of the node
//! (an older one, with another peer transport) in the same repeats.
//!
//! ```text
//! cargo bench -p rbolt-raft-node --bench throughput
//! ```
//!
//! Each repeat runs, for the same time and with the same number of concurrent writers of
//! distinct 16-byte keys and 100-byte values:
//! - **cluster**: three `rbolt-raft-node` processes on loopback; each writer sends `PUT`s to the
//!   leader over HTTP and waits for each acknowledgement (committed on two of three nodes and
//!   applied on the leader, every append durable with two `fdatasync`s; apply batches are
//!   synced once every `--apply-sync-every` entries);
//! - **Db::update**: one rbolt file, each writer a thread committing one key per transaction;
//! - **Db::batch**: the same through `Db::batch`, which coalesces concurrent writers into one
//!   commit, as openraft coalesces concurrent proposals into one append.
//!
//! The cluster's log counters tell how many entries each append carried, hence the
//! `fdatasync`s per entry (two per append and two per apply batch, on the leader and on each
//! follower). Each acknowledged write's latency is recorded: the medians of the runs' p50 and
//! p99 are printed. Environment: `RBOLT_RAFT_BENCH_SECONDS` (default 5),
//! `RBOLT_RAFT_BENCH_REPEATS` (3), `RBOLT_RAFT_BENCH_WRITERS` (`1,16,64`: the writer counts,
//! each measured in its own interleaved repeats), `RBOLT_RAFT_BENCH_COMPARE_EXE` (a node binary
//! to measure beside this build's; it is started with the same options, so it must take them)
//! and `RBOLT_RAFT_BENCH_COMPARE_ARGS` (more `serve` options for it, split at spaces: this
//! build with `--apply-sync-every 1` is the node with every apply batch durable).

use rbolt_raft_node::api::Status;
use rbolt_raft_node::client::Client;
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

const NODE_EXE: &str = env!("CARGO_BIN_EXE_rbolt-raft-node");
const VALUE_BYTES: usize = 100;

fn env_or(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

fn key(writer: u64, n: u64) -> String {
    format!("w{writer:03}-{n:011}")
}

fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// What one cluster run measured.
struct ClusterRun {
    writes_per_sec: f64,
    /// Acknowledgement latency percentiles, in milliseconds.
    p50_ms: f64,
    p99_ms: f64,
    /// Writes that failed (not acknowledged).
    failed: u64,
    /// On the leader, during the run.
    entries_per_append: f64,
    entries_per_apply: f64,
}

fn run_cluster(exe: &str, extra: &[String], seconds: u64, writers: u64) -> ClusterRun {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let addrs: Vec<String> = (0..3)
        .map(|_| format!("127.0.0.1:{}", free_port()))
        .collect();
    let peers = addrs
        .iter()
        .enumerate()
        .map(|(i, a)| format!("{}={a}", i + 1))
        .collect::<Vec<_>>()
        .join(",");
    let mut children: Vec<Child> = addrs
        .iter()
        .enumerate()
        .map(|(i, addr)| {
            Command::new(exe)
                .args(["serve", "--id", &(i + 1).to_string(), "--listen", addr])
                .args(["--peers", &peers, "--data-dir"])
                .arg(root.path().join(format!("node-{}", i + 1)))
                .args(extra)
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn()
                .expect("node starts")
        })
        .collect();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let run = runtime.block_on(async {
        let client = Client::new().with_timeout(Duration::from_secs(30));
        let quick = client.with_timeout(Duration::from_secs(1)).retrying(false);
        let deadline = Instant::now() + Duration::from_secs(60);
        let leader = loop {
            assert!(
                Instant::now() < deadline,
                "no leader among {addrs:?} within 60 s (does {exe} take these options?)"
            );
            let mut found = None;
            for addr in &addrs {
                if let Ok(status) = quick.status(addr).await
                    && status.state == "Leader"
                {
                    found = Some((addr.clone(), status));
                }
            }
            if let Some(found) = found {
                break found;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        };
        let (leader_addr, before) = leader;
        let stop = Arc::new(AtomicBool::new(false));
        let acked = Arc::new(AtomicU64::new(0));
        let value = "v".repeat(VALUE_BYTES);
        let tasks: Vec<_> = (0..writers)
            .map(|w| {
                let (client, addr, stop, acked, value) = (
                    client.clone(),
                    leader_addr.clone(),
                    Arc::clone(&stop),
                    Arc::clone(&acked),
                    value.clone(),
                );
                tokio::spawn(async move {
                    let mut n = 0;
                    let mut latencies = Vec::new();
                    let mut failed = 0u64;
                    while !stop.load(Ordering::Relaxed) {
                        let sent = Instant::now();
                        // A loaded machine can starve the followers past an election timeout
                        // (the leader then refuses writes, naming its lost quorum): counted,
                        // not fatal.
                        if client.put(&addr, &key(w, n), &value).await.is_err() {
                            failed += 1;
                            n += 1;
                            continue;
                        }
                        latencies.push(sent.elapsed());
                        acked.fetch_add(1, Ordering::Relaxed);
                        n += 1;
                    }
                    (latencies, failed)
                })
            })
            .collect();
        let started = Instant::now();
        tokio::time::sleep(Duration::from_secs(seconds)).await;
        let done = acked.load(Ordering::Relaxed);
        let elapsed = started.elapsed();
        let after: Status = quick.status(&leader_addr).await.expect("leader status");
        stop.store(true, Ordering::Relaxed);
        let (mut latencies, mut failed) = (Vec::new(), 0);
        for task in tasks {
            let (each, each_failed) = task.await.expect("writer");
            latencies.extend(each);
            failed += each_failed;
        }
        latencies.sort();
        let at = |q: f64| {
            let i = ((latencies.len() as f64 * q) as usize).min(latencies.len().saturating_sub(1));
            latencies.get(i).map_or(0.0, |d| d.as_secs_f64() * 1000.0)
        };
        let appends = (after.log_appends - before.log_appends).max(1);
        let entries = after.log_entries_appended - before.log_entries_appended;
        let applies = (after.apply_commits - before.apply_commits).max(1);
        let applied = after.entries_applied - before.entries_applied;
        ClusterRun {
            writes_per_sec: done as f64 / elapsed.as_secs_f64(),
            p50_ms: at(0.50),
            p99_ms: at(0.99),
            failed,
            entries_per_append: entries as f64 / appends as f64,
            entries_per_apply: applied as f64 / applies as f64,
        }
    });
    for child in &mut children {
        let _ = child.kill();
        let _ = child.wait();
    }
    run
}

fn run_db(seconds: u64, writers: u64, batch: bool) -> f64 {
    let root = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("tempdir");
    let db = Arc::new(rbolt::Db::open(root.path().join("bench.db")).expect("open"));
    db.update(|tx| {
        tx.create_bucket(b"kv")?;
        Ok::<_, rbolt::Error>(())
    })
    .expect("bucket");
    let stop = Arc::new(AtomicBool::new(false));
    let done = Arc::new(AtomicU64::new(0));
    let value = vec![b'v'; VALUE_BYTES];
    let threads: Vec<_> = (0..writers)
        .map(|w| {
            let (db, stop, done, value) = (
                Arc::clone(&db),
                Arc::clone(&stop),
                Arc::clone(&done),
                value.clone(),
            );
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop.load(Ordering::Relaxed) {
                    let (k, value) = (key(w, n), value.clone());
                    let put = move |tx: &mut rbolt::WriteTx<'_>| {
                        tx.bucket_mut(b"kv")?
                            .expect("bucket")
                            .put(k.as_bytes(), &value)?;
                        Ok::<_, rbolt::Error>(())
                    };
                    if batch {
                        db.batch(put).expect("batch");
                    } else {
                        db.update(put).expect("update");
                    }
                    done.fetch_add(1, Ordering::Relaxed);
                    n += 1;
                }
            })
        })
        .collect();
    let started = Instant::now();
    std::thread::sleep(Duration::from_secs(seconds));
    let writes = done.load(Ordering::Relaxed);
    let elapsed = started.elapsed();
    stop.store(true, Ordering::Relaxed);
    for thread in threads {
        thread.join().expect("writer");
    }
    writes as f64 / elapsed.as_secs_f64()
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

/// Medians of one writer count's repeats.
fn measure(seconds: u64, repeats: u64, writers: u64, compare: Option<&(String, Vec<String>)>) {
    let (mut cluster, mut other, mut update, mut batch) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let (mut per_append, mut per_apply) = (Vec::new(), Vec::new());
    let (mut vs_update, mut vs_batch) = (Vec::new(), Vec::new());
    let (mut p50, mut p99, mut other_p50, mut other_p99) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for repeat in 0..repeats {
        let run = run_cluster(NODE_EXE, &[], seconds, writers);
        let compared = compare.map(|(exe, args)| run_cluster(exe, args, seconds, writers));
        let u = run_db(seconds, writers, false);
        let b = run_db(seconds, writers, true);
        eprintln!(
            "{writers} writers, repeat {repeat}: cluster {:.0} writes/s ({} failed; {:.1} \
             entries per append, {:.1} per apply batch), compared build {}, Db::update \
             {u:.0}/s, Db::batch {b:.0}/s",
            run.writes_per_sec,
            run.failed,
            run.entries_per_append,
            run.entries_per_apply,
            compared.as_ref().map_or_else(
                || "-".to_owned(),
                |c| format!("{:.0}/s ({} failed)", c.writes_per_sec, c.failed)
            )
        );
        p50.push(run.p50_ms);
        p99.push(run.p99_ms);
        if let Some(c) = &compared {
            other_p50.push(c.p50_ms);
            other_p99.push(c.p99_ms);
        }
        vs_update.push(run.writes_per_sec / u);
        vs_batch.push(run.writes_per_sec / b);
        cluster.push(run.writes_per_sec);
        other.extend(compared.map(|c| c.writes_per_sec));
        per_append.push(run.entries_per_append);
        per_apply.push(run.entries_per_apply);
        update.push(u);
        batch.push(b);
    }
    let per_append = median(&mut per_append);
    let per_apply = median(&mut per_apply);
    let compared = if other.is_empty() {
        String::new()
    } else {
        format!(
            ", compared build {:.0} writes/s (p50 {:.1} ms, p99 {:.1} ms)",
            median(&mut other),
            median(&mut other_p50),
            median(&mut other_p99)
        )
    };
    println!(
        "raft throughput: {writers} writers, {seconds} s x {repeats} interleaved repeats, \
         medians: 3-node cluster {:.0} writes/s (p50 {:.1} ms, p99 {:.1} ms){compared}, \
         single Db::update {:.0}/s, single \
         Db::batch {:.0}/s; cluster/update {:.2}x, cluster/batch {:.2}x; leader: \
         {per_append:.1} entries per log append ({:.2} fdatasyncs per entry), {per_apply:.1} \
         per apply batch (two fdatasyncs each with --apply-sync-every 1; by default two per \
         thousand entries)",
        median(&mut cluster),
        median(&mut p50),
        median(&mut p99),
        median(&mut update),
        median(&mut batch),
        median(&mut vs_update),
        median(&mut vs_batch),
        2.0 / per_append
    );
}

fn main() {
    let seconds = env_or("RBOLT_RAFT_BENCH_SECONDS", 5);
    let repeats = env_or("RBOLT_RAFT_BENCH_REPEATS", 3).max(1);
    let writers: Vec<u64> = std::env::var("RBOLT_RAFT_BENCH_WRITERS")
        .unwrap_or_else(|_| "1,16,64".to_owned())
        .split(',')
        .filter_map(|w| w.trim().parse().ok())
        .map(|w: u64| w.max(1))
        .collect();
    let compare = std::env::var("RBOLT_RAFT_BENCH_COMPARE_EXE")
        .ok()
        .map(|exe| {
            let args = std::env::var("RBOLT_RAFT_BENCH_COMPARE_ARGS").unwrap_or_default();
            (exe, args.split_whitespace().map(str::to_owned).collect())
        });
    for writers in writers {
        measure(seconds, repeats, writers, compare.as_ref());
    }
}
