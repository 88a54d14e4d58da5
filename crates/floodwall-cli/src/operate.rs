//! `inspect`, `reset` and `unban`: one key of a live policy, in the application's Redis,
//! through `StoreExt` only (a check of cost 0 is a peek that charges nothing).

use std::fmt::Write as _;
use std::time::Duration;

use floodwall_core::{
    Algorithm, Decision, Outcome, Penalty, PenaltyState, Policy, StoreExt, parse_duration,
};
use floodwall_redis::{Deployment, RedisStore};
use floodwall_tower::file::PolicyFile;

use crate::cli::{RedisArgs, Target};
use crate::error::Failure;
use crate::key;

/// What to do with the key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Action {
    /// Print its state.
    Inspect,
    /// Forget its quota state.
    Reset,
    /// Lift its ban and forget its strikes.
    Unban,
}

/// Does `action` on the target's key, and says what it found or did.
pub(crate) async fn run(action: Action, target: &Target) -> Result<String, Failure> {
    let (policy, file) = policy(target)?;
    let key = key::bytes(target, file.as_ref())?;
    let store = connect(&target.redis).await?;
    let failed = |e: floodwall_core::Error| Failure::input(store_name(&target.redis), e);
    let who = format!("key {} under {}", shown(&target.key, &key), policy.name());
    match action {
        Action::Inspect => {
            let peek = store.check(&key, &policy, 0).await.map_err(failed)?;
            let penalty = match policy.penalty() {
                Some(_) => Some(store.penalty_state(&key, &policy).await.map_err(failed)?),
                None => None,
            };
            Ok(report(&target.key, &key, &policy, &peek, penalty, &store))
        }
        Action::Reset => {
            store.reset(&key, &policy).await.map_err(failed)?;
            Ok(format!(
                "reset {who}: its quota state is forgotten (a ban stays: see unban)\n"
            ))
        }
        Action::Unban => {
            store.unban(&key, &policy).await.map_err(failed)?;
            Ok(format!(
                "unbanned {who}: its ban, strikes and remembered bans are forgotten (its quota state stays)\n"
            ))
        }
    }
}

/// The policy `--policy` names: from the policy file, or built from `--quota`,
/// `--algorithm` and `--penalty`. The file is returned for its `[key]`.
fn policy(target: &Target) -> Result<(Policy, Option<PolicyFile>), Failure> {
    let name = &target.policy;
    if let Some(path) = &target.policy_file {
        let file = PolicyFile::load(path).map_err(|e| Failure::input("--policy-file", e))?;
        let found = file
            .policies()
            .find(|(p, _)| p.name() == name)
            .map(|(p, _)| p.clone());
        let Some(policy) = found else {
            let names: Vec<&str> = file.policies().map(|(p, _)| p.name()).collect();
            return Err(Failure::input(
                format!("--policy {name}"),
                format!("not in {} (it has {})", path.display(), names.join(", ")),
            ));
        };
        return Ok((policy, Some(file)));
    }
    let quota = target.quota.as_deref().unwrap_or_default();
    let quota = quota
        .parse()
        .map_err(|e| Failure::input(format!("--quota {quota:?}"), e))?;
    let algorithm = target.algorithm.unwrap_or(Algorithm::Gcra);
    let policy = Policy::new(name.clone(), algorithm, quota)
        .map_err(|e| Failure::input(format!("--policy {name}"), e))?;
    Ok(match &target.penalty {
        Some(text) => (policy.with_penalty(penalty(text)?), None),
        None => (policy, None),
    })
}

/// `after=5,within=10min,ban=15min[,growth=2,max_ban=1day,forget_after=1day]`: the policy
/// file's penalty fields, checked by `Penalty` itself.
pub(crate) fn penalty(text: &str) -> Result<Penalty, Failure> {
    let bad = |why: String| Failure::input(format!("--penalty {text:?}"), why);
    let (mut after, mut within, mut ban) = (None, None, None);
    let (mut growth, mut max_ban, mut forget_after) = (None, None, None);
    for field in text.split(',').map(str::trim).filter(|f| !f.is_empty()) {
        let (name, value) = field
            .split_once('=')
            .ok_or_else(|| bad(format!("{field:?} is not NAME=VALUE")))?;
        let value = value.trim();
        let span = || parse_duration(value).map_err(|e| bad(format!("{name}: {e}")));
        match name.trim() {
            "after" => {
                after = Some(
                    value
                        .parse::<u32>()
                        .map_err(|_| bad(format!("after: {value:?} is not a count")))?,
                )
            }
            "within" => within = Some(span()?),
            "ban" => ban = Some(span()?),
            "growth" => {
                growth = Some(
                    value
                        .parse::<u32>()
                        .map_err(|_| bad(format!("growth: {value:?} is not a factor")))?,
                )
            }
            "max_ban" => max_ban = Some(span()?),
            "forget_after" => forget_after = Some(span()?),
            other => {
                return Err(bad(format!(
                    "unknown field {other:?} (after, within, ban, growth, max_ban, forget_after)"
                )));
            }
        }
    }
    let (Some(after), Some(within), Some(ban)) = (after, within, ban) else {
        return Err(bad("after, within and ban are required".to_owned()));
    };
    let mut penalty = Penalty::new(after, within, ban).map_err(|e| bad(e.to_string()))?;
    if growth.is_some() || max_ban.is_some() {
        penalty = penalty
            .growing(growth.unwrap_or(1), max_ban.unwrap_or(ban))
            .map_err(|e| bad(e.to_string()))?;
    }
    if let Some(forget) = forget_after {
        penalty = penalty
            .forget_after(forget)
            .map_err(|e| bad(e.to_string()))?;
    }
    Ok(penalty)
}

