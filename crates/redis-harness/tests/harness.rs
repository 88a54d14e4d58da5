//! Integration tests: these start real `redis-server` processes.

use std::net::TcpStream;
use std::os::unix::ffi::OsStrExt;
use std::process::Command;
use std::time::{Duration, Instant};

use redis_harness::{RedisCluster, RedisSentinel, RedisServer, Reply, key_slot, query};

#[test]
fn server_ping_kill_restart_same_port() {
    let mut server = RedisServer::start();
    let port = server.port();
    assert_ne!(port, 6379, "must never use the default Redis port");
    assert_eq!(server.url(), format!("redis://127.0.0.1:{port}/"));
    assert!(server.is_running());
    assert_eq!(server.cmd(&["PING"]), "PONG");
    let first_pid = server.pid();

    assert_eq!(server.cmd(&["SET", "k", "v"]), "OK");
    assert_eq!(server.cmd(&["GET", "k"]), "v");
    assert_eq!(server.cmd(&["TTL", "k"]), "-1");
    assert!(server.try_cmd(&["GET", "missing"]).unwrap().is_nil());
    assert!(server.try_cmd(&["NOSUCHCOMMAND"]).unwrap().is_error());

    server.kill();
    assert!(!server.is_running());
    let refused = TcpStream::connect(("127.0.0.1", port));
    assert!(
        refused.is_err(),
        "port {port} still accepts connections after kill"
    );

    server.restart();
    assert_eq!(server.port(), port);
    assert_ne!(server.pid(), first_pid);
    assert!(server.is_running());
    assert_eq!(server.cmd(&["PING"]), "PONG");
    // No persistence: a restart comes back empty.
    assert_eq!(server.cmd(&["DBSIZE"]), "0");
}

#[test]
fn server_commands_pause_and_cleanup() {
    let server = RedisServer::start_with(&["--maxmemory", "10mb"]);
    assert_eq!(
        server.cmd(&["CONFIG", "GET", "maxmemory"]),
        "maxmemory\n10485760"
    );
    assert_eq!(server.cmd(&["SET", "k", "v", "EX", "100"]), "OK");
    let ttl: i64 = server.cmd(&["TTL", "k"]).parse().unwrap();
    assert!((99..=100).contains(&ttl), "ttl {ttl}");
    let usage: i64 = server.cmd(&["MEMORY", "USAGE", "k"]).parse().unwrap();
    assert!(usage > 0);
    assert_eq!(server.cmd(&["SCRIPT", "FLUSH"]), "OK");
    assert!(
        server
            .cmd(&["INFO", "commandstats"])
            .contains("cmdstat_set:calls=1")
    );
    assert_eq!(server.cmd(&["FLUSHALL"]), "OK");

    // CLIENT PAUSE ALL holds even reads for the given time.
    server.pause(300);
    let started = Instant::now();
    assert_eq!(server.cmd(&["PING"]), "PONG");
    assert!(started.elapsed() >= Duration::from_millis(200));

    // DEBUG SLEEP is enabled for local clients, and query() works from
    // another thread.
    let port = server.port();
    let sleeper = std::thread::spawn(move || query(port, &["DEBUG", "SLEEP", "0.2"]));
    assert_eq!(sleeper.join().unwrap().unwrap(), Reply::Status("OK".into()));

    let dir = server.dir().to_path_buf();
    let pid = server.pid();
    assert!(dir.exists());
    drop(server);
    assert!(!dir.exists(), "temp dir {} not removed", dir.display());
    assert!(
        !std::path::Path::new(&format!("/proc/{pid}")).exists(),
        "redis-server {pid} still alive after drop"
    );
}

#[test]
fn bad_config_fails_with_the_log_in_the_message() {
    let err = RedisServer::try_start_with(&["--no-such-option", "1"]).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("no-such-option"), "{msg}");
}

/// Ask `redis-cli` for the slot of a key, on a cluster-enabled node.
fn redis_cli_keyslot(port: u16, key: &[u8]) -> u16 {
    let out = Command::new("redis-cli")
        .args(["-p", &port.to_string(), "--no-raw", "CLUSTER", "KEYSLOT"])
        .arg(std::ffi::OsStr::from_bytes(key))
        .output()
        .expect("redis-cli must be installed for this test");
    let text = String::from_utf8_lossy(&out.stdout);
    text.trim()
        .trim_start_matches("(integer) ")
        .parse()
        .unwrap_or_else(|_| panic!("redis-cli said {text:?} for {key:?}"))
}

