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
        _mode: PhantomData<fn() -> M>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, S, B> {
        // Waiting for the store; `inner` is the ready service to call if allowed.
        Checking { check: CheckFuture, inner: Option<(S, Request<B>)> },
        // Allowed (or not limited): waiting for the inner service.
        Calling { #[pin] future: F, report: Option<Fields> },
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

    pub(crate) fn calling(future: S::Future, report: Option<Fields>) -> Self {
        Self::new(State::Calling { future, report })
    }

    pub(crate) fn refused(verdict: Verdict) -> Self {
        Self::new(State::Refused {
            verdict: Some(verdict),
        })
    }

    fn new(state: State<S::Future, S, B>) -> Self {
        Self {
            state,
            _mode: PhantomData,
        }
    }

    /// The outcome in both modes: `Err` is the inner service's error.
    fn poll_outcome<ResB>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Outcome<ResB>, S::Error>>
    where
        S: Service<Request<B>, Response = Response<ResB>>,
    {
        let mut state = self.project().state;
        loop {
            let verdict = match state.as_mut().project() {
                StateProj::Checking { check, inner } => {
                    let verdict = ready!(check.as_mut().poll(cx));
                    if let Verdict::Proceed(report) = verdict {
                        let (mut svc, req) = inner
                            .take()
                            .expect("ResponseFuture polled after completion");
                        let future = svc.call(req);
                        state.set(State::Calling { future, report });
                        continue;
                    }
                    verdict
                }
                StateProj::Calling { future, report } => {
                    let mut res = ready!(future.poll(cx))?;
                    if let Some(report) = report.take() {
                        report.write(res.headers_mut());
                    }
                    return Poll::Ready(Ok(Outcome::Inner(res)));
                }
                StateProj::Refused { verdict } => verdict
                    .take()
                    .expect("ResponseFuture polled after completion"),
            };
            return Poll::Ready(Ok(match verdict {
                Verdict::Respond(res) => Outcome::Refused(res),
                Verdict::Fail(error) => Outcome::Failed(error),
                // Proceed is handled above.
                Verdict::Proceed(_) => Outcome::Refused(Box::new(internal_error())),
            }));
        }
    }
}

/// How a request ended, in either mode.
enum Outcome<ResB> {
    /// The inner service's response.
    Inner(Response<ResB>),
    /// A refusal as a response.
    Refused(Box<Response<Bytes>>),
    /// A refusal as an error.
    Failed(BoxError),
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
        Poll::Ready(Ok(match ready!(self.poll_outcome(cx))? {
            Outcome::Inner(res) => res,
            Outcome::Refused(res) => res.map(ResB::from_rejection),
            // A refusal is never an error in this mode; were one to arrive, answer 500
            // rather than panic.
            Outcome::Failed(_) => internal_error().map(ResB::from_rejection),
        }))
    }
}

impl<S, B, ResB> Future for ResponseFuture<S, B, RejectWithError>
where
    S: Service<Request<B>, Response = Response<ResB>>,
    S::Error: Into<BoxError>,
{
    type Output = Result<Response<ResB>, BoxError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Poll::Ready(match ready!(self.poll_outcome(cx)) {
            Ok(Outcome::Inner(res)) => Ok(res),
            Ok(Outcome::Failed(error)) => Err(error),
            // Every refusal is an error in this mode; were a response to arrive, report it
            // as one rather than panic.
            Ok(Outcome::Refused(res)) => Err(format!(
                "request refused by the rate limiter with status {}",
                res.status()
            )
            .into()),
            Err(inner) => Err(inner.into()),
        })
    }
}

impl<S, B, M> std::fmt::Debug for ResponseFuture<S, B, M>
where
    S: Service<Request<B>>,
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResponseFuture").finish_non_exhaustive()
    }
}
