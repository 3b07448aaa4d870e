//! The SVG charts (plotters' SVG backend: no fonts or system libraries
//! needed; text is left to the viewer's sans-serif font).

use super::model::{Axis, Point, Sweep};
use crate::measure::spread::Spread;
use crate::report::fmt::size_label;
use plotters::coord::ranged1d::{AsRangedCoord, KeyPointHint, NoDefaultFormatting, Ranged, ValueFormatter};
use plotters::coord::Shift;
use plotters::element::DashedPathElement;
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

/// Height of the title block: title, workload line, legend, key to the lines.
const HEADER: u32 = 116;

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

/// A figure at one x: median, min, max over the runs (all finite, > 0).
#[derive(Clone, Copy)]
struct Val<X> {
    x: X,
    median: f64,
    min: f64,
    max: f64,
}

/// One line of a panel: a path's measured figure (solid), or its modelled
/// ceiling (dashed).
struct Series {
    color: RGBColor,
    dashed: bool,
    points: Vec<Val<usize>>,
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

/// Stroke widths, which also tell the lines apart in the SVG: measured
/// lines, modelled (dashed) lines, min-max bars.
const MEASURED_W: u32 = 2;
const MODELLED_W: u32 = 3;
const BAR_W: u32 = 1;

/// The title block: the title (saying SIMULATED or EMULATED when it is), a
/// line of workload facts, the legend (one coloured swatch and name per
/// path) and under it the key to the line styles, all above the plots so
/// they never hide a point. Returns the area below.
fn header<'a>(root: &Area<'a>, title: &str, sub: &str, paths: &[String], key: &[(bool, String)]) -> Result<Area<'a>, String> {
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
    // Key row: a black sample of each line style and what it shows.
    let small = ("sans-serif", 15).into_font().color(&RGBColor(40, 40, 40)).pos(Pos::new(HPos::Left, VPos::Center));
    let widths: Vec<i32> = key.iter().map(|(_, t)| 40 + 7 * t.chars().count() as i32 + 30).collect();
    let mut x = (w - widths.iter().sum::<i32>()).max(0) / 2;
    let y = 102;
    for ((dashed, text), width) in key.iter().zip(&widths) {
        if *dashed {
            top.draw(&DashedPathElement::new(vec![(x, y), (x + 32, y)], 7, 4, BLACK.stroke_width(MODELLED_W))).map_err(err)?;
        } else {
            top.draw(&PathElement::new(vec![(x, y), (x + 32, y)], BLACK.stroke_width(MEASURED_W))).map_err(err)?;
        }
        top.draw(&Text::new(text.clone(), (x + 40, y), small.clone())).map_err(err)?;
        x += width;
    }
    Ok(rest)
}

/// The key of a chart of measured figures: what the line and bars show.
fn measured_key(sw: &Sweep, what: &str) -> (bool, String) {
    if sw.repeat > 1 {
        (false, format!("measured{what}: median of {} runs, bars min-max", sw.repeat))
    } else {
        (false, format!("measured{what}, one run per point"))
    }
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
        let line = s.points.iter().map(|v| (v.x, v.median));
        if s.dashed {
            chart.draw_series(DashedLineSeries::new(line, 9, 6, s.color.stroke_width(MODELLED_W))).map_err(err)?;
            chart.draw_series(s.points.iter().map(|v| Circle::new((v.x, v.median), 5, s.color.stroke_width(2)))).map_err(err)?;
        } else {
            chart.draw_series(LineSeries::new(line, s.color.stroke_width(MEASURED_W))).map_err(err)?;
            chart.draw_series(s.points.iter().map(|v| Circle::new((v.x, v.median), 4, s.color.filled()))).map_err(err)?;
        }
        // Min-max bars with caps, where the runs differ.
        let bars: Vec<&Val<usize>> = s.points.iter().filter(|v| v.max > v.min).collect();
        let style = s.color.stroke_width(BAR_W);
        chart.draw_series(bars.iter().map(|v| PathElement::new(vec![(v.x, v.min), (v.x, v.max)], style))).map_err(err)?;
        for end in [|v: &Val<usize>| v.min, |v: &Val<usize>| v.max] {
            chart.draw_series(bars.iter().map(|v| EmptyElement::at((v.x, end(v))) + PathElement::new(vec![(-5, 0), (5, 0)], style))).map_err(err)?;
        }
    }
    if !any {
        no_data(area)?;
    }
    Ok(())
}

