//! `simulate`'s chart, drawn by plotters' SVG backend: one panel per algorithm on one time
//! axis (requests offered in grey, admitted in the algorithm's colour, per bucket of
//! time), and the summary table under them.

use floodwall_core::{Algorithm, Quota};
use plotters::prelude::*;

use crate::error::Failure;
use crate::simulate::{self, Run};
use crate::traffic::Traffic;

/// The chart's width in pixels.
const WIDTH: u32 = 960;
/// Each panel's height.
const PANEL: u32 = 190;
/// The title's height.
const TITLE: u32 = 40;
/// The most buckets drawn: past it, buckets widen.
const MAX_BUCKETS: u64 = 2_000;

/// The grey of offered requests, the same in every panel.
pub(crate) const OFFERED: RGBColor = RGBColor(0x9e, 0x9e, 0x9e);

/// Each algorithm's colour, so a chart reads the same whichever algorithms it shows.
pub(crate) fn colour(algorithm: Algorithm) -> RGBColor {
    match algorithm.name() {
        "gcra" => RGBColor(0x1f, 0x77, 0xb4),
        "token_bucket" => RGBColor(0xff, 0x7f, 0x0e),
        "leaky_bucket" => RGBColor(0x94, 0x67, 0xbd),
        "fixed_window" => RGBColor(0xd6, 0x27, 0x28),
        "sliding_window" => RGBColor(0x2c, 0xa0, 0x2c),
        "sliding_log" => RGBColor(0x17, 0xbe, 0xcf),
        _ => RGBColor(0x8c, 0x56, 0x4b),
    }
}

/// The chart as SVG text. `bucket` is the time step in µs (widened so that at most
/// [`MAX_BUCKETS`] are drawn).
pub(crate) fn svg(
    quota: Quota,
    traffic: &Traffic,
    runs: &[Run],
    bucket: u64,
) -> Result<String, Failure> {
    let span = traffic.span.max(1);
    let bucket = bucket.max(span.div_ceil(MAX_BUCKETS)).max(1);
    let buckets = span.div_ceil(bucket) as usize;
    let offered = counts(&traffic.times, None, bucket, buckets);
    let table_height = 20 * (runs.len() as u32 + 2) + 20;
    let height = TITLE + PANEL * runs.len() as u32 + table_height;
    let mut text = String::new();
    {
        let root = SVGBackend::with_string(&mut text, (WIDTH, height)).into_drawing_area();
        draw(&root, quota, traffic, runs, bucket, &offered).map_err(drawing)?;
        root.present().map_err(drawing)?;
    }
    Ok(text)
}

/// Any plotters error, as this command's.
fn drawing(e: impl std::fmt::Display) -> Failure {
    Failure::other("drawing the chart", e)
}

/// Requests per bucket: all of them, or those `admitted` says passed.
fn counts(times: &[u64], admitted: Option<&[bool]>, bucket: u64, buckets: usize) -> Vec<u32> {
    let mut counts = vec![0; buckets];
    for (i, &t) in times.iter().enumerate() {
        if admitted.is_none_or(|a| a[i]) {
            counts[((t / bucket) as usize).min(buckets - 1)] += 1;
        }
    }
    counts
}

/// The whole chart, or a part of it.
type Area<'a> = DrawingArea<SVGBackend<'a>, plotters::coord::Shift>;

/// Title, one panel per run over the same time axis, and the summary table.
fn draw(
    root: &Area<'_>,
    quota: Quota,
    traffic: &Traffic,
    runs: &[Run],
    bucket: u64,
    offered: &[u32],
) -> Result<(), Box<dyn std::error::Error>> {
    root.fill(&WHITE)?;
    let (title, rest) = root.split_vertically(TITLE);
    title.draw(&Text::new(
        format!(
            "quota {quota}: requests per {} offered (grey) and admitted, over seconds",
            simulate::seconds(bucket)
        ),
        (12, 12),
        ("sans-serif", 18).into_font(),
    ))?;
    let (panels, bottom) = rest.split_vertically(PANEL * runs.len() as u32);
    let top = offered.iter().copied().max().unwrap_or(0).max(1);
    let x_end = offered.len() as f64 * bucket as f64 / 1e6;
    for (run, area) in runs.iter().zip(panels.split_evenly((runs.len(), 1))) {
        let admitted = counts(&traffic.times, Some(&run.admitted), bucket, offered.len());
        let s = run.summary;
        let caption = format!(
            "{}: admitted {}, refused {}, most in any {}: {}",
            run.policy.name(),
            s.admitted,
            s.refused,
            simulate::seconds(quota.period_micros()),
            s.max_in_period
        );
        let mut chart = ChartBuilder::on(&area)
            .caption(caption, ("sans-serif", 14))
            .margin(6)
            .margin_right(24)
            .x_label_area_size(22)
            .y_label_area_size(44)
            .build_cartesian_2d(0f64..x_end, 0u32..top + top / 10 + 1)?;
        chart
            .configure_mesh()
            .light_line_style(WHITE)
            .label_style(("sans-serif", 11))
            .draw()?;
        let at = |i: usize| i as f64 * bucket as f64 / 1e6;
        let steps = |values: Vec<u32>| {
            values
                .into_iter()
                .enumerate()
                .flat_map(move |(i, v)| [(at(i), v), (at(i + 1), v)])
                .collect::<Vec<_>>()
        };
        chart.draw_series(LineSeries::new(
            steps(offered.to_vec()),
            OFFERED.stroke_width(1),
        ))?;
        let colour = colour(run.policy.algorithm());
        chart.draw_series(LineSeries::new(steps(admitted), colour.stroke_width(2)))?;
    }
    // SVG collapses runs of spaces: each column is drawn at its own x.
    let (title, rows) = simulate::rows(quota, traffic, runs);
    let font = || ("monospace", 14).into_font();
    bottom.draw(&Text::new(title, (16, 10), font()))?;
    for (i, row) in rows.into_iter().enumerate() {
        let y = 30 + 20 * i as i32;
        for (cell, x) in row.into_iter().zip([16, 200, 300, 400]) {
            bottom.draw(&Text::new(cell, (x, y), font()))?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_counted_in_their_bucket() {
        let times = [0, 5, 10, 29, 30];
        // The last bucket takes what lies past the end.
        assert_eq!(counts(&times, None, 10, 3), [2, 1, 2]);
        let admitted = [true, false, true, true, false];
        assert_eq!(counts(&times, Some(&admitted), 10, 3), [1, 1, 1]);
    }

    #[test]
    fn every_algorithm_has_its_own_colour() {
        let mut seen: Vec<RGBColor> = Algorithm::all().iter().map(|&a| colour(a)).collect();
        seen.push(OFFERED);
        seen.sort_by_key(|c| (c.0, c.1, c.2));
        seen.dedup();
        assert_eq!(seen.len(), Algorithm::all().len() + 1);
    }
}
