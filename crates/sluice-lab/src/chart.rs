//! Line charts as SVG (plotters' SVG backend): categories along x (fetch sizes,
//! methods), a log-scaled y axis with its unit, one series per RTT, filled markers
//! for measured values and hollow ones for extrapolated values, and a legend.

use plotters::prelude::*;

/// Series colours (colour-blind-safe-ish, distinct in greyscale too).
const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
];

/// Legend text of the extrapolated-marker entry.
pub const EXTRAPOLATED_LEGEND: &str = "hollow marker: extrapolated";

/// One value of a series: the figure and whether it is extrapolated.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Point {
    /// The figure (must be > 0 for the log scale; smaller ones are clamped).
    pub value: f64,
    /// Drawn hollow when true.
    pub extrapolated: bool,
}

/// One line: a legend label and a value per category (`None`: not measured).
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// Legend label, e.g. `5 ms RTT`.
    pub label: String,
    /// One per category.
    pub points: Vec<Option<Point>>,
}

/// A chart to draw.
#[derive(Debug, Clone, PartialEq)]
pub struct ChartData {
    /// The caption.
    pub title: String,
    /// X axis label, with its unit.
    pub x_desc: String,
    /// Y axis label, with its unit.
    pub y_desc: String,
    /// The x positions' names, in order.
    pub categories: Vec<String>,
    /// The lines.
    pub series: Vec<Series>,
}

