//! The client's address behind trusted reverse proxies.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::header::{FORWARDED, HeaderName};
use http::request::Parts;
use http::{HeaderMap, Request, StatusCode};
use ipnet::{IpNet, Ipv4Net};

use super::ip::{DEFAULT_V6_PREFIX, missing_peer, peer_ip, write_ip};
use super::{ExtractKey, Head, KeyError};
use crate::Key;

/// The most hops walked back through a forwarding header; past that, the request is keyed
/// by the last trusted proxy, so a huge header costs nothing.
const MAX_HOPS: usize = 32;

/// Which header a trusted proxy records the client's address in.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum ForwardedHeader {
    /// `X-Forwarded-For: client, proxy1, proxy2` (the default; nginx, HAProxy, most
    /// load balancers).
    #[default]
    XForwardedFor,
    /// RFC 7239 `Forwarded: for=client, for="[2001:db8::1]:4711"`.
    Forwarded,
}

/// Keys requests by the client's address as recorded by reverse proxies you trust, and
/// by the connection's address when the request did not come through one.
///
/// The header is read **from the right**: starting at the connection's peer, every hop in
/// a trusted network is skipped, and the first address outside them is the client.
/// Anything a client forged sits left of what the proxies appended and is never read.
///
/// - A peer outside the trusted networks is keyed by its own address, whatever it sent.
/// - If the entry where the walk stops is not an address (`unknown`, `_node`, not text),
///   the key is **missing** with status 400 ([`OnMissingKey`](super::OnMissingKey)
///   decides), never the proxy's: `ClientIp::new(..).or(Global)` limits such requests
///   together instead.
/// - Empty entries are skipped; if every entry is trusted, the leftmost one is the client.
///
/// IPv6 clients are keyed by their /64, and IPv4-mapped IPv6 compares as IPv4, as with
/// [`PeerIp`](super::PeerIp). There is deliberately no "leftmost entry" mode: the leftmost
/// entry is whatever the client wrote.
///
/// ```
/// use floodwall_tower::extract::{ClientIp, parse_cidrs};
///
/// // Behind a load balancer in 10.0.0.0/8 and a local sidecar.
/// let key = ClientIp::new(parse_cidrs("10.0.0.0/8, 127.0.0.1")?);
/// # let _ = key;
/// # Ok::<(), ipnet::AddrParseError>(())
/// ```
#[derive(Debug, Clone)]
pub struct ClientIp {
    trusted: Arc<[IpNet]>,
    header: ForwardedHeader,
    v4_prefix: u8,
    v6_prefix: u8,
}

impl ClientIp {
    /// Trusts the proxies in these networks. With none, it is [`PeerIp`](super::PeerIp).
    pub fn new(trusted: impl IntoIterator<Item = IpNet>) -> Self {
        Self {
            trusted: trusted.into_iter().map(canonical_net).collect(),
            header: ForwardedHeader::XForwardedFor,
            v4_prefix: 32,
            v6_prefix: DEFAULT_V6_PREFIX,
        }
    }

    /// Reads this header instead of `X-Forwarded-For`. Only one is read: a client could
    /// send the other one, which your proxy might pass along untouched.
    pub fn header(mut self, header: ForwardedHeader) -> Self {
        self.header = header;
        self
    }

    /// Keys IPv6 clients by their first `bits` bits (capped at 128; 64 by default).
    pub fn ipv6_prefix(mut self, bits: u8) -> Self {
        self.v6_prefix = bits.min(128);
        self
    }

    /// Keys IPv4 clients by their first `bits` bits (capped at 32; 32 by default).
    pub fn ipv4_prefix(mut self, bits: u8) -> Self {
        self.v4_prefix = bits.min(32);
        self
    }

    /// The client's address for this request, as the key is built from it, or why there
    /// is none: for logging.
    pub fn client_ip(&self, req: &Parts) -> Result<IpAddr, KeyError> {
        self.client_ip_of(req)
    }

    /// The key this extractor writes for a client at `ip` (as [`client_ip`](Self::client_ip)
    /// finds it): for an operator's call ([`StoreExt::unban`](floodwall_core::StoreExt::unban)).
    pub fn key_for(&self, ip: IpAddr) -> Key {
        let mut key = Key::new();
        write_ip(ip, self.v4_prefix, self.v6_prefix, &mut key);
        key
    }

    /// [`client_ip`](Self::client_ip) of a request whole or taken apart.
    fn client_ip_of(&self, req: &impl Head) -> Result<IpAddr, KeyError> {
        let peer = peer_ip(req).ok_or_else(missing_peer)?;
        self.resolve(peer, req.headers())
            .ok_or_else(|| unparseable(self.header))
    }

