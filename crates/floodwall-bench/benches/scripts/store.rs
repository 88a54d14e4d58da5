//! The real `RedisStore` for the batch rows (`batch.rs`): checks driven from [`TASKS`] tasks
//! with coalescing on, and the batch script's text and arguments as the store sends them.
//!
//! floodwall-redis has no public way to the batch script's text (`script_for` gives the
//! single-check scripts), and the batch rows must count that text, not a copy that could
//! drift from it. So the bench watches the server with `MONITOR` while the store makes its
//! first batches: the store's redis-rs `Script` answers `NOSCRIPT` with a `SCRIPT LOAD` of
//! the text, which `MONITOR` shows; the text kept is the one whose SHA is that of the store's
//! `EVALSHA` calls of several keys, and their arguments give the layout the rows send.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use floodwall::redis::RedisStore;
use floodwall::redis::redis::Script;
use floodwall::{Policy, StoreExt};
use redis_harness::RedisServer;
use tokio::runtime::Runtime;
use tokio::task::JoinSet;

/// Checks in flight, as in the `redis` and `cell` benches' coalescing rows.
pub(crate) const TASKS: usize = 64;

/// `n` checks of cost 1 through `store` from [`TASKS`] tasks, check `i` on `users[i %
/// len]`; every one must be admitted.
pub(crate) fn drive(
    rt: &Runtime,
    store: &RedisStore,
    policy: &Policy,
    users: &Arc<Vec<Vec<u8>>>,
    n: usize,
) {
    let next = Arc::new(AtomicUsize::new(0));
    rt.block_on(async {
        let mut tasks = JoinSet::new();
        for _ in 0..TASKS {
            let (store, policy, users, next) = (
                store.clone(),
                policy.clone(),
                Arc::clone(users),
                Arc::clone(&next),
            );
            tasks.spawn(async move {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    if i >= n {
                        break;
                    }
                    let d = store
                        .check(&users[i % users.len()], &policy, 1)
                        .await
                        .unwrap_or_else(|e| panic!("check failed: {e}"));
                    assert!(d.is_allowed(), "the batch rows' quota never refuses");
                }
            });
        }
        while let Some(done) = tasks.join_next().await {
            done.expect("a checking task");
        }
    });
}

/// The batch script as the store sends it: its text, SHA, and the `ARGV` of one of its calls
/// (the number of checks, the parameters padded to three, the time, the number of keys).
pub(crate) struct Captured {
    pub(crate) text: String,
    pub(crate) sha: String,
    pub(crate) argv: Vec<String>,
}

/// The store's batch script, watched with `MONITOR` while `store` checks `users` (distinct
/// keys, enough that some wait behind a call in flight and go as a batch).
pub(crate) fn capture(
    server: &RedisServer,
    rt: &Runtime,
    store: &RedisStore,
    policy: &Policy,
    users: &Arc<Vec<Vec<u8>>>,
) -> Captured {
    let mut monitor = TcpStream::connect(server.addr()).expect("connect for MONITOR");
    monitor.write_all(b"MONITOR\r\n").expect("send MONITOR");
    let mut reader = BufReader::new(monitor.try_clone().expect("a second handle"));
    let mut ok = String::new();
    reader.read_line(&mut ok).expect("MONITOR's answer");
    assert_eq!(ok.trim_end(), "+OK", "MONITOR refused");
    let watcher = std::thread::spawn(move || {
        let mut lines = Vec::new();
        let mut line = Vec::new();
        while reader.read_until(b'\n', &mut line).is_ok_and(|n| n > 0) {
            lines.push(std::mem::take(&mut line));
        }
        lines
    });
    drive(rt, store, policy, users, users.len());
    // The server feeds MONITOR as it runs each call: give the last lines time to arrive.
    std::thread::sleep(Duration::from_millis(500));
    monitor.shutdown(Shutdown::Both).expect("stop MONITOR");
    let lines = watcher.join().expect("the MONITOR reader");
    let calls: Vec<Vec<Vec<u8>>> = lines.iter().map(|l| monitor_args(l)).collect();
    let text = |a: &[u8]| String::from_utf8(a.to_vec()).expect("UTF-8 in a call");
    let is = |a: &[u8], name: &str| a.eq_ignore_ascii_case(name.as_bytes());
    // An EVALSHA of several keys is a batch: `EVALSHA sha nkeys key.. argv..`.
    let (sha, argv) = calls
        .iter()
        .filter(|c| c.len() > 3 && is(&c[0], "EVALSHA"))
        .find_map(|c| {
            let nkeys: usize = text(&c[2]).parse().ok()?;
            (nkeys > 1).then(|| {
                (
                    text(&c[1]),
                    c[3 + nkeys..].iter().map(|a| text(a)).collect(),
                )
            })
        })
        .expect("MONITOR saw no batch: the store sent every check alone");
    let text = calls
        .iter()
        .filter(|c| c.len() == 3 && is(&c[0], "SCRIPT") && is(&c[1], "LOAD"))
        .map(|c| text(&c[2]))
        .find(|t| Script::new(t).get_hash() == sha)
        .expect("MONITOR saw no SCRIPT LOAD of the batch's SHA");
    Captured { text, sha, argv }
}

/// The arguments of one `MONITOR` line (`+<time> [<db> <client>] "arg" "arg" ...`), each
/// unquoted as Redis quotes them (`sdscatrepr`: `\\`, `\"`, `\n`, `\r`, `\t`, `\a`, `\b`,
/// `\xHH`).
fn monitor_args(line: &[u8]) -> Vec<Vec<u8>> {
    let Some(start) = line.windows(2).position(|w| w == b"] ") else {
        return Vec::new();
    };
    let mut args = Vec::new();
    let mut bytes = line[start + 2..].iter().copied();
    while let Some(b) = bytes.next() {
        if b != b'"' {
            continue;
        }
        let mut arg = Vec::new();
        while let Some(b) = bytes.next() {
            match b {
                b'"' => break,
                b'\\' => match bytes.next() {
                    Some(b'n') => arg.push(b'\n'),
                    Some(b'r') => arg.push(b'\r'),
                    Some(b't') => arg.push(b'\t'),
                    Some(b'a') => arg.push(7),
                    Some(b'b') => arg.push(8),
                    Some(b'x') => {
                        let hex = [bytes.next().unwrap_or(b'0'), bytes.next().unwrap_or(b'0')];
                        let hex = std::str::from_utf8(&hex).unwrap_or("00");
                        arg.push(u8::from_str_radix(hex, 16).unwrap_or(0));
                    }
                    Some(other) => arg.push(other),
                    None => break,
                },
                other => arg.push(other),
            }
        }
        args.push(arg);
    }
    args
}
