//! Unit tests of `Policy`.

use super::*;

/// The error, for a `matches!` on one line.
fn err(r: Result<Policy, ConfigError>) -> ConfigError {
    r.expect_err("refused")
}

#[test]
fn each_constructor_is_new_with_its_algorithm() {
    type Constructor = fn(&'static str, Quota) -> Result<Policy, ConfigError>;
    let constructors: [(Constructor, Algorithm); 6] = [
        (|n, q| Policy::gcra(n, q), Algorithm::Gcra),
        (|n, q| Policy::token_bucket(n, q), Algorithm::TOKEN_BUCKET),
        (|n, q| Policy::leaky_bucket(n, q), Algorithm::LeakyBucket),
        (|n, q| Policy::fixed_window(n, q), Algorithm::FixedWindow),
        (
            |n, q| Policy::sliding_window(n, q),
            Algorithm::SLIDING_WINDOW,
        ),
        (|n, q| Policy::sliding_log(n, q), Algorithm::SlidingLog),
    ];
    let algorithms = constructors.map(|(_, alg)| alg);
    assert_eq!(
        algorithms,
        Algorithm::all(),
        "one constructor per algorithm"
    );
    let q: Quota = "100/min".parse().unwrap();
    for (construct, alg) in constructors {
        let made = construct("p", q).unwrap();
        assert_eq!(made, Policy::new("p", alg, q).unwrap(), "{alg}");
        assert_eq!(made.algorithm(), alg);
    }
}

#[test]
fn states_are_keyed_by_their_shape_and_caches_by_the_whole_policy() {
    let p = |a, q: &str| Policy::new("p", a, q.parse().unwrap()).unwrap();
    let same_state = |a: &Policy, b: &Policy| {
        assert_ne!(a.namespace(), b.namespace(), "{a:?} {b:?}: caches apart");
        a.state_namespace() == b.state_namespace()
    };
    let gcra = p(Algorithm::Gcra, "10/s");
    assert!(same_state(&gcra, &p(Algorithm::Gcra, "20/min burst 7")));
    let cell = Policy::redis_cell("p", 9, 10, Duration::from_secs(1)).unwrap();
    assert!(same_state(&gcra, &cell), "rounding shapes nothing");
    let ban = |secs| Penalty::new(3, Duration::from_secs(60), Duration::from_secs(secs));
    let banning = gcra.with_penalty(ban(60).unwrap());
    assert!(same_state(&gcra, &banning), "a penalty shapes nothing");
    assert!(same_state(&banning, &gcra.with_penalty(ban(120).unwrap())));
    let rebanned = gcra.with_penalty(ban(120).unwrap());
    assert_eq!(banning, rebanned.with_penalty(ban(60).unwrap()));
    assert!(!same_state(&gcra, &p(Algorithm::LeakyBucket, "10/s")));
    let tb = Algorithm::TOKEN_BUCKET;
    assert!(same_state(&p(tb, "10/s"), &p(tb, "10/s burst 30")));
    assert!(!same_state(&p(tb, "10/s"), &p(tb, "20/s")), "the tick");
    for a in [
        Algorithm::FixedWindow,
        Algorithm::SLIDING_WINDOW,
        Algorithm::SlidingLog,
    ] {
        assert!(same_state(&p(a, "10/s"), &p(a, "99/s")), "{a}");
        assert!(!same_state(&p(a, "10/s"), &p(a, "10/min")), "{a}");
    }
    let other = Policy::gcra("q", "10/s".parse().unwrap()).unwrap();
    assert!(!same_state(&gcra, &other), "the name");
}

#[test]
fn names_are_checked() {
    let q = Quota::per_second(1).unwrap();
    for bad in ["", "has space", "brace{", "new\nline", &"x".repeat(65)] {
        let e = err(Policy::gcra(bad, q));
        assert!(matches!(e, ConfigError::InvalidName { .. }), "{bad:?}");
    }
    assert!(Policy::gcra("per-ip:v1.2_x", q).is_ok());
}

#[test]
fn windows_refuse_a_burst_and_logs_refuse_huge_counts() {
    let q: Quota = "10/s burst 20".parse().unwrap();
    for alg in [
        Algorithm::FixedWindow,
        Algorithm::SLIDING_WINDOW,
        Algorithm::SlidingLog,
    ] {
        let e = err(Policy::new("p", alg, q));
        assert!(matches!(e, ConfigError::BurstUnsupported { .. }));
    }
    let big: Quota = "10001/min".parse().unwrap();
    let e = err(Policy::new("p", Algorithm::SlidingLog, big));
    assert!(matches!(e, ConfigError::LogTooLarge { count: 10_001, .. }));
    assert!(Policy::new("p", Algorithm::SLIDING_WINDOW, big).is_ok());
}

#[test]
fn sliding_window_precision_must_divide_the_period() {
    let q: Quota = "10/s".parse().unwrap();
    let sw = |p: u64| Algorithm::SlidingWindow {
        precision: Some(Duration::from_millis(p)),
    };
    assert!(Policy::new("p", sw(300), q).is_err());
    assert!(Policy::new("p", sw(250), q).is_ok());
    assert!(Policy::new("p", sw(1000), q).is_ok());
    let tiny = Algorithm::SlidingWindow {
        precision: Some(Duration::from_micros(999)),
    };
    let e = err(Policy::new("p", tiny, q));
    assert!(matches!(e, ConfigError::BadPrecision { .. }));
    let odd: Quota = "10/7us".parse().unwrap();
    assert!(Policy::new("p", Algorithm::SLIDING_WINDOW, odd).is_err());
}

#[test]
fn token_bucket_tick_must_add_whole_tokens() {
    let q: Quota = "100/s".parse().unwrap();
    let tb = |ms: u64| Algorithm::TokenBucket {
        tick: Some(Duration::from_millis(ms)),
    };
    assert!(Policy::new("p", tb(10), q).is_ok());
    assert!(Policy::new("p", tb(100), q).is_ok());
    assert!(matches!(
        err(Policy::new("p", tb(15), q)),
        ConfigError::BadTick { .. }
    ));
    let slow: Quota = "1/s".parse().unwrap();
    assert!(Policy::new("p", tb(500), slow).is_err());
    // Bandwidth: 10 MB/s added as 10,000 bytes every millisecond.
    let bytes: Quota = "10000000/s".parse().unwrap();
    assert!(Policy::new("p", tb(1), bytes).is_ok());
}

/// Bursts whose span overflows in the other constructors: floodwall-tests' `hostile.rs`
/// (`quotas_at_the_edges_are_errors_at_construction`).
#[test]
fn a_cell_burst_that_overflows_is_refused() {
    assert!(Policy::redis_cell("p", u64::MAX, 1, Duration::from_secs(1)).is_err());
}

#[test]
fn cost_above_the_limit_is_an_error_not_a_denial() {
    let p = Policy::gcra("p", "10/s burst 5".parse().unwrap()).unwrap();
    let mut s = State::new();
    let err = p.decide(&mut s, 0, 6).unwrap_err();
    assert!(err.is_cost_too_high());
    assert!(!err.is_store_failure());
    assert!(s.is_empty());
    assert!(p.decide(&mut s, 0, 5).unwrap().is_allowed());
}

#[test]
fn cell_rounding_counts_a_millisecond_but_not_less() {
    assert_eq!(cell_seconds(2_000_000), 2);
    assert_eq!(cell_seconds(2_000_999), 2);
    assert_eq!(cell_seconds(2_001_000), 3);
    let p = Policy::redis_cell("c", 0, 1_000_000, Duration::from_secs(1)).unwrap();
    let mut s = State::new();
    p.decide(&mut s, 0, 1).unwrap();
    let d = p.decide(&mut s, 0, 1).unwrap();
    assert!(!d.is_allowed());
    assert_eq!(d.retry_after, Some(Duration::from_secs(1)));
}

#[test]
fn a_share_divides_count_and_burst_and_keeps_the_rest() {
    let p = Policy::gcra("fleet", "100/s burst 300".parse().unwrap()).unwrap();
    let s = p.share(3).unwrap();
    assert_eq!((s.quota().count(), s.quota().burst()), (33, 100));
    assert_eq!(s.quota().period(), p.quota().period());
    assert_eq!((s.name(), s.algorithm()), (p.name(), p.algorithm()));
    assert_ne!(s, p, "a share is a different state space");
    assert_eq!(p.share(1).unwrap(), p);
    assert_eq!(p.share(0).unwrap(), p);
    // Never below one.
    let tiny = p.share(u32::MAX).unwrap();
    assert_eq!((tiny.quota().count(), tiny.quota().burst()), (1, 1));
    let cell = Policy::redis_cell("c", 9, 10, Duration::from_secs(1)).unwrap();
    assert_eq!(cell.share(2).unwrap().rounding(), Rounding::WholeSeconds);
    for alg in Algorithm::all() {
        let p = Policy::new("w", alg, "1000/min".parse().unwrap()).unwrap();
        let s = p.share(7).unwrap();
        assert_eq!((s.algorithm(), s.limit()), (alg, 142), "{alg}");
    }
}

#[test]
fn a_share_of_a_ticking_bucket_drops_a_tick_that_no_longer_fits() {
    let tb = Algorithm::TokenBucket {
        tick: Some(Duration::from_millis(10)),
    };
    let p = Policy::new("tb", tb, "100/s".parse().unwrap()).unwrap();
    let s = p.share(3).unwrap();
    assert_eq!(s.algorithm(), Algorithm::TOKEN_BUCKET);
    assert_eq!(s.quota().count(), 33);
    let p = Policy::new("tb", tb, "400/s".parse().unwrap()).unwrap();
    let kept = p.share(2).unwrap().algorithm();
    assert_eq!(kept, tb, "kept where it still fits");
}

#[test]
fn a_state_from_another_algorithm_is_refused() {
    let g = Policy::gcra("p", "1/s".parse().unwrap()).unwrap();
    let w = Policy::new("p", Algorithm::FixedWindow, "1/s".parse().unwrap()).unwrap();
    let mut s = State::new();
    g.decide(&mut s, 10, 1).unwrap();
    assert!(matches!(w.decide(&mut s, 10, 1), Err(Error::StateMismatch)));
}
