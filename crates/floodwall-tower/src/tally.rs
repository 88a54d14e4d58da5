//! What checking one request's policies has found: each policy's answer, by its index in
//! the request's list. Deciding reads it; waiting changes the answers it booked.

use std::sync::Arc;

use floodwall_core::{Decision, Policy};
use smallvec::SmallVec;

use crate::observe::{self, Meter};
use crate::respond::{Decisions, Denial};

/// The policies one request is checked against, owned by a check that waits for the store.
pub(crate) enum PolicyList {
    Many(Arc<[Policy]>),
    One(Policy),
}

impl PolicyList {
    pub(crate) fn as_slice(&self) -> &[Policy] {
        match self {
            Self::Many(list) => list,
            Self::One(one) => std::slice::from_ref(one),
        }
    }
}

/// What checking one request's policies has found so far, by index: cloning none.
#[derive(Default)]
pub(crate) struct Tally {
    decisions: SmallVec<[(usize, Decision); 2]>,
    /// The first policy the cost can never pass: (index, cost).
    too_costly: Option<(usize, u64)>,
}

impl Tally {
    /// Records the answer of every policy at once (`None`s were not asked); a store failure
    /// ends the checking.
    pub(crate) fn record_all(
        &mut self,
        policies: &[Policy],
        cost: u64,
        result: Result<Vec<Option<Decision>>, floodwall_core::Error>,
    ) -> Result<(), floodwall_core::Error> {
        match result {
            Ok(decisions) => {
                let answered = decisions.into_iter().enumerate();
                self.decisions
                    .extend(answered.filter_map(|(i, d)| Some((i, d?))));
            }
            Err(e) if e.is_cost_too_high() => {
                let i = policies.iter().position(|p| p.check_cost(cost).is_err());
                self.too_costly.get_or_insert((i.unwrap_or(0), cost));
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Records the answer of policy `i`; a store failure ends the checking.
    pub(crate) fn record(
        &mut self,
        i: usize,
        cost: u64,
        result: Result<Decision, floodwall_core::Error>,
    ) -> Result<(), floodwall_core::Error> {
        match result {
            Ok(decision) => self.decisions.push((i, decision)),
            Err(e) if e.is_cost_too_high() => {
                self.too_costly.get_or_insert((i, cost));
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    pub(crate) fn allowed(&self) -> bool {
        self.too_costly.is_none() && self.decisions.iter().all(|(_, d)| d.is_allowed())
    }

    /// Whether every refusal says when the request would pass, within `max` (a cost that
    /// can never pass cannot wait).
    pub(crate) fn refused_within(&self, max: std::time::Duration) -> bool {
        self.too_costly.is_none()
            && self
                .decisions
                .iter()
                // A banned key does not wait out its ban: it is refused.
                .all(|(_, d)| {
                    d.is_allowed() || (!d.is_banned() && d.retry_after.is_some_and(|r| r <= max))
                })
    }

    /// The indexes of the policies that refused.
    #[cfg(feature = "wait")]
    pub(crate) fn refused(&self) -> impl Iterator<Item = usize> + '_ {
        self.decisions
            .iter()
            .filter(|(_, d)| !d.is_allowed())
            .map(|(i, _)| *i)
    }

    /// Replaces policy `i`'s decision (a booking's, after waiting was decided on).
    #[cfg(feature = "wait")]
    pub(crate) fn set(&mut self, i: usize, decision: Decision) {
        if let Some((_, d)) = self.decisions.iter_mut().find(|(j, _)| *j == i) {
            *d = decision;
        }
    }

    /// Each decision with its policy.
    pub(crate) fn pairs<'a>(
        &'a self,
        policies: &'a [Policy],
    ) -> impl Iterator<Item = (&'a Policy, &'a Decision)> + Clone {
        self.decisions.iter().map(move |(i, d)| (&policies[*i], d))
    }

    /// Counts each policy's final verdict in the metrics (nothing without the feature).
    #[inline(always)]
    pub(crate) fn observe(&self, meter: Meter<'_>, policies: &[Policy]) {
        if !observe::ON {
            return;
        }
        for (i, d) in &self.decisions {
            observe::decided(meter, policies, *i, d);
        }
        if let Some((i, _)) = self.too_costly {
            observe::too_costly(meter, policies, i);
        }
    }

    pub(crate) fn denial(&self, policies: &[Policy]) -> Denial {
        let decisions: Decisions = self.pairs(policies).map(|(p, d)| (p.clone(), *d)).collect();
        let too_costly = self
            .too_costly
            .map(|(i, cost)| (policies[i].clone(), cost, policies[i].limit()));
        Denial::new(decisions, too_costly)
    }
}