/// The store the Redis options name, connected now (so an unreachable Redis is one line
/// and exit 2 here, not a failed call later). Its deny cache and coalescing are off: one
/// command makes one call, and the deny cache would only hide what Redis holds.
async fn connect(args: &RedisArgs) -> Result<RedisStore, Failure> {
    let mut builder = RedisStore::builder().deny_cache(false).coalesce(false);
    if let Some(ms) = args.redis_timeout {
        builder = builder.timeout(Duration::from_millis(ms));
    }
    if let Some(prefix) = &args.redis_prefix {
        builder = builder.prefix(prefix.clone());
    }
    let deployment = deployment(args);
    (builder.connect(&deployment).await).map_err(|e| Failure::input(store_name(args), e))
}

/// The Redis the options name (clap requires one of them).
fn deployment(args: &RedisArgs) -> Deployment {
    if let Some(urls) = &args.redis_cluster {
        Deployment::Cluster(urls.clone())
    } else if let (Some(urls), Some(service)) = (&args.sentinel, &args.service) {
        Deployment::Sentinel {
            sentinels: urls.clone(),
            service: service.clone(),
        }
    } else {
        Deployment::Node(args.redis.clone().unwrap_or_default())
    }
}

/// The store's option for messages, credentials left out.
fn store_name(args: &RedisArgs) -> String {
    match deployment(args) {
        redis @ Deployment::Node(_) => format!("--redis {redis}"),
        redis @ Deployment::Cluster(_) => format!("--redis-cluster {redis}"),
        redis @ Deployment::Sentinel { .. } => format!("--sentinel {redis}"),
    }
}

/// The key as given, and its bytes when they differ.
fn shown(given: &str, bytes: &[u8]) -> String {
    if given.as_bytes() == bytes {
        given.to_owned()
    } else {
        format!("{given} (bytes {})", key::hex(bytes))
    }
}

/// `inspect`'s lines: `name: value`, one fact a line.
fn report(
    given: &str,
    key: &[u8],
    policy: &Policy,
    peek: &Decision,
    penalty: Option<PenaltyState>,
    store: &RedisStore,
) -> String {
    let mut out = String::new();
    let mut line = |name: &str, value: String| {
        let _ = writeln!(out, "{:<14}{value}", format!("{name}:"));
    };
    line("key", shown(given, key));
    line(
        "policy",
        format!(
            "{} ({} {})",
            policy.name(),
            policy.algorithm().name(),
            policy.quota()
        ),
    );
    line("redis key", escaped(&store.redis_key(key, policy)));
    let state = match peek.outcome {
        Outcome::Banned => "banned",
        _ if peek.remaining == 0 => "exhausted (the next request is refused)",
        _ if peek.remaining == peek.limit => "full (as if never seen)",
        _ => "admitting",
    };
    line("state", state.to_owned());
    line("limit", peek.limit.to_string());
    line("remaining", peek.remaining.to_string());
    line("reset in", secs(peek.reset_after));
    let ban = match (policy.penalty(), peek.outcome) {
        (None, _) => "not checked (the policy has no penalty)".to_owned(),
        (Some(_), Outcome::Banned) => {
            format!("{} left", secs(peek.retry_after.unwrap_or_default()))
        }
        (Some(_), _) => "none".to_owned(),
    };
    line("ban", ban);
    if let Some(p) = penalty {
        let lasting = |n: u32, left: Duration| match n {
            0 => "0".to_owned(),
            n => format!("{n} (forgotten in {})", secs(left)),
        };
        line("strikes", lasting(p.strikes, p.strikes_reset_after));
        line("bans", lasting(p.bans, p.bans_forgotten_after));
        let [ban_key, strikes, bans] = store.penalty_keys(key, policy);
        line("ban key", escaped(&ban_key));
        line("strikes key", escaped(&strikes));
        line("bans key", escaped(&bans));
    }
    out
}

/// A duration in seconds, to the µs.
fn secs(d: Duration) -> String {
    format!("{}.{:06}s", d.as_secs(), d.subsec_micros())
}

/// Bytes as text, anything not printable ASCII as `\xNN` (a key can hold any bytes).
fn escaped(bytes: &[u8]) -> String {
    bytes.iter().fold(String::new(), |mut s, &b| {
        if b.is_ascii_graphic() && b != b'\\' {
            s.push(b as char);
        } else {
            let _ = write!(s, "\\x{b:02x}");
        }
        s
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_penalty_reads_as_the_policy_file_writes_it() {
        let p = penalty("after=5, within=10min, ban=15min, growth=2, max_ban=1day").unwrap();
        assert_eq!(
            (p.after(), p.within(), p.ban(), p.growth(), p.max_ban()),
            (
                5,
                Duration::from_secs(600),
                Duration::from_secs(900),
                2,
                Duration::from_secs(86_400)
            )
        );
        for bad in [
            "after=5,within=1min",
            "after=x,within=1s,ban=1s",
            "after=1,within=1s,ban=1s,color=red",
        ] {
            let e = penalty(bad).unwrap_err();
            assert!(e.to_string().starts_with("--penalty"), "{e}");
        }
    }

    #[test]
    fn keys_and_durations_read_as_text() {
        assert_eq!(escaped(b"a{\x00}"), "a{\\x00}");
        assert_eq!(secs(Duration::from_micros(1_500_001)), "1.500001s");
    }
}
