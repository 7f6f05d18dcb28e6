//! One SVG per workload family: a panel per metric, a bar per engine, the value written on
//! each bar and rbolt in its own colour, so a chart reads without the table.

use super::compare::Compare;
use super::report::{FAMILIES, METRICS, Metric, best, format_value, group_thousands};
use anyhow::{Result, anyhow};
use plotters::coord::ranged1d::SegmentValue;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::{Path, PathBuf};

const PANEL_WIDTH: u32 = 340;
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
    let engines: Vec<(&str, &serde_json::Value)> = compare.ok().collect();
    let mut paths = Vec::new();
    if engines.is_empty() {
        return Ok(paths);
    }
    for (family, title) in FAMILIES {
        let metrics: Vec<&Metric> = METRICS.iter().filter(|m| m.family == *family).collect();
        let path = dir.join(format!("{family}.svg"));
        let columns: Vec<(&str, Vec<Option<f64>>)> = metrics
            .iter()
            .map(|metric| {
                (
                    metric.short,
                    engines.iter().map(|(_, v)| (metric.get)(v)).collect(),
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

fn colour(name: &str, index: usize) -> RGBColor {
    if name == "rbolt" {
        RBOLT
    } else {
        PEERS[index % PEERS.len()]
    }
}

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

fn draw(
    path: &Path,
    title: &str,
    n: usize,
    names: &[&str],
    metrics: &[&Metric],
    columns: &[(&str, Vec<Option<f64>>)],
) -> DrawResult {
    let width = PANEL_WIDTH * metrics.len() as u32;
    let root = SVGBackend::new(path, (width, HEIGHT)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(
        &format!("{title} — N = {}", group_thousands(n)),
        ("sans-serif", 20).into_font(),
    )?;
    let panels = root.split_evenly((1, metrics.len()));
    for ((panel, metric), (short, values)) in panels.iter().zip(metrics).zip(columns) {
        let top = values.iter().flatten().copied().fold(0.0, f64::max);
        let top = if top > 0.0 { top * 1.2 } else { 1.0 };
        let best_value = best(metric, values).filter(|_| metric.comparable);
        let better = if metric.higher_is_better {
            "higher is better"
        } else {
            "lower is better"
        };
        let mut chart = ChartBuilder::on(panel)
            .caption(
                format!("{short} ({}; {better})", metric.unit),
                ("sans-serif", 13).into_font(),
            )
            .margin(8)
            .x_label_area_size(28)
            .y_label_area_size(52)
            .build_cartesian_2d(
                // An integer range's end is a segment too, so `0..len - 1` gives `len` bars.
                (0..names.len().max(2) - 1).into_segmented(),
                0.0..top,
            )?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .light_line_style(WHITE)
            .x_labels(names.len())
            .x_label_formatter(&|x| match x {
                SegmentValue::CenterOf(i) => names.get(*i).copied().unwrap_or("").to_string(),
                _ => String::new(),
            })
            .y_label_formatter(&|y| format_value(*y))
            .label_style(("sans-serif", 11).into_font())
            .draw()?;
        let mut peer_index = 0;
        for (i, (name, value)) in names.iter().zip(values).enumerate() {
            let colour = colour(name, peer_index);
            if *name != "rbolt" {
                peer_index += 1;
            }
            let Some(value) = *value else { continue };
            let mut bar = Rectangle::new(
                [
                    (SegmentValue::Exact(i), 0.0),
                    (SegmentValue::Exact(i + 1), value),
                ],
                colour.filled(),
            );
            bar.set_margin(0, 0, 6, 6);
            chart.draw_series(std::iter::once(bar))?;
            let label = if Some(value) == best_value {
                format!("{} ★", format_value(value))
            } else {
                format_value(value)
            };
            chart.draw_series(std::iter::once(Text::new(
                label,
                (SegmentValue::CenterOf(i), value + top * 0.02),
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
