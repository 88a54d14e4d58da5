//! One check in flight after a cached refusal lapsed ([`Flight`]), the checks waiting for
//! it ([`Wait`]), and the one leading it ([`Leading`]).

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

/// A check of a key whose cached refusal lapsed, in flight to the inner store: checks of
/// that key with a cost `>= cost` wait for how it ends, until `deadline` at the latest.
#[derive(Debug)]
pub(super) struct Flight {
    pub(super) cost: u64,
    /// Local µs from which the leader is deemed stuck.
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
    /// The store refused: any cost `>=` the flight's is refused until `until` (local µs).
    Refused { until: u64, reset_at: u64 },
    /// Admitted, failed, cancelled or reset meanwhile: each waiting check decides again.
    Open,
}

impl FlightEnd {
    /// How the store's answer `d` to a leader sent at `sent` lands its flight: a refusal is
    /// handed to the waiting checks; a ban is not (they look again and find it recorded).
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

    /// Whether the leader has been out so long it may never be polled again.
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

/// A check waiting for a [`Flight`] to land: `Some` end, or `None` past its deadline.
pub(super) struct Wait<'a, C> {
    flight: Arc<Flight>,
    slot: Option<usize>,
    clock: &'a C,
    /// Wakes this check at the deadline, should neither the leader nor anything else.
    timer: Timer,
}

impl<'a, C: Clock> Wait<'a, C> {
    /// A wait for `flight`, or `None` where no [`Timer`] could end it at the deadline
    /// (nothing else might): such a check goes to the store instead.
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

#[cfg(feature = "tokio")]
impl Timer {
    /// Whether a timer could be armed here: in a tokio runtime.
    pub(super) fn available() -> bool {
        tokio::runtime::Handle::try_current().is_ok()
    }

    /// A timer firing `left` µs from now, when in a tokio runtime.
    fn arm(left: u64) -> Option<Self> {
        let sleep = || Self(Box::pin(tokio::time::sleep(Duration::from_micros(left))));
        Self::available().then(sleep)
    }

    /// Whether it fired; if not, `cx` is woken when it does.
    fn fired(&mut self, cx: &mut Context<'_>) -> bool {
        self.0.as_mut().poll(cx).is_ready()
    }
}

/// No timer without the `tokio` feature.
#[cfg(not(feature = "tokio"))]
impl Timer {
    pub(super) fn available() -> bool {
        false
    }

    fn arm(_left: u64) -> Option<Self> {
        None
    }

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

/// Held by the check that leads a [`Flight`]: lands it however that check ends.
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
