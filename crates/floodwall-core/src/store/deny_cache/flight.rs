//! One check in flight after a cached refusal lapsed: the [`Flight`] the checks of that key
//! wait for, how a waiting check is woken ([`Wait`]), and how the leading check lands its
//! flight whichever way it ends ([`Leading`]).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
#[cfg(feature = "tokio")]
use std::time::Duration;

use super::Cache;
use crate::store::key::MapKey;
use crate::store::lock;
use crate::{Clock, Decision, Outcome};

/// A check of a key whose cached refusal lapsed, in flight to the inner store: the
/// checks of that key arriving meanwhile with a cost `>= cost` wait for how it ends, until
/// `deadline` at the latest.
#[derive(Debug)]
pub(super) struct Flight {
    pub(super) cost: u64,
    /// Local µs from which the leader is deemed stuck (see
    /// [`DenyCacheBuilder::max_wait`](crate::DenyCacheBuilder::max_wait)).
    pub(super) deadline: u64,
    landing: Mutex<Landing>,
}

#[derive(Debug, Default)]
struct Landing {
    end: Option<FlightEnd>,
    /// One slot per waiting check, emptied when it stops waiting.
    waiters: Vec<Option<Waker>>,
}

/// How a [`Flight`] ended, for the checks waiting for it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum FlightEnd {
    /// The store refused: any cost `>=` the flight's is refused until `until`, as for an
    /// entry (local µs, from the flight's send).
    Refused { until: u64, reset_at: u64 },
    /// Admitted, failed, cancelled or reset meanwhile: each waiting check decides again.
    Open,
}

impl FlightEnd {
    /// How the store's answer `d` to a leader sent at `sent` lands its flight, from the
    /// `figures` the answer [`teaches`](super::DenyCache::teaches). A refusal is handed to
    /// the waiting checks; a ban is not: they look again, and find it recorded (held for
    /// its bound, answered with its remainder).
    pub(super) fn after(sent: u64, d: &Decision, figures: (Option<u64>, u64)) -> Self {
        match figures {
            (Some(retry), reset) if d.outcome == Outcome::Refused => Self::Refused {
                until: sent.saturating_add(retry),
                reset_at: sent.saturating_add(reset),
            },
            _ => Self::Open,
        }
    }
}

impl Flight {
    pub(super) fn new(cost: u64, deadline: u64) -> Self {
        Self {
            cost,
            deadline,
            landing: Mutex::new(Landing::default()),
        }
    }

    /// Whether the leader has been out so long it may never be polled again: nobody waits
    /// for it any more, and the next check of the key leads a flight of its own.
    pub(super) fn stuck(&self, now: u64) -> bool {
        now >= self.deadline
    }

    /// Sets how it ended (the first end set stays) and wakes every waiting check.
    pub(super) fn land(&self, end: FlightEnd) {
        let waiters = {
            let mut l = lock(&self.landing);
            if l.end.is_some() {
                return;
            }
            l.end = Some(end);
            std::mem::take(&mut l.waiters)
        };
        for waker in waiters.into_iter().flatten() {
            waker.wake();
        }
    }
}

/// A check waiting for a [`Flight`] to land: `Some` end, or `None` once the flight's
/// deadline has passed (on the cache's clock, or on its [`Timer`]).
pub(super) struct Wait<'a, C> {
    flight: Arc<Flight>,
    slot: Option<usize>,
    clock: &'a C,
    /// Wakes this check at the deadline, should neither the leader nor anything else.
    timer: Timer,
}

impl<'a, C: Clock> Wait<'a, C> {
    /// A wait for `flight`, or `None` where no [`Timer`] could end it at the flight's
    /// deadline: nothing else would wake it there (a leader never polled again and never
    /// dropped lands nothing), so such a check does not wait but goes to the store, and the
    /// bound holds everywhere.
    pub(super) fn new(flight: Arc<Flight>, clock: &'a C) -> Option<Self> {
        let timer = Timer::arm(flight.deadline.saturating_sub(clock.now_micros()))?;
        Some(Self {
            flight,
            slot: None,
            clock,
            timer,
        })
    }
}

