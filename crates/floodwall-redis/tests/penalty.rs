//! Penalties in Redis, against real redis-servers: refusals ban a key, bans grow to their
//! cap and end on time, every store sharing the server sees a ban and its lifting at once,
//! a banned key books nothing, and broken keys fail cleanly.

mod common;

use std::time::Duration;

use floodwall_core::{DenyCache, Error, ManualClock, Penalty, Policy, Reservable, StoreExt};
use floodwall_redis::RedisStore;
use redis_harness::{RedisCluster, RedisServer, Reply};

use common::{every_algorithm, generic_store, uncached_store};

const NOW: u64 = 1_700_000_000_000_000;
const S: u64 = 1_000_000;
const SEC: Duration = Duration::from_secs(1);

/// 3 refusals within a minute ban for 10 s, then 30 s, then 60 s (the cap).
fn penalty() -> Penalty {
    Penalty::new(3, 60 * SEC, 10 * SEC)
        .unwrap()
        .growing(3, 60 * SEC)
        .unwrap()
}

/// `1/min` with [`penalty`].
fn login(name: &str) -> Policy {
    Policy::gcra(name, "1/min".parse().unwrap())
        .unwrap()
        .with_penalty(penalty())
}

fn text(key: &[u8]) -> String {
    String::from_utf8(key.to_vec()).unwrap()
}

fn get(server: &RedisServer, key: &[u8]) -> Reply {
    server.try_cmd(&[&b"GET"[..], key]).unwrap()
}

/// Checks of `key` at `now` until one is banned: how many were refused before it
/// (admissions are no strikes, so they are not counted).
async fn until_banned(store: &RedisStore, key: &[u8], policy: &Policy, now: u64) -> usize {
    let mut refused = 0;
    for _ in 0..100 {
        let d = store.check_at(key, policy, 1, now).await.unwrap();
        if d.banned {
            assert!(!d.allowed && d.remaining == 0);
            return refused;
        }
        refused += usize::from(!d.allowed);
    }
    panic!("never banned");
}

#[tokio::test]
async fn refusals_ban_the_key_and_each_ban_grows_to_the_cap() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let policy = login("login");
    assert!(
        store
            .check_at(b"eve", &policy, 1, NOW)
            .await
            .unwrap()
            .allowed
    );
    let rate_key = store.redis_key(b"eve", &policy);
    let quota_state = get(&server, &rate_key);
    // Two plain refusals; the third is answered as the ban already.
    for _ in 0..2 {
        let d = store.check_at(b"eve", &policy, 1, NOW).await.unwrap();
        assert!(!d.allowed && !d.banned);
    }
    let d = store.check_at(b"eve", &policy, 1, NOW).await.unwrap();
    assert!(d.banned && !d.allowed);
    assert_eq!(d.retry_after, Some(10 * SEC));
    assert_eq!(d.limit, 1);
    // While banned, every check (a peek too) is the ban's remainder, and the quota's
    // state is not touched.
    let d = store
        .check_at(b"eve", &policy, 0, NOW + 4 * S)
        .await
        .unwrap();
    assert!(d.banned);
    assert_eq!(d.retry_after, Some(6 * SEC));
    assert_eq!(get(&server, &rate_key), quota_state);
    let [ban, strikes, bans] = store.penalty_keys(b"eve", &policy);
    assert_eq!(
        get(&server, &ban),
        Reply::Bulk((NOW + 10 * S).to_string().into())
    );
    assert_eq!(get(&server, &strikes), Reply::Nil, "strikes start again");
    let remembered = NOW + 10 * S + 86_400 * S;
    assert_eq!(
        get(&server, &bans),
        Reply::Bulk(format!("{remembered} 1").into())
    );
    // The second ban: three more refusals after the first ended, 30 s; the third, 60 s
    // (90 cut to the cap); the fourth, still 60.
    let mut now = NOW + 10 * S;
    for expected in [30u64, 60, 60] {
        assert_eq!(until_banned(&store, b"eve", &policy, now).await, 2);
        let d = store.check_at(b"eve", &policy, 1, now).await.unwrap();
        assert_eq!(
            d.retry_after,
            Some(Duration::from_secs(expected)),
            "{expected}"
        );
        now += expected * S;
    }
    // Another key is not banned.
    let d = store.check_at(b"bob", &policy, 1, NOW).await.unwrap();
    assert!(d.allowed && !d.banned);
}

