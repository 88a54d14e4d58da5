//! A real Redis Cluster made of `redis-server` child processes.

use std::io;
use std::thread;
use std::time::{Duration, Instant};

use crate::resp::Reply;
use crate::server::{Mode, RedisServer};
use crate::slot::{SLOT_COUNT, key_slot};

/// How long a new or repaired cluster gets to report `cluster_state:ok`.
/// Redis itself holds a master's state at `fail` for 2 s after it starts.
const CLUSTER_OK_TIMEOUT: Duration = Duration::from_secs(20);

/// A Redis Cluster of `masters` master nodes and no replicas, each a
/// [`RedisServer`] on its own free loopback port and temp directory.
///
/// Rate limiters sharded over a cluster must route each key to the node
/// that owns its slot and survive `MOVED`/`CLUSTERDOWN`; only a real
/// cluster shows whether they do. Slots are split evenly and in order:
/// node 0 owns the lowest range. Dropping the cluster stops every node.
#[derive(Debug)]
pub struct RedisCluster {
    nodes: Vec<RedisServer>,
}

/// Check that a setup command answered `OK`.
fn expect_ok(node: &RedisServer, args: &[&str]) -> io::Result<()> {
    match node.try_cmd(args)? {
        Reply::Status(s) if s == "OK" => Ok(()),
        other => Err(io::Error::other(format!(
            "{args:?} on port {} answered {other:?}",
            node.port()
        ))),
    }
}

fn as_port(reply: &Reply) -> Option<u16> {
    reply.as_integer().and_then(|n| u16::try_from(n).ok())
}

impl RedisCluster {
    /// Start a cluster of `masters` masters (3 is the usual choice) and
    /// wait until every node reports `cluster_state:ok` with all 16384
    /// slots assigned.
    ///
    /// # Panics
    ///
    /// If `masters` is 0, if a node fails to start, or if the cluster is
    /// not healthy within 20 s; the message says which node and why.
    pub fn start(masters: usize) -> RedisCluster {
        Self::start_with(masters, &[])
    }

    /// [`start`](Self::start) with extra `redis-server` arguments for every
    /// node, e.g. `&["--cluster-require-full-coverage", "no"]`.
    ///
    /// # Panics
    ///
    /// As [`start`](Self::start).
    pub fn start_with(masters: usize, args: &[&str]) -> RedisCluster {
        Self::try_start_with(masters, args).unwrap_or_else(|e| panic!("redis-harness: {e}"))
    }

