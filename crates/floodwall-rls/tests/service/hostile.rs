//! Hostile requests: a clear status, nothing charged, no panic.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;

use super::{CONFIG, OK, OVER, codes, costing, descriptor, request, start};

#[tokio::test]
async fn no_domain_or_no_descriptors_is_an_invalid_argument() {
    let (rls, _clock) = start(CONFIG).await;
    let status = rls
        .call(request("", vec![descriptor(&[("user", "alice")])]))
        .await
        .expect_err("no domain");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(
        status.message().contains("no domain"),
        "{}",
        status.message()
    );
    let status = rls
        .call(request("api", vec![]))
        .await
        .expect_err("no descriptors");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    let mut negative = descriptor(&[("user", "alice")]);
    negative.is_negative_hits = true;
    let status = rls
        .call(request("api", vec![negative]))
        .await
        .expect_err("negative");
    assert_eq!(status.code(), tonic::Code::InvalidArgument);
    assert!(rls.service.store().is_empty());
}

#[tokio::test]
async fn empty_and_huge_values_are_keys_like_any_other() {
    let (rls, _clock) = start(CONFIG).await;
    assert_eq!(codes(&rls.one(&[("user", "")]).await), [(OK, 2)]);
    assert_eq!(codes(&rls.one(&[("", "")]).await), [(OK, 0)]);
    let huge = "x".repeat(100_000);
    assert_eq!(codes(&rls.one(&[("user", &huge)]).await), [(OK, 2)]);
    assert_eq!(codes(&rls.one(&[("user", &huge)]).await), [(OK, 1)]);
    // One byte more is another key.
    let other = format!("{huge}x");
    assert_eq!(codes(&rls.one(&[("user", &other)]).await), [(OK, 2)]);
}

#[tokio::test]
async fn a_thousand_entries_or_descriptors_are_answered() {
    let (rls, _clock) = start(CONFIG).await;
    let long = RateLimitDescriptor {
        entries: (0..1000)
            .map(|i| Entry {
                key: format!("k{i}"),
                value: format!("v{i}"),
            })
            .collect(),
        ..RateLimitDescriptor::default()
    };
    let r = rls.ask(request("api", vec![long])).await;
    assert_eq!((r.overall_code, codes(&r)), (OK, vec![(OK, 0)]));
    let many: Vec<_> = (0..1000)
        .map(|i| descriptor(&[("user", &format!("u{i}"))]))
        .collect();
    let r = rls.ask(request("api", many)).await;
    assert_eq!(r.statuses.len(), 1000);
    assert!(
        r.statuses
            .iter()
            .all(|s| (s.code, s.limit_remaining) == (OK, 2))
    );
}

#[tokio::test]
async fn the_largest_hits_addend_is_refused_and_charges_nothing() {
    let (rls, _clock) = start(CONFIG).await;
    let mut r = request(
        "api",
        vec![
            descriptor(&[("user", "alice")]),
            descriptor(&[("path", "/orders")]),
        ],
    );
    r.hits_addend = u32::MAX;
    let r = rls.ask(r).await;
    assert_eq!(
        (r.overall_code, codes(&r)),
        (OVER, vec![(OVER, 0), (OVER, 1000)])
    );
    let r = rls
        .ask(request(
            "api",
            vec![costing(descriptor(&[("user", "alice")]), u64::MAX)],
        ))
        .await;
    assert_eq!((r.overall_code, codes(&r)), (OVER, vec![(OVER, 0)]));
    assert_eq!(codes(&rls.one(&[("user", "alice")]).await), [(OK, 2)]);
    assert_eq!(codes(&rls.one(&[("path", "/orders")]).await), [(OK, 999)]);
}