#[tokio::test]
async fn a_ban_ends_on_time_and_bans_are_forgotten_after_remembered_for() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let policy = Policy::gcra("short", "1/s".parse().unwrap())
        .unwrap()
        .with_penalty(
            Penalty::new(2, 60 * SEC, 10 * SEC)
                .unwrap()
                .growing(2, 100 * SEC)
                .unwrap()
                .forget_after(30 * SEC)
                .unwrap(),
        );
    assert!(store.check_at(b"k", &policy, 1, NOW).await.unwrap().allowed);
    assert_eq!(until_banned(&store, b"k", &policy, NOW).await, 1);
    // A microsecond before its end the ban still holds, for that microsecond.
    let d = store
        .check_at(b"k", &policy, 1, NOW + 10 * S - 1)
        .await
        .unwrap();
    assert!(d.banned);
    assert_eq!(d.retry_after, Some(Duration::from_micros(1)));
    // At its end the quota decides again: 1/s has long refilled.
    let d = store
        .check_at(b"k", &policy, 1, NOW + 10 * S)
        .await
        .unwrap();
    assert!(d.allowed && !d.banned);
    // Banned again within 30 s of the end: the second ban, 20 s.
    let then = NOW + 39 * S;
    assert_eq!(until_banned(&store, b"k", &policy, then).await, 1);
    let d = store.check_at(b"k", &policy, 1, then).await.unwrap();
    assert_eq!(d.retry_after, Some(20 * SEC));
    // After more than 30 s past that ban's end, the next is a first ban again.
    let later = then + 20 * S + 30 * S;
    assert!(
        store
            .check_at(b"k", &policy, 1, later)
            .await
            .unwrap()
            .allowed
    );
    assert_eq!(until_banned(&store, b"k", &policy, later).await, 1);
    let d = store.check_at(b"k", &policy, 1, later).await.unwrap();
    assert_eq!(d.retry_after, Some(10 * SEC));
}

#[tokio::test]
async fn strikes_are_counted_within_their_window_only() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let policy = login("window");
    assert!(store.check_at(b"k", &policy, 1, NOW).await.unwrap().allowed);
    // Two refusals, then the window of 60 s from the first lapses: they are forgotten.
    for at in [NOW + S, NOW + 2 * S] {
        assert!(!store.check_at(b"k", &policy, 1, at).await.unwrap().banned);
    }
    let after = NOW + 61 * S;
    assert!(
        store
            .check_at(b"k", &policy, 1, after)
            .await
            .unwrap()
            .allowed
    );
    for _ in 0..2 {
        assert!(
            !store
                .check_at(b"k", &policy, 1, after)
                .await
                .unwrap()
                .banned
        );
    }
    assert!(
        store
            .check_at(b"k", &policy, 1, after)
            .await
            .unwrap()
            .banned
    );
    // A cost the quota can never take fails before Redis, and is no strike.
    let fresh = login("fresh");
    assert!(matches!(
        store.check_at(b"k", &fresh, 5, NOW).await,
        Err(Error::CostTooHigh { .. })
    ));
    let [_, strikes, _] = store.penalty_keys(b"k", &fresh);
    assert_eq!(get(&server, &strikes), Reply::Nil);
}

#[tokio::test]
async fn every_algorithm_bans_with_written_and_generic_scripts() {
    let server = RedisServer::start();
    let written = uncached_store(&server.url()).await;
    let generic = generic_store(&server.url(), "generic:").await;
    for (store, name) in [(&written, "w"), (&generic, "g")] {
        for policy in every_algorithm(name, "1/min") {
            let policy = policy.with_penalty(penalty());
            let d = store.check_at(b"k", &policy, 1, NOW).await.unwrap();
            assert!(d.allowed, "{policy:?}");
            assert_eq!(
                until_banned(store, b"k", &policy, NOW).await,
                2,
                "{policy:?}"
            );
            let d = store.check_at(b"k", &policy, 1, NOW + S).await.unwrap();
            assert_eq!(d.retry_after, Some(9 * SEC), "{policy:?}");
        }
    }
}