fn no_data(area: &Area<'_>) -> Result<(), String> {
    let (w, h) = area.dim_in_pixel();
    area.draw(&Text::new(
        "no data: every point of this chart failed or was skipped (see sweep.json)",
        (w as i32 / 2, h as i32 / 2),
        ("sans-serif", 16).into_font().color(&RED).pos(Pos::new(HPos::Center, VPos::Center)),
    ))
    .map_err(err)
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

/// A spread as a plotted value, scaled by `k`; None unless finite and > 0.
fn val<X>(x: X, s: Option<Spread>, k: f64) -> Option<Val<X>> {
    let s = s?;
    let v = Val { x, median: s.median * k, min: s.min * k, max: s.max * k };
    [v.median, v.min, v.max].iter().all(|y| y.is_finite() && *y > 0.0).then_some(v)
}

/// The colour of the `i`th path.
fn color(i: usize) -> RGBColor {
    PALETTE[i % PALETTE.len()]
}

/// One series per path (in path order, so colours match the legend):
/// the path's points of the sweep that ran, `value` of each.
fn series(sw: &Sweep, axis: Axis, xs: &[u64], value: impl Fn(&Point) -> Option<Spread>) -> Vec<Series> {
    sw.paths
        .iter()
        .enumerate()
        .map(|(i, path)| {
            let mut points: Vec<Val<usize>> = sw
                .points
                .iter()
                .filter(|p| &p.path == path && p.sweeps.contains(&axis) && p.ok())
                .filter_map(|p| val(xs.iter().position(|&v| v == x_of(p, axis))?, value(p), 1.0))
                .collect();
            points.sort_by_key(|p| p.x);
            Series { color: color(i), dashed: false, points }
        })
        .collect()
}

/// "SIMULATED", "EMULATED", both, or nothing: what made the figures.
fn made_by(sw: &Sweep) -> Option<&'static str> {
    match (sw.simulated.is_some(), sw.emulated.is_some()) {
        (true, true) => Some("SIMULATED and EMULATED"),
        (true, false) => Some("SIMULATED"),
        (false, true) => Some("EMULATED"),
        (false, false) => None,
    }
}

fn title(base: &str, sw: &Sweep) -> String {
    match made_by(sw) {
        Some(m) => format!("{base} ({m})"),
        None => base.to_string(),
    }
}

/// The line under the title: the sweep's fixed settings, the pattern,
/// the time per run and, when simulated or emulated, what.
fn subtitle(sw: &Sweep, axis: Axis) -> String {
    let fixed = match sw.points.iter().find(|p| p.sweeps.contains(&axis)) {
        Some(p) if axis == Axis::Bs => format!("iodepth {}, {} job{}", p.iodepth, p.numjobs, if p.numjobs == 1 { "" } else { "s" }),
        Some(p) => format!("bs {}, {} job{}", bs_label(p.bs), p.numjobs, if p.numjobs == 1 { "" } else { "s" }),
        None => String::new(),
    };
    let runs = if sw.repeat > 1 { format!(" x {} runs", sw.repeat) } else { String::new() };
    let mut s = format!("{}, {fixed}, {}s per run{runs}", sw.workload["rw"].as_str().unwrap_or("?"), sw.workload["runtime_s"]);
    if let Some(bdf) = sw.topology.as_ref().and_then(|t| t.bdf.clone()) {
        s.push_str(&format!(", device {bdf}"));
    }
    let what = match (sw.simulated.is_some(), sw.emulated.is_some()) {
        (true, true) => Some("SIMULATED (in-process simulated controller) and EMULATED (QEMU's NVMe model)"),
        (true, false) => Some("SIMULATED (in-process simulated controller)"),
        (false, true) => Some("EMULATED (QEMU's NVMe model)"),
        (false, false) => None,
    };
    if let Some(w) = what {
        s.push_str(&format!(". {w}: compare paths, not absolute speeds"));
    }
    s
}

/// A y axis for these series: linear from 0, or logarithmic when the
/// values span more than 30x (a modelled ceiling far above the measured
/// figures would flatten them on a linear axis).
fn y_axis(series: &[Series]) -> YAxis {
    let (lo, hi) = series.iter().flat_map(|s| s.points.iter().flat_map(|p| [p.min, p.max])).fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if hi <= 0.0 {
        YAxis::Linear(1.0)
    } else if hi / lo > 30.0 {
        YAxis::Log(lo / 1.5, hi * 1.5)
    } else {
        YAxis::Linear(hi * 1.1)
    }
}

