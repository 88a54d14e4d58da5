//! Redis killed under load of concurrent calls, then restarted on its port: every call
//! answered in time (`UNAVAILABLE`, or decided in memory with `--fail-mode local`), the
//! process alive, and exact shared decisions once Redis is back.

use std::sync::atomic::AtomicBool;

use redis_harness::RedisServer;
use tokio::sync::mpsc;
use tonic::Code as GrpcCode;

use super::metrics::{decisions, metrics_addr, scrape};
use super::*;

/// `--redis-timeout` in these tests, in milliseconds.
const TIMEOUT_MS: u64 = 300;

/// The most one call may take, Redis dead or alive: one store timeout (a single
/// descriptor makes one store call), with room for the scheduling of dozens of
/// concurrent calls on a loaded machine. A call past it is a hang.
const BOUND: Duration = Duration::from_millis(TIMEOUT_MS * 10);

/// Concurrent callers of the load.
const CALLERS: usize = 16;

/// One call of the load.
struct Answer {
    /// Whether the call started after Redis was killed.
    after_kill: bool,
    /// The overall code, or the gRPC error's code; `None` if it took longer than [`BOUND`].
    code: Option<Result<i32, GrpcCode>>,
}

/// Calls `rls` from [`CALLERS`] concurrent callers over a few connections, each on
/// `key`'s own value per caller, kills `redis` once `before` calls have been answered, and
/// stops once `after` calls that started after the kill have been answered. Returns every
/// answer.
async fn load_through_a_kill(
    rls: &Rls,
    redis: &mut RedisServer,
    before: usize,
    after: usize,
) -> Vec<Answer> {
    let connections = [rls.client().await, rls.client().await, rls.client().await];
    let killed = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let (sink, mut answers) = mpsc::unbounded_channel();
    let callers: Vec<_> = (0..CALLERS)
        .map(|n| {
            let mut client = connections[n % connections.len()].clone();
            let (killed, stop, sink) = (Arc::clone(&killed), Arc::clone(&stop), sink.clone());
            tokio::spawn(async move {
                let value = format!("load-{n}");
                while !stop.load(Ordering::SeqCst) {
                    let after_kill = killed.load(Ordering::SeqCst);
                    let call = client
                        .should_rate_limit(request("api", vec![descriptor(&[("user", &value)])]));
                    let code = match tokio::time::timeout(BOUND, call).await {
                        Ok(Ok(response)) => Some(Ok(response.into_inner().overall_code)),
                        Ok(Err(status)) => Some(Err(status.code())),
                        Err(_) => None,
                    };
                    let hung = code.is_none();
                    let _ = sink.send(Answer { after_kill, code });
                    if hung {
                        break;
                    }
                }
            })
        })
        .collect();
    drop(sink);

    let mut all = Vec::new();
    while let Some(answer) = answers.recv().await {
        all.push(answer);
        if all.len() == before && !killed.load(Ordering::SeqCst) {
            redis.kill();
            killed.store(true, Ordering::SeqCst);
        }
        if all.iter().filter(|a| a.after_kill).count() >= after {
            stop.store(true, Ordering::SeqCst);
        }
    }
    for caller in callers {
        caller.await.unwrap();
    }
    assert!(killed.load(Ordering::SeqCst), "Redis was never killed");
    all
}