/// A tick value for people: `0.5`, `20`, `10,000`.
fn tick(value: f64) -> String {
    if value >= 1000.0 {
        crate::thousands(value.round() as u64)
    } else if value >= 1.0 {
        let text = format!("{value:.1}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    } else {
        let text = format!("{value:.3}");
        text.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// Draws `data` and returns the SVG document.
pub fn render_svg(data: &ChartData) -> Result<String, String> {
    let mut svg = String::new();
    draw(data, &mut svg).map_err(|error| format!("drawing {:?}: {error}", data.title))?;
    Ok(svg)
}

fn draw(data: &ChartData, svg: &mut String) -> Result<(), Box<dyn std::error::Error>> {
    let floor = 1e-3;
    let values: Vec<f64> = data
        .series
        .iter()
        .flat_map(|s| s.points.iter().flatten().map(|p| p.value.max(floor)))
        .collect();
    let low = values.iter().copied().fold(f64::INFINITY, f64::min);
    let high = values.iter().copied().fold(0.0, f64::max);
    let (low, high) = if values.is_empty() {
        (0.1, 10.0)
    } else {
        // Whole decades, so both ends carry a label, with room above the highest
        // line for the legend.
        let low = 10f64.powf((low / 1.5).log10().floor());
        let high = 10f64.powf((high * 4.0).log10().ceil()).max(low * 100.0);
        (low, high)
    };
    let count = data.categories.len().max(1);
    let last_category_higher = {
        let max_at = |index: usize| {
            data.series
                .iter()
                .filter_map(|s| s.points.get(index).copied().flatten())
                .map(|p| p.value)
                .fold(0.0, f64::max)
        };
        max_at(count - 1) > max_at(0)
    };

    let root = SVGBackend::with_string(svg, (760, 460)).into_drawing_area();
    root.fill(&WHITE)?;
    // Segments 0..=count-1: one per category.
    let x_range = (0..count as i32 - 1).into_segmented();
    let mut chart = ChartBuilder::on(&root)
        .caption(&data.title, ("sans-serif", 20))
        .margin(12)
        .x_label_area_size(52)
        .y_label_area_size(78)
        .build_cartesian_2d(x_range, (low..high).log_scale())?;
    let categories = data.categories.clone();
    chart
        .configure_mesh()
        .x_desc(data.x_desc.as_str())
        .y_desc(data.y_desc.as_str())
        .axis_desc_style(("sans-serif", 15))
        .label_style(("sans-serif", 13))
        .x_labels(count)
        .x_label_formatter(&move |x: &SegmentValue<i32>| match x {
            SegmentValue::CenterOf(index) => {
                categories.get(*index as usize).cloned().unwrap_or_default()
            }
            _ => String::new(),
        })
        .y_label_formatter(&|y: &f64| tick(*y))
        .light_line_style(RGBColor(235, 235, 235))
        .draw()?;

    let mut any_extrapolated = false;
    for (index, series) in data.series.iter().enumerate() {
        let colour = COLOURS[index % COLOURS.len()];
        // Earlier series are drawn wider, so a later one on the same values (round
        // trips do not depend on the RTT) leaves them visible around it.
        let width = 2 + 2 * (data.series.len() - 1 - index) as u32;
        let radius = 4 + 2 * (data.series.len() - 1 - index) as i32;
        let points: Vec<(SegmentValue<i32>, f64)> = series
            .points
            .iter()
            .enumerate()
            .filter_map(|(x, p)| p.map(|p| (SegmentValue::CenterOf(x as i32), p.value.max(floor))))
            .collect();
        chart
            .draw_series(LineSeries::new(points, colour.stroke_width(width)))?
            .label(series.label.as_str())
            .legend(move |(x, y)| {
                PathElement::new(vec![(x, y), (x + 22, y)], colour.stroke_width(width))
            });
        for (x, point) in series.points.iter().enumerate() {
            let Some(point) = point else { continue };
            let at = (SegmentValue::CenterOf(x as i32), point.value.max(floor));
            if point.extrapolated {
                any_extrapolated = true;
                chart.draw_series(std::iter::once(Circle::new(
                    at.clone(),
                    radius + 1,
                    WHITE.filled(),
                )))?;
                chart.draw_series(std::iter::once(Circle::new(
                    at,
                    radius + 1,
                    colour.stroke_width(2),
                )))?;
            } else {
                chart.draw_series(std::iter::once(Circle::new(at, radius, colour.filled())))?;
            }
        }
    }
    if any_extrapolated {
        chart
            .draw_series(std::iter::empty::<Circle<(SegmentValue<i32>, f64), i32>>())?
            .label(EXTRAPOLATED_LEGEND)
            .legend(|(x, y)| Circle::new((x + 11, y), 5, BLACK.stroke_width(2)));
    }
    chart
        .configure_series_labels()
        .position(if last_category_higher {
            SeriesLabelPosition::UpperLeft
        } else {
            SeriesLabelPosition::UpperRight
        })
        .label_font(("sans-serif", 13))
        .background_style(WHITE.mix(0.85))
        .border_style(RGBColor(160, 160, 160))
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_chart_has_axis_labels_ticks_and_a_legend() {
        let data = ChartData {
            title: "Export time vs fetch size".into(),
            x_desc: "fetch size (rows per round trip)".into(),
            y_desc: "time (ms, log scale)".into(),
            categories: vec!["10".into(), "100".into(), "streaming".into()],
            series: vec![
                Series {
                    label: "0 ms RTT".into(),
                    points: vec![
                        Some(Point {
                            value: 120.0,
                            extrapolated: false,
                        }),
                        Some(Point {
                            value: 30.0,
                            extrapolated: false,
                        }),
                        Some(Point {
                            value: 20.0,
                            extrapolated: false,
                        }),
                    ],
                },
                Series {
                    label: "5 ms RTT".into(),
                    points: vec![
                        Some(Point {
                            value: 10_000.0,
                            extrapolated: true,
                        }),
                        None,
                        Some(Point {
                            value: 25.0,
                            extrapolated: false,
                        }),
                    ],
                },
            ],
        };
        let svg = render_svg(&data).unwrap();
        assert!(svg.starts_with("<svg"), "{}", &svg[..80.min(svg.len())]);
        for text in [
            "Export time vs fetch size",
            "fetch size (rows per round trip)",
            "time (ms, log scale)",
            "0 ms RTT",
            "5 ms RTT",
            "streaming",
            EXTRAPOLATED_LEGEND,
        ] {
            assert!(svg.contains(text), "missing {text:?}");
        }
        assert!(svg.trim_end().ends_with("</svg>"));
    }

    #[test]
    fn ticks_read_well() {
        assert_eq!(tick(20000.0), "20,000");
        assert_eq!(tick(5.0), "5");
        assert_eq!(tick(0.5), "0.5");
        assert_eq!(tick(2.5), "2.5");
    }
}
