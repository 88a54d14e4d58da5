//! Hostile input: floods of distinct keys (in Redis here; the memory store's resident memory
//! under a flood is measured alone, in floodwall-core's `tests/memory_growth.rs`), forged
//! and malformed forwarding headers, huge and non-UTF-8 header bytes, keys built to escape
//! their namespace or collide (10 KB, CR/LF, spaces, hash-tag braces), and quotas, costs and
//! times at the edges of u64. Nothing may panic, grow without bound, leave a key without a
//! TTL, or let one client's key reach another's state.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::time::Duration;

use axum::Router;
use axum::routing::get;
use floodwall::core::{MAX_SPAN, ManualClock};
use floodwall::redis::RedisStore;
use floodwall::tower::extract::{ClientIp, HeaderKey, parse_cidrs};
use floodwall::tower::{RateLimitLayer, Refusals};
use floodwall::{Algorithm, ConfigError, Error, MemoryStore, Policy, Quota, StoreExt};
use floodwall_test_support::serve;
use http::request::Parts;
use redis_harness::{RedisServer, key_slot};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

const T0: u64 = 1_700_006_400_000_000;

/// Keys an attacker would pick, each distinct from every other.
fn hostile_keys() -> Vec<Vec<u8>> {
    let long = vec![b'x'; 10 * 1024];
    let mut long2 = long.clone();
    *long2.last_mut().unwrap() = b'y';
    let digest_hex = "#{".to_owned() + &"0".repeat(64) + "}";
    vec![
        b"alice".to_vec(),
        b"alice ".to_vec(),
        b" alice".to_vec(),
        b"alice\r\n".to_vec(),
        b"alice\r\nDEL *".to_vec(),
        b"{alice}".to_vec(),
        b"{alice".to_vec(),
        b"alice}".to_vec(),
        b"}{".to_vec(),
        b"{}".to_vec(),
        b"".to_vec(),
        b"a:b".to_vec(),
        b"a\0b".to_vec(),
        vec![0xff, 0xfe, b'{', 0x80],
        "ålice".as_bytes().to_vec(),
        digest_hex.into_bytes(),
        long,
        long2,
        vec![b'z'; floodwall::redis::MAX_RAW_KEY_LEN],
        vec![b'z'; floodwall::redis::MAX_RAW_KEY_LEN + 1],
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flood_of_distinct_keys_in_redis_leaves_every_key_with_a_ttl() {
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let mut tasks = Vec::new();
    for algorithm in Algorithm::all() {
        let policy = Policy::new(
            format!("flood-{algorithm}"),
            algorithm,
            "5/hour".parse().unwrap(),
        )
        .unwrap();
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let mut keys: Vec<Vec<u8>> = (0..300u32)
                .map(|i| format!("client-{i}").into_bytes())
                .collect();
            keys.extend(hostile_keys());
            for key in &keys {
                for cost in [1, 0, 5] {
                    // The third check of a fresh key (cost 5 after 1) is a denial, which writes
                    // nothing: the key must still carry the TTL of its first write.
                    let d = store.check(key, &policy, cost).await.unwrap();
                    assert_eq!(d.is_allowed(), cost != 5, "{algorithm} {key:?}");
                }
            }
            keys.len()
        }));
    }
    let mut written = 0;
    for t in tasks {
        written += t.await.unwrap();
    }
    let without_ttl = redis.cmd(&[
        "EVAL",
        "local n = 0 for _, k in ipairs(redis.call('KEYS', '*')) do \
         if redis.call('PTTL', k) < 0 then n = n + 1 end end return n",
        "0",
    ]);
    let dbsize: usize = redis.cmd(&["DBSIZE"]).trim().parse().unwrap();
    eprintln!("{written} keys flooded into Redis: {dbsize} stored, {without_ttl} without a TTL");
    assert_eq!(dbsize, written, "every distinct key is its own Redis key");
    assert_eq!(without_ttl.trim(), "0");
}

