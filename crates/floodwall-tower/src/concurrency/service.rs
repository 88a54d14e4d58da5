//! The in-flight limiting service.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;
use std::task::{Context, Poll};

use floodwall_core::store::{Op, Reply};
use floodwall_core::{BoxError, MemoryStore, Store, StoreExt};
use http::{Request, Response};
use tower_service::Service;

use super::config::{Granted, InFlightConfig, Outcome};
use super::{ConcurrencyLimitFuture, PermitBody};
use crate::body::RejectionBody;
use crate::extract::{ExtractKey, PeerIp};
use crate::mode::RefusalMode;
use crate::{Key, RejectWithError, RejectWithResponse};

/// Limits the requests in flight to an inner service, per key; built by
/// [`ConcurrencyLimitLayer`](crate::ConcurrencyLimitLayer). A full key is refused at once,
/// never queued; `poll_ready` is the inner service's. Cloning is cheap.
pub struct ConcurrencyLimitService<S, St = MemoryStore, K = PeerIp, M = RejectWithResponse> {
    inner: S,
    config: Arc<InFlightConfig<St, K>>,
    _mode: PhantomData<fn() -> M>,
}

impl<S, St, K, M: RefusalMode> ConcurrencyLimitService<S, St, K, M> {
    fn start<B>(&mut self, req: Request<B>) -> ConcurrencyLimitFuture<S, B, M>
    where
        S: Service<Request<B>> + Clone,
        St: Store + 'static,
        K: ExtractKey,
    {
        let config = &*self.config;
        let mut key = Key::new();
        // The whole request when the extractor reads it there, else its head.
        let (req, found) = match config.key.extract_request(&req, &mut key) {
            Some(found) => (req, found),
            None => {
                let (parts, body) = req.into_parts();
                let found = config.key.extract(&parts, &mut key);
                (Request::from_parts(parts, body), found)
            }
        };
        if let Err(error) = found {
            return match config.refusals.missing::<M>(config.shadow, error) {
                Some(refusal) => ConcurrencyLimitFuture::refused(refusal),
                None => ConcurrencyLimitFuture::calling(self.inner.call(req), Granted::default()),
            };
        }
        if let Some(result) = config
            .store
            .call_now(Op::Acquire {
                key: key.as_bytes(),
                limit: &config.limit,
            })
            .map(|r| r.and_then(Reply::into_acquired))
        {
            return match config.settle::<M>(result) {
                Outcome::Admit(granted) => {
                    ConcurrencyLimitFuture::calling(self.inner.call(req), granted)
                }
                Outcome::Refuse(refusal) => ConcurrencyLimitFuture::refused(refusal),
            };
        }
        let config = Arc::clone(&self.config);
        let acquire = Box::pin(async move {
            let result = config.store.acquire(key.as_bytes(), &config.limit).await;
            config.settle::<M>(result)
        });
        // Take the ready service for this request and leave a clone to be made ready for
        // the next one.
        let clone = self.inner.clone();
        let inner = std::mem::replace(&mut self.inner, clone);
        ConcurrencyLimitFuture::acquiring(acquire, inner, req)
    }
}

crate::mode::service_impls!(
    ConcurrencyLimitService {
        config: InFlightConfig
    },
    ConcurrencyLimitFuture,
    PermitBody<ResB>
);

impl<S: fmt::Debug, St, K, M> fmt::Debug for ConcurrencyLimitService<S, St, K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ConcurrencyLimitService")
            .field("inner", &self.inner)
            .field("limit", &self.config.limit)
            .finish_non_exhaustive()
    }
}
