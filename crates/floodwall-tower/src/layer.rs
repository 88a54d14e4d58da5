//! The layer: a cheap, cloneable configuration that wraps services in [`RateLimit`].

use std::fmt;
use std::marker::PhantomData;
use std::sync::{Arc, OnceLock};
#[cfg(feature = "wait")]
use std::time::Duration;

use floodwall_core::resilience::{Breaker, FailMode, Fallback};
#[cfg(feature = "wait")]
use floodwall_core::{ConfigError, Reservable};
use floodwall_core::{Policy, Store};
use http::request::Parts;
use tower_layer::Layer;

use crate::choose::ChoosePolicy;
use crate::config::Config;
use crate::enforcement::Enforcement;
use crate::extract::{ExtractKey, OnMissingKey, PeerIp};
use crate::headers::HeaderStyle;
#[cfg(feature = "live")]
use crate::live::LiveLimits;
use crate::live::{Cell, LiveError, LiveState, Shared};
use crate::mode::{RejectWithError, RejectWithResponse};
use crate::respond::{OnReject, OnStoreFailure};
use crate::service::RateLimit;
#[cfg(feature = "charge")]
use crate::settle::{Rule, Settle};
#[cfg(feature = "wait")]
use crate::wait::{self, Waiters};

/// Rate-limits the services it wraps: `.layer(RateLimitLayer::new(store, policy))`.
///
/// Defaults, each changed by one builder method:
///
/// | what | default | change with |
/// |---|---|---|
/// | key | peer IP, IPv6 by /64 ([`PeerIp`]) | [`key`](Self::key) |
/// | policies | the one given to `new` | [`and_policy`](Self::and_policy), [`choose`](Self::choose) |
/// | cost | 1 per request | [`cost`](Self::cost) |
/// | cost settled by the response | off | [`charge_by`] |
/// | denial | 429 + `Retry-After` ([`TooManyRequests`](crate::respond::TooManyRequests)) | [`on_reject`](Self::on_reject) |
/// | store failure | 503 + `Retry-After` ([`ServiceUnavailable`](crate::respond::ServiceUnavailable)), fail closed | [`fail_mode`](Self::fail_mode), [`on_store_failure`](Self::on_store_failure), [`fail_open`](Self::fail_open) |
/// | no key | refuse with the extractor's status ([`OnMissingKey::Reject`]: 400 for a missing header), built by the denial responder ([`Denial::missing_key`](crate::respond::Denial::missing_key)) | [`on_missing_key`](Self::on_missing_key) |
/// | headers | IETF `RateLimit` / `RateLimit-Policy` ([`HeaderStyle::Ietf`]) | [`headers`](Self::headers) |
/// | enforcement | every policy enforced | [`shadow`](Self::shadow), [`enforcement`](Self::enforcement) per policy |
/// | changes while serving | through the handle | [`live`] ([`LiveLimits`]), [`register`](Self::register) |
/// | refusals are | responses | [`reject_with_error`](Self::reject_with_error) |
/// | waiting for the next slot | off: refused at once | [`wait_up_to`], [`max_waiting`], [`wait_jitter`] |
///
/// Cloning the layer clones the store handle and the configuration (reference counts);
/// each service it builds shares one `Arc` of it.
///
/// Waiting, charging and live changes are features (`wait`, `charge`, `live`): see the
/// [crate's features](crate#features).
///
#[cfg_attr(feature = "charge", doc = "[`charge_by`]: Self::charge_by")]
#[cfg_attr(not(feature = "charge"), doc = "[`charge_by`]: crate#features")]
#[cfg_attr(feature = "live", doc = "[`live`]: Self::live")]
#[cfg_attr(not(feature = "live"), doc = "[`live`]: crate#features")]
#[cfg_attr(feature = "live", doc = "[`LiveLimits`]: crate::LiveLimits")]
#[cfg_attr(not(feature = "live"), doc = "[`LiveLimits`]: crate#features")]
#[cfg_attr(feature = "wait", doc = "[`wait_up_to`]: Self::wait_up_to")]
#[cfg_attr(not(feature = "wait"), doc = "[`wait_up_to`]: crate#features")]
#[cfg_attr(feature = "wait", doc = "[`max_waiting`]: Self::max_waiting")]
#[cfg_attr(not(feature = "wait"), doc = "[`max_waiting`]: crate#features")]
#[cfg_attr(feature = "wait", doc = "[`wait_jitter`]: Self::wait_jitter")]
#[cfg_attr(not(feature = "wait"), doc = "[`wait_jitter`]: crate#features")]
pub struct RateLimitLayer<St, K = PeerIp, M = RejectWithResponse> {
    /// Everything but the policies and modes (its `policies` and `shadow` are unused).
    config: Config<St, K>,
    /// The policies and modes, shared with the [`LiveLimits`] handles: the builder
    /// methods that set them start a new one, the others keep it.
    live: Arc<Shared>,
    /// What the services read, made at the first `layer` (or `live`) call; clones share
    /// it, any builder method starts a new one.
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

