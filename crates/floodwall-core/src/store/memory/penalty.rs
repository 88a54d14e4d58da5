//! The memory store's penalties ([`crate::guide::penalties`]): per (policy name, key), the
//! strikes and the ban, in a map of their own made by a key's first strike.

use std::sync::OnceLock;
use std::sync::atomic::Ordering;

use smallvec::SmallVec;

use super::all::KeyBufs;
use super::{Locked, MemoryStore};
use crate::algorithm::{Raw, clamp_now};
use crate::store::Checks;
use crate::store::evict::{Cap, evict_soonest};
use crate::store::key::{KeyBuf, KeyRef, MapKey};
use crate::store::{lock, micros, new_map, penalty_state_from_micros};
use crate::{Clock, Decision, Error, Penalty, PenaltyState, Policy, Reservable, Reservation};

/// One key's record, dropped once it says nothing any more (its `expires`).
type Record = Locked<Strikes>;

type Map = papaya::HashMap<MapKey, Record, ahash::RandomState>;

/// Every key's penalty record, bounded like the quota states; no map until a first strike.
pub(super) struct Records {
    map: OnceLock<Map>,
    cap: Cap,
}

/// What a key's refusals have earned it (all instants in µs on the store's clock).
#[derive(Debug, Clone, Copy, Default)]
struct Strikes {
    /// Strikes counted in the window ending at `window_end`, fixed when it opened.
    count: u32,
    window_end: u64,
    /// When the current ban ends (0: none, or over once `now >= ban_end`).
    ban_end: u64,
    /// Bans remembered, for the next one's length, until `forget_at`.
    bans: u32,
    forget_at: u64,
}

impl Strikes {
    /// When this record says nothing any more.
    fn expires(&self) -> u64 {
        self.window_end.max(self.ban_end).max(self.forget_at)
    }
}

impl Records {
    pub(super) fn new(max_keys: usize) -> Self {
        Self {
            map: OnceLock::new(),
            cap: Cap::new(max_keys),
        }
    }

    /// The remainder of the key's ban at `now` (µs), if it is banned.
    fn banned(&self, key: KeyRef<'_>, now: u64) -> Option<u64> {
        let map = self.map.get()?.pin();
        let record = map.get(&key)?;
        let rec = lock(&record.state);
        rec.as_ref()
            .filter(|s| s.ban_end > now)
            .map(|s| s.ban_end - now)
    }

    /// The key's record as it stands, if it has one.
    fn read(&self, key: KeyRef<'_>) -> Option<Strikes> {
        let map = self.map.get()?.pin();
        let record = map.get(&key)?;
        *lock(&record.state)
    }

    /// Counts a strike at `now`: `Some(µs)` when the key is banned after it (by this
    /// strike, the whole ban; by another check meanwhile, its remainder, and no strike).
    fn strike(&self, key: KeyRef<'_>, penalty: &Penalty, now: u64) -> Option<u64> {
        let map = self.map.get_or_init(new_map).pin();
        loop {
            let record = match map.get(&key) {
                Some(record) => record,
                None => {
                    self.make_room(now);
                    match map.try_insert(key.to_owned(), Locked::new(Strikes::default())) {
                        Ok(record) => record,
                        Err(occupied) => occupied.current,
                    }
                }
            };
            let mut guard = lock(&record.state);
            let Some(s) = guard.as_mut() else {
                // Evicted under our feet: help remove it, then look again.
                drop(guard);
                let _ = map.remove_if(&key, |_, r| r.is_dead());
                continue;
            };
            if s.ban_end > now {
                return Some(s.ban_end - now);
            }
            if s.count == 0 || now >= s.window_end {
                s.count = 0;
                s.window_end = now.saturating_add(micros(penalty.within()));
            }
            s.count += 1;
            let mut banned = None;
            if s.count >= penalty.after() {
                let n = if now < s.forget_at {
                    s.bans.saturating_add(1)
                } else {
                    1
                };
                let length = micros(penalty.nth_ban(n));
                s.ban_end = now.saturating_add(length);
                s.bans = n;
                s.forget_at = s.ban_end.saturating_add(micros(penalty.remembered_for()));
                s.count = 0;
                banned = Some(length);
            }
            record.expires.fetch_max(s.expires(), Ordering::AcqRel);
            return banned;
        }
    }

    /// Forgets the key's strikes, ban and remembered bans.
    fn forget(&self, key: KeyRef<'_>) {
        let Some(map) = self.map.get() else { return };
        let map = map.pin();
        if let Some(record) = map.get(&key) {
            *lock(&record.state) = None;
            let _ = map.remove_if(&key, |_, r| r.is_dead());
        }
    }

    /// Records held now.
    pub(super) fn len(&self) -> usize {
        self.map.get().map_or(0, Map::len)
    }

