//! The decision on one request: its key checked against its policies in the store, and
//! what follows (call the inner service with these headers, or refuse).

use std::sync::Arc;
use std::sync::atomic::Ordering;

use floodwall_core::store::{Op, Reply};
use floodwall_core::{Decision, Policy, Store, StoreExt};
use smallvec::SmallVec;

use crate::Key;
use crate::config::Config;
use crate::extract::KeyError;
use crate::headers::{self, Fields, HeaderStyle, IetfConsts};
use crate::mode::sealed::Refuse;
use crate::observe;
use crate::respond::{Decisions, Denial};

/// The policies one request is checked against, owned: what a check that waits for the
/// store keeps. A check the store answers at once borrows them instead.
pub(crate) enum PolicyList {
    Many(Arc<[Policy]>),
    One(Policy),
}

impl PolicyList {
    pub(crate) fn as_slice(&self) -> &[Policy] {
        match self {
            Self::Many(list) => list,
            Self::One(one) => std::slice::from_ref(one),
        }
    }
}

/// What happens to a request; `R` is its mode's refusal.
pub(crate) enum Admission<R> {
    /// Call the inner service, then add these headers.
    Admit(Option<Fields>),
    /// Answer with this refusal; the inner service is not called.
    Refuse(R),
}

/// What checking one request's policies has found so far. Policies are named by their
/// index in the request's list, so an allowed request clones none of them.
#[derive(Default)]
pub(crate) struct Tally {
    decisions: SmallVec<[(usize, Decision); 2]>,
    /// The first policy the cost can never pass: (index, cost).
    too_costly: Option<(usize, u64)>,
}

