//! What the core's tests share.

/// Polls a future that is ready at once (every store these tests use is in memory).
pub(crate) fn now_or_never<F: Future>(f: F) -> F::Output {
    let mut f = std::pin::pin!(f);
    let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
    match f.as_mut().poll(&mut cx) {
        std::task::Poll::Ready(v) => v,
        std::task::Poll::Pending => panic!("an in-memory store waited"),
    }
}