    /// Like [`start_with`](Self::start_with), but returns an error instead
    /// of panicking. Nodes started before the error are stopped.
    ///
    /// The cluster is assembled directly (`CLUSTER ADDSLOTSRANGE`,
    /// `CLUSTER SET-CONFIG-EPOCH`, `CLUSTER MEET`), which is what
    /// `redis-cli --cluster create` does, but works for any number of
    /// masters (redis-cli insists on 3 or more) and parses no tool output.
    pub fn try_start_with(masters: usize, args: &[&str]) -> io::Result<RedisCluster> {
        if masters == 0 || masters > usize::from(SLOT_COUNT) {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("a cluster needs 1..=16384 masters, not {masters}"),
            ));
        }
        let nodes = (0..masters)
            .map(|_| RedisServer::try_start_inner(args, &Mode::Cluster))
            .collect::<io::Result<Vec<_>>>()?;
        let cluster = RedisCluster { nodes };

        let total = usize::from(SLOT_COUNT);
        for (i, node) in cluster.nodes.iter().enumerate() {
            let first = i * total / masters;
            let last = (i + 1) * total / masters - 1;
            expect_ok(
                node,
                &[
                    "CLUSTER",
                    "ADDSLOTSRANGE",
                    &first.to_string(),
                    &last.to_string(),
                ],
            )?;
            // Distinct epochs up front, so nodes need not resolve
            // collisions by gossip (redis-cli does the same).
            expect_ok(node, &["CLUSTER", "SET-CONFIG-EPOCH", &(i + 1).to_string()])?;
        }
        // Every pair meets directly instead of waiting for gossip to
        // introduce them, which takes seconds.
        for (i, a) in cluster.nodes.iter().enumerate() {
            for b in &cluster.nodes[i + 1..] {
                let port = b.port().to_string();
                let bus = b.cluster_bus_port().map(|p| p.to_string());
                let mut meet = vec!["CLUSTER", "MEET", "127.0.0.1", &port];
                meet.extend(bus.as_deref());
                expect_ok(a, &meet)?;
            }
        }
        cluster.try_wait_until_ok(CLUSTER_OK_TIMEOUT)?;
        Ok(cluster)
    }

    /// Why the cluster is not healthy yet, or `None` if it is: every node
    /// running and reporting `cluster_state:ok`, all slots assigned and
    /// all nodes known.
    fn unhealthy_reason(&self) -> Option<String> {
        let known = format!("cluster_known_nodes:{}", self.nodes.len());
        let assigned = format!("cluster_slots_assigned:{SLOT_COUNT}");
        for (i, node) in self.nodes.iter().enumerate() {
            if !node.is_running() {
                return Some(format!("node {i} (port {}) is not running", node.port()));
            }
            let info = match node.try_cmd(&["CLUSTER", "INFO"]) {
                Ok(reply) => reply.to_string(),
                Err(e) => return Some(format!("node {i} (port {}): {e}", node.port())),
            };
            let has = |want: &str| info.lines().any(|l| l.trim() == want);
            if !(has("cluster_state:ok") && has(&assigned) && has(&known)) {
                return Some(format!(
                    "node {i} (port {}) reports:\n{}",
                    node.port(),
                    info.trim()
                ));
            }
        }
        None
    }

    /// Wait until every node reports `cluster_state:ok`, all 16384 slots
    /// assigned and all nodes known, e.g. after restarting a node.
    ///
    /// # Panics
    ///
    /// If that does not happen within `timeout`, quoting the last
    /// `CLUSTER INFO` of the first unhappy node.
    pub fn wait_until_ok(&self, timeout: Duration) {
        self.try_wait_until_ok(timeout)
            .unwrap_or_else(|e| panic!("redis-harness: {e}"));
    }

    fn try_wait_until_ok(&self, timeout: Duration) -> io::Result<()> {
        let deadline = Instant::now() + timeout;
        loop {
            let Some(reason) = self.unhealthy_reason() else {
                return Ok(());
            };
            if Instant::now() >= deadline {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("cluster not healthy after {timeout:?}: {reason}"),
                ));
            }
            thread::sleep(Duration::from_millis(50));
        }
    }

    /// The nodes, in slot order: node `i` owns the `i`-th range of slots
    /// (until a test moves slots itself).
    pub fn nodes(&self) -> &[RedisServer] {
        &self.nodes
    }

    /// One node, e.g. to run a command on it or read its log.
    ///
    /// # Panics
    ///
    /// If `i` is out of range.
    pub fn node(&self, i: usize) -> &RedisServer {
        &self.nodes[i]
    }

    /// Connection URLs of all nodes (`redis://127.0.0.1:PORT/`), the seed
    /// list a cluster client takes.
    pub fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(RedisServer::url).collect()
    }

    /// Ports of all nodes, in node order.
    pub fn ports(&self) -> Vec<u16> {
        self.nodes.iter().map(RedisServer::port).collect()
    }

    /// Crash master `i` with SIGKILL (see [`RedisServer::kill`]). With the
    /// default full-coverage setting the cluster goes to `fail` once the
    /// others notice (after the 2 s node timeout).
    ///
    /// # Panics
    ///
    /// If `i` is out of range.
    pub fn kill_master(&mut self, i: usize) {
        self.nodes[i].kill();
    }

    /// Restart master `i` on its old port and directory; it rejoins with
    /// the same node ID and slots (from `nodes.conf`) but no data. If every
    /// node is then running, waits until the whole cluster is healthy again.
    ///
    /// # Panics
    ///
    /// If `i` is out of range, the node does not come back, or the cluster
    /// is not healthy again within 20 s.
    pub fn restart_master(&mut self, i: usize) {
        self.nodes[i].restart();
        if self.nodes.iter().all(RedisServer::is_running) {
            self.wait_until_ok(CLUSTER_OK_TIMEOUT);
        }
    }

    /// Slot ranges as `(first, last, port of the owner)`, from
    /// `CLUSTER SLOTS` on the first running node.
    ///
    /// # Panics
    ///
    /// If no node is running or the reply cannot be understood.
    pub fn slot_ranges(&self) -> Vec<(u16, u16, u16)> {
        let mut last_error = String::from("no node is running");
        for node in self.nodes.iter().filter(|n| n.is_running()) {
            match node.try_cmd(&["CLUSTER", "SLOTS"]) {
                Ok(Reply::Array(ranges)) => {
                    return ranges
                        .iter()
                        .map(|range| {
                            let parts = range.as_array().unwrap_or_default();
                            let owner = parts.get(2).and_then(Reply::as_array).unwrap_or_default();
                            match (
                                parts.first().and_then(as_port),
                                parts.get(1).and_then(as_port),
                                owner.get(1).and_then(as_port),
                            ) {
                                (Some(first), Some(last), Some(port)) => (first, last, port),
                                _ => panic!(
                                    "redis-harness: unexpected CLUSTER SLOTS entry {range:?}"
                                ),
                            }
                        })
                        .collect();
                }
                other => last_error = format!("port {}: {other:?}", node.port()),
            }
        }
        panic!("redis-harness: cannot read CLUSTER SLOTS: {last_error}")
    }

    /// Port of the master that owns `slot`, as the cluster itself reports.
    ///
    /// # Panics
    ///
    /// If no node is running or no node owns the slot.
    pub fn slot_owner(&self, slot: u16) -> u16 {
        self.slot_ranges()
            .into_iter()
            .find(|&(first, last, _)| (first..=last).contains(&slot))
            .map(|(_, _, port)| port)
            .unwrap_or_else(|| panic!("redis-harness: no node owns slot {slot}"))
    }

    /// Index (into [`nodes`](Self::nodes)) of the node that owns `key`,
    /// so a test can send a command straight to it or check where a key
    /// went.
    ///
    /// # Panics
    ///
    /// As [`slot_owner`](Self::slot_owner), or if the owner is not one of
    /// this cluster's nodes.
    pub fn node_for_key(&self, key: &[u8]) -> usize {
        let port = self.slot_owner(key_slot(key));
        self.nodes
            .iter()
            .position(|n| n.port() == port)
            .unwrap_or_else(|| panic!("redis-harness: slot owner port {port} is not ours"))
    }

    /// Number of keys on each node (`DBSIZE`), in node order, so a test can
    /// check that its keys spread over all masters. Stopped nodes count 0.
    ///
    /// # Panics
    ///
    /// If a running node does not answer `DBSIZE` with an integer.
    pub fn keys_per_node(&self) -> Vec<u64> {
        self.nodes
            .iter()
            .map(|node| {
                if !node.is_running() {
                    return 0;
                }
                match node.try_cmd(&["DBSIZE"]) {
                    Ok(Reply::Integer(n)) => u64::try_from(n).unwrap_or(0),
                    other => panic!(
                        "redis-harness: DBSIZE on port {} answered {other:?}",
                        node.port()
                    ),
                }
            })
            .collect()
    }
}