/// IOPS per busy core vs queue depth, one solid line per path (measured);
/// polled paths add their modelled ceiling as a dashed line of the same
/// colour, since their measured figure is bounded by the device and the
/// ceiling is what moves when the path gets cheaper.
pub fn iops_per_core(sw: &Sweep, file: &Path) -> Result<(), String> {
    let xs = slots(sw, Axis::Iodepth);
    let mut all = series(sw, Axis::Iodepth, &xs, |p| p.measured_iops_per_busy_core);
    let mut modelled = series(sw, Axis::Iodepth, &xs, |p| p.modelled_ceiling_iops_per_core);
    for (s, path) in modelled.iter_mut().zip(&sw.paths) {
        s.dashed = true;
        if !sw.polled_paths.contains(path) {
            s.points.clear();
        }
    }
    all.extend(modelled);
    let root = SVGBackend::new(file, (1000, 660)).into_drawing_area();
    let mut key = vec![measured_key(sw, " IOPS per busy core")];
    if !sw.polled_paths.is_empty() {
        key.push((true, "modelled ceiling (polled paths): busy less empty polls".into()));
    }
    let area = header(&root, &title("IOPS per core vs queue depth", sw), &subtitle(sw, Axis::Iodepth), &sw.paths, &key)?;
    let y = y_axis(&all);
    let panel = Panel {
        caption: None,
        x_desc: "iodepth (I/Os in flight per thread)".into(),
        y_desc: format!("IOPS per core{}", if matches!(y, YAxis::Log(..)) { " (log scale)" } else { "" }),
        x: xs.iter().map(u64::to_string).collect(),
        y_label: count_label,
        series: all,
    };
    draw(&area, &panel, y)?;
    root.present().map_err(err)
}