    /// This layer with its policies or modes changed: a new [`Shared`], so that a layer
    /// built from the same base keeps its own.
    fn map_live(mut self, f: impl FnOnce(&mut LiveState)) -> Self {
        self.live = self.live.fork(f);
        self.cell = Arc::default();
        self
    }
}

impl<St: Store + Clone> RateLimitLayer<St> {
    /// Limits each client (by peer IP) to `policy`, with state in `store`.
    ///
    /// A store is a handle that every service the layer builds clones (the memory store
    /// and the Redis store are an `Arc` inside); a store of your own that is not `Clone`
    /// goes in an `Arc`: `RateLimitLayer::new(Arc::new(my_store), policy)`. Key
    /// extractors, choosers and responders need no `Clone`: the layer holds each once.
    ///
    /// ```
    /// use floodwall_core::{MemoryStore, Policy};
    /// use floodwall_tower::RateLimitLayer;
    ///
    /// let layer = RateLimitLayer::new(MemoryStore::new(), Policy::gcra("per-ip", "10/s burst 20".parse()?)?);
    /// # let _ = layer;
    /// # Ok::<(), floodwall_core::ConfigError>(())
    /// ```
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
    /// What to do while the store fails, with a circuit breaker so a dead store costs a
    /// fast failure instead of a timeout per request: wraps the store in
    /// `Fallback<Breaker<St>>` with their defaults (opens after 5 consecutive failures,
    /// probes every 500 ms, at most 1024 calls in flight; see
    /// [`floodwall_core::resilience`]).
    ///
    /// - [`FailMode::local(nodes)`](FailMode::local): decide in this process with
    ///   `1 / nodes` of each quota (`RateLimit` then counts down the local share, while
    ///   `RateLimit-Policy` still names the fleet's quota);
    /// - [`FailMode::Open`]: let requests through, with the policy's headers;
    /// - [`FailMode::Closed`]: answer with the [store-failure
    ///   responder](Self::on_store_failure) (503 + `Retry-After` by default).
    ///
    /// For other settings, or to read the breaker's and the fallback's counters, wrap the
    /// store yourself and keep a clone:
    /// `RateLimitLayer::new(Fallback::local(Breaker::builder().probe_interval(..).build(redis), 3), policy)`.
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
        let config = self
            .config
            .with_store(|store| Fallback::new(Breaker::new(store), mode));
        Self::with_config(config, self.live)
    }
}

/// Waiting for the next slot instead of refusing (feature `wait`).
#[cfg(feature = "wait")]
impl<St, K, M> RateLimitLayer<St, K, M> {
    /// How many requests may wait for their slot at once, over all keys, unless
    /// [`max_waiting`](Self::max_waiting) says otherwise. A waiting request holds its
    /// connection and a future of a few hundred bytes: a thousand of them cost well under
    /// a megabyte.
    pub const DEFAULT_MAX_WAITING: usize = wait::DEFAULT_MAX_WAITING;

    /// How many requests of one key may wait at once unless
    /// [`max_waiting`](Self::max_waiting) says otherwise: enough to smooth a client's
    /// burst, few enough that one client cannot take every place.
    pub const DEFAULT_MAX_WAITING_PER_KEY: usize = wait::DEFAULT_MAX_WAITING_PER_KEY;

