//! A primary, its replicas and Redis Sentinels watching them, as child processes.

use std::collections::HashMap;
use std::io;
use std::thread;
use std::time::{Duration, Instant};

use crate::resp::Reply;
use crate::server::{Mode, RedisServer};

/// How long a new deployment gets until every sentinel knows every replica (and, with
/// several sentinels, each other: they announce themselves every 2 s).
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// Pause between probes.
const POLL_INTERVAL: Duration = Duration::from_millis(20);

/// A primary and `replicas` replicas of it, each a [`RedisServer`] on its own free loopback
/// port, watched by `sentinels` Redis Sentinels (`redis-server --sentinel`, each with a
/// config file in its own temp directory) under the service name
/// [`SERVICE`](Self::SERVICE).
///
/// Sentinel's timing comes from [`down_after`](Self::down_after) (how long the primary may
/// be silent before a sentinel deems it down) and
/// [`failover_timeout`](Self::failover_timeout); [`start`](Self::start) uses short ones
/// (500 ms and 2 s) so a failover takes a second or two. The quorum is a majority of the
/// sentinels. Dropping the deployment stops every process.
///
/// ```no_run
/// let mut deployment = redis_harness::RedisSentinel::start(1, 1);
/// let old = deployment.primary_port();
/// deployment.kill_primary();
/// let new = deployment.wait_for_failover(old, std::time::Duration::from_secs(10));
/// assert_ne!(old, new);
/// ```
#[derive(Debug)]
pub struct RedisSentinel {
    /// Node 0 starts as the primary; sentinel may promote another.
    nodes: Vec<RedisServer>,
    sentinels: Vec<RedisServer>,
    down_after: Duration,
    failover_timeout: Duration,
}

/// `SENTINEL MASTERS`/`REPLICAS` entries: flat arrays of field names and values.
fn fields(entry: &Reply) -> HashMap<String, String> {
    let items = entry.as_array().unwrap_or_default();
    items
        .chunks(2)
        .filter_map(|kv| match kv {
            [k, v] => Some((k.to_string(), v.to_string())),
            _ => None,
        })
        .collect()
}

/// A replication offset from `INFO replication`.
fn repl_offset(node: &RedisServer, field: &str) -> Option<u64> {
    let info = node.try_cmd(&["INFO", "replication"]).ok()?.to_string();
    info.lines().find_map(|l| {
        l.trim()
            .strip_prefix(field)?
            .strip_prefix(':')?
            .parse()
            .ok()
    })
}

impl RedisSentinel {
    /// The name the sentinels monitor the primary under (`sentinel monitor <name> ...`),
    /// which clients ask them about.
    pub const SERVICE: &'static str = "floodwall-primary";

    /// Start a primary with `replicas` replicas and `sentinels` sentinels, with
    /// `down-after-milliseconds` 500 and `failover-timeout` 2000, and wait until every
    /// replica is in sync and every sentinel knows them all.
    ///
    /// # Panics
    ///
    /// If `replicas` or `sentinels` is 0, if a process fails to start, or if the
    /// deployment is not ready within 20 s; the message says why.
    pub fn start(replicas: usize, sentinels: usize) -> RedisSentinel {
        Self::start_with(
            replicas,
            sentinels,
            Duration::from_millis(500),
            Duration::from_millis(2000),
        )
    }