    fn key_of(&self, req: &impl Head, key: &mut Key) -> Result<(), KeyError> {
        let ip = self.client_ip_of(req)?;
        write_ip(ip, self.v4_prefix, self.v6_prefix, key);
        Ok(())
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.trusted.iter().any(|net| net.contains(&ip))
    }

    /// Walks the header from the right, starting at the peer; `None` when the entry where
    /// the walk stops is not an address.
    pub(crate) fn resolve(&self, peer: IpAddr, headers: &HeaderMap) -> Option<IpAddr> {
        if !self.is_trusted(peer) {
            return Some(peer);
        }
        let (name, quoted) = match self.header {
            ForwardedHeader::XForwardedFor => (HeaderName::from_static("x-forwarded-for"), false),
            ForwardedHeader::Forwarded => (FORWARDED, true),
        };
        let mut current = peer;
        let mut hops = 0;
        // Several header lines are one list, in order.
        let lines = headers.get_all(&name).into_iter().rev();
        let entries = lines.flat_map(|line| RevEntries {
            rest: Some(line.as_bytes()),
            quoted,
        });
        for entry in entries {
            let entry = entry.trim_ascii();
            if entry.is_empty() {
                continue;
            }
            hops += 1;
            if hops > MAX_HOPS {
                return Some(current);
            }
            let addr = match self.header {
                ForwardedHeader::XForwardedFor => parse_node(entry),
                ForwardedHeader::Forwarded => forwarded_for(entry).and_then(parse_node),
            };
            match addr {
                Some(ip) if self.is_trusted(ip) => current = ip,
                found => return found,
            }
        }
        Some(current)
    }
}

impl ExtractKey for ClientIp {
    fn extract(&self, req: &Parts, key: &mut Key) -> Result<(), KeyError> {
        self.key_of(req, key)
    }

    fn extract_request<B>(&self, req: &Request<B>, key: &mut Key) -> Option<Result<(), KeyError>> {
        Some(self.key_of(req, key))
    }
}

/// The entry where the walk stopped is not an address: the client's address is missing,
/// and the error names the header it should be in.
fn unparseable(header: ForwardedHeader) -> KeyError {
    let name = match header {
        ForwardedHeader::XForwardedFor => "x-forwarded-for",
        ForwardedHeader::Forwarded => "forwarded",
    };
    let reason = format!(
        "the {name} header's entry for the client (where the trusted proxies end) is not an \
         IP address"
    );
    KeyError::new(StatusCode::BAD_REQUEST, reason).naming(name)
}

/// A trusted network as peers are compared with it: peers that are IPv4-mapped IPv6 are
/// compared as IPv4, so a network within the mapped range (`::ffff:0:0/96` and longer
/// prefixes) is the IPv4 network it maps. A wider IPv6 network stays as it is.
fn canonical_net(net: IpNet) -> IpNet {
    let net = net.trunc();
    let IpNet::V6(v6) = net else {
        return net;
    };
    // A truncated network whose address is mapped keeps all of `::ffff`, so its prefix is
    // 96 or more: the subtraction checks what the address already says.
    match (
        v6.network().to_ipv4_mapped(),
        v6.prefix_len().checked_sub(96),
    ) {
        (Some(v4), Some(bits)) => Ipv4Net::new(v4, bits).map_or(net, IpNet::V4),
        _ => net,
    }
}

/// A header line's comma-separated entries, last first, as raw bytes: one entry that is
/// not text spoils only itself. With `quoted`, a comma between double quotes does not
/// split (RFC 7239's quoted strings). Quotes are paired from the right, which is exact for
/// every entry a proxy wrote: a client's unbalanced quote sits left of them all.
struct RevEntries<'a> {
    rest: Option<&'a [u8]>,
    quoted: bool,
}

impl<'a> Iterator for RevEntries<'a> {
    type Item = &'a [u8];

    fn next(&mut self) -> Option<&'a [u8]> {
        let rest = self.rest?;
        let mut in_quotes = false;
        for (i, &byte) in rest.iter().enumerate().rev() {
            match byte {
                b'"' if self.quoted => in_quotes = !in_quotes,
                b',' if !in_quotes => {
                    self.rest = Some(&rest[..i]);
                    return Some(&rest[i + 1..]);
                }
                _ => {}
            }
        }
        self.rest = None;
        Some(rest)
    }
}

/// The `for=` parameter of one `Forwarded` element, unquoted.
fn forwarded_for(element: &[u8]) -> Option<&[u8]> {
    element.split(|&b| b == b';').find_map(|pair| {
        let eq = pair.iter().position(|&b| b == b'=')?;
        let (name, value) = (pair[..eq].trim_ascii(), pair[eq + 1..].trim_ascii());
        if !name.eq_ignore_ascii_case(b"for") {
            return None;
        }
        Some(
            value
                .strip_prefix(b"\"")
                .and_then(|v| v.strip_suffix(b"\""))
                .unwrap_or(value),
        )
    })
}

