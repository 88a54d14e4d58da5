//! Key extractors: what a request is limited *by* (its client's IP, an API key, its route...).
//!
//! An extractor implements [`ExtractKey`]: it reads the request's head ([`Parts`]) and
//! writes the key's bytes into a [`Key`]. Any `Fn(&Parts) -> Option<impl AsRef<[u8]>>`
//! is one, and extractors combine:
//!
//! - [`PeerIp`]: the connection's address (the default). IPv6 is keyed by its /64.
//! - [`ClientIp`]: the client's address behind trusted reverse proxies.
//! - [`HeaderKey`]: an API key or bearer token, hashed.
//! - [`MethodRoute`]: method + route, for a limit per endpoint.
//! - [`Global`]: one key for everyone.
//! - [`ExtractKey::and`]: both (e.g. per client *and* per route);
//!   [`ExtractKey::or`]: the first that succeeds (e.g. API key, else client IP).
//!
//! # When there is no key
//!
//! An extractor that cannot find its key returns a [`KeyError`] naming what is missing and
//! a status (500 for a missing peer address, a server misconfiguration; 400 for a missing
//! header). The layer's [`OnMissingKey`] decides: by default the request is refused with
//! that status by the responder's [`missing_key`](crate::respond::OnReject::missing_key),
//! and a warning logged. To fall back to another extractor instead, use [`ExtractKey::or`].
//!
//! ```
//! use floodwall_tower::extract::{ClientIp, ExtractKey, HeaderKey, MethodRoute};
//! use http::header::HeaderName;
//!
//! // Per API key where one is sent, per client IP otherwise; and per route in both cases.
//! let key = HeaderKey::new(HeaderName::from_static("x-api-key"))
//!     .or(ClientIp::new([]))
//!     .and(MethodRoute::new());
//! # let _ = key;
//! ```

use std::borrow::Cow;
use std::fmt;

use http::request::Parts;
use http::{Extensions, HeaderMap, Method, Request, StatusCode, Uri};

use crate::Key;

mod combine;
mod global;
mod header;
mod ip;
mod proxy;
mod route;

pub use combine::{Or, Pair};
pub use global::Global;
pub use header::HeaderKey;
pub use ip::{PeerIp, peer_addr};
pub use proxy::{ClientIp, ForwardedHeader, parse_cidrs};
pub use route::{MethodRoute, normalize_path};

/// Reads a request's rate-limit key.
///
/// Append the key's bytes to `key` (an enclosing [`Pair`] may have written some: never
/// clear), or return a [`KeyError`]. Implemented for every `Fn(&Parts) -> Option<T>` with
/// `T: AsRef<[u8]>` (`None` is a 500). An extractor need not be `Clone`: the layer holds
/// it once.
///
/// ```
/// use floodwall_tower::extract::ExtractKey;
/// use http::request::Parts;
///
/// // Limit by a tenant id the auth layer already put in the extensions.
/// #[derive(Clone)]
/// struct Tenant(u64);
/// let by_tenant = |req: &Parts| req.extensions.get::<Tenant>().map(|t| t.0.to_be_bytes());
/// # fn is_extractor(_: impl ExtractKey) {}
/// # is_extractor(by_tenant);
/// ```
pub trait ExtractKey: Send + Sync + 'static {
    /// Appends this request's key to `key`, or says why there is none.
    fn extract(&self, req: &Parts, key: &mut Key) -> Result<(), KeyError>;

    /// [`extract`](Self::extract) from the whole request: `Some` is exactly what `extract`
    /// would answer (and write) for its parts; `None` (the default) means "only from the
    /// [`Parts`]" and leaves `key` as it was. The layer asks this first, since taking a
    /// request apart copies its head twice; every extractor of this crate answers here.
    fn extract_request<B>(&self, req: &Request<B>, key: &mut Key) -> Option<Result<(), KeyError>>
    where
        Self: Sized,
    {
        let _ = (req, key);
        None
    }

    /// Both keys: the request is limited by the pair (e.g. client *and* route).
    fn and<B: ExtractKey>(self, other: B) -> Pair<Self, B>
    where
        Self: Sized,
    {
        Pair::new(self, other)
    }

    /// This key, or `other`'s when this one is missing: a fallback.
    fn or<B: ExtractKey>(self, other: B) -> Or<Self, B>
    where
        Self: Sized,
    {
        Or::new(self, other)
    }
}

