//! What each kind of limit answers, with every field of each status.

use std::time::Duration;

use envoy_types::pb::envoy::service::ratelimit::v3::rate_limit_response::rate_limit::Unit;
use std::sync::Arc;

use floodwall_core::{DynStore, MemoryStore};
use floodwall_rls::RateLimitService;
use floodwall_rls::config::Config;

use super::{
    CONFIG, OK, OVER, codes, costing, descriptor, request, reset, start, start_service, start_with,
};

#[tokio::test]
async fn the_quota_is_exact_and_each_value_counted_apart() {
    let (rls, clock) = start(CONFIG).await;
    for remaining in [2, 1, 0] {
        let r = rls.one(&[("user", "alice")]).await;
        assert_eq!((r.overall_code, codes(&r)), (OK, vec![(OK, remaining)]));
    }
    let r = rls.one(&[("user", "alice")]).await;
    assert_eq!((r.overall_code, codes(&r)), (OVER, vec![(OVER, 0)]));
    // Another value of the key has a quota of its own.
    assert_eq!(codes(&rls.one(&[("user", "bob")]).await), [(OK, 2)]);
    // GCRA at 3 a minute: one more every 20 s.
    clock.advance(Duration::from_secs(20));
    assert_eq!(codes(&rls.one(&[("user", "alice")]).await), [(OK, 0)]);
    assert_eq!(codes(&rls.one(&[("user", "alice")]).await), [(OVER, 0)]);
}

#[tokio::test]
async fn statuses_carry_the_limit_what_remains_and_the_reset() {
    let (rls, _clock) = start(CONFIG).await;
    let r = rls.one(&[("user", "alice")]).await;
    let s = &r.statuses[0];
    let limit = s.current_limit.as_ref().expect("a current limit");
    assert_eq!(
        (limit.requests_per_unit, limit.unit, limit.name.as_str()),
        (3, Unit::Minute as i32, "")
    );
    assert_eq!(s.limit_remaining, 2);
    // Full again once the one request's interval has passed.
    assert_eq!(reset(s), Some(Duration::from_secs(20)));

    let r = rls.one(&[("ip", "192.0.2.1")]).await;
    let limit = r.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.requests_per_unit, limit.unit, limit.name.as_str()),
        (10, Unit::Second as i32, "per_ip")
    );
    assert_eq!(reset(&r.statuses[0]), Some(Duration::from_millis(100)));

    // A fixed window of a day, as the file asks.
    let r = rls.one(&[("path", "/orders")]).await;
    let s = &r.statuses[0];
    assert_eq!((s.code, s.limit_remaining), (OK, 999));
    assert_eq!(s.current_limit.as_ref().unwrap().unit, Unit::Day as i32);
    assert!(reset(s).unwrap() <= Duration::from_secs(86_400));
}

#[tokio::test]
async fn nested_descriptors_follow_the_entries_in_order() {
    let (rls, _clock) = start(CONFIG).await;
    let gold = [("tenant", "acme"), ("plan", "gold")];
    let silver = [("tenant", "acme"), ("plan", "silver")];
    let r = rls.one(&gold).await;
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        10
    );
    assert_eq!(codes(&r), [(OK, 9)]);
    // The key alone at the second level: 2 an hour, per value of each entry.
    assert_eq!(codes(&rls.one(&silver).await), [(OK, 1)]);
    assert_eq!(codes(&rls.one(&silver).await), [(OK, 0)]);
    assert_eq!(codes(&rls.one(&silver).await), [(OVER, 0)]);
    assert_eq!(
        codes(&rls.one(&[("tenant", "other"), ("plan", "silver")]).await),
        [(OK, 1)]
    );
    // The first level alone has no limit: OK, nothing else said, nothing counted.
    let r = rls.one(&[("tenant", "acme")]).await;
    assert_eq!(codes(&r), [(OK, 0)]);
    assert!(r.statuses[0].current_limit.is_none());
    assert!(r.statuses[0].duration_until_reset.is_none());
}

