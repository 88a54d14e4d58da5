//! Errors: [`BuildError`] when a store cannot be built, and the mapping of every Redis
//! failure onto floodwall-core's [`Error`] when a check cannot be decided.

use std::fmt;

use floodwall_core::{BoxError, Error};
use redis::{ErrorKind, RedisError, ServerErrorKind};

/// Why a [`RedisStore`](crate::RedisStore) could not be built.
///
/// Caught at startup, so a typo in a URL reads as a sentence instead of a stream of
/// failed checks. Messages never repeat the URL, which may hold a password.
#[derive(Debug)]
#[non_exhaustive]
pub enum BuildError {
    /// The URL could not be parsed, or asks for something this build cannot do
    /// (e.g. `rediss://` without TLS support in redis-rs).
    InvalidUrl {
        /// redis-rs's reason.
        source: RedisError,
    },
    /// The key prefix contains `{`, `}`, whitespace or control characters, or is longer
    /// than 64 bytes. Braces would become the cluster hash tag and put every key in one slot.
    InvalidPrefix {
        /// The prefix given.
        prefix: String,
    },
    /// The server (or cluster) could not be reached when the store was built.
    Connect {
        /// What went wrong.
        source: BoxError,
    },
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::InvalidUrl { source } => write!(f, "invalid Redis URL: {source}"),
            Self::InvalidPrefix { prefix } => write!(
                f,
                "invalid key prefix {prefix:?}: use at most 64 printable characters \
                 without braces or whitespace"
            ),
            Self::Connect { source } => write!(f, "cannot connect to Redis: {source}"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Self::InvalidUrl { source } => Some(source),
            Self::Connect { source } => Some(source.as_ref()),
            Self::InvalidPrefix { .. } => None,
        }
    }
}

/// A URL error or a connection error, told apart by redis-rs's error kind.
pub(crate) fn build_error(e: RedisError) -> BuildError {
    if e.kind() == ErrorKind::InvalidClientConfig {
        BuildError::InvalidUrl { source: e }
    } else {
        BuildError::Connect {
            source: Box::new(e),
        }
    }
}

/// Maps a redis-rs error onto floodwall's: timeouts to [`Error::Timeout`]; a server that
/// cannot be reached or cannot serve (refused, dropped, I/O, cluster down, loading) to
/// [`Error::Unavailable`]; everything the server answered with (WRONGTYPE, script errors,
/// an unreadable state) to [`Error::Backend`].
pub(crate) fn to_core(e: RedisError) -> Error {
    if e.is_timeout() {
        return Error::Timeout;
    }
    let unreachable = e.is_io_error()
        || e.is_connection_refusal()
        || e.is_connection_dropped()
        || matches!(
            e.kind(),
            ErrorKind::ClusterConnectionNotFound
                | ErrorKind::Server(
                    ServerErrorKind::ClusterDown
                        | ServerErrorKind::TryAgain
                        | ServerErrorKind::MasterDown
                        | ServerErrorKind::BusyLoading
                )
        );
    if unreachable {
        Error::unavailable(e)
    } else {
        Error::backend(e)
    }
}

/// Whether `e` is an error Redis answered a call with (as opposed to one the connection or
/// the client met): the call reached the server, which refused it or whose script failed.
/// A batch script fails before it writes anything, so such a batch changed nothing.
pub(crate) fn answered_by_redis(e: &Error) -> bool {
    let Error::Backend { source } = e else {
        return false;
    };
    source
        .downcast_ref::<RedisError>()
        .is_some_and(|r| matches!(r.kind(), ErrorKind::Server(_) | ErrorKind::Extension))
}

/// An error for a reply that cannot be a decision.
#[derive(Debug)]
pub(crate) struct UnexpectedReply(pub(crate) String);

impl fmt::Display for UnexpectedReply {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unexpected reply from a floodwall script: {}", self.0)
    }
}

impl std::error::Error for UnexpectedReply {}