impl<F, T> ExtractKey for F
where
    F: Fn(&Parts) -> Option<T> + Send + Sync + 'static,
    T: AsRef<[u8]>,
{
    fn extract(&self, req: &Parts, key: &mut Key) -> Result<(), KeyError> {
        match self(req) {
            Some(bytes) => {
                key.extend_from_slice(bytes.as_ref());
                Ok(())
            }
            None => Err(KeyError::new(
                StatusCode::INTERNAL_SERVER_ERROR,
                "the key closure returned None",
            )),
        }
    }
}

/// A request's head, whole or taken apart: what this crate's extractors read.
pub(crate) trait Head {
    fn method(&self) -> &Method;
    fn uri(&self) -> &Uri;
    fn headers(&self) -> &HeaderMap;
    fn extensions(&self) -> &Extensions;
}

impl Head for Parts {
    fn method(&self) -> &Method {
        &self.method
    }
    fn uri(&self) -> &Uri {
        &self.uri
    }
    fn headers(&self) -> &HeaderMap {
        &self.headers
    }
    fn extensions(&self) -> &Extensions {
        &self.extensions
    }
}

impl<B> Head for Request<B> {
    fn method(&self) -> &Method {
        Request::method(self)
    }
    fn uri(&self) -> &Uri {
        Request::uri(self)
    }
    fn headers(&self) -> &HeaderMap {
        Request::headers(self)
    }
    fn extensions(&self) -> &Extensions {
        Request::extensions(self)
    }
}

/// Why an extractor found no key: what was missing, why, and the status to answer with.
/// Its text is logged and sent in refusals' bodies: it must not contain secrets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    status: StatusCode,
    missing: Cow<'static, str>,
    reason: Cow<'static, str>,
}

impl KeyError {
    /// A missing key: `reason` says what is wrong, in words that follow "no rate-limit
    /// key: ". What was missing is "key" until [`naming`](Self::naming) says better.
    pub fn new(status: StatusCode, reason: impl Into<Cow<'static, str>>) -> Self {
        Self {
            status,
            missing: Cow::Borrowed("key"),
            reason: reason.into(),
        }
    }

    /// Names what was missing (a header's name, "peer address") for the client.
    #[must_use]
    pub fn naming(mut self, missing: impl Into<Cow<'static, str>>) -> Self {
        self.missing = missing.into();
        self
    }

    /// This error with the status the layer answers with.
    pub(crate) fn with_status(mut self, status: StatusCode) -> Self {
        self.status = status;
        self
    }

    /// The status a rejection answers with: the extractor's, or the layer's
    /// [`OnMissingKey::RejectWith`] once it refused the request.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// What was missing: a header's name, `peer address`, or `key` when nothing was named.
    pub fn missing(&self) -> &str {
        &self.missing
    }

    /// Why there is no key, in words.
    pub fn reason(&self) -> &str {
        &self.reason
    }
}

impl fmt::Display for KeyError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "no rate-limit key: {}", self.reason)
    }
}

impl std::error::Error for KeyError {}

/// What the layer does with a request whose key cannot be extracted.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub enum OnMissingKey {
    /// Refuse it with the [`KeyError`]'s status (the default).
    #[default]
    Reject,
    /// Refuse it with this status instead (e.g. 401 for a missing API key).
    RejectWith(StatusCode),
    /// Let it through without limiting it (and without rate-limit headers).
    Skip,
}

