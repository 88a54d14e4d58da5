//! The layer: a cheap, cloneable configuration that wraps services in [`RateLimit`].

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};

#[cfg(feature = "wait")]
use floodwall_core::ConfigError;
use floodwall_core::resilience::{Breaker, FailMode, Fallback};
use floodwall_core::{Policy, Store};
use http::request::Parts;
use tower_layer::Layer;

use crate::choose::ChoosePolicy;
use crate::config::Config;
use crate::extract::{ExtractKey, PeerIp};
#[cfg(feature = "live")]
use crate::live::LiveLimits;
use crate::live::{Cell, LiveError, LiveState, Shared};
use crate::mode::{RejectWithError, RejectWithResponse};
#[cfg(feature = "wait")]
use crate::options::Wait;
use crate::options::{Modes, Refusals};
use crate::service::RateLimit;
#[cfg(feature = "charge")]
use crate::settle::{Rule, Settle};

/// Rate-limits the services it wraps: `.layer(RateLimitLayer::new(store, policy))`.
///
/// Defaults, each changed by one builder method:
///
/// | what | default | change with |
/// |---|---|---|
/// | key | peer IP, IPv6 by /64 ([`PeerIp`]) | [`key`](Self::key) |
/// | policies | the one given to `new` | [`and_policy`](Self::and_policy); per request, [`choose`](Self::choose) |
/// | cost | 1 per request | [`cost`](Self::cost) |
/// | cost settled by the response | off | [`charge_by`] |
/// | refusals: denials, store failures, missing keys, headers | 429, 503, the key's status, IETF headers | [`refusals`](Self::refusals) ([`Refusals`]) |
/// | store failure | fail closed, no breaker | [`fail_mode`](Self::fail_mode) |
/// | waiting for the next slot | off: refused at once | [`wait`] ([`Wait`]) |
/// | modes: shadow, per policy, policies known by name | every policy enforced | [`modes`](Self::modes) ([`Modes`]) |
/// | changes while serving | through the handle | [`live`] ([`LiveLimits`]) |
/// | refusals are | responses | [`reject_with_error`](Self::reject_with_error) |
///
/// Per route, with axum: a layer per route with `route_layer`
/// ([front page](crate#axum-layer-or-route_layer)). Cloning the layer costs reference
/// counts; its services share one `Arc` of the configuration.
///
#[cfg_attr(feature = "charge", doc = "[`charge_by`]: Self::charge_by")]
#[cfg_attr(not(feature = "charge"), doc = "[`charge_by`]: crate#features")]
#[cfg_attr(feature = "live", doc = "[`live`]: Self::live")]
#[cfg_attr(not(feature = "live"), doc = "[`live`]: crate#features")]
#[cfg_attr(feature = "live", doc = "[`LiveLimits`]: crate::LiveLimits")]
#[cfg_attr(not(feature = "live"), doc = "[`LiveLimits`]: crate#features")]
#[cfg_attr(feature = "wait", doc = "[`wait`]: Self::wait")]
#[cfg_attr(not(feature = "wait"), doc = "[`wait`]: crate#features")]
#[cfg_attr(feature = "wait", doc = "[`Wait`]: crate::Wait")]
#[cfg_attr(not(feature = "wait"), doc = "[`Wait`]: crate#features")]
pub struct RateLimitLayer<St, K = PeerIp, M = RejectWithResponse> {
    /// Everything but the policies and modes.
    config: Config<St, K>,
    /// The policies and modes, shared with the [`LiveLimits`] handles.
    live: Arc<Shared>,
    /// What the services read, made at the first `layer` call; a builder method starts a
    /// new one.
    cell: Arc<OnceLock<Arc<Cell<St, K>>>>,
    _mode: PhantomData<fn() -> M>,
}

impl<St, K, M> RateLimitLayer<St, K, M> {
    /// A layer of this configuration with these policies and modes.
    fn with_config<St2, K2, M2>(
        config: Config<St2, K2>,
        live: Arc<Shared>,
    ) -> RateLimitLayer<St2, K2, M2> {
        RateLimitLayer {
            config,
            live,
            cell: Arc::default(),
            _mode: PhantomData,
        }
    }

    /// This layer with its policies or modes changed, in a [`Shared`] of its own.
    fn map_live(mut self, f: impl FnOnce(&mut LiveState)) -> Self {
        self.live = self.live.fork(f);
        self.cell = Arc::default();
        self
    }
}

impl<St: Store + Clone> RateLimitLayer<St> {
    /// Limits each client (by peer IP) to `policy`, with state in `store`: a handle each
    /// service clones (a store of your own that is not `Clone` goes in an `Arc`).
    pub fn new(store: St, policy: Policy) -> Self {
        let live = Shared::new(LiveState {
            own: vec![policy.clone()],
            ..LiveState::default()
        });
        Self::with_config(Config::new(store, PeerIp::new(), policy), live)
    }
}

