//! Instructions per request through an axum `Router`, counted by callgrind: what each
//! limiter adds to a hello world, steady to a few instructions whatever the machine does
//! (BENCHMARKS.md §3 reads the time figures from `benches/http.rs`; this says where they
//! come from).
//!
//! Run: `cargo bench -p floodwall-bench --bench http_instructions` (needs valgrind; ~15 s).
//! Each variant runs in a child process of this bench under `valgrind --tool=callgrind`,
//! counting only inside [`run`]: [`REQUESTS`] requests sent by `oneshot` to the router (no
//! sockets: hyper's I/O is the same for every variant and is left out), after [`WARM`]
//! uncounted ones, each with a `ConnectInfo` as `into_make_service_with_connect_info`
//! gives. Variants: no limiter; an identity layer; an axum `map_response` middleware doing
//! nothing, and the same inserting the two IETF headers as constants (their difference is
//! the floor of writing them); floodwall in memory with its default headers, without
//! headers, and refusing (429 with headers, every counted request: its 1/h quota admits
//! only the first warm-up one); floodwall with `wait` (its allowed path: waiting
//! costs nothing until a request is refused); floodwall after a live change of its quota
//! (to the same quota: what reading the current version costs); tower_governor with the
//! same quota.
//!
//! With `--features metrics` the layer is built with its `metrics` feature: every
//! floodwall row then counts with no recorder installed, and one more row,
//! `floodwall-recorded`, with the Prometheus recorder of `examples/metrics.rs` installed.

use floodwall_bench as support;

use std::future::Future;
use std::hint::black_box;
use std::net::SocketAddr;
use std::pin::pin;
use std::process::Command;
use std::task::{Context, Poll, Waker};

use axum::Router;
use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::response::Response;
use axum::routing::get;
use floodwall::tower::{HeaderStyle, RateLimitLayer, Refusals, Wait};
use floodwall::{MemoryStore, Policy, Quota};
use http::header::{HOST, HeaderName};
use http::{HeaderValue, Request, StatusCode};
use tower::ServiceExt;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

/// Counted requests per variant.
const REQUESTS: u64 = 2_000;
/// Uncounted requests first (the map's first entry, allocations warmed).
const WARM: u64 = 200;
/// (name, what it is), in the order printed; the first is the baseline.
const VARIANTS: [(&str, &str); 11] = [
    ("none", "no limiter"),
    ("identity", "an identity layer"),
    (
        "map-response",
        "an axum map_response middleware doing nothing",
    ),
    (
        "two-headers",
        "that middleware inserting the two IETF headers, constant",
    ),
    ("floodwall", "floodwall in memory, IETF headers"),
    ("floodwall-noheaders", "floodwall in memory, no headers"),
    ("floodwall-refusing", "floodwall refusing: 429 with headers"),
    ("floodwall-wait", "floodwall with wait_up_to(1 s), allowed"),
    (
        "floodwall-two",
        "floodwall, two policies (and_policy: all or nothing)",
    ),
    (
        "floodwall-live",
        "floodwall after a live change (set_quota, same quota)",
    ),
    ("tower_governor", "tower_governor, same quota"),
];

/// Rows counted only with the `metrics` feature.
#[cfg(feature = "metrics")]
const METRICS_VARIANTS: [(&str, &str); 1] = [(
    "floodwall-recorded",
    "floodwall, metrics to a Prometheus recorder",
)];
#[cfg(not(feature = "metrics"))]
const METRICS_VARIANTS: [(&str, &str); 0] = [];

// The quota and the tower_governor settings must match benches/http.rs's QUOTA and GOVERNOR_*.
fn policy() -> Policy {
    let quota: Quota = "1000000/s burst 1000000000".parse().expect("a quota");
    Policy::gcra("bench", quota).expect("a policy")
}

fn hello() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

