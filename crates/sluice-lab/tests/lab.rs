//! The lab against a real PostgreSQL: round-trip counts behave as the seeds say,
//! the report opens and names every chart, the charts have axes with units and a
//! legend, and nothing is left behind in the database.

use std::collections::HashMap;
use std::path::Path;
use std::time::Duration;

use sluice_lab::chart::EXTRAPOLATED_LEGEND;
use sluice_lab::{Experiment, LabOptions, LabResults, CHARTS};
use sluice_testkit::TestDb;

/// The tests count large objects before and after: one lab at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const MS: Duration = Duration::from_millis(1);

fn tiny() -> LabOptions {
    LabOptions {
        rtts: vec![Duration::ZERO, MS],
        export_rows: 2000,
        table: None,
        fetch_sizes: vec![10, 100, 1000, 10_000],
        insert_rows: 300,
        batch_sizes: vec![1, 10, 100],
        lob_count: 20,
        lob_bytes: 4096,
        calls: 100,
        // Nothing here comes near it: every figure is measured.
        cell_budget: Duration::from_secs(60),
    }
}

async fn run_lab(db: &TestDb, options: &LabOptions) -> (LabResults, Vec<String>) {
    let mut lines = Vec::new();
    let results = sluice_lab::run(db.url(), options, &mut |line: &str| {
        lines.push(line.to_owned())
    })
    .await
    .unwrap();
    (results, lines)
}

fn large_objects(db: &TestDb) -> u64 {
    db.query_text("select count(*) from pg_largeobject_metadata")
        .parse()
        .unwrap()
}

fn lab_tables(db: &TestDb) -> String {
    db.query_text(
        "select count(*) from pg_tables where schemaname = current_schema() \
         and tablename like 'sluice\\_lab\\_%'",
    )
}

/// A tag of an HTML or SVG document.
#[derive(Debug)]
struct Tag {
    name: String,
    closing: bool,
    self_closing: bool,
    attributes: HashMap<String, String>,
    /// Byte offset just after the tag.
    end: usize,
}

/// A small tokenizer: tags with their attributes (quoted values), skipping
/// comments and `<!DOCTYPE>`.
fn tags(document: &str) -> Vec<Tag> {
    let mut out = Vec::new();
    let mut rest = 0;
    while let Some(start) = document[rest..].find('<').map(|i| i + rest) {
        if document[start..].starts_with("<!--") {
            rest = document[start..]
                .find("-->")
                .map(|i| start + i + 3)
                .unwrap();
            continue;
        }
        let end = document[start..]
            .find('>')
            .map(|i| start + i)
            .expect("tag ends");
        rest = end + 1;
        let inner = &document[start + 1..end];
        if inner.starts_with('!') || inner.starts_with('?') {
            continue;
        }
        let closing = inner.starts_with('/');
        let self_closing = inner.ends_with('/');
        let inner = inner.trim_start_matches('/').trim_end_matches('/');
        let name_end = inner.find(char::is_whitespace).unwrap_or(inner.len());
        let mut attributes = HashMap::new();
        let mut attrs = &inner[name_end..];
        while let Some(eq) = attrs.find('=') {
            let key = attrs[..eq].trim().to_owned();
            let value_start = attrs[eq + 1..].find('"').unwrap() + eq + 2;
            let value_end = attrs[value_start..].find('"').unwrap() + value_start;
            attributes.insert(key, attrs[value_start..value_end].to_owned());
            attrs = &attrs[value_end + 1..];
        }
        out.push(Tag {
            name: inner[..name_end].to_ascii_lowercase(),
            closing,
            self_closing,
            attributes,
            end: rest,
        });
    }
    out
}

/// Every element opened is closed, in order (HTML void elements excepted).
fn assert_balanced(document: &str, what: &str) {
    const VOID: [&str; 6] = ["meta", "img", "br", "hr", "link", "input"];
    let mut stack: Vec<String> = Vec::new();
    for tag in tags(document) {
        if tag.self_closing || (!tag.closing && VOID.contains(&tag.name.as_str())) {
            continue;
        }
        if tag.closing {
            let open = stack.pop();
            assert_eq!(
                open.as_deref(),
                Some(tag.name.as_str()),
                "{what}: </{}> closes {open:?}",
                tag.name
            );
        } else {
            stack.push(tag.name);
        }
    }
    assert!(stack.is_empty(), "{what}: unclosed {stack:?}");
}

