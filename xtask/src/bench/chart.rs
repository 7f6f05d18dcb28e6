//! One SVG per workload family: a panel per metric, a bar per engine, the value written on
//! each bar and rbolt in its own colour, so a chart reads without the table. A bar is the
//! median of an engine's runs and a whisker spans their min-max. A panel whose values span
//! more than `LOG_AXIS_SPAN` times has a logarithmic axis, so that one engine 50 times slower
//! than the rest does not flatten the others' bars into a row of equal stubs.

use super::compare::Compare;
use super::report::{
    FAMILIES, METRICS, Metric, Stat, best, format_value, group_thousands, metric_stat,
};
use anyhow::{Result, anyhow};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};

const PANEL_WIDTH: u32 = 340;
/// Largest over smallest value of a panel above which its axis is logarithmic.
const LOG_AXIS_SPAN: f64 = 8.0;
const HEIGHT: u32 = 400;
const RBOLT: RGBColor = RGBColor(0xd9, 0x5f, 0x02);
const PEERS: [RGBColor; 5] = [
    RGBColor(0x1b, 0x9e, 0x77),
    RGBColor(0x75, 0x70, 0xb3),
    RGBColor(0xe7, 0x29, 0x8a),
    RGBColor(0x66, 0xa6, 0x1e),
    RGBColor(0x66, 0x66, 0x66),
];

/// Writes `<family>.svg` for every family; returns the paths.
pub fn write(dir: &Path, compare: &Compare) -> Result<Vec<PathBuf>> {
    let engines: Vec<(&str, Vec<&serde_json::Value>)> = compare.ok().collect();
    let mut paths = Vec::new();
    if engines.is_empty() {
        return Ok(paths);
    }
    for (family, title) in FAMILIES {
        let metrics: Vec<&Metric> = METRICS.iter().filter(|m| m.family == *family).collect();
        let path = dir.join(format!("{family}.svg"));
        let columns: Vec<(&str, Vec<Option<Stat>>)> = metrics
            .iter()
            .map(|metric| {
                (
                    metric.short,
                    engines
                        .iter()
                        .map(|(_, lines)| metric_stat(metric, lines))
                        .collect(),
                )
            })
            .collect();
        let names: Vec<&str> = engines.iter().map(|(name, _)| *name).collect();
        draw(&path, title, compare.n, &names, &metrics, &columns)
            .map_err(|e| anyhow!("drawing {}: {e}", path.display()))?;
        paths.push(path);
    }
    Ok(paths)
}

/// rbolt's colour, or the colour of the `index`th peer.
pub fn colour(name: &str, index: usize) -> RGBColor {
    if name == "rbolt" {
        RBOLT
    } else {
        PEERS[index % PEERS.len()]
    }
}

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// A map from values to axis positions (or back).
type Transform = fn(f64) -> f64;

/// The y range of a panel: `Some((low, high))` for a logarithmic axis when the values span
/// more than `LOG_AXIS_SPAN` times (all positive), `None` for a linear one from zero.
pub fn log_range(stats: &[Option<Stat>]) -> Option<(f64, f64)> {
    let low = stats
        .iter()
        .flatten()
        .map(|s| s.min)
        .fold(f64::INFINITY, f64::min);
    let high = stats.iter().flatten().map(|s| s.max).fold(0.0, f64::max);
    (low > 0.0 && high / low > LOG_AXIS_SPAN).then_some((low / 2.0, high * 2.0))
}

