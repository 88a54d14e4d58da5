//! The memory store's checks of several keys or policies at once: every check's
//! state is held (a lock, or a GCRA TAT swapped for `BUSY`), in address order, each check
//! decides on it, and the states are written only if all allowed
//! ([`crate::guide::all_or_nothing`] argues it).

use std::sync::MutexGuard;

use smallvec::SmallVec;
use std::sync::atomic::{AtomicU64, Ordering};

use super::{BUSY, KeyState, Locked, MemoryStore, settled};
use crate::algorithm::clamp_now;
use crate::store::Checks;
use crate::store::key::KeyBuf;
use crate::store::lock;
use crate::{Clock, Decision, Error, Policy, State};

impl<C: Clock> MemoryStore<C> {
    /// [`StoreExt::check_all`](crate::StoreExt::check_all) without the future.
    pub(crate) fn check_all_sync(
        &self,
        checks: Checks<'_>,
    ) -> Result<Vec<Option<Decision>>, Error> {
        let (mut charges, mut penalized) = (false, false);
        for c in checks.iter() {
            c.policy.check_cost(c.cost)?;
            charges |= c.cost > 0;
            penalized |= c.policy.penalty().is_some();
        }
        // A peek records nothing, and one check is a check: nothing to hold together.
        if checks.len() < 2 || !charges {
            return checks
                .iter()
                .map(|c| self.check_sync(c.key, c.policy, c.cost).map(Some))
                .collect();
        }
        let bufs = KeyBufs::of(&checks);
        if penalized {
            return self.check_all_penalized(&checks, &bufs);
        }
        self.check_all_quotas(&checks, &bufs)
    }

    /// [`check_all_sync`](Self::check_all_sync) when a policy has a penalty (rule 8 of
    /// [penalties](crate::guide::penalties)).
    fn check_all_penalized(
        &self,
        checks: &Checks<'_>,
        bufs: &KeyBufs<'_>,
    ) -> Result<Vec<Option<Decision>>, Error> {
        let now = clamp_now(self.inner.clock.now_micros());
        if let Some(bans) = self.bans_of(checks, bufs, now) {
            return checks
                .iter()
                .zip(bans)
                .map(|(c, ban)| match ban {
                    Some(ban) => Ok(Some(ban)),
                    None => self.check_quota(c.key, c.policy, 0).map(Some),
                })
                .collect();
        }
        let mut decisions = self.check_all_quotas(checks, bufs)?;
        for ((i, c), d) in checks.iter().enumerate().zip(&mut decisions) {
            let buf = bufs.get(i);
            if let (Some(penalty), Some(d)) = (c.policy.penalty(), d.as_mut())
                && !d.is_allowed()
                && let Some(ban) = self.strike(buf, c.policy, penalty, now)
            {
                *d = ban;
            }
        }
        Ok(decisions)
    }

    /// The quotas of several checks (two at least, one with a cost) held and decided
    /// together, without their penalties.
    fn check_all_quotas(
        &self,
        checks: &Checks<'_>,
        bufs: &KeyBufs<'_>,
    ) -> Result<Vec<Option<Decision>>, Error> {
        let now = clamp_now(self.inner.clock.now_micros());
        let map = self.inner.map.pin();
        loop {
            // Every check's entry, made if new, before any is held: making room may
            // sweep, and a sweep kills entries.
            let mut entries: SmallVec<[&KeyState; 4]> = SmallVec::with_capacity(checks.len());
            for (i, c) in checks.iter().enumerate() {
                let k = bufs.get(i).as_ref(c.policy.state_namespace());
                entries.push(match map.get(&k) {
                    Some(entry) => entry,
                    None => self.insert(&map, k, KeyState::fresh(c.policy), now),
                });
            }
            match decide_all(&entries, checks, now) {
                Some(result) => return result,
                // One was evicted under our feet: help remove it, then look again.
                None => {
                    for (i, c) in checks.iter().enumerate() {
                        let k = bufs.get(i).as_ref(c.policy.state_namespace());
                        let _ = map.remove_if(&k, |_, s| s.is_dead());
                    }
                }
            }
        }
    }
}

/// Each check's key in the map's form: one for all when the checks share their key, so
/// a long key is hashed once.
pub(super) enum KeyBufs<'a> {
    Shared(KeyBuf<'a>),
    Each(SmallVec<[KeyBuf<'a>; 4]>),
}

impl<'a> KeyBufs<'a> {
    // Inlined, one shared key costs what a single `KeyBuf` did (http_instructions'
    // two-policy row, BENCHMARKS.md §3).
    #[inline]
    fn of(checks: &Checks<'a>) -> Self {
        match checks {
            Checks::OneKey { key, .. } => Self::Shared(KeyBuf::new(key)),
            Checks::Each(each) => Self::Each(each.iter().map(|c| KeyBuf::new(c.key)).collect()),
        }
    }

    /// Check `i`'s.
    #[inline]
    pub(super) fn get(&self, i: usize) -> &KeyBuf<'a> {
        match self {
            Self::Shared(buf) => buf,
            Self::Each(bufs) => &bufs[i],
        }
    }
}

/// One key's state, held by a check of several policies.
enum Held<'a> {
    /// A GCRA TAT swapped for `BUSY`: `value` is written back when this is dropped.
    Gcra {
        entry: &'a KeyState,
        tat: &'a AtomicU64,
        was: u64,
        value: u64,
    },
    /// Any other algorithm's state, under its lock; decided on a copy.
    Locked {
        entry: &'a KeyState,
        locked: &'a Locked,
        guard: MutexGuard<'a, Option<State>>,
        work: State,
        expires: u64,
    },
}

