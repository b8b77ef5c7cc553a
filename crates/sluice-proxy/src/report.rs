//! [`Report`]: what the proxy saw, per statement and per connection, and the
//! anti-patterns it recognised, as JSON, CSV or text.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde_json::{json, Value};

/// Figures of one statement text.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatementStats {
    /// The statement, white space folded.
    pub statement: String,
    /// Times it was executed (`Query`, `Execute` or a fast-path call).
    pub executions: u64,
    /// Round trips spent on it.
    pub round_trips: u64,
    /// Rows it returned.
    pub rows: u64,
    /// Bytes sent to the server for it.
    pub bytes_to_server: u64,
    /// Bytes the server sent back for it.
    pub bytes_to_client: u64,
}

impl StatementStats {
    fn add(&mut self, other: &StatementStats) {
        self.executions += other.executions;
        self.round_trips += other.round_trips;
        self.rows += other.rows;
        self.bytes_to_server += other.bytes_to_server;
        self.bytes_to_client += other.bytes_to_client;
    }
}

/// An anti-pattern from the seeds, recognised in the traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// The same statement executed many times, one round trip each.
    RowByRow {
        /// The statement.
        statement: String,
        /// Executions.
        executions: u64,
        /// Round trips they took.
        round_trips: u64,
    },
    /// A portal fetched in small batches, one round trip each.
    SmallFetches {
        /// Rows per fetch.
        fetch_size: u32,
        /// Fetches that stopped at the limit.
        fetches: u64,
    },
    /// Large objects read one call per object (or per piece).
    LocatorReads {
        /// Calls made.
        calls: u64,
    },
}

impl Finding {
    /// The finding in plain words.
    pub fn describe(&self) -> String {
        match self {
            Finding::RowByRow {
                statement,
                executions,
                round_trips,
            } => format!(
                "row-by-row: `{statement}` ran {executions} times in {round_trips} round trips, \
                 one each: batch it, pipeline it or use COPY"
            ),
            Finding::SmallFetches {
                fetch_size,
                fetches,
            } => format!(
                "small fetch batches: {fetches} fetches of {fetch_size} rows, one round trip each: \
                 fetch at least 1000 rows per trip, or stream the result"
            ),
            Finding::LocatorReads { calls } => format!(
                "locator-style LOB reads: {calls} separate large-object calls: fetch the bytes \
                 inline with their rows"
            ),
        }
    }
}

/// One connection's totals.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ConnectionReport {
    /// Sequence number of the connection.
    pub id: u64,
    /// The client's address.
    pub client: String,
    /// Round trips.
    pub round_trips: u64,
    /// Bytes from client to server.
    pub bytes_to_server: u64,
    /// Bytes from server to client.
    pub bytes_to_client: u64,
    /// Whether the protocol could be read (not TLS).
    pub readable: bool,
    /// Per statement.
    pub statements: Vec<StatementStats>,
    /// Anti-patterns recognised on this connection.
    pub findings: Vec<Finding>,
}

/// Everything the proxy saw since it started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Report {
    /// Connections in order of arrival (cancel requests are not listed; neither
    /// are refused clients, which never reached the server).
    pub connections: Vec<ConnectionReport>,
    /// Client connections open when the report was made.
    pub open_connections: usize,
    /// The proxy's limit of open client connections.
    pub max_connections: usize,
    /// Clients turned away, the limit being reached (or, rarely, no thread to be
    /// had for them).
    pub refused_connections: u64,
}

/// The pseudo-statement under which the CSV report counts refused clients (as
/// executions), when there were any.
pub const REFUSED: &str = "(connections refused: the proxy's limit was reached)";

/// Below this many executions nothing is called a pattern.
const PATTERN_MINIMUM: u64 = 100;

/// The anti-patterns in one connection's figures.
pub(crate) fn findings(
    statements: &[StatementStats],
    small_fetches: u64,
    fetch_size: u32,
    suspensions: u64,
    function_calls: u64,
) -> Vec<Finding> {
    let mut findings = Vec::new();
    let mut locator_calls = function_calls;
    for statement in statements {
        let lower = statement.statement.to_ascii_lowercase();
        let one_trip_each = statement.executions >= PATTERN_MINIMUM
            && statement.round_trips * 10 >= statement.executions * 9;
        if lower.contains("lo_get(") || lower.contains("loread(") || lower.contains("lo_read") {
            if one_trip_each {
                locator_calls += statement.executions;
            }
            continue;
        }
        if one_trip_each && !lower.starts_with("copy") && !lower.starts_with("(fast-path") {
            findings.push(Finding::RowByRow {
                statement: statement.statement.clone(),
                executions: statement.executions,
                round_trips: statement.round_trips,
            });
        }
    }
    if small_fetches >= 10 && suspensions >= 10 {
        findings.push(Finding::SmallFetches {
            fetch_size,
            fetches: suspensions,
        });
    }
    if locator_calls >= PATTERN_MINIMUM {
        findings.push(Finding::LocatorReads {
            calls: locator_calls,
        });
    }
    findings
}

impl Report {
    /// Figures per statement over all connections, most round trips first.
    pub fn statements(&self) -> Vec<StatementStats> {
        let mut merged: BTreeMap<&str, StatementStats> = BTreeMap::new();
        for connection in &self.connections {
            for statement in &connection.statements {
                merged
                    .entry(&statement.statement)
                    .or_insert_with(|| StatementStats {
                        statement: statement.statement.clone(),
                        ..StatementStats::default()
                    })
                    .add(statement);
            }
        }
        let mut statements: Vec<StatementStats> = merged.into_values().collect();
        statements.sort_by(|a, b| {
            b.round_trips
                .cmp(&a.round_trips)
                .then(a.statement.cmp(&b.statement))
        });
        statements
    }

