//! A client of the node's HTTP API, for the command line and the tests: writes and reads
//! follow the `307` redirects a follower answers with to the leader.

use crate::api::{
    AddLearner, Alarms, ChangeMembers, ErrorReply, HEADER_AUTHORIZATION, HEADER_OUTCOME,
    HEADER_REQUEST_ID, Health, LeaderReply, Members, MembershipReply, OUTCOME_UNKNOWN, PATH_ALARMS,
    PATH_ALARMS_DISARM, PATH_BACKUP, PATH_HEALTH, PATH_KV, PATH_LEADER, PATH_LEARNERS,
    PATH_MEMBERS, PATH_STATUS, PATH_VACUUM, Status, TransferLeader, VacuumReply, WriteReply,
};
use crate::http::{self, Answer, HttpClient, SendError};
use bytes::Bytes;
use hyper::{Method, StatusCode};
use percent_encoding::{AsciiSet, NON_ALPHANUMERIC, utf8_percent_encode};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::collections::BTreeMap;
use std::time::Duration;

/// Redirects followed for one request, at most (a leader change during a request can add one
/// or two; more means the nodes disagree about who leads).
pub const REDIRECTS_MAX: usize = 5;

/// How long one request may take by default, redirects and retries included.
pub const TIMEOUT_DEFAULT: Duration = Duration::from_secs(10);

/// The pause before trying again while no leader can be reached.
pub const RETRY_PAUSE: Duration = Duration::from_millis(100);

/// Characters of a key sent as they are in a URL path; everything else is percent-encoded.
const KEY_ENCODE: &AsciiSet = &NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'~');

/// What went wrong with a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ClientError {
    /// No answer.
    #[error(transparent)]
    Send(#[from] SendError),
    /// An answer other than success.
    #[error("{addr} answered {status}: {message}")]
    Status {
        /// The node that answered.
        addr: String,
        /// Its status.
        status: StatusCode,
        /// Its error message.
        message: String,
    },
    /// A redirect without a usable `Location`.
    #[error("redirect from {addr}: {reason}")]
    Redirect {
        /// The node that redirected.
        addr: String,
        /// What was wrong with it.
        reason: String,
    },
    /// More than [`REDIRECTS_MAX`] redirects in a row: the nodes disagree about who leads. A
    /// retrying client waits such a disagreement out (as while leadership moves: a redirect
    /// means no node took the request) and returns this only when its time runs out.
    #[error(
        "redirect from {addr}: more than {REDIRECTS_MAX} redirects in a row (the nodes \
         disagree about who leads)"
    )]
    RedirectLoop {
        /// The node that redirected last.
        addr: String,
    },
    /// A body that is not what the API promises.
    #[error("unexpected answer from {addr}: {reason}")]
    Decode {
        /// The node that answered.
        addr: String,
        /// What was wrong.
        reason: String,
    },
}

impl ClientError {
    /// Whether the node answered that the write was refused or failed before it could be
    /// acknowledged (not that it timed out with an unknown outcome).
    pub fn status(&self) -> Option<StatusCode> {
        match self {
            ClientError::Status { status, .. } => Some(*status),
            _ => None,
        }
    }
}

/// A client of any node.
#[derive(Clone)]
pub struct Client {
    http: HttpClient,
    timeout: Duration,
    follow: bool,
    retry: bool,
    token: Option<String>,
    request_ids: bool,
}

impl Default for Client {
    fn default() -> Self {
        Client::new()
    }
}

/// The path of `key` under `/kv`.
pub fn key_path(key: &str) -> String {
    format!("{PATH_KV}/{}", utf8_percent_encode(key, KEY_ENCODE))
}

/// Splits `http://host:port/path?query` (or `https://`) into the address and the path with
/// its query.
fn split_location(location: &str) -> Option<(String, String)> {
    let rest = location
        .strip_prefix("http://")
        .or_else(|| location.strip_prefix("https://"))?;
    let slash = rest.find('/')?;
    Some((rest[..slash].to_owned(), rest[slash..].to_owned()))
}

impl Client {
    /// A client that follows redirects and allows [`TIMEOUT_DEFAULT`] per request.
    pub fn new() -> Client {
        Client {
            http: http::client(None),
            timeout: TIMEOUT_DEFAULT,
            follow: true,
            retry: true,
            token: None,
            request_ids: false,
        }
    }

