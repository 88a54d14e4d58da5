//! The connection's peer address, with IPv6 keyed by network prefix.

use std::net::{IpAddr, SocketAddr};

use http::request::Parts;
use http::{Request, StatusCode};

use super::{ExtractKey, Head, KeyError};
use crate::Key;

/// The IPv6 prefix clients are keyed by by default: what one host or home network is
/// given, so one host cannot mint 2^64 keys.
pub(crate) const DEFAULT_V6_PREFIX: u8 = 64;

/// Keys requests by the address of the connection they came on: for clients that connect
/// directly (behind a proxy, use [`ClientIp`](super::ClientIp)). IPv6 is keyed by its /64,
/// IPv4-mapped IPv6 as the IPv4 address it is.
///
/// The address is read from the request's extensions: axum's `ConnectInfo<SocketAddr>`
/// (feature `axum`), tonic's `TcpConnectInfo` (feature `tonic`), or a plain [`SocketAddr`]
/// or [`IpAddr`] (for hyper, insert one yourself). Without one, the key is missing with
/// status 500: the server is misconfigured.
#[derive(Debug, Clone, Copy)]
pub struct PeerIp {
    v4_prefix: u8,
    v6_prefix: u8,
}

impl PeerIp {
    /// IPv4 by address, IPv6 by /64.
    pub fn new() -> Self {
        Self {
            v4_prefix: 32,
            v6_prefix: DEFAULT_V6_PREFIX,
        }
    }

    /// Keys IPv6 clients by their first `bits` bits (capped at 128). `/56` or `/48` are
    /// stricter (one key per site), `/128` keys every address apart.
    pub fn ipv6_prefix(mut self, bits: u8) -> Self {
        self.v6_prefix = bits.min(128);
        self
    }

    /// Keys IPv4 clients by their first `bits` bits (capped at 32; 32 by default).
    pub fn ipv4_prefix(mut self, bits: u8) -> Self {
        self.v4_prefix = bits.min(32);
        self
    }

    /// The key this extractor writes for a client at `ip`: for an operator's call on one
    /// client ([`StoreExt::unban`](floodwall_core::StoreExt::unban)).
    ///
    /// ```
    /// use floodwall_tower::extract::PeerIp;
    /// use std::net::IpAddr;
    ///
    /// let by_64 = PeerIp::new();
    /// let a: IpAddr = "2001:db8::1".parse()?;
    /// let b: IpAddr = "2001:db8::2".parse()?;
    /// assert_eq!(by_64.key_for(a).as_bytes(), by_64.key_for(b).as_bytes());
    /// # Ok::<(), std::net::AddrParseError>(())
    /// ```
    pub fn key_for(&self, ip: IpAddr) -> Key {
        let mut key = Key::new();
        write_ip(ip, self.v4_prefix, self.v6_prefix, &mut key);
        key
    }
}

impl Default for PeerIp {
    fn default() -> Self {
        Self::new()
    }
}

impl PeerIp {
    fn key_of(&self, req: &impl Head, key: &mut Key) -> Result<(), KeyError> {
        let ip = peer_ip(req).ok_or_else(missing_peer)?;
        write_ip(ip, self.v4_prefix, self.v6_prefix, key);
        Ok(())
    }
}

impl ExtractKey for PeerIp {
    fn extract(&self, req: &Parts, key: &mut Key) -> Result<(), KeyError> {
        self.key_of(req, key)
    }

    fn extract_request<B>(&self, req: &Request<B>, key: &mut Key) -> Option<Result<(), KeyError>> {
        Some(self.key_of(req, key))
    }
}

pub(crate) fn missing_peer() -> KeyError {
    KeyError::new(
        StatusCode::INTERNAL_SERVER_ERROR,
        "no peer address in the request (serve axum with \
         into_make_service_with_connect_info::<SocketAddr>() and enable floodwall's `axum` \
         feature; tonic needs the `tonic` feature)",
    )
    .naming("peer address")
}

/// The connection's peer address, from whichever extension the server put it in
/// (see [`PeerIp`]).
pub fn peer_addr(req: &Parts) -> Option<IpAddr> {
    peer_ip(req)
}

/// [`peer_addr`] of a request whole or taken apart.
pub(crate) fn peer_ip(req: &impl Head) -> Option<IpAddr> {
    let ext = req.extensions();
    #[cfg(feature = "axum")]
    if let Some(info) = ext.get::<axum::extract::ConnectInfo<SocketAddr>>() {
        return Some(info.0.ip());
    }
    #[cfg(feature = "tonic")]
    if let Some(addr) = ext
        .get::<tonic::transport::server::TcpConnectInfo>()
        .and_then(|info| info.remote_addr())
    {
        return Some(addr.ip());
    }
    if let Some(addr) = ext.get::<SocketAddr>() {
        return Some(addr.ip());
    }
    ext.get::<IpAddr>().copied()
}

