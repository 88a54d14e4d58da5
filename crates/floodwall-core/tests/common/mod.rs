//! What the core's tests share.
#![allow(dead_code)]

/// Polls a future that is ready at once (every store these tests use is in memory).
pub(crate) fn now_or_never<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("an in-memory store waited"),
    }
}

/// `.now()` on a store's future: its answer, for a store that answers at once (the memory
/// store, and combinators around it that need not wait).
pub(crate) trait Now: Future + Sized {
    fn now(self) -> Self::Output {
        now_or_never(self)
    }
}

impl<F: Future> Now for F {}
