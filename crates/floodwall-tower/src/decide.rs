//! The decision on one request: its key checked against its policies in the store
//! ([`now`], and [`rest`] when the store must be waited for), the answers gathered in a
//! [`Tally`], and the verdict: admit with these headers, refuse, or book the slots and
//! wait for them (`wait.rs`).

use std::sync::Arc;

use floodwall_core::store::{Checks, Op, Reply};
use floodwall_core::{Decision, Policy, Store, StoreExt};

use crate::config::Config;
use crate::future::Admission;
use crate::headers::{self, Fields, HeaderStyle};
use crate::key::Key;
use crate::mode::sealed::Refuse;
use crate::observe;
use crate::tally::{PolicyList, Tally};

/// What the outage log lines call the store.
const WHAT: &str = "rate-limit";

/// A request whose store did not answer at once: the policies still to check.
#[derive(Default)]
pub(crate) struct Pending {
    tally: Tally,
    next: usize,
}

/// What [`now`] found.
pub(crate) enum Checked<R> {
    /// Every policy answered: here is what to do.
    Decided(Admission<R>),
    /// The store must be waited for: for the policies still to check, or for the slots of
    /// a refusal within the layer's wait.
    Waiting(Pending),
}

/// What the answers in a tally say, every policy having answered.
enum Verdict {
    Admit,
    /// Refused, but every refusal says when, within the layer's wait.
    Wait,
    Refuse,
}

/// The verdict on `tally`, given whether (and how long) a refused request may wait.
fn verdict(tally: &Tally, shadow: bool, max_wait: Option<std::time::Duration>) -> Verdict {
    if tally.allowed() {
        return Verdict::Admit;
    }
    match max_wait {
        Some(max) if !shadow && tally.refused_within(max) => Verdict::Wait,
        _ => Verdict::Refuse,
    }
}

/// Checks `key` against every policy as far as the store answers without waiting (the
/// memory store always does): the verdict, or what is left for [`rest`]. Builds no future
/// and clones nothing.
// Forced inline: as a call it costs instructions on every request (measured by
// crates/floodwall-bench/benches/http_instructions.rs), most without headers.
#[inline(always)]
pub(crate) fn now<M: Refuse, St: Store, K>(
    config: &Config<St, K>,
    key: &Key,
    policies: &[Policy],
    cost: u64,
) -> Checked<M::Refusal> {
    // One policy, the usual case: an admitted request needs no tally.
    if let [policy] = policies {
        return match config.store.check_now(key.as_bytes(), policy, cost) {
            Some(Ok(decision)) if decision.is_allowed() => {
                config.store_down.answered(WHAT);
                observe::decided(config.meter(), policies, 0, &decision);
                let pairs = std::iter::once((policy, &decision));
                Checked::Decided(Admission::Admit(fields(config, policies, pairs)))
            }
            Some(result) => one::<M, St, K>(config, result, policies, cost),
            None => Checked::Waiting(Pending::default()),
        };
    }
    many::<M, St, K>(config, key, policies, cost)
}

/// [`now`] on one policy's answer, unless it admitted the request.
fn one<M: Refuse, St, K>(
    config: &Config<St, K>,
    result: Result<Decision, floodwall_core::Error>,
    policies: &[Policy],
    cost: u64,
) -> Checked<M::Refusal> {
    let mut tally = Tally::default();
    if let Err(e) = tally.record(0, cost, result) {
        observe::store_error(config.meter(), policies, 0);
        return Checked::Decided(store_failed::<M, St, K>(config, e));
    }
    answered::<M, St, K>(config, tally, policies)
}

/// [`now`] on several policies.
fn many<M: Refuse, St: Store, K>(
    config: &Config<St, K>,
    key: &Key,
    policies: &[Policy],
    cost: u64,
) -> Checked<M::Refusal> {
    let mut tally = Tally::default();
    let Some(result) = config
        .store
        .call_now(Op::CheckAll {
            checks: Checks::OneKey {
                key: key.as_bytes(),
                policies,
                cost,
            },
        })
        .map(|r| r.and_then(Reply::into_decisions))
    else {
        return Checked::Waiting(Pending::default());
    };
    if let Err(e) = tally.record_all(policies, cost, result) {
        for i in 0..policies.len() {
            observe::store_error(config.meter(), policies, i);
        }
        return Checked::Decided(store_failed::<M, St, K>(config, e));
    }
    answered::<M, St, K>(config, tally, policies)
}

