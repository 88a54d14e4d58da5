//! Responders written in axum's terms: closures returning `impl IntoResponse`.

use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use axum::response::IntoResponse;
use bytes::{Bytes, BytesMut};
use http::Response;
use http_body::Body as _;

use super::{Denial, OnReject, OnStoreFailure};

/// Lets a closure answer refusals as an axum handler would, with anything that is
/// [`IntoResponse`]: a `Fn(&Denial) -> impl IntoResponse` for
/// [`Refusals::respond`](crate::Refusals::respond), a
/// `Fn(&floodwall_core::Error) -> impl IntoResponse` for
/// [`Refusals::store_failure`](crate::Refusals::store_failure) (annotate the argument's
/// type). A named `fn` returns `axum::response::Response`, since a returned
/// `impl IntoResponse` would borrow its argument. A missing key gets the provided
/// [`OnReject::missing_key`].
///
/// The body is read as soon as the closure returns: one not complete by then (a stream,
/// one that fails, more than 64 KiB) is cut where it stops, without its `Content-Length`,
/// and a warning logged. Trailers are dropped.
///
/// ```
/// use axum::http::{StatusCode, header};
/// use axum::response::IntoResponse;
/// use floodwall_core::{MemoryStore, Policy};
/// use floodwall_tower::{RateLimitLayer, Refusals};
/// use floodwall_tower::respond::{Axum, Denial};
///
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = Policy::gcra("per-ip", "10/s".parse()?)?;
/// let layer = RateLimitLayer::new(MemoryStore::new(), policy)
///     .refusals(Refusals::new().respond(Axum(|denial: &Denial| {
///         // `null` when retrying can never help (the request costs more than the limit).
///         let secs = denial.retry_after_secs().map_or("null".into(), |s| s.to_string());
///         let body = format!(r#"{{"error":"rate_limited","retry_after":{secs}}}"#);
///         (
///             StatusCode::TOO_MANY_REQUESTS,
///             [(header::CONTENT_TYPE, "application/json")],
///             body,
///         )
///             .into_response()
///     })).store_failure(Axum(|_: &floodwall_core::Error| {
///         (StatusCode::SERVICE_UNAVAILABLE, "try again soon").into_response()
///     })));
/// let app: axum::Router = axum::Router::new()
///     .route("/", axum::routing::get(|| async { "hello" }))
///     .layer(layer);
/// # let _ = app;
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, Copy)]
pub struct Axum<F>(pub F);

impl<F, R> OnReject for Axum<F>
where
    F: Fn(&Denial) -> R + Send + Sync + 'static,
    R: IntoResponse,
{
    fn respond(&self, denial: &Denial) -> Response<Bytes> {
        refusal((self.0)(denial).into_response())
    }
}

impl<F, R> OnStoreFailure for Axum<F>
where
    F: Fn(&floodwall_core::Error) -> R + Send + Sync + 'static,
    R: IntoResponse,
{
    fn respond(&self, error: &floodwall_core::Error) -> Response<Bytes> {
        refusal((self.0)(error).into_response())
    }
}

/// The most of a body read at once: far above any refusal's, and a bound on the work a
/// body that is always ready (an endless stream) can make a refusal do.
const MAX_READY: usize = 64 * 1024;

/// An axum response as a refusal: its body read as far as it is ready now.
fn refusal(res: axum::response::Response) -> Response<Bytes> {
    let (mut parts, body) = res.into_parts();
    let (data, incomplete) = read_ready(body);
    if let Some(why) = incomplete {
        // What was ready is all that is sent: a `Content-Length` for the whole would be
        // a lie that the server refuses or the client waits on.
        parts.headers.remove(http::header::CONTENT_LENGTH);
        tracing::warn!(
            target: "floodwall",
            status = %parts.status,
            sent_bytes = data.len(),
            "refusal body cut short: {why}; a responder's body must be complete when it \
             returns (text, bytes, JSON), not a stream"
        );
    }
    Response::from_parts(parts, data)
}

/// Why a body was not read to its end.
enum Incomplete {
    NotReady,
    Failed(axum::Error),
    TooLong,
}

impl std::fmt::Display for Incomplete {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::NotReady => f.write_str("the body was not ready"),
            Self::Failed(e) => write!(f, "the body failed ({e})"),
            Self::TooLong => write!(f, "more than {MAX_READY} bytes were ready"),
        }
    }
}

/// The body's data as far as it is ready without waiting, and why that is not all of it.
fn read_ready(mut body: axum::body::Body) -> (Bytes, Option<Incomplete>) {
    let mut cx = Context::from_waker(Waker::noop());
    let mut data = BytesMut::new();
    while !body.is_end_stream() {
        if data.len() > MAX_READY {
            return (data.freeze(), Some(Incomplete::TooLong));
        }
        match Pin::new(&mut body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(chunk) = frame.into_data() {
                    data.extend_from_slice(&chunk);
                }
            }
            Poll::Ready(Some(Err(e))) => return (data.freeze(), Some(Incomplete::Failed(e))),
            Poll::Ready(None) => break,
            Poll::Pending => return (data.freeze(), Some(Incomplete::NotReady)),
        }
    }
    (data.freeze(), None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::body::Body;
    use floodwall_test_support::Partial;

    /// A body that is always ready with one more byte.
    struct Endless;

    impl http_body::Body for Endless {
        type Data = Bytes;
        type Error = std::convert::Infallible;

        fn poll_frame(
            self: Pin<&mut Self>,
            _: &mut Context<'_>,
        ) -> Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
            Poll::Ready(Some(Ok(http_body::Frame::data(Bytes::from_static(b"x")))))
        }
    }

    #[test]
    fn complete_bodies_are_read_whole() {
        let (data, incomplete) = read_ready(Body::from("slow down"));
        assert_eq!(data, "slow down");
        assert!(incomplete.is_none());
        let (data, incomplete) = read_ready(Body::empty());
        assert!(data.is_empty() && incomplete.is_none());
    }

    #[test]
    fn a_body_not_ready_failing_or_endless_is_cut_where_it_stops() {
        let (data, incomplete) = read_ready(Body::new(Partial::stalls(b"part")));
        assert_eq!(data, "part");
        assert!(matches!(incomplete, Some(Incomplete::NotReady)));
        let (data, incomplete) = read_ready(Body::new(Partial::fails(b"part")));
        assert_eq!(data, "part");
        let why = incomplete.unwrap().to_string();
        let named = why.contains("failed") && why.contains("source gone");
        assert!(named, "{why}");
        let (data, incomplete) = read_ready(Body::new(Endless));
        assert_eq!(data.len(), MAX_READY + 1);
        assert!(matches!(incomplete, Some(Incomplete::TooLong)));
    }
}