    /// [`start`](Self::start) with sentinel's `down-after-milliseconds` and
    /// `failover-timeout` given.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub fn start_with(
        replicas: usize,
        sentinels: usize,
        down_after: Duration,
        failover_timeout: Duration,
    ) -> RedisSentinel {
        Self::try_start_with(replicas, sentinels, down_after, failover_timeout)
            .unwrap_or_else(|e| panic!("redis-harness: {e}"))
    }

    /// Like [`start_with`](Self::start_with), but returns an error instead of panicking.
    /// Processes started before the error are stopped.
    pub fn try_start_with(
        replicas: usize,
        sentinels: usize,
        down_after: Duration,
        failover_timeout: Duration,
    ) -> io::Result<RedisSentinel> {
        if replicas == 0 || sentinels == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a failover needs at least one replica and one sentinel",
            ));
        }
        // Redis 7 waits 5 s before a diskless full sync, for more replicas to join it.
        let no_delay = ["--repl-diskless-sync-delay", "0"];
        let primary = RedisServer::try_start_with(&no_delay)?;
        let port = primary.port().to_string();
        let mut nodes = vec![primary];
        for _ in 0..replicas {
            let replica = [&no_delay[..], &["--replicaof", "127.0.0.1", &port]].concat();
            nodes.push(RedisServer::try_start_with(&replica)?);
        }
        let mut deployment = RedisSentinel {
            nodes,
            sentinels: Vec::new(),
            down_after,
            failover_timeout,
        };
        // Sentinels learn the replicas from the primary's INFO when they connect, so
        // the replicas are attached first.
        deployment.wait_until(READY_TIMEOUT, |d| d.replicas_not_in_sync())?;
        let config = format!(
            "sentinel monitor {name} 127.0.0.1 {port} {quorum}\n\
             sentinel down-after-milliseconds {name} {down}\n\
             sentinel failover-timeout {name} {failover}\n",
            name = Self::SERVICE,
            quorum = sentinels / 2 + 1,
            down = down_after.as_millis(),
            failover = failover_timeout.as_millis(),
        );
        for _ in 0..sentinels {
            let sentinel = RedisServer::try_start_inner(&[], &Mode::Sentinel(&config))?;
            deployment.sentinels.push(sentinel);
        }
        deployment.wait_until(READY_TIMEOUT, |d| d.sentinels_not_ready())?;
        Ok(deployment)
    }

    /// Polls `reason` until it says nothing is wrong, or fails with its last answer.
    fn wait_until(
        &self,
        timeout: Duration,
        reason: impl Fn(&Self) -> Option<String>,
    ) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let Some(why) = reason(self) else {
                return Ok(());
            };
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("sentinel deployment not ready after {timeout:?}: {why}"),
                ));
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Why some replica is not in sync with the primary yet, or `None`. The primary's
    /// view decides: after a full sync a replica reports its link up at once, but the
    /// primary streams it writes only once it has acknowledged the sync (within 1 s).
    fn replicas_not_in_sync(&self) -> Option<String> {
        let primary = &self.nodes[0];
        let info = match primary.try_cmd(&["INFO", "replication"]) {
            Ok(reply) => reply.to_string(),
            Err(e) => return Some(format!("primary on port {}: {e}", primary.port())),
        };
        let online = info
            .lines()
            .filter(|l| l.starts_with("slave") && l.contains("state=online"))
            .count();
        if online < self.nodes.len() - 1 {
            return Some(format!(
                "primary on port {} has {online} of {} replicas online:\n{}",
                primary.port(),
                self.nodes.len() - 1,
                info.trim()
            ));
        }
        None
    }

    /// Why some sentinel cannot run a failover yet (a replica it does not know or has not
    /// reached, another sentinel it has not heard of), or `None`.
    fn sentinels_not_ready(&self) -> Option<String> {
        for sentinel in &self.sentinels {
            let port = sentinel.port();
            let replicas = match sentinel.try_cmd(&["SENTINEL", "REPLICAS", Self::SERVICE]) {
                Ok(Reply::Array(entries)) => entries,
                other => return Some(format!("sentinel on port {port}: {other:?}")),
            };
            let ready = replicas
                .iter()
                .map(fields)
                .filter(|r| {
                    let flags = r.get("flags").map_or("", String::as_str);
                    flags.contains("slave")
                        && !flags.contains("disconnected")
                        && !flags.contains("s_down")
                        && r.get("master-link-status").map(String::as_str) == Some("ok")
                })
                .count();
            if ready < self.nodes.len() - 1 {
                return Some(format!(
                    "sentinel on port {port} knows {ready} of {} replicas",
                    self.nodes.len() - 1
                ));
            }
            let master = match sentinel.try_cmd(&["SENTINEL", "MASTER", Self::SERVICE]) {
                Ok(reply) => fields(&reply),
                Err(e) => return Some(format!("sentinel on port {port}: {e}")),
            };
            let others = master
                .get("num-other-sentinels")
                .and_then(|n| n.parse::<usize>().ok());
            if others != Some(self.sentinels.len() - 1) {
                return Some(format!(
                    "sentinel on port {port} knows {others:?} other sentinels of {}",
                    self.sentinels.len() - 1
                ));
            }
        }
        None
    }

    /// The data nodes: node 0 started as the primary, the others as its replicas.
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// The sentinels.
    pub fn sentinels(&self) -> &[RedisServer] {
        &self.sentinels
    }

    /// The sentinels' URLs (`redis://127.0.0.1:PORT/`), which a sentinel client takes.
    pub fn sentinel_urls(&self) -> Vec<String> {
        self.sentinels.iter().map(RedisServer::url).collect()
    }

    /// Sentinel's `down-after-milliseconds`.
    pub fn down_after(&self) -> Duration {
        self.down_after
    }

    /// Sentinel's `failover-timeout`.
    pub fn failover_timeout(&self) -> Duration {
        self.failover_timeout
    }

    /// The primary's port as the first sentinel that answers reports it
    /// (`SENTINEL GET-MASTER-ADDR-BY-NAME`).
    ///
    /// # Panics
    ///
    /// If no sentinel answers with an address.
    pub fn primary_port(&self) -> u16 {
        let mut last = String::from("no sentinel is running");
        for sentinel in self.sentinels.iter().filter(|s| s.is_running()) {
            let reply = sentinel.try_cmd(&["SENTINEL", "GET-MASTER-ADDR-BY-NAME", Self::SERVICE]);
            match reply.as_ref().ok().and_then(Reply::as_array) {
                Some([_, port]) => {
                    if let Some(port) = port.as_integer().and_then(|p| u16::try_from(p).ok()) {
                        return port;
                    }
                }
                _ => last = format!("sentinel on port {}: {reply:?}", sentinel.port()),
            }
        }
        panic!("redis-harness: cannot ask sentinel for the primary: {last}")
    }

    /// Index (into [`nodes`](Self::nodes)) of the node the sentinels name primary.
    ///
    /// # Panics
    ///
    /// As [`primary_port`](Self::primary_port), or if that port is not one of ours.
    pub fn primary_index(&self) -> usize {
        let port = self.primary_port();
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .unwrap_or_else(|| panic!("redis-harness: primary port {port} is not ours"))
    }

    /// The node the sentinels name primary.
    ///
    /// # Panics
    ///
    /// As [`primary_index`](Self::primary_index).
    pub fn primary(&self) -> &RedisServer {
        &self.nodes[self.primary_index()]
    }

    /// Waits until every running replica has applied all the primary has written so far
    /// (its `slave_repl_offset` has reached the primary's `master_repl_offset`) and returns
    /// how many have, at most `timeout` later. (`WAIT` would not do: it counts only the
    /// writes of its own connection, and [`RedisServer::cmd`] opens one per command.)
    ///
    /// # Panics
    ///
    /// If the primary cannot be reached.
    pub fn wait_replicated(&self, timeout: Duration) -> usize {
        let primary = self.primary_index();
        let target = repl_offset(&self.nodes[primary], "master_repl_offset").unwrap_or_else(|| {
            panic!("redis-harness: the primary does not report master_repl_offset")
        });
        let deadline = Instant::now() + timeout;
        loop {
            let done = self
                .nodes
                .iter()
                .enumerate()
                .filter(|&(i, node)| {
                    i != primary
                        && node.is_running()
                        && repl_offset(node, "slave_repl_offset").is_some_and(|o| o >= target)
                })
                .count();
            if done == self.nodes.len() - 1 || Instant::now() >= deadline {
                return done;
            }
            thread::sleep(POLL_INTERVAL);
        }
    }

    /// Crash the primary with SIGKILL (see [`RedisServer::kill`]) and return its index.
    /// The sentinels promote a replica once it has been silent for
    /// [`down_after`](Self::down_after).
    ///
    /// # Panics
    ///
    /// As [`primary_index`](Self::primary_index).
    pub fn kill_primary(&mut self) -> usize {
        let i = self.primary_index();
        self.nodes[i].kill();
        i
    }

    /// Ask the first sentinel for a failover without a failure (`SENTINEL FAILOVER`): it
    /// promotes a replica and turns the old primary, still running, into its replica.
    ///
    /// # Panics
    ///
    /// If the sentinel refuses (a failover already under way, no replica fit).
    pub fn failover(&self) {
        let reply = self.sentinels[0].cmd(&["SENTINEL", "FAILOVER", Self::SERVICE]);
        assert_eq!(
            reply, "OK",
            "redis-harness: SENTINEL FAILOVER answered {reply}"
        );
    }

    /// Waits until the sentinels name a primary other than `old_port`, and returns its
    /// port.
    ///
    /// # Panics
    ///
    /// If that does not happen within `timeout`, quoting the first sentinel's log.
    pub fn wait_for_failover(&self, old_port: u16, timeout: Duration) -> u16 {
        let deadline = Instant::now() + timeout;
        loop {
            let port = self.primary_port();
            if port != old_port {
                return port;
            }
            if Instant::now() >= deadline {
                panic!(
                    "redis-harness: no failover from port {old_port} within {timeout:?}; \
                     sentinel log:\n{}",
                    self.sentinels[0].log_tail()
                );
            }
            thread::sleep(POLL_INTERVAL);
        }
    }
}