impl<S, St: Store + Clone> RateLimit<S, St> {
    /// A layer wrapping services in `RateLimit`: [`RateLimitLayer::new`].
    pub fn layer(store: St, policy: Policy) -> RateLimitLayer<St> {
        RateLimitLayer::new(store, policy)
    }
}

impl<St: Store, K, M> RateLimitLayer<St, K, M> {
    /// What to do while the store fails ([`FailMode`]), behind a circuit breaker: the
    /// store becomes `Fallback<Breaker<St>>` with their defaults (see
    /// [`floodwall_core::guide::failures`]). Without it, failures are refused (fail
    /// closed) with no breaker. For other settings, wrap the store yourself.
    ///
    /// ```
    /// use floodwall_core::resilience::FailMode;
    /// # use floodwall_core::{MemoryStore, Policy};
    /// # use floodwall_tower::RateLimitLayer;
    /// # let redis = MemoryStore::new();
    /// let layer = RateLimitLayer::new(redis, Policy::gcra("per-ip", "30/s".parse()?)?)
    ///     .fail_mode(FailMode::local(3));
    /// # let _ = layer;
    /// # Ok::<(), floodwall_core::ConfigError>(())
    /// ```
    pub fn fail_mode(self, mode: FailMode) -> RateLimitLayer<Fallback<Breaker<St>>, K, M> {
        let store = |store| Fallback::new(Breaker::new(store), mode);
        Self::with_config(self.config.rebuild(store, |key| key), self.live)
    }
}

/// Waiting for the next slot instead of refusing (feature `wait`).
#[cfg(feature = "wait")]
impl<St, K, M> RateLimitLayer<St, K, M> {
    /// Waits for the next slot instead of refusing, as `wait` says
    /// ([guide](crate::guide::waiting)). A window or log policy among the layer's cannot
    /// book a slot: [`ConfigError::WaitUnsupported`]. Policies added later, or chosen per
    /// request, wait when their algorithm can book.
    pub fn wait(self, wait: Wait) -> Result<Self, ConfigError> {
        for policy in &self.live.state().own {
            policy.reservable()?;
        }
        Ok(self.map(|s| s.waiting = wait.waiting()))
    }
}

impl<St, K, M> RateLimitLayer<St, K, M> {
    fn map(mut self, f: impl FnOnce(&mut Config<St, K>)) -> Self {
        f(&mut self.config);
        // Anything built from the old configuration is stale.
        self.config.ietf_consts = Default::default();
        self.cell = Arc::default();
        self
    }

    /// Limits by another key: `.key(ClientIp::new(trusted))`, `.key(HeaderKey::bearer())`,
    /// or any `|req: &Parts| -> Option<impl AsRef<[u8]>>`. See [`extract`](crate::extract).
    pub fn key<K2: ExtractKey>(self, key: K2) -> RateLimitLayer<St, K2, M> {
        Self::with_config(self.config.rebuild(|s| s, |_| Arc::new(key)), self.live)
    }

    /// Adds a policy every request must also pass: `.and_policy(per_day)` next to a
    /// per-second policy. All or nothing: a request is counted in every policy or in none
    /// ([`floodwall_core::guide::all_or_nothing`]).
    pub fn and_policy(self, policy: Policy) -> Self {
        self.map_live(|state| state.own.push(policy))
    }

    /// Chooses the policies per request by what depends on the request itself (method,
    /// tier, key): see [`choose`](crate::choose). Routes, with axum, get a layer each
    /// instead ([front page](crate#axum-layer-or-route_layer)).
    pub fn choose(self, chooser: impl ChoosePolicy) -> Self {
        self.map(|s| s.chooser = Some(Arc::new(chooser)))
    }

    /// How much each request costs (1 by default): e.g. its declared body size, or more for
    /// expensive endpoints. A cost above a policy's limit can never pass and is refused
    /// without `Retry-After`; a cost of 0 checks without spending.
    ///
    /// ```
    /// # use floodwall_core::{MemoryStore, Policy};
    /// # use floodwall_tower::RateLimitLayer;
    /// # let layer = RateLimitLayer::new(MemoryStore::new(), Policy::gcra("p", "100/s".parse()?)?);
    /// let layer = layer.cost(|req: &http::request::Parts| if req.method == http::Method::POST { 10 } else { 1 });
    /// # Ok::<(), floodwall_core::ConfigError>(())
    /// ```
    pub fn cost(self, cost: impl Fn(&Parts) -> u64 + Send + Sync + 'static) -> Self {
        self.map(|s| s.cost = Some(Arc::new(cost)))
    }

