//! What a live handle reads and changes: the policies a layer knows and their modes.

use std::collections::HashMap;

use floodwall_core::Policy;

use super::LiveError;
use crate::Enforcement;
use crate::options::Modes;

/// One version of a layer's policies and modes.
#[derive(Clone, Debug, Default)]
pub(crate) struct LiveState {
    /// The layer's own policies, in order: every request is checked against them unless a
    /// chooser picks others.
    pub(crate) own: Vec<Policy>,
    /// Policies known by name but checked only when a chooser picks them.
    pub(crate) registered: Vec<Policy>,
    /// Modes set by name; a name not here has `fallback`.
    pub(crate) modes: HashMap<String, Enforcement>,
    /// The mode of every policy without one of its own ([`Modes::all`](crate::Modes::all)).
    pub(crate) fallback: Enforcement,
}

impl LiveState {
    /// The policy named `name`, the layer's own first.
    pub(crate) fn find(&self, name: &str) -> Option<&Policy> {
        self.own
            .iter()
            .chain(&self.registered)
            .find(|p| p.name() == name)
    }

    fn find_mut(&mut self, name: &str) -> Option<&mut Policy> {
        self.own
            .iter_mut()
            .chain(&mut self.registered)
            .find(|p| p.name() == name)
    }

    /// The mode a policy of this name is checked in (any name: a chooser may return a
    /// policy the layer does not know, which then has the layer-wide mode).
    pub(crate) fn mode(&self, name: &str) -> Enforcement {
        self.modes.get(name).copied().unwrap_or(self.fallback)
    }

    /// Whether every policy is enforced: the layer then runs as if it had no modes.
    pub(crate) fn all_enforced(&self) -> bool {
        self.fallback == Enforcement::Enforce
            && self.modes.values().all(|m| *m == Enforcement::Enforce)
    }

    /// Replaces the policy of `policy`'s name, which must be known.
    #[cfg(feature = "live")]
    pub(crate) fn replace(&mut self, policy: Policy) -> Result<(), LiveError> {
        let slot = self
            .find_mut(policy.name())
            .ok_or_else(|| unknown(policy.name()))?;
        *slot = policy;
        Ok(())
    }

    /// Adds a policy known by name only, or replaces the known one of that name.
    pub(crate) fn register(&mut self, policy: Policy) {
        match self.find_mut(policy.name()) {
            Some(slot) => *slot = policy,
            None => self.registered.push(policy),
        }
    }

    /// Applies `modes`: the registered policies first, so that their modes can be set.
    pub(crate) fn apply(&mut self, modes: Modes) -> Result<(), LiveError> {
        if let Some(all) = modes.all {
            self.fallback = all;
        }
        for policy in modes.registered {
            self.register(policy);
        }
        for (name, mode) in &modes.by_name {
            self.set_mode(name, *mode)?;
        }
        Ok(())
    }

    /// Sets the mode of a known policy.
    pub(crate) fn set_mode(&mut self, name: &str, mode: Enforcement) -> Result<(), LiveError> {
        if self.find(name).is_none() {
            return Err(unknown(name));
        }
        self.modes.insert(name.to_owned(), mode);
        Ok(())
    }

    /// The layer's own policies in `mode`, in order.
    pub(crate) fn own_in(&self, mode: Enforcement) -> Vec<Policy> {
        let of = |p: &&Policy| self.mode(p.name()) == mode;
        self.own.iter().filter(of).cloned().collect()
    }
}

pub(crate) fn unknown(name: &str) -> LiveError {
    LiveError::UnknownPolicy {
        name: name.to_owned(),
    }
}
