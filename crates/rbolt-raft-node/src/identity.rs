//! Who a data directory belongs to: its node id, its cluster, the membership it was
//! bootstrapped with, and whether it was removed from that cluster; and what a peer address
//! must look like.
//!
//! Each fact is a small file in the data directory, written once by temporary file, sync,
//! rename and directory sync, so a crash leaves no file or a whole one.

use anyhow::{Context, bail};
use std::collections::BTreeMap;
use std::fs::{self, File};
use std::io::Write;
use std::path::Path;

/// The file that records a directory's node id, so that a directory is never served under
/// another id.
pub const NODE_ID_FILE: &str = "node-id";
/// The file that records the cluster a directory belongs to (see [`cluster_id_for`]).
pub const CLUSTER_ID_FILE: &str = "cluster-id";
/// The file that records the `--peers` a directory was bootstrapped with.
pub const INITIAL_PEERS_FILE: &str = "initial-peers";
/// The file that records that the node was removed from its cluster, and at which index.
pub const REMOVED_FILE: &str = "removed";
/// Cluster ids are at most this many bytes.
pub const CLUSTER_ID_BYTES_MAX: usize = 128;

/// Writes `text` to `dir/name` durably (temporary file, sync, rename, directory sync).
pub fn write_record(dir: &Path, name: &str, text: &str) -> anyhow::Result<()> {
    let path = dir.join(name);
    let tmp = dir.join(format!("{name}{}", rbolt_raft::TMP_SUFFIX));
    let mut file = File::create(&tmp).with_context(|| tmp.display().to_string())?;
    writeln!(file, "{text}")?;
    file.sync_all()?;
    drop(file);
    fs::rename(&tmp, &path).with_context(|| path.display().to_string())?;
    File::open(dir)?.sync_all()?;
    Ok(())
}

/// The text of `dir/name` without its line end, if the file exists.
pub fn read_record(dir: &Path, name: &str) -> anyhow::Result<Option<String>> {
    let path = dir.join(name);
    match fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text.trim_end_matches('\n').to_owned())),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| path.display().to_string()),
    }
}

/// Records `id` in `dir` on first start, and refuses a directory recorded under another id.
pub fn check_node_id(dir: &Path, id: u64) -> anyhow::Result<()> {
    match read_record(dir, NODE_ID_FILE)? {
        Some(found) => {
            let found: u64 = found.trim().parse().with_context(|| {
                format!(
                    "{} does not hold a node id",
                    dir.join(NODE_ID_FILE).display()
                )
            })?;
            if found != id {
                bail!("{} belongs to node {found}, not node {id}", dir.display());
            }
            Ok(())
        }
        None => write_record(dir, NODE_ID_FILE, &id.to_string()),
    }
}

/// Checks a cluster token given on the command line: 1 to [`CLUSTER_ID_BYTES_MAX`] bytes of
/// letters, digits, `-`, `_` and `.`, so it travels in a header and a file as it is.
pub fn check_cluster_token(token: &str) -> anyhow::Result<()> {
    let fine = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    if token.is_empty() || token.len() > CLUSTER_ID_BYTES_MAX || !token.chars().all(fine) {
        bail!(
            "cluster token {token:?}: 1 to {CLUSTER_ID_BYTES_MAX} letters, digits, '-', '_' or '.'"
        );
    }
    Ok(())
}

/// The `--peers` text in one canonical form (`ID=HOST:PORT` by id, commas), as recorded.
pub fn peers_text(peers: &BTreeMap<u64, String>) -> String {
    peers
        .iter()
        .map(|(id, addr)| format!("{id}={addr}"))
        .collect::<Vec<_>>()
        .join(",")
}

/// The cluster id of a cluster bootstrapped with `peers`: `token` when one is given, else one
/// derived from the initial membership (FNV-1a of its canonical text), which every initial
/// member computes alike without talking to the others. `salt` distinguishes a cluster
/// restored from a backup from one bootstrapped on the same addresses.
pub fn cluster_id_for(token: Option<&str>, peers: &BTreeMap<u64, String>, salt: &str) -> String {
    if let Some(token) = token {
        return token.to_owned();
    }
    let mut hash: u64 = 0xcbf2_9ce4_8422_2325;
    for byte in peers_text(peers).bytes().chain(salt.bytes()) {
        hash ^= u64::from(byte);
        hash = hash.wrapping_mul(0x0100_0000_01b3);
    }
    format!("peers-{hash:016x}")
}

