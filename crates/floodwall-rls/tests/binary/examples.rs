//! The shipped configuration (examples/rls/, at the repository's root) served as the
//! README runs it, deciding as its comments say.

use super::*;

fn examples() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples/rls")
}

#[tokio::test]
async fn the_shipped_configuration_serves() {
    let rls = Rls::start(&examples(), &[]);
    assert!(rls.log().contains("domains=api,messaging"), "{}", rls.log());
    let mut client = rls.client().await;

    // Nested: any plan but gold, 10 a minute per API key.
    let plan = [("api_key", "k1"), ("plan", "silver")];
    let mut ok = 0;
    for _ in 0..12 {
        ok += usize::from(ask(&mut client, "api", &plan).await.overall_code == OK);
    }
    assert_eq!(ok, 10);

    // Unlimited: never refused, the store untouched.
    let health = ask(&mut client, "api", &[("path", "/healthz")]).await;
    assert_eq!(health.statuses[0].limit_remaining, u32::MAX);

    // Shadow: 20 a minute, but always OK; remaining 0 once it would have refused.
    let mut last = None;
    for _ in 0..22 {
        let r = ask(&mut client, "api", &[("path", "/search")]).await;
        assert_eq!(r.overall_code, OK);
        last = Some(r.statuses[0].limit_remaining);
    }
    assert_eq!(last, Some(0));

    // envoyproxy/ratelimit's README: 5 marketing messages a day to one number.
    let marketing = [("message_type", "marketing"), ("to_number", "2061234567")];
    let mut ok = 0;
    for _ in 0..6 {
        ok += usize::from(ask(&mut client, "messaging", &marketing).await.overall_code == OK);
    }
    assert_eq!(ok, 5);
}
