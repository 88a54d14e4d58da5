//! A traffic file: one request a line, each line's timestamp read in the format
//! `--timestamps` names (decimal seconds, millis, micros, RFC 3339, an access log's).

use std::path::Path;

use crate::cli::TimestampFormat;
use crate::error::Failure;
use crate::traffic::{MAX_REQUESTS, Traffic};

/// The file's requests, from the multiple of `period_us` at or before the first to the
/// end of the last one's period, so that a window's edges fall where a live store's would. Blank lines and `#` comments are
/// skipped; a line without a timestamp is an error naming it.
pub(crate) fn read_file(
    path: &str,
    format: TimestampFormat,
    period_us: u64,
) -> Result<Traffic, Failure> {
    let arg = format!("--traffic {path}");
    let text = std::fs::read_to_string(Path::new(path)).map_err(|e| {
        Failure::input(
            &arg,
            format!("{e} (neither a readable file nor steady:, bursts:, ramp:, poisson:)"),
        )
    })?;
    let mut times = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with('#') {
            continue;
        }
        let t = parse_line(trimmed, format).ok_or_else(|| {
            Failure::input(
                format!("{arg}: line {}", i + 1),
                format!("{trimmed:?} has no {} timestamp", name(format)),
            )
        })?;
        if times.len() == MAX_REQUESTS {
            return Err(Failure::input(
                &arg,
                format!("more than {MAX_REQUESTS} requests"),
            ));
        }
        times.push(t);
    }
    times.sort_unstable();
    let Some(&first) = times.first() else {
        return Err(Failure::input(&arg, "no timestamps in the file"));
    };
    let origin = first - first % period_us.max(1);
    for t in &mut times {
        *t -= origin;
    }
    // To the end of the last request's period: the chart ends on a window's edge.
    let period = period_us.max(1);
    let span = times.last().map_or(0, |&t| (t / period + 1) * period);
    Ok(Traffic { times, span })
}

/// The format's name, for errors.
fn name(format: TimestampFormat) -> &'static str {
    match format {
        TimestampFormat::Seconds => "seconds",
        TimestampFormat::Millis => "millis",
        TimestampFormat::Micros => "micros",
        TimestampFormat::Rfc3339 => "RFC 3339",
        TimestampFormat::Clf => "access log ([dd/Mon/yyyy:HH:MM:SS +zzzz])",
    }
}

/// A line's instant in µs (since the Unix epoch for dated formats).
pub(crate) fn parse_line(line: &str, format: TimestampFormat) -> Option<u64> {
    match format {
        TimestampFormat::Seconds => seconds(line),
        TimestampFormat::Millis => digits(line)?.checked_mul(1_000),
        TimestampFormat::Micros => digits(line),
        TimestampFormat::Rfc3339 => line
            .split_whitespace()
            .find_map(|field| rfc3339(field.trim_matches(|c| matches!(c, '[' | ']' | '"')))),
        TimestampFormat::Clf => {
            let start = line.find('[')? + 1;
            let end = start + line[start..].find(']')?;
            clf(&line[start..end])
        }
    }
}

/// Only ASCII digits, as a number.
fn digits(s: &str) -> Option<u64> {
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    s.parse().ok()
}

/// `123.456789` seconds in µs, exactly (digits past the µs are dropped).
fn seconds(s: &str) -> Option<u64> {
    let (whole, frac) = s.split_once('.').unwrap_or((s, ""));
    if whole.is_empty() && frac.is_empty() {
        return None;
    }
    let whole = if whole.is_empty() { 0 } else { digits(whole)? };
    let mut micros = 0;
    if !frac.is_empty() {
        digits(frac)?;
        let six: String = frac.chars().chain(std::iter::repeat('0')).take(6).collect();
        micros = six.parse::<u64>().ok()?;
    }
    whole.checked_mul(1_000_000)?.checked_add(micros)
}

