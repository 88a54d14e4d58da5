//! The checks an [`Op::CheckAll`](super::Op::CheckAll) decides together: one key under
//! several policies (a client under all its limits), or a key, policy and cost each (a
//! gateway's descriptors), held by every store through the same accessors.

use crate::{Error, Policy};

/// One check of a [`Checks`]: a request of `cost` for `key` under `policy`.
#[derive(Debug, Clone, Copy)]
pub struct Check<'a> {
    /// The client's key: any bytes.
    pub key: &'a [u8],
    /// Which limit; it also namespaces the key.
    pub policy: &'a Policy,
    /// What the request spends under it; 0 reads the state and records nothing.
    pub cost: u64,
}

/// Several checks decided at once, all or nothing: recorded in all if all allow, else in
/// none ([all or nothing](crate::guide::all_or_nothing)).
///
/// Made by [`StoreExt::check_all`](super::StoreExt::check_all) (one key and cost under
/// several policies) and [`StoreExt::check_all_of`](super::StoreExt::check_all_of) (each
/// its own); a store reads both through [`len`](Self::len), [`get`](Self::get) and
/// [`iter`](Self::iter).
#[derive(Debug, Clone, Copy)]
pub enum Checks<'a> {
    /// One key and cost under every policy, in order.
    OneKey {
        /// The client's key.
        key: &'a [u8],
        /// The limits.
        policies: &'a [Policy],
        /// What the request spends under each.
        cost: u64,
    },
    /// A key, policy and cost each, in order.
    Each(&'a [Check<'a>]),
}

impl<'a> Checks<'a> {
    /// How many checks, and so how many decisions the reply holds.
    pub fn len(&self) -> usize {
        match self {
            Self::OneKey { policies, .. } => policies.len(),
            Self::Each(checks) => checks.len(),
        }
    }

    /// Whether there is nothing to check.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Check `i`; it panics when `i` is not below [`len`](Self::len), as indexing does.
    pub fn get(&self, i: usize) -> Check<'a> {
        match *self {
            Self::OneKey {
                key,
                policies,
                cost,
            } => Check {
                key,
                policy: &policies[i],
                cost,
            },
            Self::Each(checks) => checks[i],
        }
    }

    /// The checks, in order.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = Check<'a>> + 'a {
        let this = *self;
        (0..this.len()).map(move |i| this.get(i))
    }

    /// The one key every check is for, if they share one.
    pub fn shared_key(&self) -> Option<&'a [u8]> {
        match *self {
            Self::OneKey { key, .. } => Some(key),
            Self::Each(checks) => {
                let (first, rest) = checks.split_first()?;
                rest.iter().all(|c| c.key == first.key).then_some(first.key)
            }
        }
    }

    /// The one cost every check spends, if they share one.
    pub fn shared_cost(&self) -> Option<u64> {
        match *self {
            Self::OneKey { cost, .. } => Some(cost),
            Self::Each(checks) => {
                let (first, rest) = checks.split_first()?;
                rest.iter()
                    .all(|c| c.cost == first.cost)
                    .then_some(first.cost)
            }
        }
    }

    /// [`Error::CostTooHigh`] when a check's cost can never pass its policy.
    pub fn check_costs(&self) -> Result<(), Error> {
        self.iter().try_for_each(|c| c.policy.check_cost(c.cost))
    }
}
