//! `scale.svg`, the chart of `cargo xtask bench --scale`: small multiples, one panel per row
//! of the scale table, N on a logarithmic x axis and one line with markers per engine (rbolt
//! and the peers in the colours of the family charts, `chart.rs`). A panel's y axis is
//! logarithmic when its values span more than the family charts allow a linear one
//! ([`chart::log_range`]), linear from zero otherwise.

use super::chart::{self, colour};
use super::report::{format_value, stat};
use super::scale::short_n;
use anyhow::{Result, anyhow};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;
use std::ops::Range;
use std::path::Path;

/// Panels a line of the chart.
const COLUMNS: usize = 4;
const PANEL_WIDTH: u32 = 380;
const PANEL_HEIGHT: u32 = 250;
/// The band above the panels: the title and the legend.
const HEADER_HEIGHT: u32 = 60;

/// One panel: its title and, for each engine in the order of the legend, its points (N,
/// value), N ascending.
pub struct Panel {
    pub title: String,
    pub series: Vec<Vec<(f64, f64)>>,
}

/// Writes the chart of `panels` to `path`; `engines` names the series, rbolt first.
pub fn write(path: &Path, panels: &[Panel], engines: &[&str]) -> Result<()> {
    draw(path, panels, engines).map_err(|e| anyhow!("drawing {}: {e}", path.display()))
}

/// The ticks of a logarithmic axis from `low` to `high`, ascending: the powers of ten
/// between them, with 2 and 5 times each when that gives fewer than three, and every
/// multiple from 1 to 9 when that still gives fewer than two.
pub fn log_ticks(low: f64, high: f64) -> Vec<f64> {
    if !(low > 0.0 && high > low) {
        return Vec::new();
    }
    let first = low.log10().floor() as i32;
    let last = high.log10().ceil() as i32;
    let within = |multiples: &[f64]| -> Vec<f64> {
        (first..=last)
            .flat_map(|power| multiples.iter().map(move |m| m * 10f64.powi(power)))
            // A tick a rounding error outside the range is the range's end.
            .filter(|t| *t >= low * (1.0 - 1e-9) && *t <= high * (1.0 + 1e-9))
            .collect()
    };
    let mut ticks = within(&[1.0]);
    if ticks.len() < 3 {
        ticks = within(&[1.0, 2.0, 5.0]);
    }
    if ticks.len() < 2 {
        ticks = within(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0, 9.0]);
    }
    ticks
}

type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// An axis over `range` with its ticks at `ticks` (plotters' `WithKeyPoints` over an `f64`
/// range takes no label formatter).
struct Ticked {
    range: RangedCoordf64,
    ticks: Vec<f64>,
}

impl Ticked {
    fn new(range: Range<f64>, ticks: Vec<f64>) -> Self {
        Self {
            range: range.into(),
            ticks,
        }
    }
}

impl Ranged for Ticked {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        self.range.map(value, limit)
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.range.range()
    }
}

fn draw(path: &Path, panels: &[Panel], engines: &[&str]) -> DrawResult {
    let rows = panels.len().div_ceil(COLUMNS).max(1);
    let size = (
        PANEL_WIDTH * COLUMNS as u32,
        HEADER_HEIGHT + PANEL_HEIGHT * rows as u32,
    );
    let root = SVGBackend::new(path, size).into_drawing_area();
    root.fill(&WHITE)?;
    let (header, body) = root.split_vertically(HEADER_HEIGHT);
    draw_header(&header, engines)?;
    // One x range for every panel, so that the panels line up: the N of all the points,
    // widened by a factor of 1.4 at each end.
    let ns = panels
        .iter()
        .flat_map(|p| p.series.iter().flatten().map(|(n, _)| *n));
    let (low, high) = ns.fold((f64::INFINITY, 0.0f64), |(lo, hi), n| {
        (lo.min(n), hi.max(n))
    });
    let x = if low > 0.0 && high >= low {
        (low / 1.4, high * 1.4)
    } else {
        (1.0, 10.0)
    };
    for (area, panel) in body.split_evenly((rows, COLUMNS)).iter().zip(panels) {
        draw_panel(area, panel, engines, x)?;
    }
    root.present()?;
    Ok(())
}

/// The title and a legend entry per engine: a stroke with a marker, and the name.
fn draw_header<DB: DrawingBackend>(area: &DrawingArea<DB, Shift>, engines: &[&str]) -> DrawResult
where
    DB::ErrorType: 'static,
{
    area.draw(&Text::new(
        "rbolt at scale: a panel per row, N on a log axis",
        (12, 10),
        ("sans-serif", 20).into_font(),
    ))?;
    let mut left = 12;
    for (i, engine) in engines.iter().enumerate() {
        let colour = colour(engine, i.saturating_sub(1));
        area.draw(&PathElement::new(
            vec![(left, 46), (left + 28, 46)],
            colour.stroke_width(2),
        ))?;
        area.draw(&Circle::new((left + 14, 46), 4, colour.filled()))?;
        area.draw(&Text::new(
            engine.to_string(),
            (left + 34, 39),
            ("sans-serif", 14).into_font(),
        ))?;
        left += 48 + 9 * engine.len() as i32;
    }
    Ok(())
}

