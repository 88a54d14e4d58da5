//! The response future: checking the store, then calling the inner service.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use floodwall_core::BoxError;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tower_service::Service;

use crate::body::RejectionBody;
use crate::headers::Fields;
use crate::mode::{RefusalMode, RejectWithError, RejectWithResponse};
use crate::settle::{Settler, Settling};

/// What happens to a request; `R` is its mode's refusal.
pub(crate) enum Admission<R> {
    /// Call the inner service, then add these headers.
    Admit(Option<Fields>),
    /// Answer with this refusal; the inner service is not called.
    Refuse(R),
}

/// The store's decision, boxed: a store's future borrows the store, the key and the
/// policy, so it is built inside an `async` block that owns them.
pub(crate) type CheckFuture<R> = Pin<Box<dyn Future<Output = Admission<R>> + Send>>;

pin_project! {
    /// The future of a [`RateLimit`](crate::RateLimit) service: it waits for the store's
    /// decision, then either calls the inner service (and adds rate-limit headers to its
    /// response) or resolves to the refusal at once. Nothing waits for quota to come back.
    pub struct ResponseFuture<S, B, M>
    where
        S: Service<Request<B>>,
        M: RefusalMode,
    {
        #[pin]
        state: State<S::Future, S, B, M::Refusal, S::Response>,
        report: Option<Fields>,
        _mode: PhantomData<fn() -> M>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, S, B, R, Res> {
        // Waiting for the store; `inner` is the ready service to call if allowed, and
        // `settle` settles its response's cost (`settle.rs`).
        Checking {
            check: CheckFuture<R>,
            inner: Option<(S, Request<B>)>,
            settle: Option<Settler>,
        },
        // Allowed (or not limited): waiting for the inner service.
        Calling { #[pin] future: F },
        // Allowed by a layer that charges by the response: waiting for the inner service,
        // then for the store's change for its cost (`settle.rs`).
        Settling { #[pin] future: F, settle: Box<Settling<Res>> },
        // Refused before any store call had to be waited for.
        Refused { refusal: Option<R> },
    }
}

impl<S, B, M> ResponseFuture<S, B, M>
where
    S: Service<Request<B>>,
    M: RefusalMode,
{
    pub(crate) fn checking(
        check: CheckFuture<M::Refusal>,
        inner: S,
        req: Request<B>,
        settle: Option<Settler>,
    ) -> Self {
        let state = State::Checking {
            check,
            inner: Some((inner, req)),
            settle,
        };
        Self::new(state, None)
    }

    pub(crate) fn calling(future: S::Future, report: Option<Fields>) -> Self {
        Self::new(State::Calling { future }, report)
    }

    pub(crate) fn refused(refusal: M::Refusal) -> Self {
        let refusal = Some(refusal);
        Self::new(State::Refused { refusal }, None)
    }

    /// [`calling`](Self::calling) for a layer that charges by the response.
    pub(crate) fn settling(future: S::Future, report: Option<Fields>, settle: Settler) -> Self {
        let settle = Box::new(Settling::Rule(settle));
        Self::new(State::Settling { future, settle }, report)
    }

    fn new(state: State<S::Future, S, B, M::Refusal, S::Response>, report: Option<Fields>) -> Self {
        Self {
            state,
            report,
            _mode: PhantomData,
        }
    }

    /// Waits for the store's decision: the inner service's future if it admits the request
    /// (its headers are in `report` now), else the refusal.
    fn poll_check(
        check: &mut CheckFuture<M::Refusal>,
        inner: &mut Option<(S, Request<B>)>,
        report: &mut Option<Fields>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<S::Future, M::Refusal>> {
        Poll::Ready(match ready!(check.as_mut().poll(cx)) {
            Admission::Admit(admitted) => {
                let (mut svc, req) = inner
                    .take()
                    .expect("ResponseFuture polled after completion");
                *report = admitted;
                Ok(svc.call(req))
            }
            Admission::Refuse(refusal) => Err(refusal),
        })
    }

    /// Drives the future to the inner service's response or to the refusal, whichever the
    /// decision leads to: the part both modes share.
    fn poll_decided<ResB, E>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Decided<ResB, E, M::Refusal>>
    where
        S: Service<Request<B>, Response = Response<ResB>, Error = E>,
    {
        let this = self.project();
        let (mut state, report) = (this.state, this.report);
        loop {
            let refusal = match state.as_mut().project() {
                StateProj::Calling { future } => return poll_calling(future, report, cx).map(Ok),
                StateProj::Settling { future, settle } => {
                    return poll_settling(future, report, settle, cx).map(Ok);
                }
                StateProj::Checking {
                    check,
                    inner,
                    settle,
                } => match ready!(Self::poll_check(check, inner, report, cx)) {
                    Ok(future) => {
                        match settle.take() {
                            None => state.set(State::Calling { future }),
                            Some(settle) => state.set(State::Settling {
                                future,
                                settle: Box::new(Settling::Rule(settle)),
                            }),
                        }
                        continue;
                    }
                    Err(refusal) => refusal,
                },
                StateProj::Refused { refusal } => refusal
                    .take()
                    .expect("ResponseFuture polled after completion"),
            };
            return Poll::Ready(Err(refusal));
        }
    }
}

/// Where a request ends up: the inner service's answer (`Ok`), or the mode's refusal.
type Decided<ResB, E, R> = Result<Result<Response<ResB>, E>, R>;

/// Adds the admitted request's rate-limit headers, if any, to its response.
fn add_headers<ResB>(report: &mut Option<Fields>, res: &mut Response<ResB>) {
    if let Some(report) = report.take() {
        report.write(res.headers_mut());
    }
}

/// Polls the inner service's future: where every admitted request ends, its response as
/// it comes with the headers added in place.
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

/// [`poll_calling`] for a layer that charges by the response (`settle.rs`): the response
/// is held until the store's change for its cost is done.
#[inline(never)]
fn poll_settling<F, ResB, E>(
    future: Pin<&mut F>,
    report: &mut Option<Fields>,
    settle: &mut Settling<Response<ResB>>,
    cx: &mut Context<'_>,
) -> Poll<Result<Response<ResB>, E>>
where
    F: Future<Output = Result<Response<ResB>, E>>,
{
    if let Some(held) = settle.poll_applying(cx) {
        return held.map(Ok);
    }
    match ready!(future.poll(cx)) {
        Ok(mut res) => {
            add_headers(report, &mut res);
            settle.settle(res, cx).map(Ok)
        }
        Err(e) => Poll::Ready(Err(e)),
    }
}

crate::mode::future_impls!(ResponseFuture, ResB);
