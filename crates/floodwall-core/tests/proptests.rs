//! Property tests: every algorithm against a simple reference model, and the invariants
//! every algorithm shares (denials, peeks and costs above the limit change nothing,
//! retry_after is exact, a clock going backwards never grants more, and a state means
//! nothing once the latest of its decisions' resets has passed).

use std::time::Duration;

use floodwall_core::{Algorithm, Decision, Error, Parameters, Policy, Quota, State};
use proptest::prelude::*;

const T0: u64 = 1_700_000_000_000_000;

/// A request: wait `dt` µs, then ask for `cost`.
type Op = (u64, u64);

fn ops(max_dt: u64, max_cost: u64) -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec((0..max_dt, 0..=max_cost), 1..120)
}

/// `(now, cost, answer)` for each request.
type Trace = Vec<(u64, u64, Result<Decision, Error>)>;

/// Runs `ops` from a fresh state. A cost above the limit is passed as it is: its answer
/// must be an error that leaves the state as it was (see [`decided`]).
fn run(policy: &Policy, ops: &[Op]) -> Trace {
    let mut state = State::new();
    let mut now = T0;
    ops.iter()
        .map(|&(dt, cost)| {
            now += dt;
            let before = state.clone();
            let d = policy.decide(&mut state, now, cost);
            if d.is_err() {
                assert_eq!(state, before, "a refused cost changed the state");
            }
            (now, cost, d)
        })
        .collect()
}

/// The decision on a cost within `limit`, or `None` for a cost above it, which must have
/// been refused as one that can never pass rather than decided.
fn decided(
    limit: u64,
    cost: u64,
    d: Result<Decision, Error>,
) -> Result<Option<Decision>, TestCaseError> {
    match d {
        Ok(d) if cost <= limit => Ok(Some(d)),
        Err(e) if cost > limit && e.is_cost_too_high() => Ok(None),
        other => Err(TestCaseError::fail(format!(
            "cost {cost} under limit {limit}: {other:?}"
        ))),
    }
}

fn admitted(trace: &Trace) -> Vec<(u64, u64)> {
    trace
        .iter()
        .filter(|(_, c, d)| *c > 0 && d.as_ref().is_ok_and(|d| d.is_allowed()))
        .map(|&(t, c, _)| (t, c))
        .collect()
}

fn policy(alg: Algorithm, count: u64, period_ms: u64, burst: u64) -> Policy {
    let q = Quota::new(count, Duration::from_millis(period_ms)).unwrap();
    let q = if alg.has_burst() {
        q.with_burst(burst).unwrap()
    } else {
        q
    };
    Policy::new("prop", alg, q).unwrap()
}