/// `2024-05-01T12:00:00[.fff]Z` (or `+02:00`) in µs since the epoch.
fn rfc3339(s: &str) -> Option<u64> {
    let (date, rest) = s.split_once(['T', 't'])?;
    let date = date_parts(date.split('-'))?;
    let zone_at = rest.find(['Z', 'z', '+', '-'])?;
    let (time, zone) = rest.split_at(zone_at);
    let offset = match zone {
        "Z" | "z" => 0,
        _ => {
            let sign = if zone.starts_with('-') { -1 } else { 1 };
            let (h, m) = zone[1..].split_once(':')?;
            sign * (digits(h)? as i64 * 3600 + digits(m)? as i64 * 60)
        }
    };
    let (hms, frac) = time.split_once('.').unwrap_or((time, ""));
    let mut hms = hms.split(':').map(digits);
    let (h, m, sec) = (hms.next()??, hms.next()??, hms.next()??);
    let micros = if frac.is_empty() {
        0
    } else {
        seconds(&format!("0.{frac}"))?
    };
    instant(date, (h, m, sec), offset, micros)
}

/// `10/Oct/2000:13:55:36 -0700` in µs since the epoch.
fn clf(s: &str) -> Option<u64> {
    let (stamp, zone) = s.trim().split_once(' ')?;
    let mut parts = stamp.splitn(4, [':', '/']);
    let day = digits(parts.next()?)?;
    let month = parts.next()?;
    let year = digits(parts.next()?)?;
    let months = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    let month = months.iter().position(|m| m.eq_ignore_ascii_case(month))? as u64 + 1;
    let mut hms = parts.next()?.split(':').map(digits);
    let (h, m, sec) = (hms.next()??, hms.next()??, hms.next()??);
    let zone = zone.trim();
    if zone.len() != 5 {
        return None;
    }
    let sign = match &zone[..1] {
        "+" => 1,
        "-" => -1,
        _ => return None,
    };
    let offset = sign * (digits(&zone[1..3])? as i64 * 3600 + digits(&zone[3..])? as i64 * 60);
    instant((year, month, day), (h, m, sec), offset, 0)
}

/// `year-month-day`, checked for range.
fn date_parts<'a>(mut parts: impl Iterator<Item = &'a str>) -> Option<(u64, u64, u64)> {
    let (y, m, d) = (parts.next()?, parts.next()?, parts.next()?);
    Some((digits(y)?, digits(m)?, digits(d)?))
}

/// A civil date and time at a UTC offset (seconds east), in µs since the epoch.
fn instant(
    (year, month, day): (u64, u64, u64),
    (h, m, s): (u64, u64, u64),
    offset: i64,
    micros: u64,
) -> Option<u64> {
    if !(1970..=9999).contains(&year)
        || !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || h > 23
        || m > 59
        || s > 60
    {
        return None;
    }
    let days = days_from_civil(year as i64, month as i64, day as i64);
    let secs = days * 86_400 + (h * 3600 + m * 60 + s) as i64 - offset;
    u64::try_from(secs)
        .ok()?
        .checked_mul(1_000_000)?
        .checked_add(micros)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (the usual era arithmetic: eras
/// of 400 years, years starting in March so the leap day comes last).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;
    use TimestampFormat::*;

    #[test]
    fn every_format_reads_the_same_instant() {
        // 2024-05-01T12:00:00Z is 1714564800 s since the epoch.
        let at = 1_714_564_800_000_000;
        assert_eq!(parse_line("1714564800", Seconds), Some(at));
        assert_eq!(parse_line("1714564800.25", Seconds), Some(at + 250_000));
        assert_eq!(parse_line("1714564800250", Millis), Some(at + 250_000));
        assert_eq!(parse_line("1714564800000001", Micros), Some(at + 1));
        assert_eq!(
            parse_line("info 2024-05-01T12:00:00.5Z GET /", Rfc3339),
            Some(at + 500_000)
        );
        assert_eq!(parse_line("2024-05-01T14:00:00+02:00", Rfc3339), Some(at));
        assert_eq!(
            parse_line(
                r#"203.0.113.7 - - [01/May/2024:05:00:00 -0700] "GET / HTTP/1.1" 200 5"#,
                Clf
            ),
            Some(at)
        );
        assert_eq!(days_from_civil(1970, 1, 1), 0);
        assert_eq!(days_from_civil(2000, 3, 1), 11_017);
    }

    #[test]
    fn what_is_not_a_timestamp_is_none() {
        for (line, format) in [
            ("abc", Seconds),
            ("1.2.3", Seconds),
            ("-5", Seconds),
            ("12.5", Millis),
            ("2024-13-01T00:00:00Z", Rfc3339),
            ("2024-05-01 12:00:00", Rfc3339),
            ("[01/Foo/2024:05:00:00 -0700]", Clf),
            ("no brackets", Clf),
        ] {
            assert_eq!(parse_line(line, format), None, "{line}");
        }
    }
}
