//! A request's counted descriptors charged all or nothing: if one is over its limit, none
//! is charged.
//!
//! The store decides them together ([`StoreExt::check_all_of`]): one atomic step, so
//! concurrent requests see every charge or none, and the quota of each key is exact. A
//! `shadow_mode` descriptor never refuses the request: when only shadow descriptors
//! refuse, they are set aside (a refusal records nothing) and the rest decided together
//! again. What the store cannot decide together (on Redis: keys in different slots of a
//! cluster, descriptors of different costs, a sliding window or log beside another) is
//! decided [one by one](one_by_one), with the charges given back on a refusal.

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::{Code, DescriptorStatus};
use floodwall_core::store::Check;
use floodwall_core::{Adjustment, Decision, Error, Store, StoreExt};
use tonic::Status;

use crate::config::RateLimit;
use crate::service::{Plan, limit_status, saturate, unavailable};

/// Each descriptor's status, and the decisions behind them by descriptor index (for the
/// response headers).
pub(crate) type Charged = (Vec<DescriptorStatus>, Vec<(usize, Decision)>);

/// Each descriptor's status, the request's descriptors charged all or nothing.
pub(crate) async fn all_or_nothing<S: Store>(
    store: &S,
    plans: &[Plan<'_>],
) -> Result<Charged, Status> {
    let mut statuses: Vec<DescriptorStatus> = plans.iter().map(uncounted).collect();
    let mut decided = Vec::new();
    // Counted descriptors the store is asked together; a non-shadow `requests_per_unit: 0`
    // or a cost a limit can never admit refuses the request before anything is charged.
    let mut group = Vec::new();
    let mut refused = false;
    for (i, plan) in plans.iter().enumerate() {
        match plan {
            Plan::RefuseAll(limit) => refused |= !limit.shadow_mode(),
            Plan::Check {
                limit,
                policy,
                key,
                cost,
            } => {
                let check = Check {
                    key,
                    policy,
                    cost: *cost,
                };
                if policy.check_cost(*cost).is_ok() {
                    group.push(Counted { i, limit, check });
                } else if limit.shadow_mode() {
                    // Never admissible, so never charged: over in shadow, figures as they stand.
                    let peek = peek(store, check).await;
                    statuses[i] = over_in_shadow(limit, peek.as_ref());
                    decided.extend(peek.map(|d| (i, d)));
                } else {
                    refused = true;
                }
            }
            Plan::Free | Plan::Unlimited => {}
        }
    }
    if refused {
        // Only reads follow: nothing to hold together.
        return one_by_one(store, plans).await;
    }
    loop {
        let checks: Vec<Check<'_>> = group.iter().map(|c| c.check).collect();
        if checks.is_empty() {
            return Ok((statuses, decided));
        }
        let answers = match store.check_all_of(&checks).await {
            Ok(answers) => answers,
            Err(Error::Unsupported { .. }) => return one_by_one(store, plans).await,
            Err(e) => return Err(unavailable(&e)),
        };
        let refusing = |shadow: bool| {
            group
                .iter()
                .zip(&answers)
                .any(|(c, d)| d.is_some_and(|d| !d.is_allowed()) && c.limit.shadow_mode() == shadow)
        };
        if refusing(true) && !refusing(false) {
            // Only shadow limits refused: they record nothing and answer OK; the others
            // are decided again without them.
            let mut rest = Vec::with_capacity(group.len());
            for (c, d) in group.into_iter().zip(&answers) {
                match d {
                    Some(d) if !d.is_allowed() => {
                        statuses[c.i] = over_in_shadow(c.limit, Some(d));
                        decided.push((c.i, *d));
                    }
                    _ => rest.push(c),
                }
            }
            group = rest;
            continue;
        }
        for (Counted { i, limit, check }, d) in group.into_iter().zip(answers) {
            // The store kept no figures of this one (its deny cache refused another
            // without asking): read them.
            let d = match d {
                Some(d) => Some(d),
                None => peek(store, check).await,
            };
            statuses[i] = match d {
                Some(d) if !d.is_allowed() && limit.shadow_mode() => {
                    over_in_shadow(limit, Some(&d))
                }
                Some(d) => limit_status(limit, d.is_allowed(), Some(&d)),
                None => unknown(limit),
            };
            decided.extend(d.map(|d| (i, d)));
        }
        return Ok((statuses, decided));
    }
}

/// Each descriptor's status, the counted ones checked one by one, in order: at the first
/// refusal, what the admitted ones were charged is given back (`Adjustment::Refund`) and
/// the rest are only read (a check of cost 0).
///
/// For what the store cannot decide together. Never admits past a quota, but is not one
/// atomic step: between a check and its refund, another request may see the charge and
/// be refused. Every algorithm refunds: GCRA and the buckets exactly; the windows and the
/// log take the units back from their oldest entries, so a key refunded there can pass
/// again a little later than if it had never been charged, never sooner. A refund the
/// store fails to make leaves its charge: the key is counted once too often, never
/// admitted past its quota.
async fn one_by_one<S: Store>(store: &S, plans: &[Plan<'_>]) -> Result<Charged, Status> {
    let mut statuses: Vec<DescriptorStatus> = plans.iter().map(uncounted).collect();
    let mut decided: Vec<(usize, Decision)> = Vec::new();
    // A non-shadow `requests_per_unit: 0` refuses the request before the store is asked.
    let mut refused = plans
        .iter()
        .any(|p| matches!(p, Plan::RefuseAll(limit) if !limit.shadow_mode()));
    let mut admitted: Vec<usize> = Vec::new();
    for (i, plan) in plans.iter().enumerate() {
        let Plan::Check {
            limit,
            policy,
            key,
            cost,
        } = plan
        else {
            continue;
        };
        let shadow = limit.shadow_mode();
        if refused {
            // Only read: the request is refused already. A store that fails to answer
            // changes nothing of that: the status then says the limit and no code.
            match store.check(key, policy, 0).await {
                Ok(peek) => {
                    let passes = peek.is_allowed() && *cost <= peek.remaining;
                    statuses[i] = limit_status(limit, passes || shadow, Some(&peek));
                    decided.push((i, peek));
                }
                Err(_) => statuses[i] = unknown(limit),
            }
            continue;
        }
        match store.check(key, policy, *cost).await {
            Ok(d) if d.is_allowed() => {
                statuses[i] = limit_status(limit, true, Some(&d));
                admitted.push(i);
                decided.push((i, d));
            }
            Ok(d) if shadow => {
                statuses[i] = over_in_shadow(limit, Some(&d));
                decided.push((i, d));
            }
            Ok(d) => {
                statuses[i] = limit_status(limit, false, Some(&d));
                refused = true;
                decided.push((i, d));
            }
            Err(Error::CostTooHigh { .. }) => {
                // Never admissible, and nothing was recorded: refused, with the key's
                // figures as they stand.
                let peek = store.check(key, policy, 0).await.ok();
                statuses[i] = limit_status(limit, shadow, peek.as_ref());
                statuses[i].limit_remaining = 0;
                refused |= !shadow;
                decided.extend(peek.map(|d| (i, d)));
            }
            Err(e) => {
                refund(store, plans, &admitted).await;
                return Err(unavailable(&e));
            }
        }
        if refused {
            refund(store, plans, &admitted).await;
            for &j in &admitted {
                if let Plan::Check { cost, .. } = &plans[j] {
                    give_back(&mut statuses[j], &mut decided, j, *cost);
                }
            }
            admitted.clear();
        }
    }
    Ok((statuses, decided))
}

/// Gives back what the `admitted` descriptors were charged. A refund that fails leaves
/// its charge (see [`one_by_one`]).
async fn refund<S: Store>(store: &S, plans: &[Plan<'_>], admitted: &[usize]) {
    for &i in admitted {
        if let Plan::Check {
            policy, key, cost, ..
        } = &plans[i]
            && *cost > 0
        {
            let _ = store.adjust(key, policy, Adjustment::Refund(*cost)).await;
        }
    }
}

/// An admitted descriptor's status and decision once its charge was given back.
fn give_back(
    status: &mut DescriptorStatus,
    decided: &mut [(usize, Decision)],
    i: usize,
    cost: u64,
) {
    if let Some((_, d)) = decided.iter_mut().find(|(j, _)| *j == i) {
        d.remaining = d.remaining.saturating_add(cost).min(d.limit);
        status.limit_remaining = saturate(d.remaining);
    }
}

/// The status of a descriptor the store is not asked about: `OK` without a limit (none
/// applies), `OK` with `limit_remaining` at `u32::MAX` (`unlimited`, as the reference
/// answers), the limit refusing everything (`requests_per_unit: 0`); a counted one's
/// status is set once decided.
fn uncounted(plan: &Plan<'_>) -> DescriptorStatus {
    match plan {
        Plan::Free | Plan::Check { .. } => DescriptorStatus {
            code: Code::Ok as i32,
            ..DescriptorStatus::default()
        },
        Plan::Unlimited => DescriptorStatus {
            code: Code::Ok as i32,
            limit_remaining: u32::MAX,
            ..DescriptorStatus::default()
        },
        Plan::RefuseAll(limit) => limit_status(limit, limit.shadow_mode(), None),
    }
}

/// A shadow limit that would have refused: `OK`, with `limit_remaining` 0 (the
/// reference's answer).
fn over_in_shadow(limit: &RateLimit, d: Option<&Decision>) -> DescriptorStatus {
    let mut status = limit_status(limit, true, d);
    status.limit_remaining = 0;
    status
}

/// A counted descriptor whose state could not be read: the limit, and no code.
fn unknown(limit: &RateLimit) -> DescriptorStatus {
    let mut status = limit_status(limit, false, None);
    status.code = Code::Unknown as i32;
    status
}

/// A counted descriptor of the request: its index, its limit and what the store is asked.
struct Counted<'a> {
    i: usize,
    limit: &'a RateLimit,
    check: Check<'a>,
}

/// What the store says of `check`'s key as it stands, if it answers.
async fn peek<S: Store>(store: &S, check: Check<'_>) -> Option<Decision> {
    store.check(check.key, check.policy, 0).await.ok()
}
