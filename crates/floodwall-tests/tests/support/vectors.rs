//! Reads `tests/vectors/*.txt` (format in `tests/vectors/README.md`) and runs them against
//! any store, so the memory store and the Redis store are held to the same expectations.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::time::Duration;

use floodwall::{Algorithm, Decision, Error, Policy, Quota};

/// What a line expects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expect {
    Decision {
        allowed: bool,
        limit: u64,
        remaining: u64,
        retry_us: Option<u64>,
        reset_us: u64,
    },
    CostTooHigh,
}

/// One check: at `start + offset`, `key` asks for `cost`.
#[derive(Debug, Clone)]
pub struct Step {
    pub line: usize,
    pub at: u64,
    pub key: String,
    pub cost: u64,
    pub expect: Expect,
}

/// A policy and the steps run against it from empty state.
#[derive(Debug, Clone)]
pub struct Scenario {
    pub file: String,
    pub policy: Policy,
    pub steps: Vec<Step>,
}

pub fn vectors_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/vectors")
}

/// Every algorithm's vector file.
pub const FILES: [&str; 6] = [
    "gcra.txt",
    "token_bucket.txt",
    "leaky_bucket.txt",
    "fixed_window.txt",
    "sliding_window.txt",
    "sliding_log.txt",
];

fn parse_duration(s: &str) -> Duration {
    let q: Quota = format!("1/{s}")
        .parse()
        .unwrap_or_else(|e| panic!("{s}: {e}"));
    q.period()
}

fn parse_policy(spec: &str, n: usize) -> Policy {
    let (alg, quota) = spec.split_once(' ').expect("policy <algorithm> <quota>");
    let (name, param) = match alg.split_once(':') {
        Some((name, param)) => (name, Some(parse_duration(param))),
        None => (alg, None),
    };
    let algorithm = match (name.parse::<Algorithm>().unwrap(), param) {
        (Algorithm::TokenBucket { .. }, tick) => Algorithm::TokenBucket { tick },
        (Algorithm::SlidingWindow { .. }, precision) => Algorithm::SlidingWindow { precision },
        (a, None) => a,
        (a, Some(_)) => panic!("{a} takes no parameter"),
    };
    let quota: Quota = quota.parse().unwrap();
    Policy::new(format!("vectors-{n}"), algorithm, quota).unwrap()
}

pub fn load(file: &str) -> Vec<Scenario> {
    let text = std::fs::read_to_string(vectors_dir().join(file)).unwrap();
    let mut start = 0u64;
    let mut out: Vec<Scenario> = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        if let Some(s) = line.strip_prefix("start ") {
            start = s.trim().parse().unwrap();
            continue;
        }
        if let Some(spec) = line.strip_prefix("policy ") {
            out.push(Scenario {
                file: file.to_owned(),
                policy: parse_policy(spec.trim(), out.len()),
                steps: Vec::new(),
            });
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        let num = |s: &str| -> u64 {
            s.parse()
                .unwrap_or_else(|_| panic!("{file}:{}: {s}", i + 1))
        };
        let expect = match f[3] {
            "cost_too_high" => Expect::CostTooHigh,
            verdict @ ("allow" | "deny") => Expect::Decision {
                allowed: verdict == "allow",
                limit: num(f[4]),
                remaining: num(f[5]),
                retry_us: (f[6] != "-").then(|| num(f[6])),
                reset_us: num(f[7]),
            },
            other => panic!("{file}:{}: unknown verdict {other}", i + 1),
        };
        out.last_mut()
            .expect("a case before any policy line")
            .steps
            .push(Step {
                line: i + 1,
                at: start + num(f[0]),
                key: f[1].to_owned(),
                cost: num(f[2]),
                expect,
            });
    }
    out
}

/// Runs every step of every vector file through `check(policy, step)` and asserts each
/// answer; returns how many steps ran. `check` gets its own clones so that its future may
/// outlive the borrow (a Redis call), and one store serves all files: each scenario's
/// policy has its own namespace.
pub async fn run_all<F, Fut>(mut check: F) -> usize
where
    F: FnMut(Policy, Step) -> Fut,
    Fut: std::future::Future<Output = Result<Decision, Error>>,
{
    let mut steps = 0;
    for file in FILES {
        for scenario in load(file) {
            for step in &scenario.steps {
                let got = check(scenario.policy.clone(), step.clone()).await;
                assert_eq!(
                    observed(&got),
                    step.expect,
                    "{}:{} ({:?})",
                    scenario.file,
                    step.line,
                    scenario.policy
                );
                steps += 1;
            }
        }
    }
    assert!(steps >= 40, "only {steps} vector steps ran");
    steps
}

