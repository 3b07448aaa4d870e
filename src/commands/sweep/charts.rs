//! The SVG charts (plotters' SVG backend: no fonts or system libraries
//! needed; text is left to the viewer's sans-serif font).

use super::model::{Axis, Point, Sweep};
use crate::report::fmt::size_label;
use plotters::coord::ranged1d::{AsRangedCoord, KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::ops::Range;
use std::path::Path;

type Area<'a> = DrawingArea<SVGBackend<'a>, Shift>;

/// Colours of the paths, in path order (Tableau 10: colours that tell apart).
const PALETTE: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
    RGBColor(23, 190, 207),
];

/// Height of the title block: title, workload line, legend.
const HEADER: u32 = 96;

/// A categorical x axis: one evenly spaced slot per label, values are
/// slot indices, each drawn at the centre of its slot. Queue depths and
/// block sizes are mostly powers of two, so equal spacing reads like a
/// log2 axis, and the labels say the real values when they are not.
#[derive(Clone)]
struct Categories(Vec<String>);

impl Ranged for Categories {
    type FormatOption = NoDefaultFormatting;
    type ValueType = usize;
    fn map(&self, v: &usize, limit: (i32, i32)) -> i32 {
        let slot = (limit.1 - limit.0) as f64 / self.0.len().max(1) as f64;
        (limit.0 as f64 + slot * (*v as f64 + 0.5)).round() as i32
    }
    fn key_points<H: KeyPointHint>(&self, _hint: H) -> Vec<usize> {
        (0..self.0.len()).collect()
    }
    fn range(&self) -> Range<usize> {
        0..self.0.len()
    }
}

impl ValueFormatter<usize> for Categories {
    fn format_ext(&self, v: &usize) -> String {
        self.0.get(*v).cloned().unwrap_or_default()
    }
}

/// One line of a panel: a path.
struct Series {
    color: RGBColor,
    /// (slot, value); values are finite and > 0.
    points: Vec<(usize, f64)>,
}

/// One plotting area.
struct Panel {
    caption: Option<String>,
    x_desc: String,
    y_desc: String,
    x: Vec<String>,
    y_label: fn(f64) -> String,
    series: Vec<Series>,
}

/// The y axis of a panel.
enum YAxis {
    /// 0 to this.
    Linear(f64),
    /// Logarithmic between these (both > 0).
    Log(f64, f64),
}

/// 1234567 -> "1.2M", for axis labels of counts.
fn count_label(v: f64) -> String {
    let (x, unit) = match v.abs() {
        a if a >= 1e9 => (v / 1e9, "G"),
        a if a >= 1e6 => (v / 1e6, "M"),
        a if a >= 1e3 => (v / 1e3, "k"),
        _ => (v, ""),
    };
    if x.fract().abs() < 1e-9 || x.abs() >= 10.0 {
        format!("{x:.0}{unit}")
    } else {
        format!("{x:.1}{unit}")
    }
}

/// Microseconds for a latency axis: "5 µs", "1 ms".
fn us_label(v: f64) -> String {
    let trim = |x: f64| if x.fract().abs() < 1e-9 || x >= 10.0 { format!("{x:.0}") } else { format!("{x:.1}") };
    if v >= 1e6 {
        format!("{} s", trim(v / 1e6))
    } else if v >= 1e3 {
        format!("{} ms", trim(v / 1e3))
    } else {
        format!("{} µs", trim(v))
    }
}

/// Plain number: MiB/s.
fn plain_label(v: f64) -> String {
    format!("{v:.0}")
}

/// "4k" -> "4 KiB" for the block size axis.
fn bs_label(b: u64) -> String {
    let s = size_label(b);
    match s.strip_suffix('k') {
        Some(n) => format!("{n} KiB"),
        None => match s.strip_suffix('m') {
            Some(n) => format!("{n} MiB"),
            None => format!("{s} B"),
        },
    }
}

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// The title block: the title (saying EMULATED when it is), a line of
/// workload facts, and the legend: one coloured swatch and name per
/// path, above the plots so it never hides a point. Returns the area below.
fn header<'a>(root: &Area<'a>, title: &str, sub: &str, paths: &[String]) -> Result<Area<'a>, String> {
    root.fill(&WHITE).map_err(err)?;
    let (top, rest) = root.split_vertically(HEADER);
    let w = top.dim_in_pixel().0 as i32;
    let center = Pos::new(HPos::Center, VPos::Center);
    top.draw(&Text::new(title.to_string(), (w / 2, 18), ("sans-serif", 24).into_font().style(FontStyle::Bold).color(&BLACK).pos(center)))
        .map_err(err)?;
    top.draw(&Text::new(sub.to_string(), (w / 2, 44), ("sans-serif", 15).into_font().color(&RGBColor(80, 80, 80)).pos(center)))
        .map_err(err)?;
    // Legend row, centred; widths estimated from the name lengths.
    let font = ("sans-serif", 17).into_font().color(&BLACK).pos(Pos::new(HPos::Left, VPos::Center));
    let widths: Vec<i32> = paths.iter().map(|p| 28 + 9 * p.chars().count() as i32 + 28).collect();
    let mut x = (w - widths.iter().sum::<i32>()).max(0) / 2;
    let y = 74;
    for (i, (p, width)) in paths.iter().zip(&widths).enumerate() {
        let c = PALETTE[i % PALETTE.len()];
        top.draw(&Rectangle::new([(x, y - 3), (x + 22, y + 3)], c.filled())).map_err(err)?;
        top.draw(&Text::new(p.clone(), (x + 28, y), font.clone())).map_err(err)?;
        x += width;
    }
    Ok(rest)
}

