//! `inspect`, `reset` and `unban` against a real `redis-server`, on keys that the tower
//! layer exhausted and banned, read from the same policy file the layer was built from.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use common::{exhaust, field, file, ok, seconds, status};
use floodwall_core::StoreExt;
use floodwall_redis::RedisStore;
use floodwall_tower::RateLimitLayer;
use floodwall_tower::extract::PeerIp;
use floodwall_tower::file::{FileKey, PolicyFile};
use http::StatusCode;
use redis_harness::RedisServer;

/// 3 an hour per client (GCRA: one back every 20 min), and logins at 2 an hour whose
/// first refusal bans the client for an hour.
const POLICIES: &str = r#"
[[policy]]
name = "per-ip"
quota = "3/hour"
default = true

[[policy]]
name = "login"
quota = "2/hour"
penalty = { after = 1, within = "1h", ban = "1h" }

[[route]]
path = "/login"
policies = ["login"]
"#;

const HOUR: f64 = 3600.0;

/// A node: the layer the policy file describes, over a `RedisStore` of its own whose
/// deny cache holds refusals and bans for `hold` at most.
async fn node(url: &str, policies: &Path, hold: Duration) -> RateLimitLayer<RedisStore, FileKey> {
    let store = RedisStore::builder()
        .deny_cache_max_refusal_hold(hold)
        .deny_cache_max_ban_hold(hold)
        .multiplexed(url)
        .await
        .unwrap();
    PolicyFile::load(policies).unwrap().layer(store).0
}

/// `floodwall COMMAND KEY --policy POLICY --policy-file FILE --redis URL`.
fn cli(command: &str, key: &str, policy: &str, file: &Path, url: &str) -> String {
    ok(&[
        command,
        key,
        "--policy",
        policy,
        "--policy-file",
        file.to_str().unwrap(),
        "--redis",
        url,
    ])
}

#[tokio::test(flavor = "current_thread")]
async fn an_exhausted_key_shows_remaining_0_and_its_reset_and_reset_admits_it_again() {
    let server = RedisServer::start();
    let url = server.url();
    let policies = file("exhausted", "policies.toml", POLICIES);
    // A deny cache that holds a refusal 0 s: the next request after a reset reaches Redis.
    let layer = node(&url, &policies, Duration::ZERO).await;
    let ip = "203.0.113.7";

    let started = Instant::now();
    exhaust(&layer, ip, "/", 3).await;

    let report = cli("inspect", ip, "per-ip", &policies, &url);
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(field(&report, "policy"), "per-ip (gcra 3/1h)");
    assert_eq!(field(&report, "limit"), "3");
    assert_eq!(field(&report, "remaining"), "0");
    assert!(field(&report, "state").starts_with("exhausted"), "{report}");
    // Full again an hour after the first request (3 × 20 min), less the time since.
    let reset = seconds(field(&report, "reset in"));
    assert!(
        reset <= HOUR && reset >= HOUR - elapsed,
        "reset in {reset} s, {elapsed} s after the first request"
    );
    assert_eq!(
        field(&report, "ban"),
        "not checked (the policy has no penalty)"
    );
    // The key as the layer wrote it: the IPv4 address's four bytes.
    assert_eq!(field(&report, "key"), "203.0.113.7 (bytes 04cb007107)");

    // Inspecting charges nothing: a fresh key stays full however often it is looked at.
    let fresh = "203.0.113.8";
    for _ in 0..3 {
        let report = cli("inspect", fresh, "per-ip", &policies, &url);
        assert_eq!(field(&report, "remaining"), "3", "{report}");
        assert_eq!(field(&report, "reset in"), "0.000000s");
    }
    for _ in 0..3 {
        assert_eq!(status(&layer, fresh, "/", &[]).await, StatusCode::OK);
    }

    let said = cli("reset", ip, "per-ip", &policies, &url);
    assert!(said.starts_with("reset key 203.0.113.7"), "{said}");
    assert_eq!(status(&layer, ip, "/", &[]).await, StatusCode::OK);
    let report = cli("inspect", ip, "per-ip", &policies, &url);
    assert_eq!(field(&report, "remaining"), "2");
}

