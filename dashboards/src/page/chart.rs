//! The rates chart: per group, the silent-failure rate of each bucket, 0–100 %, as an inline SVG
//! line chart with its legend. A bucket without calls is a gap in the line, never a zero.

use std::fmt::Write as _;

use maud::{Markup, html};

use crate::view::Chart;

/// One colour per series, in order; they repeat past eight.
const PALETTE: [&str; 8] = [
    "#2563eb", "#dc2626", "#16a34a", "#9333ea", "#ea580c", "#0891b2", "#4d7c0f", "#be185d",
];

/// The SVG's width.
const W: f64 = 540.0;
/// The SVG's height.
const H: f64 = 160.0;

/// Where the plot's scales put a bucket and a rate.
struct Scale {
    buckets: f64,
}

impl Scale {
    fn x(&self, i: usize) -> f64 {
        30.0 + (W - 40.0) * (i as f64) / (self.buckets - 1.0)
    }

    fn y(&self, rate: f64) -> f64 {
        10.0 + (H - 30.0) * (1.0 - rate.clamp(0.0, 1.0))
    }
}

/// The path data of a series: a move to the first bucket of each run of buckets with calls,
/// then a line through the rest of the run.
fn path_data(scale: &Scale, values: &[Option<f64>]) -> String {
    let mut path = String::new();
    let mut pen_down = false;
    for (i, value) in values.iter().enumerate() {
        match value {
            Some(rate) => {
                let _ = write!(
                    path,
                    "{}{:.1},{:.1} ",
                    if pen_down { "L" } else { "M" },
                    scale.x(i),
                    scale.y(*rate)
                );
                pen_down = true;
            }
            // A bucket without calls is a gap in the line, not a zero.
            None => pen_down = false,
        }
    }
    path.truncate(path.trim_end().len());
    path
}

/// The buckets with calls whose neighbours have none: a lone point draws no line, so a dot
/// shows it.
fn lone_points(values: &[Option<f64>]) -> impl Iterator<Item = (usize, f64)> + '_ {
    let has_calls = |j: Option<usize>| j.and_then(|j| values.get(j)).is_some_and(Option::is_some);
    values.iter().enumerate().filter_map(move |(i, value)| {
        let alone = !has_calls(i.checked_sub(1)) && !has_calls(i.checked_add(1));
        value.filter(|_| alone).map(|rate| (i, rate))
    })
}

/// A line chart of silent-failure rates, 0–100 %, as inline SVG, then its legend.
pub(super) fn chart_svg(chart: &Chart) -> Markup {
    let scale = Scale {
        buckets: chart.buckets.len().max(2) as f64,
    };
    let colour = |index: usize| PALETTE[index % PALETTE.len()];
    html! {
        svg class="chart" width=(W) height=(H) viewBox={ "0 0 " (W) " " (H) } role="img"
            aria-label="silent-failure rate over time" {
            @for (tick, label) in [(0.0, "0%"), (0.5, "50%"), (1.0, "100%")] {
                @let y = scale.y(tick);
                // Empty SVG elements are closed explicitly: `<line>` alone would not be.
                line x1="30" x2=(W - 10.0) y1=(format!("{y:.1}")) y2=(format!("{y:.1}"))
                    stroke="#e5e7eb" {}
                text x="0" y=(format!("{:.1}", y + 3.0)) font-size="10" { (label) }
            }
            @for (index, (group, values)) in chart.series.iter().enumerate() {
                path d=(path_data(&scale, values)) fill="none" stroke=(colour(index))
                    stroke-width="1.5" {
                    title { (group) }
                }
                @for (i, rate) in lone_points(values) {
                    circle cx=(format!("{:.1}", scale.x(i))) cy=(format!("{:.1}", scale.y(rate)))
                        r="2.5" fill=(colour(index)) {
                        title { (group) ": " (format!("{:.1}", rate * 100.0)) " %" }
                    }
                }
            }
        }
        p class="legend" {
            @for (index, (group, _)) in chart.series.iter().enumerate() {
                span style={ "color:" (colour(index)) } { "■" }
                " " (group) " "
            }
        }
    }
}
