//! Choosing the policies for each request by what depends on the request itself: its
//! method, its client's tier, its key.
//!
//! Routes are not chosen here: with axum, each gets a layer of its own
//! ([front page](crate#axum-layer-or-route_layer)); a policy file's routes are the
//! exception.

use std::fmt;
use std::sync::Arc;

use floodwall_core::Policy;
use http::request::Parts;

/// Which policies a request is checked against, as a [`ChoosePolicy`] answers.
#[derive(Clone, Debug)]
#[non_exhaustive]
pub enum Choice {
    /// The layer's own policies (those given to `new` and `and_policy`).
    Default,
    /// This policy alone.
    Policy(Policy),
    /// Every one of these, all or nothing ([`and_policy`](crate::RateLimitLayer::and_policy)).
    Policies(Arc<[Policy]>),
    /// No limit for this request (a health check, an internal caller), and no headers.
    Skip,
}

impl From<Policy> for Choice {
    fn from(policy: Policy) -> Self {
        Self::Policy(policy)
    }
}

impl From<Vec<Policy>> for Choice {
    fn from(policies: Vec<Policy>) -> Self {
        Self::Policies(policies.into())
    }
}

/// Picks the policies for a request from its head and its extracted key.
///
/// Implemented for every `Fn(&Parts, &[u8]) -> Choice`, and by [`PolicyMap`] (by key
/// prefix). Clone policies into the closure once; a [`Policy`] clone is an `Arc` clone.
///
/// ```
/// use floodwall_core::Policy;
/// use floodwall_tower::choose::{ChoosePolicy, Choice};
/// use http::{Method, request::Parts};
///
/// let writes = Policy::gcra("writes", "10/min".parse()?)?;
/// let per_method = move |req: &Parts, _key: &[u8]| match req.method {
///     Method::GET | Method::HEAD => Choice::Default,
///     _ => Choice::Policy(writes.clone()),
/// };
/// # fn is_chooser(_: impl ChoosePolicy) {}
/// # is_chooser(per_method);
/// # Ok::<(), floodwall_core::ConfigError>(())
/// ```
pub trait ChoosePolicy: Send + Sync + 'static {
    /// The policies for this request. `key` is what the key extractor wrote.
    fn choose(&self, req: &Parts, key: &[u8]) -> Choice;
}

impl<F> ChoosePolicy for F
where
    F: Fn(&Parts, &[u8]) -> Choice + Send + Sync + 'static,
{
    fn choose(&self, req: &Parts, key: &[u8]) -> Choice {
        self(req, key)
    }
}

/// Chooses by the longest matching prefix of the request's key: a policy per tier when
/// the key extractor writes the tier first (`b"pro:"` + user id). A key no prefix matches
/// gets the layer's default policies.
///
/// Prefixes match the key's bytes as written: pair this with an extractor that writes the
/// prefix first (a closure), not a combinator that adds its own framing.
///
/// ```
/// use floodwall_core::Policy;
/// use floodwall_tower::choose::PolicyMap;
///
/// let tiers = PolicyMap::new()
///     .prefix("free:", Policy::gcra("free", "60/min".parse()?)?)
///     .prefix("pro:", Policy::gcra("pro", "6000/min".parse()?)?);
/// # let _ = tiers;
/// # Ok::<(), floodwall_core::ConfigError>(())
/// ```
#[derive(Clone, Default)]
pub struct PolicyMap {
    entries: Vec<(Box<[u8]>, Choice)>,
}

impl PolicyMap {
    /// An empty map: every key gets the default policies.
    pub fn new() -> Self {
        Self::default()
    }

    /// Keys starting with `prefix` get `choice` (a [`Policy`], a `Vec<Policy>`, or a
    /// [`Choice`]). A later entry for the same prefix replaces the earlier one.
    pub fn prefix(mut self, prefix: impl AsRef<[u8]>, choice: impl Into<Choice>) -> Self {
        let prefix: Box<[u8]> = prefix.as_ref().into();
        self.entries.retain(|(p, _)| *p != prefix);
        self.entries.push((prefix, choice.into()));
        // Longest first, so the first match is the longest.
        self.entries
            .sort_by_key(|(prefix, _)| std::cmp::Reverse(prefix.len()));
        self
    }
}

impl ChoosePolicy for PolicyMap {
    fn choose(&self, _req: &Parts, key: &[u8]) -> Choice {
        self.entries
            .iter()
            .find(|(prefix, _)| key.starts_with(prefix))
            .map_or(Choice::Default, |(_, choice)| choice.clone())
    }
}

impl fmt::Debug for PolicyMap {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map()
            .entries(
                self.entries
                    .iter()
                    .map(|(p, c)| (String::from_utf8_lossy(p), c)),
            )
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::Request;

    #[test]
    fn the_longest_prefix_wins() {
        let free = Policy::gcra("free", "1/s".parse().unwrap()).unwrap();
        let pro = Policy::gcra("pro", "10/s".parse().unwrap()).unwrap();
        let map = PolicyMap::new()
            .prefix("p", free.clone())
            .prefix("pro:", pro.clone());
        let parts = Request::new(()).into_parts().0;
        let name = |key: &[u8]| match map.choose(&parts, key) {
            Choice::Policy(p) => p.name().to_owned(),
            other => format!("{other:?}"),
        };
        assert_eq!(name(b"pro:42"), "pro");
        assert_eq!(name(b"pr"), "free");
        assert_eq!(name(b"x"), "Default");
    }
}