#[test]
fn hostile_keys_never_escape_their_namespace_or_collide_in_redis_keys() {
    // Building keys needs no server: the layout is a pure function, checked here against
    // the cluster's own slot function.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let redis = RedisServer::start();
    let store = rt.block_on(RedisStore::connect(&redis.url())).unwrap();
    let a = Policy::gcra("a", "1/min".parse().unwrap()).unwrap();
    let ab = Policy::gcra("a-b", "1/min".parse().unwrap()).unwrap();
    let mut seen = HashSet::new();
    for policy in [&a, &ab] {
        let ns = format!("floodwall:{}:gcra.", policy.name());
        for key in hostile_keys() {
            let rk = store.redis_key(&key, policy);
            let text = String::from_utf8(rk.clone()).expect("Redis keys are printable text");
            assert!(text.starts_with(&ns), "{text}");
            assert!(
                !text.chars().any(|c| c.is_whitespace() || c.is_control()),
                "{text:?}"
            );
            // Exactly one hash tag, at the end: the user key (or its digest) alone picks
            // the slot, and it cannot move the tag into the prefix or the policy name.
            assert_eq!(text.matches('{').count(), 1, "{text}");
            assert_eq!(text.matches('}').count(), 1, "{text}");
            assert!(text.ends_with('}'));
            let tag = &text[text.find('{').unwrap() + 1..text.len() - 1];
            if !tag.is_empty() {
                // (An empty user key gives `{}`, which Redis does not read as a tag: the
                // whole key picks the slot, which is just as deterministic.)
                assert_eq!(key_slot(&rk), key_slot(tag.as_bytes()));
            }
            assert!(seen.insert(rk), "two keys share a Redis key: {text}");
        }
    }

    // And on the server: exhausting one hostile key leaves every other one untouched.
    rt.block_on(async {
        for key in hostile_keys() {
            assert!(store.check(&key, &a, 1).await.unwrap().is_allowed());
            assert!(
                !store.check(&key, &a, 1).await.unwrap().is_allowed(),
                "{key:?}"
            );
        }
        for key in hostile_keys() {
            assert!(store.check(&key, &ab, 1).await.unwrap().is_allowed());
        }
    });
    let memory = MemoryStore::new();
    for key in hostile_keys() {
        assert!(
            memory.check_now(&key, &a, 1).unwrap().unwrap().is_allowed(),
            "{key:?}"
        );
    }
    for key in hostile_keys() {
        assert!(!memory.check_now(&key, &a, 1).unwrap().unwrap().is_allowed());
        assert!(
            memory
                .check_now(&key, &ab, 1)
                .unwrap()
                .unwrap()
                .is_allowed()
        );
    }
}

/// Sends a raw HTTP/1.1 request (any bytes in the head) and returns the status, or 0 when
/// the server closed the connection without an answer.
async fn raw_status(addr: SocketAddr, headers: &[&[u8]]) -> u16 {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut req = b"GET / HTTP/1.1\r\nHost: x\r\nConnection: close\r\n".to_vec();
    for h in headers {
        req.extend_from_slice(h);
        req.extend_from_slice(b"\r\n");
    }
    req.extend_from_slice(b"\r\n");
    // The server may refuse a huge head before reading all of it.
    let _ = stream.write_all(&req).await;
    let mut raw = Vec::new();
    let _ = stream.read_to_end(&mut raw).await;
    let text = String::from_utf8_lossy(&raw);
    text.split(' ')
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0)
}