    /// This client over TLS with `config` (the nodes' `https` URLs), or plain TCP with `None`.
    pub fn with_tls(&self, config: Option<rustls::ClientConfig>) -> Client {
        Client {
            http: http::client_with(None, config),
            ..self.clone()
        }
    }

    /// This client, sending `token` as the bearer token of every request (writes need it on
    /// a node started with `--client-token-file`).
    pub fn with_token(&self, token: Option<String>) -> Client {
        Client {
            token,
            ..self.clone()
        }
    }

    /// This client with another timeout per request.
    pub fn with_timeout(&self, timeout: Duration) -> Client {
        Client {
            timeout,
            ..self.clone()
        }
    }

    /// This client, following redirects or not (a test that must know which node
    /// acknowledged a write follows none).
    pub fn following_redirects(&self, follow: bool) -> Client {
        Client {
            follow,
            ..self.clone()
        }
    }

    /// This client, retrying while no leader can be reached or not (see [`Client::request`]).
    pub fn retrying(&self, retry: bool) -> Client {
        Client {
            retry,
            ..self.clone()
        }
    }

    /// This client, sending every put and delete under a new request id
    /// ([`crate::api::HEADER_REQUEST_ID`]) or not. With ids, a write whose outcome is unknown
    /// (a `503` with `x-rbolt-outcome: unknown`) is sent again under its id while this client
    /// retries: the cluster applies it at most once, and a resend of one that took effect is
    /// answered with [`WriteReply::duplicate_of`].
    pub fn with_request_ids(&self, request_ids: bool) -> Client {
        Client {
            request_ids,
            ..self.clone()
        }
    }

    /// Sends a request to `addr`, following redirects if this client does; returns the
    /// address that answered and its answer.
    ///
    /// While no leader can be reached (a redirect to a node that refuses connections, or a
    /// `503` during an election) it tries again from `addr` every [`RETRY_PAUSE`] until the
    /// timeout. What it retries never took effect: a refused connection carried no request,
    /// and a `503` refused the request before anything was proposed. A `503` to a write that
    /// was proposed and may still commit ([`HEADER_OUTCOME`] `unknown`: the leader changed or
    /// lost its quorum) is returned as it is: sent again, the write could take effect twice,
    /// around another client's write of the same key.
    pub async fn request(
        &self,
        addr: &str,
        method: Method,
        path_and_query: &str,
        body: Bytes,
    ) -> Result<(String, Answer), ClientError> {
        self.request_with_id(addr, method, path_and_query, body, None)
            .await
    }

    /// [`Client::request`] of a write under request id `id`, if any: then a `503` whose
    /// outcome is unknown is retried too (under the same id, it takes effect at most once).
    async fn request_with_id(
        &self,
        addr: &str,
        method: Method,
        path_and_query: &str,
        body: Bytes,
        id: Option<&str>,
    ) -> Result<(String, Answer), ClientError> {
        let deadline = tokio::time::Instant::now() + self.timeout;
        loop {
            let attempt = self
                .request_once(
                    addr,
                    method.clone(),
                    path_and_query,
                    body.clone(),
                    deadline,
                    id,
                )
                .await;
            let retry = match &attempt {
                // Nothing was taken: unreachable, or passed on between nodes whose views of
                // the leader differ for a moment (a leader handing over, a follower that has
                // not yet heard of the new one).
                Err(
                    ClientError::Send(SendError::Unreachable { .. })
                    | ClientError::RedirectLoop { .. },
                ) => true,
                Ok((_, answer)) => {
                    answer.status == StatusCode::SERVICE_UNAVAILABLE
                        && (id.is_some()
                            || answer
                                .headers
                                .get(HEADER_OUTCOME)
                                .is_none_or(|v| v.as_bytes() != OUTCOME_UNKNOWN.as_bytes()))
                }
                Err(_) => false,
            };
            if !retry || !self.retry || tokio::time::Instant::now() + RETRY_PAUSE >= deadline {
                return attempt;
            }
            tokio::time::sleep(RETRY_PAUSE).await;
        }
    }

