//! The report folder: `index.html` (self-contained: inline style, the charts as
//! `<img>` of the SVG files beside it, an `<h2>` naming each chart, tables of the
//! numbers), one SVG per chart, `summary.md` (the same tables and the
//! recommendations) and `results.json` (the raw figures). Each shows the WAL
//! written per insert method ([`crate::wal`]) beside the insert experiment.

use std::fmt::Write as _;
use std::path::Path;

use serde_json::{json, Value};

use crate::chart::{self, ChartData, Point, Series};
use crate::wal::{self, WalFigure};
use crate::{human_duration, rtt_label, thousands, Experiment, LabResults, Measurement};

/// What a chart plots.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Metric {
    /// Wall time of the cell, in milliseconds.
    Time,
    /// Round trips of the cell.
    RoundTrips,
}

/// One chart of the report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChartSpec {
    /// File name in the report folder.
    pub file: &'static str,
    /// The chart's name: its caption and its `<h2>`.
    pub title: &'static str,
    /// What it is about.
    pub experiment: Experiment,
    /// What it plots.
    pub metric: Metric,
    /// X axis label (with its unit).
    pub x_desc: &'static str,
    /// Y axis label (with its unit).
    pub y_desc: &'static str,
}

const TIME_AXIS: &str = "time (ms, log scale)";
const TRIPS_AXIS: &str = "round trips (count, log scale)";

/// Every chart the report has, in order.
pub const CHARTS: [ChartSpec; 8] = [
    ChartSpec {
        file: "export-time.svg",
        title: "Export time vs fetch size",
        experiment: Experiment::Export,
        metric: Metric::Time,
        x_desc: "fetch size (rows per round trip)",
        y_desc: TIME_AXIS,
    },
    ChartSpec {
        file: "export-round-trips.svg",
        title: "Export round trips vs fetch size",
        experiment: Experiment::Export,
        metric: Metric::RoundTrips,
        x_desc: "fetch size (rows per round trip)",
        y_desc: TRIPS_AXIS,
    },
    ChartSpec {
        file: "insert-time.svg",
        title: "Insert time by method",
        experiment: Experiment::Insert,
        metric: Metric::Time,
        x_desc: "insert method (rows per statement)",
        y_desc: TIME_AXIS,
    },
    ChartSpec {
        file: "insert-round-trips.svg",
        title: "Insert round trips by method",
        experiment: Experiment::Insert,
        metric: Metric::RoundTrips,
        x_desc: "insert method (rows per statement)",
        y_desc: TRIPS_AXIS,
    },
    ChartSpec {
        file: "lob-time.svg",
        title: "Large objects: inline vs locator time",
        experiment: Experiment::Lob,
        metric: Metric::Time,
        x_desc: "read style (objects per round trip)",
        y_desc: TIME_AXIS,
    },
    ChartSpec {
        file: "lob-round-trips.svg",
        title: "Large objects: inline vs locator round trips",
        experiment: Experiment::Lob,
        metric: Metric::RoundTrips,
        x_desc: "read style (objects per round trip)",
        y_desc: TRIPS_AXIS,
    },
    ChartSpec {
        file: "calls-time.svg",
        title: "Small calls: loop vs pipelined time",
        experiment: Experiment::Calls,
        metric: Metric::Time,
        x_desc: "call style (calls per round trip)",
        y_desc: TIME_AXIS,
    },
    ChartSpec {
        file: "calls-round-trips.svg",
        title: "Small calls: loop vs pipelined round trips",
        experiment: Experiment::Calls,
        metric: Metric::RoundTrips,
        x_desc: "call style (calls per round trip)",
        y_desc: TRIPS_AXIS,
    },
];

fn experiment_title(experiment: Experiment) -> &'static str {
    match experiment {
        Experiment::Export => "Export",
        Experiment::Insert => "Insert",
        Experiment::Lob => "Large objects",
        Experiment::Calls => "Many small calls",
    }
}

fn units_of(results: &LabResults, experiment: Experiment) -> u64 {
    results
        .measurements
        .iter()
        .find(|m| m.experiment == experiment)
        .map_or(0, |m| m.units)
}

/// The chart's data from the results.
pub fn chart_data(results: &LabResults, spec: &ChartSpec) -> ChartData {
    let categories = results.variants(spec.experiment);
    let series = results
        .options
        .rtts
        .iter()
        .map(|&rtt| Series {
            label: rtt_label(rtt),
            points: categories
                .iter()
                .map(|variant| {
                    results.get(spec.experiment, variant, rtt).map(|m| Point {
                        value: match spec.metric {
                            Metric::Time => m.time_ms(),
                            Metric::RoundTrips => m.round_trips as f64,
                        },
                        extrapolated: m.extrapolated(),
                    })
                })
                .collect(),
        })
        .collect();
    ChartData {
        title: format!(
            "{} ({} {})",
            spec.title,
            thousands(units_of(results, spec.experiment)),
            spec.experiment.unit()
        ),
        x_desc: spec.x_desc.to_owned(),
        y_desc: spec.y_desc.to_owned(),
        categories,
        series,
    }
}

fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Inline code (`…`) of a recommendation as `<code>`.
fn html_text(text: &str) -> String {
    let mut out = String::new();
    for (index, part) in escape(text).split('`').enumerate() {
        if index % 2 == 1 {
            let _ = write!(out, "<code>{part}</code>");
        } else {
            out.push_str(part);
        }
    }
    out
}

/// Units the budget let run, and of how many, when extrapolated.
fn note(m: &Measurement) -> String {
    if m.extrapolated() {
        format!(
            "extrapolated from {} of {} {} ({} measured)",
            thousands(m.measured_units),
            thousands(m.units),
            m.experiment.unit(),
            human_duration(m.measured_time)
        )
    } else {
        String::new()
    }
}

const TABLE_HEADER: [&str; 8] = [
    "variant",
    "RTT",
    "units",
    "time (ms)",
    "round trips",
    "proxy-counted round trips",
    "waiting",
    "note",
];

/// The rows of an experiment's table, as text cells.
fn table_rows(results: &LabResults, experiment: Experiment) -> Vec<[String; 8]> {
    let mut rows = Vec::new();
    for variant in results.variants(experiment) {
        for &rtt in &results.options.rtts {
            let Some(m) = results.get(experiment, &variant, rtt) else {
                continue;
            };
            let star = if m.extrapolated() { "*" } else { "" };
            rows.push([
                variant.clone(),
                human_duration(rtt),
                format!("{} {}", thousands(m.units), experiment.unit()),
                format!("{:.1}{star}", m.time_ms()),
                format!("{}{star}", thousands(m.round_trips)),
                format!(
                    "{} (of {} measured)",
                    thousands(m.proxy_round_trips),
                    thousands(m.measured_round_trips)
                ),
                format!("{:.0}%", results.waiting(m) * 100.0),
                note(m),
            ]);
        }
    }
    rows
}

