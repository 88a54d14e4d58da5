//! How a refusal reaches the caller: as a response (the default) or as an error.

/// Refusals are responses (429, 503, or what the responders build); the service's error
/// type stays the inner service's, so the layer fits axum's `Router::layer` and tonic's
/// `Server::layer` as it is. The default.
#[derive(Debug, Clone, Copy, Default)]
pub struct RejectWithResponse;

/// Refusals are errors: a [`RateLimited`](crate::RateLimited) for a denial, the store's
/// [`floodwall_core::Error`] for a store failure, a
/// [`KeyError`](crate::extract::KeyError) for a missing key; the service's error type is a
/// boxed error. For stacks that handle errors in tower (axum's `HandleErrorLayer`).
/// Chosen by [`RateLimitLayer::reject_with_error`](crate::RateLimitLayer::reject_with_error).
#[derive(Debug, Clone, Copy, Default)]
pub struct RejectWithError;
