//! A fault-injecting TCP proxy between the nodes of a test cluster, with a rule for each
//! directed pair of nodes.
//!
//! Each node listens on its own loopback address (127.0.0.11, .12, .13), and its connections
//! to its peers leave from that address. Peers reach each other through a proxy in front of
//! each node (the addresses in `--peers`), which sees from the source address which node a
//! connection comes from. Clients (from 127.0.0.1) always get through untouched.
//!
//! The rule for `from → to` ([`Link`]) applies to the bytes `from` sends to `to`, on a
//! connection either one opened:
//! - `Drop`: nothing gets through. A connection `from` opens to `to` is refused, and an open
//!   one closed, when the rule is set; on a connection `to` opened to `from`, `from`'s bytes
//!   (its answers) are held until the rule lifts, as TCP retransmits what a one-way cut of
//!   the network lost once the cut heals: `to` waits for answers that come late, if at all.
//!   (Swallowing them for good instead, as a middlebox that forgets a connection would, can
//!   leave a leader waiting up to the whole snapshot install timeout, 60 s, for an answer
//!   that never comes: not a fault TCP between two live hosts shows.)
//! - `Delay(d)`: every chunk is delivered `d` after it was read (latency, not bandwidth).
//! - `Replay`: passes, and re-sends some whole HTTP requests (`from`'s RPCs to `to`) once
//!   more, later, on a new connection: stale and duplicate Raft messages. Duplicating bytes
//!   inside one TCP stream is not a fault TCP can show (it delivers each byte once, in order)
//!   and would only break the HTTP framing, so the duplicates are whole requests.
//!
//! Partitions are sets of rules: a node isolated (both directions of its links dropped), a
//! one-way cut, a bridge (two halves that only one node reaches).
//!
//! The links between clients and each node have rules too ([`Faults::set_client_link`]), for
//! clients that reach a node through its proxy (its address in `--peers`, where redirects
//! point): `Drop` on a client's bytes to the node cuts its connections (a request part way
//! through included) and refuses new ones; `Drop` on the node's bytes to its clients holds
//! its answers (a request that took effect, its answer lost to a client that gives up: an
//! ambiguous outcome); `Delay` delays either way. Clients' requests are never replayed (TCP
//! does not deliver a request twice).

use crate::cluster::{Cluster, Rng, TIMING_ARGS, free_port, lock};
use bytes::Bytes;
use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// The nodes the proxy knows: `1..=NODES`.
pub const NODES: u64 = 3;

/// What happens to the bytes one node sends another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Link {
    Pass,
    Drop,
    Delay(Duration),
    Replay,
}

/// The rules of every directed pair, `links[from - 1][to - 1]`.
pub type Links = [[Link; NODES as usize]; NODES as usize];

/// The loopback address node `id` listens on and connects from.
pub fn node_ip(id: u64) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(127, 0, 0, 10 + id as u8))
}

/// The node a connection comes from, by its source address (`None`: a client).
fn node_of(ip: IpAddr) -> Option<u64> {
    match ip {
        IpAddr::V4(v4)
            if v4.octets()[..3] == [127, 0, 0]
                && (11..=10 + NODES as u8).contains(&v4.octets()[3]) =>
        {
            Some(u64::from(v4.octets()[3] - 10))
        }
        _ => None,
    }
}

/// Every rule: between nodes, and between clients and each node (`clients[node - 1]`: the
/// clients' bytes to the node, then the node's bytes to its clients).
#[derive(Clone, Copy)]
pub struct Rules {
    nodes: Links,
    clients: [[Link; 2]; NODES as usize],
}

impl Rules {
    const PASS: Rules = Rules {
        nodes: [[Link::Pass; NODES as usize]; NODES as usize],
        clients: [[Link::Pass; 2]; NODES as usize],
    };
}

/// The rules, shared by the proxies: every change is broadcast, so that open connections a
/// new `Drop` cuts close.
pub struct Faults {
    links: watch::Sender<Rules>,
    rng: Mutex<Rng>,
    /// Requests re-sent by `Replay` rules, by path and the status of their answer.
    replayed: Mutex<BTreeMap<String, u64>>,
}

impl Faults {
    pub fn new(seed: u64) -> Arc<Faults> {
        Arc::new(Faults {
            links: watch::channel(Rules::PASS).0,
            rng: Mutex::new(Rng::new(seed)),
            replayed: Mutex::new(BTreeMap::new()),
        })
    }

    /// The rule for `from → to` (`None`: the clients).
    fn link(rules: &Rules, from: Option<u64>, to: Option<u64>) -> Link {
        match (from, to) {
            (Some(from), Some(to)) if from != to => rules.nodes[from as usize - 1][to as usize - 1],
            (None, Some(to)) => rules.clients[to as usize - 1][0],
            (Some(from), None) => rules.clients[from as usize - 1][1],
            _ => Link::Pass,
        }
    }

