//! `pptune replay --plot`: per device, the RX ring and the recycle-miss
//! share over time, policy A and (with `--against`) B on the same axes, as
//! an SVG image drawn with `plotters` (its SVG backend only: labels are
//! `<text>` the viewer lays out, so no font is needed to write them).
//!
//! Each device has a panel: a header with its name and the legend, then
//! the chart: the ring as a step line on the left axis (entries), the miss
//! share as a dashed line on the right axis. A long recording is thinned to
//! what the chart's pixel columns can show: the ring keeps every change,
//! the miss share each column's lowest and highest value.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Range;

use plotters::coord::Shift;
use plotters::element::DashedPathElement;
use plotters::prelude::*;
/// The series colours' type, for tests that look for them.
pub use plotters::style::RGBColor;

use crate::replay::{Basis, Point, Report};

/// The image's width, and each device panel's height, in pixels.
pub const WIDTH: u32 = 960;
pub const PANEL_HEIGHT: u32 = 280;
/// The image's title line, above the panels.
const TITLE: u32 = 30;
/// A panel's header (device name, legend) above its chart.
const HEAD: u32 = 26;
/// The chart's margin and label areas (left: ring, right: miss share,
/// bottom: time).
const MARGIN: u32 = 8;
const LEFT: u32 = 70;
const RIGHT: u32 = 70;
const BOTTOM: u32 = 30;

/// The series' colours: ring A, miss share A, ring B, miss share B.
pub const RING_A: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
pub const MISS_A: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
pub const RING_B: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
pub const MISS_B: RGBColor = RGBColor(0xd6, 0x27, 0x28);

/// A rectangle in image pixels, `x0..x1` by `y0..y1`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Area {
    pub x0: u32,
    pub y0: u32,
    pub x1: u32,
    pub y1: u32,
}

/// Where things are in the image of `devices` panels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    pub devices: u32,
}

impl Layout {
    /// The image's size in pixels.
    #[must_use]
    pub fn size(self) -> (u32, u32) {
        (WIDTH, TITLE + self.devices * PANEL_HEIGHT)
    }

    /// The chart area of panel `i` (devices by name), inside its axes:
    /// only the series are drawn there.
    #[must_use]
    pub fn area(self, i: u32) -> Area {
        let top = TITLE + i * PANEL_HEIGHT + HEAD;
        Area {
            x0: MARGIN + LEFT,
            y0: top + MARGIN,
            x1: WIDTH - MARGIN - RIGHT,
            y1: top + (PANEL_HEIGHT - HEAD) - MARGIN - BOTTOM,
        }
    }
}

/// The smallest 1, 2 or 5 times a power of ten at or above `v` (> 0).
fn nice_ceiling(v: f64) -> f64 {
    let mut step = 10f64.powf(v.log10().floor());
    loop {
        for m in [1.0, 2.0, 5.0] {
            if m * step >= v {
                return m * step;
            }
        }
        step *= 10.0;
    }
}

/// The time axis: first and last pass of both replays, in ms since the
/// epoch; charts are drawn in seconds since `t0`.
#[derive(Debug, Clone, Copy)]
struct TimeAxis {
    t0: u64,
    t1: u64,
}

impl TimeAxis {
    #[allow(clippy::cast_precision_loss)]
    fn secs(self, ms: u64) -> f64 {
        ms.saturating_sub(self.t0) as f64 / 1000.0
    }

    #[allow(clippy::cast_precision_loss)]
    fn span(self) -> f64 {
        ((self.t1 - self.t0) as f64 / 1000.0).max(1.0)
    }

    /// A tick's label: the time of day, with the date past a day.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    fn label(self, secs: f64) -> String {
        let ms = self
            .t0
            .saturating_add((secs.max(0.0) * 1000.0).round() as u64);
        let fmt = match self.t1 - self.t0 {
            0..=600_000 => "%H:%M:%S",
            600_001..=86_400_000 => "%H:%M",
            _ => "%m-%d %H:%M",
        };
        super::utc(ms, fmt)
    }

    /// The chart's pixel column of a time.
    #[allow(clippy::cast_possible_truncation)]
    fn column(self, secs: f64) -> i64 {
        let width = f64::from(WIDTH - 2 * MARGIN - LEFT - RIGHT);
        (secs / self.span() * width).floor() as i64
    }
}

