//! The requests `simulate` replays: synthetic shapes (steady, bursts, a ramp, Poisson) or a
//! file of timestamps, as instants in µs from the simulation's start.

use std::time::Duration;

use floodwall_core::{Quota, parse_duration};

use crate::cli::TimestampFormat;
use crate::error::Failure;
use crate::timestamps;

/// The most requests one simulation replays: enough for hours of heavy traffic, and a
/// bound on the memory a typo (`steady:1000000/ms`) can ask for.
pub(crate) const MAX_REQUESTS: usize = 5_000_000;

/// Requests to replay: their instants in µs from the start, sorted.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Traffic {
    /// When each request arrives, µs from the start, in order.
    pub(crate) times: Vec<u64>,
    /// How long the traffic lasts, µs (the last request's instant at least).
    pub(crate) span: u64,
}

/// The traffic `spec` names: a shape over `duration`, or a file whose timestamps are
/// read per `format` and whose origin is put on a multiple of `period_us` (so a window's
/// edges fall where a live store's would).
pub(crate) fn read(
    spec: &str,
    duration: Duration,
    seed: u64,
    format: TimestampFormat,
    period_us: u64,
) -> Result<Traffic, Failure> {
    let span = micros(duration);
    let arg = || format!("--traffic {spec:?}");
    let shape = |rest: &str| rest.parse::<Quota>().map_err(|e| e.to_string());
    let times = match spec.split_once(':') {
        Some(("steady", rest)) => shape(rest).and_then(|rate| steady(rate, span)),
        Some(("bursts", rest)) => bursts(rest, span),
        Some(("ramp", rest)) => ramp(rest, span),
        Some(("poisson", rest)) => shape(rest).and_then(|rate| poisson(rate, span, seed)),
        Some(("file", path)) => return timestamps::read_file(path, format, period_us),
        _ => return timestamps::read_file(spec, format, period_us),
    }
    .map_err(|e| Failure::input(arg(), e))?;
    Ok(Traffic { times, span })
}

/// `duration` in whole µs, saturating.
pub(crate) fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

/// Refuses more than [`MAX_REQUESTS`].
fn bounded(count: u128) -> Result<usize, String> {
    usize::try_from(count)
        .ok()
        .filter(|&n| n <= MAX_REQUESTS)
        .ok_or_else(|| format!("more than {MAX_REQUESTS} requests: shorten --duration"))
}

/// `count` requests per `period`, evenly spaced from 0: request `k` at `k × period / count`.
fn steady(rate: Quota, span: u64) -> Result<Vec<u64>, String> {
    let (count, period) = (u128::from(rate.count()), u128::from(rate.period_micros()));
    // Requests at instants < span: k × period / count < span.
    let n = (u128::from(span) * count).div_ceil(period);
    let n = bounded(n)?;
    Ok((0..n as u128)
        .map(|k| (k * period / count) as u64)
        .collect())
}

/// `N/EVERY[+OFFSET]`: `N` requests at one instant, every `EVERY`, from `OFFSET`.
fn bursts(rest: &str, span: u64) -> Result<Vec<u64>, String> {
    let expected = "expected bursts:N/EVERY[+OFFSET], e.g. bursts:30/5s+900ms";
    let (shape, offset) = match rest.split_once('+') {
        Some((shape, offset)) => (
            shape,
            parse_duration(offset.trim()).map_err(|e| e.to_string())?,
        ),
        None => (rest, Duration::ZERO),
    };
    let (n, every) = shape.split_once('/').ok_or(expected)?;
    let n: u64 = n.trim().parse().map_err(|_| expected)?;
    let every = micros(parse_duration(every.trim()).map_err(|e| e.to_string())?);
    if n == 0 || every == 0 {
        return Err(expected.to_owned());
    }
    let offset = micros(offset);
    let bursts = u128::from(span.saturating_sub(offset)).div_ceil(u128::from(every));
    bounded(bursts * u128::from(n))?;
    let mut times = Vec::new();
    for b in 0..bursts as u64 {
        let at = offset + b * every;
        times.extend(std::iter::repeat_n(at, n as usize));
    }
    Ok(times)
}

