//! What a store is asked ([`Op`]) and what it answers ([`Reply`]): one value per
//! operation, so a store combinator handles the few it changes and passes the rest on.

use std::time::Duration;

use super::Checks;
use crate::{
    Acquired, Adjustment, Cancelled, ConcurrencyLimit, Decision, Error, PenaltyState, Policy,
    Reservable, Reservation,
};

/// One operation on a store: what [`Store::call`](super::Store::call) is asked to do.
///
/// Users call the typed methods of [`StoreExt`](super::StoreExt) (`check`, `reserve`, …),
/// which build an `Op` and read the matching [`Reply`]; a store, or a combinator in front
/// of one, implements the operations by matching on it. A store that cannot do one answers
/// [`Op::unsupported`].
#[derive(Debug, Clone, Copy)]
#[non_exhaustive]
pub enum Op<'a> {
    /// Decide a request of `cost` for `key` under `policy`, and record it if allowed; a
    /// cost of 0 is a peek that changes nothing. Answers [`Reply::Decision`].
    Check {
        /// The client's key: any bytes.
        key: &'a [u8],
        /// Which limit; it also namespaces the key.
        policy: &'a Policy,
        /// What the request spends.
        cost: u64,
    },
    /// Decide several checks at once: recorded in all only if all allow (see
    /// [`StoreExt::check_all`](super::StoreExt::check_all)). Answers
    /// [`Reply::Decisions`].
    CheckAll {
        /// The checks, all or nothing.
        checks: Checks<'a>,
    },
    /// Book the earliest slot at most `max_wait` away (see
    /// [`StoreExt::reserve`](super::StoreExt::reserve)). Answers [`Reply::Reservation`].
    Reserve {
        /// The client's key.
        key: &'a [u8],
        /// A policy whose algorithm can book.
        policy: &'a Reservable,
        /// What the request spends.
        cost: u64,
        /// The longest wait the caller accepts.
        max_wait: Duration,
    },
    /// Give a booked slot back. Answers [`Reply::Cancelled`].
    Cancel {
        /// The key it was booked for.
        key: &'a [u8],
        /// The policy it was booked under.
        policy: &'a Reservable,
        /// What [`Op::Reserve`] answered.
        reservation: Reservation,
    },
    /// Charge or refund a key after its request was decided. Answers [`Reply::Done`].
    Adjust {
        /// The client's key.
        key: &'a [u8],
        /// The policy to charge under.
        policy: &'a Policy,
        /// The charge or refund.
        adjustment: Adjustment,
    },
    /// Lift a key's ban and forget its strikes. Answers [`Reply::Done`].
    Unban {
        /// The client's key.
        key: &'a [u8],
        /// The policy whose penalty banned it.
        policy: &'a Policy,
    },
    /// Read a key's strikes and ban under the policy's penalty, changing nothing. Answers
    /// [`Reply::PenaltyState`].
    PenaltyState {
        /// The client's key.
        key: &'a [u8],
        /// The policy whose penalty it is.
        policy: &'a Policy,
    },
    /// Forget a key's quota state (a ban stays). Answers [`Reply::Done`].
    Reset {
        /// The client's key.
        key: &'a [u8],
        /// The policy whose state goes.
        policy: &'a Policy,
    },
    /// Take a slot under an in-flight limit. Answers [`Reply::Acquired`].
    Acquire {
        /// The client's key.
        key: &'a [u8],
        /// The in-flight limit.
        limit: &'a ConcurrencyLimit,
    },
}

impl Op<'_> {
    /// The answer of a store that cannot do this operation: [`Error::Unsupported`].
    pub fn unsupported(&self) -> Error {
        Error::Unsupported {
            what: match self {
                Self::Check { .. } => "checking (check)",
                Self::CheckAll { .. } => "checking several policies at once (check_all)",
                Self::Reserve { .. } => "booking a slot (reserve)",
                Self::Cancel { .. } => "cancelling a reservation",
                Self::Adjust { .. } => "charging or refunding (adjust)",
                Self::Unban { .. } => "lifting a ban (unban)",
                Self::Reset { .. } => "forgetting a key (reset)",
                Self::PenaltyState { .. } => "reading a key's penalty (penalty_state)",
                Self::Acquire { .. } => "counting requests in flight (acquire)",
            },
        }
    }

    /// [`Error::CostTooHigh`] when the cost can never pass one of the policies, before
    /// anything is asked of a store; `Ok` for operations without a cost.
    pub fn check_cost(&self) -> Result<(), Error> {
        match *self {
            Self::Check { policy, cost, .. } => policy.check_cost(cost),
            Self::CheckAll { checks } => checks.check_costs(),
            Self::Reserve { policy, cost, .. } => policy.policy().check_cost(cost),
            _ => Ok(()),
        }
    }
}

/// What a store answers an [`Op`]: the variant each operation's documentation names.
#[derive(Debug)]
#[non_exhaustive]
pub enum Reply {
    /// To [`Op::Check`].
    Decision(Decision),
    /// To [`Op::CheckAll`]: one entry per check, in order (see
    /// [`StoreExt::check_all`](super::StoreExt::check_all) for when one is `None`).
    Decisions(Vec<Option<Decision>>),
    /// To [`Op::Reserve`].
    Reservation(Reservation),
    /// To [`Op::Cancel`].
    Cancelled(Cancelled),
    /// To [`Op::Acquire`].
    Acquired(Acquired),
    /// To [`Op::PenaltyState`].
    PenaltyState(PenaltyState),
    /// To [`Op::Adjust`], [`Op::Unban`] and [`Op::Reset`]: done.
    Done,
}

/// The error for a reply that does not match its operation (a store's bug).
#[cold]
fn mismatch(reply: &Reply) -> Error {
    Error::Backend {
        source: format!("the store answered an operation with the wrong reply: {reply:?}").into(),
    }
}

impl Reply {
    /// The decision of a [`Op::Check`].
    #[inline(always)]
    pub fn into_decision(self) -> Result<Decision, Error> {
        match self {
            Self::Decision(d) => Ok(d),
            other => Err(mismatch(&other)),
        }
    }

    /// The decisions of a [`Op::CheckAll`].
    pub fn into_decisions(self) -> Result<Vec<Option<Decision>>, Error> {
        match self {
            Self::Decisions(d) => Ok(d),
            other => Err(mismatch(&other)),
        }
    }

    /// The booking of a [`Op::Reserve`].
    pub fn into_reservation(self) -> Result<Reservation, Error> {
        match self {
            Self::Reservation(r) => Ok(r),
            other => Err(mismatch(&other)),
        }
    }

    /// What a [`Op::Cancel`] gave back.
    pub fn into_cancelled(self) -> Result<Cancelled, Error> {
        match self {
            Self::Cancelled(c) => Ok(c),
            other => Err(mismatch(&other)),
        }
    }

    /// What a [`Op::Acquire`] found.
    pub fn into_acquired(self) -> Result<Acquired, Error> {
        match self {
            Self::Acquired(a) => Ok(a),
            other => Err(mismatch(&other)),
        }
    }

    /// What a [`Op::PenaltyState`] read.
    pub fn into_penalty_state(self) -> Result<PenaltyState, Error> {
        match self {
            Self::PenaltyState(s) => Ok(s),
            other => Err(mismatch(&other)),
        }
    }

    /// The end of a [`Op::Adjust`], [`Op::Unban`] or [`Op::Reset`].
    pub fn into_done(self) -> Result<(), Error> {
        match self {
            Self::Done => Ok(()),
            other => Err(mismatch(&other)),
        }
    }
}