/// Line pieces (a gap where there is no value), in chart coordinates.
type Pieces = Vec<Vec<(f64, f64)>>;

/// The ring as a step line: each change drawn where it took effect.
fn ring_pieces(points: &[&Point], time: TimeAxis) -> Pieces {
    let mut out: Pieces = vec![Vec::new()];
    let mut last: Option<(f64, f64)> = None;
    for p in points {
        let x = time.secs(p.unix_ms);
        let cur = out.last_mut();
        match (p.ring_rx.map(f64::from), cur) {
            (None, _) => {
                if let (Some(l), Some(c)) = (last.take(), out.last_mut()) {
                    c.push(l);
                }
                out.push(Vec::new());
            }
            (Some(v), Some(c)) => {
                match last {
                    Some((_, lv)) if (lv - v).abs() < f64::EPSILON => {}
                    Some((_, lv)) => {
                        c.push((x, lv));
                        c.push((x, v));
                    }
                    None => c.push((x, v)),
                }
                last = Some((x, v));
            }
            (Some(_), None) => {}
        }
    }
    if let (Some(l), Some(c)) = (last, out.last_mut()) {
        c.push(l);
    }
    out.retain(|p| !p.is_empty());
    out
}

/// The miss share, each pixel column's lowest and highest value.
fn share_pieces(points: &[&Point], time: TimeAxis) -> Pieces {
    let mut out: Pieces = vec![Vec::new()];
    // The column at hand: its number, first x, lowest and highest value.
    let mut col: Option<(i64, f64, f64, f64)> = None;
    let flush = |col: &mut Option<(i64, f64, f64, f64)>, out: &mut Pieces| {
        if let (Some((_, x, lo, hi)), Some(c)) = (col.take(), out.last_mut()) {
            c.push((x, lo));
            if hi > lo {
                c.push((x, hi));
            }
        }
    };
    for p in points {
        let x = time.secs(p.unix_ms);
        match p.recycle_miss_share {
            None => {
                flush(&mut col, &mut out);
                out.push(Vec::new());
            }
            Some(v) => match &mut col {
                Some((n, _, lo, hi)) if *n == time.column(x) => {
                    *lo = lo.min(v);
                    *hi = hi.max(v);
                }
                _ => {
                    flush(&mut col, &mut out);
                    col = Some((time.column(x), x, v, v));
                }
            },
        }
    }
    flush(&mut col, &mut out);
    out.retain(|p| !p.is_empty());
    out
}

/// One replay's points by device, in pass order.
fn by_device(r: &Report) -> BTreeMap<&str, Vec<&Point>> {
    let mut m: BTreeMap<&str, Vec<&Point>> = BTreeMap::new();
    for p in &r.series {
        m.entry(p.device.as_str()).or_default().push(p);
    }
    m
}

/// The picture of `a`'s series (and `b`'s) as an SVG document.
///
/// # Errors
/// Drawing failed (plotters' backend writes into a string: it does not).
pub fn svg(a: &Report, b: Option<&Report>) -> anyhow::Result<String> {
    Ok(render(a, b)?.0)
}

/// [`svg`], and each panel's chart area as plotters laid it out.
type Drawn = (String, Vec<(Range<i32>, Range<i32>)>);

