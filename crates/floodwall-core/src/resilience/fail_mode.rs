//! What a [`Fallback`](super::Fallback) answers while the store fails.

/// What to answer while the store cannot decide: chosen per layer (per [`Fallback`]),
/// since a login endpoint and a public catalogue do not weigh abuse against availability
/// alike.
///
/// [`Fallback`]: super::Fallback
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailMode {
    /// Allow every request: availability over protection. Each answer is a
    /// [`Decision`](crate::Decision) [`Allowed`](crate::Outcome::Allowed), `limit` the
    /// policy's limit, `remaining == limit` (nothing was counted), `reset_after` zero, and
    /// its source [`Fallback`](crate::Source::Fallback).
    Open,
    /// Pass the store's error on: the tower layer answers `503 Service Unavailable` with
    /// `Retry-After`. Protection over availability.
    Closed,
    /// Decide in this process's memory with each policy's
    /// [`share`](crate::Policy::share) for `nodes` servers: the fleet stays limited,
    /// roughly, with no coordination ("degrade to local limiting"). Its answers' source is
    /// [`Fallback`](crate::Source::Fallback).
    Local {
        /// How many servers share the quota (at least 1); each enforces `1 / nodes` of it.
        nodes: u32,
    },
}

impl FailMode {
    /// [`FailMode::Local`] for a fleet of `nodes` servers.
    pub fn local(nodes: u32) -> Self {
        Self::Local {
            nodes: nodes.max(1),
        }
    }

    /// The name used in logs: `open`, `closed` or `local`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Open => "open",
            Self::Closed => "closed",
            Self::Local { .. } => "local",
        }
    }
}
