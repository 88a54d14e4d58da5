//! The per-key state a store keeps between checks.

use super::fixed_window::Window;
use super::sliding_log::Log;
use super::sliding_window::Buckets;
use super::token_bucket::Owed;

/// What one key remembers between checks, for any algorithm: opaque, so it never holds an
/// impossible value; a new state is empty (a key never seen).
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

    /// Whether nothing is remembered.
    pub fn is_empty(&self) -> bool {
        matches!(self.0, Inner::Empty)
    }
}