fn render(a: &Report, b: Option<&Report>) -> anyhow::Result<Drawn> {
    let sa = by_device(a);
    let sb = b.map(by_device).unwrap_or_default();
    let names: BTreeSet<&str> = sa.keys().chain(sb.keys()).copied().collect();
    let all = || a.series.iter().chain(b.iter().flat_map(|b| &b.series));
    let time = TimeAxis {
        t0: all().map(|p| p.unix_ms).min().unwrap_or(0),
        t1: all().map(|p| p.unix_ms).max().unwrap_or(0),
    };
    let layout = Layout {
        devices: u32::try_from(names.len()).unwrap_or(u32::MAX),
    };
    let mut out = String::new();
    let mut areas = Vec::new();
    {
        let root = SVGBackend::with_string(&mut out, layout.size()).into_drawing_area();
        root.fill(&WHITE)?;
        let (title, panels) = root.split_vertically(TITLE);
        title.draw(&Text::new(
            format!(
                "pptune replay: {} pass(es) from {} to {}",
                a.passes,
                super::when(time.t0),
                super::when(time.t1)
            ),
            (MARGIN.cast_signed(), 8),
            ("sans-serif", 16).into_font(),
        ))?;
        let panels = panels.split_evenly((names.len(), 1));
        for (name, area) in names.iter().zip(&panels) {
            let pa = sa.get(name).map_or(&[][..], Vec::as_slice);
            let pb = b.map(|_| sb.get(name).map_or(&[][..], Vec::as_slice));
            areas.push(panel(area, time, name, pa, pb)?);
        }
        root.present()?;
    }
    Ok((out, areas))
}

/// A legend entry: a short line of the series' style, then its label.
fn legend_entry<DB: DrawingBackend>(
    head: &DrawingArea<DB, Shift>,
    x: i32,
    colour: RGBColor,
    dashed: bool,
    label: &str,
) -> anyhow::Result<i32>
where
    DB::ErrorType: 'static,
{
    let style = colour.stroke_width(2);
    let line = [(x, 13), (x + 22, 13)];
    if dashed {
        head.draw(&DashedPathElement::new(line, 6, 3, style))?;
    } else {
        head.draw(&PathElement::new(line, style))?;
    }
    head.draw(&Text::new(
        label.to_owned(),
        (x + 27, 7),
        ("sans-serif", 14).into_font(),
    ))?;
    // The label's width as plotters estimates it, and a gap.
    let (w, _) = head.estimate_text_size(label, &("sans-serif", 14).into_text_style(head))?;
    Ok(x + 27 + i32::try_from(w).unwrap_or(200) + 18)
}

