//! [`PermitBody`]: a response body that holds its request's slot until it is done.

use std::pin::Pin;
use std::task::{Context, Poll, ready};

use bytes::Bytes;
use floodwall_core::Permit;
use http_body::{Body, Frame, SizeHint};
use pin_project_lite::pin_project;

use crate::RejectionBody;

pin_project! {
    /// The inner service's response body, holding the request's [`Permit`] until the body
    /// is done (its last frame read, an error, or the body dropped): a streaming response
    /// keeps its slot while it streams. Refusals hold no permit.
    pub struct PermitBody<B> {
        #[pin]
        body: B,
        permit: Option<Permit>,
    }
}

impl<B> PermitBody<B> {
    pub(crate) fn new(body: B, permit: Option<Permit>) -> Self {
        Self { body, permit }
    }

    /// Whether it still holds a slot (`false` once the body is done, and for refusals and
    /// requests let through without one).
    pub fn holds_permit(&self) -> bool {
        self.permit.is_some()
    }

    /// The inner body; its slot is given back.
    pub fn into_inner(self) -> B {
        self.body
    }
}

impl<B: Body> Body for PermitBody<B> {
    type Data = B::Data;
    type Error = B::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<B::Data>, B::Error>>> {
        let mut this = self.project();
        let frame = ready!(this.body.as_mut().poll_frame(cx));
        // Done: nothing more will be sent, so the slot goes back now rather than when
        // the server gets round to dropping the body.
        if !matches!(frame, Some(Ok(_))) || this.body.is_end_stream() {
            this.permit.take();
        }
        Poll::Ready(frame)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl<B: RejectionBody> RejectionBody for PermitBody<B> {
    fn from_rejection(bytes: Bytes) -> Self {
        Self::new(B::from_rejection(bytes), None)
    }
}

impl<B> std::fmt::Debug for PermitBody<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PermitBody")
            .field("permit", &self.permit)
            .finish_non_exhaustive()
    }
}