/// What a store's answer looks like in the vectors' terms.
pub fn observed(result: &Result<Decision, Error>) -> Expect {
    match result {
        Err(e) if e.is_cost_too_high() => Expect::CostTooHigh,
        Err(e) => panic!("store failed: {e}"),
        Ok(d) => Expect::Decision {
            allowed: d.is_allowed(),
            limit: d.limit,
            remaining: d.remaining,
            retry_us: d.retry_after.map(|r| r.as_micros() as u64),
            reset_us: d.reset_after.as_micros() as u64,
        },
    }
}

/// One recorded `CL.THROTTLE` group: its arguments and the replies of its calls.
#[derive(Debug, Clone)]
struct CellGroup {
    name: String,
    max_burst: u64,
    count: u64,
    period_s: u64,
    quantity: u64,
    replies: Vec<[i64; 5]>,
}

fn load_cell() -> Vec<CellGroup> {
    let text = std::fs::read_to_string(vectors_dir().join("redis-cell.txt")).unwrap();
    let mut groups: Vec<CellGroup> = Vec::new();
    for line in text.lines() {
        if let Some(name) = line.strip_prefix("### ") {
            groups.push(CellGroup {
                name: name.to_owned(),
                max_burst: 0,
                count: 0,
                period_s: 0,
                quantity: 1,
                replies: Vec::new(),
            });
        } else if let Some(rest) = line.strip_prefix("# FLUSHALL; then ") {
            let cmd = rest.split("CL.THROTTLE ").nth(1).unwrap();
            let args: Vec<u64> = cmd
                .split_whitespace()
                .skip(1)
                .map_while(|a| a.parse().ok())
                .collect();
            let g = groups.last_mut().unwrap();
            (g.max_burst, g.count, g.period_s) = (args[0], args[1], args[2]);
            g.quantity = args.get(3).copied().unwrap_or(1);
        } else if let Some(rest) = line.strip_prefix("call ") {
            let list = rest.split_once('[').unwrap().1.trim_end_matches(']');
            let v: Vec<i64> = list.split(',').map(|x| x.trim().parse().unwrap()).collect();
            groups
                .last_mut()
                .unwrap()
                .replies
                .push(v.try_into().unwrap());
        }
    }
    groups
}

/// Runs redis-cell's recorded groups through `check(policy, key, cost)`, every call of
/// a group at one instant (the caller's clock is frozen or its time explicit) on a key of
/// its own, and asserts each `CL.THROTTLE` reply.
pub async fn run_cell<F, Fut>(mut check: F)
where
    F: FnMut(Policy, String, u64) -> Fut,
    Fut: std::future::Future<Output = Result<Decision, Error>>,
{
    let groups = load_cell();
    assert_eq!(groups.len(), 5, "groups A, B, C, D, F");
    for g in groups {
        let policy = Policy::redis_cell(
            "cell",
            g.max_burst,
            g.count,
            Duration::from_secs(g.period_s),
        )
        .unwrap();
        let key = format!("k-{}", g.name);
        for (i, expected) in g.replies.iter().enumerate() {
            let got = check(policy.clone(), key.clone(), g.quantity).await;
            // A cost that can never pass changes nothing: peek after it.
            let peek = match &got {
                Err(e) if e.is_cost_too_high() => {
                    Some(check(policy.clone(), key.clone(), 0).await.unwrap())
                }
                _ => None,
            };
            let reply = cell_reply(&got, || peek.expect("a peek after a refused cost"));
            assert_eq!(&reply, expected, "group {} call {}", g.name, i + 1);
        }
    }
}

/// A `CL.THROTTLE` reply from a decision, or from a cost that can never pass (redis-cell
/// answers that as "limited, retry -1", with remaining and reset from a peek).
fn cell_reply(result: &Result<Decision, Error>, peek: impl FnOnce() -> Decision) -> [i64; 5] {
    let secs = |d: Duration| d.as_secs() as i64;
    match result {
        Ok(d) => [
            i64::from(!d.is_allowed()),
            d.limit as i64,
            d.remaining as i64,
            d.retry_after.map_or(-1, secs),
            secs(d.reset_after),
        ],
        Err(e) if e.is_cost_too_high() => {
            let p = peek();
            [
                1,
                p.limit as i64,
                p.remaining as i64,
                -1,
                secs(p.reset_after),
            ]
        }
        Err(e) => panic!("store failed: {e}"),
    }
}
