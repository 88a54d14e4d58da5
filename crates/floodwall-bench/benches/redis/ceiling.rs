//! The ceiling: the store's own GCRA script and arguments driven by `redis-benchmark`, after
//! a check that they are what the store sends.

use std::io::Read;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use floodwall::redis::RedisStore;
use floodwall::redis::redis::Script;
use floodwall::{Policy, StoreExt};
use redis_harness::RedisServer;
use tokio::runtime::Runtime;

use crate::measure::{Stats, server_cpu_ns};
use crate::support;
use crate::workload::Workload;
use crate::{KEYS, TASKS};

/// The script `RedisStore` runs for `policy` (GCRA), as the store assembles it: its
/// parameters are written in, so each policy has its own.
fn gcra_lua(policy: &Policy) -> String {
    floodwall_redis::script_for(policy.parameters()).expect("GCRA has a script")
}

/// One redis-benchmark run of `args` (after `EVALSHA <sha>`), between `CONFIG RESETSTAT`
/// and `INFO commandstats`. Returns its requests per second and what was measured.
pub(crate) fn redis_benchmark(
    server: &RedisServer,
    sha: &str,
    args: &[String],
    n: u64,
    pipeline: usize,
    random: bool,
) -> (f64, Stats) {
    let mut cmd = Command::new("redis-benchmark");
    cmd.args(["-h", "127.0.0.1", "-p", &server.port().to_string()])
        .args(["-c", &TASKS.to_string(), "-n", &n.to_string(), "--csv"]);
    if pipeline > 1 {
        cmd.args(["-P", &pipeline.to_string()]);
    }
    if random {
        cmd.args(["-r", &KEYS.to_string()]);
    }
    cmd.args(["EVALSHA", sha])
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());

    server.cmd(&["CONFIG", "RESETSTAT"]);
    let server_before = server_cpu_ns(server);
    let began = Instant::now();
    let mut child = cmd.spawn().expect("spawn redis-benchmark");
    // redis-benchmark is single-threaded: its CPU is its main thread's, read until it exits
    // (the last 10 ms, printing and exiting, are missed).
    let stat = PathBuf::from(format!("/proc/{}/schedstat", child.id()));
    let mut client_ns = 0;
    let status = loop {
        if let Some(status) = child.try_wait().expect("wait for redis-benchmark") {
            break status;
        }
        client_ns = support::schedstat_ns(&stat).unwrap_or(client_ns);
        std::thread::sleep(Duration::from_millis(10));
    };
    let wall = began.elapsed();
    let server_ns = server_cpu_ns(server).saturating_sub(server_before);
    let (mut out, mut err) = (String::new(), String::new());
    if let Some(mut o) = child.stdout.take() {
        let _ = o.read_to_string(&mut out);
    }
    if let Some(mut e) = child.stderr.take() {
        let _ = e.read_to_string(&mut err);
    }
    assert!(status.success(), "redis-benchmark failed ({status}): {err}");
    // "EVALSHA ... 1","35123.45","1.234",...
    let rps: f64 = out
        .lines()
        .rev()
        .find_map(|l| l.split("\",\"").nth(1)?.parse().ok())
        .unwrap_or_else(|| panic!("no requests per second in redis-benchmark's output: {out}"));
    let mut stats = Stats {
        decisions: n,
        wall_ns: wall.as_nanos() as u64,
        server_ns,
        client_ns,
        ..Stats::default()
    };
    stats.add_commandstats(server);
    // redis-benchmark does not look at replies: make sure every call ran the script.
    assert_eq!(
        stats.evalsha_failed,
        0,
        "redis-benchmark's EVALSHA calls failed; INFO errorstats: {}",
        server.cmd(&["INFO", "errorstats"])
    );
    assert!(
        stats.evalsha_calls >= n,
        "redis-benchmark made {} EVALSHA calls of {n}",
        stats.evalsha_calls
    );
    (rps, stats)
}

/// Checks that the script above is the one the store loads, with the arguments it sends:
/// after `SCRIPT FLUSH`, one check through the store must load exactly our SHA, and our
/// EVALSHA must answer on a fresh key as the store does.
pub(crate) fn check_script(
    server: &RedisServer,
    rt: &Runtime,
    store: &RedisStore,
    w: &Workload,
) -> String {
    let sha = Script::new(&gcra_lua(&w.policy)).get_hash().to_owned();
    server.cmd(&["SCRIPT", "FLUSH"]);
    let d = rt
        .block_on(store.check(b"verify-store", &w.policy, 1))
        .expect("a first check through the store");
    assert_eq!(
        server.cmd(&["SCRIPT", "EXISTS", &sha]),
        "1",
        "the store did not load the GCRA script this bench reads from script_for"
    );
    let mut args = w.evalsha_args(store);
    args[1] = String::from_utf8(store.redis_key(b"verify-bench", &w.policy)).expect("UTF-8");
    let mut cmd = vec!["EVALSHA", sha.as_str()];
    cmd.extend(args.iter().map(String::as_str));
    let reply = server.try_cmd(&cmd).expect("EVALSHA");
    // A single check answers with one integer: reset_after (µs) when admitted.
    let reset = reply
        .as_integer()
        .unwrap_or_else(|| panic!("EVALSHA answered {reply:?}"));
    assert!(d.is_allowed(), "a fresh key is admitted");
    assert_eq!(
        reset,
        d.reset_after.as_micros() as i64,
        "the bench's EVALSHA and the store disagree on a fresh key"
    );
    server.cmd(&["DEL", &args[1]]);
    server.cmd(&[
        "DEL",
        &String::from_utf8(store.redis_key(b"verify-store", &w.policy)).expect("UTF-8"),
    ]);
    sha
}
