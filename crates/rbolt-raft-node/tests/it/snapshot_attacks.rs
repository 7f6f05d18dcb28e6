//! Attacks on the partial snapshot a follower keeps across a restart (issue 47's resumable
//! transfer): the follower is SIGKILLed part way through a transfer and, before its restart,
//! its partial copy is cut short, garbled in place, grown past the snapshot's length, or
//! joined by a stale partial of another snapshot; while it receives, a chunk of garbage is
//! forged at the offset it holds. Each time the follower must end with exactly the others'
//! data (nothing acknowledged lost), having resumed from what it held where that is sound and
//! refused by the digest what is not. And a resume onto a full disk (node 3's directory a
//! tmpfs of its own, filled while it is down; root only, as `space`): node 3 stays up, and
//! once the disk has room the transfer goes on from what it held.

use crate::cluster::{Cluster, Ledger, Load, PATIENCE, check_data};
use crate::snapshot_transfer::{
    CHUNK_BYTES, VALUE_BYTES, counter, kill_node_3_mid_transfer, lagging_node_3, partial_of,
    resumes,
};
use hyper::Method;
use rbolt_raft_node::api::{HEADER_CLUSTER, HEADER_FROM, HEADER_SNAPSHOT_CHUNK};
use std::collections::BTreeSet;
use std::path::Path;
use std::time::Duration;
use tokio::time::Instant;

/// Node 3's failpoints while it is to be killed part way: slow chunks.
const SLOW: &str = "snapshot::chunk-slow=sleep(100)";

/// What is done to node 3's partial copy between its kill and its restart.
#[derive(Clone, Copy, Debug)]
enum Attack {
    /// Cut to half of what it held, with a stale partial of another snapshot beside it.
    Truncate,
    /// Bytes flipped at its start (the file's header) and in its middle, its length kept.
    Garble,
    /// Grown past the snapshot's length with garbage.
    Overlong,
    /// Nothing on disk; a chunk of garbage forged at the offset it holds once it restarted.
    ForgedChunk,
}

/// Flips the bytes of `path` at `at` (16 of them).
fn flip(path: &Path, at: u64) {
    use std::os::unix::fs::FileExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open(path)
        .expect("open the partial");
    let mut bytes = [0u8; 16];
    file.read_exact_at(&mut bytes, at).expect("read");
    for b in &mut bytes {
        *b ^= 0x5a;
    }
    file.write_all_at(&bytes, at).expect("write");
}

/// Applies `attack` to node 3's partial `name` of `held` bytes (node 3 is down); returns the
/// offset the transfer must resume from (`None`: it must start over).
fn attack_on_disk(cluster: &Cluster, attack: Attack, name: &str, held: u64) -> Option<u64> {
    let dir = &cluster.nodes[&3].dir;
    let path = dir.join(name);
    match attack {
        Attack::Truncate => {
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .expect("open");
            file.set_len(held / 2).expect("truncate");
            let stale = format!("received-{}-{}.partial", "ab".repeat(16), 1 << 20);
            std::fs::write(dir.join(stale), b"stale").expect("stale partial");
            Some(held / 2)
        }
        Attack::Garble => {
            flip(&path, 0);
            flip(&path, held / 2);
            Some(held)
        }
        Attack::Overlong => {
            let length: u64 = name
                .rsplit('-')
                .next()
                .and_then(|l| l.split('.').next())
                .and_then(|l| l.parse().ok())
                .expect("the length in the name");
            let file = std::fs::OpenOptions::new()
                .write(true)
                .open(&path)
                .expect("open");
            file.set_len(length + 4096).expect("grow");
            None
        }
        Attack::ForgedChunk => Some(held),
    }
}

