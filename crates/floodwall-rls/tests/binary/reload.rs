//! SIGHUP reloads (a broken file changes nothing), SIGTERM stops gracefully.

use super::*;

#[tokio::test]
async fn sighup_with_a_changed_quota_takes_effect() {
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(2));
    let mut rls = Rls::start(dir.path(), &[]);
    let mut client = rls.client().await;
    assert_eq!(admitted(&mut client, &[("user", "before")], 4).await, 2);

    dir.write("api.yaml", &quota_config(5));
    rls.signal("HUP");
    rls.wait_for_log("configuration reloaded");
    // A key new since the reload has the new quota. (One counted before keeps its state
    // under GCRA: a raised quota frees its slots at the new rate, not at once.)
    assert_eq!(admitted(&mut client, &[("user", "after")], 8).await, 5);

    // And a lowered one: a second reload.
    dir.write("api.yaml", &quota_config(1));
    rls.signal("HUP");
    rls.wait_for_nth_log("configuration reloaded", 2);
    assert_eq!(admitted(&mut client, &[("user", "later")], 3).await, 1);
    assert!(rls.running());
}

#[tokio::test]
async fn sighup_with_a_broken_file_changes_nothing() {
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(2));
    let mut rls = Rls::start(dir.path(), &[]);
    let mut client = rls.client().await;
    assert_eq!(admitted(&mut client, &[("user", "a")], 1).await, 1);

    dir.write(
        "api.yaml",
        "domain: api\ndescriptors:\n  - key: user\n    rate_limit: {unit: hour, requests_per_unit: -5}\n",
    );
    rls.signal("HUP");
    let line = rls.wait_for_log("configuration not reloaded");
    assert!(line.contains("api.yaml:4:"), "{line}");
    assert!(line.contains("requests_per_unit"), "{line}");
    assert!(rls.running());

    // The quota in use stays, and so does the state of its keys.
    assert_eq!(admitted(&mut client, &[("user", "a")], 3).await, 1);
    assert_eq!(admitted(&mut client, &[("user", "b")], 3).await, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 1)]
async fn sigterm_exits_0() {
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(2));
    let mut rls = Rls::start(dir.path(), &[]);
    let mut client = rls.client().await;
    assert_eq!(admitted(&mut client, &[("user", "a")], 1).await, 1);
    drop(client);

    rls.signal("TERM");
    let status = rls.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", rls.log());
    assert!(rls.log().contains("signal=\"SIGTERM\""), "{}", rls.log());
}

#[tokio::test]
async fn a_client_holding_its_connection_open_delays_sigterm_by_the_grace_period_only() {
    let dir = TempDir::new();
    dir.write("api.yaml", &quota_config(2));
    let mut rls = Rls::start(dir.path(), &["--shutdown-grace", "1"]);
    // This runtime has one thread, blocked below: the client's connection stays open
    // and unread, as a stuck gateway's would.
    let mut client = rls.client().await;
    assert_eq!(admitted(&mut client, &[("user", "a")], 1).await, 1);

    let start = Instant::now();
    rls.signal("TERM");
    let status = rls.wait_exit();
    assert_eq!(status.code(), Some(0), "{}", rls.log());
    assert!(
        start.elapsed() < Duration::from_secs(10),
        "{:?}",
        start.elapsed()
    );
    assert!(rls.log().contains("grace period"), "{}", rls.log());
}