/// `FROM-TO/UNIT`: a rate rising (or falling) linearly from `FROM` to `TO` per `UNIT`
/// over the span. Request `k` (from 0) arrives when the expected count reaches `k`, as
/// steady traffic's do.
fn ramp(rest: &str, span: u64) -> Result<Vec<u64>, String> {
    let expected = "expected ramp:FROM-TO/UNIT, e.g. ramp:0-50/s";
    let (rates, unit) = rest.split_once('/').ok_or(expected)?;
    let (from, to) = rates.split_once('-').ok_or(expected)?;
    let from: f64 = from.trim().parse().map_err(|_| expected)?;
    let to: f64 = to.trim().parse().map_err(|_| expected)?;
    if !(from >= 0.0 && to >= 0.0 && (from > 0.0 || to > 0.0)) {
        return Err(expected.to_owned());
    }
    let unit = micros(parse_duration(unit.trim()).map_err(|e| e.to_string())?) as f64;
    let (a, d) = (from / unit, span as f64);
    // Rate per µs at t: a + slope·t; expected count N(t) = a·t + slope·t²/2.
    let slope = (to - from) / unit / d;
    let total = a * d + slope * d * d / 2.0;
    bounded(total as u128)?;
    let mut times = Vec::new();
    for k in 0..(total.ceil() as u64) {
        let k = k as f64;
        let t = if slope.abs() < f64::EPSILON * a.max(1.0) {
            k / a
        } else {
            // slope/2·t² + a·t - k = 0, the root that is ≥ 0.
            (-a + (a * a + 2.0 * slope * k).sqrt()) / slope
        };
        let t = t.round() as u64;
        if t < span {
            times.push(t);
        }
    }
    Ok(times)
}

/// Poisson arrivals at `rate` on average: exponential gaps drawn from a PRNG seeded with
/// `seed`, so the same seed replays the same requests.
fn poisson(rate: Quota, span: u64, seed: u64) -> Result<Vec<u64>, String> {
    let mean_gap = rate.period_micros() as f64 / rate.count() as f64;
    let expected = span as f64 / mean_gap;
    bounded(expected as u128 * 2)?;
    let mut rng = fastrand::Rng::with_seed(seed);
    let mut times = Vec::new();
    let mut t = 0.0_f64;
    loop {
        // 1 - U is in (0, 1]: its logarithm is finite.
        t += -(1.0 - rng.f64()).ln() * mean_gap;
        if t >= span as f64 {
            return Ok(times);
        }
        times.push(t as u64);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn synthetic(spec: &str, secs: u64) -> Vec<u64> {
        let d = Duration::from_secs(secs);
        read(spec, d, 7, TimestampFormat::Seconds, 1_000_000)
            .unwrap()
            .times
    }

    #[test]
    fn steady_traffic_is_evenly_spaced() {
        let t = synthetic("steady:4/s", 2);
        assert_eq!(
            t,
            [
                0, 250_000, 500_000, 750_000, 1_000_000, 1_250_000, 1_500_000, 1_750_000
            ]
        );
    }

    #[test]
    fn bursts_come_at_once_from_their_offset() {
        let t = synthetic("bursts:3/1s+500ms", 3);
        assert_eq!(
            t,
            [500_000; 3]
                .iter()
                .chain(&[1_500_000; 3])
                .chain(&[2_500_000; 3])
                .copied()
                .collect::<Vec<_>>()
        );
    }

    #[test]
    fn a_ramp_gets_denser() {
        let t = synthetic("ramp:0-20/s", 10);
        // Expected count: 20/s × 10 s / 2 = 100.
        assert_eq!(t.len(), 100);
        let first_half = t.iter().filter(|&&x| x < 5_000_000).count();
        assert_eq!(first_half, 25, "a quarter of the area is in the first half");
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
    }

    #[test]
    fn poisson_is_seeded() {
        let a = synthetic("poisson:50/s", 20);
        assert_eq!(a, synthetic("poisson:50/s", 20));
        // 1000 expected; a Poisson count is within ±5σ (±158) all but never.
        assert!((842..=1158).contains(&a.len()), "{}", a.len());
    }

    #[test]
    fn bad_shapes_name_the_argument() {
        for spec in ["steady:ten/s", "bursts:3", "ramp:5/s", "poisson:0/s"] {
            let e = read(spec, Duration::from_secs(1), 1, TimestampFormat::Seconds, 1).unwrap_err();
            assert!(e.to_string().starts_with("--traffic"), "{e}");
            assert_eq!(e.code, 2);
        }
    }
}
