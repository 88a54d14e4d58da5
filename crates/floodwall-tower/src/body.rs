//! Response bodies: the inner service's own body type, with refusals written into it.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

/// A response body type a refusal can be written in: a [`RateLimit`](crate::RateLimit)
/// service answers with the inner service's own body type, so axum and tonic take its
/// bodies through without boxing them again.
///
/// Implemented for axum's and tonic's bodies, `String`, http-body-util's `Full<Bytes>`,
/// `BoxBody<Bytes, E>` and `UnsyncBoxBody<Bytes, E>`, and [`ResponseBody`]. For any other
/// body type, wrap the inner service's bodies in [`ResponseBody::new`] inside the layer:
///
/// ```
/// use floodwall_core::{MemoryStore, Policy};
/// use floodwall_tower::{RateLimitLayer, ResponseBody};
/// use http::{Request, Response, StatusCode};
/// use http_body_util::Empty;
/// use tower::{ServiceBuilder, ServiceExt, service_fn};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let policy = Policy::gcra("per-ip", "1/s".parse()?)?;
/// let service = ServiceBuilder::new()
///     .layer(RateLimitLayer::new(MemoryStore::new(), policy))
///     .map_response(|res: Response<_>| res.map(ResponseBody::new))
///     .service(service_fn(|_req: Request<()>| async {
///         Ok::<_, std::convert::Infallible>(Response::new(Empty::<bytes::Bytes>::new()))
///     }));
///
/// let request = || {
///     let mut req = Request::new(());
///     req.extensions_mut().insert("203.0.113.7".parse::<std::net::IpAddr>().unwrap());
///     req
/// };
/// let ok = service.clone().oneshot(request()).await?;
/// assert_eq!(ok.status(), StatusCode::OK);
/// let refused: Response<ResponseBody<Empty<bytes::Bytes>>> = service.oneshot(request()).await?;
/// assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
/// # Ok(())
/// # }
/// ```
pub trait RejectionBody: Sized {
    /// A body holding exactly `bytes`.
    fn from_rejection(bytes: Bytes) -> Self;
}

/// Refusal bodies are text or JSON, so valid UTF-8; any other byte a custom responder
/// writes is replaced with U+FFFD.
impl RejectionBody for String {
    fn from_rejection(bytes: Bytes) -> Self {
        match String::from_utf8(bytes.into()) {
            Ok(text) => text,
            Err(e) => String::from_utf8_lossy(e.as_bytes()).into_owned(),
        }
    }
}

impl RejectionBody for http_body_util::Full<Bytes> {
    fn from_rejection(bytes: Bytes) -> Self {
        Self::new(bytes)
    }
}

impl<E> RejectionBody for http_body_util::combinators::BoxBody<Bytes, E> {
    fn from_rejection(bytes: Bytes) -> Self {
        use http_body_util::BodyExt;
        http_body_util::Full::new(bytes)
            .map_err(|never| match never {})
            .boxed()
    }
}

impl<E> RejectionBody for http_body_util::combinators::UnsyncBoxBody<Bytes, E> {
    fn from_rejection(bytes: Bytes) -> Self {
        use http_body_util::BodyExt;
        http_body_util::Full::new(bytes)
            .map_err(|never| match never {})
            .boxed_unsync()
    }
}

#[cfg(feature = "axum")]
impl RejectionBody for axum::body::Body {
    fn from_rejection(bytes: Bytes) -> Self {
        Self::from(bytes)
    }
}

#[cfg(feature = "tonic")]
impl RejectionBody for tonic::body::Body {
    fn from_rejection(bytes: Bytes) -> Self {
        Self::new(http_body_util::Full::new(bytes))
    }
}

impl<B> RejectionBody for ResponseBody<B> {
    fn from_rejection(bytes: Bytes) -> Self {
        Self::full(bytes)
    }
}

pin_project! {
    /// A body that is either another body or a refusal's fixed bytes: the
    /// [`RejectionBody`] for services whose own body type is not one.
    ///
    /// Its `Data` is [`Bytes`], as axum's, tonic's and hyper's bodies are.
    pub struct ResponseBody<B> {
        #[pin]
        kind: Kind<B>,
    }
}

pin_project! {
    #[project = KindProj]
    enum Kind<B> {
        Inner { #[pin] body: B },
        Full { data: Option<Bytes> },
    }
}

impl<B> ResponseBody<B> {
    /// Wraps a service's body.
    pub fn new(body: B) -> Self {
        Self {
            kind: Kind::Inner { body },
        }
    }

    fn full(data: Bytes) -> Self {
        let data = (!data.is_empty()).then_some(data);
        Self {
            kind: Kind::Full { data },
        }
    }
}

impl<B> Body for ResponseBody<B>
where
    B: Body<Data = Bytes>,
{
    type Data = Bytes;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, B::Error>>> {
        match self.project().kind.project() {
            KindProj::Inner { body } => body.poll_frame(cx),
            KindProj::Full { data } => Poll::Ready(data.take().map(|d| Ok(Frame::data(d)))),
        }
    }

    fn is_end_stream(&self) -> bool {
        match &self.kind {
            Kind::Inner { body } => body.is_end_stream(),
            Kind::Full { data } => data.is_none(),
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.kind {
            Kind::Inner { body } => body.size_hint(),
            Kind::Full { data } => {
                SizeHint::with_exact(data.as_ref().map_or(0, |d| d.len() as u64))
            }
        }
    }
}

impl<B> std::fmt::Debug for ResponseBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.kind {
            Kind::Inner { .. } => f.write_str("ResponseBody::Inner"),
            Kind::Full { data } => f
                .debug_struct("ResponseBody::Full")
                .field("len", &data.as_ref().map_or(0, Bytes::len))
                .finish(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    async fn bytes_of<B>(body: B) -> Bytes
    where
        B: Body<Data = Bytes>,
        B::Error: std::fmt::Debug,
    {
        body.collect().await.unwrap().to_bytes()
    }

    #[tokio::test]
    async fn every_rejection_body_holds_the_bytes() {
        let text = Bytes::from_static(b"Too Many Requests\n");
        assert_eq!(String::from_rejection(text.clone()), "Too Many Requests\n");
        let lossy = String::from_rejection(Bytes::from_static(b"a\xffb"));
        assert_eq!(lossy, "a\u{fffd}b");
        let full = http_body_util::Full::from_rejection(text.clone());
        assert_eq!(bytes_of(full).await, text);
        type Boxed = http_body_util::combinators::BoxBody<Bytes, std::io::Error>;
        assert_eq!(bytes_of(Boxed::from_rejection(text.clone())).await, text);
        let wrapped = ResponseBody::<http_body_util::Empty<Bytes>>::from_rejection(text.clone());
        assert_eq!(wrapped.size_hint().exact(), Some(text.len() as u64));
        assert_eq!(bytes_of(wrapped).await, text);
        let empty = ResponseBody::<http_body_util::Empty<Bytes>>::from_rejection(Bytes::new());
        assert!(empty.is_end_stream());
        let inner = ResponseBody::new(http_body_util::Full::new(text.clone()));
        assert_eq!(bytes_of(inner).await, text);
    }
}