#[cfg(test)]
pub(crate) mod tests {
    use std::net::{IpAddr, SocketAddr};

    use http::header::HeaderName;
    use ipnet::IpNet;

    use super::*;

    /// Requests with and without what each extractor reads, the one with everything first.
    pub(crate) fn requests() -> Vec<Request<()>> {
        let full = || {
            let mut req = Request::post("/users/42/").body(()).unwrap();
            let peer: SocketAddr = "10.0.0.1:5000".parse().unwrap();
            req.extensions_mut().insert(peer);
            req.headers_mut()
                .insert("x-api-key", http::HeaderValue::from_static("k-123"));
            req.headers_mut()
                .insert("authorization", http::HeaderValue::from_static("Bearer t1"));
            req.headers_mut().insert(
                "x-forwarded-for",
                http::HeaderValue::from_static("203.0.113.9, 10.0.0.2"),
            );
            req
        };
        let mut ip_only = Request::new(());
        ip_only
            .extensions_mut()
            .insert("2001:db8::7".parse::<IpAddr>().unwrap());
        vec![full(), ip_only, Request::new(())]
    }

    /// A key's bytes, or why there is none.
    type Found = Result<Vec<u8>, KeyError>;

    /// What `extract_request` answers, and what `extract` does on the same request's parts.
    fn both(e: &impl ExtractKey, req: Request<()>) -> (Option<Found>, Found) {
        // A prefix already in the key, as an enclosing pair leaves one.
        let prefixed = || {
            let mut key = Key::new();
            key.extend_from_slice(b"pre");
            key
        };
        let mut key = prefixed();
        let whole = e
            .extract_request(&req, &mut key)
            .map(|found| found.map(|()| key.as_bytes().to_vec()));
        if whole.is_none() {
            assert_eq!(key.as_bytes(), b"pre", "`None` leaves the key as it was");
        }
        let mut key = prefixed();
        let parts = e
            .extract(&req.into_parts().0, &mut key)
            .map(|()| key.as_bytes().to_vec());
        (whole, parts)
    }

    /// Checks that whatever `extract_request` answers is what `extract` does; true when it
    /// answered every request.
    #[track_caller]
    pub(crate) fn agrees(e: &impl ExtractKey) -> bool {
        let mut always = true;
        for req in requests() {
            let (whole, parts) = both(e, req);
            match whole {
                Some(whole) => assert_eq!(whole, parts),
                None => always = false,
            }
        }
        always
    }

    #[test]
    fn extract_request_answers_as_extract_does() {
        let api_key = || HeaderKey::new(HeaderName::from_static("x-api-key"));
        let trusted: IpNet = "10.0.0.0/8".parse().unwrap();
        let closure = |req: &Parts| req.headers.get("x-api-key").map(|v| v.as_bytes().to_vec());

        assert!(agrees(&PeerIp::new()));
        assert!(agrees(&PeerIp::new().ipv6_prefix(128).ipv4_prefix(24)));
        assert!(agrees(&ClientIp::new([trusted])));
        assert!(agrees(&api_key()));
        assert!(agrees(&HeaderKey::bearer().salt("s")));
        assert!(agrees(&MethodRoute::new()));
        assert!(agrees(&Global));
        assert!(agrees(&PeerIp::new().and(MethodRoute::new())));
        assert!(agrees(&api_key().or(PeerIp::new()).and(Global)));
        assert!(agrees(&PeerIp::new().or(api_key())));

        // A closure reads only `Parts`, and so does anything made with one, once the
        // closure's answer is needed (a pair whose first key is missing is missing).
        assert!(!agrees(&closure));
        assert!(!agrees(&PeerIp::new().and(closure)));
        assert!(!agrees(&closure.and(PeerIp::new())));
        assert!(!agrees(&api_key().or(closure)));
        assert!(!agrees(&closure.or(PeerIp::new())));
    }
}
