//! floodwall's tower layer: rate limiting for axum, tonic, hyper and any tower service
//! over `http::Request<B>`.
//!
//! ```
//! use std::net::SocketAddr;
//! use floodwall_core::{MemoryStore, Policy};
//! use floodwall_tower::RateLimitLayer;
//! use http::{Request, Response, StatusCode};
//! use tower::{ServiceBuilder, ServiceExt, service_fn};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let policy = Policy::gcra("per-ip", "1/s".parse()?)?;
//! let service = ServiceBuilder::new()
//!     .layer(RateLimitLayer::new(MemoryStore::new(), policy))
//!     .service(service_fn(|_req: Request<String>| async {
//!         Ok::<_, std::convert::Infallible>(Response::new(String::from("hello")))
//!     }));
//!
//! // axum's `ConnectInfo` (or tonic's, or a plain `SocketAddr`) tells the peer address.
//! let request = || {
//!     let mut req = Request::new(String::new());
//!     req.extensions_mut().insert("203.0.113.7:5000".parse::<SocketAddr>().unwrap());
//!     req
//! };
//! let ok = service.clone().oneshot(request()).await?;
//! assert_eq!(ok.status(), StatusCode::OK);
//! assert_eq!(ok.headers()["ratelimit"], "\"per-ip\";r=0;t=1");
//!
//! let refused = service.oneshot(request()).await?;
//! assert_eq!(refused.status(), StatusCode::TOO_MANY_REQUESTS);
//! assert_eq!(refused.headers()["retry-after"], "1");
//! # Ok(())
//! # }
//! ```
//!
//! For each request the [`RateLimit`] service extracts a [key](extract) (by default the
//! peer IP), checks it against one or more [`Policy`](floodwall_core::Policy)s in a
//! [`Store`](floodwall_core::Store) (in memory, or Redis shared by a fleet), and then either
//! calls the inner service and adds [rate-limit headers](HeaderStyle) to its response, or
//! answers at once with a [refusal](respond): 429 with `Retry-After` by default, 503 when
//! the store cannot decide, gRPC `RESOURCE_EXHAUSTED` for tonic.
//!
//! - The layer and service are cheap to clone and never wait in `poll_ready`, so they go
//!   straight on an axum `Router` or a tonic `Server` without a `BufferLayer`.
//! - Responses keep the inner service's body type, so axum and tonic take them through
//!   without boxing them again; a refusal's body is written into that type
//!   ([`RejectionBody`]: axum's and tonic's bodies, `String`, http-body-util's; any other
//!   body goes through [`ResponseBody`]).
//! - Everything is one builder method on [`RateLimitLayer`], an option of several
//!   settings a value of its own: the [key](extract), [`Refusals`] (the
//!   [responders](respond), what a missing key means, the [header style](HeaderStyle)), a
//!   per-request cost, a [policy chooser](choose) (per method, tier or key), several
//!   policies on one request, [`Modes`] (shadow mode, a mode per policy), and an
//!   [error mode](RateLimitLayer::reject_with_error) with [`RateLimited`].
//! - Quotas and [modes](Enforcement) (enforced, shadow, off) change while the service runs,
//!   per request atomically, through the layer's [`LiveLimits`] handle.
//!
//! # axum: `layer` or `route_layer`
//!
//! `Router::new().route(..).layer(RateLimitLayer::new(store, policy))`, served with
//! `into_make_service_with_connect_info::<SocketAddr>()` so the peer address is known
//! (feature `axum`). A responder that answers as an axum handler does, with
//! `impl IntoResponse`, goes in `respond::Axum`.
//!
//! **`.layer` on a `Router` limits every request the router gets, unknown paths
//! included**: a 404 counts against the policy, and under a policy with a
//! [`Penalty`](floodwall_core::Penalty) a client probing paths earns a ban. That suits a
//! limit per client on the whole app. A limit meant for some routes (a login, an export)
//! goes on with `route_layer`, which runs only for requests whose path matches a route (a
//! 404 is not counted; a known path asked with another method, a 405, still is).
//!
//! **Routes with policies of their own get a layer each, with `route_layer`**, each over a
//! clone of one store (a handle: the counts are shared, the keys apart by policy name):
//!
//! ```text
//! let store = MemoryStore::new();
//! let login = Router::new()
//!     .route("/login", post(login))
//!     .route_layer(RateLimitLayer::new(store.clone(), login_policy));   // only /login
//! let api = Router::new()
//!     .route("/api/items", get(items))
//!     .route_layer(RateLimitLayer::new(store.clone(), api_policy));     // only /api/items
//! let app = login.merge(api).route("/health", get(health));             // not limited
//! ```
//!
//! A [chooser](RateLimitLayer::choose) is for choices that depend on the request itself
//! (its method, its client's tier, its key), not for routes.
//!
//! With tonic: `Server::builder().layer(layer.refusals(Refusals::new().respond(Grpc)))`
//! (feature `tonic`). The workspace's `examples/` show both (`routes.rs` gives routes
//! their layers with `route_layer`).
//!
//! # Features
//!
//! - `axum`: read the peer from axum's `ConnectInfo` and the route from `MatchedPath`;
//!   responders returning axum's `impl IntoResponse` (`respond::Axum`).
//! - `tonic`: read the peer from tonic's `TcpConnectInfo`.
//! - `metrics`: count decisions by policy and result, and time store calls, through the
//!   `metrics` facade
#![cfg_attr(feature = "metrics", doc = "  ([`metrics`](mod@metrics)).")]
#![cfg_attr(
    not(feature = "metrics"),
    doc = "  (the `metrics` module, with the feature)."
)]
//! - `file`: the policies, their modes and penalties, the key and the routes read from a
//!   TOML file and reloaded on `SIGHUP`
#![cfg_attr(feature = "file", doc = "  ([`file`](mod@file)).")]
#![cfg_attr(
    not(feature = "file"),
    doc = "  (the `file` module, with the feature)."
)]
//! - `wait`: a refused request may wait for its slot instead
//!   ([`RateLimitLayer::wait`], [`Wait`]), on tokio's timer.
//! - `live`: change policies and modes while the layer serves ([`LiveLimits`], through
//!   arc-swap).
//! - `charge`: charge each request by its response ([`RateLimitLayer::charge_by`],
//!   [`Settle`]).
//!
//! None is on by default: without them the layer brings no tokio, arc-swap or serde.
//! `file` turns on `live`.
//!
#![cfg_attr(
    not(feature = "wait"),
    doc = "[`RateLimitLayer::wait`]: crate#features"
)]
#![cfg_attr(not(feature = "wait"), doc = "[`Wait`]: crate#features")]
#![cfg_attr(not(feature = "live"), doc = "[`LiveLimits`]: crate#features")]
#![cfg_attr(
    not(feature = "charge"),
    doc = "[`RateLimitLayer::charge_by`]: crate#features"
)]
#![cfg_attr(not(feature = "charge"), doc = "[`Settle`]: crate#features")]
//!
//! # Guides
//!
//! - [Waiting instead of refusing](guide::waiting): bursts smoothed to the policy's pace.
//! - [Live changes and modes](guide::live_changes): quotas and modes changed while serving.
//! - [Metrics and tracing](guide::metrics): what the layer counts, and its spans.
#![cfg_attr(
    feature = "file",
    doc = "- [Policies from a file](guide::policy_file): the TOML format, its errors, reloads."
)]
#![cfg_attr(
    not(feature = "file"),
    doc = "- Policies from a file: the `guide::policy_file` page, with the `file` feature."
)]
//!
//! The guides of floodwall-core apply to the layer too:
//! [all or nothing](floodwall_core::guide::all_or_nothing) across policies,
//! [charging by the response](floodwall_core::guide::charging),
//! [penalties](floodwall_core::guide::penalties),
//! [when the store fails](floodwall_core::guide::failures).

