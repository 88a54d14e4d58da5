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