fn draw(
    path: &Path,
    title: &str,
    n: usize,
    names: &[&str],
    metrics: &[&Metric],
    columns: &[(&str, Vec<Option<Stat>>)],
) -> DrawResult {
    let width = PANEL_WIDTH * metrics.len() as u32;
    let root = SVGBackend::new(path, (width, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!("{title} — N = {}", group_thousands(n)),
        ("sans-serif", 20).into_font(),
    )?;
    let panels = root.split_evenly((1, metrics.len()));
    for ((panel, metric), (short, stats)) in panels.iter().zip(metrics).zip(columns) {
        let medians: Vec<Option<f64>> = stats.iter().map(|s| s.map(|s| s.median)).collect();
        let best_value = best(metric, &medians).filter(|_| metric.comparable);
        let better = if metric.higher_is_better {
            "higher is better"
        } else {
            "lower is better"
        };
        // A log axis is drawn as a linear one over log10 of the values, labelled with the
        // values themselves.
        let log = log_range(stats);
        let (scale, unscale): (Transform, Transform) = if log.is_some() {
            (f64::log10, |y| 10f64.powf(y))
        } else {
            (|y| y, |y| y)
        };
        let (low, high) = log.unwrap_or_else(|| {
            let top = stats.iter().flatten().map(|s| s.max).fold(0.0, f64::max);
            (0.0, if top > 0.0 { top * 1.2 } else { 1.0 })
        });
        let (y_low, y_high) = (scale(low), scale(high));
        let axis = if log.is_some() { ", log scale" } else { "" };
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("{short} ({}{axis}; {better})", metric.unit),
                ("sans-serif", 13).into_font(),
            )
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(52)
            // An integer range's end is a segment too, so `0..len - 1` gives `len` bars.
            .build_cartesian_2d((0..names.len().max(2) - 1).into_segmented(), y_low..y_high)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .x_labels(names.len())
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) => names.get(*i).copied().unwrap_or("").to_string(),
                _ => String::new(),
            })
            .y_label_formatter(&|y| format_value(unscale(*y)))
            .label_style(("sans-serif", 11).into_font())
            .draw()?;
        let mut peer_index = 0;
        for (i, (name, stat)) in names.iter().zip(stats).enumerate() {
            let colour = colour(name, peer_index);
            if *name != "rbolt" {
                peer_index += 1;
            }
            let Some(stat) = *stat else { continue };
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), y_low),
                    (SegmentValue::Exact(i + 1), scale(stat.median)),
                ],
                colour.filled(),
            );
            bar.set_margin(0, 0, 6, 6);
            chart.draw_series(std::iter::once(bar))?;
            let centre = || SegmentValue::CenterOf(i);
            if stat.max > stat.min {
                // The whisker: min to max, with a cap at each end.
                chart.draw_series(std::iter::once(PathElement::new(
                    vec![(centre(), scale(stat.min)), (centre(), scale(stat.max))],
                    BLACK.stroke_width(1),
                )))?;
                for end in [stat.min, stat.max] {
                    chart.draw_series(std::iter::once(
                        EmptyElement::at((centre(), scale(end)))
                            + PathElement::new(vec![(-5, 0), (5, 0)], BLACK.stroke_width(1)),
                    ))?;
                }
            }
            let label = if Some(stat.median) == best_value {
                format!("{} ★", format_value(stat.median))
            } else {
                format_value(stat.median)
            };
            chart.draw_series(std::iter::once(Text::new(
                label,
                (centre(), scale(stat.max) + (y_high - y_low) * 0.02),
                ("sans-serif", 11)
                    .into_font()
                    .color(&BLACK)
                    .pos(Pos::new(HPos::Center, VPos::Bottom)),
            )))?;
        }
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench::report::stat;

    #[test]
    fn log_axis_only_for_wide_spans() {
        let close = [stat([1.0, 1.2]), stat([1.5]), None];
        assert_eq!(log_range(&close), None);
        let wide = [stat([1.0, 1.2]), stat([50.0, 60.0])];
        assert_eq!(log_range(&wide), Some((0.5, 120.0)));
        // A zero (allocations per get) keeps the axis linear.
        let with_zero = [stat([0.0]), stat([20.0])];
        assert_eq!(log_range(&with_zero), None);
    }

    #[test]
    fn charts_draw_with_whiskers_and_log_axes() {
        let dir = std::env::temp_dir().join(format!("xtask-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.svg");
        let metrics: Vec<&Metric> = METRICS.iter().take(2).collect();
        let columns = vec![
            ("a", vec![stat([1.0, 1.1, 1.3]), stat([60.0])]),
            ("b", vec![stat([2.0]), stat([2.2, 2.5])]),
        ];
        draw(&path, "t", 1000, &["rbolt", "lmdb"], &metrics, &columns).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(svg.contains("log scale"), "the wide panel has a log axis");
        assert!(svg.contains("1.10"), "medians are written on the bars");
    }
}
