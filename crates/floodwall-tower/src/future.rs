//! The response future: checking the store, then calling the inner service.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use floodwall_core::BoxError;
use http::{Request, Response, StatusCode};
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::body::RejectionBody;
use crate::headers::Fields;
use crate::shared::Verdict;
use crate::{RejectWithError, RejectWithResponse};

/// The store's decision, boxed: a store's future borrows the store, the key and the
/// policy, so it is built inside an `async` block that owns them.
pub(crate) type CheckFuture = Pin<Box<dyn Future<Output = Verdict> + Send>>;

pin_project! {
    /// The future of a [`RateLimit`](crate::RateLimit) service: it waits for the store's
    /// decision, then either calls the inner service (and adds rate-limit headers to its
    /// response) or resolves to the refusal at once. Nothing waits for quota to come back.
    pub struct ResponseFuture<S, B, M>
    where
        S: Service<Request<B>>,
    {
        #[pin]
        state: State<S::Future, S, B>,
        report: Option<Fields>,
        _mode: PhantomData<fn() -> M>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, S, B> {
        // Waiting for the store; `inner` is the ready service to call if allowed.
        Checking { check: CheckFuture, inner: Option<(S, Request<B>)> },
        // Allowed (or not limited): waiting for the inner service.
        Calling { #[pin] future: F },
        // Refused before any store call (no key).
        Refused { verdict: Option<Verdict> },
    }
}

impl<S, B, M> ResponseFuture<S, B, M>
where
    S: Service<Request<B>>,
{
    pub(crate) fn checking(check: CheckFuture, inner: S, req: Request<B>) -> Self {
        Self::new(State::Checking {
            check,
            inner: Some((inner, req)),
        })
    }

    #[inline(always)]
    pub(crate) fn calling(future: S::Future, report: Option<Fields>) -> Self {
        Self {
            state: State::Calling { future },
            report,
            _mode: PhantomData,
        }
    }

    pub(crate) fn refused(verdict: Verdict) -> Self {
        Self::new(State::Refused {
            verdict: Some(verdict),
        })
    }

    #[inline(always)]
    fn new(state: State<S::Future, S, B>) -> Self {
        Self {
            state,
            report: None,
            _mode: PhantomData,
        }
    }

    /// Moves the state on until the request is admitted (`Ready(None)`: the state is
    /// `Calling` now) or refused (`Ready(Some(verdict))`).
    #[inline(never)]
    fn poll_decision(
        mut state: Pin<&mut State<S::Future, S, B>>,
        report: &mut Option<Fields>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Verdict>> {
        let verdict = match state.as_mut().project() {
            StateProj::Checking { check, inner } => {
                let verdict = ready!(check.as_mut().poll(cx));
                if let Verdict::Proceed(admitted) = verdict {
                    let (mut svc, req) = inner
                        .take()
                        .expect("ResponseFuture polled after completion");
                    *report = admitted;
                    let future = svc.call(req);
                    state.set(State::Calling { future });
                    return Poll::Ready(None);
                }
                verdict
            }
            StateProj::Refused { verdict } => verdict
                .take()
                .expect("ResponseFuture polled after completion"),
            // The caller polls `Calling` itself.
            StateProj::Calling { .. } => return Poll::Ready(None),
        };
        Poll::Ready(Some(verdict))
    }
}

/// Adds the admitted request's rate-limit headers, if any, to its response.
#[inline]
fn add_headers<ResB>(report: &mut Option<Fields>, res: &mut Response<ResB>) {
    if let Some(report) = report.take() {
        report.write(res.headers_mut());
    }
}

fn internal_error() -> Response<Bytes> {
    let mut res = Response::new(Bytes::new());
    *res.status_mut() = StatusCode::INTERNAL_SERVER_ERROR;
    res
}

impl<S, B, ResB> Future for ResponseFuture<S, B, RejectWithResponse>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    ResB: RejectionBody,
{
    type Output = Result<Response<ResB>, S::Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let (mut state, report) = (this.state, this.report);
        loop {
            // Every admitted request ends here: the inner service's poll, as it is, and the
            // headers added to its response in place.
            if let StateProj::Calling { future } = state.as_mut().project() {
                let mut poll = future.poll(cx);
                if let Poll::Ready(Ok(res)) = &mut poll {
                    add_headers(report, res);
                }
                return poll;
            }
            let Some(verdict) = ready!(Self::poll_decision(state.as_mut(), report, cx)) else {
                continue;
            };
            return Poll::Ready(Ok(match verdict {
                Verdict::Respond(res) => res.map(ResB::from_rejection),
                // A refusal is never an error in this mode, and `Proceed` never gets here;
                // were either to, answer 500 rather than panic.
                Verdict::Fail(_) | Verdict::Proceed(_) => {
                    internal_error().map(ResB::from_rejection)
                }
            }));
        }
    }
}

impl<S, B, ResB> Future for ResponseFuture<S, B, RejectWithError>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
{
    type Output = Result<Response<ResB>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        let (mut state, report) = (this.state, this.report);
        loop {
            if let StateProj::Calling { future } = state.as_mut().project() {
                let mut poll = future.poll(cx);
                if let Poll::Ready(Ok(res)) = &mut poll {
                    add_headers(report, res);
                }
                return poll.map_err(Into::into);
            }
            let Some(verdict) = ready!(Self::poll_decision(state.as_mut(), report, cx)) else {
                continue;
            };
            return Poll::Ready(Err(match verdict {
                Verdict::Fail(error) => error,
                // Every refusal is an error in this mode; were a response to arrive, report
                // it as one rather than panic.
                Verdict::Respond(res) => format!(
                    "request refused by the rate limiter with status {}",
                    res.status()
                )
                .into(),
                Verdict::Proceed(_) => internal_error_message(),
            }));
        }
    }
}

/// What a `Proceed` verdict would be, were one to reach the refusal path.
fn internal_error_message() -> BoxError {
    format!(
        "request refused by the rate limiter with status {}",
        StatusCode::INTERNAL_SERVER_ERROR
    )
    .into()
}

impl<S, B, M> std::fmt::Debug for ResponseFuture<S, B, M>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
