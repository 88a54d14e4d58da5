//! The servers under test: an axum hello world behind each limiter, each on its own thread
//! and current-thread runtime, with that thread's CPU time.

use std::future::Future;
use std::net::SocketAddr;
use std::path::PathBuf;

use axum::Router;
use axum::routing::get;
use floodwall::tower::{HeaderStyle, RateLimitLayer, Refusals};
use floodwall::{MemoryStore, Policy, Quota};
use floodwall_redis::RedisStore;
use redis_harness::RedisServer;
use tower_governor::GovernorLayer;
use tower_governor::governor::GovernorConfigBuilder;

use crate::support;
use crate::{
    FLOODWALL, FLOODWALL_NO_HEADERS, FLOODWALL_REDIS, GOVERNOR, GOVERNOR_BURST, GOVERNOR_PERIOD_NS,
    NONE, QUOTA,
};

pub(crate) fn policy() -> Policy {
    let quota: Quota = QUOTA.parse().expect("the bench quota parses");
    Policy::gcra("bench", quota).expect("the bench quota is a valid GCRA policy")
}

pub(crate) fn hello() -> Router {
    Router::new().route("/", get(|| async { "hello" }))
}

/// A server running on its own thread and current-thread runtime.
pub(crate) struct Server {
    pub(crate) addr: SocketAddr,
    /// `/proc/<pid>/task/<tid>/schedstat` of the server's thread: its CPU time.
    pub(crate) schedstat: Option<PathBuf>,
}

impl Server {
    /// Starts `make()`'s router on a free loopback port; `Err` if `make` fails.
    pub(crate) fn start<F, Fut>(name: &'static str, make: F) -> Result<Server, String>
    where
        F: FnOnce() -> Fut + Send + 'static,
        Fut: Future<Output = Result<Router, String>>,
    {
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::Builder::new()
            .name(format!("server {name}"))
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .expect("server runtime");
                runtime.block_on(async move {
                    let app = match make().await {
                        Ok(app) => app,
                        Err(e) => {
                            let _ = tx.send(Err(e));
                            return;
                        }
                    };
                    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                        .await
                        .expect("bind a loopback port");
                    let addr = listener.local_addr().expect("local address");
                    // This thread, which runs the whole server.
                    let schedstat = own_thread_schedstat();
                    let _ = tx.send(Ok((addr, schedstat)));
                    axum::serve(
                        listener,
                        app.into_make_service_with_connect_info::<SocketAddr>(),
                    )
                    .await
                    .expect("axum::serve");
                });
            })
            .expect("spawn the server thread");
        let (addr, schedstat) = rx
            .recv()
            .map_err(|_| format!("{name}: the server thread died while starting"))??;
        Ok(Server { addr, schedstat })
    }

    /// CPU time the server's thread has used so far, in nanoseconds.
    pub(crate) fn cpu_ns(&self) -> Option<u64> {
        support::schedstat_ns(self.schedstat.as_ref()?)
    }
}

pub(crate) fn start_servers(redis: Option<&RedisServer>) -> Vec<(&'static str, Server)> {
    let mut servers = vec![
        (
            NONE,
            Server::start(NONE, || async { Ok(hello()) }).expect("no-limiter server"),
        ),
        (
            FLOODWALL,
            Server::start(FLOODWALL, || async {
                Ok(hello().layer(RateLimitLayer::new(MemoryStore::new(), policy())))
            })
            .expect("floodwall server"),
        ),
        (
            FLOODWALL_NO_HEADERS,
            Server::start(FLOODWALL_NO_HEADERS, || async {
                let layer = RateLimitLayer::new(MemoryStore::new(), policy())
                    .refusals(Refusals::new().headers(HeaderStyle::None));
                Ok(hello().layer(layer))
            })
            .expect("floodwall (no headers) server"),
        ),
        (
            GOVERNOR,
            Server::start(GOVERNOR, || async {
                let config = GovernorConfigBuilder::default()
                    .per_nanosecond(GOVERNOR_PERIOD_NS)
                    .burst_size(GOVERNOR_BURST)
                    .finish()
                    .ok_or("tower_governor: zero period or burst")?;
                Ok(hello().layer(GovernorLayer::new(config)))
            })
            .expect("tower_governor server"),
        ),
    ];
    if let Some(redis) = redis {
        match redis_server(redis.url()) {
            Ok(server) => servers.push((FLOODWALL_REDIS, server)),
            Err(e) => println!("note: the {FLOODWALL_REDIS} row is skipped: {e}"),
        }
    }
    servers
}

/// floodwall on Redis: the store is built on the server's runtime, where its connection
/// lives (one multiplexed connection, the crate's default).
pub(crate) fn redis_server(url: String) -> Result<Server, String> {
    Server::start(FLOODWALL_REDIS, move || async move {
        // Without the deny cache, as BENCHMARKS.md §3 was measured: every check is a call.
        let store = RedisStore::builder()
            .deny_cache(false)
            .multiplexed(&url)
            .await
            .map_err(|e| format!("connect to {url}: {e}"))?;
        Ok(hello().layer(RateLimitLayer::new(store, policy())))
    })
}

/// `/proc/<pid>/task/<tid>/schedstat` of the calling thread.
pub(crate) fn own_thread_schedstat() -> Option<PathBuf> {
    std::fs::read_link("/proc/thread-self")
        .ok()
        .map(|task| PathBuf::from("/proc").join(task).join("schedstat"))
}
