//! In-flight limits in Redis: acquiring a slot of a [`RedisStore`] ([`StoreExt::acquire`](floodwall_core::StoreExt::acquire)) takes a lease per slot.
//!
//! Each key's slots are a sorted set of lease ids (unique across processes: `id.rs`),
//! scored by their expiry on the server's clock; `lua/lease_acquire.lua` takes one, a
//! `ZREM` gives it back, the store's renewer (`crate::renew`) pushes it back. Why leases,
//! and their timing: [`crate::guide::in_flight`].

use std::sync::{Arc, LazyLock};

use floodwall_core::{Acquired, ConcurrencyLimit, Error, Full, Permit};
use redis::Script;
use tokio::runtime::Handle;

use crate::RedisStore;
use crate::error::UnexpectedReply;
use crate::key;
use crate::op::Op;
use crate::renew::micros;
use crate::store::Inner;

mod id;

/// Takes a lease (see the module docs).
static ACQUIRE: LazyLock<Script> =
    LazyLock::new(|| Script::new(include_str!("../lua/lease_acquire.lua")));

impl RedisStore {
    /// The Redis key (a sorted set of leases) counting `key`'s requests in flight under
    /// `limit`: `<prefix><name>:lease:{<user key>}`, e.g. to inspect it with `redis-cli`.
    pub fn lease_key(&self, key: &[u8], limit: &ConcurrencyLimit) -> Vec<u8> {
        key::lease_key(&self.inner.prefix, limit.name(), key)
    }

    /// Leases this store (and its clones) holds now and renews: one per permit not yet
    /// dropped.
    pub fn leases_held(&self) -> usize {
        self.inner.leases.len()
    }
}

/// Takes a lease per slot on the server's clock: one `EVALSHA` to acquire, one `ZREM` to
/// release, a renewal per interval for a request running longer than
/// [`renew_every`](ConcurrencyLimit::renew_every); a dying process's leases expire by
/// themselves. Needs a tokio runtime (to release and renew in the background); without one,
/// acquiring fails with [`Error::Backend`]. Costs and failures: [`crate::guide::in_flight`].
impl RedisStore {
    pub(crate) async fn lease(
        &self,
        key: &[u8],
        limit: &ConcurrencyLimit,
    ) -> Result<Acquired, Error> {
        let Ok(runtime) = Handle::try_current() else {
            return Err(Error::backend(
                "floodwall-redis releases and renews leases on a tokio runtime: none is running",
            ));
        };
        let inner = &self.inner;
        let redis_key: Arc<[u8]> = self.lease_key(key, limit).into();
        let id: Arc<str> = id::next().into();
        let mut inv = ACQUIRE.prepare_invoke();
        inv.key(&*redis_key)
            .arg(&*id)
            .arg(limit.max())
            .arg(micros(limit.lease()));
        let in_flight = match inner.bounded::<i64>(Op::Script(&inv)).await {
            Ok(n) if n >= 1 => n as u64,
            Ok(n) if n < 0 => {
                return Ok(Acquired::Full(Full::new((-1 - n) as u64, limit.max())));
            }
            Ok(n) => {
                return Err(Error::backend(UnexpectedReply(format!(
                    "{n} from the lease script"
                ))));
            }
            Err(e) => {
                if e.is_timeout() || e.is_unavailable() {
                    // It may have been applied: give the slot back rather than hold it for
                    // a lease time.
                    release(inner, &runtime, redis_key, id);
                }
                return Err(explain(e, limit));
            }
        };
        let (held_key, held_id) = (Arc::clone(&redis_key), Arc::clone(&id));
        let seq = inner.leases.hold(inner, &runtime, held_key, held_id, limit);
        let inner = Arc::clone(inner);
        Ok(Acquired::Granted(Permit::new(
            in_flight,
            limit.max(),
            move || {
                inner.leases.forget(seq);
                release(&inner, &runtime, redis_key, id);
            },
        )))
    }
}

/// Sends the lease's `ZREM` from `runtime`, in the background: a permit's drop cannot
/// wait. A release that fails leaves the lease to expire.
fn release(inner: &Arc<Inner>, runtime: &Handle, key: Arc<[u8]>, id: Arc<str>) {
    let inner = Arc::clone(inner);
    runtime.spawn(async move {
        let mut zrem = redis::cmd("ZREM");
        zrem.arg(&*key).arg(&*id);
        if let Err(error) = inner.bounded::<i64>(Op::Cmd(&zrem)).await {
            tracing::debug!(
                target: "floodwall",
                %error,
                "an in-flight lease could not be released; it expires by itself"
            );
        }
    });
}

/// A `WRONGTYPE` from the lease script, told as what it means; any other error as it is.
fn explain(e: Error, limit: &ConcurrencyLimit) -> Error {
    if let Error::Backend { source } = &e
        && source
            .downcast_ref::<redis::RedisError>()
            .is_some_and(|r| r.code() == Some("WRONGTYPE"))
    {
        return Error::backend(WrongType(limit.name().to_owned()));
    }
    e
}

/// A lease key that holds something other than a sorted set.
#[derive(Debug)]
struct WrongType(String);

impl std::fmt::Display for WrongType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "WRONGTYPE: a lease key of the in-flight limit {:?} holds a value of another type, \
             written by something else; floodwall keeps a sorted set of leases there: delete \
             the key or give the store another prefix",
            self.0
        )
    }
}

impl std::error::Error for WrongType {}
