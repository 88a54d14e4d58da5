//! The workloads (a `CL.THROTTLE` quota and the keys it is checked on), the three limiters
//! compared, and the tokio tasks that drive them, one code path for all three but the call.

use std::sync::Arc;
use std::time::{Duration, Instant};

use floodwall::redis::RedisStore;
use floodwall::redis::redis::{self, aio::ConnectionManager};
use floodwall::{Policy, StoreExt};
use floodwall_bench as support;
use tokio::runtime::Runtime;

/// `CL.THROTTLE <key> max_burst count period` (quantity 1).
#[derive(Debug, Clone, Copy)]
pub(crate) struct CellQuota {
    pub(crate) max_burst: u64,
    pub(crate) count: u64,
    /// Seconds.
    pub(crate) period: u64,
}

impl CellQuota {
    /// The floodwall policy that answers as `CL.THROTTLE` with these arguments does.
    pub(crate) fn policy(&self, name: &str) -> Policy {
        Policy::redis_cell(
            name,
            self.max_burst,
            self.count,
            Duration::from_secs(self.period),
        )
        .expect("a valid redis_cell policy")
    }
}

/// One user key of a workload.
pub(crate) struct Key {
    pub(crate) user: Vec<u8>,
    /// One of the attack mix's keys checked far past their quota.
    pub(crate) attacker: bool,
}

pub(crate) struct Workload {
    pub(crate) label: &'static str,
    /// Short, for policy names and the cells' Redis keys.
    pub(crate) id: &'static str,
    pub(crate) quota: CellQuota,
    /// Call `i` checks `keys[i % len]`.
    pub(crate) keys: Vec<Key>,
}

impl Workload {
    pub(crate) fn uniform(
        label: &'static str,
        id: &'static str,
        quota: CellQuota,
        n: usize,
    ) -> Self {
        let keys = (0..n)
            .map(|i| Key {
                user: format!("user-{i:05}").into_bytes(),
                attacker: false,
            })
            .collect();
        Workload {
            label,
            id,
            quota,
            keys,
        }
    }

    pub(crate) fn hot(label: &'static str, id: &'static str, quota: CellQuota) -> Self {
        let keys = vec![Key {
            user: b"203.0.113.7".to_vec(),
            attacker: false,
        }];
        Workload {
            label,
            id,
            quota,
            keys,
        }
    }

    /// `draws` calls over `n` keys drawn from a Zipf distribution of `exponent` (key `i`
    /// about `1 / i^exponent` as often as the first), seeded: the same sequence every run.
    /// Skewed traffic, as real clients are: a batch holds a few keys several times.
    pub(crate) fn zipf(
        label: &'static str,
        id: &'static str,
        quota: CellQuota,
        n: usize,
        exponent: f64,
        draws: usize,
    ) -> Self {
        use rand::{Rng, SeedableRng};
        let zipf = rand_distr::Zipf::new(n as f64, exponent).expect("a valid Zipf distribution");
        let mut rng = rand::rngs::StdRng::seed_from_u64(0x5eed);
        let keys = (0..draws)
            .map(|_| Key {
                // Ranks run from 1 to n.
                user: format!("user-{:05}", rng.sample(zipf) as usize - 1).into_bytes(),
                attacker: false,
            })
            .collect();
        Workload {
            label,
            id,
            quota,
            keys,
        }
    }

    /// `attackers` keys taking `attack_share` of every 10 calls in turn, the other calls
    /// going to `normal` keys in turn.
    pub(crate) fn attack(
        label: &'static str,
        id: &'static str,
        quota: CellQuota,
        attackers: usize,
        normal: usize,
        attack_share: usize,
    ) -> Self {
        let mut keys = Vec::with_capacity(normal * 10 / (10 - attack_share));
        let (mut a, mut n) = (0, 0);
        while n < normal {
            for slot in 0..10 {
                keys.push(if slot < attack_share {
                    a += 1;
                    Key {
                        user: format!("attacker-{:03}", a % attackers).into_bytes(),
                        attacker: true,
                    }
                } else {
                    n += 1;
                    Key {
                        user: format!("user-{:05}", n - 1).into_bytes(),
                        attacker: false,
                    }
                });
            }
        }
        Workload {
            label,
            id,
            quota,
            keys,
        }
    }
}

/// A limiter ready to drive one workload: the call and the keys it is made with.
#[derive(Clone)]
pub(crate) struct Target {
    limiter: Limiter,
    /// What the call takes: the user key for floodwall, the Redis key for `CL.THROTTLE`.
    keys: Arc<Vec<Vec<u8>>>,
    attacker: Arc<Vec<bool>>,
}

