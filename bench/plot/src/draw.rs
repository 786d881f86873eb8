//! The figures: one panel per program, laid out in a grid.

use crate::results::Point;
use plotters::coord::types::RangedCoordf64;
use plotters::coord::Shift;
use plotters::prelude::*;
use std::path::Path;

const FONT: &str = "sans-serif";

/// A named figure of a point.
type Figure = (&'static str, fn(&Point) -> f64);

/// Makes `bytes` (a TrueType font) the font of every label.
pub fn register_font(bytes: Vec<u8>) -> Result<(), String> {
    // The font lives as long as the program (plotters keeps a static reference).
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font(FONT, FontStyle::Normal, bytes).map_err(|_| "not a usable TrueType font".to_string())
}

fn err<E: std::fmt::Display>(e: E) -> String {
    e.to_string()
}

/// The programs in the order they first appear, each with its points.
fn by_program(points: &[Point]) -> Vec<(String, Vec<&Point>)> {
    let mut out: Vec<(String, Vec<&Point>)> = Vec::new();
    for p in points {
        match out.iter_mut().find(|(b, _)| *b == p.bench) {
            Some((_, v)) => v.push(p),
            None => out.push((p.bench.clone(), vec![p])),
        }
    }
    out
}

fn sizes(points: &[&Point]) -> Vec<u64> {
    let mut s: Vec<u64> = points.iter().map(|p| p.size).collect();
    s.sort_unstable();
    s.dedup();
    s
}

fn gpu_counts(points: &[&Point]) -> Vec<u32> {
    let mut g: Vec<u32> = points.iter().map(|p| p.gpus).collect();
    g.sort_unstable();
    g.dedup();
    g
}

fn panels<DB: DrawingBackend>(root: &DrawingArea<DB, Shift>, n: usize) -> Vec<DrawingArea<DB, Shift>> {
    let cols = if n <= 1 { 1 } else { 2 };
    let rows = n.div_ceil(cols).max(1);
    root.split_evenly((rows, cols))
}

/// A size index's label (the x axis is the index of the size, so sizes spread evenly).
fn size_label(sizes: &[u64], x: f64) -> String {
    let i = x.round();
    if (x - i).abs() > 1e-6 || i < 0.0 || i as usize >= sizes.len() {
        return String::new();
    }
    sizes[i as usize].to_string()
}

type Chart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

/// A panel whose x axis is the index of `sizes` (labelled with the sizes) and whose y axis
/// runs from 0 to `ymax`, its grid drawn.
fn sized_chart<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    title: &str,
    sizes: &[u64],
    ymax: f64,
    y_desc: &str,
) -> Result<Chart<'a, DB>, String> {
    let mut chart = ChartBuilder::on(area)
        .caption(title, (FONT, 20))
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(50)
        .build_cartesian_2d(-0.5f64..(sizes.len() as f64 - 0.5), 0f64..ymax)
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_labels(sizes.len().max(2))
        .x_label_formatter(&|x| size_label(sizes, *x))
        .x_desc("problem size (first argument)")
        .y_desc(y_desc)
        .label_style((FONT, 14))
        .draw()
        .map_err(err)?;
    Ok(chart)
}

/// The panel's legend, at `position`.
fn legend<'a, DB: DrawingBackend + 'a>(chart: &mut Chart<'a, DB>, position: SeriesLabelPosition) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(err)
}

