//! SVG plots, drawn by plotters' SVG backend with its built-in text
//! layout (no font files, no fontconfig): text goes into the SVG as
//! `<text>` elements and the viewer picks the font.

use std::path::Path;

use anyhow::{Result, anyhow};
use plotters::prelude::*;

use crate::report::Report;
use crate::stats::quantile;

/// A plot a workload asked for.
#[derive(Clone, Debug)]
pub enum Plot {
    /// Latency distributions, one stepped line per series (share of
    /// samples per bin, log-spaced bins in milliseconds).
    Histogram {
        file: String,
        title: String,
        series: Vec<(String, Vec<f64>)>,
    },
    /// Lines through (x, y) points, x on a log scale.
    Lines {
        file: String,
        title: String,
        x_label: String,
        y_label: String,
        series: Vec<(String, Vec<(f64, f64)>)>,
    },
    /// Lines through (seconds, y) points, both axes linear.
    TimeSeries {
        file: String,
        title: String,
        y_label: String,
        series: Vec<(String, Vec<(f64, f64)>)>,
    },
}

const COLORS: [RGBColor; 6] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
];

pub fn write_all(_report: &Report, plots: &[Plot], out: &Path) -> Result<()> {
    for p in plots {
        match p {
            Plot::Histogram {
                file,
                title,
                series,
            } => histogram(&out.join(file), title, series)?,
            Plot::Lines {
                file,
                title,
                x_label,
                y_label,
                series,
            } => lines(&out.join(file), title, x_label, y_label, series)?,
            Plot::TimeSeries {
                file,
                title,
                y_label,
                series,
            } => time_series(&out.join(file), title, y_label, series)?,
        }
    }
    Ok(())
}

fn err<E: std::fmt::Debug>(e: E) -> anyhow::Error {
    anyhow!("plot: {e:?}")
}

fn histogram(path: &Path, title: &str, series: &[(String, Vec<f64>)]) -> Result<()> {
    let all: Vec<f64> = {
        let mut v: Vec<f64> = series
            .iter()
            .flat_map(|(_, s)| s.iter().copied())
            .filter(|x| *x > 0.0 && x.is_finite())
            .collect();
        v.sort_by(|a, b| a.total_cmp(b));
        v
    };
    if all.is_empty() {
        return Ok(());
    }
    let lo = (quantile(&all, 0.0005) * 0.8).max(1e-3);
    let hi = (quantile(&all, 0.9995) * 1.25).max(lo * 2.0);
    const BINS: usize = 48;
    let (llo, lhi) = (lo.log10(), hi.log10());
    let edge = |i: usize| 10f64.powf(llo + (lhi - llo) * i as f64 / BINS as f64);
    let mut curves = Vec::new();
    let mut ymax: f64 = 0.0;
    for (name, s) in series {
        if s.is_empty() {
            continue;
        }
        let mut counts = [0usize; BINS];
        for &x in s {
            let b = ((x.max(lo).log10() - llo) / (lhi - llo) * BINS as f64).floor();
            counts[(b.max(0.0) as usize).min(BINS - 1)] += 1;
        }
        let n = s.len() as f64;
        let mut pts = Vec::with_capacity(BINS * 2);
        for (i, c) in counts.iter().enumerate() {
            let share = *c as f64 / n * 100.0;
            ymax = ymax.max(share);
            pts.push((edge(i), share));
            pts.push((edge(i + 1), share));
        }
        curves.push((name.clone(), pts));
    }
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(60)
        .build_cartesian_2d((lo..hi).log_scale(), 0f64..(ymax * 1.1).max(1.0))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("latency, ms (log scale)")
        .x_labels(8)
        .y_desc("% of samples")
        .x_label_formatter(&|x| fmt_tick(*x))
        .draw()
        .map_err(err)?;
    for (i, (name, pts)) in curves.into_iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts, color.stroke_width(2)))
            .map_err(err)?
            .label(name)
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

fn lines(
    path: &Path,
    title: &str,
    x_label: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<()> {
    let xs: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .collect();
    let ys: Vec<f64> = series
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .collect();
    if xs.is_empty() {
        return Ok(());
    }
    let xmin = xs.iter().copied().fold(f64::INFINITY, f64::min).max(1e-3);
    let xmax = xs.iter().copied().fold(0.0, f64::max).max(xmin * 2.0);
    let ymax = ys
        .iter()
        .copied()
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max);
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(
            (xmin * 0.8..xmax * 1.25).log_scale(),
            0f64..(ymax * 1.15).max(1.0),
        )
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_label)
        .y_desc(y_label)
        .x_labels(8)
        .x_label_formatter(&|x| fmt_tick(*x))
        .draw()
        .map_err(err)?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 4, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

fn time_series(
    path: &Path,
    title: &str,
    y_label: &str,
    series: &[(String, Vec<(f64, f64)>)],
) -> Result<()> {
    let pts = || series.iter().flat_map(|(_, p)| p.iter());
    if pts().next().is_none() {
        return Ok(());
    }
    let xmax = pts().map(|p| p.0).fold(0.0, f64::max).max(1.0);
    let ymax = pts()
        .map(|p| p.1)
        .filter(|y| y.is_finite())
        .fold(0.0, f64::max);
    let root = SVGBackend::new(path, (900, 500)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(45)
        .y_label_area_size(70)
        .build_cartesian_2d(0f64..xmax * 1.02, 0f64..(ymax * 1.15).max(1.0))
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc("time, s")
        .y_desc(y_label)
        .x_labels(10)
        .draw()
        .map_err(err)?;
    for (i, (name, pts)) in series.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        chart
            .draw_series(LineSeries::new(pts.clone(), color.stroke_width(2)))
            .map_err(err)?
            .label(name.clone())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2))
            });
        chart
            .draw_series(pts.iter().map(|p| Circle::new(*p, 3, color.filled())))
            .map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .draw()
        .map_err(err)?;
    root.present().map_err(err)?;
    Ok(())
}

fn fmt_tick(x: f64) -> String {
    if x >= 100.0 {
        format!("{x:.0}")
    } else if x >= 1.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}
