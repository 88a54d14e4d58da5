//! Any bytes as `X-Forwarded-For` or `Forwarded` lines, through `ClientIp`'s public API:
//! never a panic; a peer outside the trusted networks is always keyed by itself, whatever
//! it sent; and whatever a client wrote, once trusted proxies have appended the client's
//! address (and their own hops) to it, that address is the client found.
#![no_main]

use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use floodwall_tower::extract::{ClientIp, ForwardedHeader, parse_cidrs};
use http::{HeaderValue, Request};
use libfuzzer_sys::fuzz_target;

/// The trusted proxies; every hop appended below is in them.
const TRUSTED: &str = "10.0.0.0/8, 2001:db8::/32";

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else {
        return;
    };
    let Some((client_bytes, junk)) = rest.split_at_checked(16) else {
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
    let forwarded = header == ForwardedHeader::Forwarded;
    let trusted = parse_cidrs(TRUSTED).unwrap();
    let is_trusted = |ip: IpAddr| trusted.iter().any(|n| n.contains(&ip.to_canonical()));
    let extractor = ClientIp::new(trusted.clone()).header(header);

    // What the client sent, as it sent it: any lines a header value may hold.
    let mut lines: Vec<Vec<u8>> = junk
        .split(|&b| b == b'\n')
        .filter(|line| HeaderValue::from_bytes(line).is_ok())
        .map(<[u8]>::to_vec)
        .collect();

    // Untrusted peers pick nothing, whatever they sent.
    let untrusted: IpAddr = "203.0.113.9".parse().unwrap();
    let parts = request(name, &lines, untrusted);
    assert_eq!(extractor.client_ip(&parts), Ok(untrusted), "an untrusted peer picked its key");

    // The client's real address, outside the trusted networks.
    let octets: [u8; 16] = client_bytes.try_into().unwrap();
    let client = if selector & 2 == 0 {
        IpAddr::V4(Ipv4Addr::new(octets[0], octets[1], octets[2], octets[3]))
    } else {
        IpAddr::V6(Ipv6Addr::from(octets))
    };
    if is_trusted(client) || client.to_canonical() != client {
        return;
    }
    // The first proxy appends it to the client's last line or on a line of its own; two
    // trusted hops follow.
    let chain = [node(client, forwarded), node("10.1.2.3".parse().unwrap(), forwarded)];
    let chain = chain.join(", ").into_bytes();
    match lines.last_mut() {
        Some(last) if selector & 4 == 0 => last.extend([b", ".as_slice(), &chain].concat()),
        _ => lines.push(chain),
    }
    let parts = request(name, &lines, "10.0.0.1".parse().unwrap());
    assert_eq!(
        extractor.client_ip(&parts),
        Ok(client),
        "bytes left of the trusted chain changed the client"
    );
});

/// A request from `peer` with these header lines.
fn request(name: &'static str, lines: &[Vec<u8>], peer: IpAddr) -> http::request::Parts {
    let mut req = Request::new(());
    for line in lines {
        req.headers_mut()
            .append(name, HeaderValue::from_bytes(line).unwrap());
    }
    req.extensions_mut().insert(SocketAddr::new(peer, 1234));
    req.into_parts().0
}

/// How a proxy records `ip`.
fn node(ip: IpAddr, forwarded: bool) -> String {
    match (ip, forwarded) {
        (IpAddr::V6(v6), true) => format!("for=\"[{v6}]:4711\""),
        (ip, true) => format!("for={ip}"),
        (ip, false) => ip.to_string(),
    }
}
