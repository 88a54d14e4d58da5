//! One key's local verdict ([`Verdict`]).

use std::sync::Mutex;

use crate::{Decision, Policy};

/// One key's verdict, with what the node needs to send its counts without a request.
pub(super) struct KeyVerdict {
    pub(super) key: Box<[u8]>,
    pub(super) policy: Policy,
    pub(super) verdict: Mutex<Verdict>,
}

impl KeyVerdict {
    pub(super) fn new(key: &[u8], policy: &Policy) -> Self {
        Self {
            key: key.into(),
            policy: policy.clone(),
            verdict: Mutex::new(Verdict::default()),
        }
    }
}

/// Local microseconds throughout. Invariant: `pending + taken + budget ≤ limit`, where
/// `taken` is what a refresh in flight carries.
#[derive(Debug, Default)]
pub(super) struct Verdict {
    /// When the last refresh that got an answer was sent; `None` before the first.
    pub(super) refreshed_at: Option<u64>,
    /// Units this node may still admit before the next refresh.
    budget: u64,
    /// Units admitted here and not yet recorded by the store (a debt included).
    pub(super) pending: u64,
    /// Refused until then, as the store said; 0 if it did not refuse (a ban: at most one
    /// interval).
    denied_until: u64,
    /// When the key's ban ends, as the store said; 0 if it is not banned.
    ban_end: u64,
    /// When the store said the key would be back to full, as of the last refresh.
    reset_at: u64,
    pub(super) in_flight: bool,
    /// Dropped from the map (reset or evicted): whoever holds it looks the key up again.
    pub(super) removed: bool,
}

/// What a refresh learnt.
pub(super) struct Refreshed {
    /// Units it carried that the store did not record: the new debt.
    pub(super) left: u64,
    /// The store's `remaining` after recording (0 unless all was recorded).
    pub(super) budget: u64,
    /// How long the store refused for, µs; 0 if it did not.
    pub(super) retry: u64,
    /// Whether that refusal was a ban ([`Outcome::Banned`](crate::Outcome::Banned)).
    pub(super) banned: bool,
    pub(super) reset: u64,
}

impl Verdict {
    pub(super) fn fresh(&self, now: u64, interval: u64) -> bool {
        self.refreshed_at
            .is_some_and(|at| at <= now && now < at.saturating_add(interval).max(self.denied_until))
    }

    /// Decides `cost` from this verdict, spending the budget, as the policy builds its
    /// decisions. A peek fits even while the store's refusal holds, as in every store.
    pub(super) fn decide(
        &mut self,
        now: u64,
        cost: u64,
        policy: &Policy,
        interval: u64,
    ) -> Decision {
        let reset = self.reset_at.saturating_sub(now);
        if cost > 0 && now < self.denied_until && now < self.ban_end {
            return policy.ban_decision(self.ban_end - now);
        }
        let retry = if cost > 0 && now < self.denied_until {
            self.denied_until - now
        } else if cost <= self.budget {
            self.budget -= cost;
            self.pending = self.pending.saturating_add(cost);
            return policy.decision_from_micros(true, self.budget, 0, reset);
        } else {
            let due = self.refreshed_at.unwrap_or(0).saturating_add(interval);
            due.saturating_sub(now)
        };
        let retry = retry.max(1);
        policy.decision_from_micros(false, self.budget, retry, reset.max(retry))
    }

    /// Takes in the answer of a refresh sent at `sent`.
    pub(super) fn apply(&mut self, a: Refreshed, sent: u64, limit: u64, interval: u64) {
        // What is pending now was admitted while the refresh ran, from the old budget: the
        // store's `remaining` did not count it, so the new budget must.
        let meanwhile = self.pending;
        self.pending = self.pending.saturating_add(a.left);
        self.budget = a
            .budget
            .saturating_sub(meanwhile)
            .min(limit.saturating_sub(self.pending));
        self.ban_end = if a.banned {
            sent.saturating_add(a.retry)
        } else {
            0
        };
        self.denied_until = if a.banned {
            sent.saturating_add(a.retry.min(interval))
        } else if a.retry > 0 {
            sent.saturating_add(a.retry)
        } else {
            0
        };
        self.refreshed_at = Some(sent);
        self.reset_at = sent.saturating_add(a.reset);
    }

    /// How long the entry is worth keeping: entries with counts last, in flight never.
    pub(super) fn keep_until(&self, interval: u64) -> u64 {
        if self.in_flight {
            u64::MAX
        } else if self.pending > 0 {
            u64::MAX - 1
        } else {
            let fresh_until = self
                .refreshed_at
                .map_or(0, |at| at.saturating_add(interval));
            fresh_until.max(self.denied_until).min(u64::MAX - 2)
        }
    }
}
