//! The file as written: what serde reads, every value with its span so that a check made
//! after parsing still names the line. `build.rs` turns it into a [`PolicyFile`](super::PolicyFile).

use serde::Deserialize;
use toml::Spanned;

/// The whole file.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawFile {
    pub(super) key: Option<Spanned<RawKey>>,
    #[serde(default)]
    pub(super) policy: Vec<Spanned<RawPolicy>>,
    #[serde(default)]
    pub(super) route: Vec<Spanned<RawRoute>>,
}

/// `[key]`: what requests are limited by. One flat table, so that a field given to the
/// wrong kind is named in the error rather than lost in an enum's.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawKey {
    pub(super) kind: Spanned<String>,
    pub(super) trusted_proxies: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) forwarded_header: Option<Spanned<String>>,
    pub(super) header: Option<Spanned<String>>,
    pub(super) salt: Option<Spanned<String>>,
    pub(super) ipv4_prefix: Option<Spanned<u8>>,
    pub(super) ipv6_prefix: Option<Spanned<u8>>,
}

/// `[[policy]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPolicy {
    pub(super) name: Spanned<String>,
    pub(super) algorithm: Option<Spanned<String>>,
    pub(super) quota: Spanned<String>,
    pub(super) mode: Option<Spanned<String>>,
    #[serde(default)]
    pub(super) default: bool,
    pub(super) penalty: Option<Spanned<RawPenalty>>,
}

/// A policy's `penalty = { .. }`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawPenalty {
    pub(super) after: Spanned<u32>,
    pub(super) within: Spanned<String>,
    pub(super) ban: Spanned<String>,
    pub(super) growth: Option<Spanned<u32>>,
    pub(super) max_ban: Option<Spanned<String>>,
    pub(super) forget_after: Option<Spanned<String>>,
}

/// `[[route]]`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub(super) struct RawRoute {
    pub(super) path: Spanned<String>,
    pub(super) methods: Option<Vec<Spanned<String>>>,
    pub(super) policies: Option<Spanned<Vec<Spanned<String>>>>,
    pub(super) skip: Option<Spanned<bool>>,
}
