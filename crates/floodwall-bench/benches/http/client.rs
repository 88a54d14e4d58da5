//! The client: kept-alive HTTP/1 connections to each server, the requests sent over them,
//! and what each run of a variant measured.

use std::time::{Duration, Instant};

use http::header::HOST;
use http::{HeaderValue, Request, StatusCode};
use http_body_util::{BodyExt, Empty};
use hyper::body::Bytes;
use hyper::client::conn::http1::{self, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::task::JoinSet;

use crate::server::Server;
use crate::{CONCURRENCY, QUOTA};

/// One row of the table: a server, the client's connections to it, and what was measured.
pub(crate) struct Variant {
    pub(crate) name: &'static str,
    pub(crate) server: Server,
    pub(crate) host: HeaderValue,
    pub(crate) conns: Vec<SendRequest<Empty<Bytes>>>,
    /// One per round of the steady measurement.
    pub(crate) runs: Vec<Run>,
}

/// One variant's run in one round of the steady measurement.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Run {
    pub(crate) requests: u64,
    pub(crate) wall_ns: u64,
    /// CPU of the server's thread and of the client's (`None` without `schedstat`).
    pub(crate) server_ns: Option<u64>,
    pub(crate) client_ns: Option<u64>,
}

impl Run {
    pub(crate) fn server_us(&self) -> Option<f64> {
        self.server_ns
            .map(|ns| ns as f64 / self.requests as f64 / 1e3)
    }

    pub(crate) fn client_us(&self) -> Option<f64> {
        self.client_ns
            .map(|ns| ns as f64 / self.requests as f64 / 1e3)
    }

    pub(crate) fn req_per_s(&self) -> f64 {
        self.requests as f64 * 1e9 / self.wall_ns.max(1) as f64
    }

    /// Server CPU over wall time.
    pub(crate) fn busy(&self) -> Option<f64> {
        self.server_ns
            .map(|ns| ns as f64 / self.wall_ns.max(1) as f64)
    }
}

impl Variant {
    pub(crate) fn connect(
        client: &tokio::runtime::Runtime,
        name: &'static str,
        server: Server,
    ) -> Self {
        let addr = server.addr;
        let conns = client.block_on(async move {
            let mut conns = Vec::with_capacity(CONCURRENCY);
            for _ in 0..CONCURRENCY {
                let stream = tokio::net::TcpStream::connect(addr)
                    .await
                    .unwrap_or_else(|e| panic!("{name}: connect to {addr}: {e}"));
                stream.set_nodelay(true).expect("TCP_NODELAY");
                let (sender, conn) = http1::handshake(TokioIo::new(stream))
                    .await
                    .unwrap_or_else(|e| panic!("{name}: HTTP/1 handshake: {e}"));
                tokio::spawn(async move {
                    let _ = conn.await;
                });
                conns.push(sender);
            }
            conns
        });
        let host = HeaderValue::from_str(&addr.to_string()).expect("a socket address is a host");
        Variant {
            name,
            server,
            host,
            conns,
            runs: Vec::new(),
        }
    }
}

/// `GET /` on one connection; panics unless the answer is 200 "hello".
pub(crate) async fn get_hello(
    name: &'static str,
    host: &HeaderValue,
    conn: &mut SendRequest<Empty<Bytes>>,
) {
    conn.ready()
        .await
        .unwrap_or_else(|e| panic!("{name}: connection lost: {e}"));
    let req = Request::get("/")
        .header(HOST, host.clone())
        .body(Empty::new())
        .expect("a valid request");
    let res = conn
        .send_request(req)
        .await
        .unwrap_or_else(|e| panic!("{name}: request failed: {e}"));
    let status = res.status();
    if status == StatusCode::TOO_MANY_REQUESTS {
        panic!(
            "{name}: 429 Too Many Requests: the limiter refused a request, so the bench quota \
             ({QUOTA}) is too small for this machine and the figures would be wrong"
        );
    }
    assert_eq!(status, StatusCode::OK, "{name}: GET / answered {status}");
    let body = res
        .into_body()
        .collect()
        .await
        .unwrap_or_else(|e| panic!("{name}: reading the body: {e}"))
        .to_bytes();
    assert_eq!(&body[..], b"hello", "{name}: unexpected body");
}

/// Sends `iters` requests spread over `conns.len()` connections, all in flight at once;
/// returns the wall time.
pub(crate) fn run_concurrent(
    client: &tokio::runtime::Runtime,
    name: &'static str,
    host: &HeaderValue,
    conns: &mut Vec<SendRequest<Empty<Bytes>>>,
    iters: u64,
) -> Duration {
    let n = conns.len() as u64;
    let start = Instant::now();
    client.block_on(async {
        let mut tasks = JoinSet::new();
        for (i, mut conn) in conns.drain(..).enumerate() {
            let count = iters / n + u64::from((i as u64) < iters % n);
            let host = host.clone();
            tasks.spawn(async move {
                for _ in 0..count {
                    get_hello(name, &host, &mut conn).await;
                }
                conn
            });
        }
        while let Some(done) = tasks.join_next().await {
            match done {
                Ok(conn) => conns.push(conn),
                Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
                Err(e) => panic!("{name}: client task failed: {e}"),
            }
        }
    });
    start.elapsed()
}

/// Sends `iters` requests one after the other on one connection; returns the wall time.
pub(crate) fn run_sequential(
    client: &tokio::runtime::Runtime,
    name: &'static str,
    host: &HeaderValue,
    conn: &mut SendRequest<Empty<Bytes>>,
    iters: u64,
) -> Duration {
    let start = Instant::now();
    client.block_on(async {
        for _ in 0..iters {
            get_hello(name, host, conn).await;
        }
    });
    start.elapsed()
}