#[test]
fn cluster_of_three_spreads_keys_and_key_slot_matches_redis() {
    let started = Instant::now();
    let mut cluster = RedisCluster::start(3);
    let startup = started.elapsed();
    assert!(
        startup < Duration::from_secs(10),
        "cluster took {startup:?}"
    );

    assert_eq!(cluster.nodes().len(), 3);
    assert_eq!(cluster.urls().len(), 3);
    for node in cluster.nodes() {
        let info = node.cmd(&["CLUSTER", "INFO"]);
        assert!(info.contains("cluster_state:ok"), "{info}");
        assert!(info.contains("cluster_slots_assigned:16384"), "{info}");
    }

    // key_slot agrees with the server, via redis-cli and via raw RESP.
    let port = cluster.node(0).port();
    let keys: &[&[u8]] = &[
        b"{user1}.a",
        b"{user1}.b",
        b"foo{}{bar}",
        b"{}x",
        b"foo{{bar}}zap",
        b"a{b}c{d}",
        b"somekey",
        "clé-ünïcødé-🔑".as_bytes(),
        "{日本}語".as_bytes(),
        b"",
        b"\x00\xff\xfe{\x01}",
        b"\xff\xff\xff",
    ];
    for key in keys {
        let expected = match query(port, &[&b"CLUSTER"[..], b"KEYSLOT", key]).unwrap() {
            Reply::Integer(n) => u16::try_from(n).unwrap(),
            other => panic!("KEYSLOT {key:?}: {other:?}"),
        };
        assert_eq!(key_slot(key), expected, "key {key:?}");
        if !key.is_empty() && !key.contains(&0) {
            assert_eq!(
                redis_cli_keyslot(port, key),
                expected,
                "redis-cli, key {key:?}"
            );
        }
    }

    // Route 300 keys ourselves; every node must accept its keys without
    // MOVED, and every node must get some.
    let ranges = cluster.slot_ranges();
    for i in 0..300 {
        let key = format!("{{tag{i}}}:hits");
        let slot = key_slot(key.as_bytes());
        let owner = ranges
            .iter()
            .find(|(lo, hi, _)| (*lo..=*hi).contains(&slot))
            .map(|r| r.2)
            .unwrap();
        assert_eq!(
            query(owner, &["SET", &key, "1"]).unwrap(),
            Reply::Status("OK".into())
        );
    }
    let counts = cluster.keys_per_node();
    assert_eq!(counts.iter().sum::<u64>(), 300, "{counts:?}");
    assert!(counts.iter().all(|&n| n > 0), "keys not spread: {counts:?}");

    // The high-level helpers agree with the routing above.
    let idx = cluster.node_for_key(b"{tag7}:hits");
    assert_eq!(cluster.node(idx).cmd(&["GET", "{tag7}:hits"]), "1");
    assert_eq!(
        cluster.slot_owner(key_slot(b"{tag7}:hits")),
        cluster.node(idx).port()
    );
    let moved = cluster.node((idx + 1) % 3).cmd(&["GET", "{tag7}:hits"]);
    assert!(moved.starts_with("MOVED"), "{moved}");

    // Crash a master and bring it back: same port, empty, cluster healthy.
    let port1 = cluster.node(1).port();
    cluster.kill_master(1);
    assert!(TcpStream::connect(("127.0.0.1", port1)).is_err());
    assert_eq!(cluster.keys_per_node()[1], 0);
    cluster.restart_master(1);
    assert_eq!(cluster.node(1).port(), port1);
    assert!(
        cluster
            .node(1)
            .cmd(&["CLUSTER", "INFO"])
            .contains("cluster_state:ok")
    );
    assert_eq!(cluster.keys_per_node()[1], 0);
    assert_eq!(
        cluster.nodes()[1]
            .cmd(&["SET", "{tag7}:x", "1"])
            .starts_with("MOVED"),
        idx != 1
    );
}

#[test]
fn single_master_cluster_works() {
    let cluster = RedisCluster::start(1);
    assert_eq!(
        cluster.slot_ranges(),
        vec![(0, 16383, cluster.node(0).port())]
    );
    assert_eq!(cluster.node_for_key(b"anything"), 0);
}

#[test]
fn restart_waits_while_the_port_is_briefly_taken() {
    let mut server = RedisServer::start();
    let port = server.port();
    server.kill();
    let squatter = std::net::TcpListener::bind(("127.0.0.1", port)).unwrap();
    let release = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(500));
        drop(squatter);
    });
    server.restart();
    release.join().unwrap();
    assert_eq!(server.port(), port);
    assert_eq!(server.cmd(&["PING"]), "PONG");
}

#[test]
fn sentinel_promotes_the_replica_when_the_primary_is_killed() {
    let mut deployment = RedisSentinel::start(1, 1);
    assert_eq!(deployment.nodes().len(), 2);
    assert_eq!(deployment.sentinel_urls().len(), 1);
    let old = deployment.primary_port();
    assert_eq!(old, deployment.nodes()[0].port());
    assert!(deployment.primary().cmd(&["ROLE"]).starts_with("master"));
    assert!(deployment.nodes()[1].cmd(&["ROLE"]).starts_with("slave"));
    assert_eq!(deployment.primary().cmd(&["SET", "k", "v"]), "OK");
    assert_eq!(deployment.wait_replicated(Duration::from_secs(2)), 1);
    assert_eq!(deployment.nodes()[1].cmd(&["GET", "k"]), "v");

    assert_eq!(deployment.kill_primary(), 0);
    let bound = deployment.down_after() + deployment.failover_timeout() * 2;
    let new = deployment.wait_for_failover(old, bound);
    assert_eq!(new, deployment.nodes()[1].port());
    let primary = deployment.primary();
    assert!(primary.cmd(&["ROLE"]).starts_with("master"));
    // Replicated before the kill, so it survived the failover.
    assert_eq!(primary.cmd(&["GET", "k"]), "v");
    assert_eq!(primary.cmd(&["SET", "k2", "v2"]), "OK");
}
