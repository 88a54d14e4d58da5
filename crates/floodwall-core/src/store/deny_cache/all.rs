//! Checks of several at once through the cache: a cached refusal of any refuses all, and
//! answers for the others of its key what the store's last answer said of them
//! ([`Answer`]), so the refusal reads the same whoever gave it.

use std::sync::Arc;

use super::DenyCache;
use super::entry::{exact, refusal};
use super::route::{Mode, Route};
use crate::store::Checks;
use crate::{Clock, Decision, Error, Policy};

/// When each policy of a check of several was sent (`None`: its answer is not recorded).
pub(super) type SentAll = Vec<Option<(u64, u64)>>;

/// What the store's answer to a check of several policies said of each, for repeating.
#[derive(Debug)]
pub(super) struct Answer {
    /// Local µs at which the check was sent: the figures run down from then.
    sent: u64,
    figures: Box<[Figures]>,
}

/// One policy's figures in an [`Answer`], in µs.
#[derive(Debug)]
struct Figures {
    namespace: u64,
    remaining: u64,
    /// `Some` when refused: how long for.
    retry: Option<u64>,
    reset: u64,
    banned: bool,
}

impl Answer {
    /// The figures of every policy answered; `None` when any lacks its exact ones.
    fn new(checks: &Checks<'_>, decisions: &[Option<Decision>], sent: u64) -> Option<Self> {
        let mut figures = Vec::with_capacity(checks.len());
        for (check, d) in checks.iter().zip(decisions) {
            let policy = check.policy;
            let Some(d) = d else { continue };
            let (retry, reset) = exact(policy, d)?;
            figures.push(Figures {
                namespace: policy.namespace(),
                remaining: d.remaining,
                retry,
                reset,
                banned: d.is_banned(),
            });
        }
        Some(Self {
            sent,
            figures: figures.into(),
        })
    }

    /// What the answer said of `policy`, its durations brought to `now` (`remaining` as
    /// the store gave it); `None` when it said nothing of it, or its refusal has lapsed.
    fn repeat(&self, policy: &Policy, now: u64) -> Option<Decision> {
        let namespace = policy.namespace();
        let f = self.figures.iter().find(|f| f.namespace == namespace)?;
        let reset_at = self.sent.saturating_add(f.reset);
        let d = match f.retry {
            None => policy.decision_from_micros(true, f.remaining, 0, reset_at.saturating_sub(now)),
            Some(retry) => {
                let until = self.sent.saturating_add(retry);
                if now >= until {
                    // Its refusal lapsed: what the store says of it now is not known here.
                    return None;
                }
                if !f.banned {
                    // As a local refusal of it would read, but for the store's `remaining`.
                    return Some(refusal(policy, now, until, reset_at, f.remaining));
                }
                policy.ban_decision(until - now)
            }
        };
        Some(d.by_cache())
    }
}

impl<S, C: Clock> DenyCache<S, C> {
    /// A check of several policies: `Ok` refused from the cache, or `Err` with the sends.
    pub(super) fn route_all(
        &self,
        checks: &Checks<'_>,
    ) -> Result<Result<Vec<Option<Decision>>, SentAll>, Error> {
        let mut sent = Vec::with_capacity(checks.len());
        for (i, check) in checks.iter().enumerate() {
            // `Mode::All` never leads a flight, so a refusal here leaves nothing behind.
            match self.route(check.key, check.policy, check.cost, Mode::All)? {
                Route::Local(d, others) => {
                    // The answer cached with the refusal is of its key: it speaks for the
                    // checks of that key only. The refused check's own answer is `d`.
                    let mut answer: Vec<Option<Decision>> = match others {
                        Some((others, now)) => (checks.iter().enumerate())
                            .map(|(j, c)| {
                                (j != i && c.key == check.key)
                                    .then(|| others.repeat(c.policy, now))
                                    .flatten()
                            })
                            .collect(),
                        None => vec![None; checks.len()],
                    };
                    answer[i] = Some(d);
                    return Ok(Ok(answer));
                }
                Route::Store {
                    sent: at, epoch, ..
                } => sent.push(Some((at, epoch))),
                Route::Wait(_) | Route::Through => sent.push(None),
            }
        }
        Ok(Err(sent))
    }

    /// Records a check of several policies' answer: every decision when all allowed, only
    /// the refusals otherwise (the others recorded nothing). Each fact shares the answer.
    pub(super) fn record_all(
        &self,
        checks: &Checks<'_>,
        sent: &[Option<(u64, u64)>],
        result: &Result<Vec<Option<Decision>>, Error>,
    ) {
        let Ok(decisions) = result else { return };
        let all = decisions.iter().flatten().all(|d| d.is_allowed());
        // Built once, at the first fact learnt; from the earliest send.
        let mut answer: Option<Option<Arc<Answer>>> = None;
        // What the others said is kept only where all are of one key (see `route_all`).
        let shared = checks.shared_key().is_some();
        for ((check, at), d) in checks.iter().zip(sent).zip(decisions) {
            let policy = check.policy;
            let (Some((at, epoch)), Some(d)) = (at, d) else {
                continue;
            };
            if d.is_allowed() && !all {
                continue;
            }
            let Some(figures) = self.teaches(policy, *epoch, d) else {
                continue;
            };
            let Some((mut entry, now)) = self.learn(policy, check.cost, *at, d, figures) else {
                continue;
            };
            if shared {
                entry.others = answer
                    .get_or_insert_with(|| {
                        // `at` is among the sends: the earliest is at most it.
                        let first = sent.iter().flatten().map(|&(s, _)| s).fold(*at, u64::min);
                        Answer::new(checks, decisions, first).map(Arc::new)
                    })
                    .clone();
            }
            self.remember(check.key, policy, *epoch, entry, now);
        }
    }
}
