//! The response future of a [`ConcurrencyLimitService`](crate::ConcurrencyLimitService):
//! acquiring a slot, then calling the inner service with it.

use std::future::Future;
use std::marker::PhantomData;
use std::pin::Pin;
use std::task::{Context, Poll, ready};

use floodwall_core::BoxError;
use http::{Request, Response};
use pin_project_lite::pin_project;
use tower_service::Service;

use super::PermitBody;
use super::config::{Granted, Outcome};
use crate::body::RejectionBody;
use crate::mode::RefusalMode;
use crate::{RejectWithError, RejectWithResponse};

/// An acquisition the store must be waited for, boxed: the store's future borrows the
/// store, the key and the limit, so it is built inside an `async` block that owns them.
pub(crate) type AcquireFuture<R> = Pin<Box<dyn Future<Output = Outcome<R>> + Send>>;

pin_project! {
    /// Waits for a slot, then calls the inner service and hands its response body the
    /// permit ([`PermitBody`]); or resolves to the refusal. Dropping the future gives the
    /// slot back.
    pub struct ConcurrencyLimitFuture<S, B, M>
    where
        S: Service<Request<B>>,
        M: RefusalMode,
    {
        #[pin]
        state: State<S::Future, S, B, M::Refusal>,
        granted: Granted,
        _mode: PhantomData<fn() -> M>,
    }
}

pin_project! {
    #[project = StateProj]
    enum State<F, S, B, R> {
        // Waiting for the store; `inner` is the ready service to call if a slot is granted.
        Acquiring { acquire: AcquireFuture<R>, inner: Option<(S, Request<B>)> },
        // Admitted: waiting for the inner service.
        Calling { #[pin] future: F },
        // Refused without waiting for the store.
        Refused { refusal: Option<R> },
    }
}

impl<S, B, M> ConcurrencyLimitFuture<S, B, M>
where
    S: Service<Request<B>>,
    M: RefusalMode,
{
    pub(crate) fn acquiring(acquire: AcquireFuture<M::Refusal>, inner: S, req: Request<B>) -> Self {
        let inner = Some((inner, req));
        Self::new(State::Acquiring { acquire, inner }, Granted::default())
    }

    pub(crate) fn calling(future: S::Future, granted: Granted) -> Self {
        Self::new(State::Calling { future }, granted)
    }

    pub(crate) fn refused(refusal: M::Refusal) -> Self {
        let refusal = Some(refusal);
        Self::new(State::Refused { refusal }, Granted::default())
    }

    fn new(state: State<S::Future, S, B, M::Refusal>, granted: Granted) -> Self {
        Self {
            state,
            granted,
            _mode: PhantomData,
        }
    }

    /// Drives the future to the inner service's response (its body holding the permit) or
    /// to the refusal.
    #[allow(clippy::type_complexity)]
    fn poll_decided<ResB, E>(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Result<Result<Response<PermitBody<ResB>>, E>, M::Refusal>>
    where
        S: Service<Request<B>, Response = Response<ResB>, Error = E>,
    {
        let this = self.project();
        let (mut state, granted) = (this.state, this.granted);
        loop {
            match state.as_mut().project() {
                StateProj::Calling { future } => {
                    let result = ready!(future.poll(cx));
                    // An error drops the permit here, with the future's state.
                    return Poll::Ready(Ok(result.map(|mut res| {
                        if let Some((headers, remaining)) = granted.headers.take() {
                            headers.write(remaining, res.headers_mut());
                        }
                        res.map(|body| PermitBody::new(body, granted.permit.take()))
                    })));
                }
                StateProj::Acquiring { acquire, inner } => {
                    match ready!(acquire.as_mut().poll(cx)) {
                        Outcome::Admit(admitted) => {
                            let (mut svc, req) = inner
                                .take()
                                .expect("ConcurrencyLimitFuture polled after completion");
                            *granted = admitted;
                            state.set(State::Calling {
                                future: svc.call(req),
                            });
                        }
                        Outcome::Refuse(refusal) => return Poll::Ready(Err(refusal)),
                    }
                }
                StateProj::Refused { refusal } => {
                    let refusal = refusal
                        .take()
                        .expect("ConcurrencyLimitFuture polled after completion");
                    return Poll::Ready(Err(refusal));
                }
            }
        }
    }
}

crate::mode::future_impls!(ConcurrencyLimitFuture, PermitBody<ResB>);
