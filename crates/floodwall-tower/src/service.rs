//! The rate-limiting service.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use floodwall_core::{BoxError, MemoryStore, Policy, Store};
use http::{Request, Response};
use tower_service::Service;

use crate::body::RejectionBody;
use crate::choose::Choice;
use crate::config::Config;
use crate::decide::{self, Checked, Pending};
use crate::enforcement::Enforcement;
use crate::extract::{ExtractKey, KeyError, PeerIp};
use crate::future::{Admission, CheckFuture, ResponseFuture};
use crate::key::Key;
use crate::live::{Cell, LiveState, Version};
use crate::mode::{RefusalMode, RejectWithError, RejectWithResponse};
use crate::settle::Settler;
use crate::tally::PolicyList;

/// Rate-limits the requests to an inner service; built by
/// [`RateLimitLayer`](crate::RateLimitLayer).
///
/// `poll_ready` is the inner service's: the limiter never holds back readiness. Its
/// responses have the inner service's body type, refusals included
/// ([`RejectionBody`](crate::RejectionBody)). Cloning is cheap.
pub struct RateLimit<S, St = MemoryStore, K = PeerIp, M = RejectWithResponse> {
    inner: S,
    cell: Arc<Cell<St, K>>,
    _mode: PhantomData<fn() -> M>,
}

impl<S, St: Store + Clone> RateLimit<S, St> {
    /// Limits `inner` by `policy`, keyed by peer IP; see
    /// [`RateLimitLayer`](crate::RateLimitLayer) for the rest.
    pub fn new(inner: S, store: St, policy: Policy) -> Self {
        let state = Arc::new(LiveState {
            own: vec![policy.clone()],
            ..LiveState::default()
        });
        let config = Config::new(store, PeerIp::new(), policy);
        Self::from_shared(inner, Arc::new(Cell::new(config, state)))
    }
}

impl<S, St, K, M: RefusalMode> RateLimit<S, St, K, M> {
    /// Starts handling a request under the current version of the configuration, read
    /// once: the whole request is checked, charged and answered under it.
    #[inline(always)]
    fn start<B>(&mut self, req: Request<B>) -> ResponseFuture<S, B, M>
    where
        S: Service<Request<B>> + Clone,
        St: Store + 'static,
        K: ExtractKey,
    {
        let call = Call::<S, B, St, K, M> {
            inner: &mut self.inner,
            _types: PhantomData,
        };
        // The layer as built, every policy enforced: the request path as if there were no
        // live changes, one flag's load more.
        if self.cell.plain() {
            return call.start(&self.cell.initial().enforce, req);
        }
        call.start_live(&self.cell, req)
    }
}

/// One request's call: the ready inner service, borrowed while the version is read.
struct Call<'a, S, B, St, K, M> {
    inner: &'a mut S,
    _types: PhantomData<fn(B, St, K, M)>,
}