/// [`now`] once every policy answered at once.
fn answered<M: Refuse, St, K>(
    config: &Config<St, K>,
    tally: Tally,
    policies: &[Policy],
) -> Checked<M::Refusal> {
    config.store_down.answered(WHAT);
    match verdict(&tally, config.shadow, config.waiting.max_wait()) {
        Verdict::Admit => Checked::Decided(admit::<M, St, K>(config, &tally, policies)),
        Verdict::Refuse => Checked::Decided(refuse::<M, St, K>(config, &tally, policies)),
        // Every policy checked: `rest` goes on to book and wait.
        Verdict::Wait => Checked::Waiting(Pending {
            tally,
            next: policies.len(),
        }),
    }
}

/// Checks the policies [`now`] could not, waiting for the store; and, when they refuse
/// within the layer's wait, books the next slots and waits for them (`wait.rs`).
pub(crate) async fn rest<M, St, K>(
    config: Arc<Config<St, K>>,
    key: Key,
    policies: PolicyList,
    cost: u64,
    pending: Pending,
) -> Admission<M::Refusal>
where
    M: Refuse,
    St: Store + 'static,
    K: Send + Sync + 'static,
{
    let Pending { mut tally, next } = pending;
    let list = policies.as_slice();
    let meter = config.meter();
    let mut each = next;
    if next == 0 && list.len() > 1 {
        // One store call for every policy: timed and traced under the first.
        let span = crate::trace::store_check(&list[0], key.as_bytes(), cost);
        let timer = observe::Timer::start();
        let result = tracing::Instrument::instrument(
            config.store.check_all(key.as_bytes(), list, cost),
            span,
        )
        .await;
        timer.stop(meter, list, 0);
        match result {
            // A store of the user's own without `check_all`: one policy at a time.
            Err(floodwall_core::Error::Unsupported { .. }) => {}
            result => {
                if let Err(e) = tally.record_all(list, cost, result) {
                    for i in 0..list.len() {
                        observe::store_error(meter, list, i);
                    }
                    return store_failed::<M, St, K>(&config, e);
                }
                each = list.len();
            }
        }
    }
    for (i, policy) in list.iter().enumerate().skip(each) {
        let span = crate::trace::store_check(policy, key.as_bytes(), cost);
        let timer = observe::Timer::start();
        let result = tracing::Instrument::instrument(
            config.store.check(key.as_bytes(), policy, cost),
            span.clone(),
        )
        .await;
        timer.stop(meter, list, i);
        crate::trace::answered(&span, &result);
        if let Err(e) = tally.record(i, cost, result) {
            observe::store_error(meter, list, i);
            return store_failed::<M, St, K>(&config, e);
        }
    }
    config.store_down.answered(WHAT);
    match verdict(&tally, config.shadow, config.waiting.max_wait()) {
        Verdict::Admit => admit::<M, St, K>(&config, &tally, list),
        Verdict::Refuse => refuse::<M, St, K>(&config, &tally, list),
        #[cfg(feature = "wait")]
        Verdict::Wait => wait::<M, St, K>(&config, key, list, cost, tally).await,
        // Without the `wait` feature `verdict` never says so.
        #[cfg(not(feature = "wait"))]
        Verdict::Wait => refuse::<M, St, K>(&config, &tally, list),
    }
}

