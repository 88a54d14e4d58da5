//! How a refusal reaches the caller: as a response (the default) or as an error, a type
//! each, so a service knows at compile time which kind it hands back.

use bytes::Bytes;
use floodwall_core::{BoxError, Error};
use http::Response;

use crate::RateLimited;
use crate::extract::KeyError;
use crate::respond::Denial;

/// Refusals are responses; the service's error type stays the inner service's, so the
/// layer fits axum's `Router::layer` and tonic's `Server::layer` as it is. The default.
#[derive(Debug, Clone, Copy, Default)]
pub struct RejectWithResponse;

/// Refusals are errors, the service's error a boxed one: a [`RateLimited`](crate::RateLimited)
/// for a denial, the store's [`floodwall_core::Error`], a
/// [`KeyError`](crate::extract::KeyError) for a missing key. For stacks that handle errors
/// in tower (axum's `HandleErrorLayer`).
#[derive(Debug, Clone, Copy, Default)]
pub struct RejectWithError;

/// One of the two ways refusals reach the caller: [`RejectWithResponse`] or
/// [`RejectWithError`]. Sealed: the service's types depend on which.
pub trait RefusalMode: sealed::Refuse {}

impl RefusalMode for RejectWithResponse {}
impl RefusalMode for RejectWithError {}

pub(crate) mod sealed {
    use super::*;

    /// Builds a mode's refusals. Responders are passed as closures and called only by the
    /// response mode: the error mode never builds a response it would throw away.
    #[allow(unreachable_pub)] // reachable only as `RefusalMode`'s supertrait, by design
    pub trait Refuse: Send + Sync + 'static {
        /// What a refused request resolves to.
        type Refusal: Send + 'static;

        /// A request some policy denied.
        fn denied(
            denial: &Denial,
            respond: impl FnOnce(&Denial) -> Response<Bytes>,
        ) -> Self::Refusal;

        /// A request the store could not decide, refused (fail closed).
        fn store_failed(
            error: Error,
            respond: impl FnOnce(&Error) -> Response<Bytes>,
        ) -> Self::Refusal;

        /// A request without a key, refused with `error`'s status.
        fn missing_key(
            error: KeyError,
            respond: impl FnOnce(&KeyError) -> Response<Bytes>,
        ) -> Self::Refusal;
    }
}

impl sealed::Refuse for RejectWithResponse {
    /// Boxed: refusals are rare, and this keeps the outcome every admitted request moves
    /// around small.
    type Refusal = Box<Response<Bytes>>;

    fn denied(denial: &Denial, respond: impl FnOnce(&Denial) -> Response<Bytes>) -> Self::Refusal {
        Box::new(respond(denial))
    }

    fn store_failed(
        error: Error,
        respond: impl FnOnce(&Error) -> Response<Bytes>,
    ) -> Self::Refusal {
        Box::new(respond(&error))
    }

    fn missing_key(
        error: KeyError,
        respond: impl FnOnce(&KeyError) -> Response<Bytes>,
    ) -> Self::Refusal {
        Box::new(respond(&error))
    }
}

impl sealed::Refuse for RejectWithError {
    type Refusal = BoxError;

    fn denied(denial: &Denial, _: impl FnOnce(&Denial) -> Response<Bytes>) -> Self::Refusal {
        Box::new(RateLimited::new(denial))
    }

    fn store_failed(error: Error, _: impl FnOnce(&Error) -> Response<Bytes>) -> Self::Refusal {
        Box::new(error)
    }

    fn missing_key(error: KeyError, _: impl FnOnce(&KeyError) -> Response<Bytes>) -> Self::Refusal {
        Box::new(error)
    }
}

/// The inner-service accessors, `Clone` and the `Service` impls (in both modes) of a
/// layer's service: `$service<S, St, K, M>`, holding its `inner` service and an `Arc` of
/// what its layer shares in `$field`, whose `start(&mut self, Request<B>)` returns a
/// `$future<S, B, M>` answering bodies of type `$body`.
macro_rules! service_impls {
    (
        $service:ident { $field:ident: $shared:ident },
        $future:ident,
        $body:ty
        $(, #[$call:meta])*
    ) => {
        impl<S, St, K, M> $service<S, St, K, M> {
            pub(crate) fn from_shared(inner: S, $field: Arc<$shared<St, K>>) -> Self {
                Self {
                    inner,
                    $field,
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
        }

        impl<S: Clone, St, K, M> Clone for $service<S, St, K, M> {
            fn clone(&self) -> Self {
                Self::from_shared(self.inner.clone(), Arc::clone(&self.$field))
            }
        }

        impl<S, St, K, B, ResB> Service<Request<B>> for $service<S, St, K, RejectWithResponse>
        where
            S: Service<Request<B>, Response = Response<ResB>> + Clone,
            ResB: RejectionBody,
            St: Store + 'static,
            K: ExtractKey,
        {
            type Response = Response<$body>;
            type Error = S::Error;
            type Future = $future<S, B, RejectWithResponse>;

            fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
                self.inner.poll_ready(cx)
            }

            $(#[$call])*
            fn call(&mut self, req: Request<B>) -> Self::Future {
                self.start(req)
            }
        }

        impl<S, St, K, B, ResB> Service<Request<B>> for $service<S, St, K, RejectWithError>
        where
            S: Service<Request<B>, Response = Response<ResB>> + Clone,
            S::Error: Into<BoxError>,
            St: Store + 'static,
            K: ExtractKey,
        {
            type Response = Response<$body>;
            type Error = BoxError;
            type Future = $future<S, B, RejectWithError>;

            fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
                self.inner.poll_ready(cx).map_err(Into::into)
            }

            $(#[$call])*
            fn call(&mut self, req: Request<B>) -> Self::Future {
                self.start(req)
            }
        }
    };
}

/// The `Future` and `Debug` impls of a layer's response future (`$future<S, B, M>`, whose
/// `poll_decided` ends in the inner service's answer or the mode's refusal) in both modes;
/// its responses have bodies of type `$body`.
macro_rules! future_impls {
    ($future:ident, $body:ty) => {
        impl<S, B, ResB> Future for $future<S, B, RejectWithResponse>
        where
            S: Service<Request<B>, Response = Response<ResB>>,
            ResB: RejectionBody,
        {
            type Output = Result<Response<$body>, S::Error>;

            fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
                Poll::Ready(match ready!(self.poll_decided(cx)) {
                    Ok(called) => called,
                    Err(refusal) => Ok(refusal.map(RejectionBody::from_rejection)),
                })
            }
        }

        impl<S, B, ResB> Future for $future<S, B, RejectWithError>
        where
            S: Service<Request<B>, Response = Response<ResB>>,
            S::Error: Into<BoxError>,
        {
            type Output = Result<Response<$body>, BoxError>;

            fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
                Poll::Ready(match ready!(self.poll_decided(cx)) {
                    Ok(called) => called.map_err(Into::into),
                    Err(refusal) => Err(refusal),
                })
            }
        }

        impl<S, B, M> std::fmt::Debug for $future<S, B, M>
        where
            S: Service<Request<B>>,
            M: RefusalMode,
        {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($future)).finish_non_exhaustive()
            }
        }
    };
}

pub(crate) use {future_impls, service_impls};
