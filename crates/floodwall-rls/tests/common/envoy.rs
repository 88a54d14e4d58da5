//! The Envoy messages the tests send, and the codes they read: shared by tests/service/
//! and tests/binary/.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;
use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitRequest;
use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::Code;

pub(crate) const OK: i32 = Code::Ok as i32;
pub(crate) const OVER: i32 = Code::OverLimit as i32;

/// A request of `domain` for `descriptors`, cost 1.
pub(crate) fn request(domain: &str, descriptors: Vec<RateLimitDescriptor>) -> RateLimitRequest {
    RateLimitRequest {
        domain: domain.to_owned(),
        descriptors,
        hits_addend: 0,
    }
}

/// A descriptor of `entries`, in order.
pub(crate) fn descriptor(entries: &[(&str, &str)]) -> RateLimitDescriptor {
    RateLimitDescriptor {
        entries: entries
            .iter()
            .map(|(k, v)| Entry {
                key: (*k).to_owned(),
                value: (*v).to_owned(),
            })
            .collect(),
        ..RateLimitDescriptor::default()
    }
}
