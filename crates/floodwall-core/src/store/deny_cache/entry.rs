//! What the cache knows of a key ([`Entry`]): learnt, answered, forgotten, evicted.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::DenyCache;
use super::all::Answer;
use super::flight::{Flight, FlightEnd};
use crate::store::evict::evict_soonest;
use crate::store::key::{KeyBuf, MapKey};
use crate::{Clock, Decision, Parameters, Policy, Rounding, Source};

pub(super) type Map = papaya::HashMap<MapKey, Entry, ahash::RandomState>;

/// A fact learnt from the store: any cost `>= cost` is refused until `end` (local µs),
/// held here until `until`, when one check asks the store again.
#[derive(Debug, Clone)]
pub(super) struct Entry {
    /// When the hold ends: answered locally until then.
    pub(super) until: u64,
    /// When the fact itself ends: what a local refusal reports (`retry_after` until then).
    pub(super) end: u64,
    pub(super) cost: u64,
    /// When the store said the key would be back to full, as a lower bound.
    pub(super) reset_at: u64,
    /// Whether the fact is a ban, answered as one ([penalties](crate::guide::penalties)).
    pub(super) banned: bool,
    /// Learnt from a check of several policies: what the store said of each.
    pub(super) others: Option<Arc<Answer>>,
    /// Once the hold has lapsed: the one check of the key in flight to the store.
    pub(super) flight: Option<Arc<Flight>>,
}

impl Entry {
    /// The fact itself, for comparing (a flight set on it since does not count).
    fn fact(&self) -> (u64, u64, u64, u64, bool) {
        (self.until, self.end, self.cost, self.reset_at, self.banned)
    }

    /// The local refusal this fact gives at `now` (before `until`).
    pub(super) fn answer(&self, policy: &Policy, now: u64) -> Decision {
        if self.banned {
            return policy.ban_decision(self.end - now);
        }
        refusal(policy, now, self.end, self.reset_at, 0)
    }

    pub(super) fn led_by(&self, flight: &Arc<Flight>) -> bool {
        self.flight.as_ref().is_some_and(|f| Arc::ptr_eq(f, flight))
    }
}

impl<S, C: Clock> DenyCache<S, C> {
    /// Learns from the store's answer to a check sent at `sent`; how it lands its flight.
    pub(super) fn record(
        &self,
        key: &[u8],
        policy: &Policy,
        cost: u64,
        sent: u64,
        epoch: u64,
        d: &Decision,
    ) -> FlightEnd {
        let Some(figures) = self.teaches(policy, epoch, d) else {
            return FlightEnd::Open;
        };
        if let Some((entry, now)) = self.learn(policy, cost, sent, d, figures) {
            self.remember(key, policy, epoch, entry, now);
        }
        FlightEnd::after(sent, d, figures)
    }

    /// The exact figures behind the store's answer ([`exact`]) when the cache may answer
    /// from it; `None` when it may not, or a reset came since `epoch`. Under a penalty only
    /// bans are (a refusal is a strike the store must count).
    pub(super) fn teaches(
        &self,
        policy: &Policy,
        epoch: u64,
        d: &Decision,
    ) -> Option<(Option<u64>, u64)> {
        let figures = exact(policy, d)?;
        if policy.penalty().is_some() && !d.is_banned() {
            return None;
        }
        (self.cache.resets.load(Ordering::SeqCst) == epoch).then_some(figures)
    }

    /// The fact an answer to a check of `cost` sent at `sent` teaches, from its `figures`,
    /// and the time it was learnt; `None` when it teaches nothing to hold.
    pub(super) fn learn(
        &self,
        policy: &Policy,
        cost: u64,
        sent: u64,
        d: &Decision,
        (retry, reset): (Option<u64>, u64),
    ) -> Option<(Entry, u64)> {
        let cache = &self.cache;
        let (cost, wait) = if d.is_allowed() {
            exhausted(policy, d.remaining, reset)?
        } else if d.is_banned() {
            // Every cost is refused while banned.
            (1, retry?)
        } else {
            (cost, retry?)
        };
        // Held for a bound, not for the fact's length: a reset elsewhere (an unban, for a
        // ban) reaches this cache no later than that.
        let hold = if d.is_banned() {
            cache.max_ban_hold
        } else {
            cache.max_refusal_hold
        };
        let now = cache.clock.now_micros();
        let until = sent.saturating_add(wait.min(hold));
        if until <= now {
            return None;
        }
        let entry = Entry {
            until,
            end: sent.saturating_add(wait),
            cost,
            reset_at: sent.saturating_add(reset),
            banned: d.is_banned(),
            others: None,
            flight: None,
        };
        Some((entry, now))
    }

