//! What a [`Fallback`](super::Fallback) answers while the store fails.

/// What to answer while the store cannot decide, chosen per [`Fallback`] (per layer).
///
/// [`Fallback`]: super::Fallback
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum FailMode {
    /// Allow every request: availability over protection. Nothing is counted
    /// (`remaining == limit`, `reset_after` zero).
    Open,
    /// Pass the store's error on (the tower layer answers 503): protection over availability.
    Closed,
    /// Decide in this process's memory with each policy's
    /// [`share`](crate::Policy::share) for `nodes` servers: the fleet stays roughly limited.
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