/// What wakes a waiting check at its flight's deadline: tokio's timer.
#[cfg(feature = "tokio")]
pub(super) struct Timer(Pin<Box<tokio::time::Sleep>>);

/// Without the `tokio` feature there is no timer, so no check waits ([`Wait::new`]).
#[cfg(not(feature = "tokio"))]
pub(super) enum Timer {}

impl Timer {
    /// Whether a timer could be armed here: in a tokio runtime, with the `tokio` feature.
    /// Where not, no check could wait, so a check after a lapse leads no flight.
    #[cfg(feature = "tokio")]
    pub(super) fn available() -> bool {
        tokio::runtime::Handle::try_current().is_ok()
    }

    /// No timer without the `tokio` feature.
    #[cfg(not(feature = "tokio"))]
    pub(super) fn available() -> bool {
        false
    }

    /// A timer firing `left` µs from now, when in a tokio runtime (its timer enabled, as the
    /// Redis store's timeout needs too); `None` elsewhere.
    #[cfg(feature = "tokio")]
    fn arm(left: u64) -> Option<Self> {
        tokio::runtime::Handle::try_current().ok()?;
        let sleep = tokio::time::sleep(Duration::from_micros(left));
        Some(Self(Box::pin(sleep)))
    }

    /// No timer without the `tokio` feature.
    #[cfg(not(feature = "tokio"))]
    fn arm(_left: u64) -> Option<Self> {
        None
    }

    /// Whether it fired; if not, `cx` is woken when it does.
    #[cfg(feature = "tokio")]
    fn fired(&mut self, cx: &mut Context<'_>) -> bool {
        self.0.as_mut().poll(cx).is_ready()
    }

    #[cfg(not(feature = "tokio"))]
    fn fired(&mut self, _cx: &mut Context<'_>) -> bool {
        match *self {}
    }
}

impl<C: Clock> Future for Wait<'_, C> {
    type Output = Option<FlightEnd>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<FlightEnd>> {
        let this = self.get_mut();
        let flight = Arc::clone(&this.flight);
        let mut l = lock(&flight.landing);
        if let Some(end) = l.end {
            this.slot = None;
            return Poll::Ready(Some(end));
        }
        let now = this.clock.now_micros();
        if flight.stuck(now) || this.timer.fired(cx) {
            // `Drop` empties the slot.
            return Poll::Ready(None);
        }
        match this.slot {
            Some(i) => match &mut l.waiters[i] {
                Some(w) if w.will_wake(cx.waker()) => {}
                w => *w = Some(cx.waker().clone()),
            },
            None => {
                this.slot = Some(l.waiters.len());
                l.waiters.push(Some(cx.waker().clone()));
            }
        }
        Poll::Pending
    }
}

impl<C> Drop for Wait<'_, C> {
    fn drop(&mut self) {
        if let Some(i) = self.slot
            && let Some(w) = lock(&self.flight.landing).waiters.get_mut(i)
        {
            *w = None;
        }
    }
}

/// Held by the check that leads a [`Flight`]: lands it however that check ends (answered,
/// failed, or dropped while in flight), so no waiting check is left behind.
pub(super) struct Leading<'a, C> {
    pub(super) cache: &'a Cache<C>,
    pub(super) key: MapKey,
    pub(super) flight: Arc<Flight>,
    /// How the flight lands; [`FlightEnd::Open`] until the store's answer says otherwise.
    pub(super) end: FlightEnd,
}

impl<C> Drop for Leading<'_, C> {
    fn drop(&mut self) {
        // The lapsed entry carrying the flight goes, unless an answer replaced it.
        let _ = self
            .cache
            .map
            .pin()
            .remove_if(&self.key, |_, e| e.led_by(&self.flight));
        self.flight.land(self.end);
    }
}