    /// Waits for the next slot instead of refusing, up to `max_wait`: a request refused
    /// with a `retry_after` of at most `max_wait` books the next slot in the store, waits
    /// for it on tokio's timer (no polling), then goes to the inner service; one whose
    /// slot is further away is refused at once, as without waiting. This smooths bursts
    /// into the policy's pace (nginx's `limit_req` delay), at the price of holding the
    /// request meanwhile.
    ///
    /// - Only GCRA, the token bucket and the leaky bucket can book a future slot: a window
    ///   or log policy among the layer's is refused here
    ///   ([`ConfigError::WaitUnsupported`]). Policies added later with
    ///   [`and_policy`](Self::and_policy), or chosen per request, wait when their
    ///   algorithm can book and are refused as usual otherwise.
    /// - Waiting is bounded: at most [`DEFAULT_MAX_WAITING`](Self::DEFAULT_MAX_WAITING)
    ///   requests in all and [`DEFAULT_MAX_WAITING_PER_KEY`](Self::DEFAULT_MAX_WAITING_PER_KEY)
    ///   per key ([`max_waiting`](Self::max_waiting)); past either a request is refused at
    ///   once, with the usual refusal.
    /// - A waiting request whose future is dropped (its client went away) cancels its
    ///   booking: the slot goes to the next request where the algorithm allows it
    ///   ([`Cancelled`](floodwall_core::Cancelled)).
    /// - With several policies, a request books a slot in each of them (a refusal
    ///   counted in none, [`and_policy`](Self::and_policy)) and waits for the latest; a
    ///   policy that cannot book then refuses it, cancelling the others' slots. A slot
    ///   booked where another policy then makes the request wait longer is used late, so
    ///   that policy's pace holds over spans longer than that delay rather than between
    ///   each two requests.
    /// - `max_wait` is cut to [`Reservable::MAX_WAIT`](floodwall_core::Reservable::MAX_WAIT)
    ///   (an hour). Waiting needs a tokio runtime with its timer (axum, tonic and hyper
    ///   servers run on one), and a store that books slots ([`StoreExt::reserve`](floodwall_core::StoreExt::reserve): the memory and
    ///   Redis stores, and every combinator of floodwall-core); with one that cannot, a
    ///   request is refused as without waiting.
    ///
    /// ```
    /// use floodwall_core::{MemoryStore, Policy};
    /// use floodwall_tower::RateLimitLayer;
    /// use std::time::Duration;
    ///
    /// // Bursts of up to 5 go through at once; the rest leave 100 ms apart, or are refused
    /// // when their turn is more than a second away.
    /// let layer = RateLimitLayer::new(MemoryStore::new(), Policy::gcra("smooth", "10/s burst 5".parse()?)?)
    ///     .wait_up_to(Duration::from_secs(1))?;
    /// # let _ = layer;
    /// # Ok::<(), floodwall_core::ConfigError>(())
    /// ```
    pub fn wait_up_to(self, max_wait: Duration) -> Result<Self, ConfigError> {
        for policy in &self.live.state().own {
            policy.reservable()?;
        }
        Ok(self.map(|s| s.waiting.max_wait = Some(max_wait.min(Reservable::MAX_WAIT))))
    }

    /// Bounds the requests waiting for their slot (see [`wait_up_to`](Self::wait_up_to)):
    /// at most `in_all` at once, and `per_key` of one key. Past either, a request is
    /// refused at once. Defaults: [`DEFAULT_MAX_WAITING`](Self::DEFAULT_MAX_WAITING) and
    /// [`DEFAULT_MAX_WAITING_PER_KEY`](Self::DEFAULT_MAX_WAITING_PER_KEY).
    pub fn max_waiting(self, in_all: usize, per_key: usize) -> Self {
        self.map(|s| s.waiting.waiters = Arc::new(Waiters::new(in_all, per_key)))
    }