/// Checks a peer address: `HOST:PORT`, the host a DNS name, an IPv4 address or a bracketed
/// IPv6 address, the port 1 to 65535. Addresses travel in membership entries, redirects and
/// URLs, so nothing else gets in.
pub fn check_addr(addr: &str) -> anyhow::Result<()> {
    let bad = |why: &str| anyhow::anyhow!("address {addr:?} is not HOST:PORT: {why}");
    let Some((host, port)) = addr.rsplit_once(':') else {
        return Err(bad("no port"));
    };
    let digits = !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit());
    if !digits || !port.parse::<u16>().is_ok_and(|port| port > 0) {
        return Err(bad("the port must be a number from 1 to 65535"));
    }
    if let Some(v6) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        v6.parse::<std::net::Ipv6Addr>()
            .map_err(|_| bad("not an IPv6 address in brackets"))?;
        return Ok(());
    }
    let label_ok = |label: &str| {
        !label.is_empty()
            && label.len() <= 63
            && label.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !label.starts_with('-')
            && !label.ends_with('-')
    };
    if host.is_empty() || host.len() > 253 || !host.split('.').all(label_ok) {
        return Err(bad("the host must be a DNS name or an IP address"));
    }
    Ok(())
}

/// Parses `--peers`: `ID=HOST:PORT` pairs separated by commas.
pub fn parse_peers(text: &str) -> anyhow::Result<BTreeMap<u64, String>> {
    let mut peers = BTreeMap::new();
    for pair in text.split(',').filter(|p| !p.trim().is_empty()) {
        let Some((id, addr)) = pair.split_once('=') else {
            bail!("peer {pair:?} is not ID=HOST:PORT");
        };
        let id: u64 = id
            .trim()
            .parse()
            .with_context(|| format!("peer id {id:?}"))?;
        let addr = addr.trim();
        check_addr(addr).with_context(|| format!("peer {id}"))?;
        if peers.insert(id, addr.to_owned()).is_some() {
            bail!("peer {id} is listed twice");
        }
    }
    Ok(peers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn peers_parse_and_bad_ones_are_refused() {
        let peers =
            parse_peers("1=127.0.0.1:7001, 2=127.0.0.1:7002,3=h:1,4=[::1]:9").expect("parses");
        assert_eq!(peers.len(), 4);
        assert_eq!(peers[&2], "127.0.0.1:7002");
        for bad in [
            "1",
            "x=a:1",
            "1=",
            "1=a:1,1=b:2",
            "1=http://a:1",
            "1=127.0.0.1",
            "1=host",
            "1=host:",
            "1=host:0",
            "1=host:65536",
            "1=:80",
            "1=ho st:80",
            "1=::1:80",
            "1=[zz]:80",
            "1=-a:1",
            "1=h:+80",
        ] {
            assert!(parse_peers(bad).is_err(), "{bad} is refused");
        }
    }

    #[test]
    fn a_directory_keeps_its_node_id() {
        let dir = tempfile::tempdir().expect("tempdir");
        check_node_id(dir.path(), 7).expect("first");
        check_node_id(dir.path(), 7).expect("same id");
        let error = check_node_id(dir.path(), 8).expect_err("another id");
        assert!(error.to_string().contains("belongs to node 7"), "{error}");
    }

    #[test]
    fn cluster_ids_are_the_token_or_follow_the_initial_members() {
        let a = parse_peers("1=h:1,2=h:2").expect("a");
        let b = parse_peers("2=h:2,1=h:1").expect("b");
        let c = parse_peers("1=h:1,2=h:3").expect("c");
        assert_eq!(cluster_id_for(None, &a, ""), cluster_id_for(None, &b, ""));
        assert_ne!(cluster_id_for(None, &a, ""), cluster_id_for(None, &c, ""));
        assert_ne!(cluster_id_for(None, &a, ""), cluster_id_for(None, &a, "x"));
        assert_eq!(cluster_id_for(Some("prod"), &a, ""), "prod");
        check_cluster_token("prod-east_1.a").expect("a good token");
        for bad in ["", "a b", "a/b", &"x".repeat(129)] {
            assert!(check_cluster_token(bad).is_err(), "{bad:?}");
        }
    }
}
