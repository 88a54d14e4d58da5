//! Each failure gives its documented result: SCRIPT FLUSH and restarts are transparent, a
//! key of the wrong type is a backend error that changes nothing, a server that is down or
//! paused is unavailable or a timeout (never a panic, never an allow), and bad URLs or
//! prefixes are typed errors at build time.
//!
//! Every store here is built with `deny_cache(false)`: these tests are about what Redis's
//! failures turn into, and a refusal the deny cache remembers would be answered without
//! meeting the failure.

mod common;

use std::time::Duration;

use floodwall_core::{Error, Policy, StoreExt};
use floodwall_redis::{BuildError, RedisStore};
use redis_harness::RedisServer;

use common::every_algorithm;

const NOW: u64 = 1_700_000_000_000_000;

#[tokio::test]
async fn script_flush_in_the_middle_of_a_run_is_transparent() {
    let server = RedisServer::start();
    let url = server.url();
    let stores = [
        common::uncached_store(&url).await,
        RedisStore::builder()
            .deny_cache(false)
            .pool(&url)
            .await
            .unwrap(),
    ];
    for (s, store) in stores.iter().enumerate() {
        for policy in every_algorithm(&format!("flush{s}"), "3/s") {
            let at = store.at(NOW);
            let check = |cost| at.check(b"k", &policy, cost);
            assert_eq!(check(2).await.unwrap().remaining, 1);
            server.cmd(&["SCRIPT", "FLUSH"]);
            // The script is reloaded and the state kept: one left, then none.
            assert!(check(1).await.unwrap().is_allowed(), "{policy:?}");
            server.cmd(&["SCRIPT", "FLUSH"]);
            assert!(!check(1).await.unwrap().is_allowed(), "{policy:?}");
        }
    }
}

#[tokio::test]
async fn a_key_of_the_wrong_type_is_a_backend_error_and_is_left_alone() {
    let server = RedisServer::start();
    let store = common::uncached_store(&server.url()).await;
    for policy in every_algorithm("typed", "3/s") {
        let key = String::from_utf8(store.redis_key(b"k", &policy)).unwrap();
        server.cmd(&["RPUSH", &key, "someone else's"]);
        let err = store.check(b"k", &policy, 1).await.unwrap_err();
        assert!(matches!(err, Error::Backend { .. }), "{policy:?}: {err}");
        assert!(err.to_string().contains("WRONGTYPE"), "{err}");
        assert_eq!(server.cmd(&["LLEN", &key]), "1");
    }
    // A value of the right type that is not a floodwall state is refused, not misread.
    for policy in every_algorithm("garbled", "3/s") {
        let key = String::from_utf8(store.redis_key(b"k", &policy)).unwrap();
        let (kind, write): (&str, &[&str]) = match policy.algorithm() {
            floodwall_core::Algorithm::SlidingWindow { .. } => ("hash", &["HSET", &key, "x", "y"]),
            floodwall_core::Algorithm::SlidingLog => ("zset", &["ZADD", &key, "1", "junk"]),
            _ => ("string", &["SET", &key, "junk"]),
        };
        server.cmd(write);
        let err = store.check(b"k", &policy, 1).await.unwrap_err();
        assert!(matches!(err, Error::Backend { .. }), "{kind}: {err}");
        assert!(err.to_string().contains("unreadable"), "{err}");
    }
}

#[tokio::test]
async fn a_number_redis_cannot_add_to_is_decided_on_and_written_whole() {
    // Within a cell of its key's TTL grid (250 ms here, NOW on a cell's edge), GCRA and
    // the funnel add the TAT's move to the stored integer (INCRBY). A state Lua reads as a
    // number but Redis will not add to, which floodwall never writes, is decided on as
    // read and written whole, its TTL kept.
    let server = RedisServer::start();
    let store = common::uncached_store(&server.url()).await;
    for policy in [
        Policy::gcra("odd-gcra", "10/s".parse().unwrap()).unwrap(),
        Policy::leaky_bucket("odd-leaky", "10/s".parse().unwrap()).unwrap(),
    ] {
        let key = String::from_utf8(store.redis_key(b"k", &policy)).unwrap();
        let tat = NOW + 10_000;
        server.cmd(&["SET", &key, &format!("{tat}.0"), "PX", "60000"]);
        let d = store.at(NOW).check(b"k", &policy, 1).await.unwrap();
        assert!(d.is_allowed(), "{policy:?}");
        assert_eq!(d.reset_after, Duration::from_millis(110), "{policy:?}");
        assert_eq!(server.cmd(&["GET", &key]), (tat + 100_000).to_string());
        let pttl: u64 = server.cmd(&["PTTL", &key]).parse().unwrap();
        assert!(
            pttl > 50_000 && pttl <= 60_000,
            "{policy:?}: TTL kept: {pttl}"
        );
        // The integer written, the next admission adds to it.
        let d = store.at(NOW).check(b"k", &policy, 1).await.unwrap();
        assert_eq!(d.reset_after, Duration::from_millis(210), "{policy:?}");
        assert_eq!(server.cmd(&["GET", &key]), (tat + 200_000).to_string());
    }
}