#[derive(Clone)]
enum Limiter {
    Cell {
        conn: ConnectionManager,
        quota: CellQuota,
    },
    Floodwall {
        store: RedisStore,
        policy: Arc<Policy>,
    },
}

impl Target {
    /// `CL.THROTTLE` on `conn`, on keys of their own (`cell:<workload>:<user key>`).
    pub(crate) fn cell(conn: &ConnectionManager, w: &Workload) -> Self {
        let keys = w
            .keys
            .iter()
            .map(|k| [format!("cell:{}:", w.id).as_bytes(), &k.user].concat())
            .collect();
        Target::new(
            Limiter::Cell {
                conn: conn.clone(),
                quota: w.quota,
            },
            keys,
            w,
        )
    }

    /// `store.check` under the policy equivalent to the workload's quota, named `policy`
    /// (each row its own name, so its own Redis keys).
    pub(crate) fn floodwall(store: &RedisStore, policy: &str, w: &Workload) -> Self {
        let keys = w.keys.iter().map(|k| k.user.clone()).collect();
        let limiter = Limiter::Floodwall {
            store: store.clone(),
            policy: Arc::new(w.quota.policy(policy)),
        };
        Target::new(limiter, keys, w)
    }

    fn new(limiter: Limiter, keys: Vec<Vec<u8>>, w: &Workload) -> Self {
        Target {
            limiter,
            keys: Arc::new(keys),
            attacker: Arc::new(w.keys.iter().map(|k| k.attacker).collect()),
        }
    }

    /// One check of the workload's key `i`: whether it was allowed, and the `CL.THROTTLE`
    /// reply (`limited, limit, remaining, retry_after, reset_after`) or the floodwall
    /// decision in those terms, for the equivalence check.
    pub(crate) async fn check(&mut self, i: usize) -> [i64; 5] {
        let key = &self.keys[i];
        match &mut self.limiter {
            Limiter::Cell { conn, quota } => {
                let (limited, limit, remaining, retry, reset) = redis::cmd("CL.THROTTLE")
                    .arg(key)
                    .arg(quota.max_burst)
                    .arg(quota.count)
                    .arg(quota.period)
                    .arg(1)
                    .query_async(conn)
                    .await
                    .unwrap_or_else(|e| panic!("CL.THROTTLE failed: {e}"));
                [limited, limit, remaining, retry, reset]
            }
            Limiter::Floodwall { store, policy } => {
                let d = store
                    .check(key, policy, 1)
                    .await
                    .unwrap_or_else(|e| panic!("check failed: {e}"));
                let secs = |d: Duration| d.as_secs() as i64;
                [
                    i64::from(!d.is_allowed()),
                    d.limit as i64,
                    d.remaining as i64,
                    d.retry_after.map_or(-1, secs),
                    secs(d.reset_after),
                ]
            }
        }
    }
}

/// What one drive measured.
#[derive(Debug, Default)]
pub(crate) struct Outcome {
    pub(crate) wall: Duration,
    pub(crate) allowed: u64,
    pub(crate) attacker_checks: u64,
    pub(crate) attacker_allowed: u64,
    /// Each call's wall time in nanoseconds, if timed.
    pub(crate) times: Vec<u32>,
}

/// Runs `iters` checks split over `tasks` tasks; call `i` (from `start`) checks key
/// `i % keys`.
pub(crate) fn drive(
    rt: &Runtime,
    target: &Target,
    tasks: usize,
    iters: u64,
    start: u64,
    timed: bool,
) -> Outcome {
    let n = tasks as u64;
    let (wall, outs) = support::split_over_tasks(rt, tasks, iters, |t, count| {
        let mut target = target.clone();
        async move {
            let mut out = Outcome::default();
            if timed {
                out.times.reserve(count as usize);
            }
            let len = target.keys.len() as u64;
            for j in 0..count {
                let i = ((start + t + j * n) % len) as usize;
                let call = timed.then(Instant::now);
                let allowed = target.check(i).await[0] == 0;
                if let Some(call) = call {
                    out.times
                        .push(u32::try_from(call.elapsed().as_nanos()).unwrap_or(u32::MAX));
                }
                out.allowed += u64::from(allowed);
                if target.attacker[i] {
                    out.attacker_checks += 1;
                    out.attacker_allowed += u64::from(allowed);
                }
            }
            out
        }
    });
    let mut total = Outcome {
        wall,
        ..Outcome::default()
    };
    for out in outs {
        total.allowed += out.allowed;
        total.attacker_checks += out.attacker_checks;
        total.attacker_allowed += out.attacker_allowed;
        total.times.extend(out.times);
    }
    total
}
