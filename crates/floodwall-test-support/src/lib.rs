//! What floodwall's tests share: a memory store on a manual clock, policies, requests from
//! an address, services that answer, a store that is down, a body that stalls or fails, a
//! subscriber that records what is logged, a tiny HTTP/1.1 client that talks to real
//! servers over loopback, and a Python with a client's packages ([`python_with`]). Not
//! published.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;

use axum::body::Body;
use floodwall_core::store::{Op, Reply};
use floodwall_core::{Error, ManualClock, MemoryStore, Policy, Store};
use http::{Request, Response};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

mod python;
pub use python::python_with;

/// A memory store on a manual clock (at a whole day, so windows start with it), and the clock.
pub fn store() -> (MemoryStore<ManualClock>, ManualClock) {
    let clock = ManualClock::new(1_700_006_400_000_000);
    (MemoryStore::builder().clock(clock.clone()).build(), clock)
}

/// A clock that reads tokio's time, as microseconds since the epoch from a whole day on:
/// under a paused tokio clock (`#[tokio::test(start_paused = true)]`) the stores' time and
/// the layer's timers then move together, and only when the test lets them.
#[derive(Debug, Clone)]
pub struct TokioClock {
    start: tokio::time::Instant,
}

impl TokioClock {
    /// Where it starts, in µs since the epoch: a whole day, so windows start with it.
    pub const START: u64 = 1_700_006_400_000_000;

    /// A clock reading [`START`](Self::START) at tokio's now.
    pub fn new() -> Self {
        Self {
            start: tokio::time::Instant::now(),
        }
    }

    /// The tokio instant this clock started at.
    pub fn start(&self) -> tokio::time::Instant {
        self.start
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl floodwall_core::Clock for TokioClock {
    fn now_micros(&self) -> u64 {
        Self::START + self.start.elapsed().as_micros() as u64
    }
}

/// The tokio instants at which requests reached a [`recording`] service.
pub type Seen = std::sync::Arc<std::sync::Mutex<Vec<tokio::time::Instant>>>;

/// A service answering 200 "hello" that records in `seen` (a clone of the test's) the tokio instant each request
/// reached it: what a test of the pace at which requests leave the layer reads.
pub fn recording(
    seen: Seen,
) -> impl tower::Service<
    Request<Body>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Body>, Infallible>> + Send,
> + Clone {
    tower::service_fn(move |_req: Request<Body>| {
        seen.lock().unwrap().push(tokio::time::Instant::now());
        async { Ok(Response::new(Body::from("hello"))) }
    })
}

/// A GCRA policy from its name and quota text (`"10/s burst 20"`); panics on bad input.
pub fn gcra(name: &str, quota: &str) -> Policy {
    Policy::gcra(name, quota.parse().unwrap()).unwrap()
}

/// A request from `ip`, as a server with connect info would hand it over.
pub fn from(ip: &str) -> Request<Body> {
    let mut req = Request::new(Body::empty());
    let addr = SocketAddr::new(ip.parse().unwrap(), 40000);
    req.extensions_mut().insert(addr);
    req
}

/// A service answering 200 "hello".
pub fn hello() -> impl tower::Service<
    Request<Body>,
    Response = Response<Body>,
    Error = Infallible,
    Future = impl Future<Output = Result<Response<Body>, Infallible>> + Send,
> + Clone {
    tower::service_fn(|_req: Request<Body>| async { Ok(Response::new(Body::from("hello"))) })
}

/// The body as text.
pub async fn text<B>(res: Response<B>) -> String
where
    B: http_body::Body<Data = bytes::Bytes> + Send + 'static,
    B::Error: Into<axum::BoxError>,
{
    let bytes = axum::body::to_bytes(Body::new(res.into_body()), usize::MAX)
        .await
        .unwrap();
    String::from_utf8(bytes.to_vec()).unwrap()
}

/// A store that is always down.
#[derive(Clone, Copy)]
pub struct Down;

impl Store for Down {
    /// Checks fail as a refused connection; a reset is done; nothing else is supported.
    fn call(&self, op: Op<'_>) -> impl Future<Output = Result<Reply, Error>> + Send {
        std::future::ready(match op {
            Op::Check { .. } | Op::CheckAll { .. } => Err(Error::unavailable("connection refused")),
            Op::Reset { .. } => Ok(Reply::Done),
            other => Err(other.unsupported()),
        })
    }
}

/// A response read off the wire.
#[derive(Debug)]
pub struct Wire {
    /// The status code.
    pub status: u16,
    /// The headers, in order, names as sent.
    pub headers: Vec<(String, String)>,
    /// The body, whole.
    pub body: String,
}

impl Wire {
    /// The value of header `name` (case-insensitive); panics with the whole response if absent.
    pub fn header(&self, name: &str) -> &str {
        self.get(name)
            .unwrap_or_else(|| panic!("no {name} header in {self:#?}"))
    }

    /// The value of header `name` (case-insensitive), if any.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v.as_str())
    }
}

/// Sends one HTTP/1.1 GET over a fresh connection and reads the whole response.
pub async fn http_get(addr: SocketAddr, path: &str, extra_headers: &[(&str, &str)]) -> Wire {
    http_request(addr, "GET", path, extra_headers).await
}

/// Sends one HTTP/1.1 request of `method` (no body) over a fresh connection and reads the
/// whole response.
pub async fn http_request(
    addr: SocketAddr,
    method: &str,
    path: &str,
    extra_headers: &[(&str, &str)],
) -> Wire {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = format!(
        "{method} {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: 0\r\n"
    );
    for (name, value) in extra_headers {
        req.push_str(&format!("{name}: {value}\r\n"));
    }
    req.push_str("\r\n");
    stream.write_all(req.as_bytes()).await.unwrap();
    let mut raw = Vec::new();
    stream.read_to_end(&mut raw).await.unwrap();
    parse(&String::from_utf8(raw).unwrap())
}

fn parse(raw: &str) -> Wire {
    let (head, body) = raw.split_once("\r\n\r\n").expect("a complete response");
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .map(|l| {
            let (n, v) = l.split_once(':').unwrap();
            (n.trim().to_owned(), v.trim().to_owned())
        })
        .collect();
    Wire {
        status,
        headers,
        body: body.to_owned(),
    }
}

/// Serves `router` on a free loopback port, with the peer address in `ConnectInfo`.
pub async fn serve(router: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        axum::serve(
            listener,
            router.into_make_service_with_connect_info::<SocketAddr>(),
        )
        .await
        .unwrap();
    });
    addr
}