const SERIES: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Speedup over one GPU against problem size: kernels with their dependency resolution,
/// the runtime's share (the breakdown's four parts) and the whole program (wall time, the
/// program's own host code included), for each GPU count.
pub fn speedup(points: &[Point], caption: &str, path: &Path) -> Result<(), String> {
    let programs = by_program(points);
    let height = 420 * programs.len().div_ceil(2) as u32 + 40;
    let root = BitMapBackend::new(path, (1400, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(&format!("Speedup over one GPU — {caption}"), (FONT, 22)).map_err(err)?;
    for ((bench, pts), area) in programs.iter().zip(panels(&root, programs.len())) {
        let sizes = sizes(pts);
        let counts = gpu_counts(pts);
        let at = |size: u64, gpus: u32| pts.iter().find(|p| p.size == size && p.gpus == gpus).copied();
        let mut lines: Vec<(String, Vec<(f64, f64)>)> = Vec::new();
        for &g in counts.iter().filter(|&&g| g > 1) {
            let kinds: [Figure; 3] = [
                ("kernels + dependencies", |p| p.kernels_and_dependencies),
                ("runtime's share", Point::runtime_share),
                ("whole program", |p| p.wall),
            ];
            for (what, f) in kinds {
                let series: Vec<(f64, f64)> = sizes
                    .iter()
                    .enumerate()
                    .filter_map(|(i, &s)| Some((i as f64, f(at(s, 1)?) / f(at(s, g)?))))
                    .filter(|(_, y)| y.is_finite())
                    .collect();
                if !series.is_empty() {
                    lines.push((format!("{what}, {g} GPUs"), series));
                }
            }
        }
        let top = counts.iter().copied().max().unwrap_or(1) as f64;
        let ymax = lines.iter().flat_map(|(_, s)| s.iter().map(|p| p.1)).fold(top, f64::max) * 1.15;
        let mut chart = sized_chart(&area, bench, &sizes, ymax, "speedup")?;
        for &g in counts.iter().filter(|&&g| g > 1) {
            let ideal = [(-0.5, g as f64), (sizes.len() as f64 - 0.5, g as f64)];
            chart.draw_series(LineSeries::new(ideal, BLACK.mix(0.3))).map_err(err)?;
        }
        for (k, (label, series)) in lines.iter().enumerate() {
            let color = SERIES[k % SERIES.len()];
            chart
                .draw_series(LineSeries::new(series.iter().copied(), color.stroke_width(2)))
                .map_err(err)?
                .label(label.as_str())
                .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color.stroke_width(2)));
            chart.draw_series(series.iter().map(|&p| Circle::new(p, 4, color.filled()))).map_err(err)?;
        }
        legend(&mut chart, SeriesLabelPosition::LowerRight)?;
    }
    root.present().map_err(err)
}

/// The runtime breakdown of every configuration, as stacked bars relative to the one-GPU
/// total of the same size (100%): host to device, kernels and dependency resolution,
/// device to host, runtime overhead.
pub fn breakdown(points: &[Point], caption: &str, path: &Path) -> Result<(), String> {
    let programs = by_program(points);
    let height = 420 * programs.len().div_ceil(2) as u32 + 40;
    let root = BitMapBackend::new(path, (1400, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let root = root.titled(&format!("Runtime breakdown, % of the 1-GPU total — {caption}"), (FONT, 22)).map_err(err)?;
    let parts: [Figure; 4] = [
        ("host to device", |p| p.host_to_device),
        ("kernels + dependency resolution", |p| p.kernels_and_dependencies),
        ("device to host", |p| p.device_to_host),
        ("runtime overhead", |p| p.overhead),
    ];
    let total = |p: &Point| parts.iter().map(|(_, f)| f(p)).sum::<f64>();
    for ((bench, pts), area) in programs.iter().zip(panels(&root, programs.len())) {
        let sizes = sizes(pts);
        let counts = gpu_counts(pts);
        let width = 0.8 / counts.len() as f64;
        let mut bars = Vec::new();
        for (i, &s) in sizes.iter().enumerate() {
            let Some(one) = pts.iter().find(|p| p.size == s && p.gpus == counts[0]) else { continue };
            let base = total(one);
            for (j, &g) in counts.iter().enumerate() {
                let Some(p) = pts.iter().find(|p| p.size == s && p.gpus == g) else { continue };
                let x0 = i as f64 - 0.4 + j as f64 * width;
                bars.push((x0, g, parts.map(|(_, f)| 100.0 * f(p) / base)));
            }
        }
        let ymax = bars.iter().map(|(_, _, v)| v.iter().sum::<f64>()).fold(100.0, f64::max) * 1.6;
        let title =
            format!("{bench} (bars: {} GPUs)", counts.iter().map(u32::to_string).collect::<Vec<_>>().join(", "));
        let mut chart = sized_chart(&area, &title, &sizes, ymax, "% of the 1-GPU total")?;
        for (k, (label, _)) in parts.iter().enumerate() {
            let color = SERIES[k];
            let rects = bars.iter().map(|(x0, _, v)| {
                let below: f64 = v[..k].iter().sum();
                Rectangle::new([(*x0, below), (*x0 + width * 0.9, below + v[k])], color.filled())
            });
            chart
                .draw_series(rects)
                .map_err(err)?
                .label(*label)
                .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
        }
        legend(&mut chart, SeriesLabelPosition::UpperRight)?;
    }
    root.present().map_err(err)
}

/// Per program, each configuration's time relative to plain clang's build on one GPU
/// (1.0), as horizontal bars, with the 5% band the CUDA issue allows.
pub fn against_clang(rows: &[crate::baseline::Row], caption: &str, path: &Path) -> Result<(), String> {
    let against = Against {
        baseline: "clang",
        configs: &["nvcc", "hpvm:1"],
        title: "One GPU, time / plain clang's",
        x_desc: "time relative to clang++-19 -x cuda with NVIDIA's libcudart (1.0); lower is faster",
        room: 1.1,
        legend: SeriesLabelPosition::LowerRight,
    };
    bars_against(rows, &against, caption, path)
}

/// The launch-bound programs on one GPU: plain clang's build, and ours by default and without
/// CUDA graphs, each relative to nvcc's build (`launch-bound.png`).
pub fn against_nvcc(rows: &[crate::baseline::Row], caption: &str, path: &Path) -> Result<(), String> {
    let against = Against {
        baseline: "nvcc",
        configs: &["clang", "hpvm:1", "hpvm:1 graphs off"],
        title: "Launch-bound programs, one GPU, time / nvcc's",
        x_desc: "time relative to nvcc's build (1.0; red: 1.05); lower is faster",
        // Room on the right for the legend beside the longest bar.
        room: 1.6,
        legend: SeriesLabelPosition::UpperRight,
    };
    bars_against(rows, &against, caption, path)
}

/// What a bar chart of times relative to a baseline build shows.
struct Against<'a> {
    baseline: &'a str,
    /// The configurations drawn, one bar each per program.
    configs: &'a [&'a str],
    title: &'a str,
    x_desc: &'a str,
    /// The x axis's end past the longest bar, as a factor.
    room: f64,
    legend: SeriesLabelPosition,
}