/// A request refused within the layer's wait: books a slot in each policy that refused
/// (in each, when several counted none of it) and waits, or refuses it when it cannot.
#[cfg(feature = "wait")]
async fn wait<M, St, K>(
    config: &Arc<Config<St, K>>,
    key: Key,
    policies: &[Policy],
    cost: u64,
    mut tally: Tally,
) -> Admission<M::Refusal>
where
    M: Refuse,
    St: Store + 'static,
    K: Send + Sync + 'static,
{
    use crate::wait::{Waited, book_and_wait};
    // Several policies counted none of the refusal (all or nothing): every one books.
    let refused: smallvec::SmallVec<[usize; 2]> = match policies.len() {
        1 => tally.refused().collect(),
        n => (0..n).collect(),
    };
    let store: crate::wait::Holder<St> = config.clone();
    let waited = book_and_wait(&config.waiting, store, key, policies, &refused, cost).await;
    let (booked, admitted) = match waited {
        Waited::Admitted(booked) => (booked, true),
        Waited::Refused(booked) => (booked, false),
        Waited::Failed(i, e) => {
            observe::store_error(config.meter(), policies, i);
            return store_failed::<M, St, K>(config, e);
        }
    };
    for (i, decision) in booked {
        tally.set(i, decision);
    }
    if admitted {
        admit::<M, St, K>(config, &tally, policies)
    } else {
        refuse::<M, St, K>(config, &tally, policies)
    }
}

/// An admitted request: counted, and the headers for its response.
fn admit<M: Refuse, St, K>(
    config: &Config<St, K>,
    tally: &Tally,
    policies: &[Policy],
) -> Admission<M::Refusal> {
    tally.observe(config.meter(), policies);
    Admission::Admit(fields(config, policies, tally.pairs(policies)))
}

/// The headers for an allowed request's response: `decisions` are those of `policies`.
fn fields<'a, St, K, I>(config: &Config<St, K>, policies: &[Policy], decisions: I) -> Option<Fields>
where
    I: Iterator<Item = (&'a Policy, &'a Decision)> + Clone,
{
    if config.refusals.headers == HeaderStyle::None {
        return None;
    }
    some_fields(config, policies, decisions)
}

/// [`fields`] in a style that has some: apart so that `fields` stays small enough to
/// inline (the `http_instructions` bench).
fn some_fields<'a, St, K, I>(
    config: &Config<St, K>,
    policies: &[Policy],
    decisions: I,
) -> Option<Fields>
where
    I: Iterator<Item = (&'a Policy, &'a Decision)> + Clone,
{
    let consts = config.ietf_consts(policies);
    Fields::new(config.refusals.headers, consts, decisions)
}

/// A request some policy denied: refused, or in shadow mode logged and admitted.
fn refuse<M: Refuse, St, K>(
    config: &Config<St, K>,
    tally: &Tally,
    policies: &[Policy],
) -> Admission<M::Refusal> {
    tally.observe(config.meter(), policies);
    let denial = tally.denial(policies);
    if config.shadow {
        for policy in denial.violated() {
            tracing::info!(
                target: "floodwall",
                policy,
                retry_after_secs = denial.retry_after_secs(),
                "shadow mode: this request would have been rate limited"
            );
        }
        return Admission::Admit(fields(config, policies, tally.pairs(policies)));
    }
    Admission::Refuse(M::denied(&denial, |denial| {
        let mut res = config.refusals.on_reject.respond(denial);
        headers::ensure_retry_after(res.headers_mut(), denial.retry_after());
        headers::write(
            config.refusals.headers,
            config.ietf_consts(policies),
            denial.decisions(),
            res.headers_mut(),
        );
        res
    }))
}

/// A request the store could not decide: let through (shadow mode) or refused.
fn store_failed<M: Refuse, St, K>(
    config: &Config<St, K>,
    error: floodwall_core::Error,
) -> Admission<M::Refusal> {
    let open = config.shadow;
    if config.store_down.failed(WHAT, &error) {
        if open {
            tracing::warn!(
                target: "floodwall",
                %error,
                "rate-limit store failing; letting requests through (shadow mode) until it answers"
            );
        } else {
            tracing::error!(
                target: "floodwall",
                %error,
                "rate-limit store failing; refusing requests (fail closed) until it answers"
            );
        }
    }
    if open {
        return Admission::Admit(None);
    }
    Admission::Refuse(M::store_failed(error, |error| {
        config.refusals.on_failure.respond(error)
    }))
}