/// Polls `done` every 10 ms until it holds, for 5 s at most, then panics naming `what`:
/// for what a server or a dropped permit does on its own schedule (a request's future
/// dropped after a disconnect, a release sent in the background).
pub async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    for _ in 0..500 {
        if done() {
            return;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    panic!("never happened: {what}");
}

/// An event a test captured: its level, target and message.
#[derive(Debug, Clone)]
pub struct Logged {
    /// The event's level.
    pub level: tracing::Level,
    /// The event's target (`"floodwall"` for the layer's own).
    pub target: String,
    /// The event's message, formatted.
    pub message: String,
}

/// A tracing subscriber that records every event at info level and above, for tests that
/// check what is logged. Install it with `tracing::subscriber::set_default(logs.clone())`.
#[derive(Clone, Default)]
pub struct Logs(std::sync::Arc<std::sync::Mutex<Vec<Logged>>>);

impl Logs {
    /// The events recorded so far, in order.
    pub fn recorded(&self) -> Vec<Logged> {
        self.0.lock().unwrap().clone()
    }
}

/// Reads an event's `message` field.
struct Message<'a>(&'a mut String);

impl tracing::field::Visit for Message<'_> {
    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        if field.name() == "message" {
            *self.0 = format!("{value:?}");
        }
    }
}

impl tracing::Subscriber for Logs {
    fn enabled(&self, meta: &tracing::Metadata<'_>) -> bool {
        *meta.level() <= tracing::Level::INFO
    }
    fn new_span(&self, _: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        tracing::span::Id::from_u64(1)
    }
    fn record(&self, _: &tracing::span::Id, _: &tracing::span::Record<'_>) {}
    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, event: &tracing::Event<'_>) {
        let mut message = String::new();
        event.record(&mut Message(&mut message));
        self.0.lock().unwrap().push(Logged {
            level: *event.metadata().level(),
            target: event.metadata().target().to_owned(),
            message,
        });
    }
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

/// A body whose first chunk is ready at once and whose next frame either never comes (a
/// stream still waiting for its source) or is an error (`"source gone"`).
pub struct Partial {
    first: Option<bytes::Bytes>,
    fails: bool,
}

impl Partial {
    /// `first`, then nothing ever again.
    pub fn stalls(first: &'static [u8]) -> Self {
        Self {
            first: Some(bytes::Bytes::from_static(first)),
            fails: false,
        }
    }

    /// `first`, then an error.
    pub fn fails(first: &'static [u8]) -> Self {
        Self {
            first: Some(bytes::Bytes::from_static(first)),
            fails: true,
        }
    }
}

impl http_body::Body for Partial {
    type Data = bytes::Bytes;
    type Error = std::io::Error;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<bytes::Bytes>, Self::Error>>> {
        use std::task::Poll;
        match self.first.take() {
            Some(chunk) => Poll::Ready(Some(Ok(http_body::Frame::data(chunk)))),
            None if self.fails => Poll::Ready(Some(Err(std::io::Error::other("source gone")))),
            None => Poll::Pending,
        }
    }
}

/// `.now()` on a memory store's future: its answer (it never waits).
pub trait Now: Future + Sized {
    /// Polls once; panics if the future waits.
    fn now(self) -> Self::Output {
        let mut f = std::pin::pin!(self);
        let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
        match f.as_mut().poll(&mut cx) {
            std::task::Poll::Ready(v) => v,
            std::task::Poll::Pending => panic!("an in-memory store waited"),
        }
    }
}

impl<F: Future> Now for F {}