/// The text up to the next tag after `tag`, white space trimmed.
fn text_after<'a>(document: &'a str, tag: &Tag) -> &'a str {
    let rest = &document[tag.end..];
    rest[..rest.find('<').unwrap_or(rest.len())].trim()
}

/// The report in `dir` opens, names and shows every chart, and each chart has
/// axis labels with units and a legend naming every RTT.
fn check_report(dir: &Path, results: &LabResults) {
    let html = std::fs::read_to_string(dir.join("index.html")).unwrap();
    assert!(html.starts_with("<!DOCTYPE html>"));
    assert_balanced(&html, "index.html");
    let tags = tags(&html);
    let headings: Vec<&str> = tags
        .iter()
        .filter(|t| t.name == "h2" && !t.closing)
        .map(|t| text_after(&html, t))
        .collect();
    let images: Vec<&Tag> = tags.iter().filter(|t| t.name == "img").collect();
    assert!(tags.iter().any(|t| t.name == "table"), "a table of numbers");
    assert_eq!(images.len(), CHARTS.len(), "one image per chart");
    for spec in &CHARTS {
        assert!(
            headings.contains(&spec.title),
            "no <h2> names {:?}: {headings:?}",
            spec.title
        );
        let image = images
            .iter()
            .find(|t| t.attributes.get("src").map(String::as_str) == Some(spec.file))
            .unwrap_or_else(|| panic!("{} is not shown", spec.file));
        assert_eq!(image.attributes["alt"], spec.title);
        // Nothing the page needs is elsewhere than beside it.
        assert!(!spec.file.contains('/'));

        let svg = std::fs::read_to_string(dir.join(spec.file))
            .unwrap_or_else(|error| panic!("{}: {error}", spec.file));
        assert!(svg.starts_with("<svg"), "{}", spec.file);
        assert_balanced(&svg, spec.file);
        let texts: Vec<&str> = self::tags(&svg)
            .iter()
            .filter(|t| t.name == "text" && !t.closing)
            .map(|t| text_after(&svg, t))
            .collect();
        for label in [spec.x_desc, spec.y_desc] {
            assert!(
                texts.contains(&label),
                "{}: no axis label {label:?}",
                spec.file
            );
            assert!(label.contains('('), "{label:?} names no unit");
        }
        assert!(
            spec.y_desc.starts_with("time (ms") || spec.y_desc.starts_with("round trips (count"),
            "{}",
            spec.y_desc
        );
        for &rtt in &results.options.rtts {
            let legend = sluice_lab::rtt_label(rtt);
            assert!(
                texts.contains(&legend.as_str()),
                "{}: no legend {legend:?}",
                spec.file
            );
        }
        for variant in results.variants(spec.experiment) {
            assert!(
                texts.contains(&variant.as_str()),
                "{}: no tick {variant:?}",
                spec.file
            );
        }
    }
    let summary = std::fs::read_to_string(dir.join("summary.md")).unwrap();
    assert!(summary.contains("## Recommendations"));
    for spec in &CHARTS {
        assert!(summary.contains(spec.file));
    }
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("results.json")).unwrap()).unwrap();
    assert_eq!(
        json["measurements"].as_array().unwrap().len(),
        results.measurements.len()
    );
    assert!(json["real_rtt_ms"].as_f64().unwrap() > 0.0);
    // The WAL figures are in every output.
    assert!(summary.contains("| method | rows | WAL bytes | WAL bytes per row |"));
    assert!(html.contains("<th>WAL bytes per row</th>"));
    assert!(
        json["wal"]["methods"]["COPY"]["wal_bytes_per_row"]
            .as_f64()
            .unwrap()
            > 0.0
    );
}