impl<'a> Held<'a> {
    /// Holds `entry`; `None` if it was evicted.
    fn take(entry: &'a KeyState) -> Option<Self> {
        match entry {
            KeyState::Gcra(tat) => {
                let mut t = tat.load(Ordering::Acquire);
                loop {
                    if t >= BUSY {
                        t = settled(tat)?;
                    }
                    match tat.compare_exchange_weak(t, BUSY, Ordering::AcqRel, Ordering::Acquire) {
                        Ok(_) => {
                            return Some(Self::Gcra {
                                entry,
                                tat,
                                was: t,
                                value: t,
                            });
                        }
                        Err(seen) => t = seen,
                    }
                }
            }
            KeyState::Locked(locked) => {
                let guard = lock(&locked.state);
                let work = guard.as_ref()?.clone();
                Some(Self::Locked {
                    entry,
                    locked,
                    guard,
                    work,
                    expires: 0,
                })
            }
        }
    }

    fn entry(&self) -> *const KeyState {
        match self {
            Self::Gcra { entry, .. } | Self::Locked { entry, .. } => *entry,
        }
    }

    /// Decides `policy` on the held state, which then includes this decision.
    fn decide(&mut self, policy: &Policy, now: u64, cost: u64) -> Result<Decision, Error> {
        match (self, policy.engine().gcra()) {
            (Self::Gcra { value, .. }, Some(gcra)) => {
                let (judgement, next) = gcra.judge(*value, now, cost);
                if let Some(next) = next {
                    *value = next;
                }
                Ok(policy.to_decision_with_limit(gcra.raw(judgement), gcra.burst))
            }
            (Self::Locked { work, expires, .. }, None) => {
                let raw = policy.engine().decide(work, now, cost)?;
                *expires = (*expires).max(now + raw.reset);
                Ok(policy.to_decision_with_limit(raw, policy.limit()))
            }
            _ => Err(Error::StateMismatch),
        }
    }

    /// What `policy` says of the held state as the key had it (a peek).
    fn peek(&self, policy: &Policy, now: u64) -> Result<Decision, Error> {
        match (self, policy.engine().gcra()) {
            (Self::Gcra { was, .. }, Some(gcra)) => {
                let (judgement, _) = gcra.judge(*was, now, 0);
                Ok(policy.to_decision_with_limit(gcra.raw(judgement), gcra.burst))
            }
            (Self::Locked { guard, .. }, None) => {
                let mut state = guard.as_ref().cloned().unwrap_or_default();
                let raw = policy.engine().decide(&mut state, now, 0)?;
                Ok(policy.to_decision_with_limit(raw, policy.limit()))
            }
            _ => Err(Error::StateMismatch),
        }
    }

    /// Makes what was decided on the held state the key's state.
    fn commit(&mut self) {
        match self {
            // Written back on drop.
            Self::Gcra { .. } => {}
            Self::Locked {
                locked,
                guard,
                work,
                expires,
                ..
            } => {
                **guard = Some(std::mem::take(work));
                locked.expires.fetch_max(*expires, Ordering::AcqRel);
            }
        }
    }

    /// Forgets what was decided: the key's state stays as it was.
    fn roll_back(&mut self) {
        if let Self::Gcra { was, value, .. } = self {
            *value = *was;
        }
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        if let Self::Gcra { tat, value, .. } = self {
            // Only this holder writes a `BUSY` state.
            tat.store(*value, Ordering::Release);
        }
    }
}

/// Holds every entry (each once, in address order), decides each policy on the held
/// states, writes them only if all allowed. `None`: an entry was evicted; look again.
fn decide_all(
    entries: &[&KeyState],
    checks: &Checks<'_>,
    now: u64,
) -> Option<Result<Vec<Option<Decision>>, Error>> {
    let mut order: SmallVec<[*const KeyState; 4]> =
        entries.iter().map(|e| *e as *const _).collect();
    order.sort_unstable();
    order.dedup();
    let mut held: SmallVec<[Held<'_>; 4]> = SmallVec::with_capacity(order.len());
    for address in &order {
        let entry = entries.iter().find(|e| std::ptr::eq(**e, *address))?;
        // Dropping `held` on the way out lets go of what is held so far.
        held.push(Held::take(entry)?);
    }
    let mut decisions = Vec::with_capacity(checks.len());
    for (check, entry) in checks.iter().zip(entries) {
        let h = held
            .iter_mut()
            .find(|h| std::ptr::eq(h.entry(), *entry))
            .expect("every entry is held");
        match h.decide(check.policy, now, check.cost) {
            Ok(d) => decisions.push(Some(d)),
            Err(e) => {
                held.iter_mut().for_each(Held::roll_back);
                return Some(Err(e));
            }
        }
    }
    if decisions.iter().flatten().all(|d| d.is_allowed()) {
        held.iter_mut().for_each(Held::commit);
        return Some(Ok(decisions));
    }
    // Refused: nothing is recorded, and the policies that would have allowed the request
    // say what they hold as it stays.
    for ((check, entry), d) in checks.iter().zip(entries).zip(&mut decisions) {
        if d.is_some_and(|d| d.is_allowed()) {
            let h = held.iter().find(|h| std::ptr::eq(h.entry(), *entry))?;
            match h.peek(check.policy, now) {
                Ok(peek) => *d = Some(peek),
                Err(e) => return Some(Err(e)),
            }
        }
    }
    held.iter_mut().for_each(Held::roll_back);
    Some(Ok(decisions))
}