/// `index.html`.
pub fn html(results: &LabResults) -> String {
    let mut out = String::new();
    out.push_str(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <title>sluice lab report</title>\n<style>\n\
         body { font-family: sans-serif; max-width: 62rem; margin: 2rem auto; padding: 0 1rem; color: #222; }\n\
         table { border-collapse: collapse; margin: 0.5rem 0 1.5rem; font-size: 0.9rem; }\n\
         th, td { border: 1px solid #ccc; padding: 0.25rem 0.5rem; text-align: left; }\n\
         td.n { text-align: right; font-variant-numeric: tabular-nums; }\n\
         th { background: #f2f2f2; }\n\
         figure { margin: 0.5rem 0 1.5rem; }\n\
         img { max-width: 100%; height: auto; border: 1px solid #eee; }\n\
         li { margin-bottom: 0.4rem; }\n\
         </style>\n</head>\n<body>\n<h1>sluice lab report</h1>\n",
    );
    let _ = writeln!(
        out,
        "<p>PostgreSQL {} at {}, through sluice's proxy at {} RTT. Export source: {}. \
         The whole run took {}.</p>",
        escape(&results.server_version),
        escape(&results.upstream),
        results
            .options
            .rtts
            .iter()
            .map(|&rtt| human_duration(rtt))
            .collect::<Vec<_>>()
            .join(", "),
        escape(&results.export_source),
        human_duration(results.elapsed)
    );

    out.push_str("<h2 id=\"recommendations\">Recommendations</h2>\n<ul>\n");
    for line in crate::advice::recommendations(results) {
        let _ = writeln!(out, "<li>{}</li>", html_text(&line));
    }
    out.push_str("</ul>\n");

    out.push_str("<h2 id=\"latency\">Measured round-trip time</h2>\n");
    out.push_str(
        "<table>\n<tr><th>path</th><th>injected RTT</th><th>median <code>select 1</code> (ms)</th></tr>\n",
    );
    let _ = writeln!(
        out,
        "<tr><td>real path, without the proxy</td><td class=\"n\">–</td><td class=\"n\">{:.3}</td></tr>",
        results.real_rtt.as_secs_f64() * 1e3
    );
    for latency in &results.latencies {
        let _ = writeln!(
            out,
            "<tr><td>through the proxy</td><td class=\"n\">{}</td><td class=\"n\">{:.3}</td></tr>",
            human_duration(latency.injected),
            latency.select1.as_secs_f64() * 1e3
        );
    }
    out.push_str("</table>\n");

    for experiment in Experiment::ALL {
        for spec in CHARTS.iter().filter(|spec| spec.experiment == experiment) {
            let id = spec.file.trim_end_matches(".svg");
            let _ = writeln!(
                out,
                "<h2 id=\"{id}\">{title}</h2>\n<figure><img src=\"{file}\" alt=\"{title}\" \
                 width=\"760\" height=\"460\"><figcaption>{y} against {x}; one line per RTT.\
                 </figcaption></figure>",
                title = escape(spec.title),
                file = spec.file,
                x = escape(spec.x_desc),
                y = escape(spec.y_desc),
            );
        }
        let _ = writeln!(
            out,
            "<h3 id=\"{}-numbers\">{}: the numbers</h3>\n<table>",
            experiment.id(),
            experiment_title(experiment)
        );
        out.push_str("<tr>");
        for header in TABLE_HEADER {
            let _ = write!(out, "<th>{header}</th>");
        }
        out.push_str("</tr>\n");
        for row in table_rows(results, experiment) {
            out.push_str("<tr>");
            for (index, cell) in row.iter().enumerate() {
                let class = if (1..=6).contains(&index) {
                    " class=\"n\""
                } else {
                    ""
                };
                let _ = write!(out, "<td{class}>{}</td>", escape(cell));
            }
            out.push_str("</tr>\n");
        }
        out.push_str("</table>\n");
        if experiment == Experiment::Insert {
            html_wal(&mut out, results);
        }
    }
    out.push_str(
        "<p>* extrapolated: the cell stopped when its time budget was spent. \
         Waiting = round trips × the measured <code>select 1</code> time at that RTT / time. \
         Raw figures: <a href=\"results.json\">results.json</a>; \
         the same in Markdown: <a href=\"summary.md\">summary.md</a>.</p>\n</body>\n</html>\n",
    );
    out
}

/// `summary.md`.
pub fn markdown(results: &LabResults) -> String {
    let mut out = String::from("# sluice lab report\n\n");
    let _ = writeln!(
        out,
        "PostgreSQL {} at {}; RTTs injected: {}; export source: {}; run time {}.\n",
        results.server_version,
        results.upstream,
        results
            .options
            .rtts
            .iter()
            .map(|&rtt| human_duration(rtt))
            .collect::<Vec<_>>()
            .join(", "),
        results.export_source,
        human_duration(results.elapsed)
    );
    out.push_str("## Recommendations\n\n");
    for line in crate::advice::recommendations(results) {
        let _ = writeln!(out, "- {line}");
    }
    out.push_str("\n## Measured round-trip time\n\n| path | injected RTT | median `select 1` (ms) |\n|---|---|---|\n");
    let _ = writeln!(
        out,
        "| real path, without the proxy | – | {:.3} |",
        results.real_rtt.as_secs_f64() * 1e3
    );
    for latency in &results.latencies {
        let _ = writeln!(
            out,
            "| through the proxy | {} | {:.3} |",
            human_duration(latency.injected),
            latency.select1.as_secs_f64() * 1e3
        );
    }
    for experiment in Experiment::ALL {
        let _ = writeln!(out, "\n## {}\n", experiment_title(experiment));
        for spec in CHARTS.iter().filter(|spec| spec.experiment == experiment) {
            let _ = writeln!(out, "![{}]({})", spec.title, spec.file);
        }
        out.push('\n');
        let _ = writeln!(out, "| {} |", TABLE_HEADER.join(" | "));
        let _ = writeln!(out, "|{}", "---|".repeat(TABLE_HEADER.len()));
        for row in table_rows(results, experiment) {
            let _ = writeln!(out, "| {} |", row.join(" | "));
        }
        if experiment == Experiment::Insert {
            markdown_wal(&mut out, results);
        }
    }
    out.push_str(
        "\n\\* extrapolated: the cell stopped when its time budget was spent. \
         Waiting = round trips × the measured `select 1` time at that RTT / time.\n",
    );
    out
}

const WAL_TITLE: &str = "Server-side cost: WAL written per row";

/// The WAL table of `index.html`, or why there is none.
fn html_wal(out: &mut String, results: &LabResults) {
    let _ = writeln!(out, "<h3 id=\"insert-wal\">{WAL_TITLE}</h3>");
    if let Some(reason) = wal::unavailable(results) {
        let _ = writeln!(out, "<p>WAL bytes per row: {}</p>", html_text(&reason));
        return;
    }
    out.push_str("<table>\n<tr>");
    for header in wal::TABLE_HEADER {
        let _ = write!(out, "<th>{header}</th>");
    }
    out.push_str("</tr>\n");
    for row in wal::table_rows(results) {
        out.push_str("<tr>");
        for (index, cell) in row.iter().enumerate() {
            let class = if index > 0 { " class=\"n\"" } else { "" };
            let _ = write!(out, "<td{class}>{}</td>", escape(cell));
        }
        out.push_str("</tr>\n");
    }
    let _ = writeln!(out, "</table>\n<p>{}</p>", html_text(wal::NOTE));
}

/// The WAL table of `summary.md`, or why there is none.
fn markdown_wal(out: &mut String, results: &LabResults) {
    let _ = writeln!(out, "\n### {WAL_TITLE}\n");
    if let Some(reason) = wal::unavailable(results) {
        let _ = writeln!(out, "WAL bytes per row: {reason}");
        return;
    }
    let _ = writeln!(out, "| {} |", wal::TABLE_HEADER.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(wal::TABLE_HEADER.len()));
    for row in wal::table_rows(results) {
        let _ = writeln!(out, "| {} |", row.join(" | "));
    }
    let _ = writeln!(out, "\n{}", wal::NOTE);
}

/// `results.json`'s `wal`: a field per insert method, or `unavailable` saying why.
fn json_wal(results: &LabResults) -> Value {
    let methods: serde_json::Map<String, Value> = wal::by_method(results)
        .iter()
        .map(|f: &WalFigure| {
            let figure = json!({
                "rows": f.rows,
                "wal_bytes": f.bytes,
                "wal_bytes_per_row": f.per_row(),
                "relative_to_copy": f.relative_to_copy,
            });
            (f.variant.clone(), figure)
        })
        .collect();
    json!({
        "methods": methods,
        "unavailable": wal::unavailable(results),
        "note": wal::NOTE,
    })
}

fn ms(duration: std::time::Duration) -> f64 {
    duration.as_secs_f64() * 1e3
}

/// `results.json`.
pub fn json(results: &LabResults) -> Value {
    let options = &results.options;
    json!({
        "tool": "sluice lab",
        "server_version": results.server_version,
        "upstream": results.upstream,
        "real_rtt_ms": ms(results.real_rtt),
        "elapsed_ms": ms(results.elapsed),
        "export_source": results.export_source,
        "options": {
            "rtts_ms": options.rtts.iter().map(|&r| ms(r)).collect::<Vec<_>>(),
            "export_rows": options.export_rows,
            "table": options.table,
            "fetch_sizes": options.fetch_sizes,
            "insert_rows": options.insert_rows,
            "batch_sizes": options.batch_sizes,
            "lob_count": options.lob_count,
            "lob_bytes": options.lob_bytes,
            "calls": options.calls,
            "cell_budget_ms": ms(options.cell_budget),
        },
        "latencies": results.latencies.iter().map(|l| json!({
            "injected_rtt_ms": ms(l.injected),
            "select1_median_ms": ms(l.select1),
        })).collect::<Vec<_>>(),
        "measurements": results.measurements.iter().map(|m| json!({
            "experiment": m.experiment.id(),
            "variant": m.variant,
            "rtt_ms": ms(m.rtt),
            "unit": m.experiment.unit(),
            "units": m.units,
            "measured_units": m.measured_units,
            "extrapolated": m.extrapolated(),
            "time_ms": m.time_ms(),
            "round_trips": m.round_trips,
            "measured_time_ms": ms(m.measured_time),
            "measured_round_trips": m.measured_round_trips,
            "proxy_round_trips": m.proxy_round_trips,
            "waiting_fraction": results.waiting(m),
            "wal_bytes": m.wal_bytes,
        })).collect::<Vec<_>>(),
        "wal": json_wal(results),
        "recommendations": crate::advice::recommendations(results),
        "charts": CHARTS.iter().map(|c| json!({"file": c.file, "title": c.title})).collect::<Vec<_>>(),
    })
}

/// Writes the report folder `dir` (created if needed; files of the same names
/// are replaced).
pub fn write_report(results: &LabResults, dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)?;
    for spec in &CHARTS {
        let svg = chart::render_svg(&chart_data(results, spec)).map_err(std::io::Error::other)?;
        std::fs::write(dir.join(spec.file), svg)?;
    }
    std::fs::write(dir.join("index.html"), html(results))?;
    std::fs::write(dir.join("summary.md"), markdown(results))?;
    let mut text = serde_json::to_string_pretty(&json(results)).map_err(std::io::Error::other)?;
    text.push('\n');
    std::fs::write(dir.join("results.json"), text)?;
    Ok(())
}