#[tokio::test]
async fn the_lab_counts_what_the_seeds_predict_and_its_report_names_every_chart() {
    let _serial = SERIAL.lock().await;
    let db = TestDb::new();
    let objects_before = large_objects(&db);
    let options = tiny();
    let (results, lines) = run_lab(&db, &options).await;
    assert!(lines.iter().any(|l| l.contains("real path")), "{lines:?}");

    // Nothing is left behind.
    assert_eq!(lab_tables(&db), "0");
    assert_eq!(large_objects(&db), objects_before);

    // Every cell ran, in full, and the proxy saw the trips sluice counted.
    assert_eq!(results.measurements.len(), 2 * (5 + 5 + 2 + 2));
    for m in &results.measurements {
        assert!(!m.extrapolated(), "{m:?}");
        if m.variant == "pipelined" {
            // Requests and answers overlap: where one trip ends is a matter of
            // timing for both counters; both stay a constant few.
            assert!(m.proxy_round_trips <= 10, "{m:?}");
        } else {
            assert_eq!(m.proxy_round_trips, m.round_trips, "{m:?}");
        }
    }
    let trips = |experiment, variant: &str, rtt| {
        results
            .get(experiment, variant, rtt)
            .unwrap_or_else(|| panic!("no {variant} at {rtt:?}"))
            .round_trips
    };
    for rtt in [Duration::ZERO, MS] {
        // Fetch size F costs about rows / F trips; streaming a constant few.
        let fetch10 = trips(Experiment::Export, "10", rtt);
        assert!((200..=205).contains(&fetch10), "fetch 10: {fetch10}");
        let fetch100 = trips(Experiment::Export, "100", rtt);
        assert!((20..=25).contains(&fetch100), "fetch 100: {fetch100}");
        assert!(trips(Experiment::Export, "streaming", rtt) <= 3);
        // Inserts: one trip per statement, bulk methods a constant few.
        assert!(trips(Experiment::Insert, "row-by-row", rtt) >= 300);
        let batch10 = trips(Experiment::Insert, "batch 10", rtt);
        assert!((30..=33).contains(&batch10), "batch 10: {batch10}");
        assert!(trips(Experiment::Insert, "pipelined", rtt) <= 5);
        assert!(trips(Experiment::Insert, "COPY", rtt) <= 3);
        // Large objects: a trip per locator, inline constant.
        assert!(trips(Experiment::Lob, "locator", rtt) >= 20);
        assert!(trips(Experiment::Lob, "inline", rtt) <= 3);
        // Calls: a trip each in a loop, a constant few pipelined.
        assert_eq!(trips(Experiment::Calls, "loop", rtt), 100);
        assert!(trips(Experiment::Calls, "pipelined", rtt) <= 5);
    }
    // Constant means: the same at both RTTs.
    for (experiment, variant) in [
        (Experiment::Export, "streaming"),
        (Experiment::Lob, "inline"),
        (Experiment::Calls, "pipelined"),
    ] {
        assert_eq!(
            trips(experiment, variant, Duration::ZERO),
            trips(experiment, variant, MS)
        );
    }
    // Every round trip pays the injected RTT.
    let slow = results.get(Experiment::Export, "10", MS).unwrap();
    assert!(slow.time >= MS * 200, "{slow:?}");
    assert!(
        slow.time
            > results
                .get(Experiment::Export, "streaming", MS)
                .unwrap()
                .time
    );
    assert!(results.real_rtt > Duration::ZERO && results.real_rtt < MS * 50);
    let through_1ms = results.trip_latency(MS);
    assert!(
        through_1ms >= MS && through_1ms < MS * 25,
        "{through_1ms:?}"
    );

    // WAL: every insert method wrote some, at every RTT. Each method runs in one
    // transaction (BEGIN … COMMIT, or the pipeline's single Sync), so row by row
    // does not pay a commit per row here; what reliably differs is the records:
    // every INSERT (row by row or batched) logs one heap record per row, COPY one
    // multi-insert record per page of rows. So row by row costs more WAL per row
    // than COPY (≈ 2× on PostgreSQL 15); row by row against batches is the same
    // records and is not ordered. Other sessions' WAL could only add noise, and
    // the tests run one lab at a time.
    for m in results
        .measurements
        .iter()
        .filter(|m| m.experiment == Experiment::Insert)
    {
        assert!(m.wal_bytes.is_some_and(|bytes| bytes > 0), "{m:?}");
    }
    assert_eq!(results.wal_error, None);
    let wal = sluice_lab::wal::by_method(&results);
    let variants: Vec<&str> = wal.iter().map(|f| f.variant.as_str()).collect();
    assert_eq!(
        variants,
        ["row-by-row", "batch 10", "batch 100", "pipelined", "COPY"]
    );
    let per_row = |variant: &str| wal.iter().find(|f| f.variant == variant).unwrap().per_row();
    assert!(
        per_row("row-by-row") > per_row("COPY"),
        "row by row {} vs COPY {} WAL bytes per row",
        per_row("row-by-row"),
        per_row("COPY")
    );

    let advice = sluice_lab::recommendations(&results);
    assert!(advice.iter().any(|line| line.starts_with("Server side:")));
    assert!(
        advice
            .iter()
            .any(|line| line.starts_with("Export: at 1 ms RTT a fetch size of 10 spends")),
        "{advice:#?}"
    );
    assert!(advice.iter().any(|line| line.starts_with("Insert:")));
    assert!(advice.iter().any(|line| line.starts_with("Large objects:")));
    assert!(advice.iter().any(|line| line.starts_with("Small calls:")));
    assert!(!advice.iter().any(|line| line.contains("extrapolated")));

    let dir = tempfile::tempdir().unwrap();
    sluice_lab::write_report(&results, dir.path()).unwrap();
    check_report(dir.path(), &results);
}

