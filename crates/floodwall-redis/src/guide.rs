//! Guides: how the Redis store is built and why, one page each. The guides of
//! floodwall-core (penalties, the deny cache, quota changes, ...) are in
//! [`floodwall_core::guide`].

#[doc = include_str!("../docs/redis.md")]
pub mod redis {}

#[doc = include_str!("../docs/in-flight.md")]
pub mod in_flight {}
