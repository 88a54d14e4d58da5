//! Penalties in Redis, against real redis-servers: refusals ban a key, bans grow to their
//! cap and end on time, a banned key books nothing, and broken keys fail cleanly. How
//! other stores meet a ban (every node sharing the server sees a ban and its lifting at
//! once, a cluster, deny caches): `penalty/shared.rs`.

mod common;

#[path = "penalty/shared.rs"]
mod shared;

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
        let d = store.at(now).check(key, policy, 1).await.unwrap();
        if d.is_banned() {
            assert!(!d.is_allowed() && d.remaining == 0);
            return refused;
        }
        refused += usize::from(!d.is_allowed());
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
            .at(NOW)
            .check(b"eve", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
    );
    let rate_key = store.redis_key(b"eve", &policy);
    let quota_state = get(&server, &rate_key);
    // Two plain refusals; the third is answered as the ban already.
    for _ in 0..2 {
        let d = store.at(NOW).check(b"eve", &policy, 1).await.unwrap();
        assert!(!d.is_allowed() && !d.is_banned());
    }
    let d = store.at(NOW).check(b"eve", &policy, 1).await.unwrap();
    assert!(d.is_banned() && !d.is_allowed());
    assert_eq!(d.retry_after, Some(10 * SEC));
    assert_eq!(d.limit, 1);
    // While banned, every check (a peek too) is the ban's remainder, and the quota's
    // state is not touched.
    let d = store
        .at(NOW + 4 * S)
        .check(b"eve", &policy, 0)
        .await
        .unwrap();
    assert!(d.is_banned());
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
        let d = store.at(now).check(b"eve", &policy, 1).await.unwrap();
        assert_eq!(
            d.retry_after,
            Some(Duration::from_secs(expected)),
            "{expected}"
        );
        now += expected * S;
    }
    // Another key is not banned.
    let d = store.at(NOW).check(b"bob", &policy, 1).await.unwrap();
    assert!(d.is_allowed() && !d.is_banned());
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
    assert!(
        store
            .at(NOW)
            .check(b"k", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
    );
    assert_eq!(until_banned(&store, b"k", &policy, NOW).await, 1);
    // A microsecond before its end the ban still holds, for that microsecond.
    let d = store
        .at(NOW + 10 * S - 1)
        .check(b"k", &policy, 1)
        .await
        .unwrap();
    assert!(d.is_banned());
    assert_eq!(d.retry_after, Some(Duration::from_micros(1)));
    // At its end the quota decides again: 1/s has long refilled.
    let d = store
        .at(NOW + 10 * S)
        .check(b"k", &policy, 1)
        .await
        .unwrap();
    assert!(d.is_allowed() && !d.is_banned());
    // Banned again within 30 s of the end: the second ban, 20 s.
    let then = NOW + 39 * S;
    assert_eq!(until_banned(&store, b"k", &policy, then).await, 1);
    let d = store.at(then).check(b"k", &policy, 1).await.unwrap();
    assert_eq!(d.retry_after, Some(20 * SEC));
    // After more than 30 s past that ban's end, the next is a first ban again.
    let later = then + 20 * S + 30 * S;
    assert!(
        store
            .at(later)
            .check(b"k", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
    );
    assert_eq!(until_banned(&store, b"k", &policy, later).await, 1);
    let d = store.at(later).check(b"k", &policy, 1).await.unwrap();
    assert_eq!(d.retry_after, Some(10 * SEC));
}

#[tokio::test]
async fn strikes_are_counted_within_their_window_only() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let policy = login("window");
    assert!(
        store
            .at(NOW)
            .check(b"k", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
    );
    // Two refusals, then the window of 60 s from the first lapses: they are forgotten.
    for at in [NOW + S, NOW + 2 * S] {
        assert!(
            !store
                .at(at)
                .check(b"k", &policy, 1)
                .await
                .unwrap()
                .is_banned()
        );
    }
    let after = NOW + 61 * S;
    assert!(
        store
            .at(after)
            .check(b"k", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
    );
    for _ in 0..2 {
        assert!(
            !store
                .at(after)
                .check(b"k", &policy, 1)
                .await
                .unwrap()
                .is_banned()
        );
    }
    assert!(
        store
            .at(after)
            .check(b"k", &policy, 1)
            .await
            .unwrap()
            .is_banned()
    );
    // A cost the quota can never take fails before Redis, and is no strike.
    let fresh = login("fresh");
    assert!(matches!(
        store.at(NOW).check(b"k", &fresh, 5).await,
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
            let d = store.at(NOW).check(b"k", &policy, 1).await.unwrap();
            assert!(d.is_allowed(), "{policy:?}");
            assert_eq!(
                until_banned(store, b"k", &policy, NOW).await,
                2,
                "{policy:?}"
            );
            let d = store.at(NOW + S).check(b"k", &policy, 1).await.unwrap();
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
        assert!(
            !store
                .at(NOW)
                .check(b"k", &plain, 1)
                .await
                .unwrap()
                .is_banned()
        );
    }
    assert_eq!(server.cmd(&["DBSIZE"]), "1");
}

#[tokio::test]
async fn unban_forgets_earlier_bans_so_the_next_is_a_first_one() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let policy = login("forget");
    assert!(
        store
            .at(NOW)
            .check(b"k", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
    );
    until_banned(&store, b"k", &policy, NOW).await;
    until_banned(&store, b"k", &policy, NOW + 10 * S).await;
    let d = store
        .at(NOW + 10 * S)
        .check(b"k", &policy, 1)
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
    let d = store.at(at).check(b"k", &policy, 1).await.unwrap();
    assert_eq!(d.retry_after, Some(10 * SEC));
}

#[tokio::test]
async fn a_reset_forgets_the_quota_only_and_the_ban_holds() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let policy = login("reset");
    assert!(
        store
            .at(NOW)
            .check(b"k", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
    );
    until_banned(&store, b"k", &policy, NOW).await;
    store.reset(b"k", &policy).await.unwrap();
    let rate_key = text(&store.redis_key(b"k", &policy));
    assert_eq!(server.cmd(&["EXISTS", &rate_key]), "0");
    let d = store.at(NOW + S).check(b"k", &policy, 1).await.unwrap();
    assert!(d.is_banned() && d.retry_after == Some(9 * SEC));
    // Once lifted, the fresh quota admits.
    store.unban(b"k", &policy).await.unwrap();
    assert!(
        store
            .at(NOW + S)
            .check(b"k", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
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
        .at(NOW)
        .reserve(b"k", &reservable, 1, wait)
        .await
        .unwrap();
    assert!(r.decision.is_allowed());
    let r = store
        .at(NOW)
        .reserve(b"k", &reservable, 1, wait)
        .await
        .unwrap();
    assert!(r.decision.is_allowed() && r.wait == SEC, "{r:?}");
    let [ban, strikes, _] = store.penalty_keys(b"k", &policy);
    assert_eq!(get(&server, &strikes), Reply::Nil);
    assert_eq!(until_banned(&store, b"k", &policy, NOW).await, 2);
    let rate_key = store.redis_key(b"k", &policy);
    let before = get(&server, &rate_key);
    let r = store
        .at(NOW + S)
        .reserve(b"k", &reservable, 1, wait)
        .await
        .unwrap();
    assert!(r.decision.is_banned() && !r.decision.is_allowed() && r.ticket.is_none());
    assert_eq!(r.decision.retry_after, Some(9 * SEC));
    assert_eq!(get(&server, &rate_key), before, "nothing booked");
    // Once the ban is lifted the key books again.
    assert_ne!(get(&server, &ban), Reply::Nil);
    store.unban(b"k", &policy).await.unwrap();
    let r = store
        .at(NOW + S)
        .reserve(b"k", &reservable, 1, wait)
        .await
        .unwrap();
    assert!(r.decision.is_allowed() && !r.decision.is_banned());
}

#[tokio::test]
async fn several_policies_at_once_strike_and_ban_only_the_policy_that_refused() {
    let server = RedisServer::start();
    let store = uncached_store(&server.url()).await;
    let plain = Policy::gcra("a", "5/s".parse().unwrap()).unwrap();
    let both = [plain.clone(), login("b")];
    let (store, both) = (&store, &both);
    let all = |now| async move { store.at(now).check_all(b"k", both, 1).await };
    let first = all(NOW).await.unwrap();
    assert!(first.iter().all(|d| d.unwrap().is_allowed()));
    // b refuses on its own: a strike of b; a answers as a peek, charged nothing.
    for _ in 0..2 {
        let [a, b] = <[_; 2]>::try_from(all(NOW).await.unwrap()).unwrap();
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(a.is_allowed() && a.remaining == 4 && !b.is_allowed() && !b.is_banned());
    }
    let [a, b] = <[_; 2]>::try_from(all(NOW).await.unwrap()).unwrap();
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(b.is_banned() && b.retry_after == Some(10 * SEC));
    assert!(a.is_allowed() && a.remaining == 4 && !a.is_banned());
    // While b bans the key, nothing is recorded in a either: a peeks, full again later.
    let rate_a = get(&server, &store.redis_key(b"k", &plain));
    let [a, b] = <[_; 2]>::try_from(all(NOW + 2 * S).await.unwrap()).unwrap();
    let (a, b) = (a.unwrap(), b.unwrap());
    assert!(b.is_banned() && b.retry_after == Some(8 * SEC));
    assert!(a.is_allowed() && a.remaining == 5);
    assert_eq!(get(&server, &store.redis_key(b"k", &plain)), rate_a);
    // A penalized policy refused only because another refused counts no strike.
    let tight = Policy::gcra("tight", "1/min".parse().unwrap()).unwrap();
    let loose = Policy::gcra("loose", "100/min".parse().unwrap())
        .unwrap()
        .with_penalty(Penalty::new(1, 60 * SEC, 10 * SEC).unwrap());
    let pair = [tight, loose.clone()];
    for i in 0..5 {
        let got = store.at(NOW).check_all(b"k", &pair, 1).await.unwrap();
        assert_eq!(got[0].unwrap().is_allowed(), i == 0);
        assert!(!got[1].unwrap().is_banned());
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
    let got = store.at(NOW).check_all(b"k", &twice, 1).await;
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
    let got = store.at(NOW).check(b"k", &policy, 1).await;
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
    assert!(
        store
            .at(NOW)
            .check(b"k", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
    );
    server.cmd(&["SET", &text(&strikes), "junk"]);
    let got = store.at(NOW).check(b"k", &policy, 1).await;
    assert!(matches!(got, Err(Error::Backend { .. })), "{got:?}");
    assert_eq!(server.cmd(&["GET", &text(&strikes)]), "junk");
    // Remembered bans of another type: the banning strike fails, nothing written.
    server.cmd(&["DEL", &text(&strikes)]);
    server.cmd(&["SADD", &text(&bans), "x"]);
    for _ in 0..2 {
        assert!(
            !store
                .at(NOW)
                .check(b"k", &policy, 1)
                .await
                .unwrap()
                .is_banned()
        );
    }
    let got = store.at(NOW).check(b"k", &policy, 1).await;
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
    let got = store.at(NOW).check(b"k", &log, 1).await;
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
    assert!(store.check(b"k", &policy, 1).await.unwrap().is_allowed());
    let mut checks = tokio::task::JoinSet::new();
    for _ in 0..64 {
        let (store, policy) = (store.clone(), policy.clone());
        checks.spawn(async move { store.check(b"k", &policy, 1).await.unwrap() });
    }
    let decisions = checks.join_all().await;
    // Exactly `after` strikes: two plain refusals, then the ban for everyone else.
    let plain = decisions.iter().filter(|d| !d.is_banned()).count();
    assert_eq!(plain, 2);
    assert!(decisions.iter().all(|d| !d.is_allowed()));
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
    assert!(
        store
            .at(NOW)
            .check(b"k", &policy, 1)
            .await
            .unwrap()
            .is_allowed()
    );
    assert_eq!(until_banned(&store, b"k", &policy, NOW).await, 2);
    server.cmd(&["SCRIPT", "FLUSH"]);
    let d = store.at(NOW + S).check(b"k", &policy, 1).await.unwrap();
    assert!(d.is_banned());
    assert_eq!(d.retry_after, Some(9 * SEC));
}