impl Tally {
    /// Records the answer of every policy at once ([`StoreExt::check_all`]): `None`s were
    /// not asked. A store failure ends the checking.
    fn record_all(
        &mut self,
        policies: &[Policy],
        cost: u64,
        result: Result<Vec<Option<Decision>>, floodwall_core::Error>,
    ) -> Result<(), floodwall_core::Error> {
        match result {
            Ok(decisions) => {
                let answered = decisions.into_iter().enumerate();
                self.decisions
                    .extend(answered.filter_map(|(i, d)| Some((i, d?))));
            }
            Err(e) if e.is_cost_too_high() => {
                let i = policies.iter().position(|p| p.check_cost(cost).is_err());
                self.too_costly.get_or_insert((i.unwrap_or(0), cost));
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    /// Records the answer of policy `i`; a store failure ends the checking.
    fn record(
        &mut self,
        i: usize,
        cost: u64,
        result: Result<Decision, floodwall_core::Error>,
    ) -> Result<(), floodwall_core::Error> {
        match result {
            Ok(decision) => self.decisions.push((i, decision)),
            Err(e) if e.is_cost_too_high() => {
                self.too_costly.get_or_insert((i, cost));
            }
            Err(e) => return Err(e),
        }
        Ok(())
    }

    fn allowed(&self) -> bool {
        self.too_costly.is_none() && self.decisions.iter().all(|(_, d)| d.allowed)
    }

    /// Whether every refusal says when the request would pass, within `max` (a cost that
    /// can never pass cannot wait).
    pub(crate) fn refused_within(&self, max: std::time::Duration) -> bool {
        self.too_costly.is_none()
            && self
                .decisions
                .iter()
                // A banned key does not wait out its ban: it is refused.
                .all(|(_, d)| d.allowed || (!d.banned && d.retry_after.is_some_and(|r| r <= max)))
    }

    /// The indexes of the policies that refused.
    pub(crate) fn refused(&self) -> impl Iterator<Item = usize> + '_ {
        self.decisions
            .iter()
            .filter(|(_, d)| !d.allowed)
            .map(|(i, _)| *i)
    }

    /// Replaces policy `i`'s decision (a booking's, after waiting was decided on).
    pub(crate) fn set(&mut self, i: usize, decision: Decision) {
        if let Some((_, d)) = self.decisions.iter_mut().find(|(j, _)| *j == i) {
            *d = decision;
        }
    }

    /// Each decision with its policy.
    fn pairs<'a>(
        &'a self,
        policies: &'a [Policy],
    ) -> impl Iterator<Item = (&'a Policy, &'a Decision)> + Clone {
        self.decisions.iter().map(move |(i, d)| (&policies[*i], d))
    }

    /// Counts each policy's final verdict in the metrics (nothing without the feature).
    #[inline(always)]
    fn observe<St, K>(&self, config: &Config<St, K>, policies: &[Policy]) {
        if !observe::ON {
            return;
        }
        for (i, d) in &self.decisions {
            observe::decided(config, policies, *i, d);
        }
        if let Some((i, _)) = self.too_costly {
            observe::too_costly(config, policies, i);
        }
    }

    fn denial(&self, policies: &[Policy]) -> Denial {
        let decisions: Decisions = self.pairs(policies).map(|(p, d)| (p.clone(), *d)).collect();
        let too_costly = self
            .too_costly
            .map(|(i, cost)| (policies[i].clone(), cost, policies[i].limit()));
        Denial::new(decisions, too_costly)
    }
}

/// A request whose store did not answer at once: the policies still to check.
#[derive(Default)]
pub(crate) struct Pending {
    tally: Tally,
    next: usize,
}

/// What [`Config::decide_now`] found.
pub(crate) enum Checked<R> {
    /// Every policy answered: here is what to do.
    Decided(Admission<R>),
    /// The store must be waited for: for the policies still to check, or (every policy
    /// checked) for the slots of a refusal within the layer's wait (`wait.rs`).
    Waiting(Pending),
}

impl<St: Store, K> Config<St, K> {
    /// Checks `key` against every policy, in order, as far as the store answers without
    /// waiting ([`StoreExt::check_now`]; the memory store always does): the verdict, or what
    /// is left for [`decide_rest`](Self::decide_rest). On the memory store's hot path this
    /// builds no future and clones nothing.
    ///
    /// Several policies are decided at once, all or nothing ([`Store::call_now`]):
    /// see [`RateLimitLayer::and_policy`](crate::RateLimitLayer::and_policy).
    // Forced inline: as a call it costs instructions on every request (measured by
    // crates/floodwall-bench/benches/http_instructions.rs), most without headers.
    #[inline(always)]
    pub(crate) fn decide_now<M: Refuse>(
        &self,
        key: &Key,
        policies: &[Policy],
        cost: u64,
    ) -> Checked<M::Refusal> {
        // One policy, the usual case: an admitted request needs no tally.
        if let [policy] = policies {
            return match self.store.check_now(key.as_bytes(), policy, cost) {
                Some(Ok(decision)) if decision.allowed => {
                    self.store_answered();
                    observe::decided(self, policies, 0, &decision);
                    let pairs = std::iter::once((policy, &decision));
                    Checked::Decided(Admission::Admit(self.fields(policies, pairs)))
                }
                Some(result) => self.decide_one::<M>(result, policies, cost),
                None => Checked::Waiting(Pending::default()),
            };
        }
        self.decide_many::<M>(key, policies, cost)
    }

    /// [`decide_now`](Self::decide_now) on one policy's answer, unless it admitted the
    /// request.
    fn decide_one<M: Refuse>(
        &self,
        result: Result<Decision, floodwall_core::Error>,
        policies: &[Policy],
        cost: u64,
    ) -> Checked<M::Refusal> {
        let mut tally = Tally::default();
        if let Err(e) = tally.record(0, cost, result) {
            observe::store_error(self, policies, 0);
            return Checked::Decided(self.store_failed::<M>(e));
        }
        match self.conclude::<M>(&tally, policies) {
            Some(admission) => Checked::Decided(admission),
            // Every policy checked: `decide_rest` goes on to book and wait.
            None => Checked::Waiting(Pending {
                tally,
                next: policies.len(),
            }),
        }
    }

