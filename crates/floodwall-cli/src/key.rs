//! The key's bytes, formed as the layer forms them: by running floodwall-tower's own
//! extractor (the policy file's `[key]`, `PeerIp`, `HeaderKey`) on a request that carries
//! the key the way a client's request would (its address, a header), or from hex.

use std::net::IpAddr;

use floodwall_tower::Key;
use floodwall_tower::extract::{ExtractKey, HeaderKey, PeerIp};
use floodwall_tower::file::PolicyFile;
use http::header::{AUTHORIZATION, HeaderName, HeaderValue};
use http::request::Parts;

use crate::cli::Target;
use crate::error::Failure;

/// The bytes the store keys `target.key` by.
pub(crate) fn bytes(target: &Target, file: Option<&PolicyFile>) -> Result<Vec<u8>, Failure> {
    let what = format!("KEY {:?}", target.key);
    if target.raw_hex {
        return hex_decode(&target.key)
            .ok_or_else(|| Failure::input(what, "--raw-hex takes an even number of hex digits"));
    }
    if let Some(file) = file {
        let parts = request(target)?;
        return extract(&file.key(), &parts).map_err(|e| {
            Failure::input(
                what,
                format!(
                    "the policy file's [key] finds no key in it ({e}); an IP is the client's \
                     address, a header's value needs --header NAME or --bearer"
                ),
            )
        });
    }
    if target.header.is_some() || target.bearer {
        let mut extractor = match &target.header {
            Some(name) => HeaderKey::new(header_name(name)?),
            None => HeaderKey::bearer(),
        };
        if let Some(salt) = &target.salt {
            extractor = extractor.salt(salt.as_bytes());
        }
        let parts = request(target)?;
        return extract(&extractor, &parts).map_err(|e| Failure::input(what, e));
    }
    let ip: IpAddr = target.key.parse().map_err(|_| {
        Failure::input(
            &what,
            "not an IP address (a header's value needs --header NAME or --bearer, bytes --raw-hex)",
        )
    })?;
    let mut peer = PeerIp::new();
    if let Some(bits) = target.ipv4_prefix {
        peer = peer.ipv4_prefix(bits);
    }
    if let Some(bits) = target.ipv6_prefix {
        peer = peer.ipv6_prefix(bits);
    }
    Ok(peer.key_for(ip).as_bytes().to_vec())
}

/// A request that carries the key as a client's would: from the key's address when it
/// is one, with the key in `--header`'s header and as a bearer token.
fn request(target: &Target) -> Result<Parts, Failure> {
    let mut req = http::Request::new(());
    if let Ok(ip) = target.key.parse::<IpAddr>() {
        req.extensions_mut().insert(ip);
    }
    let value = |v: String| {
        HeaderValue::try_from(v).map_err(|_| {
            Failure::input(format!("KEY {:?}", target.key), "not a valid header value")
        })
    };
    if let Some(name) = &target.header {
        req.headers_mut()
            .insert(header_name(name)?, value(target.key.clone())?);
    }
    if !req.headers().contains_key(AUTHORIZATION) {
        req.headers_mut()
            .insert(AUTHORIZATION, value(format!("Bearer {}", target.key))?);
    }
    Ok(req.into_parts().0)
}

/// `--header`'s name, checked as HTTP has it.
fn header_name(name: &str) -> Result<HeaderName, Failure> {
    HeaderName::try_from(name)
        .map_err(|_| Failure::input(format!("--header {name:?}"), "not a header name"))
}

/// What `extractor` makes of the request.
fn extract(
    extractor: &impl ExtractKey,
    parts: &Parts,
) -> Result<Vec<u8>, floodwall_tower::extract::KeyError> {
    let mut key = Key::new();
    extractor.extract(parts, &mut key)?;
    Ok(key.as_bytes().to_vec())
}

/// Hex digits (either case) as bytes.
pub(crate) fn hex_decode(s: &str) -> Option<Vec<u8>> {
    let s = s.as_bytes();
    if s.is_empty() || !s.len().is_multiple_of(2) || !s.iter().all(u8::is_ascii_hexdigit) {
        return None;
    }
    s.chunks(2)
        .map(|pair| u8::from_str_radix(std::str::from_utf8(pair).ok()?, 16).ok())
        .collect()
}

/// Bytes as lowercase hex.
pub(crate) fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hex_goes_both_ways() {
        assert_eq!(hex_decode("cb00710A"), Some(vec![0xcb, 0, 0x71, 0x0a]));
        assert_eq!(hex(&[0xcb, 0, 0x71, 0x0a]), "cb00710a");
        for bad in ["", "abc", "zz", "+1"] {
            assert_eq!(hex_decode(bad), None, "{bad}");
        }
    }
}
