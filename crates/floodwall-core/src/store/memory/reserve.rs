//! The memory store's reservations, on the same key states as its checks.

use std::sync::atomic::Ordering;
use std::time::Duration;

use super::{DEAD, KeyState, MemoryStore, wait_while_busy};
use crate::algorithm::clamp_now;
use crate::reservation::max_wait_micros;
use crate::store::key::KeyBuf;
use crate::store::lock;
use crate::{Cancelled, Clock, Error, Reservable, Reservation, State, Ticket};

impl<C: Clock> MemoryStore<C> {
    /// [`StoreExt::reserve`](crate::StoreExt::reserve) without the future: exact however
    /// many threads book or check the key at once.
    pub(crate) fn reserve_sync(
        &self,
        key: &[u8],
        policy: &Reservable,
        cost: u64,
        max_wait: Duration,
    ) -> Result<Reservation, Error> {
        let p = policy.policy();
        p.check_cost(cost)?;
        if let Some(ban) = self.reserve_banned(key, policy) {
            return Ok(ban);
        }
        let max_wait = max_wait_micros(max_wait);
        let now = clamp_now(self.inner.clock.now_micros());
        let buf = KeyBuf::new(key);
        let key = buf.as_ref(p.state_namespace());
        let booked = self.update(
            key,
            p,
            now,
            cost != 0,
            |gcra, tat| {
                let (booked, next) = gcra.reserve(tat, now, cost, max_wait);
                ((booked, next.map(|next| [next, 0])), next)
            },
            |state| {
                let (booked, ticket) = p.engine().reserve(state, now, cost, max_wait)?;
                let fresh_in = booked.raw.reset;
                Ok(((booked, ticket), fresh_in))
            },
        )?;
        Ok(match booked {
            Some((booked, ticket)) => {
                policy.reservation(booked, ticket.map(|state| Ticket::new(cost, state)))
            }
            // A peek on an unknown key must not create one.
            None => {
                let (booked, _) = p.engine().reserve(&mut State::new(), now, 0, max_wait)?;
                policy.reservation(booked, None)
            }
        })
    }

    /// [`StoreExt::cancel`](crate::StoreExt::cancel) without the future.
    pub(crate) fn cancel_sync(
        &self,
        key: &[u8],
        policy: &Reservable,
        reservation: &Reservation,
    ) -> Result<Cancelled, Error> {
        let Some(ticket) = reservation.ticket else {
            return Ok(Cancelled::Spent);
        };
        let p = policy.policy();
        let buf = KeyBuf::new(key);
        let key = buf.as_ref(p.state_namespace());
        let map = self.inner.map.pin();
        let Some(entry) = map.get(&key) else {
            return Ok(Cancelled::Spent);
        };
        let returned = match (entry, p.engine().gcra()) {
            (KeyState::Gcra(tat), Some(gcra)) => {
                let [booked, _] = ticket.state();
                match gcra.cancel(booked, booked, ticket.cost()) {
                    // Only from the very state the booking left (never from DEAD).
                    Some(back) if booked != DEAD => {
                        // A check of several policies holding the key writes it back first.
                        wait_while_busy(tat);
                        tat.compare_exchange(booked, back, Ordering::AcqRel, Ordering::Acquire)
                            .is_ok()
                    }
                    _ => false,
                }
            }
            (KeyState::Locked(l), None) => match lock(&l.state).as_mut() {
                Some(state) => p.engine().cancel(state, ticket.state(), ticket.cost())?,
                None => false,
            },
            _ => return Err(Error::StateMismatch),
        };
        Ok(Cancelled::from_returned(returned))
    }
}