#[tokio::test]
async fn hits_addend_of_the_descriptor_wins_over_the_request() {
    let (rls, _clock) = start(CONFIG).await;
    // The request's: 2 units.
    let mut r = request("api", vec![descriptor(&[("user", "a")])]);
    r.hits_addend = 2;
    assert_eq!(codes(&rls.ask(r).await), [(OK, 1)]);
    // The descriptor's 1 wins over the request's 3 (which alone would be refused).
    let mut r = request("api", vec![costing(descriptor(&[("user", "b")]), 1)]);
    r.hits_addend = 3;
    assert_eq!(codes(&rls.ask(r).await), [(OK, 2)]);
    // The request's 0 counts as 1, as the reference counts it.
    let r = request("api", vec![descriptor(&[("user", "b")])]);
    assert_eq!(codes(&rls.ask(r).await), [(OK, 1)]);
    // The descriptor's 0 only reads.
    let r = request("api", vec![costing(descriptor(&[("user", "b")]), 0)]);
    assert_eq!(codes(&rls.ask(r).await), [(OK, 1)]);
    // More than the limit could ever admit: refused, nothing charged.
    let r = request("api", vec![costing(descriptor(&[("user", "b")]), 4)]);
    assert_eq!(codes(&rls.ask(r).await), [(OVER, 0)]);
    assert_eq!(codes(&rls.one(&[("user", "b")]).await), [(OK, 0)]);
}

#[tokio::test]
async fn unlimited_answers_ok_without_the_store() {
    let (rls, _clock) = start(CONFIG).await;
    for _ in 0..20 {
        let r = rls.one(&[("path", "/health")]).await;
        assert_eq!((r.overall_code, codes(&r)), (OK, vec![(OK, u32::MAX)]));
        assert!(r.statuses[0].current_limit.is_none());
    }
    assert!(rls.service.store().is_empty());
}

#[tokio::test]
async fn requests_per_unit_0_refuses_without_the_store() {
    let (rls, _clock) = start(CONFIG).await;
    let r = rls.one(&[("path", "/blocked")]).await;
    assert_eq!((r.overall_code, codes(&r)), (OVER, vec![(OVER, 0)]));
    let limit = r.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.requests_per_unit, limit.unit),
        (0, Unit::Hour as i32)
    );
    assert!(rls.service.store().is_empty());
}

#[tokio::test]
async fn shadow_mode_counts_but_answers_ok() {
    let (rls, _clock) = start(CONFIG).await;
    let r = rls.one(&[("trial", "t")]).await;
    assert_eq!((r.overall_code, codes(&r)), (OK, vec![(OK, 0)]));
    assert_eq!(rls.service.store().len(), 1);
    // Over its limit: the store refuses, the answer is OK, remaining 0 (as the reference).
    for _ in 0..3 {
        let r = rls.one(&[("trial", "t")]).await;
        assert_eq!((r.overall_code, codes(&r)), (OK, vec![(OK, 0)]));
        assert!(r.statuses[0].current_limit.is_some());
    }
    // Beside a limit in force, it refuses nothing; the other is charged as usual.
    let r = rls.several(&[&[("trial", "t")], &[("user", "u")]]).await;
    assert_eq!((r.overall_code, codes(&r)), (OK, vec![(OK, 0), (OK, 2)]));
    // `requests_per_unit: 0` in shadow mode: OK, the store untouched.
    let before = rls.service.store().len();
    let r = rls.one(&[("path", "/retired")]).await;
    assert_eq!((r.overall_code, codes(&r)), (OK, vec![(OK, 0)]));
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        0
    );
    assert_eq!(rls.service.store().len(), before);
}

#[tokio::test]
async fn replaced_limits_are_not_checked() {
    let (rls, _clock) = start(CONFIG).await;
    let both = || {
        request(
            "api",
            vec![
                descriptor(&[("ip", "192.0.2.1")]),
                descriptor(&[("app", "shop")]),
            ],
        )
    };
    let r = rls.ask(both()).await;
    assert_eq!(codes(&r), [(OK, 0), (OK, 4)]);
    assert!(r.statuses[0].current_limit.is_none());
    assert_eq!(codes(&rls.ask(both()).await), [(OK, 0), (OK, 3)]);
    // The IP's limit, alone, applies and was never charged.
    assert_eq!(codes(&rls.one(&[("ip", "192.0.2.1")]).await), [(OK, 9)]);
}

