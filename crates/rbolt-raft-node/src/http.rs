//! The HTTP client both the Raft network and the command-line client use: hyper's pooled
//! HTTP/1.1 client over plain TCP or TLS (rustls), with request bodies that are either whole
//! or streamed.

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::{Method, Request, StatusCode};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use std::net::IpAddr;
use std::time::Duration;

/// A request body: whole, or streamed from a file.
pub type Body = UnsyncBoxBody<Bytes, std::io::Error>;

/// How long connecting to a peer may take before the attempt counts as unreachable.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Answers larger than this are refused (a `GET /kv` of a big store is the largest).
pub const ANSWER_BYTES_MAX: usize = 256 << 20;

/// The pooled client: plain TCP, or TLS (then every URL is `https`).
#[derive(Clone)]
pub enum HttpClient {
    /// `http` URLs over TCP.
    Plain(Client<HttpConnector, Body>),
    /// `https` URLs over TLS.
    Tls(Client<HttpsConnector<HttpConnector>, Body>),
}

impl HttpClient {
    /// `https` or `http`.
    pub fn scheme(&self) -> &'static str {
        match self {
            HttpClient::Plain(_) => "http",
            HttpClient::Tls(_) => "https",
        }
    }

    async fn request(
        &self,
        request: Request<Body>,
    ) -> Result<hyper::Response<Incoming>, hyper_util::client::legacy::Error> {
        match self {
            HttpClient::Plain(client) => client.request(request).await,
            HttpClient::Tls(client) => client.request(request).await,
        }
    }
}

/// A plain-TCP client whose connections leave from `local` when it is given (a node's
/// connections to its peers leave from the address it listens on, so a peer sees where they
/// come from).
pub fn client(local: Option<IpAddr>) -> HttpClient {
    client_with(local, None)
}

/// A client as [`client`], speaking TLS with `tls` when it is given.
pub fn client_with(local: Option<IpAddr>, tls: Option<rustls::ClientConfig>) -> HttpClient {
    let mut connector = HttpConnector::new();
    connector.set_nodelay(true);
    connector.set_connect_timeout(Some(CONNECT_TIMEOUT));
    connector.set_local_address(local);
    let builder = Client::builder(TokioExecutor::new())
        .pool_idle_timeout(Duration::from_secs(30))
        .clone();
    match tls {
        Some(config) => {
            connector.enforce_http(false);
            let connector = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(config)
                .https_only()
                .enable_http1()
                .wrap_connector(connector);
            HttpClient::Tls(builder.build(connector))
        }
        None => HttpClient::Plain(builder.build(connector)),
    }
}

/// A whole body.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum SendError {
    /// No connection could be made (refused, reset before the request went out, connect
    /// timeout): the peer is down or cut off.
    #[error("cannot reach {addr}: {reason}")]
    Unreachable {
        /// The address.
        addr: String,
        /// The client's error.
        reason: String,
    },
    /// The request went out but no whole answer came back in time.
    #[error("no answer from {addr} within {timeout:?}")]
    Timeout {
        /// The address.
        addr: String,
        /// The time allowed.
        timeout: Duration,
    },
    /// The request or the answer failed part way.
    #[error("request to {addr} failed: {reason}")]
    Failed {
        /// The address.
        addr: String,
        /// The client's error.
        reason: String,
    },
}

/// An answer: its status, its `Location` header if any, and its body.
#[derive(Debug)]
pub struct Answer {
    /// The HTTP status.
    pub status: StatusCode,
    /// Where a redirect points.
    pub location: Option<String>,
    /// The headers.
    pub headers: hyper::HeaderMap,
    /// The whole body.
    pub body: Bytes,
}

/// Sends `method` `path` with `body` and `headers` to `addr` (`host:port`) and reads the
/// whole answer, all within `timeout`.
pub async fn send(
    client: &HttpClient,
    addr: &str,
    method: Method,
    path_and_query: &str,
    headers: &[(&str, String)],
    body: Body,
    timeout: Duration,
) -> Result<Answer, SendError> {
    send_limited(
        client,
        addr,
        method,
        path_and_query,
        headers,
        body,
        timeout,
        ANSWER_BYTES_MAX,
    )
    .await
}

/// [`send`], refusing an answer over `answer_bytes_max` bytes.
#[expect(
    clippy::too_many_arguments,
    reason = "one request's parts; a struct for them would be built at each of two callers"
)]
pub async fn send_limited(
    client: &HttpClient,
    addr: &str,
    method: Method,
    path_and_query: &str,
    headers: &[(&str, String)],
    body: Body,
    timeout: Duration,
    answer_bytes_max: usize,
) -> Result<Answer, SendError> {
    let failed = |reason: String| SendError::Failed {
        addr: addr.to_owned(),
        reason,
    };
    let mut request = Request::builder()
        .method(method)
        .uri(format!("{}://{addr}{path_and_query}", client.scheme()));
    for (name, value) in headers {
        request = request.header(*name, value);
    }
    let request = request.body(body).map_err(|e| failed(e.to_string()))?;
    let exchange = async {
        let answer = client.request(request).await.map_err(|e| {
            if e.is_connect() {
                SendError::Unreachable {
                    addr: addr.to_owned(),
                    reason: error_chain(&e),
                }
            } else {
                failed(error_chain(&e))
            }
        })?;
        let status = answer.status();
        let location = answer
            .headers()
            .get(hyper::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned);
        let headers = answer.headers().clone();
        let body = read_body(answer.into_body(), answer_bytes_max)
            .await
            .map_err(failed)?;
        Ok(Answer {
            status,
            location,
            headers,
            body,
        })
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(result) => result,
        Err(_) => Err(SendError::Timeout {
            addr: addr.to_owned(),
            timeout,
        }),
    }
}

/// Reads a whole body of at most `bytes_max` bytes.
pub async fn read_body(body: Incoming, bytes_max: usize) -> Result<Bytes, String> {
    Limited::new(body, bytes_max)
        .collect()
        .await
        .map(|collected| collected.to_bytes())
        .map_err(|e| {
            if e.is::<http_body_util::LengthLimitError>() {
                format!("body over the limit of {bytes_max} bytes")
            } else {
                e.to_string()
            }
        })
}

/// An error and its sources on one line (hyper's own messages say little on their own).
pub fn error_chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    // Bounded: error chains are short, and a cycle would be a bug elsewhere.
    for _ in 0..8 {
        let Some(inner) = source else { break };
        text.push_str(": ");
        text.push_str(&inner.to_string());
        source = inner.source();
    }
    text
}
