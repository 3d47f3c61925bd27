//! PNG curves next to the tables (latency, bandwidth, slowdown versus granularity), drawn
//! with plotters' bitmap backend. Text needs a TrueType font: DejaVu Sans from Debian's
//! `fonts-dejavu-core` (the suite says so and skips the plots when it is missing).

use std::path::Path;
use std::sync::OnceLock;

use anyhow::{anyhow, Result};
use plotters::prelude::*;

const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu/DejaVuSans.ttf",
];

/// Registers the font once; `Err` says why plots cannot be drawn.
fn font() -> Result<()> {
    static DONE: OnceLock<Result<(), String>> = OnceLock::new();
    DONE.get_or_init(|| {
        let path = FONT_PATHS
            .iter()
            .find(|p| Path::new(p).exists())
            .ok_or_else(|| "no DejaVu Sans font (apt-get install fonts-dejavu-core)".to_string())?;
        let bytes = std::fs::read(path).map_err(|e| format!("{path}: {e}"))?;
        let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
        plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
            .map_err(|_| format!("{path}: not a usable font"))
    })
    .clone()
    .map_err(|e| anyhow!(e))
}

/// One named curve.
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// Axis scales.
#[derive(Clone, Copy)]
pub enum Scale {
    Linear,
    Log,
}

pub struct Plot<'a> {
    pub title: &'a str,
    pub x_label: &'a str,
    pub y_label: &'a str,
    pub x_scale: Scale,
    pub y_scale: Scale,
    pub series: Vec<Series>,
}

const COLOURS: [RGBColor; 5] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
];

fn bounds(series: &[Series], pick: impl Fn(&(f64, f64)) -> f64, log: bool) -> (f64, f64) {
    let vals = series
        .iter()
        .flat_map(|s| s.points.iter().map(&pick))
        .filter(|v| v.is_finite() && (!log || *v > 0.0));
    let (lo, hi) = vals.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    if !lo.is_finite() {
        return (1.0, 10.0);
    }
    if log {
        (lo / 1.5, hi * 1.5)
    } else {
        let pad = ((hi - lo) * 0.08).max(hi.abs() * 0.05).max(1e-9);
        ((lo - pad).min(0.0), hi + pad)
    }
}

/// Draws `plot` into `path` (PNG, 900x560).
pub fn draw(plot: &Plot<'_>, path: &Path) -> Result<()> {
    font()?;
    let log_x = matches!(plot.x_scale, Scale::Log);
    let log_y = matches!(plot.y_scale, Scale::Log);
    let (x0, x1) = bounds(&plot.series, |p| p.0, log_x);
    let (y0, y1) = bounds(&plot.series, |p| p.1, log_y);
    let root = BitMapBackend::new(path, (900, 560)).into_drawing_area();
    root.fill(&WHITE).map_err(|e| anyhow!("{e}"))?;
    macro_rules! finish {
        ($chart:expr) => {{
            let mut chart = $chart;
            chart
                .configure_mesh()
                .x_desc(plot.x_label)
                .y_desc(plot.y_label)
                .label_style(("sans-serif", 15))
                .draw()
                .map_err(|e| anyhow!("{e}"))?;
            for (i, s) in plot.series.iter().enumerate() {
                let colour = COLOURS[i % COLOURS.len()];
                let pts: Vec<(f64, f64)> = s
                    .points
                    .iter()
                    .copied()
                    .filter(|(x, y)| (!log_x || *x > 0.0) && (!log_y || *y > 0.0))
                    .collect();
                chart
                    .draw_series(LineSeries::new(pts.clone(), colour.stroke_width(2)))
                    .map_err(|e| anyhow!("{e}"))?
                    .label(s.label.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 20, y)], colour.stroke_width(2))
                    });
                chart
                    .draw_series(pts.iter().map(|p| Circle::new(*p, 3, colour.filled())))
                    .map_err(|e| anyhow!("{e}"))?;
            }
            chart
                .configure_series_labels()
                .label_font(("sans-serif", 15))
                .background_style(WHITE.mix(0.85))
                .border_style(BLACK)
                .position(SeriesLabelPosition::UpperLeft)
                .draw()
                .map_err(|e| anyhow!("{e}"))?;
        }};
    }
    let mut builder = ChartBuilder::on(&root);
    builder
        .caption(plot.title, ("sans-serif", 22))
        .margin(14)
        .x_label_area_size(44)
        .y_label_area_size(70);
    match (log_x, log_y) {
        (true, true) => finish!(builder
            .build_cartesian_2d((x0..x1).log_scale(), (y0..y1).log_scale())
            .map_err(|e| anyhow!("{e}"))?),
        (true, false) => finish!(builder
            .build_cartesian_2d((x0..x1).log_scale(), y0..y1)
            .map_err(|e| anyhow!("{e}"))?),
        (false, true) => finish!(builder
            .build_cartesian_2d(x0..x1, (y0..y1).log_scale())
            .map_err(|e| anyhow!("{e}"))?),
        (false, false) => finish!(builder
            .build_cartesian_2d(x0..x1, y0..y1)
            .map_err(|e| anyhow!("{e}"))?),
    }
    root.present().map_err(|e| anyhow!("{e}"))?;
    Ok(())
}
