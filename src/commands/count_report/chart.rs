//! The stacked-bar chart of count-report: one bar per path, its
//! instructions per I/O stacked by layer (plotters' SVG backend, no fonts:
//! text is left to the viewer's sans-serif font).

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

/// What the chart says its figures are.
pub const MEASURED: &str = "measured, emulated (QEMU TCG instruction counts)";

/// One bar: a path and its parts (name, instructions per I/O).
#[derive(Clone, Debug)]
pub struct Bar {
    /// Row label.
    pub label: String,
    /// Parts in stacking order, bottom first.
    pub parts: Vec<(String, f64)>,
}

/// Tableau 20: a colour per part, fixed by the part's place in `names`.
const PALETTE: [RGBColor; 20] = [
    RGBColor(31, 119, 180),
    RGBColor(174, 199, 232),
    RGBColor(255, 127, 14),
    RGBColor(255, 187, 120),
    RGBColor(44, 160, 44),
    RGBColor(152, 223, 138),
    RGBColor(214, 39, 40),
    RGBColor(255, 152, 150),
    RGBColor(148, 103, 189),
    RGBColor(197, 176, 213),
    RGBColor(140, 86, 75),
    RGBColor(196, 156, 148),
    RGBColor(227, 119, 194),
    RGBColor(247, 182, 210),
    RGBColor(127, 127, 127),
    RGBColor(199, 199, 199),
    RGBColor(188, 189, 34),
    RGBColor(219, 219, 141),
    RGBColor(23, 190, 207),
    RGBColor(158, 218, 229),
];

/// Size of the chart.
const W: u32 = 1200;
const H: u32 = 860;
/// Width of the legend column.
const LEGEND: u32 = 360;
/// Height of the title block.
const HEADER: u32 = 64;

fn err(e: impl std::fmt::Display) -> String {
    e.to_string()
}