fn draw_panel<Y>(area: &Area<'_>, p: &Panel, y: Y) -> Result<(), String>
where
    Y: AsRangedCoord<Value = f64>,
    Y::CoordDescType: ValueFormatter<f64>,
{
    let mut b = ChartBuilder::on(area);
    b.margin(14).x_label_area_size(52).y_label_area_size(80);
    if let Some(c) = &p.caption {
        b.caption(c, ("sans-serif", 20));
    }
    let mut chart = b.build_cartesian_2d(Categories(p.x.clone()), y).map_err(err)?;
    let fmt = p.y_label;
    chart
        .configure_mesh()
        .x_desc(p.x_desc.as_str())
        .y_desc(p.y_desc.as_str())
        .y_label_formatter(&|v| fmt(*v))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(242, 242, 242))
        .max_light_lines(4)
        .draw()
        .map_err(err)?;
    let mut any = false;
    for s in p.series.iter().filter(|s| !s.points.is_empty()) {
        any = true;
        chart.draw_series(LineSeries::new(s.points.iter().copied(), s.color.stroke_width(2))).map_err(err)?;
        chart.draw_series(s.points.iter().map(|&pt| Circle::new(pt, 4, s.color.filled()))).map_err(err)?;
    }
    if !any {
        let (w, h) = area.dim_in_pixel();
        area.draw(&Text::new(
            "no data: every point of this chart failed or was skipped (see sweep.json)",
            (w as i32 / 2, h as i32 / 2),
            ("sans-serif", 16).into_font().color(&RED).pos(Pos::new(HPos::Center, VPos::Center)),
        ))
        .map_err(err)?;
    }
    Ok(())
}

fn draw(area: &Area<'_>, p: &Panel, y: YAxis) -> Result<(), String> {
    match y {
        YAxis::Linear(max) => draw_panel(area, p, 0.0..max),
        YAxis::Log(lo, hi) => draw_panel(area, p, (lo..hi).log_scale()),
    }
}

/// The swept value of a point on an axis.
fn x_of(p: &Point, axis: Axis) -> u64 {
    match axis {
        Axis::Bs => p.bs,
        Axis::Iodepth => p.iodepth as u64,
        Axis::Numjobs => p.numjobs as u64,
    }
}

/// The swept values of an axis over all points, ascending.
fn slots(sw: &Sweep, axis: Axis) -> Vec<u64> {
    let mut v: Vec<u64> = sw.points.iter().filter(|p| p.sweeps.contains(&axis)).map(|p| x_of(p, axis)).collect();
    v.sort_unstable();
    v.dedup();
    v
}

/// One series per path (in path order, so colours match the legend):
/// the path's points of the sweep that ran, `value` of each.
fn series(sw: &Sweep, axis: Axis, xs: &[u64], value: impl Fn(&Point) -> Option<f64>) -> Vec<Series> {
    sw.paths
        .iter()
        .enumerate()
        .map(|(i, path)| {
            let mut points: Vec<(usize, f64)> = sw
                .points
                .iter()
                .filter(|p| &p.path == path && p.sweeps.contains(&axis) && p.ok())
                .filter_map(|p| Some((xs.iter().position(|&v| v == x_of(p, axis))?, value(p).filter(|v| v.is_finite() && *v > 0.0)?)))
                .collect();
            points.sort_by_key(|p| p.0);
            Series { color: PALETTE[i % PALETTE.len()], points }
        })
        .collect()
}

fn title(base: &str, sw: &Sweep) -> String {
    if sw.emulated.is_some() {
        format!("{base} (EMULATED)")
    } else {
        base.to_string()
    }
}