fn any_policy() -> impl Strategy<Value = Policy> {
    let alg = prop_oneof![
        Just(Algorithm::Gcra),
        Just(Algorithm::TOKEN_BUCKET),
        (1u64..=4).prop_map(|k| Algorithm::TokenBucket {
            tick: Some(Duration::from_millis(100 * k))
        }),
        Just(Algorithm::LeakyBucket),
        Just(Algorithm::FixedWindow),
        prop::sample::select(vec![100u64, 200, 250, 500, 1000]).prop_map(|p| {
            Algorithm::SlidingWindow {
                precision: Some(Duration::from_millis(p)),
            }
        }),
        Just(Algorithm::SlidingLog),
    ];
    (alg, 1u64..20, 1u64..30).prop_map(|(alg, count, burst)| {
        // Period 1 s: every tick and precision above divides it, and 10 × k / 1 s tokens
        // per tick is whole when count is a multiple of 10 — so scale the count for ticks.
        let count = match alg {
            Algorithm::TokenBucket { tick: Some(_) } => count * 10,
            _ => count,
        };
        policy(alg, count, 1000, burst)
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// "In any window of one period, a sliding log admits at most count", and admits
    /// whenever the model says the request fits.
    #[test]
    fn sliding_log_equals_its_model(ops in ops(400_000, 4), count in 1u64..12) {
        let p = policy(Algorithm::SlidingLog, count, 1000, count);
        let period = 1_000_000;
        let mut log: Vec<(u64, u64)> = Vec::new();
        for (now, cost, d) in run(&p, &ops) {
            let Some(d) = decided(count, cost, d)? else { continue };
            let used: u64 = log.iter().filter(|(t, _)| t + period > now).map(|(_, c)| c).sum();
            let fits = used + cost <= count;
            prop_assert_eq!(d.is_allowed(), fits, "at {} cost {}", now, cost);
            prop_assert_eq!(d.remaining, count - used - if fits { cost } else { 0 });
            if fits && cost > 0 { log.push((now, cost)); }
        }
    }

    #[test]
    fn fixed_window_equals_its_model(ops in ops(400_000, 4), count in 1u64..12) {
        let p = policy(Algorithm::FixedWindow, count, 1000, count);
        let mut used = std::collections::HashMap::<u64, u64>::new();
        for (now, cost, d) in run(&p, &ops) {
            let Some(d) = decided(count, cost, d)? else { continue };
            let w = used.entry(now / 1_000_000).or_default();
            let fits = *w + cost <= count;
            prop_assert_eq!(d.is_allowed(), fits);
            if fits { *w += cost; }
        }
    }

    /// Sub-buckets: a request fits if everything admitted in the last `buckets` buckets
    /// (the current one included), plus its cost, fits.
    #[test]
    fn sliding_window_equals_its_model(
        ops in ops(300_000, 4),
        count in 1u64..12,
        precision in prop::sample::select(vec![100u64, 250, 500, 1000]),
    ) {
        let alg = Algorithm::SlidingWindow { precision: Some(Duration::from_millis(precision)) };
        let p = policy(alg, count, 1000, count);
        let (width, n) = (precision * 1000, 1000 / precision);
        let mut log: Vec<(u64, u64)> = Vec::new();
        for (now, cost, d) in run(&p, &ops) {
            let Some(d) = decided(count, cost, d)? else { continue };
            let b = now / width;
            let used: u64 = log.iter().filter(|(t, _)| t / width + n > b).map(|(_, c)| c).sum();
            let fits = used + cost <= count;
            prop_assert_eq!(d.is_allowed(), fits);
            if fits && cost > 0 { log.push((now, cost)); }
        }
    }

    /// A tick-by-tick simulation of the juju bucket.
    #[test]
    fn token_bucket_equals_a_tick_by_tick_simulation(
        ops in ops(300_000, 6), k in 1u64..=4, count10 in 1u64..5, burst in 1u64..12,
    ) {
        let tick = 100_000 * k;
        let count = count10 * 10;
        let alg = Algorithm::TokenBucket { tick: Some(Duration::from_micros(tick)) };
        let p = policy(alg, count, 1000, burst);
        let quantum = count * tick / 1_000_000;
        let (mut tokens, mut at_tick) = (burst, None::<u64>);
        for (now, cost, d) in run(&p, &ops) {
            let Some(d) = decided(burst, cost, d)? else { continue };
            let tick_now = now / tick;
            if let Some(mut t) = at_tick {
                while t < tick_now { tokens = (tokens + quantum).min(burst); t += 1; }
            }
            let fits = cost <= tokens;
            prop_assert_eq!(d.is_allowed(), fits);
            prop_assert_eq!(d.remaining, if fits { tokens - cost } else { tokens });
            if fits && cost > 0 { tokens -= cost; at_tick = Some(tick_now); }
            else if at_tick.is_some() { at_tick = Some(tick_now); }
        }
    }

    /// The funnel, simulated as the classic funnel draws it (a level that leaks whole
    /// units, its clock advancing by the time they took), decides as the leaky bucket does,
    /// and GCRA admits no more than `burst + elapsed / interval`.
    #[test]
    fn the_funnel_equals_its_model_and_gcra_respects_the_rate(
        ops in ops(200_000, 5), count in 1u64..20, burst in 1u64..10,
    ) {
        let interval = 1_000_000u64.div_ceil(count);
        let (mut level, mut since) = (0u64, 0u64);
        for (now, cost, d) in run(&policy(Algorithm::LeakyBucket, count, 1000, burst), &ops) {
            let Some(d) = decided(burst, cost, d)? else { continue };
            let leaked = (now - since) / interval;
            if leaked >= level { (level, since) = (0, now); }
            else { (level, since) = (level - leaked, since + leaked * interval); }
            let fits = level + cost <= burst;
            prop_assert_eq!(d.is_allowed(), fits);
            if fits { level += cost; }
            prop_assert_eq!(d.remaining, burst - level);
            let empty_in = if level == 0 { 0 } else { since + level * interval - now };
            prop_assert_eq!(d.reset_after, Duration::from_micros(empty_in));
            if !fits {
                let wait = since + (level + cost - burst) * interval - now;
                prop_assert_eq!(d.retry_after, Some(Duration::from_micros(wait)));
            }
        }
        let g = run(&policy(Algorithm::Gcra, count, 1000, burst), &ops);
        let adm = admitted(&g);
        for i in 0..adm.len() {
            let mut sum = 0;
            for j in i..adm.len() {
                sum += adm[j].1;
                let elapsed = adm[j].0 - adm[i].0;
                // count per second, so elapsed µs allow elapsed × count / 1e6 more.
                prop_assert!(sum <= burst + elapsed * count / 1_000_000,
                    "{} admitted in {} µs", sum, elapsed);
            }
        }
    }

    /// For every algorithm: a denial's retry_after is exactly when the same request would
    /// pass (a microsecond earlier it would not), and it is never zero.
    #[test]
    fn retry_after_is_exact(p in any_policy(), ops in ops(300_000, 6)) {
        let mut state = State::new();
        let mut now = T0;
        for (dt, cost) in ops {
            now += dt;
            let cost = cost.min(p.limit());
            let before = state.clone();
            let d = p.decide(&mut state, now, cost).unwrap();
            if let Some(retry) = d.retry_after {
                let r = retry.as_micros() as u64;
                prop_assert!(r > 0);
                prop_assert!(!p.decide(&mut before.clone(), now + r - 1, cost).unwrap().is_allowed(),
                    "{:?}: passes before retry_after", p);
                prop_assert!(p.decide(&mut before.clone(), now + r, cost).unwrap().is_allowed(),
                    "{:?}: still denied at retry_after {}", p, r);
            }
        }
    }

    /// For every algorithm: a denial and a peek leave the future exactly as it was.
    #[test]
    fn denials_and_peeks_consume_nothing(p in any_policy(), ops in ops(300_000, 6), probe in 0u64..300_000) {
        let mut state = State::new();
        let mut now = T0;
        for (dt, cost) in ops {
            now += dt;
            let cost = cost.min(p.limit());
            let mut with = state.clone();
            let d = p.decide(&mut with, now, cost).unwrap();
            if !d.is_allowed() || cost == 0 {
                // Whatever comes next decides the same with or without that request.
                let later = now + probe;
                let a = p.decide(&mut with.clone(), later, p.limit()).unwrap();
                let b = p.decide(&mut state.clone(), later, p.limit()).unwrap();
                prop_assert_eq!(a, b);
                let a = p.decide(&mut with.clone(), later, 1).unwrap();
                let b = p.decide(&mut state.clone(), later, 1).unwrap();
                prop_assert_eq!(a, b);
            }
            state = with;
        }
    }

    /// Reset_after is when the key is back to full: a peek then shows remaining == limit,
    /// and one microsecond earlier it does not (when something was used).
    #[test]
    fn reset_after_is_when_the_limit_is_full_again(p in any_policy(), ops in ops(300_000, 6)) {
        let mut state = State::new();
        let mut now = T0;
        for (dt, cost) in ops {
            now += dt;
            let d = p.decide(&mut state, now, cost.min(p.limit())).unwrap();
            let reset = d.reset_after.as_micros() as u64;
            let full = p.decide(&mut state.clone(), now + reset, 0).unwrap();
            prop_assert_eq!(full.remaining, p.limit(), "{:?}", p);
            if reset > 0 {
                let early = p.decide(&mut state.clone(), now + reset - 1, 0).unwrap();
                prop_assert!(early.remaining < p.limit(), "{:?}", p);
            }
        }
    }

    /// Time may jump backwards (a stepped wall clock, another node's skew): no panic, and
    /// the rate still holds in two frames. In real time (a step back takes none, a step
    /// forward is time passing), every algorithm keeps its bound and the sliding log is
    /// exact. In the state's own time (the latest admission so far) so does every
    /// algorithm but the log, which logs an admission at `now`, not at the latest time:
    /// entries leave by the clock that wrote them, so there steps back again and again
    /// pass any bound (at 2/s: admitted at 5 s, then 2 s, 3.1 s, 4.2 s, 5.3 s).
    #[test]
    fn a_clock_going_backwards_never_grants_more(
        p in any_policy(),
        steps in prop::collection::vec((-2_000_000i64..1_000_000, 0u64..6), 1..150),
    ) {
        let mut state = State::new();
        let (mut now, mut latest, mut real) = (T0 as i64, 0, 0);
        // (latest, real, cost) of each admission.
        let mut adm: Vec<(u64, u64, u64)> = Vec::new();
        for (dt, cost) in steps {
            now += dt;
            real += dt.max(0) as u64;
            let cost = cost.min(p.limit());
            let d = p.decide(&mut state, now as u64, cost).unwrap();
            if d.is_allowed() && cost > 0 {
                // The state's own clock only moves on writes: an admission happens at the
                // later of now and the last admission.
                latest = latest.max(now as u64);
                adm.push((latest, real, cost));
            }
        }
        // The most admitted over any span of up to so many µs. Within a period: the
        // buckets their limit plus what the rate refills, the log its count; a fixed
        // window 2 × count (the window before an edge and the one after it, each full). A
        // sliding window counts the last `n` buckets, which a span of `period - precision`
        // can never outreach: count over that; a period reaches one bucket more: 2 × count.
        let (period, count) = (1_000_000, p.quota().count());
        let bounds = match p.parameters() {
            Parameters::FixedWindow { .. } => vec![(period - 1, 2 * count)],
            Parameters::SlidingWindow { precision, .. } => {
                vec![(period - precision, count), (period - 1, 2 * count)]
            }
            Parameters::SlidingLog { .. } => vec![(period - 1, count)],
            _ => vec![(period - 1, p.limit() + count)],
        };
        let log = matches!(p.algorithm(), Algorithm::SlidingLog);
        for frame in ["real", "latest"] {
            if log && frame == "latest" {
                continue;
            }
            let at = |a: &(u64, u64, u64)| if frame == "real" { a.1 } else { a.0 };
            for &(span, most) in &bounds {
                for i in 0..adm.len() {
                    let sum: u64 = adm[i..].iter()
                        .take_while(|a| at(a) - at(&adm[i]) <= span)
                        .map(|a| a.2)
                        .sum();
                    prop_assert!(sum <= most, "{:?}: {} within {} µs of {} time, at most {}",
                        p, sum, span, frame, most);
                }
            }
        }
    }

    /// A store may forget a key's state once it means nothing: each decision's
    /// `now + reset_after` covers what that decision wrote, so the latest such instant
    /// covers the whole state, however the clock moved between decisions (stepped back,
    /// or two threads that read it in one order and decide in the other); the memory
    /// store keeps that instant as the key's expiry. From then on the state decides as
    /// no state does.
    #[test]
    fn the_latest_reset_covers_the_state_however_the_clock_moved(
        p in any_policy(),
        steps in prop::collection::vec((-1_500_000i64..1_500_000, 0u64..6), 1..100),
        probe in 1u64..2_000_000,
    ) {
        let mut state = State::new();
        let (mut now, mut expiry) = (T0, 0);
        for (dt, cost) in steps {
            now = now.saturating_add_signed(dt);
            let d = p.decide(&mut state, now, cost.min(p.limit())).unwrap();
            expiry = expiry.max(now + d.reset_after.as_micros() as u64);
            for later in [expiry, expiry + probe] {
                for cost in [0, 1, p.limit()] {
                    let kept = p.decide(&mut state.clone(), later, cost).unwrap();
                    let fresh = p.decide(&mut State::new(), later, cost).unwrap();
                    prop_assert_eq!(kept, fresh, "{:?}, cost {} at {}", p, cost, later);
                }
            }
        }
    }

    /// Arbitrary times, including the extremes of u64, never panic or overflow.
    #[test]
    fn extreme_times_never_panic(p in any_policy(), times in prop::collection::vec(any::<u64>(), 1..40)) {
        let mut state = State::new();
        for t in times {
            let _ = p.decide(&mut state, t, 1).unwrap();
            let _ = p.decide(&mut state, t, p.limit()).unwrap();
            let _ = p.decide(&mut state, t, 0).unwrap();
        }
    }
}
