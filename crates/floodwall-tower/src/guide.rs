//! Guides: the layer's features at length, one page each. The guides of floodwall-core
//! (penalties, all or nothing, charging, the deny cache, ...) are in
//! [`floodwall_core::guide`]. A guide to a feature is there with its feature, as the
//! feature's API is.

#[cfg(feature = "live")]
#[doc = include_str!("../docs/live-changes.md")]
pub mod live_changes {}

#[doc = include_str!("../docs/metrics.md")]
pub mod metrics {}

#[cfg(feature = "file")]
#[doc = include_str!("../docs/policy-file.md")]
pub mod policy_file {}

#[cfg(feature = "wait")]
#[doc = include_str!("../docs/waiting.md")]
pub mod waiting {}
