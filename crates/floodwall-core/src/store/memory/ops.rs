//! The memory store's answer to every operation, at once: `call_now` always answers.

use std::future::{Future, ready};

use super::MemoryStore;
use crate::store::{Op, Reply, Store};
use crate::{Clock, Error};

impl<C: Clock> Store for MemoryStore<C> {
    fn call(&self, op: Op<'_>) -> impl Future<Output = Result<Reply, Error>> + Send {
        ready(self.answer(op))
    }

    #[inline(always)]
    fn call_now(&self, op: Op<'_>) -> Option<Result<Reply, Error>> {
        Some(self.answer(op))
    }
}

impl<C: Clock> MemoryStore<C> {
    /// Every operation, at once: the memory store never waits.
    #[inline(always)]
    fn answer(&self, op: Op<'_>) -> Result<Reply, Error> {
        match op {
            Op::Check { key, policy, cost } => {
                self.check_sync(key, policy, cost).map(Reply::Decision)
            }
            op => self.answer_other(op),
        }
    }

    /// Every operation but a single check, out of the check's line.
    #[inline(never)]
    fn answer_other(&self, op: Op<'_>) -> Result<Reply, Error> {
        Ok(match op {
            Op::Check { key, policy, cost } => Reply::Decision(self.check_sync(key, policy, cost)?),
            Op::CheckAll { checks } => Reply::Decisions(self.check_all_sync(checks)?),
            Op::Reserve {
                key,
                policy,
                cost,
                max_wait,
            } => Reply::Reservation(self.reserve_sync(key, policy, cost, max_wait)?),
            Op::Cancel {
                key,
                policy,
                reservation,
            } => Reply::Cancelled(self.cancel_sync(key, policy, &reservation)?),
            Op::Adjust {
                key,
                policy,
                adjustment,
            } => {
                self.adjust_sync(key, policy, adjustment)?;
                Reply::Done
            }
            Op::Unban { key, policy } => {
                self.unban_sync(key, policy);
                Reply::Done
            }
            Op::Reset { key, policy } => {
                self.reset_sync(key, policy);
                Reply::Done
            }
            Op::Acquire { key, limit } => Reply::Acquired(self.acquire_sync(key, limit)?),
            Op::PenaltyState { key, policy } => {
                Reply::PenaltyState(self.penalty_state_sync(key, policy))
            }
        })
    }
}
