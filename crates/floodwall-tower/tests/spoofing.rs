//! The trusted-proxy extractor against forged headers, over real HTTP: the test client
//! connects from 127.0.0.1, which plays the proxy when trusted and the client when not.

use axum::Router;
use axum::routing::get;
use floodwall_test_support::*;
use floodwall_tower::RateLimitLayer;
use floodwall_tower::extract::{ClientIp, ForwardedHeader, parse_cidrs};

async fn server(client_ip: ClientIp) -> std::net::SocketAddr {
    let (store, _clock) = store();
    let layer = RateLimitLayer::new(store, gcra("per-client", "1/min")).key(client_ip);
    serve(
        Router::new()
            .route("/", get(|| async { "hi" }))
            .layer(layer),
    )
    .await
}

async fn status(addr: std::net::SocketAddr, headers: &[(&str, &str)]) -> u16 {
    http_get(addr, "/", headers).await.status
}

#[tokio::test]
async fn a_forged_header_from_an_untrusted_peer_is_ignored() {
    // Nothing is trusted: the loopback client is keyed by its own address.
    let addr = server(ClientIp::new([])).await;
    assert_eq!(
        status(addr, &[("x-forwarded-for", "198.51.100.1")]).await,
        200
    );
    assert_eq!(
        status(addr, &[("x-forwarded-for", "198.51.100.2")]).await,
        429
    );
    assert_eq!(
        status(addr, &[("forwarded", "for=198.51.100.3")]).await,
        429
    );

    // Trusting some other network changes nothing for this peer.
    let addr = server(ClientIp::new(parse_cidrs("10.0.0.0/8").unwrap())).await;
    assert_eq!(
        status(addr, &[("x-forwarded-for", "198.51.100.1")]).await,
        200
    );
    assert_eq!(
        status(addr, &[("x-forwarded-for", "198.51.100.2")]).await,
        429
    );
}

#[tokio::test]
async fn through_a_trusted_proxy_the_rightmost_untrusted_hop_is_the_client() {
    let addr = server(ClientIp::new(parse_cidrs("127.0.0.0/8").unwrap())).await;
    assert_eq!(
        status(addr, &[("x-forwarded-for", "198.51.100.1")]).await,
        200
    );
    assert_eq!(
        status(addr, &[("x-forwarded-for", "198.51.100.2")]).await,
        200
    );
    assert_eq!(
        status(addr, &[("x-forwarded-for", "198.51.100.1")]).await,
        429
    );
    // The client forges a leftmost entry: the proxy's entry still names it.
    assert_eq!(
        status(addr, &[("x-forwarded-for", "203.0.113.99, 198.51.100.2")]).await,
        429
    );
    // A trusted hop on the right is skipped.
    assert_eq!(
        status(addr, &[("x-forwarded-for", "198.51.100.1, 127.0.0.5")]).await,
        429
    );
}

#[tokio::test]
async fn ipv6_clients_are_keyed_by_their_64() {
    let addr = server(ClientIp::new(parse_cidrs("127.0.0.1").unwrap())).await;
    let xff = |v: &'static str| [("x-forwarded-for", v)];
    assert_eq!(status(addr, &xff("2001:db8:1:2::1")).await, 200);
    // Another address in the same /64: the same client.
    assert_eq!(
        status(addr, &xff("2001:db8:1:2:ffff:ffff:ffff:ffff")).await,
        429
    );
    assert_eq!(status(addr, &xff("[2001:db8:1:2::abcd]:4711")).await, 429);
    // The next /64 is another client.
    assert_eq!(status(addr, &xff("2001:db8:1:3::1")).await, 200);

    let strict = server(ClientIp::new(parse_cidrs("127.0.0.1").unwrap()).ipv6_prefix(48)).await;
    assert_eq!(status(strict, &xff("2001:db8:1:2::1")).await, 200);
    assert_eq!(status(strict, &xff("2001:db8:1:ffff::1")).await, 429);
}

#[tokio::test]
async fn forwarded_is_honoured_only_when_configured() {
    let trusted = parse_cidrs("127.0.0.1").unwrap();
    let addr = server(ClientIp::new(trusted).header(ForwardedHeader::Forwarded)).await;
    let fwd = |v: &'static str| [("forwarded", v)];
    assert_eq!(status(addr, &fwd("for=198.51.100.1")).await, 200);
    assert_eq!(status(addr, &fwd("for=\"[2001:db8::1]:80\"")).await, 200);
    assert_eq!(
        status(addr, &fwd("for=203.0.113.5, for=198.51.100.1")).await,
        429
    );
    // X-Forwarded-For is not read: keyed by the proxy (the peer) itself, once.
    assert_eq!(
        status(addr, &[("x-forwarded-for", "198.51.100.9")]).await,
        200
    );
    assert_eq!(
        status(addr, &[("x-forwarded-for", "198.51.100.8")]).await,
        429
    );
}
