//! The per-key state a store keeps between checks.

use super::fixed_window::Window;
use super::sliding_log::Log;
use super::sliding_window::Buckets;
use super::token_bucket::Owed;

/// What one key remembers between checks, for any algorithm.
///
/// Opaque on purpose: only [`Policy::decide`](crate::Policy::decide) reads or writes it, so a
/// state can never be handed an impossible value. A new state is empty (a key never seen).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct State(pub(crate) Inner);

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) enum Inner {
    #[default]
    Empty,
    /// GCRA's and the funnel's theoretical arrival time.
    Gcra(u64),
    Tokens(Owed),
    Window(Window),
    Buckets(Buckets),
    Log(Log),
}

impl State {
    /// The state of a key never seen.
    pub fn new() -> Self {
        Self::default()
    }

    /// Whether nothing is remembered (a fresh key, or a state every entry of which expired
    /// the last time it was used).
    pub fn is_empty(&self) -> bool {
        matches!(self.0, Inner::Empty)
    }
}
