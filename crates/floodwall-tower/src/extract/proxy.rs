//! The client's address behind trusted reverse proxies.

use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use http::header::{FORWARDED, HeaderName};
use http::request::Parts;
use http::{HeaderMap, Request};
use ipnet::IpNet;

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
/// Each proxy appends the address it received the request from to the header, so the
/// header is read **from the right**: starting at the connection's peer, every hop whose
/// address is in a trusted network is skipped, and the first address outside them is
/// the client. Only proxies can write the entries to the right of the client; anything a
/// client forged sits to the left of them and is never reached.
///
/// - A peer outside the trusted networks is keyed by its own address, whatever headers it
///   sent: a client connecting directly cannot pick its key.
/// - An entry that does not parse (a hostname, `unknown`, an obfuscated `_node`) stops the
///   walk, and the request is keyed by the trusted proxy that recorded it.
/// - If every entry is a trusted proxy, the leftmost one is the client.
///
/// Like [`PeerIp`](super::PeerIp), IPv6 clients are keyed by their /64.
///
/// There is deliberately no "leftmost entry" or "trust every proxy" mode: the leftmost
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
#[derive(Clone)]
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
            trusted: trusted.into_iter().map(|n| n.trunc()).collect(),
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

    /// The client's address for this request, as the key is built from it, or `None`
    /// without a peer address. Useful for logging.
    pub fn client_ip(&self, req: &Parts) -> Option<IpAddr> {
        self.client_ip_of(req)
    }

    /// [`client_ip`](Self::client_ip) of a request whole or taken apart.
    #[inline]
    fn client_ip_of(&self, req: &impl Head) -> Option<IpAddr> {
        peer_ip(req).map(|peer| self.resolve(peer, req.headers()))
    }

    #[inline]
    fn key_of(&self, req: &impl Head, key: &mut Key) -> Result<(), KeyError> {
        let ip = self.client_ip_of(req).ok_or_else(missing_peer)?;
        write_ip(ip, self.v4_prefix, self.v6_prefix, key);
        Ok(())
    }

    fn is_trusted(&self, ip: IpAddr) -> bool {
        let ip = ip.to_canonical();
        self.trusted.iter().any(|net| net.contains(&ip))
    }

    /// Walks the header from the right, starting at the peer.
    pub(crate) fn resolve(&self, peer: IpAddr, headers: &HeaderMap) -> IpAddr {
        if !self.is_trusted(peer) {
            return peer;
        }
        let name: HeaderName = match self.header {
            ForwardedHeader::XForwardedFor => HeaderName::from_static("x-forwarded-for"),
            ForwardedHeader::Forwarded => FORWARDED,
        };
        let mut current = peer;
        let mut hops = 0;
        // Several header lines are one list, in order.
        for value in headers.get_all(&name).iter().rev() {
            let Ok(value) = value.to_str() else {
                return current;
            };
            for entry in value.rsplit(',') {
                hops += 1;
                if hops > MAX_HOPS {
                    return current;
                }
                let addr = match self.header {
                    ForwardedHeader::XForwardedFor => parse_node(entry),
                    ForwardedHeader::Forwarded => forwarded_for(entry).and_then(parse_node),
                };
                match addr {
                    Some(ip) if self.is_trusted(ip) => current = ip,
                    Some(ip) => return ip,
                    None => return current,
                }
            }
        }
        current
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

impl fmt::Debug for ClientIp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ClientIp")
            .field("trusted", &self.trusted)
            .field("header", &self.header)
            .field("v4_prefix", &self.v4_prefix)
            .field("v6_prefix", &self.v6_prefix)
            .finish()
    }
}

/// The `for=` parameter of one `Forwarded` element, unquoted.
fn forwarded_for(element: &str) -> Option<&str> {
    element.split(';').find_map(|pair| {
        let (name, value) = pair.split_once('=')?;
        name.trim()
            .eq_ignore_ascii_case("for")
            .then(|| value.trim().trim_matches('"'))
    })
}

