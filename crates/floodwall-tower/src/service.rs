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
use crate::extract::{ExtractKey, PeerIp};
use crate::future::ResponseFuture;
use crate::shared::{Checked, PolicyList, Shared, Verdict};
use crate::{Key, RateLimitLayer, RejectWithError, RejectWithResponse};

/// Rate-limits the requests to an inner service; built by [`RateLimitLayer`].
///
/// For each request it extracts a key, checks it against the policies in the store, and
/// either calls the inner service (adding rate-limit headers to its response) or answers
/// with the refusal at once. `poll_ready` is the inner service's: the limiter never waits
/// for quota and never holds back readiness, so the layer needs no `BufferLayer`.
///
/// Its responses have the inner service's body type (`Response<B>`, refusals included:
/// they are written into `B` by [`RejectionBody`](crate::RejectionBody)).
///
/// Cloning is cheap: the configuration is shared behind one `Arc`.
pub struct RateLimit<S, St = MemoryStore, K = PeerIp, M = RejectWithResponse> {
    inner: S,
    shared: Arc<Shared<St, K>>,
    _mode: PhantomData<fn() -> M>,
}

impl<S, St: Store> RateLimit<S, St> {
    /// Limits `inner` by `policy`, keyed by peer IP; see [`RateLimitLayer`] for the rest.
    pub fn new(inner: S, store: St, policy: Policy) -> Self {
        Self::from_shared(inner, Arc::new(Shared::new(store, PeerIp::new(), policy)))
    }

    /// A layer wrapping services in `RateLimit`: [`RateLimitLayer::new`].
    pub fn layer(store: St, policy: Policy) -> RateLimitLayer<St> {
        RateLimitLayer::new(store, policy)
    }
}

impl<S, St, K, M> RateLimit<S, St, K, M> {
    pub(crate) fn from_shared(inner: S, shared: Arc<Shared<St, K>>) -> Self {
        Self {
            inner,
            shared,
            _mode: PhantomData,
        }
    }

    /// The inner service.
    pub fn get_ref(&self) -> &S {
        &self.inner
    }

    /// The inner service, mutably.
    pub fn get_mut(&mut self) -> &mut S {
        &mut self.inner
    }

    /// The inner service, unwrapped.
    pub fn into_inner(self) -> S {
        self.inner
    }

    /// Starts handling a request. `error_mode` picks how refusals are reported.
    fn start<B>(&mut self, req: Request<B>, error_mode: bool) -> ResponseFuture<S, B, M>
    where
        S: Service<Request<B>> + Clone,
        St: Store + 'static,
        K: ExtractKey,
    {
        let shared = &self.shared;
        let (parts, body) = req.into_parts();
        let mut key = Key::new();
        if let Err(error) = shared.key.extract(&parts, &mut key) {
            return match shared.missing_key(error, error_mode) {
                Some(verdict) => ResponseFuture::refused(verdict),
                None => {
                    ResponseFuture::calling(self.inner.call(Request::from_parts(parts, body)), None)
                }
            };
        }
        let choice = match &shared.chooser {
            Some(chooser) => chooser.choose(&parts, key.as_bytes()),
            None => Choice::Default,
        };
        let policies: &[Policy] = match &choice {
            Choice::Default => &shared.policies,
            Choice::Policy(policy) => std::slice::from_ref(policy),
            Choice::Policies(list) => list,
            Choice::Skip => {
                return ResponseFuture::calling(
                    self.inner.call(Request::from_parts(parts, body)),
                    None,
                );
            }
        };
        let cost = shared.cost.as_ref().map_or(1, |cost| cost(&parts));
        let req = Request::from_parts(parts, body);

        match shared.decide_now(&key, policies, cost, error_mode) {
            // `self.inner` is the service `poll_ready` made ready: call it in place.
            Checked::Decided(Verdict::Proceed(report)) => {
                ResponseFuture::calling(self.inner.call(req), report)
            }
            Checked::Decided(verdict) => ResponseFuture::refused(verdict),
            Checked::Waiting(pending) => {
                // The store must be waited for: the check runs in a future that owns what
                // it borrows. Take the ready service for this request and leave a clone to
                // be made ready for the next one.
                let policies = match choice {
                    Choice::Policy(policy) => PolicyList::One(policy),
                    Choice::Policies(list) => PolicyList::Many(list),
                    _ => PolicyList::Many(shared.policies.clone()),
                };
                let shared = Arc::clone(shared);
                let check = Box::pin(async move {
                    shared
                        .decide_rest(key, policies, cost, error_mode, pending)
                        .await
                });
                let clone = self.inner.clone();
                let inner = std::mem::replace(&mut self.inner, clone);
                ResponseFuture::checking(check, inner, req)
            }
        }
    }
}

impl<S, St, K, B, ResB> Service<Request<B>> for RateLimit<S, St, K, RejectWithResponse>
where
    S: Service<Request<B>, Response = Response<ResB>> + Clone,
    ResB: RejectionBody,
    St: Store + 'static,
    K: ExtractKey,
{
    type Response = Response<ResB>;
    type Error = S::Error;
    type Future = ResponseFuture<S, B, RejectWithResponse>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        self.start(req, false)
    }
}

impl<S, St, K, B, ResB> Service<Request<B>> for RateLimit<S, St, K, RejectWithError>
where
    S: Service<Request<B>, Response = Response<ResB>> + Clone,
    S::Error: Into<BoxError>,
    St: Store + 'static,
    K: ExtractKey,
{
    type Response = Response<ResB>;
    type Error = BoxError;
    type Future = ResponseFuture<S, B, RejectWithError>;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        self.inner.poll_ready(cx).map_err(Into::into)
    }

    fn call(&mut self, req: Request<B>) -> Self::Future {
        self.start(req, true)
    }
}

impl<S: Clone, St, K, M> Clone for RateLimit<S, St, K, M> {
    fn clone(&self) -> Self {
        Self::from_shared(self.inner.clone(), self.shared.clone())
    }
}

impl<S: fmt::Debug, St, K, M> fmt::Debug for RateLimit<S, St, K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RateLimit")
            .field("inner", &self.inner)
            .field("policies", &self.shared.policies)
            .finish_non_exhaustive()
    }
}
