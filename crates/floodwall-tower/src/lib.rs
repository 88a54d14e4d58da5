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
//! peer IP), checks it against [`Policy`](floodwall_core::Policy)s in a
//! [`Store`](floodwall_core::Store) (in memory, or Redis shared by a fleet), and either
//! calls the inner service, adding [rate-limit headers](HeaderStyle), or answers at once
//! with a [refusal](respond).
//!
//! - The layer and service are cheap to clone and never wait in `poll_ready`: no
//!   `BufferLayer` needed.
//! - Responses keep the inner service's body type; a refusal's body is written into it
//!   ([`RejectionBody`]; any other body goes through [`ResponseBody`]).
//! - Each option is one builder method on [`RateLimitLayer`]: the [key](extract),
//!   [`Refusals`], a cost, a [policy chooser](choose), several policies, [`Modes`], an
//!   [error mode](RateLimitLayer::reject_with_error) ([`RateLimited`]).
//! - Quotas and [modes](Enforcement) change while the service runs, through
//!   [`LiveLimits`].
//!
//! # axum: `layer` or `route_layer`
//!
//! Serve with `into_make_service_with_connect_info::<SocketAddr>()` so the peer address
//! is known (feature `axum`).
//!
//! **`.layer` on a `Router` limits every request, unknown paths included**: a 404 counts
//! (and, under a [`Penalty`](floodwall_core::Penalty), earns a ban). A limit for some
//! routes goes on with `route_layer`, which runs only for paths that match a route (a 405
//! still counts). Routes with policies of their own get a layer each, over clones of one
//! store:
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
//! With tonic: `Server::builder().layer(layer.refusals(Refusals::new().respond(Grpc)))`
//! (feature `tonic`). The workspace's `examples/` show both.
//!
//! # Features
//!
//! - `axum`: the peer from `ConnectInfo`, the route from `MatchedPath`, `respond::Axum`.
//! - `tonic`: the peer from `TcpConnectInfo`.
//! - `metrics`: decisions counted and store calls timed through the `metrics` facade
#![cfg_attr(feature = "metrics", doc = "  ([`metrics`](mod@metrics)).")]
#![cfg_attr(
    not(feature = "metrics"),
    doc = "  (the `metrics` module, with the feature)."
)]
//! - `file`: policies, modes, the key and routes from a TOML file, reloaded on `SIGHUP`
#![cfg_attr(feature = "file", doc = "  ([`file`](mod@file)).")]
#![cfg_attr(
    not(feature = "file"),
    doc = "  (the `file` module, with the feature)."
)]
//! - `wait`: a refused request may wait for its slot ([`RateLimitLayer::wait`], [`Wait`]).
//! - `live`: policies and modes changed while serving ([`LiveLimits`]).
//! - `charge`: each request charged by its response ([`RateLimitLayer::charge_by`],
//!   [`Settle`]).
//!
//! None is on by default (no tokio, arc-swap or serde without them); `file` turns on `live`.
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
mod outage;
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
