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
//! An extractor that cannot find its key returns a [`KeyError`] that names what is missing
//! and a status to answer with. The layer's [`OnMissingKey`] decides what then happens;
//! the default, [`OnMissingKey::Reject`], answers with that status (500 for a missing peer
//! address, which is a server misconfiguration; 400 for a missing header) and logs a
//! warning. Nothing panics. To fall back to another extractor instead, use
//! [`ExtractKey::or`].
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

use std::fmt;

use http::StatusCode;
use http::request::Parts;

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
/// Write the key's bytes into `key` (it may already hold bytes from an enclosing
/// [`Pair`]: append, never clear). Return a [`KeyError`] when the key is not there.
///
/// Implemented for every `Fn(&Parts) -> Option<T>` where `T: AsRef<[u8]>`; `None` is a
/// [`KeyError`] with status 500.
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

/// Why an extractor found no key, and the status to answer with if the request is refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyError {
    status: StatusCode,
    reason: &'static str,
}

impl KeyError {
    /// A missing key: `reason` is logged and sent in the rejection's body, so it must not
    /// contain secrets.
    pub fn new(status: StatusCode, reason: &'static str) -> Self {
        Self { status, reason }
    }

    /// The status a rejection answers with.
    pub fn status(&self) -> StatusCode {
        self.status
    }

    /// What was missing.
    pub fn reason(&self) -> &'static str {
        self.reason
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
    /// Refuse it with the [`KeyError`]'s status (the default): a request that cannot be
    /// attributed is never let through unlimited by accident.
    #[default]
    Reject,
    /// Refuse it with this status instead (e.g. 401 for a missing API key).
    RejectWith(StatusCode),
    /// Let it through without limiting it (and without rate-limit headers).
    Skip,
}
