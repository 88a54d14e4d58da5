//! A policy file's `[key]`, each option through a file: the kind, the proxies trusted,
//! the forwarding header, the address prefixes and the salt each decide which requests
//! share a count, so each test below fails when its option is ignored. Requests carry
//! their peer address as a server with connect info hands it over; the store's clock
//! never moves.

use std::convert::Infallible;
use std::net::SocketAddr;

use axum::body::Body;
use floodwall_core::{ManualClock, MemoryStore};
use floodwall_test_support::{gcra, hello, store};
use floodwall_tower::RateLimitLayer;
use floodwall_tower::extract::HeaderKey;
use floodwall_tower::file::PolicyFile;
use http::header::AUTHORIZATION;
use http::{HeaderName, Request, Response, StatusCode};
use tower::{Layer, Service, ServiceExt};

const EXAMPLE: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/policies.toml");

/// A request for `/` from `peer`, with these headers.
fn request(peer: &str, headers: &[(&str, &str)]) -> Request<Body> {
    let mut req = Request::get("/").body(Body::empty()).unwrap();
    req.extensions_mut()
        .insert(SocketAddr::new(peer.parse().unwrap(), 40000));
    for (name, value) in headers {
        req.headers_mut().insert(
            HeaderName::from_bytes(name.as_bytes()).unwrap(),
            value.parse().unwrap(),
        );
    }
    req
}

/// A service limited by the layer of the policy file `text` on `store`.
fn limited(
    text: &str,
    store: MemoryStore<ManualClock>,
) -> impl Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone + use<> {
    let file = PolicyFile::parse(text, "key.toml").unwrap();
    let (layer, _limits) = file.layer(store);
    layer.layer(hello())
}

/// The status of one request from `peer` with these headers.
async fn status<S>(svc: &S, peer: &str, headers: &[(&str, &str)]) -> StatusCode
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone,
{
    let res = svc.clone().oneshot(request(peer, headers)).await;
    res.unwrap().status()
}

/// How many requests from `peer` with these headers pass before the first refusal (at
/// most 50).
async fn passes<S>(svc: &S, peer: &str, headers: &[(&str, &str)]) -> usize
where
    S: Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone,
{
    for n in 0..50 {
        if status(svc, peer, headers).await == StatusCode::TOO_MANY_REQUESTS {
            return n;
        }
    }
    50
}

/// The policy every test below keys: 2 a minute, on every route.
const PER_KEY: &str = "[[policy]]\nname = \"per-key\"\nquota = \"2/min\"\ndefault = true\n";

/// A layer of this crate's own, on `store`, counting `per-key` by `key`: what the file's
/// layer shares counts with when both form the same keys.
fn by_hand(
    store: &MemoryStore<ManualClock>,
    key: HeaderKey,
) -> impl Service<Request<Body>, Response = Response<Body>, Error = Infallible> + Clone + use<> {
    RateLimitLayer::new(store.clone(), gcra("per-key", "2/min"))
        .key(key)
        .layer(hello())
}

#[tokio::test]
async fn the_key_is_the_one_the_file_names() {
    let (store, _clock) = store();
    let svc = limited(
        &format!(
            "[key]\nkind = \"header\"\nheader = \"x-api-key\"\nsalt = \"pepper\"\n\n{PER_KEY}"
        ),
        store.clone(),
    );
    let key = |k| [("x-api-key", k)];
    // One address, two keys: limited apart; one key from two addresses: together.
    assert_eq!(passes(&svc, "192.0.2.1", &key("a")).await, 2);
    assert_eq!(passes(&svc, "192.0.2.1", &key("b")).await, 2);
    assert_eq!(passes(&svc, "192.0.2.2", &key("a")).await, 0);
    // No key: refused with the extractor's status, as the layer does.
    assert_eq!(
        status(&svc, "192.0.2.1", &[]).await,
        StatusCode::BAD_REQUEST
    );

    // The key hashes the file's salt: a layer keyed by the same header with the same salt
    // finds key "a" spent on this store; without the salt, it is another key.
    let name = HeaderName::from_static("x-api-key");
    let salted = by_hand(&store, HeaderKey::new(name.clone()).salt("pepper"));
    assert_eq!(passes(&salted, "192.0.2.1", &key("a")).await, 0);
    let unsalted = by_hand(&store, HeaderKey::new(name));
    assert_eq!(passes(&unsalted, "192.0.2.1", &key("a")).await, 2);
}