#[tokio::test]
async fn a_policy_without_a_penalty_is_never_banned_and_writes_no_penalty_key() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let plain = Policy::gcra("login", "1/min".parse().unwrap()).unwrap();
    for _ in 0..10 {
        assert!(!store.check_at(b"k", &plain, 1, NOW).await.unwrap().banned);
    }
    assert_eq!(server.cmd(&["DBSIZE"]), "1");
}

#[tokio::test]
async fn on_the_servers_clock_a_brute_force_client_is_banned_on_every_node() {
    let server = RedisServer::start();
    let a = uncached_store(&server.url()).await;
    let b = uncached_store(&server.url()).await;
    let policy = login("login");
    // Node A sees the flood.
    let mut refused = 0;
    loop {
        let d = a.check(b"mallory", &policy, 1).await.unwrap();
        if d.banned {
            assert!(d.retry_after.unwrap() <= 10 * SEC);
            break;
        }
        refused += usize::from(!d.allowed);
    }
    assert_eq!(refused, 2);
    // The ban's key lives as long as the ban (+ 1 ms of rounding), no longer.
    let [ban, _, _] = a.penalty_keys(b"mallory", &policy);
    let pttl = server.try_cmd(&[&b"PTTL"[..], &ban]).unwrap();
    let pttl = pttl.as_integer().unwrap();
    assert!(pttl > 0 && pttl <= 10_001, "{pttl}");
    // Node B refuses mallory as banned, and alice as nothing.
    let d = b.check(b"mallory", &policy, 1).await.unwrap();
    assert!(d.banned && d.retry_after.unwrap() <= 10 * SEC);
    assert!(b.check(b"alice", &policy, 1).await.unwrap().allowed);
    // An operator lifts it on node B: node A decides by the quota at once, with the
    // strikes forgotten, and the quota's state kept (still refused: 1/min).
    b.unban(b"mallory", &policy).await.unwrap();
    for _ in 0..2 {
        let d = a.check(b"mallory", &policy, 1).await.unwrap();
        assert!(!d.allowed && !d.banned);
    }
    assert_eq!(server.cmd(&["EXISTS", &text(&ban)]), "0");
    // Lifting what is not banned is no error.
    b.unban(b"nobody", &policy).await.unwrap();
}

#[tokio::test]
async fn unban_forgets_earlier_bans_so_the_next_is_a_first_one() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let policy = login("forget");
    assert!(store.check_at(b"k", &policy, 1, NOW).await.unwrap().allowed);
    until_banned(&store, b"k", &policy, NOW).await;
    until_banned(&store, b"k", &policy, NOW + 10 * S).await;
    let d = store
        .check_at(b"k", &policy, 1, NOW + 10 * S)
        .await
        .unwrap();
    assert_eq!(d.retry_after, Some(30 * SEC));
    store.unban(b"k", &policy).await.unwrap();
    let quota_key = store.redis_key(b"k", &policy);
    assert_eq!(
        server.cmd(&["EXISTS", &text(&quota_key)]),
        "1",
        "quota kept"
    );
    let at = NOW + 11 * S;
    assert_eq!(until_banned(&store, b"k", &policy, at).await, 2);
    let d = store.check_at(b"k", &policy, 1, at).await.unwrap();
    assert_eq!(d.retry_after, Some(10 * SEC));
}