/// 1234567 -> "1.2M", for the y axis.
fn count_label(v: f64) -> String {
    let (x, unit) = match v.abs() {
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

/// The names of the parts drawn (above zero in some bar), in the order
/// of their first appearance.
fn drawn_parts(bars: &[Bar]) -> Vec<String> {
    let mut names: Vec<String> = vec![];
    for b in bars {
        for (n, v) in &b.parts {
            if *v > 0.0 && !names.contains(n) {
                names.push(n.clone());
            }
        }
    }
    names
}

/// The chart as SVG text. Parts at or below zero (a layer the idle
/// background outweighs) are not drawn; `sub` says what ran.
pub fn stacked_layers(bars: &[Bar], sub: &str) -> Result<String, String> {
    let names = drawn_parts(bars);
    let colour = |n: &str| PALETTE[names.iter().position(|x| x == n).unwrap_or(0) % PALETTE.len()];
    let height = |b: &Bar| b.parts.iter().map(|(_, v)| v.max(0.0)).sum::<f64>();
    let max = bars.iter().map(height).fold(0.0, f64::max);
    let max = if max > 0.0 { max * 1.12 } else { 1.0 };
    let n = bars.len().max(1);
    let mut svg = String::new();
    {
        let root = SVGBackend::with_string(&mut svg, (W, H)).into_drawing_area();
        root.fill(&WHITE).map_err(err)?;
        let (top, rest) = root.split_vertically(HEADER);
        let center = Pos::new(HPos::Center, VPos::Center);
        let w = W as i32;
        top.draw(&Text::new(
            "Instructions per I/O by layer",
            (w / 2, 18),
            ("sans-serif", 24).into_font().style(FontStyle::Bold).color(&BLACK).pos(center),
        ))
        .map_err(err)?;
        top.draw(&Text::new(
            sub.to_string(),
            (w / 2, 46),
            ("sans-serif", 15).into_font().color(&RGBColor(80, 80, 80)).pos(center),
        ))
        .map_err(err)?;
        let (plot, legend) = rest.split_horizontally(W - LEGEND);
        let mut chart = ChartBuilder::on(&plot)
            .margin(14)
            .x_label_area_size(230)
            .y_label_area_size(84)
            .build_cartesian_2d(-0.5f64..(n as f64 - 0.5), 0.0..max)
            .map_err(err)?;
        chart
            .configure_mesh()
            .disable_x_mesh()
            .x_labels(0)
            .x_label_formatter(&|_| String::new())
            .y_desc("instructions per I/O (background subtracted)")
            .y_label_formatter(&|v| count_label(*v))
            .label_style(("sans-serif", 15))
            .axis_desc_style(("sans-serif", 16))
            .bold_line_style(RGBColor(215, 215, 215))
            .light_line_style(RGBColor(242, 242, 242))
            .max_light_lines(4)
            .draw()
            .map_err(err)?;
        // Row labels read upwards under their bars: long labels side by side
        // would run into each other.
        let label_font = ("sans-serif", 15).into_font().transform(FontTransform::Rotate270).color(&BLACK).pos(Pos::new(HPos::Right, VPos::Center));
        let total_font = ("sans-serif", 14).into_font().color(&BLACK).pos(Pos::new(HPos::Center, VPos::Bottom));
        for (i, b) in bars.iter().enumerate() {
            let x = i as f64;
            let mut y = 0.0;
            for (name, v) in b.parts.iter().filter(|(_, v)| *v > 0.0) {
                chart
                    .draw_series(std::iter::once(Rectangle::new([(x - 0.32, y), (x + 0.32, y + v)], colour(name).filled())))
                    .map_err(err)?;
                y += v;
            }
            let (px, py) = chart.backend_coord(&(x, 0.0));
            root.draw(&Text::new(b.label.clone(), (px, py + 10), label_font.clone())).map_err(err)?;
            let (tx, ty) = chart.backend_coord(&(x, y));
            root.draw(&Text::new(count_label(height(b)), (tx, ty - 4), total_font.clone())).map_err(err)?;
        }
        // The legend: what the figures are, then a swatch per part, top
        // of the stack first so it reads like the bars.
        let left = Pos::new(HPos::Left, VPos::Center);
        legend
            .draw(&Text::new(
                MEASURED,
                (8, 24),
                ("sans-serif", 14).into_font().style(FontStyle::Bold).color(&BLACK).pos(left),
            ))
            .map_err(err)?;
        let font = ("sans-serif", 14).into_font().color(&BLACK).pos(left);
        for (k, name) in names.iter().rev().enumerate() {
            let y = 52 + 22 * k as i32;
            legend.draw(&Rectangle::new([(8, y - 7), (22, y + 7)], colour(name).filled())).map_err(err)?;
            legend.draw(&Text::new(name.clone(), (30, y), font.clone())).map_err(err)?;
        }
        if bars.is_empty() {
            plot.draw(&Text::new(
                "no row has counts (see count.json)",
                (200, 200),
                ("sans-serif", 16).into_font().color(&RED),
            ))
            .map_err(err)?;
        }
        root.present().map_err(err)?;
    }
    Ok(svg)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn bars() -> Vec<Bar> {
        let p = |v: &[(&str, f64)]| v.iter().map(|(n, x)| (n.to_string(), *x)).collect();
        vec![
            Bar {
                label: "block/io_uring".into(),
                parts: p(&[("block layer", 900.0), ("nvme driver", 400.0), ("io_uring", 700.0), ("user: engine", 100.0)]),
            },
            Bar {
                label: "passthru".into(),
                parts: p(&[("nvme driver", 400.0), ("io_uring", 500.0), ("block layer", 0.0), ("user: engine", 100.0)]),
            },
            // A part the background outweighs is not drawn.
            Bar {
                label: "vfio & <friends>".into(),
                parts: p(&[("user: our driver", 300.0), ("user: engine", 100.0), ("interrupt entry and softirq", -5.0)]),
            },
        ]
    }

    fn attr(n: &roxmltree::Node, a: &str) -> f64 {
        n.attribute(a).and_then(|v| v.parse().ok()).unwrap_or(f64::NAN)
    }

    #[test]
    fn one_bar_group_per_path_in_valid_svg() {
        let b = bars();
        let svg = stacked_layers(&b, "randread 4k, iodepth 32").unwrap();
        let doc = roxmltree::Document::parse(&svg).expect("the chart is well-formed XML");
        assert_eq!(doc.root_element().tag_name().name(), "svg");
        // Bar segments: filled rects wider than a legend swatch and narrower
        // than the background. Grouped by their left edge: one group per path.
        let mut groups: BTreeMap<i64, usize> = BTreeMap::new();
        for r in doc.descendants().filter(|n| n.has_tag_name("rect")) {
            let w = attr(&r, "width");
            if w > 20.0 && w < 400.0 {
                *groups.entry(attr(&r, "x").round() as i64).or_default() += 1;
            }
        }
        // Segments above zero per bar, left to right.
        assert_eq!(groups.values().copied().collect::<Vec<_>>(), vec![4, 3, 2], "{svg}");
        let texts: Vec<String> = doc
            .descendants()
            .filter(|n| n.has_tag_name("text"))
            .filter_map(|n| n.text().map(str::to_string))
            .collect();
        for bar in &b {
            assert!(texts.iter().any(|t| t.trim() == bar.label), "label {} in {texts:?}", bar.label);
        }
        assert!(texts.iter().any(|t| t.contains("measured, emulated")));
        // One legend entry per part drawn; the negative one is left out.
        for part in ["block layer", "nvme driver", "io_uring", "user: engine", "user: our driver"] {
            assert_eq!(texts.iter().filter(|t| t.trim() == part).count(), 1, "{part}");
        }
        assert!(!texts.iter().any(|t| t.contains("interrupt entry")));
    }

    #[test]
    fn empty_chart_is_still_valid() {
        let svg = stacked_layers(&[], "nothing").unwrap();
        roxmltree::Document::parse(&svg).unwrap();
    }
}