    /// Adds a random delay of up to `jitter` (uniform) to every wait, so that requests
    /// booked at one instant (a token bucket's tick) do not all wake at once. Only ever
    /// later than the slot, never earlier; the pace then holds over spans longer than
    /// `jitter` rather than between each two requests. Off (zero) by default; cut to
    /// [`Reservable::MAX_WAIT`](floodwall_core::Reservable::MAX_WAIT).
    pub fn wait_jitter(self, jitter: Duration) -> Self {
        self.map(|s| s.waiting.jitter = jitter.min(Reservable::MAX_WAIT))
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
        Self::with_config(self.config.with_key(key), self.live)
    }

    /// Adds a policy every request must also pass: `.and_policy(per_day)` next to a
    /// per-second policy.
    ///
    /// **All or nothing.** A request is admitted only if every policy admits it, and is
    /// then counted in all; if any refuses, none counts it, so a client refused by its
    /// daily quota does not spend its per-second one. The store decides all the policies
    /// at once ([`StoreExt::check_all`](floodwall_core::StoreExt::check_all)): atomically in memory, in one script call in Redis
    /// (one slot on a cluster). The refusal names the policies that refused, and the
    /// headers list every policy. A store without `check_all` (a store of your own that
    /// does not implement it) is asked policy by policy instead, every policy counting
    /// the request it admitted. The same holds for a chooser's
    /// [`Choice::Policies`](crate::choose::Choice).
    pub fn and_policy(self, policy: Policy) -> Self {
        self.map_live(|state| state.own.push(policy))
    }

    /// Chooses the policies per request: per route, per method, per tier, per key. A
    /// `|req: &Parts, key: &[u8]| -> Choice` closure or a
    /// [`PolicyMap`](crate::choose::PolicyMap); [`Choice::Default`](crate::choose::Choice)
    /// falls back to the layer's own policies, [`Choice::Skip`](crate::choose::Choice)
    /// exempts the request.
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
    /// Settles each admitted request's cost from its response (feature `charge`): the rule reads the
    /// response's head (and may change it: remove a cost header the handler set) and says
    /// what the request cost ([`Settle`](crate::Settle)); the difference from what its
    /// check charged is charged, even past the limit, or refunded. Count only failed
    /// logins (refund the rest), refund what the handler refused, charge the tokens an
    /// LLM answer used. The store must support [`StoreExt::adjust`](floodwall_core::StoreExt::adjust) (memory and Redis do).
    /// With [`cost`](Self::cost) answering 0, the check is a peek (a client past the
    /// limit is still refused) and the rule's cost is charged whole; charging before is
    /// stricter under concurrency. The [charging guide](floodwall_core::guide::charging)
    /// says why, when the change lands and what each algorithm does.
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

    /// Builds denials with this responder: [`Json`](crate::respond::Json),
    /// [`ProblemJson`](crate::respond::ProblemJson), [`Grpc`](crate::respond::Grpc) for
    /// tonic, or a `|denial: &Denial| -> Response<_>` closure. With the `axum` feature, a
    /// closure answering axum's `impl IntoResponse` goes in `respond::Axum(..)`; a named
    /// `fn` for it returns `axum::response::Response` (`.into_response()`), since a
    /// returned `impl IntoResponse` would borrow the denial. A request without a key comes
    /// here too: a responder of your own answers
    /// [`Denial::missing_key`](crate::respond::Denial::missing_key) with its status first.
    pub fn on_reject(self, responder: impl OnReject) -> Self {
        self.map(|s| s.on_reject = Arc::new(responder))
    }

    /// Builds store-failure responses with this responder (default: 503 with
    /// `Retry-After`; [`GrpcUnavailable`](crate::respond::GrpcUnavailable) for tonic; with
    /// the `axum` feature, `respond::Axum(|error: &Error| ..)` for axum's responses).
    pub fn on_store_failure(self, responder: impl OnStoreFailure) -> Self {
        self.map(|s| s.on_failure = Arc::new(responder))
    }

    /// Lets requests through unlimited when the store cannot decide, instead of refusing
    /// them: availability over protection. Each outage is logged once, a warning when it
    /// starts, not per request. See [`fail_mode`](Self::fail_mode) for a breaker (a dead
    /// store then costs a fast failure instead of a timeout per request) and a local
    /// fallback.
    pub fn fail_open(self) -> Self {
        self.map(|s| s.fail_open = true)
    }