/// The line under the title: the sweep's fixed settings, the pattern,
/// the time per point and, when emulated, what.
fn subtitle(sw: &Sweep, axis: Axis) -> String {
    let fixed = match sw.points.iter().find(|p| p.sweeps.contains(&axis)) {
        Some(p) if axis == Axis::Bs => format!("iodepth {}, {} job{}", p.iodepth, p.numjobs, if p.numjobs == 1 { "" } else { "s" }),
        Some(p) => format!("bs {}, {} job{}", bs_label(p.bs), p.numjobs, if p.numjobs == 1 { "" } else { "s" }),
        None => String::new(),
    };
    let mut s = format!("{}, {fixed}, {}s per point", sw.workload["rw"].as_str().unwrap_or("?"), sw.workload["runtime_s"]);
    if let Some(bdf) = sw.topology.as_ref().and_then(|t| t.bdf.clone()) {
        s.push_str(&format!(", device {bdf}"));
    }
    if sw.emulated.is_some() {
        let sim = sw.paths.iter().any(|p| p.starts_with("sim"));
        let qemu = sw.topology.as_ref().is_some_and(|t| t.emulated.is_some());
        let what = match (sim, qemu) {
            (true, true) => "simulated controller and QEMU's NVMe model",
            (true, false) => "in-process simulated controller",
            _ => "QEMU's NVMe model",
        };
        s.push_str(&format!(". EMULATED ({what}): compare paths, not absolute speeds"));
    }
    s
}

fn linear_max(series: &[Series]) -> f64 {
    let max = series.iter().flat_map(|s| s.points.iter().map(|p| p.1)).fold(0.0, f64::max);
    if max > 0.0 {
        max * 1.1
    } else {
        1.0
    }
}

/// IOPS per busy core vs queue depth, one line per path.
pub fn iops_per_core(sw: &Sweep, file: &Path) -> Result<(), String> {
    let xs = slots(sw, Axis::Iodepth);
    let series = series(sw, Axis::Iodepth, &xs, |p| p.iops_per_busy_core);
    let root = SVGBackend::new(file, (1000, 640)).into_drawing_area();
    let area = header(&root, &title("IOPS per busy core vs queue depth", sw), &subtitle(sw, Axis::Iodepth), &sw.paths)?;
    let max = linear_max(&series);
    let panel = Panel {
        caption: None,
        x_desc: "iodepth (I/Os in flight per thread)".into(),
        y_desc: "IOPS per busy core (system-wide CPU)".into(),
        x: xs.iter().map(u64::to_string).collect(),
        y_label: count_label,
        series,
    };
    draw(&area, &panel, YAxis::Linear(max))?;
    root.present().map_err(err)
}

/// p50 / p99 / p99.9 latency vs queue depth: three panels side by side
/// on one log scale (so they compare across panels), one line per path.
pub fn latency(sw: &Sweep, file: &Path) -> Result<(), String> {
    let xs = slots(sw, Axis::Iodepth);
    type Pick = fn(&Point) -> Option<u64>;
    let pcts: [(&str, Pick); 3] = [("p50", |p| p.lat_p50_ns), ("p99", |p| p.lat_p99_ns), ("p99.9", |p| p.lat_p999_ns)];
    let per: Vec<Vec<Series>> = pcts.iter().map(|(_, pick)| series(sw, Axis::Iodepth, &xs, |p| pick(p).map(|ns| ns as f64 / 1000.0))).collect();
    let (lo, hi) = per.iter().flatten().flat_map(|s| s.points.iter().map(|p| p.1)).fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if hi > 0.0 { (lo / 1.5, hi * 1.5) } else { (1.0, 1000.0) };
    let root = SVGBackend::new(file, (1500, 600)).into_drawing_area();
    let area = header(&root, &title("Latency percentiles vs queue depth", sw), &subtitle(sw, Axis::Iodepth), &sw.paths)?;
    for (i, (cell, series)) in area.split_evenly((1, 3)).iter().zip(per).enumerate() {
        let panel = Panel {
            caption: Some(format!("{} latency", pcts[i].0)),
            x_desc: "iodepth".into(),
            y_desc: "submit-to-reap latency (log scale)".into(),
            x: xs.iter().map(u64::to_string).collect(),
            y_label: us_label,
            series,
        };
        draw(cell, &panel, YAxis::Log(lo, hi))?;
    }
    root.present().map_err(err)
}

/// MiB/s vs block size at the largest queue depth, one line per path.
pub fn throughput(sw: &Sweep, file: &Path) -> Result<(), String> {
    let xs = slots(sw, Axis::Bs);
    let series = series(sw, Axis::Bs, &xs, |p| p.mib_per_s);
    let root = SVGBackend::new(file, (1000, 640)).into_drawing_area();
    let area = header(&root, &title("Throughput vs block size", sw), &subtitle(sw, Axis::Bs), &sw.paths)?;
    let max = linear_max(&series);
    let panel = Panel {
        caption: None,
        x_desc: "block size".into(),
        y_desc: "MiB/s".into(),
        x: xs.iter().map(|&b| bs_label(b)).collect(),
        y_label: plain_label,
        series,
    };
    draw(&area, &panel, YAxis::Linear(max))?;
    root.present().map_err(err)
}
