//! A ban as the other stores on its Redis meet it: another node on the same server, a
//! cluster's nodes, and deny caches (in front of a store, or the store's own).

use super::*;

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
        if d.is_banned() {
            assert!(d.retry_after.unwrap() <= 10 * SEC);
            break;
        }
        refused += usize::from(!d.is_allowed());
    }
    assert_eq!(refused, 2);
    // The ban's key lives as long as the ban (+ 1 ms of rounding), no longer.
    let [ban, _, _] = a.penalty_keys(b"mallory", &policy);
    let pttl = server.try_cmd(&[&b"PTTL"[..], &ban]).unwrap();
    let pttl = pttl.as_integer().unwrap();
    assert!(pttl > 0 && pttl <= 10_001, "{pttl}");
    // Node B refuses mallory as banned, and alice as nothing.
    let d = b.check(b"mallory", &policy, 1).await.unwrap();
    assert!(d.is_banned() && d.retry_after.unwrap() <= 10 * SEC);
    assert!(b.check(b"alice", &policy, 1).await.unwrap().is_allowed());
    // An operator lifts it on node B: node A decides by the quota at once, with the
    // strikes forgotten, and the quota's state kept (still refused: 1/min).
    b.unban(b"mallory", &policy).await.unwrap();
    for _ in 0..2 {
        let d = a.check(b"mallory", &policy, 1).await.unwrap();
        assert!(!d.is_allowed() && !d.is_banned());
    }
    assert_eq!(server.cmd(&["EXISTS", &text(&ban)]), "0");
    // Lifting what is not banned is no error.
    b.unban(b"nobody", &policy).await.unwrap();
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
        assert!(
            store
                .at(NOW)
                .check(user, &policy, 1)
                .await
                .unwrap()
                .is_allowed()
        );
        assert_eq!(until_banned(&store, user, &policy, NOW).await, 2);
        let node = cluster.node_for_key(&store.redis_key(user, &policy));
        let [ban, _, bans] = store.penalty_keys(user, &policy);
        for key in [&ban, &bans] {
            assert_eq!(cluster.node_for_key(key), node);
            let exists = cluster.node(node).try_cmd(&[&b"EXISTS"[..], key]).unwrap();
            assert_eq!(exists, Reply::Integer(1));
        }
        let d = store.at(NOW + S).check(user, &policy, 1).await.unwrap();
        assert!(d.is_banned() && d.retry_after == Some(9 * SEC));
        store.unban(user, &policy).await.unwrap();
        assert!(
            !store
                .at(NOW + S)
                .check(user, &policy, 1)
                .await
                .unwrap()
                .is_banned()
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
    while !a.check(b"mallory", &policy, 1).await.unwrap().is_banned() {
        before_ban += 1;
    }
    assert_eq!(before_ban, 3, "one admission, two refusals");
    assert_eq!(a.stats().store_calls, 4);
    // Banned, the key costs Redis nothing on A within the hold.
    for _ in 0..100 {
        assert!(a.check(b"mallory", &policy, 1).await.unwrap().is_banned());
    }
    assert_eq!(a.stats().store_calls, 4);
    // Node B asks Redis once and is told the ban.
    assert!(b.check(b"mallory", &policy, 1).await.unwrap().is_banned());
    assert!(b.check(b"mallory", &policy, 1).await.unwrap().is_banned());
    assert_eq!(b.stats().store_calls, 1);
    // Unbanned through B: B asks Redis at once, and the quota decides (1/min: refused).
    b.unban(b"mallory", &policy).await.unwrap();
    let d = b.check(b"mallory", &policy, 1).await.unwrap();
    assert!(!d.is_allowed() && !d.is_banned());
    // A holds what it knew for at most the hold, on its clock; then it asks Redis.
    assert!(a.check(b"mallory", &policy, 1).await.unwrap().is_banned());
    clock_a.advance(hold);
    let d = a.check(b"mallory", &policy, 1).await.unwrap();
    assert!(!d.is_allowed() && !d.is_banned());
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
    while !store.check(b"trudy", &policy, 1).await.unwrap().is_banned() {}
    let calls = store.stats().script_calls;
    for _ in 0..50 {
        let d = store.check(b"trudy", &policy, 1).await.unwrap();
        assert!(d.is_banned() && d.retry_after.unwrap() <= 10 * SEC);
        // The tower layer asks without a future first: answered too.
        assert!(
            store
                .check_now(b"trudy", &policy, 1)
                .unwrap()
                .unwrap()
                .is_banned()
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
        r.decision.is_banned() && r.ticket.is_none() && r.wait.is_zero(),
        "{r:?}"
    );
    let calls = store.stats().script_calls;
    store.unban(b"trudy", &policy).await.unwrap();
    let d = store.check(b"trudy", &policy, 1).await.unwrap();
    assert!(!d.is_banned() && !d.is_allowed());
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
    let banned = store.at(NOW).check(b"eve", &policy, 1).await.unwrap();
    // 10.5 s reported as redis-cell reports it: 11 whole seconds.
    assert!(banned.is_banned());
    assert_eq!(banned.retry_after, Some(11 * SEC));
    // The memory store says the same.
    let memory = floodwall_core::MemoryStore::builder()
        .clock(ManualClock::new(NOW))
        .build();
    memory.check_now(b"eve", &policy, 1).unwrap().unwrap();
    let refused = memory.check_now(b"eve", &policy, 1).unwrap().unwrap();
    assert_eq!(
        (refused.is_banned(), refused.retry_after),
        (true, Some(11 * SEC))
    );

    // A deny cache in front holds a ban Redis gave on its own clock from the exact
    // figures behind the rounded ones: the next checks cost Redis nothing (within the
    // cache's ban hold, a second).
    let cached = DenyCache::new(store.clone());
    let mut first = None;
    for _ in 0..5 {
        let d = cached.check(b"mallory", &policy, 1).await.unwrap();
        if d.is_banned() {
            first = Some(d);
            break;
        }
    }
    let first = first.expect("banned on the server's clock");
    assert_eq!(first.retry_after.unwrap().subsec_nanos(), 0, "{first:?}");
    let calls = cached.stats().store_calls;
    for _ in 0..10 {
        assert!(
            cached
                .check(b"mallory", &policy, 1)
                .await
                .unwrap()
                .is_banned()
        );
    }
    assert_eq!(cached.stats().store_calls, calls);
}