#[tokio::test]
async fn a_reset_forgets_the_quota_only_and_the_ban_holds() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let policy = login("reset");
    assert!(store.check_at(b"k", &policy, 1, NOW).await.unwrap().allowed);
    until_banned(&store, b"k", &policy, NOW).await;
    store.reset(b"k", &policy).await.unwrap();
    let rate_key = text(&store.redis_key(b"k", &policy));
    assert_eq!(server.cmd(&["EXISTS", &rate_key]), "0");
    let d = store.check_at(b"k", &policy, 1, NOW + S).await.unwrap();
    assert!(d.banned && d.retry_after == Some(9 * SEC));
    // Once lifted, the fresh quota admits.
    store.unban(b"k", &policy).await.unwrap();
    assert!(
        store
            .check_at(b"k", &policy, 1, NOW + S)
            .await
            .unwrap()
            .allowed
    );
}

#[tokio::test]
async fn a_banned_key_books_no_slot() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let policy = Policy::gcra("book", "1/s".parse().unwrap())
        .unwrap()
        .with_penalty(penalty());
    let reservable = Reservable::new(policy.clone()).unwrap();
    let wait = Duration::from_secs(5);
    // A booking is no strike: refused ones neither.
    let r = store
        .reserve_at(b"k", &reservable, 1, wait, NOW)
        .await
        .unwrap();
    assert!(r.decision.allowed);
    let r = store
        .reserve_at(b"k", &reservable, 1, wait, NOW)
        .await
        .unwrap();
    assert!(r.decision.allowed && r.wait == SEC, "{r:?}");
    let [ban, strikes, _] = store.penalty_keys(b"k", &policy);
    assert_eq!(get(&server, &strikes), Reply::Nil);
    assert_eq!(until_banned(&store, b"k", &policy, NOW).await, 2);
    let rate_key = store.redis_key(b"k", &policy);
    let before = get(&server, &rate_key);
    let r = store
        .reserve_at(b"k", &reservable, 1, wait, NOW + S)
        .await
        .unwrap();
    assert!(r.decision.banned && !r.decision.allowed && r.ticket.is_none());
    assert_eq!(r.decision.retry_after, Some(9 * SEC));
    assert_eq!(get(&server, &rate_key), before, "nothing booked");
    // Once the ban is lifted the key books again.
    assert_ne!(get(&server, &ban), Reply::Nil);
    store.unban(b"k", &policy).await.unwrap();
    let r = store
        .reserve_at(b"k", &reservable, 1, wait, NOW + S)
        .await
        .unwrap();
    assert!(r.decision.allowed && !r.decision.banned);
}

#[tokio::test]
async fn several_policies_at_once_strike_and_ban_only_the_policy_that_refused() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let plain = Policy::gcra("a", "5/s".parse().unwrap()).unwrap();
    let both = [plain.clone(), login("b")];
    let all = |now| store.check_all_at(b"k", &both, 1, now);
    let first = all(NOW).await.unwrap();
    assert!(first.iter().all(|d| d.unwrap().allowed));
    // b refuses on its own: a strike of b; a answers as a peek, charged nothing.
    for _ in 0..2 {
        let [a, b] = <[_; 2]>::try_from(all(NOW).await.unwrap()).unwrap();
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(a.allowed && a.remaining == 4 && !b.allowed && !b.banned);
    }
    let [a, b] = <[_; 2]>::try_from(all(NOW).await.unwrap()).unwrap();
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(b.banned && b.retry_after == Some(10 * SEC));
    assert!(a.allowed && a.remaining == 4 && !a.banned);
    // While b bans the key, nothing is recorded in a either: a peeks, full again later.
    let rate_a = get(&server, &store.redis_key(b"k", &plain));
    let [a, b] = <[_; 2]>::try_from(all(NOW + 2 * S).await.unwrap()).unwrap();
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(b.banned && b.retry_after == Some(8 * SEC));
    assert!(a.allowed && a.remaining == 5);
    assert_eq!(get(&server, &store.redis_key(b"k", &plain)), rate_a);
    // A penalized policy refused only because another refused counts no strike.
    let tight = Policy::gcra("tight", "1/min".parse().unwrap()).unwrap();
    let loose = Policy::gcra("loose", "100/min".parse().unwrap())
        .unwrap()
        .with_penalty(Penalty::new(1, 60 * SEC, 10 * SEC).unwrap());
    let pair = [tight, loose.clone()];
    for i in 0..5 {
        let got = store.check_all_at(b"k", &pair, 1, NOW).await.unwrap();
        assert_eq!(got[0].unwrap().allowed, i == 0);
        assert!(!got[1].unwrap().banned);
    }
    let [_, strikes, _] = store.penalty_keys(b"k", &loose);
    assert_eq!(get(&server, &strikes), Reply::Nil);
    // One name twice (one set of penalty keys) is left to the layer.
    let twice = [
        login("same"),
        Policy::gcra("same", "2/min".parse().unwrap())
            .unwrap()
            .with_penalty(penalty()),
    ];
    let got = store.check_all_at(b"k", &twice, 1, NOW).await;
    assert!(matches!(got, Err(Error::Unsupported { .. })), "{got:?}");
}