/// Asks fresh keys until one is decided by the restarted Redis (it then holds a key).
async fn wait_for_redis(rls: &Rls, redis: &RedisServer) {
    let mut client = rls.client().await;
    let deadline = Instant::now() + PATIENCE;
    for n in 0.. {
        let probe = format!("probe-{n}");
        let answer = client
            .should_rate_limit(request("api", vec![descriptor(&[("user", &probe)])]))
            .await;
        if answer.is_ok() && redis.cmd(&["DBSIZE"]) != "0" {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "Redis not used again: {answer:?}\n{}",
            rls.log()
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_outage_answers_unavailable_in_time_then_decides_exactly_again() {
    // Far above what a caller asks before the kill: no refusal for the Redis store's
    // deny cache to answer during the outage.
    const QUOTA: u32 = 100;
    let mut redis = RedisServer::start();
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(QUOTA));
    let timeout = TIMEOUT_MS.to_string();
    let mut rls = Rls::start(
        dir.path(),
        &[
            "--redis",
            &redis.url(),
            "--redis-timeout",
            &timeout,
            "--metrics",
            "127.0.0.1:0",
        ],
    );
    let metrics = metrics_addr(&mut rls);

    let answers = load_through_a_kill(&rls, &mut redis, 60, 100).await;
    assert!(
        answers.iter().all(|a| a.code.is_some()),
        "a call hung past {BOUND:?}"
    );
    for answer in &answers {
        let code = answer.code.unwrap();
        if answer.after_kill {
            assert_eq!(code, Err(GrpcCode::Unavailable));
        } else {
            // In flight when Redis died: decided, or unavailable.
            assert!(
                [Ok(OK), Ok(OVER), Err(GrpcCode::Unavailable)].contains(&code),
                "{code:?}"
            );
        }
    }
    assert!(rls.running(), "{}", rls.log());

    // Each call counted once, its store failures as errors.
    let count = |code| answers.iter().filter(|a| a.code == Some(code)).count() as u64;
    let counted = decisions(&scrape(metrics));
    let series = |result: &str| {
        counted
            .get(&("api".to_owned(), "user".to_owned(), result.to_owned()))
            .copied()
            .unwrap_or(0)
    };
    assert_eq!(series("error"), count(Err(GrpcCode::Unavailable)));
    assert_eq!(
        series("ok") + series("over_limit"),
        count(Ok(OK)) + count(Ok(OVER))
    );

    redis.restart();
    wait_for_redis(&rls, &redis).await;
    let mut client = rls.client().await;
    assert_eq!(
        admitted(&mut client, &[("user", "after")], QUOTA as usize + 3).await,
        QUOTA as usize
    );
    assert!(rls.running());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_fail_mode_local_an_outage_is_decided_in_memory() {
    const QUOTA: u32 = 10;
    const INSTANCES: u32 = 2;
    let mut redis = RedisServer::start();
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(QUOTA));
    let timeout = TIMEOUT_MS.to_string();
    let instances = INSTANCES.to_string();
    let rls = Rls::start(
        dir.path(),
        &[
            "--redis",
            &redis.url(),
            "--redis-timeout",
            &timeout,
            "--redis-prefix",
            "rls-test:",
            "--fail-mode",
            "local",
            "--instances",
            &instances,
        ],
    );
    let mut client = rls.client().await;
    // Shared while Redis lives: the whole quota, under the prefix.
    assert_eq!(
        admitted(&mut client, &[("user", "before")], QUOTA as usize + 3).await,
        QUOTA as usize
    );
    let keys = redis.cmd(&["KEYS", "*"]);
    assert!(
        !keys.is_empty() && keys.lines().all(|k| k.starts_with("rls-test:")),
        "{keys}"
    );

    let answers = load_through_a_kill(&rls, &mut redis, 60, 100).await;
    for answer in &answers {
        let code = answer
            .code
            .unwrap_or_else(|| panic!("a call hung past {BOUND:?}"));
        assert!([Ok(OK), Ok(OVER)].contains(&code), "{code:?}");
    }
    assert!(answers.iter().filter(|a| a.after_kill).count() >= 100);
    // A key first seen during the outage: this instance's share, then OVER_LIMIT.
    let share = (QUOTA / INSTANCES) as usize;
    assert_eq!(
        admitted(&mut client, &[("user", "outage")], share + 3).await,
        share
    );

    redis.restart();
    wait_for_redis(&rls, &redis).await;
    assert_eq!(
        admitted(&mut client, &[("user", "after")], QUOTA as usize + 3).await,
        QUOTA as usize
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_redis_answers_unavailable_within_the_timeout() {
    let redis = RedisServer::start();
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(100));
    let timeout = TIMEOUT_MS.to_string();
    let rls = Rls::start(
        dir.path(),
        &["--redis", &redis.url(), "--redis-timeout", &timeout],
    );
    let client = rls.client().await;
    assert_eq!(
        ask(&mut client.clone(), "api", &[("user", "warm-up")])
            .await
            .overall_code,
        OK
    );

    // Stalled for longer than BOUND: only the store's timeout can answer in time.
    redis.pause(BOUND.as_millis() as u64 * 2);
    let calls: Vec<_> = (0..CALLERS)
        .map(|n| {
            let mut client = client.clone();
            tokio::spawn(async move {
                let value = format!("stalled-{n}");
                let call =
                    client.should_rate_limit(request("api", vec![descriptor(&[("user", &value)])]));
                match tokio::time::timeout(BOUND, call).await {
                    Ok(answer) => Some(answer.map(|r| r.into_inner().overall_code)),
                    Err(_) => None,
                }
            })
        })
        .collect();
    for call in calls {
        let answer = call
            .await
            .unwrap()
            .unwrap_or_else(|| panic!("a call hung past {BOUND:?}"));
        assert_eq!(answer.map_err(|s| s.code()), Err(GrpcCode::Unavailable));
    }
}

#[test]
fn fail_mode_local_without_redis_exits_2() {
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(3));
    let output = command(&["--config", &dir.path().display().to_string()])
        .env("FAIL_MODE", "local")
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--redis"), "{stderr}");
}