#[tokio::test]
async fn a_spent_budget_extrapolates_and_the_report_says_so() {
    let _serial = SERIAL.lock().await;
    let db = TestDb::new();
    db.execute(
        "create table events as select g as id, 'e' || g as name from generate_series(1, 1200) g",
    );
    let options = LabOptions {
        rtts: vec![MS],
        export_rows: 5000,
        table: Some("events".into()),
        fetch_sizes: vec![10],
        insert_rows: 500,
        batch_sizes: vec![1],
        lob_count: 3,
        lob_bytes: 100,
        calls: 400,
        cell_budget: Duration::from_millis(40),
    };
    let (results, _) = run_lab(&db, &options).await;
    assert_eq!(lab_tables(&db), "0");
    assert_eq!(db.query_text("select count(*) from events"), "1200");

    // The user's table holds 1200 rows: that is what is exported.
    let fetch = results.get(Experiment::Export, "10", MS).unwrap();
    assert_eq!(fetch.units, 1200);
    assert!(fetch.extrapolated(), "{fetch:?}");
    assert!(fetch.measured_units < 1200 && fetch.measured_units > 0);
    assert!((120..=125).contains(&fetch.round_trips), "{fetch:?}");
    assert!(fetch.time > fetch.measured_time);
    let streaming = results.get(Experiment::Export, "streaming", MS).unwrap();
    assert!(!streaming.extrapolated());
    assert_eq!(streaming.units, 1200);
    let row_by_row = results.get(Experiment::Insert, "row-by-row", MS).unwrap();
    assert!(row_by_row.extrapolated());
    assert!(row_by_row.round_trips >= 500, "{row_by_row:?}");
    let looped = results.get(Experiment::Calls, "loop", MS).unwrap();
    assert!(looped.extrapolated());
    assert_eq!(looped.round_trips, 400);
    // The proxy saw what was actually run.
    for m in results
        .measurements
        .iter()
        .filter(|m| m.variant != "pipelined")
    {
        assert_eq!(m.proxy_round_trips, m.measured_round_trips, "{m:?}");
    }

    let dir = tempfile::tempdir().unwrap();
    sluice_lab::write_report(&results, dir.path()).unwrap();
    check_report(dir.path(), &results);
    let html = std::fs::read_to_string(dir.path().join("index.html")).unwrap();
    assert!(html.contains("extrapolated from"), "the table says which");
    assert!(sluice_lab::recommendations(&results)
        .iter()
        .any(|line| line.contains("extrapolated")));
    let svg = std::fs::read_to_string(dir.path().join("export-time.svg")).unwrap();
    assert!(svg.contains(EXTRAPOLATED_LEGEND));
}