fn hello(layer_router: impl FnOnce(Router) -> Router) -> Router {
    layer_router(Router::new().route("/", get(|| async { "hello" })))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn forged_malformed_huge_and_binary_headers_cannot_pick_a_key() {
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let once = Policy::gcra("fwd", "1/min".parse().unwrap()).unwrap();
    let huge_xff = format!("X-Forwarded-For: {}", vec!["198.51.100.1"; 2_000].join(","));
    let forged: Vec<Vec<u8>> = vec![
        b"X-Forwarded-For: 198.51.100.7".to_vec(),
        b"X-Forwarded-For: 198.51.100.8, 10.0.0.1".to_vec(),
        b"Forwarded: for=198.51.100.9".to_vec(),
        b"X-Forwarded-For: not-an-ip, ::::, 999.1.1.1".to_vec(),
        b"Forwarded: for=\"[2001:db8::1\";;;for=".to_vec(),
        b"X-Forwarded-For: \xff\xfe\x80 198.51.100.10".to_vec(),
        huge_xff.into_bytes(),
    ];

    // From an untrusted peer, whatever it forges, it is keyed by its own address: one
    // request passes, every other is refused.
    let untrusted = serve(hello(|r| {
        r.layer(RateLimitLayer::new(store.clone(), once.clone()).key(ClientIp::new([])))
    }))
    .await;
    let mut statuses = Vec::new();
    for h in &forged {
        statuses.push(raw_status(untrusted, &[h]).await);
    }
    assert_eq!(statuses[0], 200);
    assert!(statuses[1..].iter().all(|&s| s == 429), "{statuses:?}");

    // Behind a trusted proxy (the loopback peer), an entry that is not an address where
    // the walk stops leaves the client unknown (400), never keyed by the proxy; a header
    // the extractor does not read leaves the proxy as the client; a huge header is walked
    // only 32 hops.
    let behind = Policy::gcra("behind", "1/min".parse().unwrap()).unwrap();
    let trusted = serve(hello(|r| {
        r.layer(
            RateLimitLayer::new(store.clone(), behind.clone()).key(ClientIp::new(
                parse_cidrs("127.0.0.1, 198.51.100.1").unwrap(),
            )),
        )
    }))
    .await;
    let mut statuses = Vec::new();
    for h in &forged[3..] {
        statuses.push(raw_status(trusted, &[h]).await);
    }
    eprintln!("garbage, binary and huge X-Forwarded-For behind a trusted proxy: {statuses:?}");
    // Garbage and binary entries: 400. `Forwarded` (not read): keyed by the proxy
    // (127.0.0.1). The huge header is walked 32 hops of the trusted 198.51.100.1 and keyed
    // by that proxy: once more, refused.
    assert_eq!(statuses, [400, 200, 400, 200]);
    assert_eq!(raw_status(trusted, &[&forged[6]]).await, 429);

    // A header that is not even a legal HTTP field value is refused by the server itself
    // or keyed as above; never a panic, never a 5xx from the limiter.
    for h in [
        &b"X-Forwarded-For: a\x00b"[..],
        b"X-Forwarded-For: \x7f",
        b"Forwarded: \x01",
    ] {
        let s = raw_status(trusted, &[h]).await;
        assert!(matches!(s, 400 | 429), "{h:?}: {s}");
    }
    let keys = redis.cmd(&["KEYS", "*"]);
    for key in keys.lines() {
        assert!(
            key.starts_with("floodwall:fwd:") || key.starts_with("floodwall:behind:"),
            "{key}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_header_bytes_as_keys_stay_in_their_namespace_over_http() {
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    let policy = Policy::gcra("user", "1/min".parse().unwrap()).unwrap();
    // The worst extractor: the raw bytes of a client-chosen header, unhashed.
    let raw = |req: &Parts| req.headers.get("x-user").map(|v| v.as_bytes().to_vec());
    let api = Policy::gcra("api", "1/min".parse().unwrap()).unwrap();
    let addr = serve(hello(|r| {
        r.layer(RateLimitLayer::new(store.clone(), policy.clone()).key(raw))
            .layer(
                RateLimitLayer::new(store.clone(), api.clone())
                    .key(HeaderKey::new(http::HeaderName::from_static("x-api-key")))
                    .refusals(
                        Refusals::new().missing_key(floodwall::tower::extract::OnMissingKey::Skip),
                    ),
            )
    }))
    .await;
    let users: Vec<Vec<u8>> = vec![
        b"alice".to_vec(),
        b"al ice".to_vec(),
        b"{alice}".to_vec(),
        b"al}{ice".to_vec(),
        b"\xff\xfe\x80".to_vec(),
        b"\xff\xfe\x81".to_vec(),
        vec![b'k'; 10 * 1024],
        [vec![b'k'; 10 * 1024 - 1], b"j".to_vec()].concat(),
    ];
    for user in &users {
        let h = [b"X-User: ".as_slice(), user].concat();
        assert_eq!(raw_status(addr, &[&h]).await, 200, "{user:?}");
    }
    for user in &users {
        let h = [b"X-User: ".as_slice(), user].concat();
        assert_eq!(
            raw_status(addr, &[&h]).await,
            429,
            "{user:?} shares no state with another"
        );
    }
    // API keys, binary or huge, are hashed before they reach the store.
    let api_keys: [&[u8]; 3] = [
        b"X-Api-Key: \xc3\x28{}",
        b"X-Api-Key: a b c",
        &[b"X-Api-Key: ".as_slice(), &[b'q'; 8 * 1024]].concat(),
    ];
    for (i, key) in api_keys.iter().enumerate() {
        let user = format!("X-User: bob{i}");
        let first = raw_status(addr, &[key, user.as_bytes()]).await;
        let again = raw_status(addr, &[key, b"X-User: carol"]).await;
        assert_eq!((first, again), (200, 429), "{key:?}");
    }
    let keys = redis.cmd(&["KEYS", "*"]);
    let keys: Vec<&str> = keys.lines().collect();
    assert_eq!(keys.len(), users.len() + 3 + 3, "{keys:#?}");
    for key in keys {
        assert!(
            key.starts_with("floodwall:user:gcra.") || key.starts_with("floodwall:api:gcra."),
            "{key}"
        );
        if key.starts_with("floodwall:api:") {
            // The extractor's SHA-256 digest, 32 bytes, in hex: never the key itself.
            let digest = key.rsplit_once(":x{").map(|(_, d)| d.trim_end_matches('}'));
            assert_eq!(
                digest.map(str::len),
                Some(64),
                "API keys are stored hashed: {key}"
            );
        }
    }
}

#[test]
fn quotas_at_the_edges_are_errors_at_construction() {
    let q = |s: &str| s.parse::<Quota>();
    assert_eq!(q("0/s"), Err(ConfigError::ZeroCount));
    assert!(matches!(
        q("18446744073709551616/s"),
        Err(ConfigError::Parse { .. })
    ));
    assert!(matches!(
        Quota::new(1, Duration::from_nanos(1)),
        Err(ConfigError::PeriodTooShort { .. })
    ));
    assert!(matches!(
        Quota::new(1, Duration::from_nanos(999)),
        Err(ConfigError::PeriodTooShort { .. })
    ));
    assert_eq!(
        Quota::new(1, Duration::from_nanos(1_500)).unwrap().period(),
        Duration::from_micros(2)
    );
    assert!(matches!(
        Quota::new(1, Duration::MAX),
        Err(ConfigError::SpanTooLong { .. })
    ));
    assert!(matches!(
        q("1/36525d"),
        Err(ConfigError::SpanTooLong { .. })
    ));
    assert!(Quota::new(1, MAX_SPAN).is_ok());
    assert_eq!(q("1/s burst 0"), Err(ConfigError::ZeroBurst));

    // Counts and bursts stop at 2^53 - 1, where Lua's doubles stop being exact.
    assert!(matches!(
        Quota::per_second(u64::MAX),
        Err(ConfigError::CountTooLarge { what: "count", .. })
    ));
    let max = Quota::per_second(Quota::MAX_COUNT).unwrap();
    for algorithm in Algorithm::all() {
        // 2^53 - 1 per second is more than one per microsecond, or a log too large; a
        // window only counts, so it accepts it (and runs it: see the next test).
        let windowed = matches!(
            algorithm,
            Algorithm::FixedWindow | Algorithm::SlidingWindow { .. }
        );
        assert_eq!(
            Policy::new("edge", algorithm, max).is_ok(),
            windowed,
            "{algorithm}"
        );
    }
    assert!(matches!(
        Quota::new(1, MAX_SPAN).unwrap().with_burst(u64::MAX),
        Err(ConfigError::CountTooLarge { what: "burst", .. })
    ));
    let bursty = Quota::new(1, MAX_SPAN)
        .unwrap()
        .with_burst(Quota::MAX_COUNT)
        .unwrap();
    for algorithm in [
        Algorithm::Gcra,
        Algorithm::TOKEN_BUCKET,
        Algorithm::LeakyBucket,
    ] {
        assert!(matches!(
            Policy::new("edge", algorithm, bursty),
            Err(ConfigError::SpanTooLong { .. })
        ));
    }
    let err = Policy::new("edge", Algorithm::Gcra, max).unwrap_err();
    assert!(
        err.to_string().contains("more than one per microsecond"),
        "{err}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn costs_and_times_at_the_edges_never_overflow() {
    let redis = RedisServer::start();
    let store = RedisStore::connect(&redis.url()).await.unwrap();
    // A trillion per second: far past any real quota, well inside Lua's exact integers.
    let quotas = [
        "1/us",
        "1/100ms",
        "1000/s",
        "1/36500d",
        "10000/36500d",
        "1000000000000/s",
    ];
    // Quotas an algorithm cannot enforce are refused at construction, never skipped
    // unseen: each refusal is listed here with the reason it is given.
    let mut refused = Vec::new();
    for (q, quota) in quotas.into_iter().enumerate() {
        for algorithm in Algorithm::all() {
            // A name per quota: the memory store is new for each, and one name's state
            // in Redis would carry over to the next quota (guide::quota_changes).
            let policy = match Policy::new(
                format!("edge-{}-{q}", algorithm.name()),
                algorithm,
                quota.parse().unwrap(),
            ) {
                Ok(policy) => policy,
                Err(e) => {
                    // The error's kind: its variant's name.
                    let kind = format!("{e:?}");
                    let kind = kind.split([' ', '{']).next().unwrap().to_owned();
                    refused.push((quota, algorithm.name(), kind));
                    continue;
                }
            };
            let limit = policy.limit();
            for now in [0, 1, T0, u64::MAX / 2, u64::MAX - 1, u64::MAX] {
                let clock = ManualClock::new(now);
                let memory = MemoryStore::builder().clock(clock.clone()).build();
                let key = now.to_be_bytes();
                for cost in [0, 1, limit, limit.saturating_add(1), u64::MAX] {
                    let m = memory.check_now(&key, &policy, cost).unwrap();
                    let r = store.at(now).check(&key, &policy, cost).await;
                    match (&m, &r) {
                        (Err(Error::CostTooHigh { .. }), Err(Error::CostTooHigh { .. })) => {
                            assert!(cost > limit)
                        }
                        (Ok(m), Ok(r)) => {
                            // Both stores decide alike; `at` clamps times past the
                            // year 2155 (where Lua's numbers stop being exact), so the
                            // memory store's answers there are not Redis's.
                            if now <= T0 {
                                assert_eq!(m, r, "{policy:?} at {now} cost {cost}");
                            }
                            assert!(cost <= limit);
                            assert!(m.remaining <= limit && r.remaining <= limit);
                            assert!(m.reset_after <= MAX_SPAN * 2 && r.reset_after <= MAX_SPAN * 2);
                            for retry in [m.retry_after, r.retry_after].into_iter().flatten() {
                                assert!(retry <= MAX_SPAN * 2 && retry > Duration::ZERO);
                            }
                        }
                        _ => panic!("{policy:?} at {now} cost {cost}: memory {m:?}, redis {r:?}"),
                    }
                }
                clock.set(now.wrapping_add(1));
                let _ = memory.check_now(&key, &policy, 1).unwrap().unwrap();
            }
        }
    }
    let expected = [
        // Ten buckets of a microsecond's tenth.
        ("1/us", "sliding_window", "BadPrecision"),
        // Under a microsecond per unit.
        ("1000000000000/s", "gcra", "RateTooHigh"),
        ("1000000000000/s", "token_bucket", "RateTooHigh"),
        ("1000000000000/s", "leaky_bucket", "RateTooHigh"),
        // Past the most entries a log holds.
        ("1000000000000/s", "sliding_log", "LogTooLarge"),
    ];
    let expected = expected.map(|(q, a, k)| (q, a, k.to_owned()));
    assert_eq!(refused, expected);
    // The largest window count works the same in memory and in Redis.
    let huge = Policy::new(
        "huge",
        Algorithm::FixedWindow,
        Quota::per_second(Quota::MAX_COUNT).unwrap(),
    )
    .unwrap();
    let m = MemoryStore::builder()
        .clock(ManualClock::new(T0))
        .build()
        .check_now(b"k", &huge, Quota::MAX_COUNT - 1)
        .unwrap()
        .unwrap();
    let r = store
        .at(T0)
        .check(b"k", &huge, Quota::MAX_COUNT - 1)
        .await
        .unwrap();
    assert_eq!(m, r);
    assert_eq!((r.is_allowed(), r.remaining), (true, 1));

    // A share of an edge policy is an edge policy too.
    let p = Policy::gcra("edge", "1/36500d".parse().unwrap()).unwrap();
    assert_eq!(p.share(u32::MAX).unwrap().limit(), 1);
}
