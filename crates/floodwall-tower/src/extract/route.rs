//! Method + route: a limit per endpoint.

use http::Request;
use http::request::Parts;

use super::{ExtractKey, Head, KeyError};
use crate::Key;

/// Keys requests by method and route: `GET /users/{id}`. The route is axum's
/// `MatchedPath` where there is one (feature `axum`), elsewhere the path,
/// [normalised](normalize_path) so that ids in it do not mint one key per resource.
/// [`and`](super::ExtractKey::and) it with a client extractor to limit each client on
/// each endpoint.
#[derive(Debug, Clone, Copy, Default)]
pub struct MethodRoute;

impl MethodRoute {
    /// Method + route.
    pub fn new() -> Self {
        Self
    }
}

impl MethodRoute {
    fn key_of(req: &impl Head, key: &mut Key) {
        key.extend_from_slice(req.method().as_str().as_bytes());
        key.push(b' ');
        #[cfg(feature = "axum")]
        if let Some(matched) = req.extensions().get::<axum::extract::MatchedPath>() {
            key.extend_from_slice(matched.as_str().as_bytes());
            return;
        }
        write_normalized(req.uri().path(), key);
    }
}

impl ExtractKey for MethodRoute {
    fn extract(&self, req: &Parts, key: &mut Key) -> Result<(), KeyError> {
        Self::key_of(req, key);
        Ok(())
    }

    fn extract_request<B>(&self, req: &Request<B>, key: &mut Key) -> Option<Result<(), KeyError>> {
        Self::key_of(req, key);
        Some(Ok(()))
    }
}

/// A path as [`MethodRoute`] keys it when no route template is known: empty segments and
/// `.` dropped, ids (all digits, or 16+ hex digits and dashes) replaced by `{id}`.
///
/// ```
/// use floodwall_tower::extract::normalize_path;
///
/// assert_eq!(normalize_path("//users/42/"), "/users/{id}");
/// assert_eq!(
///     normalize_path("/orders/3f2b9c1e-8d4a-4e1b-9c2d-7a6b5c4d3e2f/items"),
///     "/orders/{id}/items"
/// );
/// ```
pub fn normalize_path(path: &str) -> String {
    let mut key = Key::new();
    write_normalized(path, &mut key);
    String::from_utf8_lossy(key.as_bytes()).into_owned()
}

fn write_normalized(path: &str, key: &mut Key) {
    let mut any = false;
    for segment in path.split('/').filter(|s| !s.is_empty() && *s != ".") {
        any = true;
        key.push(b'/');
        if looks_like_id(segment) {
            key.extend_from_slice(b"{id}");
        } else {
            key.extend_from_slice(segment.as_bytes());
        }
    }
    if !any {
        key.push(b'/');
    }
}

fn looks_like_id(segment: &str) -> bool {
    let b = segment.as_bytes();
    b.iter().all(u8::is_ascii_digit)
        || (b.len() >= 16 && b.iter().all(|c| c.is_ascii_hexdigit() || *c == b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn key(method: &str, uri: &str) -> Vec<u8> {
        let req = Request::builder().method(method).uri(uri).body(()).unwrap();
        let mut key = Key::new();
        MethodRoute.extract(&req.into_parts().0, &mut key).unwrap();
        key.as_bytes().to_vec()
    }

    #[test]
    fn method_and_normalised_path() {
        assert_eq!(key("GET", "/users/7?x=1"), b"GET /users/{id}");
        assert_eq!(key("GET", "/users/7"), key("GET", "/users/8"));
        assert_ne!(key("GET", "/users/7"), key("POST", "/users/7"));
        assert_eq!(key("GET", "/"), b"GET /");
        assert_eq!(key("GET", "/a/./b//"), b"GET /a/b");
        assert_eq!(normalize_path("/files/readme"), "/files/readme");
    }
}