#[tokio::test]
async fn an_unknown_domain_or_descriptor_has_no_limit() {
    let (rls, _clock) = start(CONFIG).await;
    let r = rls
        .ask(request("elsewhere", vec![descriptor(&[("user", "alice")])]))
        .await;
    assert_eq!((r.overall_code, codes(&r)), (OK, vec![(OK, 0)]));
    assert!(r.statuses[0].current_limit.is_none());
    let r = rls.one(&[("colour", "blue")]).await;
    assert_eq!((r.overall_code, codes(&r)), (OK, vec![(OK, 0)]));
    // Deeper than the tree: no limit, as the reference.
    let r = rls.one(&[("user", "alice"), ("extra", "x")]).await;
    assert_eq!(codes(&r), [(OK, 0)]);
    assert!(rls.service.store().is_empty());
}

#[tokio::test]
async fn a_reload_applies_to_the_next_request() {
    let (rls, _clock) = start(CONFIG).await;
    assert_eq!(codes(&rls.one(&[("user", "alice")]).await), [(OK, 2)]);
    let raised = CONFIG.replace("requests_per_unit: 3}", "requests_per_unit: 30}");
    rls.service
        .set_config(Config::from_yaml("raised.yaml", &raised).unwrap());
    let r = rls.one(&[("user", "alice")]).await;
    assert_eq!(
        r.statuses[0]
            .current_limit
            .as_ref()
            .unwrap()
            .requests_per_unit,
        30
    );
    assert_eq!(r.statuses[0].code, OK);
}

#[tokio::test]
async fn response_headers_on_request() {
    let config = Config::from_yaml("test.yaml", CONFIG).unwrap();
    let service = RateLimitService::new(config, MemoryStore::new()).response_headers(true);
    let rls = start_service(service).await;
    let header = |r: &envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse,
                  name: &str| {
        r.response_headers_to_add
            .iter()
            .find(|h| h.key == name)
            .map(|h| h.value.clone())
    };
    let r = rls.one(&[("user", "alice")]).await;
    let policy = header(&r, "RateLimit-Policy").expect("RateLimit-Policy");
    assert!(
        policy.starts_with("\"api.user:") && policy.ends_with("\";q=3;w=60"),
        "{policy}"
    );
    let limit = header(&r, "RateLimit").expect("RateLimit");
    assert!(limit.ends_with("\";r=2;t=20"), "{limit}");
    assert_eq!(header(&r, "Retry-After"), None);
    rls.one(&[("user", "alice")]).await;
    rls.one(&[("user", "alice")]).await;
    let r = rls.one(&[("user", "alice")]).await;
    assert_eq!(r.overall_code, OVER);
    let retry: u64 = header(&r, "Retry-After").unwrap().parse().unwrap();
    assert!((1..=20).contains(&retry), "{retry}");
    // Without the flag: none.
    let (plain, _clock) = start(CONFIG).await;
    assert!(
        plain
            .one(&[("user", "alice")])
            .await
            .response_headers_to_add
            .is_empty()
    );
}

#[tokio::test]
async fn descriptors_under_one_limit_share_one_header_member_with_the_least_left() {
    let config = Config::from_yaml("test.yaml", CONFIG).unwrap();
    let service = RateLimitService::new(config, MemoryStore::new()).response_headers(true);
    let rls = start_service(service).await;
    rls.one(&[("user", "alice")]).await;
    rls.one(&[("user", "alice")]).await;
    // Alice has one request left of three, Bob and Carol three; each request charges
    // every descriptor one. The tightest is first, then second.
    for order in [["alice", "bob"], ["carol", "bob"]] {
        let descriptors = order.map(|user| descriptor(&[("user", user)])).to_vec();
        let r = rls.ask(request("api", descriptors)).await;
        assert_eq!(r.overall_code, OK);
        let field = |name: &str| {
            let h = r.response_headers_to_add.iter().find(|h| h.key == name);
            h.map(|h| h.value.clone()).unwrap()
        };
        let (policy, limit) = (field("RateLimit-Policy"), field("RateLimit"));
        assert_eq!(policy.matches(";q=3;w=60").count(), 1, "{policy}");
        assert_eq!(limit.matches(";r=").count(), 1, "{limit}");
        // Alice's last request, then Bob's second.
        let least = if order[0] == "alice" { 0 } else { 1 };
        assert!(limit.contains(&format!(";r={least};")), "{limit}");
    }
}