    /// Sets the rule for `from → to`.
    pub fn set_link(&self, from: u64, to: u64, link: Link) {
        self.links.send_modify(|rules| {
            rules.nodes[from as usize - 1][to as usize - 1] = link;
        });
    }

    /// Sets the rules between clients and node `node`: `up` for the clients' bytes to it,
    /// `down` for its answers (`Replay` passes: clients' requests are not replayed).
    pub fn set_client_link(&self, node: u64, up: Link, down: Link) {
        self.links.send_modify(|rules| {
            rules.clients[node as usize - 1] = [up, down];
        });
    }

    /// Every link passes, the clients' included.
    pub fn heal(&self) {
        self.links.send_replace(Rules::PASS);
    }

    /// Cuts node `id` off from every other, both ways (a minority of one; the rest a
    /// majority).
    pub fn isolate(&self, id: u64) {
        for other in (1..=NODES).filter(|&o| o != id) {
            self.set_link(id, other, Link::Drop);
            self.set_link(other, id, Link::Drop);
        }
    }

    /// Requests re-sent so far, by path and the status of their answer (`none`: no answer).
    pub fn replayed(&self) -> BTreeMap<String, u64> {
        lock(&self.replayed).clone()
    }

    fn chance(&self, num: u64, den: u64) -> bool {
        lock(&self.rng).below(den) < num
    }

    fn millis(&self, low: u64, high: u64) -> Duration {
        lock(&self.rng).millis(low, high)
    }
}

/// A cluster of [`NODES`] nodes, each behind a proxy that applies `faults`.
pub async fn cluster_behind_proxies(faults: &Arc<Faults>) -> Cluster {
    let mut nodes = Vec::new();
    for id in 1..=NODES {
        let listen = SocketAddr::new(node_ip(id), free_port());
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("proxy port");
        let public = listener.local_addr().expect("proxy address").to_string();
        tokio::spawn(proxy(listener, id, listen, Arc::clone(faults)));
        nodes.push((id, listen, public));
    }
    Cluster::with_addresses(nodes, TIMING_ARGS)
}

/// The proxy in front of node `to`.
async fn proxy(listener: TcpListener, to: u64, target: SocketAddr, faults: Arc<Faults>) {
    loop {
        let Ok((inbound, from)) = listener.accept().await else {
            continue;
        };
        let from = node_of(from.ip());
        if Faults::link(&faults.links.borrow(), from, Some(to)) == Link::Drop {
            drop(inbound);
            continue;
        }
        tokio::spawn(connection(inbound, from, to, target, Arc::clone(&faults)));
    }
}

/// Carries one connection `from` (a node or a client) opened to node `to`.
async fn connection(
    inbound: TcpStream,
    from: Option<u64>,
    to: u64,
    target: SocketAddr,
    faults: Arc<Faults>,
) {
    let Ok(outbound) = TcpStream::connect(target).await else {
        return;
    };
    let mut links = faults.links.subscribe();
    let cut = async {
        loop {
            if links.changed().await.is_err() {
                return std::future::pending::<()>().await;
            }
            if Faults::link(&links.borrow(), from, Some(to)) == Link::Drop {
                return;
            }
        }
    };
    let (in_read, in_write) = inbound.into_split();
    let (out_read, out_write) = outbound.into_split();
    // Only nodes' requests are replayed.
    let tap = from.map(|_| Tap::new(target));
    let up = pump(in_read, out_write, from, Some(to), tap, Arc::clone(&faults));
    let down = pump(
        out_read,
        in_write,
        Some(to),
        from,
        None,
        Arc::clone(&faults),
    );
    // Dropping both sockets closes the connection on both sides.
    tokio::select! {
        _ = async { tokio::join!(up, down) } => {}
        () = cut => {}
    }
}

/// Forwards the bytes `src` sends `dst` under their rule; `tap` sees requests to replay.
async fn pump(
    mut reader: tokio::net::tcp::OwnedReadHalf,
    mut writer: tokio::net::tcp::OwnedWriteHalf,
    src: Option<u64>,
    dst: Option<u64>,
    mut tap: Option<Tap>,
    faults: Arc<Faults>,
) {
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Bytes)>();
    let mut links = faults.links.subscribe();
    let read = async move {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            let n = match reader.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let chunk = Bytes::copy_from_slice(&buf[..n]);
            let link = Faults::link(&faults.links.borrow(), src, dst);
            if let Some(tap) = &mut tap {
                tap.feed(&chunk, link == Link::Replay, &faults);
            }
            let at = match link {
                Link::Delay(d) => Instant::now() + d,
                _ => Instant::now(),
            };
            if tx.send((at, chunk)).is_err() {
                break;
            }
        }
    };
    let write = async move {
        while let Some((at, chunk)) = rx.recv().await {
            tokio::time::sleep_until(at).await;
            // A dropped direction holds its bytes until the link heals.
            while Faults::link(&links.borrow_and_update(), src, dst) == Link::Drop {
                if links.changed().await.is_err() {
                    return;
                }
            }
            if writer.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = writer.shutdown().await;
    };
    tokio::join!(read, write);
}