#[tokio::test]
async fn a_bearer_key_is_the_token_hashed_with_the_files_salt() {
    let (store, _clock) = store();
    let svc = limited(
        &format!("[key]\nkind = \"bearer\"\nsalt = \"pepper\"\n\n{PER_KEY}"),
        store.clone(),
    );
    let token = |t| [("authorization", t)];
    assert_eq!(passes(&svc, "192.0.2.1", &token("Bearer t1")).await, 2);
    assert_eq!(passes(&svc, "192.0.2.2", &token("Bearer t1")).await, 0);
    assert_eq!(passes(&svc, "192.0.2.1", &token("Bearer t2")).await, 2);
    // The scheme is matched case-insensitively; another scheme is no token.
    assert_eq!(passes(&svc, "192.0.2.3", &token("bearer t1")).await, 0);
    for missing in [&token("Basic dXNlcjpwdw==")[..], &[]] {
        assert_eq!(
            status(&svc, "192.0.2.1", missing).await,
            StatusCode::BAD_REQUEST
        );
    }

    // The token alone, with the file's salt: the bearer extractor salted alike shares its
    // count; unsalted, or keyed by the whole header, it is another key.
    let salted = by_hand(&store, HeaderKey::bearer().salt("pepper"));
    assert_eq!(passes(&salted, "192.0.2.1", &token("Bearer t1")).await, 0);
    let unsalted = by_hand(&store, HeaderKey::bearer());
    assert_eq!(passes(&unsalted, "192.0.2.1", &token("Bearer t1")).await, 2);
    let whole = by_hand(&store, HeaderKey::new(AUTHORIZATION).salt("pepper"));
    assert_eq!(passes(&whole, "192.0.2.1", &token("Bearer t1")).await, 2);
}

/// The example file trusts `X-Forwarded-For` from 10.0.0.0/8 only; its default policy
/// (per-ip, a burst of 20) limits `/`.
#[tokio::test]
async fn the_example_file_believes_forwarding_from_its_proxies_only() {
    let (store, _clock) = store();
    let svc = limited(&std::fs::read_to_string(EXAMPLE).unwrap(), store);
    let via = |client| [("x-forwarded-for", client)];
    // Two clients behind one proxy: limited apart, each by its own address.
    assert_eq!(passes(&svc, "10.0.0.5", &via("192.0.2.1")).await, 20);
    assert_eq!(passes(&svc, "10.0.0.5", &via("192.0.2.2")).await, 20);
    assert_eq!(passes(&svc, "192.0.2.1", &[]).await, 0);
    // A client connecting directly is keyed by its own address, whatever it claims.
    assert_eq!(passes(&svc, "198.51.100.7", &via("192.0.2.3")).await, 20);
    assert_eq!(passes(&svc, "198.51.100.7", &[]).await, 0);
    assert_eq!(passes(&svc, "10.0.0.5", &via("192.0.2.3")).await, 20);
}

#[tokio::test]
async fn the_forwarded_header_is_read_when_the_file_names_it() {
    let (store, _clock) = store();
    let svc = limited(
        &format!(
            "[key]\nkind = \"client_ip\"\ntrusted_proxies = [\"10.0.0.0/8\"]\n\
             forwarded_header = \"forwarded\"\n\n{PER_KEY}"
        ),
        store,
    );
    let forwarded = |client| [("forwarded", client)];
    assert_eq!(
        passes(&svc, "10.0.0.5", &forwarded("for=192.0.2.1")).await,
        2
    );
    assert_eq!(
        passes(&svc, "10.0.0.5", &forwarded("for=\"[2001:db8::1]:4711\"")).await,
        2
    );
    assert_eq!(passes(&svc, "192.0.2.1", &[]).await, 0);
    assert_eq!(passes(&svc, "2001:db8::2", &[]).await, 0);
    // X-Forwarded-For is not read: the proxy itself is charged, never the address named.
    let xff = [("x-forwarded-for", "192.0.2.9")];
    assert_eq!(passes(&svc, "10.0.0.5", &xff).await, 2);
    assert_eq!(passes(&svc, "192.0.2.9", &[]).await, 2);
}

#[tokio::test]
async fn the_prefixes_group_addresses_as_the_file_says() {
    let kinds = [
        ("peer_ip", "kind = \"peer_ip\""),
        (
            "client_ip",
            "kind = \"client_ip\"\ntrusted_proxies = [\"10.0.0.0/8\"]",
        ),
    ];
    for (kind, key) in kinds {
        let (store, _clock) = store();
        let svc = limited(
            &format!("[key]\n{key}\nipv4_prefix = 24\nipv6_prefix = 48\n\n{PER_KEY}"),
            store,
        );
        // `client` directly, or behind the trusted proxy.
        let from = |client: &'static str| {
            let svc = svc.clone();
            async move {
                match kind {
                    "peer_ip" => passes(&svc, client, &[]).await,
                    _ => passes(&svc, "10.0.0.5", &[("x-forwarded-for", client)]).await,
                }
            }
        };
        assert_eq!(from("192.0.2.1").await, 2, "{kind}");
        assert_eq!(from("192.0.2.200").await, 0, "{kind}: the same /24");
        assert_eq!(from("192.0.3.1").await, 2, "{kind}");
        assert_eq!(from("2001:db8:1:1::1").await, 2, "{kind}");
        assert_eq!(from("2001:db8:1:ffff::1").await, 0, "{kind}: the same /48");
        assert_eq!(from("2001:db8:2::1").await, 2, "{kind}");
    }
}

#[tokio::test]
async fn a_global_key_is_one_count_for_everyone() {
    let (store, _clock) = store();
    let svc = limited(&format!("[key]\nkind = \"global\"\n\n{PER_KEY}"), store);
    assert_eq!(passes(&svc, "192.0.2.1", &[]).await, 2);
    assert_eq!(passes(&svc, "198.51.100.7", &[]).await, 0);
}