    /// Round trips over all connections.
    pub fn round_trips(&self) -> u64 {
        self.connections
            .iter()
            .map(|connection| connection.round_trips)
            .sum()
    }

    /// Every finding, with the connection it was seen on.
    pub fn findings(&self) -> Vec<(u64, &Finding)> {
        self.connections
            .iter()
            .flat_map(|connection| {
                connection
                    .findings
                    .iter()
                    .map(move |finding| (connection.id, finding))
            })
            .collect()
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        let statement = |s: &StatementStats| {
            json!({
                "statement": s.statement,
                "executions": s.executions,
                "round_trips": s.round_trips,
                "rows": s.rows,
                "bytes_to_server": s.bytes_to_server,
                "bytes_to_client": s.bytes_to_client,
            })
        };
        json!({
            "max_connections": self.max_connections,
            "open_connections": self.open_connections,
            "refused_connections": self.refused_connections,
            "round_trips": self.round_trips(),
            "statements": self.statements().iter().map(statement).collect::<Vec<_>>(),
            "connections": self.connections.iter().map(|c| json!({
                "id": c.id,
                "client": c.client,
                "round_trips": c.round_trips,
                "bytes_to_server": c.bytes_to_server,
                "bytes_to_client": c.bytes_to_client,
                "readable": c.readable,
                "statements": c.statements.iter().map(statement).collect::<Vec<_>>(),
                "findings": c.findings.iter().map(Finding::describe).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "findings": self.findings().iter().map(|(id, f)| json!({
                "connection": id,
                "finding": f.describe(),
            })).collect::<Vec<_>>(),
        })
    }

    /// The per-statement table as CSV; refused clients, if any, are counted as
    /// the executions of a pseudo-statement ([`REFUSED`]).
    pub fn to_csv(&self) -> String {
        let mut csv =
            String::from("statement,executions,round_trips,rows,bytes_to_server,bytes_to_client\n");
        let refused = (self.refused_connections > 0).then(|| StatementStats {
            statement: REFUSED.to_owned(),
            executions: self.refused_connections,
            ..StatementStats::default()
        });
        for s in self.statements().into_iter().chain(refused) {
            let _ = writeln!(
                csv,
                "\"{}\",{},{},{},{},{}",
                s.statement.replace('"', "\"\""),
                s.executions,
                s.round_trips,
                s.rows,
                s.bytes_to_server,
                s.bytes_to_client
            );
        }
        csv
    }

    /// A short summary for people: totals, the busiest statements, findings.
    pub fn to_text(&self) -> String {
        let mut text = String::new();
        let sent: u64 = self.connections.iter().map(|c| c.bytes_to_server).sum();
        let received: u64 = self.connections.iter().map(|c| c.bytes_to_client).sum();
        let _ = writeln!(
            text,
            "{} connections, {} round trips, {sent} bytes to the server, {received} bytes back",
            self.connections.len(),
            self.round_trips()
        );
        if self.refused_connections > 0 {
            let _ = writeln!(
                text,
                "refused connections: {} (the limit of {} open connections was reached)",
                self.refused_connections, self.max_connections
            );
        }
        for s in self.statements().iter().take(10) {
            let _ = writeln!(
                text,
                "  {:>8} trips {:>8} runs {:>10} rows  {}",
                s.round_trips, s.executions, s.rows, s.statement
            );
        }
        for (id, finding) in self.findings() {
            let _ = writeln!(text, "connection {id}: {}", finding.describe());
        }
        text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stats(statement: &str, executions: u64, round_trips: u64) -> StatementStats {
        StatementStats {
            statement: statement.into(),
            executions,
            round_trips,
            ..StatementStats::default()
        }
    }

    #[test]
    fn patterns_are_named_and_copy_is_not() {
        let found = findings(
            &[
                stats("insert into t values ($1)", 1000, 1000),
                stats("copy t from stdin", 1, 3),
                stats("insert into t values ($1), ($2)", 1000, 10),
                stats("select lo_get($1)", 500, 500),
            ],
            100,
            10,
            100,
            0,
        );
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(
            matches!(&found[0], Finding::RowByRow { statement, .. } if statement == "insert into t values ($1)")
        );
        assert!(matches!(
            found[1],
            Finding::SmallFetches {
                fetch_size: 10,
                fetches: 100
            }
        ));
        assert!(matches!(found[2], Finding::LocatorReads { calls: 500 }));
        assert!(findings(&[stats("copy t from stdin", 1, 3)], 0, 0, 0, 0).is_empty());
    }

    #[test]
    fn refusals_are_counted_in_every_form() {
        let report = Report {
            max_connections: 32,
            refused_connections: 5,
            ..Report::default()
        };
        assert_eq!(report.to_json()["refused_connections"], 5);
        assert_eq!(report.to_json()["max_connections"], 32);
        assert!(report
            .to_csv()
            .contains(&format!("\"{REFUSED}\",5,0,0,0,0\n")));
        assert!(report
            .to_text()
            .contains("refused connections: 5 (the limit of 32 open connections was reached)"));
        let quiet = Report::default();
        assert!(!quiet.to_csv().contains(REFUSED));
        assert!(!quiet.to_text().contains("refused"));
    }
}
