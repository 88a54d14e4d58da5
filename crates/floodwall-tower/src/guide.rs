//! Guides: the layer's features at length, one page each. The guides of floodwall-core
//! (penalties, all or nothing, charging, the deny cache, ...) are in
//! [`floodwall_core::guide`].

#[cfg_attr(feature = "live", doc = include_str!("../docs/live-changes.md"))]
#[cfg_attr(
    not(feature = "live"),
    doc = "Live changes and modes: this page, with the `live` feature."
)]
pub mod live_changes {}

#[doc = include_str!("../docs/metrics.md")]
pub mod metrics {}

#[cfg(feature = "file")]
#[doc = include_str!("../docs/policy-file.md")]
pub mod policy_file {}

#[cfg_attr(feature = "wait", doc = include_str!("../docs/waiting.md"))]
#[cfg_attr(
    not(feature = "wait"),
    doc = "Waiting instead of refusing: this page, with the `wait` feature."
)]
pub mod waiting {}
