//! Changing a running layer's policies and modes: [`LiveLimits`], the handle an app keeps
//! ([`crate::guide::live_changes`] says what a change does to requests in flight and to stored
//! state).

mod cell;
mod shared;
mod state;

use std::fmt;
#[cfg(feature = "live")]
use std::sync::Arc;

use floodwall_core::ConfigError;
#[cfg(feature = "live")]
use floodwall_core::{Policy, Quota};

pub(crate) use cell::{Cell, Version};
pub(crate) use shared::Shared;
pub(crate) use state::LiveState;

#[cfg(feature = "live")]
use crate::enforcement::Enforcement;

/// The handle on a layer's policies and their modes, changeable while the service runs:
/// from [`RateLimitLayer::live`](crate::RateLimitLayer::live).
///
/// A request is checked, charged and answered under one version, old or new, never a mix;
/// a change never waits for requests, nor they for it ([`crate::guide::live_changes`]).
/// Known policies are the layer's own and the [registered](crate::Modes::register) ones.
/// Cheap to clone.
///
/// ```
/// use floodwall_core::{MemoryStore, Policy};
/// use floodwall_tower::{Enforcement, RateLimitLayer};
///
/// let layer = RateLimitLayer::new(MemoryStore::new(), Policy::gcra("per-ip", "10/s".parse()?)?);
/// let live = layer.live();
/// // ... serve with `layer`, then, from an admin route or a config watcher:
/// live.set_quota("per-ip", "20/s burst 40".parse()?)?;
/// live.set_enforcement("per-ip", Enforcement::Shadow)?;
/// assert_eq!(live.policy("per-ip").unwrap().limit(), 40);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[cfg(feature = "live")]
#[derive(Clone)]
pub struct LiveLimits {
    target: Arc<Shared>,
}

/// What receives a layer's changes: a [`Cell`], whatever its store and key types.
#[cfg(feature = "live")]
pub(crate) trait Apply: Send + Sync + 'static {
    /// Builds the version of these policies and modes and swaps it in.
    fn apply(&self, state: &Arc<LiveState>);
}

#[cfg(feature = "live")]
impl LiveLimits {
    pub(crate) fn new(target: Arc<Shared>) -> Self {
        Self { target }
    }

    /// The current policies and modes (for the policy file's chooser).
    #[cfg(feature = "file")]
    pub(crate) fn state(&self) -> Arc<LiveState> {
        self.target.state()
    }

    /// The current version of the policy of this name (the layer's own or a registered
    /// one).
    pub fn policy(&self, name: &str) -> Option<Policy> {
        self.target.state().find(name).cloned()
    }

    /// The mode of the policy of this name, if it is known.
    pub fn enforcement(&self, name: &str) -> Option<Enforcement> {
        let state = self.target.state();
        state.find(name).map(|p| state.mode(p.name()))
    }

    /// Every known policy with its mode: the layer's own first, in order, then the
    /// registered ones.
    pub fn policies(&self) -> Vec<(Policy, Enforcement)> {
        let state = self.target.state();
        let all = state.own.iter().chain(&state.registered);
        all.map(|p| (p.clone(), state.mode(p.name()))).collect()
    }

    /// Replaces the known policy of `policy.name()`, for requests that start after this
    /// returns (what the stores keep: [`floodwall_core::guide::quota_changes`]).
    pub fn set_policy(&self, policy: Policy) -> Result<(), LiveError> {
        self.target.update(|state| state.replace(policy))
    }

    /// Gives the policy of this name a new quota, keeping its algorithm and penalty, built
    /// by [`Policy::new`] (a [`Policy::redis_cell`] goes through
    /// [`set_policy`](Self::set_policy)). On an error nothing changes.
    pub fn set_quota(&self, name: &str, quota: Quota) -> Result<(), LiveError> {
        self.target.update(|state| {
            let old = state.find(name).ok_or_else(|| state::unknown(name))?;
            let mut new = Policy::new(name, old.algorithm(), quota)?;
            if let Some(penalty) = old.penalty() {
                new = new.with_penalty(*penalty);
            }
            state.replace(new)
        })
    }

    /// Sets the mode of the policy of this name, which must be known.
    pub fn set_enforcement(&self, name: &str, mode: Enforcement) -> Result<(), LiveError> {
        self.target.update(|state| state.set_mode(name, mode))
    }
}

#[cfg(feature = "live")]
impl fmt::Debug for LiveLimits {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LiveLimits")
            .field("policies", &self.policies())
            .finish()
    }
}

/// Why a live change was refused; nothing changed.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum LiveError {
    /// No policy of this name is known to the layer (its own or registered).
    UnknownPolicy {
        /// The name asked for.
        name: String,
    },
    /// The new quota does not suit the policy's algorithm.
    Config(ConfigError),
}

impl From<ConfigError> for LiveError {
    fn from(e: ConfigError) -> Self {
        Self::Config(e)
    }
}

impl fmt::Display for LiveError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::UnknownPolicy { name } => write!(f, "no policy named `{name}` in this layer"),
            Self::Config(e) => write!(f, "invalid policy: {e}"),
        }
    }
}

impl std::error::Error for LiveError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::Config(e) => Some(e),
            Self::UnknownPolicy { .. } => None,
        }
    }
}