/// p50 / p99 / p99.9 latency vs queue depth: three panels side by side
/// on one log scale (so they compare across panels), one line per path.
pub fn latency(sw: &Sweep, file: &Path) -> Result<(), String> {
    let xs = slots(sw, Axis::Iodepth);
    type Pick = fn(&Point) -> Option<Spread>;
    let pcts: [(&str, Pick); 3] = [("p50", |p| p.measured_lat_p50_ns), ("p99", |p| p.measured_lat_p99_ns), ("p99.9", |p| p.measured_lat_p999_ns)];
    let per: Vec<Vec<Series>> = pcts.iter().map(|(_, pick)| series(sw, Axis::Iodepth, &xs, |p| pick(p).map(|s| s.scaled(1000.0)))).collect();
    let (lo, hi) = per.iter().flatten().flat_map(|s| s.points.iter().flat_map(|p| [p.min, p.max])).fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (lo, hi) = if hi > 0.0 { (lo / 1.5, hi * 1.5) } else { (1.0, 1000.0) };
    let root = SVGBackend::new(file, (1500, 620)).into_drawing_area();
    let area = header(&root, &title("Latency percentiles vs queue depth", sw), &subtitle(sw, Axis::Iodepth), &sw.paths, &[measured_key(sw, "")])?;
    for (i, (cell, series)) in area.split_evenly((1, 3)).iter().zip(per).enumerate() {
        let panel = Panel {
            caption: Some(format!("{} latency, measured", pcts[i].0)),
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
    let series = series(sw, Axis::Bs, &xs, |p| p.measured_mib_per_s);
    let root = SVGBackend::new(file, (1000, 660)).into_drawing_area();
    let area = header(&root, &title("Throughput vs block size", sw), &subtitle(sw, Axis::Bs), &sw.paths, &[measured_key(sw, " MiB/s")])?;
    let max = series.iter().flat_map(|s| s.points.iter().map(|p| p.max)).fold(0.0, f64::max);
    let panel = Panel {
        caption: None,
        x_desc: "block size".into(),
        y_desc: "MiB/s".into(),
        x: xs.iter().map(|&b| bs_label(b)).collect(),
        y_label: plain_label,
        series,
    };
    draw(&area, &panel, YAxis::Linear(if max > 0.0 { max * 1.1 } else { 1.0 }))?;
    root.present().map_err(err)
}

/// One path's latency-throughput curve: (IOPS, p99 µs) per queue depth.
struct Curve {
    color: RGBColor,
    /// (iodepth, IOPS, p99 µs), by iodepth.
    points: Vec<(usize, Val<f64>, Val<f64>)>,
}

/// p99 latency against IOPS, one curve per path and one point per queue
/// depth of the iodepth sweep (labelled with it): where a path's latency
/// turns up as it is pushed towards its throughput limit. Bars: min-max
/// of both figures over the runs.
pub fn latency_vs_iops(sw: &Sweep, file: &Path) -> Result<(), String> {
    let curves: Vec<Curve> = sw
        .paths
        .iter()
        .enumerate()
        .map(|(i, path)| {
            let mut points: Vec<(usize, Val<f64>, Val<f64>)> = sw
                .points
                .iter()
                .filter(|p| &p.path == path && p.sweeps.contains(&Axis::Iodepth) && p.ok())
                .filter_map(|p| Some((p.iodepth, val(0.0, p.measured_iops, 1.0)?, val(0.0, p.measured_lat_p99_ns, 1e-3)?)))
                .collect();
            points.sort_by_key(|p| p.0);
            Curve { color: color(i), points }
        })
        .collect();
    let all = || curves.iter().flat_map(|c| c.points.iter());
    let x_hi = all().map(|p| p.1.max).fold(0.0, f64::max);
    let (y_lo, y_hi) = all().flat_map(|p| [p.2.min, p.2.max]).fold((f64::MAX, 0.0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let (x_hi, y_lo, y_hi) = if x_hi > 0.0 { (x_hi * 1.1, y_lo / 1.5, y_hi * 1.5) } else { (1.0, 1.0, 1000.0) };
    let root = SVGBackend::new(file, (1000, 660)).into_drawing_area();
    let (key, what) = measured_key(sw, "");
    let area = header(
        &root,
        &title("p99 latency vs IOPS (latency-throughput curve)", sw),
        &subtitle(sw, Axis::Iodepth),
        &sw.paths,
        &[(key, format!("{what}; a point per queue depth (QD)"))],
    )?;
    // Log IOPS when the paths are more than 30x apart, as a slow and a fast
    // path are: on a linear axis the slow one's curve would be a dot.
    let x_lo = all().map(|p| p.1.min).fold(f64::MAX, f64::min);
    if x_lo > 0.0 && x_hi / x_lo > 30.0 {
        draw_curves(&area, &curves, (x_lo / 1.5..x_hi * 1.5).log_scale(), "IOPS, measured (log scale)", (y_lo, y_hi))?;
    } else {
        draw_curves(&area, &curves, 0.0..x_hi, "IOPS, measured", (y_lo, y_hi))?;
    }
    root.present().map_err(err)
}

fn draw_curves<X>(area: &Area<'_>, curves: &[Curve], x: X, x_desc: &str, (y_lo, y_hi): (f64, f64)) -> Result<(), String>
where
    X: AsRangedCoord<Value = f64>,
    X::CoordDescType: ValueFormatter<f64>,
{
    let mut chart = ChartBuilder::on(area)
        .margin(14)
        .x_label_area_size(52)
        .y_label_area_size(80)
        .build_cartesian_2d(x, (y_lo..y_hi).log_scale())
        .map_err(err)?;
    chart
        .configure_mesh()
        .x_desc(x_desc)
        .y_desc("p99 submit-to-reap latency, measured (log scale)")
        .x_label_formatter(&|v| count_label(*v))
        .y_label_formatter(&|v| us_label(*v))
        .label_style(("sans-serif", 15))
        .axis_desc_style(("sans-serif", 16))
        .bold_line_style(RGBColor(215, 215, 215))
        .light_line_style(RGBColor(242, 242, 242))
        .max_light_lines(4)
        .draw()
        .map_err(err)?;
    let label = ("sans-serif", 13).into_font().color(&RGBColor(60, 60, 60)).pos(Pos::new(HPos::Left, VPos::Bottom));
    for c in curves.iter().filter(|c| !c.points.is_empty()) {
        chart.draw_series(LineSeries::new(c.points.iter().map(|(_, x, y)| (x.median, y.median)), c.color.stroke_width(MEASURED_W))).map_err(err)?;
        chart.draw_series(c.points.iter().map(|(_, x, y)| Circle::new((x.median, y.median), 4, c.color.filled()))).map_err(err)?;
        chart
            .draw_series(c.points.iter().map(|(qd, x, y)| EmptyElement::at((x.median, y.median)) + Text::new(format!("QD {qd}"), (6, -5), label.clone())))
            .map_err(err)?;
        let style = c.color.stroke_width(BAR_W);
        let v: Vec<_> = c.points.iter().filter(|(_, _, y)| y.max > y.min).collect();
        chart.draw_series(v.iter().map(|(_, x, y)| PathElement::new(vec![(x.median, y.min), (x.median, y.max)], style))).map_err(err)?;
        let h: Vec<_> = c.points.iter().filter(|(_, x, _)| x.max > x.min).collect();
        chart.draw_series(h.iter().map(|(_, x, y)| PathElement::new(vec![(x.min, y.median), (x.max, y.median)], style))).map_err(err)?;
    }
    if curves.iter().all(|c| c.points.is_empty()) {
        no_data(area)?;
    }
    Ok(())
}
