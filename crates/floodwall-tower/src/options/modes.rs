//! Which policies a layer enforces, only logs, or skips, and which more it knows by name:
//! the setup that live changes then change. Set on a layer by `RateLimitLayer::modes`.

use floodwall_core::Policy;

use crate::enforcement::Enforcement;

/// The modes of a layer's policies, and the policies it knows by name without checking
/// them on every request: set with [`RateLimitLayer::modes`](crate::RateLimitLayer::modes),
/// changed while serving through a `LiveLimits` handle (feature `live`).
///
/// [`Modes::all`]`(Enforcement::Shadow)` is shadow mode for the whole layer: decide, log,
/// add the headers, never refuse (not even on a store failure or a missing key). The
/// [live changes guide](crate::guide::live_changes) says what each mode does.
///
/// ```
/// use floodwall_core::{MemoryStore, Policy};
/// use floodwall_tower::{Enforcement, Modes, RateLimitLayer};
///
/// let layer = RateLimitLayer::new(MemoryStore::new(), Policy::gcra("per-ip", "10/s".parse()?)?)
///     .and_policy(Policy::fixed_window("daily", "10000/day".parse()?)?)
///     .modes(Modes::new().policy("daily", Enforcement::Shadow))?;
/// # let _ = layer;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Default)]
pub struct Modes {
    pub(crate) all: Option<Enforcement>,
    pub(crate) registered: Vec<Policy>,
    pub(crate) by_name: Vec<(String, Enforcement)>,
}

impl Modes {
    /// No change: every policy keeps its mode (enforced unless said otherwise).
    pub fn new() -> Self {
        Self::default()
    }

    /// The mode of every policy without one of its own: `Modes::new().all(Enforcement::Shadow)`
    /// is shadow mode for the whole layer.
    pub fn all(mut self, mode: Enforcement) -> Self {
        self.all = Some(mode);
        self
    }

    /// The mode of the policy of this name (the layer's own or [registered](Self::register)),
    /// a chooser's policy of this name included. An unknown name is an error of
    /// [`RateLimitLayer::modes`](crate::RateLimitLayer::modes).
    pub fn policy(mut self, name: impl Into<String>, mode: Enforcement) -> Self {
        self.by_name.push((name.into(), mode));
        self
    }

    /// Makes a policy known by name without checking it on every request: a chooser picks
    /// it (`live.policy("login")`), and a live handle can change it. One of the
    /// same name already known is replaced.
    pub fn register(mut self, policy: Policy) -> Self {
        self.registered.push(policy);
        self
    }
}