mod body;
pub mod choose;
mod concurrency;
mod config;
mod decide;
mod enforcement;
mod error;
pub mod extract;
#[cfg(feature = "file")]
pub mod file;
mod future;
pub mod guide;
mod headers;
mod key;
mod layer;
mod live;
#[cfg(feature = "metrics")]
pub mod metrics;
mod missing;
mod mode;
mod observe;
mod options;
pub mod respond;
mod service;
mod settle;
mod tally;
mod trace;
#[cfg(feature = "wait")]
mod wait;

pub use body::{RejectionBody, ResponseBody};
pub use concurrency::{
    ConcurrencyLimitFuture, ConcurrencyLimitLayer, ConcurrencyLimitService, PermitBody,
};
pub use enforcement::Enforcement;
pub use error::RateLimited;
pub use future::ResponseFuture;
pub use headers::{HeaderStyle, retry_after_secs};
pub use key::Key;
pub use layer::RateLimitLayer;
pub use live::LiveError;
#[cfg(feature = "live")]
pub use live::LiveLimits;
pub use mode::{RefusalMode, RejectWithError, RejectWithResponse};
#[cfg(feature = "wait")]
pub use options::Wait;
pub use options::{Modes, Refusals};
pub use service::RateLimit;
#[cfg(feature = "charge")]
pub use settle::Settle;
