//! The kinds of state this crate keeps in Redis, one per algorithm, and everything that
//! differs between them, stated once in [`ScriptKind::spec`].
//!
//! Adding an algorithm's script means: its Lua file in `src/lua/`, a [`ScriptKind`]
//! variant, its arm in [`ScriptKind::spec`] (the file, how many parameters it reads, its
//! key tag and format, how its integer answer reads), and its arm in [`Layout::of`] (which
//! of floodwall-core's [`Parameters`] it decides).

use floodwall_core::Parameters;

use crate::unpack::{self, ScriptAnswer};

/// The state one key holds, and so the script deciding it and the key's tag.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum ScriptKind {
    Gcra,
    TokenBucket,
    /// GCRA underneath (floodwall-core's `algorithm/leaky_bucket.rs`): it runs GCRA's
    /// script, under keys of its own.
    LeakyBucket,
    FixedWindow,
    SlidingWindow,
    SlidingLog,
}

/// How an algorithm's Lua file is laid out (see `crate::script`).
#[derive(Debug, Clone, Copy)]
pub(crate) enum Lua {
    /// The parameters, then `-- @load <state>`, `-- @step`, `-- @save` and `-- @reply`
    /// sections that the single-check and the batch drivers paste in: one definition
    /// serves both, so the kind can be coalesced, its checks of many keys in one batch.
    Stepped(&'static str),
    /// A whole script after the prelude; never coalesced (its state is more than one
    /// value, rewritten by several commands).
    Whole(&'static str),
}

/// What a [`ScriptKind`] is made of.
#[derive(Clone, Copy)]
pub(crate) struct Spec {
    pub(crate) lua: Lua,
    /// How many parameters the script reads (`{p1}`.. in its text, `ARGV[2..]` when not
    /// written in).
    pub(crate) params: usize,
    /// Names the algorithm in its keys, readable in `redis-cli --scan` output.
    pub(crate) tag: &'static str,
    /// The version of what the script stores, hashed into the key's fingerprint: raise it
    /// whenever the script stores something older scripts would misread, so that old keys
    /// are left to expire rather than refused as unreadable ([`crate::guide::redis`] lists the
    /// changes so far).
    pub(crate) format: u8,
    /// Reads a single check's integer answer (`x`, negated back when `allowed` is false)
    /// under the script's parameters and the check's cost; `None` when no state gives it.
    pub(crate) unpack: fn(args: [u64; 3], cost: u64, allowed: bool, x: u64) -> Option<ScriptAnswer>,
}

impl ScriptKind {
    /// Every kind, in declaration order (`kind as usize` indexes it).
    pub(crate) const ALL: [Self; 6] = [
        Self::Gcra,
        Self::TokenBucket,
        Self::LeakyBucket,
        Self::FixedWindow,
        Self::SlidingWindow,
        Self::SlidingLog,
    ];

    /// The one place a kind's script, parameters and key are stated.
    pub(crate) fn spec(self) -> Spec {
        const GCRA: &str = include_str!("lua/gcra.lua");
        match self {
            Self::Gcra => Spec {
                lua: Lua::Stepped(GCRA),
                params: 2,
                tag: "gcra",
                format: 1,
                unpack: unpack::gcra,
            },
            Self::TokenBucket => Spec {
                lua: Lua::Stepped(include_str!("lua/token_bucket.lua")),
                params: 3,
                tag: "tb",
                format: 2,
                unpack: unpack::token_bucket,
            },
            Self::LeakyBucket => Spec {
                lua: Lua::Stepped(GCRA),
                params: 2,
                tag: "lb",
                format: 2,
                unpack: unpack::gcra,
            },
            Self::FixedWindow => Spec {
                lua: Lua::Stepped(include_str!("lua/fixed_window.lua")),
                params: 2,
                tag: "fw",
                format: 3,
                unpack: unpack::fixed_window,
            },
            Self::SlidingWindow => Spec {
                lua: Lua::Whole(include_str!("lua/sliding_window.lua")),
                params: 3,
                tag: "sw",
                format: 1,
                unpack: unpack::sliding_window,
            },
            Self::SlidingLog => Spec {
                lua: Lua::Whole(include_str!("lua/sliding_log.lua")),
                params: 2,
                tag: "sl",
                format: 4,
                unpack: unpack::sliding_log,
            },
        }
    }
}

/// A policy's script kind and parameters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Layout {
    pub(crate) kind: ScriptKind,
    /// The parameters as the script reads them, padded with 0 (the spec says how many
    /// count).
    pub(crate) args: [u64; 3],
}

impl Layout {
    /// The parameters the script reads, without the padding.
    pub(crate) fn params(&self) -> &[u64] {
        &self.args[..self.kind.spec().params]
    }

    /// Appends the parameters, then the time (`''` reads the server's clock), to a script
    /// call that reads them from `ARGV`.
    pub(crate) fn push_args(&self, inv: &mut redis::ScriptInvocation<'_>, now: Option<u64>) {
        for a in self.params() {
            inv.arg(a);
        }
        match now {
            Some(now) => inv.arg(now),
            None => inv.arg(""),
        };
    }

    /// The layout of checks under `params`; `None` for an algorithm this crate has no
    /// script for (`Parameters` is non-exhaustive).
    pub(crate) fn of(params: Parameters) -> Option<Self> {
        let same = |kind, args| Self { kind, args };
        Some(match params {
            Parameters::Gcra {
                interval,
                tolerance,
            } => same(ScriptKind::Gcra, [interval, tolerance, 0]),
            Parameters::TokenBucket {
                capacity,
                tick,
                quantum,
            } => same(ScriptKind::TokenBucket, [capacity, tick, quantum]),
            Parameters::LeakyBucket { capacity, interval } => Self {
                kind: ScriptKind::LeakyBucket,
                args: [interval, capacity.saturating_mul(interval), 0],
            },
            Parameters::FixedWindow { limit, period } => {
                same(ScriptKind::FixedWindow, [limit, period, 0])
            }
            Parameters::SlidingWindow {
                limit,
                precision,
                buckets,
            } => same(ScriptKind::SlidingWindow, [limit, precision, buckets]),
            Parameters::SlidingLog { limit, period } => {
                same(ScriptKind::SlidingLog, [limit, period, 0])
            }
            _ => return None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn all_lists_every_kind_at_its_index() {
        for (i, kind) in ScriptKind::ALL.into_iter().enumerate() {
            assert_eq!(kind as usize, i, "{kind:?}");
        }
    }

    #[test]
    fn every_algorithm_has_a_kind_with_a_tag_of_its_own() {
        let mut tags = std::collections::HashSet::new();
        for a in floodwall_core::Algorithm::all() {
            let p = floodwall_core::Policy::new("p", a, "10/s".parse().unwrap()).unwrap();
            let layout = Layout::of(p.parameters()).unwrap();
            assert!(tags.insert(layout.kind.spec().tag), "{a}");
            let params = layout.kind.spec().params;
            assert!(layout.args[params..].iter().all(|&a| a == 0), "{a}: padded");
        }
    }
}
