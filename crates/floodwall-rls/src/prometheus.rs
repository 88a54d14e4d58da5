//! `--metrics` (not part of the library): the Prometheus recorder the service's
//! [metrics](floodwall_rls::metrics) go to, and `GET /metrics` served over HTTP/1 on the
//! address given. The binary binds it itself (the exporter's own listener cannot say which
//! port 0 picked) and answers 404 on any other path.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::Full;
use hyper::body::Incoming;
use hyper::header::{ALLOW, CONTENT_TYPE, HeaderValue};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::{TokioIo, TokioTimer};
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use tokio::net::TcpListener;
use tracing::{debug, warn};

/// The store duration's histogram buckets, in seconds: from the memory store's answers
/// and a fast Redis round trip to past the longest timeout anyone sets.
const BUCKETS: [f64; 16] = [
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
    5.0, 10.0,
];

/// How often the recorder's upkeep runs (it keeps histogram storage from growing between
/// scrapes).
const UPKEEP: Duration = Duration::from_secs(5);

/// How long a client gets to send a request's headers before its connection is closed.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// The Prometheus text format's content type.
const TEXT_FORMAT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Installs the Prometheus recorder for the whole process, then serves `/metrics` on
/// `addr` in the background; returns the address bound.
pub(crate) async fn serve(addr: SocketAddr) -> Result<SocketAddr, String> {
    let cannot_listen = |e: std::io::Error| format!("could not listen on {addr} for metrics: {e}");
    let listener = TcpListener::bind(addr).await.map_err(cannot_listen)?;
    let bound = listener.local_addr().map_err(cannot_listen)?;
    let handle = PrometheusBuilder::new()
        .set_buckets(&BUCKETS)
        .and_then(PrometheusBuilder::install_recorder)
        .map_err(|e| format!("could not install the metrics recorder: {e}"))?;
    floodwall_rls::metrics::describe();
    let upkeep = handle.clone();
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(UPKEEP);
        loop {
            tick.tick().await;
            upkeep.run_upkeep();
        }
    });
    tokio::spawn(accept(listener, handle));
    Ok(bound)
}

/// Serves each connection accepted on `listener` in a task of its own.
async fn accept(listener: TcpListener, handle: PrometheusHandle) {
    loop {
        let stream = match listener.accept().await {
            Ok((stream, _)) => stream,
            Err(e) => {
                // Out of file descriptors, most likely: let some close before trying again.
                warn!("metrics: could not accept a connection: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let handle = handle.clone();
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let response = respond(&request, &handle);
                async move { Ok::<_, Infallible>(response) }
            });
            let served = http1::Builder::new()
                .timer(TokioTimer::new())
                .header_read_timeout(HEADER_TIMEOUT)
                .serve_connection(TokioIo::new(stream), service)
                .await;
            if let Err(e) = served {
                debug!("metrics: connection ended: {e}");
            }
        });
    }
}

/// The answer to one request: the metrics on `GET /metrics` (or `HEAD`), else 404 or 405.
fn respond(request: &Request<Incoming>, handle: &PrometheusHandle) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::new()));
    if request.uri().path() != "/metrics" {
        *response.status_mut() = StatusCode::NOT_FOUND;
    } else if request.method() != Method::GET && request.method() != Method::HEAD {
        *response.status_mut() = StatusCode::METHOD_NOT_ALLOWED;
        response
            .headers_mut()
            .insert(ALLOW, HeaderValue::from_static("GET, HEAD"));
    } else {
        *response.body_mut() = Full::new(Bytes::from(handle.render()));
        response
            .headers_mut()
            .insert(CONTENT_TYPE, HeaderValue::from_static(TEXT_FORMAT));
    }
    response
}
