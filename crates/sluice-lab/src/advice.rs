//! Recommendations for the measured network, computed from the cells: how much of
//! each slow variant's time is spent waiting on round trips, and what the fast
//! variants cost instead; and what each insert method costs the server in WAL.

use std::time::Duration;

use crate::{human_duration, thousands, Experiment, LabResults, Measurement};

/// A fetch size counts as "good enough" when it takes at most this much longer
/// than streaming…
const GOOD_ENOUGH: f64 = 1.5;
/// …or spends at most this share of its time waiting.
const LOW_WAITING: f64 = 0.2;

fn percent(fraction: f64) -> String {
    if fraction >= 0.995 {
        // Capped: the per-trip latency is a median, the run had its own.
        "≈ 100%".to_owned()
    } else {
        format!("{:.0}%", fraction * 100.0)
    }
}

fn trips(count: u64) -> String {
    format!(
        "{} round trip{}",
        thousands(count),
        if count == 1 { "" } else { "s" }
    )
}

/// `0.5 s`, with `≈` in front when extrapolated.
fn took(m: &Measurement) -> String {
    let approx = if m.extrapolated() { "≈ " } else { "" };
    format!("{approx}{}", human_duration(m.time))
}

/// A per-row byte figure, rounded: `5,731`.
fn bytes(per_row: f64) -> String {
    thousands(per_row.round() as u64)
}

/// Row by row against COPY in WAL bytes per row, with the other methods, from
/// the figures [`crate::wal::by_method`] keeps.
fn wal_advice(results: &LabResults) -> Option<String> {
    let figures = crate::wal::by_method(results);
    let find = |variant: &str| figures.iter().find(|f| f.variant == variant);
    let (slow, copy) = (find("row-by-row")?, find("COPY")?);
    let factor = slow.relative_to_copy?;
    let others: Vec<String> = figures
        .iter()
        .filter(|f| f.variant != "row-by-row" && f.variant != "COPY")
        .map(|f| {
            format!(
                "{}: {}",
                f.variant.replace("batch ", "batches of "),
                bytes(f.per_row())
            )
        })
        .collect();
    // Why, only when the numbers show it: COPY logs a page's worth of rows in one
    // multi-insert record, an INSERT one record per row (whatever its batch).
    let why = if factor > 1.05 {
        " COPY logs many rows per WAL record, an INSERT one record per row: less WAL \
         to flush, archive and replicate."
    } else {
        ""
    };
    Some(format!(
        "Server side: row by row writes {} bytes of WAL per row, {} the {} of COPY \
         ({}measured: other sessions' WAL meanwhile counts too).{why}",
        bytes(slow.per_row()),
        crate::wal::times(factor),
        bytes(copy.per_row()),
        if others.is_empty() {
            String::new()
        } else {
            format!("{}; ", others.join(", "))
        },
    ))
}