#[tokio::test]
async fn broken_penalty_keys_fail_cleanly_and_change_nothing() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let policy = login("broken");
    let [ban, strikes, bans] = store.penalty_keys(b"k", &policy);
    // A ban key of another type: every check fails, as the server's error.
    server.cmd(&["LPUSH", &text(&ban), "x"]);
    let got = store.check_at(b"k", &policy, 1, NOW).await;
    let Err(Error::Backend { source }) = &got else {
        panic!("{got:?}")
    };
    assert!(source.to_string().contains("WRONGTYPE"), "{source}");
    assert_eq!(
        server.cmd(&["EXISTS", &text(&store.redis_key(b"k", &policy))]),
        "0"
    );
    server.cmd(&["DEL", &text(&ban)]);
    // Unreadable strikes: the refusal that reads them fails, writing nothing.
    assert!(store.check_at(b"k", &policy, 1, NOW).await.unwrap().allowed);
    server.cmd(&["SET", &text(&strikes), "junk"]);
    let got = store.check_at(b"k", &policy, 1, NOW).await;
    assert!(matches!(got, Err(Error::Backend { .. })), "{got:?}");
    assert_eq!(server.cmd(&["GET", &text(&strikes)]), "junk");
    // Remembered bans of another type: the banning strike fails, nothing written.
    server.cmd(&["DEL", &text(&strikes)]);
    server.cmd(&["SADD", &text(&bans), "x"]);
    for _ in 0..2 {
        assert!(!store.check_at(b"k", &policy, 1, NOW).await.unwrap().banned);
    }
    let got = store.check_at(b"k", &policy, 1, NOW).await;
    assert!(matches!(got, Err(Error::Backend { .. })), "{got:?}");
    assert_eq!(server.cmd(&["EXISTS", &text(&ban)]), "0");
    // Unban deletes whatever is there, and the key is penalized afresh.
    store.unban(b"k", &policy).await.unwrap();
    assert_eq!(until_banned(&store, b"k", &policy, NOW).await, 2);
    // A whole script's error (a sliding log's sorted set that is someone else's) comes
    // out of the function it runs in, as the error it is.
    let log = Policy::sliding_log("log", "1/min".parse().unwrap())
        .unwrap()
        .with_penalty(penalty());
    let rate_key = text(&store.redis_key(b"k", &log));
    server.cmd(&["ZADD", &rate_key, "1", "x"]);
    let got = store.check_at(b"k", &log, 1, NOW).await;
    let Err(Error::Backend { source }) = &got else {
        panic!("{got:?}")
    };
    assert!(source.to_string().contains("unreadable"), "{source}");
}

#[tokio::test]
async fn concurrent_refusals_ban_once_and_are_never_coalesced() {
    let server = RedisServer::start();
    // Coalescing on (the default), the deny cache off: every check is a call.
    let store = uncached_store(&server.url()).await;
    let policy = login("crowd");
    assert!(store.check(b"k", &policy, 1).await.unwrap().allowed);
    let mut checks = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let (store, policy) = (store.clone(), policy.clone());
        checks.spawn(async move { store.check(b"k", &policy, 1).await.unwrap() });
    }
    let decisions = checks.join_all().await;
    // Exactly `after` strikes: two plain refusals, then the ban for everyone else.
    let plain = decisions.iter().filter(|d| !d.banned).count();
    assert_eq!(plain, 2);
    assert!(decisions.iter().all(|d| !d.allowed));
    let [_, _, bans] = store.penalty_keys(b"k", &policy);
    let remembered = server.cmd(&["GET", &text(&bans)]);
    assert!(remembered.ends_with(" 1"), "one ban: {remembered}");
    let stats = store.stats();
    assert_eq!((stats.script_calls, stats.coalesced), (65, 0), "{stats:?}");
}

