//! Combining extractors: both keys, or the first that succeeds.

use http::Request;
use http::request::Parts;

use super::{ExtractKey, KeyError};
use crate::Key;

/// Two extractors at once: the key is both keys, so the request is limited per pair
/// (e.g. per client *and* per route). Built by [`ExtractKey::and`].
///
/// The first key is length-prefixed, so `("ab", "c")` and `("a", "bc")` are different keys.
/// If either key is missing, the pair is.
#[derive(Debug, Clone)]
pub struct Pair<A, B> {
    first: A,
    second: B,
}

impl<A, B> Pair<A, B> {
    /// Both `first` and `second`.
    pub fn new(first: A, second: B) -> Self {
        Self { first, second }
    }
}

impl<A: ExtractKey, B: ExtractKey> ExtractKey for Pair<A, B> {
    fn extract(&self, req: &Parts, key: &mut Key) -> Result<(), KeyError> {
        let at = key.len();
        key.extend_from_slice(&[0, 0]);
        self.first.extract(req, key)?;
        let len = u16::try_from(key.len() - at - 2).unwrap_or(u16::MAX);
        key.write_at(at, &len.to_be_bytes());
        self.second.extract(req, key)
    }

    fn extract_request<R>(&self, req: &Request<R>, key: &mut Key) -> Option<Result<(), KeyError>> {
        let at = key.len();
        key.extend_from_slice(&[0, 0]);
        // As `extract` does, on the whole request; `None` from either undoes what was written.
        let first = self.first.extract_request(req, key);
        let Some(Ok(())) = first else {
            if first.is_none() {
                key.truncate(at);
            }
            return first;
        };
        let len = u16::try_from(key.len() - at - 2).unwrap_or(u16::MAX);
        key.write_at(at, &len.to_be_bytes());
        let second = self.second.extract_request(req, key);
        if second.is_none() {
            key.truncate(at);
        }
        second
    }
}

/// A fallback: the first extractor's key, or the second's when the first has none.
/// Built by [`ExtractKey::or`].
///
/// Keys are tagged with which extractor produced them, so a fallback key can never
/// collide with a primary one.
#[derive(Debug, Clone)]
pub struct Or<A, B> {
    primary: A,
    fallback: B,
}

impl<A, B> Or<A, B> {
    /// `primary`, else `fallback`.
    pub fn new(primary: A, fallback: B) -> Self {
        Self { primary, fallback }
    }
}

impl<A: ExtractKey, B: ExtractKey> ExtractKey for Or<A, B> {
    fn extract(&self, req: &Parts, key: &mut Key) -> Result<(), KeyError> {
        let at = key.len();
        key.push(1);
        if self.primary.extract(req, key).is_ok() {
            return Ok(());
        }
        key.truncate(at);
        key.push(2);
        self.fallback.extract(req, key)
    }

    fn extract_request<R>(&self, req: &Request<R>, key: &mut Key) -> Option<Result<(), KeyError>> {
        let at = key.len();
        key.push(1);
        // As `extract` does, on the whole request; `None` from either undoes what was written.
        match self.primary.extract_request(req, key) {
            Some(Ok(())) => return Some(Ok(())),
            Some(Err(_)) => {}
            None => {
                key.truncate(at);
                return None;
            }
        }
        key.truncate(at);
        key.push(2);
        let fallback = self.fallback.extract_request(req, key);
        if fallback.is_none() {
            key.truncate(at);
        }
        fallback
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    fn parts() -> Parts {
        Request::new(()).into_parts().0
    }

    fn run(e: &impl ExtractKey) -> Result<Vec<u8>, KeyError> {
        let mut key = Key::new();
        e.extract(&parts(), &mut key)?;
        Ok(key.as_bytes().to_vec())
    }

    #[test]
    fn pairs_are_unambiguous() {
        let ab_c = Pair::new(|_: &Parts| Some("ab"), |_: &Parts| Some("c"));
        let a_bc = Pair::new(|_: &Parts| Some("a"), |_: &Parts| Some("bc"));
        assert_ne!(run(&ab_c).unwrap(), run(&a_bc).unwrap());
        let missing = Pair::new(|_: &Parts| Some("a"), |_: &Parts| None::<&str>);
        assert!(run(&missing).is_err());
    }

    #[test]
    fn or_falls_back_and_tags_the_source() {
        let none = |_: &Parts| None::<&str>;
        let fallback = Or::new(none, |_: &Parts| Some("x"));
        let primary = Or::new(|_: &Parts| Some("x"), |_: &Parts| Some("y"));
        assert_eq!(run(&fallback).unwrap(), b"\x02x");
        assert_eq!(run(&primary).unwrap(), b"\x01x");
        assert!(run(&Or::new(none, none)).is_err());
    }
}