#[tokio::test]
async fn a_request_refused_by_requests_per_unit_0_retries_after_its_unit() {
    // Refused with no decision to say when: Retry-After is the unit of the limit that
    // refused, never that of a shadow one (which refuses nothing).
    let yaml = "domain: api
descriptors:
  - key: path
    value: /blocked
    rate_limit: {unit: minute, requests_per_unit: 0}
  - key: path
    value: /retired
    shadow_mode: true
    rate_limit: {unit: day, requests_per_unit: 0}
";
    let config = Config::from_yaml("blocked.yaml", yaml).unwrap();
    let service = RateLimitService::new(config, MemoryStore::new()).response_headers(true);
    let rls = start_service(service).await;
    let r = rls
        .several(&[&[("path", "/retired")], &[("path", "/blocked")]])
        .await;
    assert_eq!(r.overall_code, OVER);
    let retry = r
        .response_headers_to_add
        .iter()
        .find(|h| h.key == "Retry-After");
    assert_eq!(retry.map(|h| h.value.as_str()), Some("60"));
}

#[tokio::test]
async fn a_store_chosen_at_run_time_serves_too() {
    let store: Arc<dyn DynStore> = Arc::new(MemoryStore::new());
    let rls = start_with(CONFIG, store).await;
    assert_eq!(codes(&rls.one(&[("user", "alice")]).await), [(OK, 2)]);
}

#[tokio::test]
async fn a_limit_override_replaces_the_configured_limit() {
    use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::RateLimitOverride;
    use envoy_types::pb::envoy::r#type::v3::RateLimitUnit;

    let (rls, _clock) = start(CONFIG).await;
    let over = |entries: &[(&str, &str)], requests_per_unit: u32, unit: RateLimitUnit| {
        let mut d = descriptor(entries);
        d.limit = Some(RateLimitOverride {
            requests_per_unit,
            unit: unit as i32,
        });
        d
    };
    let r = rls
        .ask(request(
            "api",
            vec![over(&[("user", "alice")], 2, RateLimitUnit::Hour)],
        ))
        .await;
    let limit = r.statuses[0].current_limit.as_ref().unwrap();
    assert_eq!(
        (limit.requests_per_unit, limit.unit),
        (2, Unit::Hour as i32)
    );
    assert_eq!(codes(&r), [(OK, 1)]);
    let r = rls
        .ask(request(
            "api",
            vec![over(&[("user", "alice")], 2, RateLimitUnit::Hour)],
        ))
        .await;
    assert_eq!(codes(&r), [(OK, 0)]);
    let r = rls
        .ask(request(
            "api",
            vec![over(&[("user", "alice")], 2, RateLimitUnit::Hour)],
        ))
        .await;
    assert_eq!(codes(&r), [(OVER, 0)]);
    // The configured limit's own state is apart.
    assert_eq!(codes(&rls.one(&[("user", "alice")]).await), [(OK, 2)]);
    // Any descriptor, even one the file has no limit for.
    let r = rls
        .ask(request(
            "api",
            vec![over(&[("colour", "blue")], 5, RateLimitUnit::Second)],
        ))
        .await;
    assert_eq!(codes(&r), [(OK, 4)]);
    // 0 refuses; an unknown domain ignores the override, as the reference.
    let r = rls
        .ask(request(
            "api",
            vec![over(&[("colour", "red")], 0, RateLimitUnit::Second)],
        ))
        .await;
    assert_eq!(codes(&r), [(OVER, 0)]);
    let r = rls
        .ask(request(
            "elsewhere",
            vec![over(&[("colour", "red")], 1, RateLimitUnit::Second)],
        ))
        .await;
    assert_eq!(codes(&r), [(OK, 0)]);
    assert!(r.statuses[0].current_limit.is_none());
    // A unit or a rate the service cannot apply: INVALID_ARGUMENT, nothing charged.
    for (rpu, unit) in [
        (1, RateLimitUnit::Unknown),
        (u32::MAX, RateLimitUnit::Second),
    ] {
        let before = rls.service.store().len();
        let status = rls
            .call(request(
                "api",
                vec![
                    descriptor(&[("user", "bob")]),
                    over(&[("user", "bob")], rpu, unit),
                ],
            ))
            .await
            .expect_err("refused");
        assert_eq!(status.code(), tonic::Code::InvalidArgument, "{status:?}");
        assert!(
            status.message().contains("descriptor 1"),
            "{}",
            status.message()
        );
        assert_eq!(rls.service.store().len(), before);
    }
}
