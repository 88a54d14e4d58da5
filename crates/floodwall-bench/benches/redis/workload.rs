//! The workloads (a quota and the keys it is checked on) and the tokio tasks that drive
//! `RedisStore::check` through them.

use std::sync::Arc;
use std::time::{Duration, Instant};

use floodwall::redis::RedisStore;
use floodwall::{Policy, Quota, StoreExt};
use floodwall_bench as support;
use tokio::runtime::Runtime;

use crate::{ALLOWED, DENIED, HOT_KEY, KEYS, TASKS};

pub(crate) struct Workload {
    /// Criterion group name.
    pub(crate) group: &'static str,
    pub(crate) label: &'static str,
    pub(crate) policy: Arc<Policy>,
    /// User keys: call `i` uses `keys[i % len]`.
    pub(crate) keys: Arc<Vec<Vec<u8>>>,
    pub(crate) allowed: bool,
}

impl Workload {
    pub(crate) fn new(group: &'static str, label: &'static str, allowed: bool, many: bool) -> Self {
        let (name, quota) = if allowed {
            ("bench", ALLOWED)
        } else {
            ("bench-denied", DENIED)
        };
        Workload::with_quota(group, label, name, quota, allowed, many)
    }

    /// A workload on `quota`; `allowed`: the quota never refuses here.
    pub(crate) fn with_quota(
        group: &'static str,
        label: &'static str,
        name: &str,
        quota: &str,
        allowed: bool,
        many: bool,
    ) -> Self {
        let quota: Quota = quota.parse().expect("the bench quota parses");
        let policy = Policy::gcra(name, quota).expect("a valid GCRA policy");
        let keys = if many {
            (0..KEYS).map(|i| format!("{i:012}").into_bytes()).collect()
        } else {
            vec![HOT_KEY.as_bytes().to_vec()]
        };
        Workload {
            group,
            label,
            policy: Arc::new(policy),
            keys: Arc::new(keys),
            allowed,
        }
    }

    pub(crate) fn many(&self) -> bool {
        self.keys.len() > 1
    }

    /// The arguments after `EVALSHA <sha>` that the store sends for a check of cost 1 on the
    /// server's clock (the key count and the key; see `Single::invocation` in
    /// floodwall-redis), with redis-benchmark's `__rand_int__` as the user key when there
    /// are many keys.
    pub(crate) fn evalsha_args(&self, store: &RedisStore) -> Vec<String> {
        let user_key: &[u8] = if self.many() {
            b"__rand_int__"
        } else {
            HOT_KEY.as_bytes()
        };
        let key = String::from_utf8(store.redis_key(user_key, &self.policy)).expect("UTF-8");
        // Cost 1 on the server's clock: no argument (the parameters are in the script).
        vec!["1".into(), key]
    }
}

/// Runs `iters` checks split over [`TASKS`] tasks; call `i` (from `start`) uses key
/// `i % keys`. Returns the wall time and how many were allowed.
pub(crate) fn drive(
    rt: &Runtime,
    store: &RedisStore,
    w: &Workload,
    iters: u64,
    start: u64,
) -> (Duration, u64) {
    let (wall, allowed, _) = drive_tasks(rt, store, w, TASKS, iters, start, false);
    (wall, allowed)
}

/// Runs `iters` checks split over `tasks` tasks; call `i` (from `start`) uses key
/// `i % keys`. Returns the wall time, how many were allowed and, if `timed`, each call's
/// wall time in nanoseconds.
pub(crate) fn drive_tasks(
    rt: &Runtime,
    store: &RedisStore,
    w: &Workload,
    tasks: usize,
    iters: u64,
    start: u64,
    timed: bool,
) -> (Duration, u64, Vec<u32>) {
    let n = tasks as u64;
    let (wall, outs) = support::split_over_tasks(rt, tasks, iters, |t, count| {
        let (store, policy, keys) = (store.clone(), w.policy.clone(), w.keys.clone());
        async move {
            let mut allowed = 0;
            let mut times = Vec::with_capacity(if timed { count as usize } else { 0 });
            for j in 0..count {
                let i = start + t + j * n;
                let key = &keys[(i % keys.len() as u64) as usize];
                let call = timed.then(Instant::now);
                let d = store
                    .check(key, &policy, 1)
                    .await
                    .unwrap_or_else(|e| panic!("check failed: {e}"));
                if let Some(call) = call {
                    times.push(u32::try_from(call.elapsed().as_nanos()).unwrap_or(u32::MAX));
                }
                allowed += u64::from(d.is_allowed());
            }
            (allowed, times)
        }
    });
    let mut allowed = 0;
    let mut times = Vec::new();
    for (n, t) in outs {
        allowed += n;
        times.extend(t);
    }
    (wall, allowed, times)
}