    /// Keeps a fact [`learn`](Self::learn)t at `now`, unless a reset came since `epoch`.
    pub(super) fn remember(&self, key: &[u8], policy: &Policy, epoch: u64, entry: Entry, now: u64) {
        let cache = &self.cache;
        let buf = KeyBuf::new(key);
        let map_key = buf.as_ref(policy.namespace());
        let map = cache.map.pin();
        if map.get(&map_key).is_none() {
            self.make_room(now);
        }
        map.insert(map_key.to_owned(), entry.clone());
        // A reset that ran between the epoch check and the insert must not be undone.
        if cache.resets.load(Ordering::SeqCst) != epoch {
            let _ = map.remove_if(&map_key, |_, e| e.fact() == entry.fact());
        }
    }

    /// Forgets the key, and refuses to record answers to checks sent before now.
    pub(super) fn forget(&self, key: &[u8], policy: &Policy) {
        let cache = &self.cache;
        cache.resets.fetch_add(1, Ordering::SeqCst);
        let buf = KeyBuf::new(key);
        let _ = cache.map.pin().remove(&buf.as_ref(policy.namespace()));
    }

    /// Called before a new key goes in: at the cap, drops lapsed entries, then the soonest.
    fn make_room(&self, now: u64) {
        let cache = &self.cache;
        cache.cap.make_room(
            || cache.map.len(),
            |target| {
                cache.map.pin().retain(|_, e| e.until > now);
                evict_soonest(&cache.map, target, now, |e: &Entry| e.until, |_, _| true);
            },
        );
    }
}

/// The exact `retry_after` (when denied) and `reset_after` in µs behind a store's answer;
/// `None` for a fallback's, or for rounded durations without their exact figures.
pub(super) fn exact(policy: &Policy, d: &Decision) -> Option<(Option<u64>, u64)> {
    if d.source == Source::Fallback || (policy.rounding() != Rounding::Micros && d.exact.is_none())
    {
        return None;
    }
    Some(d.exact_micros())
}

/// A refusal answered locally at `now` from a fact lasting until `until`, rounded as the
/// policy reports, marked [`Source::Cache`]; `remaining` 0 for the refused policy.
pub(super) fn refusal(
    policy: &Policy,
    now: u64,
    until: u64,
    reset_at: u64,
    remaining: u64,
) -> Decision {
    let retry = until - now;
    let reset = reset_at.saturating_sub(now).max(retry);
    policy
        .decision_from_micros(false, remaining, retry, reset)
        .by_cache()
}

/// After an admission: the smallest cost now refused, and for how long after the check was
/// sent ([guide](crate::guide::deny_cache#admissions-tell-too)); `None` if it cannot tell.
fn exhausted(policy: &Policy, remaining: u64, reset: u64) -> Option<(u64, u64)> {
    let next = remaining.checked_add(1)?;
    if next > policy.limit() {
        return None;
    }
    // GCRA and the funnel, which is GCRA underneath: refused while
    // `tat + next × interval - now > tolerance`, and `reset` is `tat - now`.
    let wait = if let Some(g) = policy.engine().gcra() {
        reset
            .checked_add(next.checked_mul(g.interval)?)?
            .checked_sub(g.tolerance)?
    } else {
        match policy.parameters() {
            // Refused until the next tick adds a token; `reset` is when the bucket is full.
            Parameters::TokenBucket {
                capacity,
                tick,
                quantum,
            } => {
                let to_full = (capacity - remaining).div_ceil(quantum);
                let to_next = (next - remaining).div_ceil(quantum);
                reset.checked_sub((to_full - to_next).checked_mul(tick)?)?
            }
            // Refused until the window ends, which is `reset` once anything was counted.
            Parameters::FixedWindow { .. } => reset,
            _ => return None,
        }
    };
    (wait > 0).then_some((next, wait))
}