/// One device's panel: header, axes and the series; returns the chart
/// area's pixel range.
fn panel<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    time: TimeAxis,
    name: &str,
    pa: &[&Point],
    pb: Option<&[&Point]>,
) -> anyhow::Result<(Range<i32>, Range<i32>)>
where
    DB::ErrorType: 'static,
{
    let both = || pa.iter().chain(pb.unwrap_or_default());
    let ring_max = both().filter_map(|p| p.ring_rx).max().unwrap_or(0);
    let ring_top = nice_ceiling(f64::from(ring_max.max(1)) * 1.05);
    let share_max = both()
        .filter_map(|p| p.recycle_miss_share)
        .fold(0.0_f64, f64::max);
    let share_top = nice_ceiling((share_max * 1.05).max(0.01)).min(1.0);

    let (head, body) = area.split_vertically(HEAD);
    let name = crate::human::printable(name);
    head.draw(&Text::new(
        name.to_string(),
        (MARGIN.cast_signed(), 6),
        ("sans-serif", 16).into_font().style(FontStyle::Bold),
    ))?;
    let modelled = |ps: &[&Point]| ps.iter().any(|p| p.basis == Basis::Modelled);
    let mut legend = vec![
        (RING_A, false, "ring A (--config)".to_owned()),
        (MISS_A, true, "miss share A".to_owned()),
    ];
    if let Some(pb) = pb {
        let m = if modelled(pb) { " (modelled)" } else { "" };
        legend.push((RING_B, false, format!("ring B (--against){m}")));
        legend.push((MISS_B, true, format!("miss share B{m}")));
    }
    let mut x = (MARGIN + LEFT).cast_signed() + 110;
    for (colour, dashed, label) in &legend {
        x = legend_entry(&head, x, *colour, *dashed, label)?;
    }

    let mut chart = ChartBuilder::on(&body)
        .margin(MARGIN)
        .x_label_area_size(BOTTOM)
        .y_label_area_size(LEFT)
        .right_y_label_area_size(RIGHT)
        .build_cartesian_2d(0.0..time.span(), 0.0..ring_top)?
        .set_secondary_coord(0.0..time.span(), 0.0..share_top);
    let label = |s: &f64| time.label(*s);
    chart
        .configure_mesh()
        .x_labels(5)
        .y_labels(5)
        .x_label_formatter(&label)
        .y_label_formatter(&|v| format!("{v:.0}"))
        .y_desc("RX ring (entries)")
        .light_line_style(WHITE.mix(0.0))
        .draw()?;
    chart
        .configure_secondary_axes()
        .y_labels(5)
        .y_label_formatter(&|v| format!("{:.1} %", v * 100.0))
        .y_desc("recycle-miss share")
        .draw()?;
    let mut series = vec![(pa, RING_A, MISS_A)];
    if let Some(pb) = pb {
        series.push((pb, RING_B, MISS_B));
    }
    for (points, ring, miss) in series {
        for piece in ring_pieces(points, time) {
            if let [p] = piece.as_slice() {
                chart.draw_series([Circle::new(*p, 3, ring.filled())])?;
            } else {
                chart.draw_series(LineSeries::new(piece, ring.stroke_width(2)))?;
            }
        }
        for piece in share_pieces(points, time) {
            if let [p] = piece.as_slice() {
                chart.draw_secondary_series([Circle::new(*p, 3, miss.filled())])?;
            } else {
                chart.draw_secondary_series(DashedLineSeries::new(
                    piece,
                    7,
                    3,
                    miss.stroke_width(2),
                ))?;
            }
        }
    }
    Ok(chart.plotting_area().get_pixel_range())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::replay::Basis;

    fn point(pass: u64, device: &str, ring: Option<u32>, share: Option<f64>) -> Point {
        Point {
            pass,
            unix_ms: 1_700_000_000_000 + pass * 10_000,
            device: device.into(),
            ring_rx: ring,
            rx_queues: Some(4),
            action: None,
            reason: None,
            recycle_miss_share: share,
            slow_refill_share: None,
            basis: Basis::Observed,
        }
    }

    #[test]
    fn the_layout_is_where_plotters_draws_the_charts() {
        let mut r = Report::default();
        for i in 0..10 {
            r.series.push(point(i, "eth0", Some(256), Some(0.1)));
            r.series.push(point(i, "eth1", Some(1024), None));
        }
        let (svg, areas) = render(&r, None).unwrap();
        let layout = Layout { devices: 2 };
        let (w, h) = layout.size();
        assert!(
            svg.contains(&format!(r#"width="{w}" height="{h}""#)),
            "{svg}"
        );
        for (i, (xs, ys)) in (0..).zip(areas) {
            let a = layout.area(i);
            let px = |v: u32| i32::try_from(v).unwrap();
            assert_eq!((xs, ys), (px(a.x0)..px(a.x1), px(a.y0)..px(a.y1)));
        }
    }

    #[test]
    fn a_ring_is_a_step_line_and_a_gap_breaks_the_share() {
        let time = TimeAxis {
            t0: 1_700_000_000_000,
            t1: 1_700_000_000_000 + 50_000,
        };
        let pts = [
            point(0, "e", Some(256), Some(0.5)),
            point(1, "e", Some(256), None),
            point(2, "e", Some(512), Some(0.2)),
            point(3, "e", Some(512), Some(0.1)),
        ];
        let refs: Vec<&Point> = pts.iter().collect();
        assert_eq!(
            ring_pieces(&refs, time),
            vec![vec![
                (0.0, 256.0),
                (20.0, 256.0),
                (20.0, 512.0),
                (30.0, 512.0)
            ]]
        );
        assert_eq!(
            share_pieces(&refs, time),
            vec![vec![(0.0, 0.5)], vec![(20.0, 0.2), (30.0, 0.1)]]
        );
        assert!((nice_ceiling(268.8) - 500.0).abs() < 1e-9);
        assert!((nice_ceiling(0.0105) - 0.02).abs() < 1e-12);
    }
}
