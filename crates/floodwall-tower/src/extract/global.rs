//! One key for every request.

use http::Request;
use http::request::Parts;

use super::{ExtractKey, KeyError};
use crate::Key;

/// Every request shares one key: a limit on the whole service (or, with a per-route
/// policy, on a whole endpoint), e.g. to protect a fragile backend.
#[derive(Debug, Clone, Copy, Default)]
pub struct Global;

impl ExtractKey for Global {
    fn extract(&self, _req: &Parts, key: &mut Key) -> Result<(), KeyError> {
        key.extend_from_slice(b"global");
        Ok(())
    }

    fn extract_request<B>(&self, _req: &Request<B>, key: &mut Key) -> Option<Result<(), KeyError>> {
        key.extend_from_slice(b"global");
        Some(Ok(()))
    }
}
