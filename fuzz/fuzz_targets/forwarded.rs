//! Any bytes as `X-Forwarded-For` or `Forwarded` lines, through `ClientIp`'s public API:
//! never a panic; a peer outside the trusted networks is always keyed by itself, whatever
//! it sent; a trusted peer yields the peer or an address its header named.
#![no_main]

use std::net::{IpAddr, SocketAddr};

use floodwall_tower::extract::{ClientIp, ForwardedHeader, parse_cidrs};
use http::{HeaderValue, Request};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let header = if selector & 1 == 0 {
        ForwardedHeader::XForwardedFor
    } else {
        ForwardedHeader::Forwarded
    };
    let name = match header {
        ForwardedHeader::XForwardedFor => "x-forwarded-for",
        _ => "forwarded",
    };
    let peer: IpAddr = match (selector >> 1) % 4 {
        0 => "10.0.0.1".parse().unwrap(),
        1 => "2001:db8::1".parse().unwrap(),
        2 => "::ffff:10.9.9.9".parse().unwrap(),
        _ => "203.0.113.9".parse().unwrap(),
    };
    let mut req = Request::new(());
    for line in rest.split(|&b| b == b'\n') {
        if let Ok(value) = HeaderValue::from_bytes(line) {
            req.headers_mut().append(name, value);
        }
    }
    req.extensions_mut().insert(SocketAddr::new(peer, 1234));
    let parts = req.into_parts().0;
    let trusted = parse_cidrs("10.0.0.0/8, 2001:db8::/32").unwrap();
    let extractor = ClientIp::new(trusted.clone())
        .header(header)
        .ipv6_prefix(selector)
        .ipv4_prefix(selector);
    let client = extractor
        .client_ip(&parts)
        .expect("a peer address is there");
    let is_trusted = |ip: IpAddr| trusted.iter().any(|n| n.contains(&ip.to_canonical()));
    if !is_trusted(peer) {
        assert_eq!(client, peer, "an untrusted peer picked its key");
    } else if client != peer {
        assert!(
            named_in(rest).contains(&client),
            "{client} is neither the peer nor named by the header"
        );
    }
    let mut key = floodwall_tower::Key::new();
    floodwall_tower::extract::ExtractKey::extract(&extractor, &parts, &mut key).unwrap();
    assert!(!key.as_bytes().is_empty());
});

/// Every address any entry of the lines names, read leniently: the oracle the walk's
/// answer must come from.
fn named_in(lines: &[u8]) -> Vec<IpAddr> {
    let text = String::from_utf8_lossy(lines);
    text.split(['\n', ',', ';'])
        .map(|entry| entry.split_once('=').map_or(entry, |(_, v)| v))
        .map(|v| v.trim().trim_matches('"').trim())
        .filter_map(|node| {
            node.parse::<IpAddr>()
                .ok()
                .or_else(|| node.parse::<SocketAddr>().ok().map(|s| s.ip()))
                .or_else(|| {
                    node.strip_prefix('[')
                        .and_then(|n| n.strip_suffix(']'))
                        .and_then(|n| n.parse().ok())
                })
        })
        .collect()
}