#[tokio::test]
async fn a_server_that_is_down_is_unavailable_until_it_is_back() {
    let mut server = RedisServer::start();
    let url = server.url();
    let timeout = Duration::from_millis(500);
    let manager = RedisStore::builder()
        .deny_cache(false)
        .timeout(timeout)
        .multiplexed(&url)
        .await
        .unwrap();
    let pool = RedisStore::builder()
        .deny_cache(false)
        .timeout(timeout)
        .pool(&url)
        .await
        .unwrap();
    let policy = Policy::gcra("down", "100/s".parse().unwrap()).unwrap();
    for store in [&manager, &pool] {
        assert!(store.check(b"k", &policy, 1).await.unwrap().is_allowed());
    }

    server.kill();
    for store in [&manager, &pool] {
        for _ in 0..3 {
            let err = store.check(b"k", &policy, 1).await.unwrap_err();
            assert!(err.is_unavailable(), "{store:?}: {err}");
        }
    }
    // Building a store on a dead server fails with a typed error.
    for built in [
        RedisStore::builder()
            .deny_cache(false)
            .timeout(timeout)
            .multiplexed(&url)
            .await,
        RedisStore::builder()
            .deny_cache(false)
            .timeout(timeout)
            .pool(&url)
            .await,
    ] {
        assert!(
            matches!(built, Err(BuildError::Connect { .. })),
            "{built:?}"
        );
    }

    // Back, empty (no scripts, no data): both kinds reconnect and reload the script.
    server.restart();
    for store in [&manager, &pool] {
        let mut answer = store.check(b"k", &policy, 1).await;
        for _ in 0..50 {
            if answer.is_ok() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
            answer = store.check(b"k", &policy, 1).await;
        }
        assert!(answer.unwrap().is_allowed(), "{store:?} did not recover");
    }
}

#[tokio::test]
async fn a_server_that_does_not_answer_in_time_is_a_timeout() {
    let server = RedisServer::start();
    let store = RedisStore::builder()
        .deny_cache(false)
        .timeout(Duration::from_millis(100))
        .multiplexed(&server.url())
        .await
        .unwrap();
    let policy = Policy::gcra("slow", "1/s".parse().unwrap()).unwrap();
    store.check(b"k", &policy, 0).await.unwrap();
    server.pause(1_000);
    let err = store.check(b"k", &policy, 1).await.unwrap_err();
    assert!(err.is_timeout(), "{err}");
}

#[tokio::test]
async fn bad_urls_and_prefixes_are_typed_errors() {
    for url in ["not a url", "http://127.0.0.1/", "redis://127.0.0.1:99999/"] {
        let built = RedisStore::builder().multiplexed(url).await;
        assert!(
            matches!(built, Err(BuildError::InvalidUrl { .. })),
            "{url}: {built:?}"
        );
        let built = RedisStore::builder().pool(url).await;
        assert!(
            matches!(built, Err(BuildError::InvalidUrl { .. })),
            "{url}: {built:?}"
        );
        let built = RedisStore::builder().cluster([url]).await;
        assert!(
            matches!(built, Err(BuildError::InvalidUrl { .. })),
            "{url}: {built:?}"
        );
    }
    let server = RedisServer::start();
    for prefix in ["{tag}:", "has space:", "tab\t"] {
        let built = RedisStore::builder()
            .prefix(prefix)
            .multiplexed(&server.url())
            .await;
        assert!(
            matches!(built, Err(BuildError::InvalidPrefix { .. })),
            "{built:?}"
        );
    }
}

#[tokio::test]
async fn a_unix_socket_url_works() {
    let server = RedisServer::start_with(&["--unixsocket", "redis.sock"]);
    let url = format!("redis+unix://{}", server.dir().join("redis.sock").display());
    let store = common::uncached_store(&url).await;
    let policy = Policy::gcra("unix", "1/s".parse().unwrap()).unwrap();
    assert!(store.check(b"k", &policy, 1).await.unwrap().is_allowed());
    assert!(!store.check(b"k", &policy, 1).await.unwrap().is_allowed());
}
