//! What a row measured: Redis's `INFO commandstats` for the row's window, and the CPU time
//! of redis-server's main thread and of the client while it ran.

use std::path::PathBuf;

use redis_harness::RedisServer;

use crate::support;

/// What one row measured; added up over the halves of a ceiling row.
#[derive(Debug, Default, Clone, Copy)]
pub(crate) struct Stats {
    /// Checks the client made (and, for floodwall, wall time spent making them).
    pub(crate) decisions: u64,
    pub(crate) wall_ns: u64,
    /// From `INFO commandstats`.
    pub(crate) evalsha_calls: u64,
    pub(crate) evalsha_usec: u64,
    pub(crate) evalsha_failed: u64,
    pub(crate) ping_calls: u64,
    pub(crate) set_calls: u64,
    /// CPU of redis-server's main thread and of the client, while checks ran.
    pub(crate) server_ns: u64,
    pub(crate) client_ns: u64,
    /// Decisions the store answered as allowed (floodwall rows only).
    pub(crate) allowed: u64,
}

impl std::ops::AddAssign for Stats {
    fn add_assign(&mut self, o: Self) {
        self.decisions += o.decisions;
        self.wall_ns += o.wall_ns;
        self.evalsha_calls += o.evalsha_calls;
        self.evalsha_usec += o.evalsha_usec;
        self.evalsha_failed += o.evalsha_failed;
        self.ping_calls += o.ping_calls;
        self.set_calls += o.set_calls;
        self.server_ns += o.server_ns;
        self.client_ns += o.client_ns;
        self.allowed += o.allowed;
    }
}

impl Stats {
    pub(crate) fn usec_per_call(&self) -> Option<f64> {
        (self.evalsha_calls > 0).then(|| self.evalsha_usec as f64 / self.evalsha_calls as f64)
    }

    pub(crate) fn per_decision_us(&self, ns: u64) -> Option<f64> {
        (ns > 0 && self.decisions > 0).then(|| ns as f64 / self.decisions as f64 / 1e3)
    }

    pub(crate) fn pings_per_decision(&self) -> Option<f64> {
        (self.evalsha_calls > 0).then(|| self.ping_calls as f64 / self.evalsha_calls as f64)
    }

    pub(crate) fn server_busy_pct(&self) -> Option<f64> {
        (self.wall_ns > 0 && self.server_ns > 0)
            .then(|| 100.0 * self.server_ns as f64 / self.wall_ns as f64)
    }

    /// Folds in `INFO commandstats` read at the end of a window opened by `CONFIG RESETSTAT`.
    pub(crate) fn add_commandstats(&mut self, server: &RedisServer) {
        let text = server.cmd(&["INFO", "commandstats"]);
        let stats = support::commandstats(&text);
        let get = |cmd: &str, field: &str| {
            stats
                .get(cmd)
                .and_then(|f| f.get(field))
                .map_or(0, |v| v.parse::<f64>().map_or(0, |v| v as u64))
        };
        self.evalsha_calls += get("evalsha", "calls");
        self.evalsha_usec += get("evalsha", "usec");
        self.evalsha_failed += get("evalsha", "failed_calls") + get("evalsha", "rejected_calls");
        self.ping_calls += get("ping", "calls");
        self.set_calls += get("set", "calls");
    }
}

/// CPU time of redis-server's main thread, which runs every command and does the socket I/O
/// (I/O threads are off by default).
pub(crate) fn server_cpu_ns(server: &RedisServer) -> u64 {
    support::schedstat_ns(&PathBuf::from(format!("/proc/{}/schedstat", server.pid()))).unwrap_or(0)
}

/// CPU time of every thread of this process.
pub(crate) fn own_cpu_ns() -> u64 {
    support::own_cpu_ns()
}