/// Cuts the bytes of a connection into whole HTTP/1.1 requests (a head and a body of its
/// `Content-Length`), to re-send some. A request it cannot frame so (a chunked body: a
/// snapshot stream) ends its work on that connection.
struct Tap {
    target: SocketAddr,
    buf: Vec<u8>,
    broken: bool,
}

/// The largest request a tap keeps.
const TAP_BYTES_MAX: usize = 4 << 20;

impl Tap {
    fn new(target: SocketAddr) -> Tap {
        Tap {
            target,
            buf: Vec::new(),
            broken: false,
        }
    }

    fn feed(&mut self, chunk: &[u8], replay: bool, faults: &Arc<Faults>) {
        if self.broken {
            return;
        }
        self.buf.extend_from_slice(chunk);
        while let Some(len) = self.next_request_len() {
            let request: Vec<u8> = self.buf.drain(..len).collect();
            if replay && faults.chance(1, 3) {
                let delay = faults.millis(50, 1500);
                let (target, faults) = (self.target, Arc::clone(faults));
                tokio::spawn(async move {
                    tokio::time::sleep(delay).await;
                    let status = replay_request(target, &request).await;
                    let path = first_line_word(&request);
                    *lock(&faults.replayed)
                        .entry(format!("{path} {}", status.as_deref().unwrap_or("none")))
                        .or_default() += 1;
                });
            }
        }
        if self.buf.len() > TAP_BYTES_MAX {
            self.broken = true;
            self.buf = Vec::new();
        }
    }

    /// The length of the whole request at the start of the buffer, once it is all there.
    fn next_request_len(&mut self) -> Option<usize> {
        let head_end = self.buf.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
        let head = String::from_utf8_lossy(&self.buf[..head_end]).to_ascii_lowercase();
        let mut body = 0usize;
        for line in head.lines() {
            if line.starts_with("transfer-encoding:") {
                self.broken = true;
                self.buf = Vec::new();
                return None;
            }
            if let Some(len) = line.strip_prefix("content-length:") {
                body = len.trim().parse().unwrap_or(0);
            }
        }
        (self.buf.len() >= head_end + body).then_some(head_end + body)
    }
}

/// The second word of the first line of an HTTP message: a request's path, an answer's
/// status.
fn first_line_word(message: &[u8]) -> String {
    let line = message.split(|&b| b == b'\r').next().unwrap_or_default();
    String::from_utf8_lossy(line)
        .split(' ')
        .nth(1)
        .unwrap_or("?")
        .to_owned()
}

/// Sends `request` again on a new connection; returns the status of its answer.
async fn replay_request(target: SocketAddr, request: &[u8]) -> Option<String> {
    let Ok(mut stream) = TcpStream::connect(target).await else {
        return None;
    };
    if stream.write_all(request).await.is_err() {
        return None;
    }
    // Read until the answer's head is in.
    let read = async {
        let mut answer = Vec::new();
        let mut buf = vec![0u8; 16 * 1024];
        while !answer.windows(4).any(|w| w == b"\r\n\r\n") {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return None,
                Ok(n) => answer.extend_from_slice(&buf[..n]),
            }
        }
        Some(first_line_word(&answer))
    };
    tokio::time::timeout(Duration::from_secs(5), read)
        .await
        .ok()
        .flatten()
}

#[cfg(test)]
mod tests {
    use super::{Tap, first_line_word};

    #[test]
    fn the_tap_frames_pipelined_requests_and_gives_up_on_chunked_ones() {
        let target = "127.0.0.1:1".parse().expect("address");
        let mut tap = Tap::new(target);
        let one = b"POST /raft/append HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello";
        let two = b"POST /raft/vote HTTP/1.1\r\ncontent-length: 0\r\n\r\n";
        let mut stream = one.to_vec();
        stream.extend_from_slice(two);
        // Fed in pieces that cut through heads and bodies.
        tap.buf.extend_from_slice(&stream[..20]);
        assert_eq!(tap.next_request_len(), None);
        tap.buf.extend_from_slice(&stream[20..one.len() - 2]);
        assert_eq!(tap.next_request_len(), None);
        tap.buf.extend_from_slice(&stream[one.len() - 2..]);
        assert_eq!(tap.next_request_len(), Some(one.len()));
        let first: Vec<u8> = tap.buf.drain(..one.len()).collect();
        assert_eq!(first_line_word(&first), "/raft/append");
        assert_eq!(tap.next_request_len(), Some(two.len()));
        tap.buf.drain(..two.len());
        tap.buf.extend_from_slice(
            b"POST /raft/snapshot HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n",
        );
        assert_eq!(tap.next_request_len(), None);
        assert!(tap.broken);
        assert_eq!(first_line_word(b"HTTP/1.1 200 OK\r\n"), "200");
    }
}