    /// [`decide_now`](Self::decide_now) on several policies.
    fn decide_many<M: Refuse>(
        &self,
        key: &Key,
        policies: &[Policy],
        cost: u64,
    ) -> Checked<M::Refusal> {
        let mut tally = Tally::default();
        let Some(result) = self
            .store
            .call_now(Op::CheckAll {
                key: key.as_bytes(),
                policies: policies,
                cost: cost,
            })
            .map(|r| r.and_then(Reply::into_decisions))
        else {
            return Checked::Waiting(Pending::default());
        };
        if let Err(e) = tally.record_all(policies, cost, result) {
            for i in 0..policies.len() {
                observe::store_error(self, policies, i);
            }
            return Checked::Decided(self.store_failed::<M>(e));
        }
        match self.conclude::<M>(&tally, policies) {
            Some(admission) => Checked::Decided(admission),
            // Every policy checked: `decide_rest` goes on to book and wait.
            None => Checked::Waiting(Pending {
                tally,
                next: policies.len(),
            }),
        }
    }

    /// The verdict once every policy has answered; refusals (and shadow-mode denials) take
    /// [`refuse`](Self::refuse). `None`: refused, but within the layer's wait (see
    /// `wait.rs`).
    #[inline]
    fn conclude<M: Refuse>(
        &self,
        tally: &Tally,
        policies: &[Policy],
    ) -> Option<Admission<M::Refusal>> {
        self.store_answered();
        if tally.allowed() {
            tally.observe(self, policies);
            return Some(Admission::Admit(
                self.fields(policies, tally.pairs(policies)),
            ));
        }
        if !self.shadow && self.waiting.may_wait(tally) {
            return None;
        }
        Some(self.refuse::<M>(tally, policies))
    }

    /// The verdict on a request that waited for the slots it booked: admitted, with the
    /// bookings' figures in its headers.
    pub(crate) fn admit_after_wait<M: Refuse>(
        &self,
        tally: &Tally,
        policies: &[Policy],
    ) -> Admission<M::Refusal> {
        tally.observe(self, policies);
        Admission::Admit(self.fields(policies, tally.pairs(policies)))
    }

    /// The headers for an allowed request's response: `decisions` are those of `policies`.
    fn fields<'a, I>(&self, policies: &[Policy], decisions: I) -> Option<Fields>
    where
        I: Iterator<Item = (&'a Policy, &'a Decision)> + Clone,
    {
        if self.headers == HeaderStyle::None {
            return None;
        }
        self.some_fields(policies, decisions)
    }

    /// [`fields`](Self::fields) in a style that has some. A function of its own so that
    /// `fields` stays small enough to inline: merged, the no-headers row of the
    /// `http_instructions` bench costs more per request.
    fn some_fields<'a, I>(&self, policies: &[Policy], decisions: I) -> Option<Fields>
    where
        I: Iterator<Item = (&'a Policy, &'a Decision)> + Clone,
    {
        Fields::new(self.headers, self.ietf_consts(policies), decisions)
    }

    /// The verdict on a request some policy denied.
    pub(crate) fn refuse<M: Refuse>(
        &self,
        tally: &Tally,
        policies: &[Policy],
    ) -> Admission<M::Refusal> {
        tally.observe(self, policies);
        let denial = tally.denial(policies);
        if self.shadow {
            for policy in denial.violated() {
                tracing::info!(
                    target: "floodwall",
                    policy,
                    retry_after_secs = denial.retry_after_secs(),
                    "shadow mode: this request would have been rate limited"
                );
            }
            return Admission::Admit(self.fields(policies, tally.pairs(policies)));
        }
        Admission::Refuse(M::denied(&denial, |denial| {
            let mut res = self.on_reject.respond(denial);
            headers::ensure_retry_after(res.headers_mut(), denial.retry_after());
            headers::write(
                self.headers,
                self.ietf_consts(policies),
                denial.decisions(),
                res.headers_mut(),
            );
            res
        }))
    }