    #[cfg(feature = "charge")]
    /// Settles each admitted request's cost from its response (feature `charge`): the rule
    /// reads (and may change) the response's head and says what the request cost
    /// ([`Settle`](crate::Settle)); the difference from what its check charged is charged
    /// or refunded ([`floodwall_core::guide::charging`]).
    ///
    /// ```
    /// # use floodwall_core::{MemoryStore, Policy};
    /// use floodwall_tower::{RateLimitLayer, Settle};
    /// use http::StatusCode;
    ///
    /// // 5 failed logins per 10 minutes; a success gives its unit back.
    /// let layer = RateLimitLayer::new(MemoryStore::new(), Policy::sliding_log("login", "5/10min".parse()?)?)
    ///     .charge_by(|res: &mut http::response::Parts| match res.status {
    ///         StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => Settle::Keep,
    ///         _ => Settle::Refund,
    ///     });
    /// # let _ = layer;
    /// # Ok::<(), floodwall_core::ConfigError>(())
    /// ```
    pub fn charge_by(
        self,
        rule: impl Fn(&mut http::response::Parts) -> Settle + Send + Sync + 'static,
    ) -> Self {
        self.map(|s| s.settle = Rule(Some(Arc::new(rule))))
    }

    /// How refusals are answered and which headers are sent: see [`Refusals`].
    pub fn refusals(self, refusals: Refusals) -> Self {
        self.map(|s| s.refusals = refusals)
    }

    /// The modes of the layer's policies and the policies it knows by name only, added to
    /// what it had: see [`Modes`]. A mode for an unknown name is an error.
    ///
    /// ```
    /// use floodwall_core::{MemoryStore, Policy};
    /// use floodwall_tower::{Enforcement, Modes, RateLimitLayer};
    ///
    /// // Try the limit on real traffic: decide, log, add headers, never refuse.
    /// let layer = RateLimitLayer::new(MemoryStore::new(), Policy::gcra("per-ip", "10/s".parse()?)?)
    ///     .modes(Modes::new().all(Enforcement::Shadow))?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn modes(self, modes: Modes) -> Result<Self, LiveError> {
        let mut state = LiveState::clone(&self.live.state());
        state.apply(modes)?;
        Ok(self.map_live(|s| *s = state))
    }

    /// Reports refusals as errors instead of responses; see
    /// [`RejectWithError`](crate::RejectWithError).
    ///
    /// ```
    /// # use floodwall_core::{MemoryStore, Policy};
    /// use floodwall_tower::{RateLimitLayer, RateLimited};
    ///
    /// let layer = RateLimitLayer::new(MemoryStore::new(), Policy::gcra("p", "1/s".parse()?)?)
    ///     .reject_with_error();
    /// // ... and further out: `if err.is::<RateLimited>() { /* 429 */ }`
    /// # let _ = layer;
    /// # Ok::<(), floodwall_core::ConfigError>(())
    /// ```
    pub fn reject_with_error(self) -> RateLimitLayer<St, K, RejectWithError> {
        RateLimitLayer {
            config: self.config,
            live: self.live,
            cell: self.cell,
            _mode: PhantomData,
        }
    }
}

impl<St, K, M> RateLimitLayer<St, K, M>
where
    St: Clone + Send + Sync + 'static,
    K: Send + Sync + 'static,
{
    /// What the services read: made at the first call, then shared with the clones.
    fn cell(&self) -> Arc<Cell<St, K>> {
        let cell = self
            .cell
            .get_or_init(|| self.live.cell(self.config.clone()));
        Arc::clone(cell)
    }
}

#[cfg(feature = "live")]
impl<St, K, M> RateLimitLayer<St, K, M> {
    /// The handle that changes this layer's policies and modes while it serves
    /// ([`LiveLimits`]). Take it after [`and_policy`](Self::and_policy) and
    /// [`modes`](Self::modes), which start a handle of their own.
    pub fn live(&self) -> LiveLimits {
        LiveLimits::new(Arc::clone(&self.live))
    }
}

impl<S, St, K, M> Layer<S> for RateLimitLayer<St, K, M>
where
    St: Clone + Send + Sync + 'static,
    K: Send + Sync + 'static,
{
    type Service = RateLimit<S, St, K, M>;

    fn layer(&self, inner: S) -> Self::Service {
        RateLimit::from_shared(inner, self.cell())
    }
}

impl<St: Clone, K, M> Clone for RateLimitLayer<St, K, M> {
    fn clone(&self) -> Self {
        Self {
            config: self.config.clone(),
            live: Arc::clone(&self.live),
            cell: Arc::clone(&self.cell),
            _mode: PhantomData,
        }
    }
}

impl<St, K, M> fmt::Debug for RateLimitLayer<St, K, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let state = self.live.state();
        f.debug_struct("RateLimitLayer")
            .field("policies", &state.own)
            .field("registered", &state.registered)
            .field("headers", &self.config.refusals.headers)
            .finish_non_exhaustive()
    }
}