    /// What to do when the key extractor finds no key: see [`OnMissingKey`].
    pub fn on_missing_key(self, on_missing: OnMissingKey) -> Self {
        self.map(|s| s.on_missing = on_missing)
    }

    /// Which rate-limit headers to send: see [`HeaderStyle`].
    pub fn headers(self, style: HeaderStyle) -> Self {
        self.map(|s| s.headers = style)
    }

    /// Shadow mode: decide, log what would have been refused (at `info`, target
    /// `floodwall`), add the headers, but never refuse, not even on a store failure or a
    /// missing key. For trying a limit on real traffic before enforcing it.
    ///
    /// This is every policy in [`Enforcement::Shadow`], a chooser's too, except those
    /// given a mode of their own with [`enforcement`](Self::enforcement) (or changed live
    /// with [`LiveLimits::set_enforcement`]).
    ///
    #[cfg_attr(
        not(feature = "live"),
        doc = "[`LiveLimits::set_enforcement`]: crate#features"
    )]
    pub fn shadow(self, shadow: bool) -> Self {
        self.map_live(|state| {
            state.fallback = if shadow {
                Enforcement::Shadow
            } else {
                Enforcement::Enforce
            }
        })
    }

    /// Makes a policy known by name without checking it on every request: a chooser picks
    /// it (`live.policy("login")`), and a [`LiveLimits`] handle can change its quota and
    /// mode. A policy of the same name already known (the layer's own or registered) is
    /// replaced.
    ///
    #[cfg_attr(not(feature = "live"), doc = "[`LiveLimits`]: crate#features")]
    pub fn register(self, policy: Policy) -> Self {
        self.map_live(|state| state.register(policy))
    }

    /// The mode of the policy of this name (the layer's own or [registered](Self::register))
    /// when the layer is built: [`Enforcement::Shadow`] to try it on real traffic,
    /// [`Enforcement::Off`] to skip it, until a [`LiveLimits`] handle changes it.
    /// Modes apply by name to whatever a request is checked against, so a chooser's
    /// policy of this name has it too. An unknown name is an error, so a typo does not
    /// go unnoticed.
    ///
    /// ```
    /// use floodwall_core::{MemoryStore, Policy};
    /// use floodwall_tower::{Enforcement, RateLimitLayer};
    ///
    /// let layer = RateLimitLayer::new(MemoryStore::new(), Policy::gcra("per-ip", "10/s".parse()?)?)
    ///     .and_policy(Policy::fixed_window("daily", "10000/day".parse()?)?)
    ///     .enforcement("daily", Enforcement::Shadow)?;
    /// # let _ = layer;
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    ///
    #[cfg_attr(not(feature = "live"), doc = "[`LiveLimits`]: crate#features")]
    pub fn enforcement(self, name: &str, mode: Enforcement) -> Result<Self, LiveError> {
        let mut state = LiveState::clone(&self.live.state());
        state.set_mode(name, mode)?;
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
    /// What the services read: made at the first call, then the same for this layer and
    /// its clones.
    fn cell(&self) -> Arc<Cell<St, K>> {
        let cell = self
            .cell
            .get_or_init(|| self.live.cell(self.config.clone()));
        Arc::clone(cell)
    }
}

#[cfg(feature = "live")]
impl<St, K, M> RateLimitLayer<St, K, M> {
    /// The handle on this layer's policies and modes, to change them while the service
    /// runs ([`LiveLimits`]): this layer, its clones and every service they build follow
    /// it. The builder methods that set policies or modes ([`and_policy`](Self::and_policy),
    /// [`register`](Self::register), [`enforcement`](Self::enforcement),
    /// [`shadow`](Self::shadow)) give the layer a handle of their own, so take it after
    /// them; the others keep it (a chooser built with the handle can be added after).
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
        RateLimit::from_cell(inner, self.cell())
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
            .field("headers", &self.config.headers)
            .finish_non_exhaustive()
    }
}