fn app(variant: &str) -> Router {
    let app = match variant {
        "none" => hello(),
        "identity" => hello().layer(tower::layer::layer_fn(|s| s)),
        "map-response" => {
            hello().layer(axum::middleware::map_response(|res: Response| async move {
                res
            }))
        }
        "two-headers" => hello().layer(axum::middleware::map_response(
            |mut res: Response| async move {
                const POLICY: HeaderName = HeaderName::from_static("ratelimit-policy");
                const LIMIT: HeaderName = HeaderName::from_static("ratelimit");
                res.headers_mut().insert(
                    POLICY,
                    HeaderValue::from_static("\"bench\";q=1000000;w=1;floodwall-burst=1000000000"),
                );
                res.headers_mut()
                    .insert(LIMIT, HeaderValue::from_static("\"bench\";r=999999999;t=1"));
                res
            },
        )),
        "floodwall" => hello().layer(RateLimitLayer::new(MemoryStore::new(), policy())),
        #[cfg(feature = "metrics")]
        "floodwall-recorded" => {
            metrics_exporter_prometheus::PrometheusBuilder::new()
                .install_recorder()
                .expect("the only recorder");
            hello().layer(RateLimitLayer::new(MemoryStore::new(), policy()))
        }
        "floodwall-noheaders" => hello().layer(
            RateLimitLayer::new(MemoryStore::new(), policy())
                .refusals(Refusals::new().headers(HeaderStyle::None)),
        ),
        "floodwall-wait" => hello().layer(
            RateLimitLayer::new(MemoryStore::new(), policy())
                .wait(Wait::up_to(std::time::Duration::from_secs(1)).expect("a bound"))
                .expect("GCRA can wait"),
        ),
        "floodwall-two" => hello().layer(
            RateLimitLayer::new(MemoryStore::new(), policy()).and_policy(
                Policy::fixed_window("bench-day", "1000000000/day".parse().expect("a quota"))
                    .expect("a policy"),
            ),
        ),
        "floodwall-live" => {
            let layer = RateLimitLayer::new(MemoryStore::new(), policy());
            let live = layer.live();
            // After the services are built: a change before is their initial version.
            let app = hello().layer(layer);
            live.set_quota("bench", *policy().quota())
                .expect("a known policy");
            app
        }
        "floodwall-refusing" => hello().layer(RateLimitLayer::new(
            MemoryStore::new(),
            Policy::gcra("deny", "1/h".parse().expect("a quota")).expect("a policy"),
        )),
        "tower_governor" => {
            let config = GovernorConfigBuilder::default()
                .per_nanosecond(1_000)
                .burst_size(1_000_000_000)
                .finish()
                .expect("a governor config");
            hello().layer(GovernorLayer::new(config))
        }
        other => panic!("no variant {other}"),
    };
    // As `into_make_service` does: the routes are built once, not per request.
    app.with_state(())
}

/// Polls a future that never waits (every service here answers at once).
fn block<F: Future>(f: F) -> F::Output {
    let mut f = pin!(f);
    let mut cx = Context::from_waker(Waker::noop());
    loop {
        if let Poll::Ready(v) = f.as_mut().poll(&mut cx) {
            return v;
        }
    }
}

/// The status every counted request of `variant` gets: floodwall-refusing's quota (1/h)
/// admits only the first warm-up request.
fn expected(variant: &str) -> StatusCode {
    if variant == "floodwall-refusing" {
        StatusCode::TOO_MANY_REQUESTS
    } else {
        StatusCode::OK
    }
}

/// One request; its status must be `expect`, if given.
#[inline(never)]
fn one(app: &Router, peer: SocketAddr, expect: Option<StatusCode>) {
    let mut req = Request::get("/")
        .header(HOST, "127.0.0.1:40000")
        .body(Body::empty())
        .expect("a request");
    req.extensions_mut().insert(ConnectInfo(peer));
    let res = block(app.clone().oneshot(req)).expect("infallible");
    if let Some(expect) = expect {
        assert_eq!(res.status(), expect);
    }
    black_box(res);
}

/// The counted loop: callgrind collects inside this function only.
#[inline(never)]
fn run(app: &Router, peer: SocketAddr, n: u64, expect: StatusCode) {
    for _ in 0..n {
        one(app, peer, Some(expect));
    }
}

/// Instructions per request of one variant, from a child process under callgrind.
fn count(variant: &str) -> Result<f64, String> {
    let exe = std::env::current_exe().map_err(|e| e.to_string())?;
    let out = Command::new("valgrind")
        .args([
            "--tool=callgrind",
            "--toggle-collect=http_instructions::run",
            "--callgrind-out-file=/dev/null",
        ])
        .arg(exe)
        .args(["--child", variant])
        .output()
        .map_err(|e| format!("valgrind: {e}"))?;
    let log = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(format!("{variant}: {log}"));
    }
    let collected: f64 = log
        .lines()
        .find_map(|l| l.split("Collected :").nth(1))
        .and_then(|v| v.trim().parse().ok())
        .ok_or_else(|| format!("{variant}: no count in valgrind's output: {log}"))?;
    if collected == 0.0 {
        // --toggle-collect matched no function: the symbol's name changed.
        return Err(format!(
            "{variant}: callgrind collected nothing (no function http_instructions::run?)"
        ));
    }
    Ok(collected / REQUESTS as f64)
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if let Some(at) = args.iter().position(|a| a == "--child") {
        let variant = &args[at + 1];
        let app = app(variant);
        let peer: SocketAddr = "127.0.0.1:50000".parse().expect("an address");
        for _ in 0..WARM {
            one(&app, peer, None);
        }
        run(&app, peer, REQUESTS, expected(variant));
        return;
    }
    if !support::have("valgrind") {
        println!("note: valgrind not found (Debian package valgrind); nothing to count");
        return;
    }
    println!(
        "instructions per request (callgrind, {REQUESTS} requests by oneshot after {WARM}; \
         no sockets)"
    );
    println!("{:<20} {:>9} {:>9}  what", "variant", "Ir/req", "over none");
    let mut base = None;
    for (variant, what) in VARIANTS.into_iter().chain(METRICS_VARIANTS) {
        match count(variant) {
            Ok(ir) => {
                let none = *base.get_or_insert(ir);
                println!("{variant:<20} {ir:>9.0} {:>+9.0}  {what}", ir - none);
            }
            Err(e) => println!("{variant:<20} failed: {e}"),
        }
    }
}