    async fn request_once(
        &self,
        addr: &str,
        method: Method,
        path_and_query: &str,
        body: Bytes,
        deadline: tokio::time::Instant,
        id: Option<&str>,
    ) -> Result<(String, Answer), ClientError> {
        let mut addr = addr.to_owned();
        let mut path_and_query = path_and_query.to_owned();
        let mut headers: Vec<(&str, String)> = self
            .token
            .iter()
            .map(|token| (HEADER_AUTHORIZATION, format!("Bearer {token}")))
            .collect();
        headers.extend(id.map(|id| (HEADER_REQUEST_ID, id.to_owned())));
        for _ in 0..=REDIRECTS_MAX {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let answer = http::send(
                &self.http,
                &addr,
                method.clone(),
                &path_and_query,
                &headers,
                http::full(body.clone()),
                left,
            )
            .await?;
            if answer.status != StatusCode::TEMPORARY_REDIRECT || !self.follow {
                return Ok((addr, answer));
            }
            let location = answer.location.as_deref().unwrap_or("");
            let Some((next, next_path)) = split_location(location) else {
                return Err(ClientError::Redirect {
                    addr,
                    reason: format!("unusable Location {location:?}"),
                });
            };
            addr = next;
            path_and_query = next_path;
        }
        Err(ClientError::RedirectLoop { addr })
    }