#[tokio::test]
async fn after_script_flush_a_ban_still_holds() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let policy = login("flush");
    assert!(store.check_at(b"k", &policy, 1, NOW).await.unwrap().allowed);
    assert_eq!(until_banned(&store, b"k", &policy, NOW).await, 2);
    server.cmd(&["SCRIPT", "FLUSH"]);
    let d = store.check_at(b"k", &policy, 1, NOW + S).await.unwrap();
    assert!(d.banned);
    assert_eq!(d.retry_after, Some(9 * SEC));
}

#[tokio::test]
async fn on_a_cluster_the_penalty_keys_share_the_rate_keys_slot_and_bans_hold() {
    let cluster = RedisCluster::start(3);
    let store = RedisStore::builder()
        .deny_cache(false)
        .cluster(cluster.urls())
        .await
        .unwrap();
    let policy = login("login");
    for user in [&b"mallory"[..], b"eve", &[4, 203, 0, 113, 7]] {
        assert!(store.check_at(user, &policy, 1, NOW).await.unwrap().allowed);
        assert_eq!(until_banned(&store, user, &policy, NOW).await, 2);
        let node = cluster.node_for_key(&store.redis_key(user, &policy));
        let [ban, _, bans] = store.penalty_keys(user, &policy);
        for key in [&ban, &bans] {
            assert_eq!(cluster.node_for_key(key), node);
            let exists = cluster.node(node).try_cmd(&[&b"EXISTS"[..], key]).unwrap();
            assert_eq!(exists, Reply::Integer(1));
        }
        let d = store.check_at(user, &policy, 1, NOW + S).await.unwrap();
        assert!(d.banned && d.retry_after == Some(9 * SEC));
        store.unban(user, &policy).await.unwrap();
        assert!(
            !store
                .check_at(user, &policy, 1, NOW + S)
                .await
                .unwrap()
                .banned
        );
    }
}

#[tokio::test]
async fn through_deny_caches_a_ban_costs_redis_nothing_and_an_unban_elsewhere_arrives_within_the_hold()
 {
    let server = RedisServer::start();
    let policy = login("login");
    let hold = Duration::from_secs(1);
    let (clock_a, clock_b) = (ManualClock::new(0), ManualClock::new(0));
    let node = |clock: ManualClock| {
        let url = server.url();
        async move {
            DenyCache::builder()
                .max_ban_hold(hold)
                .clock(clock)
                .build(uncached_store(&url).await)
        }
    };
    let (a, b) = (node(clock_a.clone()).await, node(clock_b).await);
    // Node A sees the flood: every refusal reaches Redis (a strike), until the ban.
    let mut before_ban = 0;
    while !a.check(b"mallory", &policy, 1).await.unwrap().banned {
        before_ban += 1;
    }
    assert_eq!(before_ban, 3, "one admission, two refusals");
    assert_eq!(a.stats().store_calls, 4);
    // Banned, the key costs Redis nothing on A within the hold.
    for _ in 0..100 {
        assert!(a.check(b"mallory", &policy, 1).await.unwrap().banned);
    }
    assert_eq!(a.stats().store_calls, 4);
    // Node B asks Redis once and is told the ban.
    assert!(b.check(b"mallory", &policy, 1).await.unwrap().banned);
    assert!(b.check(b"mallory", &policy, 1).await.unwrap().banned);
    assert_eq!(b.stats().store_calls, 1);
    // Unbanned through B: B asks Redis at once, and the quota decides (1/min: refused).
    b.unban(b"mallory", &policy).await.unwrap();
    let d = b.check(b"mallory", &policy, 1).await.unwrap();
    assert!(!d.allowed && !d.banned);
    // A holds what it knew for at most the hold, on its clock; then it asks Redis.
    assert!(a.check(b"mallory", &policy, 1).await.unwrap().banned);
    clock_a.advance(hold);
    let d = a.check(b"mallory", &policy, 1).await.unwrap();
    assert!(!d.allowed && !d.banned);
    assert_eq!(a.stats().store_calls, 5);
}

