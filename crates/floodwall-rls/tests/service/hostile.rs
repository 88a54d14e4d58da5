//! Hostile requests: a clear status, nothing charged, no panic.

use envoy_types::pb::envoy::extensions::common::ratelimit::v3::RateLimitDescriptor;
use envoy_types::pb::envoy::extensions::common::ratelimit::v3::rate_limit_descriptor::Entry;

use envoy_types::pb::envoy::service::ratelimit::v3::RateLimitResponse;
use tonic::codegen::http::uri::PathAndQuery;

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

/// `RateLimitRequest` with its entries as bytes, which need not be UTF-8.
#[derive(Clone, PartialEq, prost::Message)]
struct RawRequest {
    #[prost(string, tag = "1")]
    domain: String,
    #[prost(message, repeated, tag = "2")]
    descriptors: Vec<RawDescriptor>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawDescriptor {
    #[prost(message, repeated, tag = "1")]
    entries: Vec<RawEntry>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct RawEntry {
    #[prost(bytes = "vec", tag = "1")]
    key: Vec<u8>,
    #[prost(bytes = "vec", tag = "2")]
    value: Vec<u8>,
}

#[tokio::test]
async fn entries_that_are_not_utf8_are_refused_before_the_service() {
    let (rls, _clock) = start(CONFIG).await;
    let channel = tonic::transport::Channel::from_shared(format!("http://{}", rls.addr))
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut grpc = tonic::client::Grpc::new(channel);
    grpc.ready().await.unwrap();
    let raw = RawRequest {
        domain: "api".to_owned(),
        descriptors: vec![RawDescriptor {
            entries: vec![RawEntry {
                key: b"user".to_vec(),
                value: vec![0xff, 0xfe, b'a'],
            }],
        }],
    };
    let path =
        PathAndQuery::from_static("/envoy.service.ratelimit.v3.RateLimitService/ShouldRateLimit");
    let codec = tonic_prost::ProstCodec::<RawRequest, RateLimitResponse>::default();
    let status = grpc
        .unary(tonic::Request::new(raw), path, codec)
        .await
        .expect_err("not UTF-8");
    // tonic refuses the message as it decodes it: a status naming the cause.
    assert_eq!(status.code(), tonic::Code::Internal, "{status:?}");
    assert!(status.message().contains("UTF-8"), "{}", status.message());
    assert!(rls.service.store().is_empty());
    // The server still answers.
    assert_eq!(codes(&rls.one(&[("user", "alice")]).await), [(OK, 2)]);
}
