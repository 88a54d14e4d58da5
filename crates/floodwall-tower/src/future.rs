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
use crate::shared::{Refusal, Verdict};
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
        // Refused before any store call had to be waited for.
        Refused { refusal: Option<Refusal> },
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

    #[inline(never)]
    pub(crate) fn refused(refusal: Refusal) -> Self {
        Self::new(State::Refused {
            refusal: Some(refusal),
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

    /// Waits for the store's decision: the inner service's future if it admits the request
    /// (its headers are in `report` now), else the refusal.
    #[inline(never)]
    fn poll_check(
        check: &mut CheckFuture,
        inner: &mut Option<(S, Request<B>)>,
        report: &mut Option<Fields>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<S::Future, Refusal>> {
        Poll::Ready(match ready!(check.as_mut().poll(cx)) {
            Verdict::Proceed(admitted) => {
                let (mut svc, req) = inner
                    .take()
                    .expect("ResponseFuture polled after completion");
                *report = admitted;
                Ok(svc.call(req))
            }
            Verdict::Refuse(refusal) => Err(refusal),
        })
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

/// Polls the inner service's future: where every admitted request ends, its response as
/// it comes with the headers added in place.
#[inline(always)]
fn poll_calling<F, ResB, E>(
    future: Pin<&mut F>,
    report: &mut Option<Fields>,
    cx: &mut Context<'_>,
) -> Poll<Result<Response<ResB>, E>>
where
    F: Future<Output = Result<Response<ResB>, E>>,
{
    let mut poll = future.poll(cx);
    if let Poll::Ready(Ok(res)) = &mut poll {
        add_headers(report, res);
    }
    poll
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
            let refusal = match state.as_mut().project() {
                StateProj::Calling { future } => return poll_calling(future, report, cx),
                StateProj::Checking { check, inner } => {
                    match ready!(Self::poll_check(check, inner, report, cx)) {
                        Ok(future) => {
                            state.set(State::Calling { future });
                            continue;
                        }
                        Err(refusal) => refusal,
                    }
                }
                StateProj::Refused { refusal } => take_refusal(refusal),
            };
            return Poll::Ready(Ok(match refusal {
                Refusal::Respond(res) => res.map(ResB::from_rejection),
                // A refusal is never an error in this mode; were one to be, answer 500
                // rather than panic.
                Refusal::Fail(_) => internal_error().map(ResB::from_rejection),
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
            let refusal = match state.as_mut().project() {
                StateProj::Calling { future } => {
                    return poll_calling(future, report, cx).map_err(Into::into);
                }
                StateProj::Checking { check, inner } => {
                    match ready!(Self::poll_check(check, inner, report, cx)) {
                        Ok(future) => {
                            state.set(State::Calling { future });
                            continue;
                        }
                        Err(refusal) => refusal,
                    }
                }
                StateProj::Refused { refusal } => take_refusal(refusal),
            };
            return Poll::Ready(Err(match refusal {
                Refusal::Fail(error) => error,
                // Every refusal is an error in this mode; were a response to arrive, report
                // it as one rather than panic.
                Refusal::Respond(res) => format!(
                    "request refused by the rate limiter with status {}",
                    res.status()
                )
                .into(),
            }));
        }
    }
}

/// The refusal a `Refused` state holds, taken once.
#[inline]
fn take_refusal(refusal: &mut Option<Refusal>) -> Refusal {
    refusal
        .take()
        .expect("ResponseFuture polled after completion")
}

impl<S, B, M> std::fmt::Debug for ResponseFuture<S, B, M>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