    /// Drops the records that say nothing any more; returns how many.
    pub(super) fn drop_expired(&self, now: u64) -> usize {
        let Some(map) = self.map.get() else { return 0 };
        let map = map.pin();
        let before = map.len();
        map.retain(|_, r| !(r.expires_at() <= now && r.kill(now)));
        before.saturating_sub(map.len())
    }

    /// At the cap: drops expired records, then those expiring soonest.
    fn make_room(&self, now: u64) {
        let Some(map) = self.map.get() else { return };
        self.cap.make_room(
            || map.len(),
            |target| {
                self.drop_expired(now);
                evict_soonest(map, target, now, Record::expires_at, Record::kill);
            },
        );
    }
}

/// [`store::ban_decision`](crate::store::ban_decision)'s figures, for `check_sync` to build.
fn ban_raw(policy: &Policy, remainder: u64) -> (Raw, u64, bool) {
    let raw = Raw {
        allowed: false,
        remaining: 0,
        retry: remainder,
        reset: remainder,
    };
    (raw, policy.limit(), true)
}

impl<C: Clock> MemoryStore<C> {
    /// [`check_sync`](Self::check_sync) for a policy with a penalty: a banned key is
    /// answered its ban; a refusal is a strike, and the strike that bans answers the ban.
    pub(super) fn check_penalized(
        &self,
        key: &[u8],
        policy: &Policy,
        penalty: &Penalty,
        cost: u64,
    ) -> Result<(Raw, u64, bool), Error> {
        policy.check_cost(cost)?;
        let now = clamp_now(self.inner.clock.now_micros());
        let buf = KeyBuf::new(key);
        let map_key = buf.as_ref(policy.name_namespace());
        let records = &self.inner.penalties;
        if let Some(remainder) = records.banned(map_key, now) {
            return Ok(ban_raw(policy, remainder));
        }
        let (raw, limit) = self.quota_raw(key, policy, cost)?;
        if raw.allowed || cost == 0 {
            return Ok((raw, limit, false));
        }
        Ok(match records.strike(map_key, penalty, now) {
            Some(remainder) => ban_raw(policy, remainder),
            None => (raw, limit, false),
        })
    }

    /// For a check of several: each check's ban, or `None` if none bans its key.
    pub(super) fn bans_of(
        &self,
        checks: &Checks<'_>,
        bufs: &KeyBufs<'_>,
        now: u64,
    ) -> Option<SmallVec<[Option<Decision>; 4]>> {
        let records = &self.inner.penalties;
        let bans: SmallVec<[Option<Decision>; 4]> = checks
            .iter()
            .enumerate()
            .map(|(i, c)| {
                c.policy.penalty()?;
                let remainder =
                    records.banned(bufs.get(i).as_ref(c.policy.name_namespace()), now)?;
                Some(c.policy.ban_decision(remainder))
            })
            .collect();
        bans.iter().any(Option::is_some).then_some(bans)
    }

    /// Counts a strike for a policy of a check of several; its ban, if the key is banned.
    pub(super) fn strike(
        &self,
        buf: &KeyBuf<'_>,
        policy: &Policy,
        penalty: &Penalty,
        now: u64,
    ) -> Option<Decision> {
        let ns = buf.as_ref(policy.name_namespace());
        Some(policy.ban_decision(self.inner.penalties.strike(ns, penalty, now)?))
    }

    /// The remainder of `key`'s ban under `policy` (µs from now), if it is banned.
    fn ban_left(&self, key: &[u8], policy: &Policy) -> Option<u64> {
        let now = clamp_now(self.inner.clock.now_micros());
        let buf = KeyBuf::new(key);
        self.inner
            .penalties
            .banned(buf.as_ref(policy.name_namespace()), now)
    }

    /// A booking's answer when `policy` bans the key: refused, whatever the wait.
    pub(super) fn reserve_banned(&self, key: &[u8], policy: &Reservable) -> Option<Reservation> {
        let p = policy.policy();
        p.penalty()?;
        Some(Reservation::refused(p.ban_decision(self.ban_left(key, p)?)))
    }

    /// [`StoreExt::unban`](crate::StoreExt::unban) without the future.
    pub(crate) fn unban_sync(&self, key: &[u8], policy: &Policy) {
        let buf = KeyBuf::new(key);
        (self.inner.penalties).forget(buf.as_ref(policy.name_namespace()));
    }

    /// [`StoreExt::penalty_state`](crate::StoreExt::penalty_state) without the future.
    pub(super) fn penalty_state_sync(&self, key: &[u8], policy: &Policy) -> PenaltyState {
        let now = clamp_now(self.inner.clock.now_micros());
        let buf = KeyBuf::new(key);
        let s = (self.inner.penalties)
            .read(buf.as_ref(policy.name_namespace()))
            .unwrap_or_default();
        penalty_state_from_micros(now, s.count, s.window_end, s.ban_end, s.bans, s.forget_at)
    }
}