/// The recommendations, most important first.
pub fn recommendations(results: &LabResults) -> Vec<String> {
    let mut out = Vec::new();
    let Some(rtt) = results.options.rtts.iter().copied().max() else {
        return out;
    };
    let real = results.real_rtt;
    let overhead = results
        .latencies
        .iter()
        .find(|l| l.injected == Duration::ZERO)
        .map(|l| l.select1.saturating_sub(real));
    out.push(format!(
        "This network's real round trip to {} takes {} (median `select 1`, without the proxy){}. \
         Every round trip below pays that plus the injected RTT.",
        results.upstream,
        human_duration(real),
        overhead.map_or(String::new(), |o| format!(
            "; the lab's proxy adds {} of its own",
            human_duration(o)
        )),
    ));
    let at = human_duration(rtt);

    // Export: the smallest fetch size against streaming.
    let fetches: Vec<&Measurement> = results
        .measurements
        .iter()
        .filter(|m| m.experiment == Experiment::Export && m.rtt == rtt && m.variant != "streaming")
        .collect();
    let streaming = results.get(Experiment::Export, "streaming", rtt);
    if let (Some(smallest), Some(streaming)) = (
        fetches
            .iter()
            .min_by_key(|m| m.variant.parse::<u64>().unwrap_or(u64::MAX)),
        streaming,
    ) {
        let good = fetches
            .iter()
            .filter(|m| {
                m.time.as_secs_f64() <= streaming.time.as_secs_f64() * GOOD_ENOUGH
                    || results.waiting(m) <= LOW_WAITING
            })
            .min_by_key(|m| m.variant.parse::<u64>().unwrap_or(u64::MAX));
        let waiting = results.waiting(smallest);
        let advice = match good {
            Some(good) if good.variant == smallest.variant => format!(
                "any fetch size will do here (streaming: {}, {})",
                took(streaming),
                trips(streaming.round_trips)
            ),
            Some(good) => format!(
                "use a fetch size of ≥ {} or streaming (fetch size {}: {}; streaming: {}, {})",
                thousands(good.variant.parse().unwrap_or(0)),
                thousands(good.variant.parse().unwrap_or(0)),
                took(good),
                took(streaming),
                trips(streaming.round_trips)
            ),
            None => {
                let closest = fetches
                    .iter()
                    .min_by(|a, b| a.time.cmp(&b.time))
                    .expect("at least the smallest");
                format!(
                    "stream the result ({}, {}); of the fetch sizes, {} rows per round trip \
                     comes closest ({}, {})",
                    took(streaming),
                    trips(streaming.round_trips),
                    thousands(closest.variant.parse().unwrap_or(0)),
                    took(closest),
                    trips(closest.round_trips)
                )
            }
        };
        out.push(format!(
            "Export: at {at} RTT a fetch size of {} spends {} of the time waiting \
             ({} for {} rows, {}); {advice}.",
            smallest.variant,
            percent(waiting),
            trips(smallest.round_trips),
            thousands(smallest.units),
            took(smallest),
        ));
    }

    // Insert: row by row against the bulk methods.
    let row_by_row = results.get(Experiment::Insert, "row-by-row", rtt);
    let copy = results.get(Experiment::Insert, "COPY", rtt);
    let pipelined = results.get(Experiment::Insert, "pipelined", rtt);
    let best_batch = results
        .measurements
        .iter()
        .filter(|m| {
            m.experiment == Experiment::Insert && m.rtt == rtt && m.variant.starts_with("batch ")
        })
        .min_by(|a, b| a.time.cmp(&b.time));
    if let (Some(slow), Some(copy)) = (row_by_row, copy) {
        let factor = slow.time.as_secs_f64() / copy.time.as_secs_f64().max(1e-6);
        let mut others = Vec::new();
        if let Some(batch) = best_batch {
            others.push(format!(
                "{}: {} ({})",
                batch.variant.replace("batch ", "batches of "),
                took(batch),
                trips(batch.round_trips)
            ));
        }
        if let Some(pipelined) = pipelined {
            others.push(format!(
                "pipelined: {} ({})",
                took(pipelined),
                trips(pipelined.round_trips)
            ));
        }
        out.push(format!(
            "Insert: at {at} RTT inserting {} rows row by row takes {} ({}, {} waiting); \
             COPY takes {} ({}), {:.0}× faster{}. Load in bulk with COPY (`sluice import`); \
             where an application inserts, send multi-row or pipelined INSERTs.",
            thousands(slow.units),
            took(slow),
            trips(slow.round_trips),
            percent(results.waiting(slow)),
            took(copy),
            trips(copy.round_trips),
            factor,
            if others.is_empty() {
                String::new()
            } else {
                format!("; {}", others.join(", "))
            }
        ));
    }

    out.extend(wal_advice(results));

    // Large objects.
    if let (Some(inline), Some(locator)) = (
        results.get(Experiment::Lob, "inline", rtt),
        results.get(Experiment::Lob, "locator", rtt),
    ) {
        out.push(format!(
            "Large objects: at {at} RTT reading {} objects of {} bytes locator-style (one call \
             per object) takes {} ({}, {} waiting); inline with their rows it takes {} ({}). \
             Select the bytes with the rows (`lo_get(oid)` or a bytea column) instead of \
             fetching locators and reading each one.",
            thousands(locator.units),
            thousands(results.options.lob_bytes),
            took(locator),
            trips(locator.round_trips),
            percent(results.waiting(locator)),
            took(inline),
            trips(inline.round_trips),
        ));
    }

    // Many small calls.
    if let (Some(looped), Some(pipelined)) = (
        results.get(Experiment::Calls, "loop", rtt),
        results.get(Experiment::Calls, "pipelined", rtt),
    ) {
        out.push(format!(
            "Small calls: at {at} RTT {} calls in a loop take {} ({}, {} waiting); pipelined \
             they take {} ({}). Send many calls of one statement pipelined (`sluice call`, or \
             a driver's pipeline/batch mode).",
            thousands(looped.units),
            took(looped),
            trips(looped.round_trips),
            percent(results.waiting(looped)),
            took(pipelined),
            trips(pipelined.round_trips),
        ));
    }

    if results.measurements.iter().any(Measurement::extrapolated) {
        out.push(format!(
            "Figures marked ≈ (* in the tables) are extrapolated: those cells stopped after their time \
             budget of {} and the remaining rows were estimated from the measured rate and the \
             known round trips per row.",
            human_duration(results.options.cell_budget)
        ));
    }
    out
}