fn bars_against(rows: &[crate::baseline::Row], a: &Against<'_>, caption: &str, path: &Path) -> Result<(), String> {
    let configs = a.configs;
    let height = 60 * rows.len() as u32 + 160;
    let root = BitMapBackend::new(path, (1100, height)).into_drawing_area();
    root.fill(&WHITE).map_err(err)?;
    let ratios: Vec<Vec<Option<f64>>> =
        rows.iter().map(|r| configs.iter().map(|c| Some(r.time(c)? / r.time(a.baseline)?)).collect()).collect();
    let xmax = ratios.iter().flatten().flatten().fold(1.2f64, |a, &b| a.max(b)) * a.room;
    let n = rows.len();
    let labels: Vec<String> = rows.iter().map(|r| r.program.clone()).collect();
    let mut chart = ChartBuilder::on(&root)
        .caption(format!("{} — {caption}", a.title), (FONT, 20))
        .margin(14)
        .x_label_area_size(40)
        .y_label_area_size(300)
        .build_cartesian_2d(0f64..xmax, -0.5f64..(n as f64 - 0.5))
        .map_err(err)?;
    chart
        .configure_mesh()
        .y_labels(n)
        .y_label_formatter(&|y| {
            let i = y.round();
            if (y - i).abs() > 1e-6 || i < 0.0 || i as usize >= n {
                return String::new();
            }
            labels[n - 1 - i as usize].clone()
        })
        .x_desc(a.x_desc)
        .label_style((FONT, 14))
        .draw()
        .map_err(err)?;
    let band = 0.8 / configs.len() as f64;
    for (k, config) in configs.iter().enumerate() {
        let color = SERIES[k];
        let bars = ratios.iter().enumerate().filter_map(|(i, r)| {
            let y = (n - 1 - i) as f64 - 0.4 + k as f64 * band;
            r[k].map(|x| Rectangle::new([(0.0, y), (x, y + band * 0.9)], color.filled()))
        });
        chart
            .draw_series(bars)
            .map_err(err)?
            .label(match *config {
                "clang" => "plain clang-19 (libcudart)",
                "hpvm:1" => "hpvm-mgpu, 1 GPU",
                "hpvm:1 graphs off" => "hpvm-mgpu, 1 GPU, HPVM_MGPU_GRAPHS=off",
                other => other,
            })
            .legend(move |(x, y)| Rectangle::new([(x, y - 5), (x + 12, y + 5)], color.filled()));
    }
    for (x, style) in [(1.0, BLACK.stroke_width(2)), (1.05, RED.stroke_width(1))] {
        chart.draw_series(LineSeries::new([(x, -0.5), (x, n as f64 - 0.5)], style)).map_err(err)?;
    }
    chart
        .configure_series_labels()
        .position(a.legend.clone())
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK)
        .label_font((FONT, 13))
        .draw()
        .map_err(err)?;
    root.present().map_err(err)
}