#[tokio::test]
async fn a_store_with_its_deny_cache_holds_a_ban_and_forgets_it_on_its_own_unban() {
    let server = RedisServer::start();
    let store = RedisStore::builder()
        .deny_cache_max_ban_hold(Duration::from_secs(3600))
        .multiplexed(&server.url())
        .await
        .unwrap();
    let policy = login("login");
    while !store.check(b"trudy", &policy, 1).await.unwrap().banned {}
    let calls = store.stats().script_calls;
    for _ in 0..50 {
        let d = store.check(b"trudy", &policy, 1).await.unwrap();
        assert!(d.banned && d.retry_after.unwrap() <= 10 * SEC);
        // The tower layer asks without a future first: answered too.
        assert!(
            store
                .check_now(b"trudy", &policy, 1)
                .unwrap()
                .unwrap()
                .banned
        );
    }
    assert_eq!(
        store.stats().script_calls,
        calls,
        "a banned key costs Redis nothing"
    );
    // A waiting layer's booking of a banned key books nothing, even with a wait longer
    // than the ban.
    let reservable = Reservable::new(policy.clone()).unwrap();
    let r = store
        .reserve(b"trudy", &reservable, 1, Duration::from_secs(30))
        .await
        .unwrap();
    assert!(
        r.decision.banned && r.ticket.is_none() && r.wait.is_zero(),
        "{r:?}"
    );
    let calls = store.stats().script_calls;
    store.unban(b"trudy", &policy).await.unwrap();
    let d = store.check(b"trudy", &policy, 1).await.unwrap();
    assert!(!d.banned && !d.allowed);
    assert_eq!(store.stats().script_calls, calls + 1);
}

#[tokio::test]
async fn a_ban_is_reported_with_the_policys_rounding_and_held_by_a_deny_cache() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    // redis-cell's whole seconds: 1 per minute, burst 1, a 10.5 s ban.
    let policy = Policy::redis_cell("cell", 0, 1, 60 * SEC)
        .unwrap()
        .with_penalty(Penalty::new(1, 60 * SEC, Duration::from_millis(10_500)).unwrap());
    assert_eq!(until_banned(&store, b"eve", &policy, NOW).await, 0);
    let banned = store.check_at(b"eve", &policy, 1, NOW).await.unwrap();
    // 10.5 s reported as redis-cell reports it: 11 whole seconds.
    assert!(banned.banned);
    assert_eq!(banned.retry_after, Some(11 * SEC));
    // The memory store says the same.
    let memory = floodwall_core::MemoryStore::builder()
        .clock(ManualClock::new(NOW))
        .build();
    memory.check_now(b"eve", &policy, 1).unwrap().unwrap();
    let refused = memory.check_now(b"eve", &policy, 1).unwrap().unwrap();
    assert_eq!(
        (refused.banned, refused.retry_after),
        (true, Some(11 * SEC))
    );

    // A deny cache in front holds a ban Redis gave on its own clock from the exact
    // figures behind the rounded ones: the next checks cost Redis nothing (within the
    // cache's ban hold, a second).
    let cached = DenyCache::new(store.clone());
    let mut first = None;
    for _ in 0..5 {
        let d = cached.check(b"mallory", &policy, 1).await.unwrap();
        if d.banned {
            first = Some(d);
            break;
        }
    }
    let first = first.expect("banned on the server's clock");
    assert_eq!(first.retry_after.unwrap().subsec_nanos(), 0, "{first:?}");
    let calls = cached.stats().store_calls;
    for _ in 0..10 {
        assert!(cached.check(b"mallory", &policy, 1).await.unwrap().banned);
    }
    assert_eq!(cached.stats().store_calls, calls);
}
