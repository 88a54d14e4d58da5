//! Where a layer's services find the current version of its configuration: the one it was
//! built with until a live change, then the latest one swapped in.

use std::fmt;
use std::ops::Deref;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use arc_swap::{ArcSwap, Guard};
use floodwall_core::Policy;

use super::state::LiveState;
use super::{LiveError, Target};
use crate::Enforcement;
use crate::config::Config;

/// What one request is checked with: the configuration of the enforced policies, and, when
/// some policy is not enforced, that of the shadow ones.
pub(crate) struct Version<St, K> {
    /// The layer's own enforced policies (all of them when every policy is enforced),
    /// refusing as the layer is configured to.
    pub(crate) enforce: Arc<Config<St, K>>,
    /// The layer's own policies in shadow mode (checked, never refusing); `None` when
    /// every policy is enforced, the usual case, which then costs nothing per request.
    pub(crate) shadow: Option<Arc<Config<St, K>>>,
    /// The policies and modes: a chooser's policies are sorted by name with them.
    pub(crate) state: Arc<LiveState>,
}

impl<St: Clone, K> Version<St, K> {
    fn new(template: &Config<St, K>, state: LiveState) -> Self {
        let state = Arc::new(state);
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

/// `template` checking `policies`, in shadow mode or not: a configuration of its own, so
/// its interned headers and metrics handles are those of `policies`.
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

/// A layer's configuration, shared by every service it builds and by its [`LiveLimits`]
/// handles.
///
/// [`LiveLimits`]: super::LiveLimits
pub(crate) struct Cell<St, K> {
    /// Whether a live change was made: until then requests read `initial`, a field
    /// away, rather than load `current`.
    changed: AtomicBool,
    initial: Version<St, K>,
    current: ArcSwap<Version<St, K>>,
    /// What every version is built from (its policies and modes replaced).
    template: Config<St, K>,
    /// One change at a time: each reads the current version and builds on it.
    writer: Mutex<()>,
}

/// The version one request reads: it keeps it for the whole request.
pub(crate) enum Loaded<'a, St, K> {
    Initial(&'a Version<St, K>),
    Swapped(Guard<Arc<Version<St, K>>>),
}

impl<St, K> Deref for Loaded<'_, St, K> {
    type Target = Version<St, K>;

    #[inline(always)]
    fn deref(&self) -> &Version<St, K> {
        match self {
            Self::Initial(version) => version,
            Self::Swapped(guard) => guard,
        }
    }
}

impl<St: Clone, K> Cell<St, K> {
    /// The cell of a layer built with `template` (its own policies and layer-wide shadow
    /// flag), `registered` policies and `modes` by name.
    pub(crate) fn new(
        template: Config<St, K>,
        registered: Vec<Policy>,
        modes: std::collections::HashMap<String, Enforcement>,
    ) -> Self {
        let state = LiveState {
            own: template.policies.to_vec(),
            registered,
            modes,
            fallback: if template.shadow {
                Enforcement::Shadow
            } else {
                Enforcement::Enforce
            },
        };
        let initial = Version::new(&template, state);
        Self {
            changed: AtomicBool::new(false),
            current: ArcSwap::from_pointee(initial.clone()),
            initial,
            template,
            writer: Mutex::new(()),
        }
    }
}

impl<St, K> Cell<St, K> {
    /// The current version: one load of a flag until the first live change.
    #[inline(always)]
    pub(crate) fn load(&self) -> Loaded<'_, St, K> {
        if !self.changed.load(Ordering::Acquire) {
            return Loaded::Initial(&self.initial);
        }
        Loaded::Swapped(self.current.load())
    }

    /// The version the layer was built with (for `Debug`).
    pub(crate) fn initial(&self) -> &Version<St, K> {
        &self.initial
    }
}

impl<St, K> Clone for Version<St, K> {
    fn clone(&self) -> Self {
        Self {
            enforce: Arc::clone(&self.enforce),
            shadow: self.shadow.clone(),
            state: Arc::clone(&self.state),
        }
    }
}

impl<St, K> Target for Cell<St, K>
where
    St: Clone + Send + Sync + 'static,
    K: Send + Sync + 'static,
{
    fn state(&self) -> Arc<LiveState> {
        Arc::clone(&self.load().state)
    }

    fn update(
        &self,
        change: &mut dyn FnMut(&mut LiveState) -> Result<(), LiveError>,
    ) -> Result<(), LiveError> {
        let _one_at_a_time = self.writer.lock().unwrap_or_else(PoisonError::into_inner);
        let mut state = LiveState::clone(&self.current.load().state);
        change(&mut state)?;
        self.current
            .store(Arc::new(Version::new(&self.template, state)));
        self.changed.store(true, Ordering::Release);
        Ok(())
    }
}

impl<St, K> fmt::Debug for Cell<St, K> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cell")
            .field("state", &self.current.load().state)
            .finish_non_exhaustive()
    }
}