/// Writes `ip` masked to its prefix: a family tag, then only the prefix's bytes.
// Forced inline: as a call it costs instructions on every request (measured by
// crates/floodwall-bench/benches/http_instructions.rs).
#[inline(always)]
pub(crate) fn write_ip(ip: IpAddr, v4_prefix: u8, v6_prefix: u8, key: &mut Key) {
    // Built in a fixed buffer and appended at once: this runs for every request.
    let mut buf = [0u8; 17];
    let len = match ip.to_canonical() {
        IpAddr::V4(v4) => {
            buf[0] = 4;
            buf[1..5].copy_from_slice(&v4.octets());
            1 + mask(&mut buf[1..5], v4_prefix)
        }
        IpAddr::V6(v6) => {
            buf[0] = 6;
            buf[1..].copy_from_slice(&v6.octets());
            1 + mask(&mut buf[1..], v6_prefix)
        }
    };
    key.extend_from_prefix(&buf, len);
}

/// Keeps the first `prefix` bits of `octets`, masking the last byte kept; returns how many
/// bytes are kept.
fn mask(octets: &mut [u8], prefix: u8) -> usize {
    let prefix = usize::from(prefix).min(octets.len() * 8);
    let whole = prefix / 8;
    let rest = prefix % 8;
    if rest == 0 {
        return whole;
    }
    octets[whole] &= 0xff << (8 - rest);
    whole + 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn key_of(ip: &str, extractor: PeerIp) -> Vec<u8> {
        let mut req = Request::new(());
        let ip: IpAddr = ip.parse().unwrap();
        req.extensions_mut().insert(SocketAddr::new(ip, 443));
        let mut key = Key::new();
        extractor.extract(&req.into_parts().0, &mut key).unwrap();
        key.as_bytes().to_vec()
    }

    #[test]
    fn ipv6_hosts_in_one_64_share_a_key() {
        let a = key_of("2001:db8:1:2:aaaa::1", PeerIp::new());
        let b = key_of("2001:db8:1:2:ffff:ffff:ffff:ffff", PeerIp::new());
        let other = key_of("2001:db8:1:3::1", PeerIp::new());
        assert_eq!(a, b);
        assert_ne!(a, other);
        assert_eq!(a.len(), 1 + 8);
    }

    #[test]
    fn prefixes_are_configurable_and_bit_exact() {
        let p = PeerIp::new().ipv6_prefix(60);
        assert_eq!(key_of("2001:db8:1:20::1", p), key_of("2001:db8:1:2f::1", p));
        assert_ne!(key_of("2001:db8:1:20::1", p), key_of("2001:db8:1:30::1", p));
        let full = PeerIp::new().ipv6_prefix(200);
        assert_ne!(key_of("2001:db8::1", full), key_of("2001:db8::2", full));
        let v4 = PeerIp::new().ipv4_prefix(24);
        assert_eq!(key_of("192.0.2.1", v4), key_of("192.0.2.254", v4));
    }

    #[test]
    fn ipv4_mapped_ipv6_is_the_ipv4_address() {
        let mapped = key_of("::ffff:192.0.2.7", PeerIp::new());
        assert_eq!(mapped, key_of("192.0.2.7", PeerIp::new()));
    }

    #[test]
    fn peer_addr_reads_whichever_extension_the_server_set() {
        let v6: IpAddr = "2001:db8::9".parse().unwrap();
        let v4: IpAddr = "192.0.2.9".parse().unwrap();
        let mut sock = Request::new(());
        sock.extensions_mut().insert(SocketAddr::new(v6, 443));
        assert_eq!(peer_addr(&sock.into_parts().0), Some(v6));
        let mut bare = Request::new(());
        bare.extensions_mut().insert(v4);
        assert_eq!(peer_addr(&bare.into_parts().0), Some(v4));
        assert_eq!(peer_addr(&Request::new(()).into_parts().0), None);
    }

    #[test]
    fn key_for_is_the_key_a_request_from_that_address_gets() {
        for (ip, p) in [
            ("2001:db8:1:2::7", PeerIp::new()),
            ("2001:db8:1:2::7", PeerIp::new().ipv6_prefix(128)),
            ("192.0.2.77", PeerIp::new().ipv4_prefix(24)),
        ] {
            let addr: IpAddr = ip.parse().unwrap();
            assert_eq!(p.key_for(addr).as_bytes(), key_of(ip, p).as_slice(), "{ip}");
        }
    }
}