/// An address as proxies write it: `192.0.2.1`, `192.0.2.1:80`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:443`.
fn parse_node(node: &[u8]) -> Option<IpAddr> {
    let node = std::str::from_utf8(node.trim_ascii()).ok()?;
    if let Ok(ip) = node.parse::<IpAddr>() {
        return Some(ip);
    }
    if let Ok(sock) = node.parse::<SocketAddr>() {
        return Some(sock.ip());
    }
    node.strip_prefix('[')
        .and_then(|n| n.strip_suffix(']'))
        .and_then(|n| n.parse().ok())
}

/// Parses a comma-separated list of networks (`"10.0.0.0/8, 192.168.1.10, ::1"`); a bare
/// address is a network of one. An empty string is an empty list.
pub fn parse_cidrs(list: &str) -> Result<Vec<IpNet>, ipnet::AddrParseError> {
    list.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(|s| match s.parse::<IpAddr>() {
            Ok(ip) => Ok(IpNet::from(ip)),
            Err(_) => s.parse::<IpNet>(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    fn headers(name: &str, values: &[&str]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append(
                HeaderName::from_bytes(name.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        h
    }

    fn lb() -> ClientIp {
        ClientIp::new(parse_cidrs("10.0.0.0/8, 2001:db8:ffff::/48").unwrap())
    }

    fn walk(extractor: &ClientIp, peer: &str, h: &HeaderMap) -> Option<IpAddr> {
        extractor.resolve(ip(peer), h)
    }

    /// A request's head from the trusted proxy 10.0.0.2, with these headers.
    fn from_proxy(h: HeaderMap) -> Parts {
        let mut req = Request::new(());
        *req.headers_mut() = h;
        req.extensions_mut()
            .insert(SocketAddr::new(ip("10.0.0.2"), 1));
        req.into_parts().0
    }

    #[test]
    fn an_entry_that_is_not_an_address_where_the_walk_stops_is_no_client() {
        let h = headers("x-forwarded-for", &["198.51.100.7, not-an-ip, 10.1.1.1"]);
        assert_eq!(walk(&lb(), "10.0.0.2", &h), None);
        // Through the extractor: a 400 naming the header, never the proxy's key.
        let err = lb().client_ip(&from_proxy(h)).unwrap_err();
        let bad_request = StatusCode::BAD_REQUEST;
        let (xff, reason) = ("x-forwarded-for", err.reason());
        assert_eq!((err.status(), err.missing()), (bad_request, xff));
        assert!(reason.starts_with("the x-forwarded-for header's entry"));
        let fwd = lb().header(ForwardedHeader::Forwarded);
        let hidden = from_proxy(headers("forwarded", &["for=_hidden"]));
        let err = fwd.client_ip(&hidden).unwrap_err();
        assert_eq!((err.status(), err.missing()), (bad_request, "forwarded"));
        assert!(err.reason().starts_with("the forwarded header's entry"));
        // No peer at all: the peer address is what is missing, a 500.
        let err = lb()
            .client_ip(&Request::new(()).into_parts().0)
            .unwrap_err();
        let server_error = StatusCode::INTERNAL_SERVER_ERROR;
        let peer = "peer address";
        assert_eq!((err.status(), err.missing()), (server_error, peer));
    }

    #[test]
    fn key_for_is_the_key_a_request_from_that_client_gets() {
        let h = headers("x-forwarded-for", &["2001:db8:1:2::7, 10.1.1.1"]);
        let client = ip("2001:db8:1:2::7");
        for extractor in [lb(), lb().ipv6_prefix(128), lb().ipv6_prefix(48)] {
            let mut key = Key::new();
            extractor.extract(&from_proxy(h.clone()), &mut key).unwrap();
            assert_eq!(extractor.key_for(client), key, "{extractor:?}");
        }
        let v4 = |s: &str| lb().ipv4_prefix(24).key_for(ip(s));
        assert_eq!(v4("198.51.100.7"), v4("198.51.100.200"));
        assert_ne!(v4("198.51.100.7"), v4("198.51.101.7"));
    }

    #[test]
    fn empty_entries_are_skipped() {
        let h = headers("x-forwarded-for", &["  "]);
        assert_eq!(walk(&lb(), "10.0.0.2", &h), Some(ip("10.0.0.2")));
        let h = headers("x-forwarded-for", &["198.51.100.7, , 10.1.1.1,"]);
        assert_eq!(walk(&lb(), "10.0.0.2", &h), Some(ip("198.51.100.7")));
    }

    #[test]
    fn no_header_from_a_proxy_is_the_proxy_and_all_trusted_is_the_leftmost() {
        let none = HeaderMap::new();
        assert_eq!(walk(&lb(), "10.0.0.2", &none), Some(ip("10.0.0.2")));
        let h = headers("x-forwarded-for", &["10.9.9.9, 10.1.1.1"]);
        assert_eq!(walk(&lb(), "10.0.0.2", &h), Some(ip("10.9.9.9")));
    }

    #[test]
    fn a_trusted_ipv6_peer_is_walked_past() {
        let h = headers("x-forwarded-for", &["198.51.100.7"]);
        let v6_proxy = "2001:db8:ffff:1::1";
        assert_eq!(walk(&lb(), v6_proxy, &h), Some(ip("198.51.100.7")));
    }

    #[test]
    fn forwarded_is_read_only_when_chosen() {
        let mut h = headers(
            "forwarded",
            &["for=1.2.3.4, for=\"[2001:db8::7]:4711\";proto=https, For=10.1.1.1"],
        );
        h.append("x-forwarded-for", HeaderValue::from_static("5.6.7.8"));
        let fwd = lb().header(ForwardedHeader::Forwarded);
        assert_eq!(walk(&fwd, "10.0.0.2", &h), Some(ip("2001:db8::7")));
        assert_eq!(walk(&lb(), "10.0.0.2", &h), Some(ip("5.6.7.8")));
        let hidden = headers("forwarded", &["for=_hidden, for=10.1.1.1"]);
        assert_eq!(walk(&fwd, "10.0.0.2", &hidden), None);
    }

    #[test]
    fn forwarded_quotes_in_a_proxys_element_keep_their_commas() {
        // A trusted proxy's element with a quoted comma in it: one element, whose `for`
        // is the proxy, so the client is the element left of it.
        let h = headers(
            "forwarded",
            &["for=198.51.100.7, for=10.1.1.1;host=\"a, for=203.0.113.66\""],
        );
        let fwd = lb().header(ForwardedHeader::Forwarded);
        assert_eq!(walk(&fwd, "10.0.0.2", &h), Some(ip("198.51.100.7")));
        // A quoted IPv6 address with a port, written by the proxy beside a quoted comma.
        let h = headers(
            "forwarded",
            &["for=\"[2001:db8::7]:4711\";by=\"x,y\", for=10.1.1.1"],
        );
        assert_eq!(walk(&fwd, "10.0.0.2", &h), Some(ip("2001:db8::7")));
    }

    #[test]
    fn the_walk_reads_exactly_max_hops_entries() {
        // `trusted` distinct trusted proxies, then the client to their left.
        let chain = |trusted: usize| {
            let mut entries = vec!["198.51.100.7".to_owned()];
            entries.extend((1..=trusted).rev().map(|i| format!("10.0.0.{i}")));
            headers("x-forwarded-for", &[&entries.join(", ")])
        };
        // The client is the MAX_HOPS-th entry from the right: found.
        let h = chain(MAX_HOPS - 1);
        assert_eq!(walk(&lb(), "10.0.0.200", &h), Some(ip("198.51.100.7")));
        // One more proxy: the walk stops at the last trusted one it read.
        let h = chain(MAX_HOPS);
        let last = format!("10.0.0.{MAX_HOPS}");
        assert_eq!(walk(&lb(), "10.0.0.200", &h), Some(ip(&last)));
    }

    #[test]
    fn mapped_networks_are_their_ipv4_networks() {
        let net = |s: &str| canonical_net(s.parse().unwrap());
        assert_eq!(net("::ffff:10.0.0.0/104"), net("10.0.0.0/8"));
        assert_eq!(net("::ffff:192.0.2.1/128"), net("192.0.2.1/32"));
        assert_eq!(net("::ffff:0:0/96"), net("0.0.0.0/0"));
        // Wider than the mapped range, or outside it: as written.
        assert_eq!(net("::/0").to_string(), "::/0");
        assert_eq!(net("::ffff:0:0/95").to_string(), "::fffe:0:0/95");
        assert_eq!(net("::ffff:10.0.0.0/80").to_string(), "::/80");
        assert_eq!(net("2001:db8::/32").to_string(), "2001:db8::/32");
    }

    #[test]
    fn cidr_lists_parse() {
        let nets = parse_cidrs(" 10.0.0.0/8 ,192.168.1.10,::1,").unwrap();
        assert_eq!(nets.len(), 3);
        assert!(parse_cidrs("").unwrap().is_empty());
        assert!(parse_cidrs("10.0.0.0/33").is_err());
        assert!(parse_cidrs("nonsense").is_err());
    }
}
