//! An API key or bearer token from a header, hashed.

use std::fmt;
use std::sync::Arc;

use http::header::{AUTHORIZATION, HeaderName};
use http::request::Parts;
use http::{HeaderMap, Request, StatusCode};
use sha2::{Digest, Sha256};

use super::{ExtractKey, KeyError};
use crate::Key;

/// Keys requests by a header's value: an API key, or the token of
/// `Authorization: Bearer <token>`. The key is the value's SHA-256 (after an optional
/// [`salt`](Self::salt)): the secret is never stored, sent to Redis, or logged.
///
/// It does not check that the key is valid: put it after your authentication, or use a
/// per-IP limit alongside. A missing or empty header is a missing key with status 400.
#[derive(Clone)]
pub struct HeaderKey {
    name: HeaderName,
    bearer: bool,
    salt: Option<Arc<[u8]>>,
}

impl HeaderKey {
    /// Keys by the value of header `name` (e.g. `x-api-key`).
    pub fn new(name: HeaderName) -> Self {
        Self {
            name,
            bearer: false,
            salt: None,
        }
    }

    /// Keys by the token of `Authorization: Bearer <token>` (the scheme is matched
    /// case-insensitively; another scheme is a missing key).
    pub fn bearer() -> Self {
        Self {
            name: AUTHORIZATION,
            bearer: true,
            salt: None,
        }
    }

    /// Hashes `salt` before each value, so the stored hashes of low-entropy tokens cannot
    /// be looked up in a precomputed table. Every node sharing a store needs the same salt.
    pub fn salt(mut self, salt: impl Into<Vec<u8>>) -> Self {
        self.salt = Some(salt.into().into());
        self
    }
}

impl HeaderKey {
    /// The error for a request without the key: 400, naming the header.
    #[cold]
    fn missing(&self) -> KeyError {
        let name = self.name.as_str();
        let reason = if self.bearer {
            format!("no bearer token in the {name} header")
        } else {
            format!("the {name} header is missing or empty")
        };
        KeyError::new(StatusCode::BAD_REQUEST, reason).naming(name.to_owned())
    }

    fn key_of(&self, headers: &HeaderMap, key: &mut Key) -> Result<(), KeyError> {
        let value = headers.get(&self.name).map(|v| v.as_bytes());
        let secret = if self.bearer {
            value.and_then(bearer_token)
        } else {
            value.map(<[u8]>::trim_ascii)
        };
        let secret = secret
            .filter(|s| !s.is_empty())
            .ok_or_else(|| self.missing())?;
        let mut hash = Sha256::new();
        if let Some(salt) = &self.salt {
            hash.update(salt);
        }
        hash.update(secret);
        key.extend_from_slice(&hash.finalize());
        Ok(())
    }
}

impl ExtractKey for HeaderKey {
    fn extract(&self, req: &Parts, key: &mut Key) -> Result<(), KeyError> {
        self.key_of(&req.headers, key)
    }

    fn extract_request<B>(&self, req: &Request<B>, key: &mut Key) -> Option<Result<(), KeyError>> {
        Some(self.key_of(req.headers(), key))
    }
}

fn bearer_token(value: &[u8]) -> Option<&[u8]> {
    let value = value.trim_ascii();
    let (scheme, rest) = value.split_at_checked(6)?;
    (scheme.eq_ignore_ascii_case(b"bearer") && rest.first() == Some(&b' '))
        .then(|| rest.trim_ascii())
}

impl fmt::Debug for HeaderKey {
    /// Never prints the salt.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HeaderKey")
            .field("name", &self.name)
            .field("bearer", &self.bearer)
            .field("salted", &self.salt.is_some())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn key(e: &HeaderKey, name: &str, value: &str) -> Result<Vec<u8>, KeyError> {
        let req = Request::builder().header(name, value).body(()).unwrap();
        let mut key = Key::new();
        e.extract(&req.into_parts().0, &mut key)?;
        Ok(key.as_bytes().to_vec())
    }

    #[test]
    fn the_key_is_a_hash_never_the_secret() {
        let e = HeaderKey::new(HeaderName::from_static("x-api-key"));
        let k = key(&e, "x-api-key", "sk_live_secret").unwrap();
        assert_eq!(k.len(), 32);
        assert_eq!(k, Sha256::digest(b"sk_live_secret").to_vec());
        assert!(!k.windows(6).any(|w| w == b"secret"));
        assert_ne!(k, key(&e, "x-api-key", "other").unwrap());
        let salted = e.clone().salt("pepper");
        assert_ne!(k, key(&salted, "x-api-key", "sk_live_secret").unwrap());
        assert!(!format!("{salted:?}").contains("pepper"));
    }

    #[test]
    fn bearer_tokens_are_parsed() {
        let e = HeaderKey::bearer();
        let a = key(&e, "authorization", "Bearer abc").unwrap();
        assert_eq!(a, key(&e, "authorization", "bearer   abc ").unwrap());
        assert!(key(&e, "authorization", "Basic abc").is_err());
        assert!(key(&e, "authorization", "Bearer ").is_err());
        assert!(key(&e, "authorization", "Bearerabc").is_err());
    }

    #[test]
    fn missing_or_empty_is_a_400_naming_the_header() {
        let e = HeaderKey::new(HeaderName::from_static("x-api-key"));
        let missing = key(&e, "other", "x").unwrap_err();
        assert_eq!(missing.status(), StatusCode::BAD_REQUEST);
        assert_eq!(missing.missing(), "x-api-key");
        let text = "no rate-limit key: the x-api-key header is missing or empty";
        assert_eq!(missing.to_string(), text);
        assert_eq!(key(&e, "x-api-key", "  ").unwrap_err(), missing);
        let bearer = key(&HeaderKey::bearer(), "authorization", "Basic abc").unwrap_err();
        assert_eq!(bearer.missing(), "authorization");
        let reason = "no bearer token in the authorization header";
        assert_eq!(bearer.reason(), reason);
    }
}