/// A map from values to axis positions (or back).
type Transform = fn(f64) -> f64;

fn draw_panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    panel: &Panel,
    engines: &[&str],
    (x_low, x_high): (f64, f64),
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    let stats: Vec<_> = panel
        .series
        .iter()
        .flatten()
        .map(|(_, v)| stat([*v]))
        .collect();
    // Both axes are drawn linear over the positions: log10 of N, and of the values on a log
    // y axis; the labels are the values themselves.
    let log = chart::log_range(&stats);
    let (scale, unscale): (Transform, Transform) = if log.is_some() {
        (f64::log10, |y| 10f64.powf(y))
    } else {
        (|y| y, |y| y)
    };
    let (low, high) = log.unwrap_or_else(|| {
        let top = stats.iter().flatten().map(|s| s.max).fold(0.0, f64::max);
        (0.0, if top > 0.0 { top * 1.2 } else { 1.0 })
    });
    let y_ticks: Vec<f64> = if log.is_some() {
        log_ticks(low, high).into_iter().map(f64::log10).collect()
    } else {
        RangedCoordf64::from(low..high).key_points(6)
    };
    let x_ticks = log_ticks(x_low, x_high)
        .into_iter()
        .map(f64::log10)
        .collect();
    let axis = if log.is_some() { ", log y" } else { "" };
    let mut chart = ChartBuilder::on(area)
        .caption(
            format!("{}{axis}", panel.title),
            ("sans-serif", 14).into_font(),
        )
        .margin(8)
        .x_label_area_size(22)
        .y_label_area_size(50)
        .build_cartesian_2d(
            Ticked::new(x_low.log10()..x_high.log10(), x_ticks),
            Ticked::new(scale(low)..scale(high), y_ticks),
        )?;
    chart
        .configure_mesh()
        .light_line_style(WHITE)
        .bold_line_style(RGBColor(0xe4, 0xe4, 0xe4))
        .x_label_formatter(&|x| short_n(10f64.powf(*x)).to_uppercase())
        .y_label_formatter(&|y| format_value(unscale(*y)))
        .label_style(("sans-serif", 12).into_font())
        .draw()?;
    for (i, (engine, points)) in engines.iter().zip(&panel.series).enumerate() {
        let colour = colour(engine, i.saturating_sub(1));
        let at: Vec<(f64, f64)> = points.iter().map(|(n, v)| (n.log10(), scale(*v))).collect();
        chart.draw_series(LineSeries::new(at.clone(), colour.stroke_width(2)))?;
        chart.draw_series(at.into_iter().map(|p| Circle::new(p, 4, colour.filled())))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_ticks_are_powers_of_ten_then_their_halves_and_fifths() {
        assert_eq!(log_ticks(0.5e6, 200e6), [1e6, 1e7, 1e8]);
        // One decade: 2 and 5 times are added.
        assert_eq!(log_ticks(1e6 / 1.4, 1e7 * 1.4), [1e6, 2e6, 5e6, 1e7]);
        // Within a decade: every multiple.
        assert_eq!(log_ticks(31.0, 49.0), [40.0]);
        assert_eq!(log_ticks(25.0, 45.0), [30.0, 40.0]);
        // The ends count.
        assert_eq!(log_ticks(1.0, 10.0), [1.0, 2.0, 5.0, 10.0]);
        assert!(log_ticks(0.0, 10.0).is_empty());
        assert!(log_ticks(10.0, 1.0).is_empty());
    }

    #[test]
    fn the_chart_has_a_panel_per_row_and_a_log_x_axis() {
        let dir = std::env::temp_dir().join(format!("xtask-scale-chart-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("scale.svg");
        let panels = [
            Panel {
                title: "(b) random get (ns/get)".into(),
                series: vec![vec![(1e6, 2210.0), (1e7, 4121.0)], vec![(1e6, 1.0e4)]],
            },
            Panel {
                title: "check (s)".into(),
                series: vec![vec![(1e6, 0.06), (1e7, 1.11)], vec![]],
            },
        ];
        write(&path, &panels, &["rbolt", "lmdb"]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        std::fs::remove_dir_all(&dir).unwrap();
        assert!(svg.contains("(b) random get (ns/get)"), "a panel per row");
        assert!(
            svg.contains("check (s), log y"),
            "a wide span has a log y axis"
        );
        assert!(
            !svg.contains("random get (ns/get), log y"),
            "a narrow one does not"
        );
        // plotters writes a text element's text on a line of its own.
        for tick in ["\n1M\n", "\n2M\n", "\n5M\n", "\n10M\n"] {
            assert!(svg.contains(tick), "x tick {tick}");
        }
        assert!(svg.contains("#D95F02"), "rbolt's colour");
        assert!(svg.contains("#1B9E77"), "the first peer's colour");
    }
}