    /// A request whose success is a JSON body of `T`.
    async fn call<T: DeserializeOwned>(
        &self,
        addr: &str,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<T, ClientError> {
        let (addr, answer) = self.request(addr, method, path, body).await?;
        decoded(addr, &answer)
    }

    /// A put or delete: under a new request id if this client sends them.
    async fn write(
        &self,
        addr: &str,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<WriteReply, ClientError> {
        let id = self.request_ids.then(new_request_id);
        let (addr, answer) = self
            .request_with_id(addr, method, path, body, id.as_deref())
            .await?;
        decoded(addr, &answer)
    }

    async fn post<Q: Serialize, T: DeserializeOwned>(
        &self,
        addr: &str,
        path: &str,
        message: &Q,
    ) -> Result<T, ClientError> {
        let body = serde_json::to_vec(message).map_err(|e| ClientError::Decode {
            addr: addr.to_owned(),
            reason: e.to_string(),
        })?;
        self.call(addr, Method::POST, path, body.into()).await
    }

    /// Sets `key` to `value` through the leader; `Ok` means committed and applied.
    pub async fn put(&self, addr: &str, key: &str, value: &str) -> Result<WriteReply, ClientError> {
        let body = Bytes::copy_from_slice(value.as_bytes());
        self.write(addr, Method::PUT, &key_path(key), body).await
    }

    /// Deletes `key` through the leader; `Ok` means committed and applied.
    pub async fn delete(&self, addr: &str, key: &str) -> Result<WriteReply, ClientError> {
        self.write(addr, Method::DELETE, &key_path(key), Bytes::new())
            .await
    }

    /// The value of `key`: linearizable through the leader, or `local` to `addr`'s state.
    pub async fn get(
        &self,
        addr: &str,
        key: &str,
        local: bool,
    ) -> Result<Option<String>, ClientError> {
        let mut path = key_path(key);
        if local {
            path.push_str("?read=local");
        }
        let (addr, answer) = self.request(addr, Method::GET, &path, Bytes::new()).await?;
        match answer.status {
            StatusCode::OK => String::from_utf8(answer.body.to_vec())
                .map(Some)
                .map_err(|e| ClientError::Decode {
                    addr,
                    reason: e.to_string(),
                }),
            StatusCode::NOT_FOUND => Ok(None),
            _ => Err(status_error(addr, &answer)),
        }
    }

    /// Every key and value: linearizable through the leader, or `local` to `addr`'s state.
    pub async fn dump(
        &self,
        addr: &str,
        local: bool,
    ) -> Result<BTreeMap<String, String>, ClientError> {
        let path = if local {
            format!("{PATH_KV}?read=local")
        } else {
            PATH_KV.to_owned()
        };
        self.call(addr, Method::GET, &path, Bytes::new()).await
    }

    /// `addr`'s own [`Status`] (never redirected).
    pub async fn status(&self, addr: &str) -> Result<Status, ClientError> {
        self.call(addr, Method::GET, PATH_STATUS, Bytes::new())
            .await
    }

    /// Adds node `id` at `learner_addr` as a learner; returns once it has caught up. A node
    /// that does not answer is refused unless `force` (then the answer notes it is "not
    /// reachable yet").
    pub async fn add_learner(
        &self,
        addr: &str,
        id: u64,
        learner_addr: &str,
        force: bool,
    ) -> Result<MembershipReply, ClientError> {
        let learner = AddLearner {
            id,
            addr: learner_addr.to_owned(),
            force,
        };
        let body = serde_json::to_vec(&learner).map_err(|e| ClientError::Decode {
            addr: addr.to_owned(),
            reason: e.to_string(),
        })?;
        let (addr, answer) = self
            .request(addr, Method::POST, PATH_LEARNERS, body.into())
            .await?;
        if answer.status != StatusCode::OK && answer.status != StatusCode::ACCEPTED {
            return Err(status_error(addr, &answer));
        }
        serde_json::from_slice(&answer.body).map_err(|e| ClientError::Decode {
            addr,
            reason: e.to_string(),
        })
    }

    /// Removes learner `id`.
    pub async fn remove_learner(
        &self,
        addr: &str,
        id: u64,
    ) -> Result<MembershipReply, ClientError> {
        self.call(
            addr,
            Method::DELETE,
            &format!("{PATH_LEARNERS}/{id}"),
            Bytes::new(),
        )
        .await
    }

    /// The members as `addr` sees them (with replication progress when it leads).
    pub async fn members(&self, addr: &str) -> Result<Members, ClientError> {
        self.call(addr, Method::GET, PATH_MEMBERS, Bytes::new())
            .await
    }

    /// Hands leadership to voter `to`; returns once it leads.
    pub async fn transfer_leader(&self, addr: &str, to: u64) -> Result<LeaderReply, ClientError> {
        self.post(addr, PATH_LEADER, &TransferLeader { to }).await
    }

    /// `addr`'s health check (`/health`), whatever its status.
    pub async fn health(&self, addr: &str) -> Result<Health, ClientError> {
        let (addr, answer) = self
            .request(addr, Method::GET, PATH_HEALTH, Bytes::new())
            .await?;
        serde_json::from_slice(&answer.body).map_err(|e| ClientError::Decode {
            addr,
            reason: e.to_string(),
        })
    }

    /// A backup of the state machine: one consistent rbolt file (linearizable through the
    /// leader, or `local` to `addr`'s state).
    pub async fn backup(&self, addr: &str, local: bool) -> Result<Bytes, ClientError> {
        let path = if local {
            format!("{PATH_BACKUP}?read=local")
        } else {
            PATH_BACKUP.to_owned()
        };
        let (addr, answer) = self.request(addr, Method::GET, &path, Bytes::new()).await?;
        if answer.status != StatusCode::OK {
            return Err(status_error(addr, &answer));
        }
        Ok(answer.body)
    }

    /// The alarms raised, as `addr` has applied them.
    pub async fn alarms(&self, addr: &str) -> Result<Alarms, ClientError> {
        self.call(addr, Method::GET, PATH_ALARMS, Bytes::new())
            .await
    }

    /// Clears every alarm (through the leader); answers the alarms cleared.
    pub async fn disarm_alarms(&self, addr: &str) -> Result<Alarms, ClientError> {
        self.call(addr, Method::POST, PATH_ALARMS_DISARM, Bytes::new())
            .await
    }

    /// Runs the online vacuum of `addr`'s own files (never redirected).
    pub async fn vacuum(&self, addr: &str) -> Result<VacuumReply, ClientError> {
        self.call(addr, Method::POST, PATH_VACUUM, Bytes::new())
            .await
    }

    /// Makes exactly `voters` the voting members.
    pub async fn change_members(
        &self,
        addr: &str,
        voters: Vec<u64>,
    ) -> Result<MembershipReply, ClientError> {
        self.post(addr, PATH_MEMBERS, &ChangeMembers { voters })
            .await
    }
}

/// The JSON body of a `200`, or the error the answer is.
fn decoded<T: DeserializeOwned>(addr: String, answer: &Answer) -> Result<T, ClientError> {
    if answer.status != StatusCode::OK {
        return Err(status_error(addr, answer));
    }
    serde_json::from_slice(&answer.body).map_err(|e| ClientError::Decode {
        addr,
        reason: e.to_string(),
    })
}

/// A new request id: 128 bits from the standard library's per-process random hash keys,
/// a counter and the clock, in hex (unique, not secret).
fn new_request_id() -> String {
    use std::hash::{BuildHasher, Hasher};
    static SEQ: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let seq = SEQ.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let half = |salt: u64| {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(salt);
        hasher.write_u64(seq);
        hasher.write_u128(nanos);
        hasher.write_u32(std::process::id());
        hasher.finish()
    };
    format!("{:016x}{:016x}", half(1), half(2))
}

fn status_error(addr: String, answer: &Answer) -> ClientError {
    let message = serde_json::from_slice::<ErrorReply>(&answer.body)
        .map(|e| e.error)
        .unwrap_or_else(|_| String::from_utf8_lossy(&answer.body).into_owned());
    ClientError::Status {
        addr,
        status: answer.status,
        message,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_encoded_so_the_server_decodes_them_back() {
        for key in [
            "plain",
            "with space",
            "a/b?c=d&e#f",
            "ünïcødé",
            "%41",
            "-_.~",
        ] {
            let path = key_path(key);
            let encoded = path.strip_prefix("/kv/").expect("under /kv");
            assert!(!encoded.contains(['/', '?', '#', ' ']), "{path}");
            let decoded = percent_encoding::percent_decode_str(encoded)
                .decode_utf8()
                .expect("utf-8");
            assert_eq!(decoded, key);
        }
    }

    /// Two nodes that send every request to each other (a leader handing over, a follower
    /// that has not heard of the new leader) for the first `bounces` requests, after which the
    /// first answers `200`: the request, passed on between them more than [`REDIRECTS_MAX`]
    /// times, is tried again after a pause rather than failed.
    async fn bouncing_pair(bounces: usize) -> String {
        use std::sync::Arc;
        use std::sync::atomic::{AtomicUsize, Ordering};
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listeners = [
            tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind"),
            tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("bind"),
        ];
        let addrs: Vec<String> = listeners
            .iter()
            .map(|l| l.local_addr().expect("addr").to_string())
            .collect();
        let seen = Arc::new(AtomicUsize::new(0));
        for (i, listener) in listeners.into_iter().enumerate() {
            let (other, seen) = (addrs[1 - i].clone(), Arc::clone(&seen));
            tokio::spawn(async move {
                while let Ok((mut stream, _)) = listener.accept().await {
                    let mut request = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !request.windows(4).any(|w| w == b"\r\n\r\n") {
                        match stream.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => request.extend_from_slice(&buf[..n]),
                        }
                    }
                    let answer = if seen.fetch_add(1, Ordering::SeqCst) < bounces || i == 1 {
                        format!(
                            "HTTP/1.1 307 Temporary Redirect\r\nLocation: http://{other}/x\r\n\
                             Content-Length: 0\r\nConnection: close\r\n\r\n"
                        )
                    } else {
                        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok"
                            .to_owned()
                    };
                    let _ = stream.write_all(answer.as_bytes()).await;
                }
            });
        }
        addrs[0].clone()
    }

    #[tokio::test]
    async fn a_redirect_loop_is_waited_out_while_time_is_left() {
        let addr = bouncing_pair(3 * (REDIRECTS_MAX + 1)).await;
        let (at, answer) = Client::new()
            .with_timeout(Duration::from_secs(10))
            .request(&addr, Method::GET, "/x", Bytes::new())
            .await
            .expect("answered once the nodes agree");
        assert_eq!((at, answer.status), (addr, StatusCode::OK));
    }

    #[tokio::test]
    async fn a_redirect_loop_fails_when_time_runs_out_or_retries_are_off() {
        let addr = bouncing_pair(usize::MAX).await;
        for client in [
            Client::new().with_timeout(Duration::from_millis(500)),
            Client::new().retrying(false),
        ] {
            let error = client
                .request(&addr, Method::GET, "/x", Bytes::new())
                .await
                .expect_err("the nodes never agree");
            assert!(matches!(error, ClientError::RedirectLoop { .. }), "{error}");
            assert!(
                error.to_string().contains("disagree about who leads"),
                "{error}"
            );
        }
    }

    #[test]
    fn locations_split_into_address_and_path() {
        assert_eq!(
            split_location("http://127.0.0.1:7001/kv/a?read=local"),
            Some(("127.0.0.1:7001".to_owned(), "/kv/a?read=local".to_owned()))
        );
        assert_eq!(
            split_location("https://x:1/kv"),
            Some(("x:1".to_owned(), "/kv".to_owned()))
        );
        assert_eq!(split_location("ftp://x/kv"), None);
        assert_eq!(split_location("http://no-path"), None);
    }
}