/// Sends node 3 a chunk of garbage at the offset it will hold once the leader's chunk under
/// way lands, at most 50 tries; returns whether one was appended.
///
/// Node 3 receives one chunk at a time (a fair lock, held through the slow chunk's sleep),
/// and the leader sends its next chunk only when the last one is answered. So while a
/// leader's chunk at `held` (what the partial holds on disk) sleeps in node 3, a chunk sent to
/// `held + CHUNK_BYTES` queues before the leader's next and lands. (Asking node 3 what it holds
/// first and then sending there raced the leader's next chunk, and lost 50 times on a loaded
/// machine.) A try between two of the leader's chunks misses and changes nothing.
async fn forge_chunk(cluster: &Cluster, name: &str) -> bool {
    let status = cluster.status(3).await.expect("node 3 answers");
    let rest = name
        .strip_prefix("received-")
        .and_then(|r| r.strip_suffix(".partial"))
        .expect("a partial's name");
    let (digest, length) = rest.split_once('-').expect("digest-length");
    let length: u64 = length.parse().expect("length");
    let chunk_bytes: u64 = CHUNK_BYTES.parse().expect("chunk bytes");
    let send = |offset: u64, body: Vec<u8>| {
        let chunk = format!(r#"{{"length":{length},"digest":"{digest}","offset":{offset}}}"#);
        let headers = [
            (HEADER_CLUSTER, status.cluster.clone()),
            (HEADER_FROM, "1".to_owned()),
            (HEADER_SNAPSHOT_CHUNK, chunk),
        ];
        let addr = cluster.addr(3);
        async move {
            let path = rbolt_raft_node::api::PATH_SNAPSHOT_CHUNK;
            let (_, body) = crate::cluster::raw(&addr, Method::POST, path, &headers, body).await;
            serde_json::from_str::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v["held"].as_u64())
        }
    };
    for tried in 1..=50 {
        let Some((partial, held)) = partial_of(cluster, 3) else {
            return false;
        };
        let next = held + chunk_bytes;
        if partial != name || next >= length {
            return false;
        }
        let garbage = vec![0xeeu8; 4096.min((length - next) as usize)];
        let after = next + garbage.len() as u64;
        if send(next, garbage).await == Some(after) {
            eprintln!("snapshot attacks: a forged chunk appended at {next} (try {tried})");
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    false
}

/// Makes node 3 (running, caught up) lag behind a purged log again: killed while the others
/// take `keys` more writes, which `ledger` records.
async fn lag_again(cluster: &mut Cluster, ledger: &mut Ledger, keys: usize, prefix: &str) {
    let last = cluster.status(3).await.and_then(|s| s.last_log_index);
    cluster.kill(3);
    let load = Load::start(
        vec![cluster.addr(1), cluster.addr(2)],
        8,
        prefix,
        VALUE_BYTES,
    );
    let deadline = Instant::now() + PATIENCE;
    // Until the leader's log is purged past node 3's, so that node 3 needs a snapshot.
    loop {
        let purged = cluster.leader().await.and_then(|s| s.purged);
        if load.acked() >= keys && purged > last {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "{} acked, purged {purged:?}, node 3 at {last:?}",
            load.acked()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let more = load.stop().await;
    ledger.sent.extend(more.sent);
    ledger.acked.extend(more.acked);
    ledger.unknown += more.unknown;
}

/// One attack: node 3 killed part way through a transfer, `attack` applied, node 3 restarted
/// without slow chunks; checks the outcome.
async fn one_attack(cluster: &mut Cluster, ledger: &Ledger, attack: Attack) {
    let (name, held) = kill_node_3_mid_transfer(cluster, 4 * 65536).await;
    let expected = attack_on_disk(cluster, attack, &name, held);
    let leader = cluster.leader().await.expect("a leader").id;
    let resumes_before = resumes(&cluster.log_text(leader)).len();
    let mut forged = false;
    if matches!(attack, Attack::ForgedChunk) {
        // Slow chunks again, so that the forged one meets a transfer under way.
        cluster.start(3);
        cluster.wait_until_up(3).await;
        while partial_of(cluster, 3).is_none_or(|(_, h)| h <= held) {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        let (name, _) = partial_of(cluster, 3).expect("the partial");
        forged = forge_chunk(cluster, &name).await;
        eprintln!("snapshot attacks: the forged chunk landed: {forged}");
    } else {
        cluster.env.remove(&3);
        cluster.start(3);
    }
    let data = cluster.wait_converged().await;
    let lost = check_data(&data, ledger, &BTreeSet::new());
    let all_resumes = resumes(&cluster.log_text(leader));
    let new = &all_resumes[resumes_before.min(all_resumes.len())..];
    let received = counter(cluster, 3, "snapshot_bytes_received").await;
    let log = cluster.log_text(3);
    eprintln!(
        "snapshot attacks: {attack:?} on {name} ({held} bytes held): resumes {new:?}, node 3 \
         received {received} bytes, {} writes acknowledged, {lost} lost",
        ledger.acked.len()
    );
    assert_eq!(lost, 0, "{attack:?}: acknowledged writes lost");
    assert!(
        partial_of(cluster, 3).is_none(),
        "{attack:?}: a partial left"
    );
    let length = name
        .rsplit('-')
        .next()
        .and_then(|l| l.split('.').next())
        .and_then(|l| l.parse::<u64>().ok())
        .expect("length");
    match (attack, expected) {
        (Attack::Garble, Some(at)) => {
            assert_eq!(new.first(), Some(&(at, length)), "{attack:?}: resumed");
            assert!(
                log.contains("damaged on its way"),
                "{attack:?}: the digest refused nothing"
            );
            assert_eq!(received, 2 * length - at, "{attack:?}: the rest, then all");
        }
        (Attack::ForgedChunk, _) => {
            assert!(
                forged,
                "{attack:?}: no forged chunk was appended in 50 tries"
            );
            assert!(
                log.contains("damaged on its way"),
                "{attack:?}: the forged chunk landed and the digest refused nothing"
            );
        }
        (_, Some(at)) => {
            assert_eq!(new.first(), Some(&(at, length)), "{attack:?}: resumed");
            assert_eq!(received, length - at, "{attack:?}: only the rest");
        }
        (_, None) => {
            assert!(
                new.iter().all(|(h, _)| *h == 0) && received == length,
                "{attack:?}: started over: {new:?}, {received} of {length}"
            );
            assert!(
                log.contains("a partial snapshot deleted"),
                "{attack:?}: kept at start"
            );
        }
    }
}

/// Each attack in turn on one cluster (node 3 made to lag again before each).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_partial_snapshot_cut_garbled_grown_or_forged_never_installs_wrong_data() {
    let _serial = crate::cluster::SERIAL.lock().await;
    let started = Instant::now();
    let (mut cluster, mut ledger, _) = lagging_node_3(SLOW).await;
    let attacks = [
        Attack::Truncate,
        Attack::Garble,
        Attack::Overlong,
        Attack::ForgedChunk,
    ];
    for (round, attack) in attacks.into_iter().enumerate() {
        if round > 0 {
            lag_again(&mut cluster, &mut ledger, 600, &format!("a{round}-")).await;
            cluster
                .env
                .insert(3, vec![("FAILPOINTS".to_owned(), SLOW.to_owned())]);
        }
        one_attack(&mut cluster, &ledger, attack).await;
    }
    eprintln!("snapshot attacks: {:.1?}", started.elapsed());
}

/// Fills the filesystem of `dir` with a file `name` until a write fails; returns its path.
fn fill_disk(dir: &Path, name: &str) -> std::path::PathBuf {
    use std::io::Write;
    let path = dir.join(name);
    let mut file = std::fs::File::create(&path).expect("filler");
    let block = vec![0x55u8; 64 << 10];
    while file.write_all(&block).is_ok() {}
    let _ = file.sync_all();
    path
}

/// Node 3, killed part way through a transfer, comes back on a full disk: its chunks fail
/// (it answers 500, the leader retries) and it stays up; once the filler is deleted the
/// transfer goes on from at least what it held at the kill (not from 0), and node 3 ends with
/// exactly the others' data, no acknowledged write lost.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_onto_a_full_disk_waits_for_room_and_goes_on() {
    let _serial = crate::cluster::SERIAL.lock().await;
    let started = Instant::now();
    let mut args = crate::cluster::TIMING_ARGS.to_vec();
    args.extend([
        "--snapshot-chunk-bytes",
        crate::snapshot_transfer::CHUNK_BYTES,
        "--space-reserve-bytes",
        "1048576",
    ]);
    let mut cluster = Cluster::new(3, &args);
    let disk = match crate::space::Tmpfs::mount(&cluster.nodes[&3].dir, 48 << 20) {
        Ok(disk) => disk,
        Err(e) => {
            assert!(
                !crate::space::is_root(),
                "root could not mount a tmpfs: {e}"
            );
            eprintln!("snapshot attacks: NOT RUN: a full disk needs root to mount a tmpfs");
            return;
        }
    };
    cluster
        .env
        .insert(3, vec![("FAILPOINTS".to_owned(), SLOW.to_owned())]);
    for id in cluster.ids() {
        cluster.start(id);
    }
    cluster.wait_for_leader(&cluster.ids(), 0).await;
    let mut ledger = Ledger::default();
    lag_again(&mut cluster, &mut ledger, 2000, "f").await;
    let (name, held) = kill_node_3_mid_transfer(&mut cluster, 4 * 65536).await;
    let filler = fill_disk(&cluster.nodes[&3].dir, "filler");
    let leader = cluster.leader().await.expect("a leader").id;
    let resumes_before = resumes(&cluster.log_text(leader)).len();
    cluster.env.remove(&3);
    cluster.start(3);
    // Chunks find no room for a while; node 3 must stay up.
    tokio::time::sleep(Duration::from_secs(3)).await;
    cluster.check_alive();
    let during = partial_of(&cluster, 3).map_or(0, |(_, h)| h);
    std::fs::remove_file(&filler).expect("free the disk");
    let data = cluster.wait_converged().await;
    let lost = check_data(&data, &ledger, &BTreeSet::new());
    let all = resumes(&cluster.log_text(leader));
    let new = &all[resumes_before.min(all.len())..];
    let received = counter(&cluster, 3, "snapshot_bytes_received").await;
    eprintln!(
        "snapshot attacks: full disk: {name} held {held} at the kill, {during} while the disk \
         was full; resumes {new:?}; node 3 received {received} bytes; {} acknowledged, {lost} \
         lost; {:.1?}",
        ledger.acked.len(),
        started.elapsed()
    );
    assert_eq!(lost, 0, "acknowledged writes lost");
    assert!(
        new.first().is_some_and(|(at, _)| *at >= held),
        "the transfer did not resume from what node 3 held: {new:?}"
    );
    let length = new.first().map_or(0, |(_, l)| *l);
    assert_eq!(
        received,
        length - held,
        "node 3 received only what it lacked"
    );
    assert!(partial_of(&cluster, 3).is_none(), "a partial left");
    // Clear whatever alarm the full disk raised, for the nodes' sake (not checked here).
    let _ = cluster
        .client(PATIENCE)
        .disarm_alarms(&cluster.addr(1))
        .await;
    for id in cluster.ids() {
        cluster.kill(id);
    }
    drop(disk);
}
