//! Guides: the longer arguments behind the API, one page each (the `floodwall` facade
//! gathers every crate's in `floodwall::guide`).

#[doc = include_str!("../docs/all-or-nothing.md")]
pub mod all_or_nothing {}

#[doc = include_str!("../docs/charging.md")]
pub mod charging {}

#[doc = include_str!("../docs/deny-cache.md")]
pub mod deny_cache {}

#[doc = include_str!("../docs/failures.md")]
pub mod failures {}

#[doc = include_str!("../docs/local-verdicts.md")]
pub mod local_verdicts {}

#[doc = include_str!("../docs/penalties.md")]
pub mod penalties {}

#[doc = include_str!("../docs/quota-changes.md")]
pub mod quota_changes {}
