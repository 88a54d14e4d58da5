//! A flood from one client costs Redis almost nothing out of the box: the axum example's
//! app (the layer with `ClientIp`, over a `RedisStore` built with the defaults, as
//! `examples/axum/config.rs` builds it) answers 400 requests at 5/min with at most 20
//! script calls, because the store's deny cache is on by default.

use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use floodwall::Policy;
use floodwall::core::DynStore;
use floodwall::redis::RedisStore;
use floodwall::tower::RateLimitLayer;
use floodwall::tower::extract::ClientIp;
use floodwall_test_support::{http_get, serve};
use redis_harness::RedisServer;

/// The example's `app`, on its default route.
fn app(store: Arc<dyn DynStore>, policy: Policy) -> Router {
    Router::new()
        .route("/", get(|| async { "hello from floodwall\n" }))
        .layer(RateLimitLayer::new(store, policy).key(ClientIp::new(Vec::new())))
}

fn evalsha_calls(redis: &RedisServer) -> u64 {
    redis
        .cmd(&["INFO", "commandstats"])
        .lines()
        .find_map(|l| l.strip_prefix("cmdstat_evalsha:calls="))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn four_hundred_requests_at_5_per_min_cost_at_most_20_script_calls() {
    let redis = RedisServer::start();
    // As the example connects it: the builder's defaults.
    let store = RedisStore::builder()
        .multiplexed(&redis.url())
        .await
        .unwrap();
    let policy = Policy::gcra("per-ip", "5/min".parse().unwrap()).unwrap();
    let addr = serve(app(Arc::new(store.clone()), policy)).await;
    redis.cmd(&["CONFIG", "RESETSTAT"]);

    // One client, eight connections at once, 50 requests each.
    let clients: Vec<_> = (0..8)
        .map(|_| {
            tokio::spawn(async move {
                let mut statuses = Vec::new();
                for _ in 0..50 {
                    statuses.push(http_get(addr, "/", &[]).await.status);
                }
                statuses
            })
        })
        .collect();
    let mut statuses = Vec::new();
    for c in clients {
        statuses.extend(c.await.unwrap());
    }

    let admitted = statuses.iter().filter(|&&s| s == 200).count();
    let refused = statuses.iter().filter(|&&s| s == 429).count();
    assert_eq!((admitted, refused), (5, 395));
    let evalsha = evalsha_calls(&redis);
    let stats = store.stats();
    eprintln!("400 requests at 5/min through the layer: {evalsha} EVALSHA, {stats:?}");
    // Redis's count includes each script's first call, answered NOSCRIPT before it was
    // loaded: the store counts the calls it made for checks.
    assert!(stats.script_calls <= evalsha);
    assert!(evalsha <= 20, "{evalsha} script calls for 400 requests");
}
