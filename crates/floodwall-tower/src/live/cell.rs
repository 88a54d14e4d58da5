//! Where a layer's services find the current version of its configuration: the one it was
//! built with until a live change, then the latest one swapped in.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

#[cfg(feature = "live")]
use arc_swap::{ArcSwap, Guard};
use floodwall_core::Policy;

#[cfg(feature = "live")]
use super::Apply;
use super::state::LiveState;
use crate::config::Config;
use crate::enforcement::Enforcement;

/// What one request is checked with: the configuration of the enforced policies, and, when
/// some policy is not enforced, that of the shadow ones.
pub(crate) struct Version<St, K> {
    /// The layer's own enforced policies (all of them when every policy is enforced).
    pub(crate) enforce: Arc<Config<St, K>>,
    /// The layer's own policies in shadow mode; `None` when every policy is enforced.
    pub(crate) shadow: Option<Arc<Config<St, K>>>,
    /// The policies and modes: a chooser's policies are sorted by name with them.
    pub(crate) state: Arc<LiveState>,
}

impl<St: Clone, K> Version<St, K> {
    fn new(template: &Config<St, K>, state: Arc<LiveState>) -> Self {
        if state.all_enforced() {
            return Self {
                enforce: Arc::new(config(template, state.own.clone(), false, false)),
                shadow: None,
                state,
            };
        }
        let enforced = state.own_in(Enforcement::Enforce);
        let none = enforced.is_empty();
        Self {
            enforce: Arc::new(config(template, enforced, false, none)),
            shadow: Some(Arc::new(config(
                template,
                state.own_in(Enforcement::Shadow),
                true,
                none,
            ))),
            state,
        }
    }
}

/// `template` checking `policies`, with interned headers and metrics handles of its own.
fn config<St: Clone, K>(
    template: &Config<St, K>,
    policies: Vec<Policy>,
    shadow: bool,
    enforces_none: bool,
) -> Config<St, K> {
    let mut config = template.clone();
    config.policies = policies.into();
    config.shadow = shadow;
    config.enforces_none = enforces_none;
    config.ietf_consts = OnceLock::new();
    config.metrics = Default::default();
    config
}

/// A layer's configuration as its services read it; [`Shared`](super::Shared) sends it
/// every live change.
pub(crate) struct Cell<St, K> {
    /// Whether no live change was made and every policy of `initial` is enforced.
    plain: AtomicBool,
    /// Whether a live change was made: until then `initial` is current.
    #[cfg(feature = "live")]
    changed: AtomicBool,
    initial: Version<St, K>,
    #[cfg(feature = "live")]
    current: ArcSwap<Version<St, K>>,
    /// What every version is built from (its policies and modes replaced).
    #[cfg(feature = "live")]
    template: Config<St, K>,
}

impl<St: Clone, K> Cell<St, K> {
    /// The cell of a layer configured as `template`, with these policies and modes.
    pub(crate) fn new(template: Config<St, K>, state: Arc<LiveState>) -> Self {
        let initial = Version::new(&template, state);
        Self {
            plain: AtomicBool::new(initial.shadow.is_none()),
            #[cfg(feature = "live")]
            changed: AtomicBool::new(false),
            #[cfg(feature = "live")]
            current: ArcSwap::from_pointee(initial.clone()),
            initial,
            #[cfg(feature = "live")]
            template,
        }
    }
}

impl<St, K> Cell<St, K> {
    /// Whether [`initial`](Self::initial)'s `enforce` is all a request needs.
    pub(crate) fn plain(&self) -> bool {
        self.plain.load(Ordering::Acquire)
    }

    /// The version the layer was built with.
    pub(crate) fn initial(&self) -> &Version<St, K> {
        &self.initial
    }

    /// The current version once a live change was made; until then `None`.
    #[cfg(feature = "live")]
    pub(crate) fn current(&self) -> Option<Guard<Arc<Version<St, K>>>> {
        if !self.changed.load(Ordering::Acquire) {
            return None;
        }
        Some(self.current.load())
    }

    /// Without the `live` feature nothing changes: the initial version is current.
    #[cfg(not(feature = "live"))]
    pub(crate) fn current(&self) -> Option<&Arc<Version<St, K>>> {
        None
    }
}

#[cfg(feature = "live")]
impl<St, K> Clone for Version<St, K> {
    fn clone(&self) -> Self {
        Self {
            enforce: Arc::clone(&self.enforce),
            shadow: self.shadow.clone(),
            state: Arc::clone(&self.state),
        }
    }
}

#[cfg(feature = "live")]
impl<St, K> Apply for Cell<St, K>
where
    St: Clone + Send + Sync + 'static,
    K: Send + Sync + 'static,
{
    fn apply(&self, state: &Arc<LiveState>) {
        let version = Version::new(&self.template, Arc::clone(state));
        self.current.store(Arc::new(version));
        self.changed.store(true, Ordering::Release);
        self.plain.store(false, Ordering::Release);
    }
}