/// An address as proxies write it: `192.0.2.1`, `192.0.2.1:80`, `2001:db8::1`,
/// `[2001:db8::1]`, `[2001:db8::1]:443`.
fn parse_node(node: &str) -> Option<IpAddr> {
    let node = node.trim();
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

    #[test]
    fn an_untrusted_peer_is_keyed_by_itself_whatever_it_forges() {
        let forged = headers("x-forwarded-for", &["1.2.3.4"]);
        assert_eq!(lb().resolve(ip("203.0.113.9"), &forged), ip("203.0.113.9"));
    }

    #[test]
    fn the_rightmost_untrusted_entry_is_the_client() {
        // The client forged "1.2.3.4"; the proxy appended the real address.
        let h = headers("x-forwarded-for", &["1.2.3.4, 198.51.100.7, 10.1.1.1"]);
        assert_eq!(lb().resolve(ip("10.0.0.2"), &h), ip("198.51.100.7"));
        // Several lines are one list.
        let h = headers("x-forwarded-for", &["1.2.3.4", "198.51.100.7", "10.1.1.1"]);
        assert_eq!(lb().resolve(ip("10.0.0.2"), &h), ip("198.51.100.7"));
    }

    #[test]
    fn garbage_stops_the_walk_at_the_last_trusted_proxy() {
        let h = headers("x-forwarded-for", &["198.51.100.7, not-an-ip, 10.1.1.1"]);
        assert_eq!(lb().resolve(ip("10.0.0.2"), &h), ip("10.1.1.1"));
        let h = headers("x-forwarded-for", &["  "]);
        assert_eq!(lb().resolve(ip("10.0.0.2"), &h), ip("10.0.0.2"));
    }

    #[test]
    fn no_header_from_a_proxy_is_the_proxy_and_all_trusted_is_the_leftmost() {
        assert_eq!(
            lb().resolve(ip("10.0.0.2"), &HeaderMap::new()),
            ip("10.0.0.2")
        );
        let h = headers("x-forwarded-for", &["10.9.9.9, 10.1.1.1"]);
        assert_eq!(lb().resolve(ip("10.0.0.2"), &h), ip("10.9.9.9"));
    }

    #[test]
    fn ports_brackets_and_ipv6_parse() {
        let h = headers("x-forwarded-for", &["[2001:db8::7]:4711, 10.1.1.1:80"]);
        assert_eq!(lb().resolve(ip("10.0.0.2"), &h), ip("2001:db8::7"));
        let h = headers("x-forwarded-for", &["198.51.100.7"]);
        assert_eq!(
            lb().resolve(ip("2001:db8:ffff:1::1"), &h),
            ip("198.51.100.7")
        );
    }

    #[test]
    fn forwarded_is_read_only_when_chosen() {
        let mut h = headers(
            "forwarded",
            &["for=1.2.3.4, for=\"[2001:db8::7]:4711\";proto=https, For=10.1.1.1"],
        );
        h.append("x-forwarded-for", HeaderValue::from_static("5.6.7.8"));
        let fwd = lb().header(ForwardedHeader::Forwarded);
        assert_eq!(fwd.resolve(ip("10.0.0.2"), &h), ip("2001:db8::7"));
        assert_eq!(lb().resolve(ip("10.0.0.2"), &h), ip("5.6.7.8"));
        let hidden = headers("forwarded", &["for=_hidden, for=10.1.1.1"]);
        assert_eq!(fwd.resolve(ip("10.0.0.2"), &hidden), ip("10.1.1.1"));
    }

    #[test]
    fn the_walk_is_bounded() {
        let long = vec!["10.1.1.1"; 100].join(",");
        let h = headers("x-forwarded-for", &[&format!("198.51.100.7,{long}")]);
        assert_eq!(lb().resolve(ip("10.0.0.2"), &h), ip("10.1.1.1"));
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
