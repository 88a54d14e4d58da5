//! `ClientIp`'s walk through forwarding headers, as a property: whatever bytes a client
//! writes to the left of what the trusted proxies appended, the client found is the one
//! the proxies recorded.

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use floodwall_tower::Key;
use floodwall_tower::extract::{ClientIp, ExtractKey, ForwardedHeader, PeerIp, parse_cidrs};
use http::{HeaderValue, Request};
use proptest::prelude::*;

/// The trusted proxies' networks: the peer and every hop the chain appends are in them.
const TRUSTED: &str = "10.0.0.0/8, 2001:db8:ffff::/48";

/// The key `extractor` gives a request from `peer` carrying these header lines.
fn key(
    extractor: &impl ExtractKey,
    peer: IpAddr,
    name: &'static str,
    lines: &[Vec<u8>],
) -> Vec<u8> {
    let mut req = Request::new(());
    for line in lines {
        let value = HeaderValue::from_bytes(line).expect("a valid header value");
        req.headers_mut().append(name, value);
    }
    req.extensions_mut().insert(SocketAddr::new(peer, 443));
    let mut key = Key::new();
    extractor
        .extract(&req.into_parts().0, &mut key)
        .expect("a key");
    key.as_bytes().to_vec()
}

/// The key a client connecting directly from `ip` gets.
fn direct(ip: IpAddr) -> Vec<u8> {
    key(&PeerIp::new(), ip, "x-forwarded-for", &[])
}

/// Bytes a header value may hold: HTAB, visible ASCII and obs-text (0x80-0xFF).
fn header_bytes() -> impl Strategy<Value = Vec<u8>> {
    let byte = prop_oneof![
        Just(b'\t'),
        0x20u8..=0x7e,
        0x80u8..=0xff,
        // The bytes that matter most to a parser, more often.
        prop::sample::select(vec![b',', b'"', b';', b'=', b' ', b'[', b']', b':']),
    ];
    prop::collection::vec(byte, 0..40)
}

/// A client outside the trusted networks.
fn client() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        any::<[u8; 4]>()
            .prop_filter("untrusted", |o| o[0] != 10)
            .prop_map(|o| IpAddr::V4(Ipv4Addr::from(o))),
        any::<[u16; 8]>()
            .prop_filter("untrusted and not IPv4", |s| {
                let ip = Ipv6Addr::from(*s);
                s[..3] != [0x2001, 0xdb8, 0xffff] && ip.to_ipv4_mapped().is_none()
            })
            .prop_map(|s| IpAddr::V6(Ipv6Addr::from(s))),
    ]
}

/// How a proxy writes `ip`: bare, with a port, bracketed (IPv6).
fn written(ip: IpAddr, style: u8, forwarded: bool) -> String {
    let node = match (ip, style % 3) {
        (IpAddr::V4(v4), 0) => v4.to_string(),
        (IpAddr::V4(v4), _) => format!("{v4}:{}", 1000 + u16::from(style)),
        (IpAddr::V6(v6), 0) => v6.to_string(),
        (IpAddr::V6(v6), 1) => format!("[{v6}]"),
        (IpAddr::V6(v6), _) => format!("[{v6}]:{}", 1000 + u16::from(style)),
    };
    match (forwarded, node.contains(':')) {
        (true, true) => format!("for=\"{node}\";proto=https"),
        (true, false) => format!("For={node}"),
        (false, _) => node,
    }
}

proptest! {
    #[test]
    fn nothing_left_of_the_trusted_chain_changes_the_client(
        junk in header_bytes(),
        client in client(),
        hops in prop::collection::vec((any::<[u8; 3]>(), any::<u8>()), 0..4),
        style in any::<u8>(),
        forwarded in any::<bool>(),
        new_line in any::<bool>(),
    ) {
        let (name, header) = if forwarded {
            ("forwarded", ForwardedHeader::Forwarded)
        } else {
            ("x-forwarded-for", ForwardedHeader::XForwardedFor)
        };
        // The first proxy appends the client's address to what the client sent (on the
        // same line, or on a line of its own); every later proxy appends the one before.
        let mut appended = vec![written(client, style, forwarded)];
        for (octets, hop_style) in &hops {
            let hop = IpAddr::V4(Ipv4Addr::new(10, octets[0], octets[1], octets[2]));
            appended.push(written(hop, *hop_style, forwarded));
        }
        let chain = appended.join(", ");
        let lines = if new_line {
            vec![junk, chain.into_bytes()]
        } else {
            vec![[junk, b", ".to_vec(), chain.into_bytes()].concat()]
        };
        let extractor = ClientIp::new(parse_cidrs(TRUSTED).unwrap()).header(header);
        let peer: IpAddr = "10.0.0.1".parse().unwrap();
        prop_assert_eq!(key(&extractor, peer, name, &lines), direct(client));
    }
}

#[test]
fn a_non_utf8_byte_left_of_the_chain_is_not_read() {
    let extractor = ClientIp::new(parse_cidrs(TRUSTED).unwrap());
    let peer: IpAddr = "10.0.0.1".parse().unwrap();
    let line = b"\xff\xfe, 198.51.100.7, 10.1.1.1".to_vec();
    let client: IpAddr = "198.51.100.7".parse().unwrap();
    assert_eq!(
        key(&extractor, peer, "x-forwarded-for", &[line]),
        direct(client)
    );
}

#[test]
fn trusted_networks_written_as_ipv4_mapped_ipv6_match_ipv4_peers() {
    let client: IpAddr = "198.51.100.7".parse().unwrap();
    let line = b"198.51.100.7".to_vec();
    for (trusted, peer) in [
        ("::ffff:10.0.0.0/104", "10.1.2.3"),
        ("::ffff:10.0.0.0/104", "::ffff:10.1.2.3"),
        ("::ffff:192.0.2.1", "192.0.2.1"),
        ("10.0.0.0/8", "::ffff:10.1.2.3"),
    ] {
        let extractor = ClientIp::new(parse_cidrs(trusted).unwrap());
        let peer: IpAddr = peer.parse().unwrap();
        assert_eq!(
            key(
                &extractor,
                peer,
                "x-forwarded-for",
                std::slice::from_ref(&line)
            ),
            direct(client),
            "{peer} is in {trusted}"
        );
    }
    // A peer outside them stays itself.
    let extractor = ClientIp::new(parse_cidrs("::ffff:10.0.0.0/104").unwrap());
    let outside: IpAddr = "11.0.0.1".parse().unwrap();
    assert_eq!(
        key(&extractor, outside, "x-forwarded-for", &[line]),
        direct(outside)
    );
}