#[tokio::test(flavor = "current_thread")]
async fn an_ipv6_client_is_inspected_by_its_64_as_the_layer_keys_it() {
    let server = RedisServer::start();
    let url = server.url();
    let policies = file("ipv6", "policies.toml", POLICIES);
    let layer = node(&url, &policies, Duration::ZERO).await;
    for _ in 0..3 {
        assert_eq!(
            status(&layer, "2001:db8::2", "/", &[]).await,
            StatusCode::OK
        );
    }
    // Another address of the same /64 is the same key; one of another /64 is not.
    let same = cli("inspect", "2001:db8::1", "per-ip", &policies, &url);
    assert_eq!(field(&same, "remaining"), "0", "{same}");
    let other = cli("inspect", "2001:db8:0:1::1", "per-ip", &policies, &url);
    assert_eq!(field(&other, "remaining"), "3", "{other}");
    // And --raw-hex names the same bytes: 6 for IPv6, then the /64's 8 bytes, as the layer
    // writes them.
    let raw = ok(&[
        "inspect",
        "0620010db800000000",
        "--raw-hex",
        "--policy",
        "per-ip",
        "--policy-file",
        policies.to_str().unwrap(),
        "--redis",
        &url,
    ]);
    assert_eq!(field(&raw, "remaining"), field(&same, "remaining"));
    assert_eq!(field(&raw, "redis key"), field(&same, "redis key"));
}

#[tokio::test(flavor = "current_thread")]
async fn a_banned_key_shows_its_ban_and_unban_lifts_it_on_another_node() {
    let server = RedisServer::start();
    let url = server.url();
    let policies = file("banned", "policies.toml", POLICIES);
    let one = node(&url, &policies, Duration::from_secs(1)).await;
    // The second node's deny cache holds a ban 0 s: what it answers is what Redis holds.
    let two = node(&url, &policies, Duration::ZERO).await;
    let ip = "198.51.100.23";

    let started = Instant::now();
    // The first refusal is the one strike that bans.
    exhaust(&one, ip, "/login", 2).await;
    assert_eq!(
        status(&two, ip, "/login", &[]).await,
        StatusCode::TOO_MANY_REQUESTS
    );

    let report = cli("inspect", ip, "login", &policies, &url);
    let elapsed = started.elapsed().as_secs_f64();
    assert_eq!(field(&report, "state"), "banned");
    let ban = seconds(field(&report, "ban"));
    assert!(
        ban <= HOUR && ban >= HOUR - elapsed,
        "ban {ban} s, {elapsed} s after the first request"
    );
    // The strike that banned is forgotten; the ban is remembered for the next one's length.
    assert_eq!(field(&report, "strikes"), "0", "{report}");
    let bans = field(&report, "bans");
    let remembered = bans
        .strip_prefix("1 (forgotten in ")
        .and_then(|rest| rest.strip_suffix(')'))
        .unwrap_or_else(|| panic!("{report}"));
    assert!(seconds(remembered) > ban, "{report}");

    // A second store instance sees the ban too, and after the unban it does not; the quota
    // state is kept (still exhausted), so unbanning is not resetting.
    let other = RedisStore::builder()
        .deny_cache_max_ban_hold(Duration::ZERO)
        .multiplexed(&url)
        .await
        .unwrap();
    let login = PolicyFile::load(&policies)
        .unwrap()
        .policies()
        .find(|(p, _)| p.name() == "login")
        .unwrap()
        .0
        .clone();
    let key = PeerIp::new().key_for(ip.parse().unwrap());
    let key = key.as_bytes();
    assert!(other.check(key, &login, 0).await.unwrap().is_banned());

    let said = cli("unban", ip, "login", &policies, &url);
    assert!(said.starts_with("unbanned key 198.51.100.23"), "{said}");
    let peek = other.check(key, &login, 0).await.unwrap();
    assert!(!peek.is_banned(), "{peek:?}");
    assert_eq!(peek.remaining, 0);
    let report = cli("inspect", ip, "login", &policies, &url);
    assert_eq!(field(&report, "ban"), "none");
    assert_eq!(field(&report, "remaining"), "0");

    // Reset as well, and the other node admits the client.
    cli("reset", ip, "login", &policies, &url);
    assert_eq!(status(&two, ip, "/login", &[]).await, StatusCode::OK);
}

#[tokio::test(flavor = "current_thread")]
async fn a_policy_given_on_the_command_line_is_the_files_policy() {
    let server = RedisServer::start();
    let url = server.url();
    let policies = file("spec", "policies.toml", POLICIES);
    let layer = node(&url, &policies, Duration::ZERO).await;
    let ip = "192.0.2.1";
    exhaust(&layer, ip, "/login", 2).await;
    let spec = |extra: &[&str]| {
        let mut args = vec![
            "inspect", ip, "--policy", "login", "--quota", "2/hour", "--redis", &url,
        ];
        args.extend_from_slice(extra);
        ok(&args)
    };
    let with_penalty = spec(&["--penalty", "after=1,within=1h,ban=1h"]);
    assert_eq!(field(&with_penalty, "state"), "banned", "{with_penalty}");
    // Without its penalty the policy does not look at bans, and says so.
    let without = spec(&[]);
    assert_eq!(
        field(&without, "ban"),
        "not checked (the policy has no penalty)"
    );
    assert_eq!(field(&without, "remaining"), "0");
}