impl<S, B, St, K, M> Call<'_, S, B, St, K, M>
where
    S: Service<Request<B>> + Clone,
    St: Store + 'static,
    K: ExtractKey,
    M: RefusalMode,
{
    /// Starts handling a request. The usual one (no cost function, no chooser, an
    /// extractor that reads the whole request) is never taken apart: moving its head out
    /// to a `Parts` and back is two copies of some 200 bytes.
    #[inline(always)]
    fn start(self, config: &Arc<Config<St, K>>, req: Request<B>) -> ResponseFuture<S, B, M> {
        if config.chooser.is_none() && config.cost.is_none() {
            let mut key = Key::new();
            if let Some(found) = config.key.extract_request(&req, &mut key) {
                return match found {
                    Ok(()) => self.check_with(config, req, &mut key, Choice::Default, 1),
                    Err(error) => self.missing_key(config, req, error),
                };
            }
        }
        self.start_parts(config, None, req)
    }

    /// [`start`](Self::start) under a live change or with a policy not enforced: out of
    /// line, so that the usual path keeps its key extractor inlined.
    #[inline(never)]
    fn start_live(self, cell: &Cell<St, K>, req: Request<B>) -> ResponseFuture<S, B, M> {
        let current = cell.current();
        let version = current.as_ref().map_or(cell.initial(), |v| &**v);
        self.start_parts(&version.enforce, Some(version), req)
    }

    /// [`start`](Self::start) for a request whose key, policies or cost need its `Parts`;
    /// `version` is `None` when `config` is all there is.
    fn start_parts(
        self,
        config: &Arc<Config<St, K>>,
        version: Option<&Version<St, K>>,
        req: Request<B>,
    ) -> ResponseFuture<S, B, M> {
        let (parts, body) = req.into_parts();
        let mut key = Key::new();
        if let Err(error) = config.key.extract(&parts, &mut key) {
            return self.missing_key(config, Request::from_parts(parts, body), error);
        }
        let choice = match &config.chooser {
            Some(chooser) => chooser.choose(&parts, key.as_bytes()),
            None => Choice::Default,
        };
        if let Choice::Skip = choice {
            return ResponseFuture::calling(
                self.inner.call(Request::from_parts(parts, body)),
                None,
            );
        }
        let cost = config.cost.as_ref().map_or(1, |cost| cost(&parts));
        let req = Request::from_parts(parts, body);
        match version.and_then(|v| Some((v, v.shadow.as_ref()?))) {
            Some((version, shadow)) => {
                self.check_modes(version, shadow, req, &mut key, choice, cost)
            }
            None => self.check_with(config, req, &mut key, choice, cost),
        }
    }

    /// Checks `key` against the chosen policies (never [`Choice::Skip`]) under `config`,
    /// and calls the inner service if they admit the request.
    // Forced inline into `start`: as a call it costs instructions on every request
    // (measured by crates/floodwall-bench/benches/http_instructions.rs).
    #[inline(always)]
    fn check_with(
        self,
        config: &Arc<Config<St, K>>,
        req: Request<B>,
        key: &mut Key,
        choice: Choice,
        cost: u64,
    ) -> ResponseFuture<S, B, M> {
        let policies: &[Policy] = match &choice {
            Choice::Default | Choice::Skip => &config.policies,
            Choice::Policy(policy) => std::slice::from_ref(policy),
            Choice::Policies(list) => list,
        };
        match decide::now::<M, St, K>(config, key, policies, cost) {
            // `self.inner` is the service `poll_ready` made ready: call it in place.
            Checked::Decided(Admission::Admit(report)) => {
                match Settler::new::<St, _>(&config.settle, config, key, policies, cost) {
                    None => ResponseFuture::calling(self.inner.call(req), report),
                    Some(settle) => ResponseFuture::settling(self.inner.call(req), report, settle),
                }
            }
            // The rest (`refused`, `wait`) is not the usual request (though it is the usual
            // one under attack, or on Redis).
            Checked::Decided(Admission::Refuse(refusal)) => ResponseFuture::refused(refusal),
            Checked::Waiting(pending) => {
                let settle = Settler::new::<St, _>(&config.settle, config, key, policies, cost);
                let (config, policies) = (Arc::clone(config), owned(config, choice));
                let key = std::mem::take(key);
                let check = Box::pin(async move {
                    decide::rest::<M, St, K>(config, key, policies, cost, pending).await
                });
                self.checking(check, req, settle)
            }
        }
    }

    /// [`check_with`](Self::check_with) under a version where some policy is not enforced:
    /// the enforced policies decide, then the shadow ones are checked and only log
    /// ([`crate::guide::live_changes`]).
    #[inline(never)]
    fn check_modes(
        self,
        version: &Version<St, K>,
        shadow: &Arc<Config<St, K>>,
        req: Request<B>,
        key: &mut Key,
        choice: Choice,
        cost: u64,
    ) -> ResponseFuture<S, B, M> {
        let enforce = &version.enforce;
        let (enforced, shadowed): (Arc<[Policy]>, Arc<[Policy]>) = match &choice {
            Choice::Default | Choice::Skip => {
                (Arc::clone(&enforce.policies), Arc::clone(&shadow.policies))
            }
            Choice::Policy(policy) => sort(&version.state, std::slice::from_ref(policy)),
            Choice::Policies(list) => sort(&version.state, list),
        };
        // The layer's own stay `Default`: their headers are interned per version.
        let own = |list| match choice {
            Choice::Default | Choice::Skip => Choice::Default,
            _ => Choice::Policies(list),
        };
        match (enforced.is_empty(), shadowed.is_empty()) {
            (true, true) => ResponseFuture::calling(self.inner.call(req), None),
            (false, true) => self.check_with(enforce, req, key, own(enforced), cost),
            (true, false) => self.check_with(shadow, req, key, own(shadowed), cost),
            (false, false) => {
                let both: Vec<Policy> = enforced.iter().chain(shadowed.iter()).cloned().collect();
                let settle = Settler::new::<St, _>(&enforce.settle, enforce, key, &both, cost);
                let (enforce, shadow) = (Arc::clone(enforce), Arc::clone(shadow));
                let key = std::mem::take(key);
                let check = Box::pin(async move {
                    let enforced = PolicyList::Many(enforced);
                    let pending = Pending::default();
                    match decide::rest::<M, St, K>(enforce, key.clone(), enforced, cost, pending)
                        .await
                    {
                        // The headers are the enforced policies': those that can refuse.
                        Admission::Admit(fields) => {
                            let shadowed = PolicyList::Many(shadowed);
                            let pending = Pending::default();
                            // In shadow mode, always an admission.
                            let _ = decide::rest::<M, St, K>(shadow, key, shadowed, cost, pending)
                                .await;
                            Admission::Admit(fields)
                        }
                        refused => refused,
                    }
                });
                self.checking(check, req, settle)
            }
        }
    }

    /// A future that decides (and may wait) before calling the inner service.
    fn checking(
        self,
        check: CheckFuture<M::Refusal>,
        req: Request<B>,
        settle: Option<Settler>,
    ) -> ResponseFuture<S, B, M> {
        // Take the ready service for this request and leave a clone to be made ready for
        // the next one.
        let clone = self.inner.clone();
        let inner = std::mem::replace(self.inner, clone);
        ResponseFuture::checking(check, inner, req, settle)
    }

    /// A request without a key: refused, or let through unlimited.
    fn missing_key(
        self,
        config: &Config<St, K>,
        req: Request<B>,
        error: KeyError,
    ) -> ResponseFuture<S, B, M> {
        let shadow = config.shadow || config.enforces_none;
        match config.refusals.missing::<M>(shadow, error) {
            Some(refusal) => ResponseFuture::refused(refusal),
            None => ResponseFuture::calling(self.inner.call(req), None),
        }
    }
}

/// The chosen policies, owned by a future.
fn owned<St, K>(config: &Config<St, K>, choice: Choice) -> PolicyList {
    match choice {
        Choice::Policy(policy) => PolicyList::One(policy),
        Choice::Policies(list) => PolicyList::Many(list),
        Choice::Default | Choice::Skip => PolicyList::Many(config.policies.clone()),
    }
}

/// A chooser's policies sorted by their modes: (enforced, shadow); those off are left out.
fn sort(state: &LiveState, policies: &[Policy]) -> (Arc<[Policy]>, Arc<[Policy]>) {
    let of = |mode| {
        let each = policies.iter().filter(|p| state.mode(p.name()) == mode);
        each.cloned().collect()
    };
    (of(Enforcement::Enforce), of(Enforcement::Shadow))
}

// `call` out of line: the future is built right where the caller wants it (a frame of its
// own future, usually); inlined, it was built aside and copied, hundreds of bytes.
crate::mode::service_impls!(RateLimit { cell: Cell }, ResponseFuture, ResB, #[inline(never)]);

impl<S: fmt::Debug, St, K, M> fmt::Debug for RateLimit<S, St, K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .field("policies", &self.cell.initial().enforce.policies)
            .finish_non_exhaustive()
    }
}