    /// The IETF values of the layer's own policies, worked out once: they depend on
    /// nothing but the policies. `None` for any other list, another style, or past the
    /// interning bound.
    fn ietf_consts(&self, policies: &[Policy]) -> Option<&'static IetfConsts> {
        if self.headers != HeaderStyle::Ietf || !std::ptr::eq(policies, &*self.policies) {
            return None;
        }
        *self
            .ietf_consts
            .get_or_init(|| headers::ietf_consts(policies))
    }

    pub(crate) fn store_failed<M: Refuse>(
        &self,
        error: floodwall_core::Error,
    ) -> Admission<M::Refusal> {
        let open = self.shadow || self.fail_open;
        if !self.store_down.load(Ordering::Relaxed)
            && !self.store_down.swap(true, Ordering::Relaxed)
        {
            if open {
                tracing::warn!(
                    target: "floodwall",
                    %error,
                    "rate-limit store failing; letting requests through (fail open) until it answers"
                );
            } else {
                tracing::error!(
                    target: "floodwall",
                    %error,
                    "rate-limit store failing; refusing requests (fail closed) until it answers"
                );
            }
        } else {
            tracing::debug!(target: "floodwall", %error, "rate-limit store failed");
        }
        if open {
            return Admission::Admit(None);
        }
        Admission::Refuse(M::store_failed(error, |error| {
            self.on_failure.respond(error)
        }))
    }

    /// Notes that the store answered, logging the end of an outage once.
    #[inline]
    fn store_answered(&self) {
        if self.store_down.load(Ordering::Relaxed) {
            self.store_is_back();
        }
    }

    /// The store answers again after failing: logged once, by whichever request sees it.
    fn store_is_back(&self) {
        if self.store_down.swap(false, Ordering::Relaxed) {
            tracing::info!(target: "floodwall", "rate-limit store answers again");
        }
    }

    /// What to do with a request whose key is missing; `None` lets it through.
    pub(crate) fn missing_key<M: Refuse>(&self, error: KeyError) -> Option<M::Refusal> {
        self.on_missing
            .refusal::<M>(self.shadow || self.enforces_none, error, &*self.on_reject)
    }
}

impl<St: Store + 'static, K: Send + Sync + 'static> Config<St, K> {
    /// Checks the policies [`decide_now`](Self::decide_now) could not, waiting for the
    /// store; and, when they refuse within the layer's wait, books the next slot and waits
    /// for it (`wait.rs`).
    pub(crate) async fn decide_rest<M: Refuse>(
        config: Arc<Self>,
        key: Key,
        policies: PolicyList,
        cost: u64,
        pending: Pending,
    ) -> Admission<M::Refusal> {
        let Pending { mut tally, next } = pending;
        let list = policies.as_slice();
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
            timer.stop(&config, list, 0);
            match result {
                // A store of the user's own without `check_all`: one policy at a time.
                Err(floodwall_core::Error::Unsupported { .. }) => {}
                result => {
                    if let Err(e) = tally.record_all(list, cost, result) {
                        for i in 0..list.len() {
                            observe::store_error(&config, list, i);
                        }
                        return config.store_failed::<M>(e);
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
            timer.stop(&config, list, i);
            crate::trace::answered(&span, &result);
            if let Err(e) = tally.record(i, cost, result) {
                observe::store_error(&config, policies.as_slice(), i);
                return config.store_failed::<M>(e);
            }
        }
        if let Some(admission) = config.conclude::<M>(&tally, policies.as_slice()) {
            return admission;
        }
        crate::wait::book_and_wait::<St, K, M>(config, key, policies, cost, tally).await
    }
}
