//! [`Report`]: what the proxy saw, per statement fingerprint and per
//! connection, and the round-trip-wasting patterns it recognised ([`Finding`]),
//! as JSON, CSV or text.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::{json, Value};

use crate::patterns::{role, NPlusOne, Role, Session, SESSION_MINIMUM};

/// Figures of one statement fingerprint.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StatementStats {
    /// The statement's fingerprint (see [`crate::fingerprint`]).
    pub statement: String,
    /// One text sent with this fingerprint (the first), white space folded.
    pub example: String,
    /// Times it was executed (`Query`, `Execute` or a fast-path call).
    pub executions: u64,
    /// Times it was parsed with a `Parse` message (the extended protocol).
    pub parses: u64,
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
        self.parses += other.parses;
        self.round_trips += other.round_trips;
        self.rows += other.rows;
        self.bytes_to_server += other.bytes_to_server;
        self.bytes_to_client += other.bytes_to_client;
    }
}

/// A pattern wasting round trips, recognised in the traffic.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finding {
    /// One statement executed many times, one round trip each.
    RowByRow {
        /// The statement's fingerprint.
        statement: String,
        /// One text of it.
        example: String,
        /// Executions.
        executions: u64,
        /// Round trips they took.
        round_trips: u64,
        /// The proxy's added round-trip time (zero: none was set).
        rtt: Duration,
    },
    /// A statement run once per row (or per distinct key) of an earlier result.
    NPlusOne {
        /// The statement whose rows gave the values.
        parent: String,
        /// Rows it returned.
        rows: u64,
        /// Distinct values of those rows the statement was run with.
        keys: u64,
        /// The statement run once per row.
        statement: String,
        /// Its executions with a value from those rows.
        executions: u64,
        /// Round trips they took.
        round_trips: u64,
        /// The proxy's added round-trip time.
        rtt: Duration,
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
    /// Validation queries or session commands before most statements.
    SessionChatter {
        /// The chatter statements, most executed first.
        statements: Vec<String>,
        /// Statements of work preceded by chatter.
        preceded: u64,
        /// Statements of work.
        work: u64,
        /// Round trips spent on chatter.
        round_trips: u64,
        /// All round trips of the connection.
        total_round_trips: u64,
    },
    /// A transaction around nearly every single statement.
    TransactionPerStatement {
        /// Transactions holding one statement (or none).
        single: u64,
        /// Transactions.
        transactions: u64,
        /// Round trips spent on `BEGIN`, `COMMIT` and `ROLLBACK`.
        round_trips: u64,
        /// All round trips of the connection.
        total_round_trips: u64,
    },
    /// A statement parsed again for every execution.
    ParsedEveryTime {
        /// The statement's fingerprint.
        statement: String,
        /// Parses.
        parses: u64,
        /// Executions.
        executions: u64,
        /// Round trips spent on it.
        round_trips: u64,
        /// All round trips of the connection.
        total_round_trips: u64,
    },
}

/// `part` of `whole` as a whole percentage.
fn percent(part: u64, whole: u64) -> u64 {
    (part * 100).checked_div(whole).unwrap_or(0)
}

/// The time `round_trips` cost on the network, in words.
fn waiting(round_trips: u64, rtt: Duration) -> String {
    if rtt.is_zero() {
        let at_one_ms = Duration::from_millis(1) * round_trips as u32;
        format!("at 1 ms per round trip (a nearby server) they would wait {at_one_ms:.2?} on the network")
    } else {
        let waited = rtt * round_trips as u32;
        format!("{waited:.2?} waiting on the network at the RTT of {rtt:?}")
    }
}

impl Finding {
    /// The finding in plain words, with the fix.
    pub fn describe(&self) -> String {
        match self {
            Finding::RowByRow {
                statement,
                example,
                executions,
                round_trips,
                rtt,
            } => format!(
                "row by row: `{statement}` ran {executions} times in {round_trips} round trips, \
                 one each (e.g. `{example}`), {}: {}",
                waiting(*round_trips, *rtt),
                self.advice()
            ),
            Finding::NPlusOne {
                parent,
                rows,
                keys,
                statement,
                executions,
                round_trips,
                rtt,
            } => format!(
                "N+1 query: `{parent}` returned {rows} rows ({keys} distinct keys), then \
                 `{statement}` ran {executions} times with a value from them, {round_trips} round \
                 trips, {}: {}",
                waiting(*round_trips, *rtt),
                self.advice()
            ),
            Finding::SmallFetches {
                fetch_size,
                fetches,
            } => format!(
                "small fetch batches: {fetches} fetches of {fetch_size} rows, one round trip each: {}",
                self.advice()
            ),
            Finding::LocatorReads { calls } => format!(
                "locator-style LOB reads: {calls} separate large-object calls: {}",
                self.advice()
            ),
            Finding::SessionChatter {
                statements,
                preceded,
                work,
                round_trips,
                total_round_trips,
            } => format!(
                "chatty session: {preceded} of {work} statements were preceded by `{}`, \
                 {round_trips} round trips ({}% of all): {}",
                statements.join("`, `"),
                percent(*round_trips, *total_round_trips),
                self.advice()
            ),
            Finding::TransactionPerStatement {
                single,
                transactions,
                round_trips,
                total_round_trips,
            } => format!(
                "a transaction per statement: {single} of {transactions} transactions held one \
                 statement, BEGIN/COMMIT took {round_trips} round trips ({}% of all): {}",
                percent(*round_trips, *total_round_trips),
                self.advice()
            ),
            Finding::ParsedEveryTime {
                statement,
                parses,
                executions,
                round_trips,
                total_round_trips,
            } => format!(
                "parsed on every execution: `{statement}` was parsed {parses} times for \
                 {executions} executions ({round_trips} round trips, {}% of all): {}",
                percent(*round_trips, *total_round_trips),
                self.advice()
            ),
        }
    }
}

/// What a [`Finding`] is, as `sluice proxy --fail-on` and the JSON report's
/// `kind` name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FindingKind {
    /// [`Finding::RowByRow`].
    RowByRow,
    /// [`Finding::NPlusOne`].
    NPlusOne,
    /// [`Finding::SmallFetches`].
    SmallFetches,
    /// [`Finding::LocatorReads`].
    LocatorReads,
    /// [`Finding::SessionChatter`].
    SessionChatter,
    /// [`Finding::TransactionPerStatement`].
    TransactionPerStatement,
    /// [`Finding::ParsedEveryTime`].
    ParsedEveryTime,
}

impl FindingKind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [FindingKind; 7] = [
        FindingKind::NPlusOne,
        FindingKind::RowByRow,
        FindingKind::SmallFetches,
        FindingKind::LocatorReads,
        FindingKind::SessionChatter,
        FindingKind::TransactionPerStatement,
        FindingKind::ParsedEveryTime,
    ];

    /// The kind's name: `n-plus-one`, `row-by-row`, …
    pub fn name(self) -> &'static str {
        match self {
            FindingKind::RowByRow => "row-by-row",
            FindingKind::NPlusOne => "n-plus-one",
            FindingKind::SmallFetches => "small-fetches",
            FindingKind::LocatorReads => "locator-reads",
            FindingKind::SessionChatter => "session-chatter",
            FindingKind::TransactionPerStatement => "transaction-per-statement",
            FindingKind::ParsedEveryTime => "parsed-every-time",
        }
    }

    /// The kind named `name`.
    pub fn from_name(name: &str) -> Option<FindingKind> {
        FindingKind::ALL
            .into_iter()
            .find(|kind| kind.name() == name)
    }
}

/// True for a statement that reads (its fix is one statement for many keys,
/// never COPY).
fn is_read(statement: &str) -> bool {
    statement.starts_with("select") || statement.starts_with("with")
}

impl Finding {
    /// What the finding is.
    pub fn kind(&self) -> FindingKind {
        match self {
            Finding::RowByRow { .. } => FindingKind::RowByRow,
            Finding::NPlusOne { .. } => FindingKind::NPlusOne,
            Finding::SmallFetches { .. } => FindingKind::SmallFetches,
            Finding::LocatorReads { .. } => FindingKind::LocatorReads,
            Finding::SessionChatter { .. } => FindingKind::SessionChatter,
            Finding::TransactionPerStatement { .. } => FindingKind::TransactionPerStatement,
            Finding::ParsedEveryTime { .. } => FindingKind::ParsedEveryTime,
        }
    }

    /// The round trips the pattern cost, where the proxy counted them.
    pub fn round_trips(&self) -> Option<u64> {
        match self {
            Finding::RowByRow { round_trips, .. }
            | Finding::NPlusOne { round_trips, .. }
            | Finding::SessionChatter { round_trips, .. }
            | Finding::TransactionPerStatement { round_trips, .. }
            | Finding::ParsedEveryTime { round_trips, .. } => Some(*round_trips),
            Finding::SmallFetches { fetches, .. } => Some(*fetches),
            Finding::LocatorReads { calls } => Some(*calls),
        }
    }

    /// The fix, in a sentence.
    pub fn advice(&self) -> String {
        match self {
            Finding::RowByRow { statement, .. } if is_read(statement) => {
                "read the rows in one statement (a join, or `= any($1)` with all the keys), \
                 or pipeline the statements"
                    .into()
            }
            Finding::RowByRow { .. } => "batch it, pipeline it or use COPY".into(),
            Finding::NPlusOne { keys, .. } => format!(
                "load them in one statement (a join, or `= any($1)` with the {keys} keys; \
                 an ORM's eager loading, such as SQLAlchemy's selectinload, does this)"
            ),
            Finding::SmallFetches { .. } => {
                "fetch at least 1000 rows per trip, or stream the result".into()
            }
            Finding::LocatorReads { .. } => "fetch the bytes inline with their rows".into(),
            Finding::SessionChatter { .. } => {
                "validate connections only after they sat idle (not on every borrow), and set \
                 session settings once per connection"
                    .into()
            }
            Finding::TransactionPerStatement { .. } => {
                "use autocommit for single statements, or group statements in one transaction"
                    .into()
            }
            Finding::ParsedEveryTime { .. } => {
                "prepare it once and reuse the prepared statement".into()
            }
        }
    }

    /// The finding as fields: `kind`, `message` (its [`Finding::describe`]),
    /// `advice`, `round_trips`, `waiting_seconds` (at the proxy's RTT, when
    /// one is set) and the kind's own figures.
    pub fn to_json(&self) -> Value {
        let mut fields = match self {
            Finding::RowByRow {
                statement,
                example,
                executions,
                ..
            } => json!({"statement": statement, "example": example, "executions": executions}),
            Finding::NPlusOne {
                parent,
                rows,
                keys,
                statement,
                executions,
                ..
            } => json!({
                "parent": parent,
                "parent_rows": rows,
                "keys": keys,
                "statement": statement,
                "executions": executions,
            }),
            Finding::SmallFetches {
                fetch_size,
                fetches,
            } => json!({"fetch_size": fetch_size, "fetches": fetches}),
            Finding::LocatorReads { calls } => json!({"calls": calls}),
            Finding::SessionChatter {
                statements,
                preceded,
                work,
                total_round_trips,
                ..
            } => json!({
                "statements": statements,
                "preceded": preceded,
                "work": work,
                "total_round_trips": total_round_trips,
            }),
            Finding::TransactionPerStatement {
                single,
                transactions,
                total_round_trips,
                ..
            } => json!({
                "single": single,
                "transactions": transactions,
                "total_round_trips": total_round_trips,
            }),
            Finding::ParsedEveryTime {
                statement,
                parses,
                executions,
                total_round_trips,
                ..
            } => json!({
                "statement": statement,
                "parses": parses,
                "executions": executions,
                "total_round_trips": total_round_trips,
            }),
        };
        let waiting = match self {
            Finding::RowByRow {
                round_trips, rtt, ..
            }
            | Finding::NPlusOne {
                round_trips, rtt, ..
            } if !rtt.is_zero() => Some((*rtt * *round_trips as u32).as_secs_f64()),
            _ => None,
        };
        fields["kind"] = json!(self.kind().name());
        fields["round_trips"] = json!(self.round_trips());
        fields["waiting_seconds"] = json!(waiting);
        fields["advice"] = json!(self.advice());
        fields["message"] = json!(self.describe());
        fields
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
    /// When its first byte went by.
    pub started: Option<Instant>,
    /// When its last byte (so far) went by.
    pub ended: Option<Instant>,
    /// Per statement fingerprint, most round trips first.
    pub statements: Vec<StatementStats>,
    /// Patterns recognised on this connection.
    pub findings: Vec<Finding>,
}

impl ConnectionReport {
    /// Time from its first byte to its last.
    pub fn wall_time(&self) -> Duration {
        wall_time(self.started, self.ended)
    }
}

fn wall_time(started: Option<Instant>, ended: Option<Instant>) -> Duration {
    match (started, ended) {
        (Some(started), Some(ended)) => ended.saturating_duration_since(started),
        _ => Duration::ZERO,
    }
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
    /// The round-trip time the proxy adds.
    pub rtt: Duration,
}

/// The pseudo-statement under which the CSV report counts refused clients (as
/// executions), when there were any.
pub const REFUSED: &str = "(connections refused: the proxy's limit was reached)";

/// Below this many executions, one round trip each, nothing is called row by row.
const ROW_BY_ROW_MINIMUM: u64 = 50;
/// Below this many calls, large-object reads are not called locator-style.
const LOCATOR_MINIMUM: u64 = 100;

/// What one connection showed, for [`findings`].
pub(crate) struct Observed<'a> {
    pub(crate) statements: &'a [StatementStats],
    pub(crate) small_fetches: u64,
    pub(crate) fetch_size: u32,
    pub(crate) suspensions: u64,
    pub(crate) function_calls: u64,
    pub(crate) n_plus_ones: Vec<NPlusOne>,
    pub(crate) session: Session,
    pub(crate) round_trips: u64,
    pub(crate) rtt: Duration,
}

/// Whether a statement took (nearly) one round trip per execution, often enough.
fn one_trip_each(statement: &StatementStats, minimum: u64) -> bool {
    statement.executions >= minimum && statement.round_trips * 10 >= statement.executions * 9
}

fn is_large_object_read(statement: &StatementStats) -> bool {
    let text = &statement.statement;
    text.contains("lo_get(") || text.contains("loread(") || text.contains("lo_read")
}

/// The patterns in one connection's figures.
pub(crate) fn findings(observed: &Observed<'_>) -> Vec<Finding> {
    let n_plus_ones = n_plus_one(observed);
    // A statement run once per row of a result is named as the N+1 it is, not
    // also as row by row.
    let mut findings: Vec<Finding> = row_by_row(observed)
        .into_iter()
        .filter(|finding| {
            !matches!(finding, Finding::RowByRow { statement, .. }
                if observed.n_plus_ones.iter().any(|n| &n.statement == statement))
        })
        .collect();
    findings.extend(n_plus_ones);
    findings.extend(session_findings(observed));
    findings.extend(parsed_every_time(observed));
    if observed.small_fetches >= 10 && observed.suspensions >= 10 {
        findings.push(Finding::SmallFetches {
            fetch_size: observed.fetch_size,
            fetches: observed.suspensions,
        });
    }
    let locator_calls = observed.function_calls
        + observed
            .statements
            .iter()
            .filter(|s| is_large_object_read(s) && one_trip_each(s, LOCATOR_MINIMUM))
            .map(|s| s.executions)
            .sum::<u64>();
    if locator_calls >= LOCATOR_MINIMUM {
        findings.push(Finding::LocatorReads {
            calls: locator_calls,
        });
    }
    findings
}

/// Statements run one round trip each, often (not COPY, large-object reads or
/// session chatter, which have findings of their own).
fn row_by_row(observed: &Observed<'_>) -> Vec<Finding> {
    observed
        .statements
        .iter()
        .filter(|s| one_trip_each(s, ROW_BY_ROW_MINIMUM))
        .filter(|s| !is_large_object_read(s))
        .filter(|s| !s.statement.starts_with("copy") && !s.statement.starts_with('('))
        .filter(|s| role(&s.statement) == Role::Work)
        .map(|s| Finding::RowByRow {
            statement: s.statement.clone(),
            example: s.example.clone(),
            executions: s.executions,
            round_trips: s.round_trips,
            rtt: observed.rtt,
        })
        .collect()
}

fn n_plus_one(observed: &Observed<'_>) -> Vec<Finding> {
    observed
        .n_plus_ones
        .iter()
        .map(|found| {
            // The follower's round trips, in proportion to its executions that were part of it.
            let trips = observed
                .statements
                .iter()
                .find(|s| s.statement == found.statement)
                .map_or(found.executions, |s| {
                    (s.round_trips * found.executions)
                        .checked_div(s.executions)
                        .unwrap_or(0)
                });
            Finding::NPlusOne {
                parent: found.parent.clone(),
                rows: found.rows,
                keys: found.keys,
                statement: found.statement.clone(),
                executions: found.executions,
                round_trips: trips,
                rtt: observed.rtt,
            }
        })
        .collect()
}

/// Chatter before most statements; a transaction around most single statements.
fn session_findings(observed: &Observed<'_>) -> Vec<Finding> {
    let session = &observed.session;
    let mut findings = Vec::new();
    let trips_of = |wanted: &[Role]| -> u64 {
        observed
            .statements
            .iter()
            .filter(|s| wanted.contains(&role(&s.statement)))
            .map(|s| s.round_trips)
            .sum()
    };
    if session.work >= SESSION_MINIMUM && session.preceded_by_chatter * 2 > session.work {
        let mut chatter: Vec<&StatementStats> = observed
            .statements
            .iter()
            .filter(|s| role(&s.statement) == Role::Chatter)
            .collect();
        chatter.sort_by_key(|s| std::cmp::Reverse(s.executions));
        findings.push(Finding::SessionChatter {
            statements: chatter
                .iter()
                .take(3)
                .map(|s| s.statement.clone())
                .collect(),
            preceded: session.preceded_by_chatter,
            work: session.work,
            round_trips: trips_of(&[Role::Chatter]),
            total_round_trips: observed.round_trips,
        });
    }
    if session.transactions >= SESSION_MINIMUM
        && session.single_statement_transactions * 2 > session.transactions
    {
        findings.push(Finding::TransactionPerStatement {
            single: session.single_statement_transactions,
            transactions: session.transactions,
            round_trips: trips_of(&[Role::Begin, Role::End]),
            total_round_trips: observed.round_trips,
        });
    }
    findings
}

/// Statements sent with `Parse` for (nearly) every execution, often.
fn parsed_every_time(observed: &Observed<'_>) -> Vec<Finding> {
    observed
        .statements
        .iter()
        .filter(|s| s.executions >= ROW_BY_ROW_MINIMUM && s.parses * 10 >= s.executions * 9)
        .filter(|s| role(&s.statement) == Role::Work)
        .map(|s| Finding::ParsedEveryTime {
            statement: s.statement.clone(),
            parses: s.parses,
            executions: s.executions,
            round_trips: s.round_trips,
            total_round_trips: observed.round_trips,
        })
        .collect()
}

/// Round trips per second and the share of the time spent waiting on the
/// network (round trips × RTT ÷ wall time, at most 1), for `round_trips` over `wall`.
pub fn pace(round_trips: u64, wall: Duration, rtt: Duration) -> (f64, f64) {
    let seconds = wall.as_secs_f64();
    if seconds <= 0.0 {
        return (0.0, 0.0);
    }
    let waiting = rtt.as_secs_f64() * round_trips as f64;
    (round_trips as f64 / seconds, (waiting / seconds).min(1.0))
}

impl Report {
    /// Figures per statement fingerprint over all connections, most round trips first.
    pub fn statements(&self) -> Vec<StatementStats> {
        let mut merged: BTreeMap<&str, StatementStats> = BTreeMap::new();
        for connection in &self.connections {
            for statement in &connection.statements {
                merged
                    .entry(&statement.statement)
                    .or_insert_with(|| StatementStats {
                        statement: statement.statement.clone(),
                        example: statement.example.clone(),
                        ..StatementStats::default()
                    })
                    .add(statement);
            }
        }
        let mut statements: Vec<StatementStats> = merged.into_values().collect();
        sort_by_round_trips(&mut statements);
        statements
    }

    /// Round trips over all connections.
    pub fn round_trips(&self) -> u64 {
        self.connections
            .iter()
            .map(|connection| connection.round_trips)
            .sum()
    }

    /// From the first byte of any connection to the last byte of any.
    pub fn wall_time(&self) -> Duration {
        let started = self.connections.iter().filter_map(|c| c.started).min();
        let ended = self.connections.iter().filter_map(|c| c.ended).max();
        wall_time(started, ended)
    }

    /// Every finding, with the connection it was seen on, the costliest
    /// (most round trips) first.
    pub fn findings(&self) -> Vec<(u64, &Finding)> {
        let mut findings: Vec<(u64, &Finding)> = self
            .connections
            .iter()
            .flat_map(|connection| {
                connection
                    .findings
                    .iter()
                    .map(move |finding| (connection.id, finding))
            })
            .collect();
        findings.sort_by_key(|(_, finding)| std::cmp::Reverse(finding.round_trips()));
        findings
    }

    /// Whether a finding of `kind` was seen.
    pub fn has_finding(&self, kind: FindingKind) -> bool {
        self.connections
            .iter()
            .flat_map(|connection| &connection.findings)
            .any(|finding| finding.kind() == kind)
    }

    /// The pace figures as JSON fields.
    fn pace_json(&self, round_trips: u64, wall: Duration) -> Value {
        let (per_second, share) = pace(round_trips, wall, self.rtt);
        json!({
            "wall_seconds": wall.as_secs_f64(),
            "round_trips_per_second": per_second,
            "network_wait_share": share,
        })
    }

    /// The report as JSON.
    pub fn to_json(&self) -> Value {
        let statement = |s: &StatementStats| {
            json!({
                "statement": s.statement,
                "example": s.example,
                "executions": s.executions,
                "parses": s.parses,
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
            "rtt_ms": self.rtt.as_secs_f64() * 1000.0,
            "round_trips": self.round_trips(),
            "pace": self.pace_json(self.round_trips(), self.wall_time()),
            "statements": self.statements().iter().map(statement).collect::<Vec<_>>(),
            "connections": self.connections.iter().map(|c| json!({
                "id": c.id,
                "client": c.client,
                "round_trips": c.round_trips,
                "pace": self.pace_json(c.round_trips, c.wall_time()),
                "bytes_to_server": c.bytes_to_server,
                "bytes_to_client": c.bytes_to_client,
                "readable": c.readable,
                "statements": c.statements.iter().map(statement).collect::<Vec<_>>(),
                "findings": c.findings.iter().map(Finding::describe).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
            "findings": self.findings().iter().map(|(id, f)| finding_entry(*id, f)).collect::<Vec<_>>(),
        })
    }

    /// The per-fingerprint table as CSV, with one example text of each;
    /// refused clients, if any, are counted as the executions of a
    /// pseudo-statement ([`REFUSED`]).
    pub fn to_csv(&self) -> String {
        let mut csv = String::from(
            "statement,executions,round_trips,rows,bytes_to_server,bytes_to_client,example\n",
        );
        let refused = (self.refused_connections > 0).then(|| StatementStats {
            statement: REFUSED.to_owned(),
            executions: self.refused_connections,
            ..StatementStats::default()
        });
        let quote = |text: &str| format!("\"{}\"", text.replace('"', "\"\""));
        for s in self.statements().into_iter().chain(refused) {
            let _ = writeln!(
                csv,
                "{},{},{},{},{},{},{}",
                quote(&s.statement),
                s.executions,
                s.round_trips,
                s.rows,
                s.bytes_to_server,
                s.bytes_to_client,
                quote(&s.example)
            );
        }
        csv
    }

    /// A short summary for people: totals and pace, the busiest fingerprints
    /// overall and per connection, findings.
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
        if !self.connections.is_empty() {
            let _ = writeln!(
                text,
                "overall: {}",
                self.pace_words(self.round_trips(), self.wall_time())
            );
        }
        for s in self.statements().iter().take(10) {
            let _ = writeln!(text, "{}", statement_line(s));
        }
        for connection in self.connections.iter().filter(|c| c.round_trips > 0) {
            let _ = writeln!(
                text,
                "connection {} ({}): {}",
                connection.id,
                connection.client,
                self.pace_words(connection.round_trips, connection.wall_time())
            );
            for s in work_first(&connection.statements).into_iter().take(3) {
                let _ = writeln!(text, "  {}", statement_line(s));
            }
        }
        for (id, finding) in self.findings() {
            let _ = writeln!(text, "connection {id}: {}", finding.describe());
        }
        text
    }

    fn pace_words(&self, round_trips: u64, wall: Duration) -> String {
        let (per_second, share) = pace(round_trips, wall, self.rtt);
        format!(
            "{round_trips} round trips in {wall:.2?}, {per_second:.0} round trips/s, \
             {:.0}% of the time waiting on the network (round trips × RTT {:?} ÷ wall time)",
            share * 100.0,
            self.rtt
        )
    }
}

/// `statements` (most round trips first) with the application's work before
/// the session's own statements (`BEGIN`, `COMMIT`, `SET`, `select 1`, the
/// connection's setup), which would otherwise fill a connection's top lines
/// when every statement takes one round trip.
fn work_first(statements: &[StatementStats]) -> Vec<&StatementStats> {
    let is_work =
        |s: &&StatementStats| !s.statement.starts_with('(') && role(&s.statement) == Role::Work;
    let (work, session): (Vec<_>, Vec<_>) = statements.iter().partition(is_work);
    work.into_iter().chain(session).collect()
}

/// One item of the JSON report's `findings`, as
/// `docs/src/proxy-findings.schema.json` describes it: the finding's fields,
/// its connection, and its text under `finding`, the name it had before the
/// fields.
fn finding_entry(connection: u64, finding: &Finding) -> Value {
    let mut fields = finding.to_json();
    fields["connection"] = json!(connection);
    fields["finding"] = json!(finding.describe());
    fields
}

/// One fingerprint's line in the text report.
fn statement_line(s: &StatementStats) -> String {
    let example = if s.example != s.statement && !s.example.is_empty() {
        format!("  (e.g. {})", s.example)
    } else {
        String::new()
    };
    format!(
        "  {:>8} trips {:>8} runs {:>10} rows  {}{example}",
        s.round_trips, s.executions, s.rows, s.statement
    )
}

/// Most round trips first, then by fingerprint.
pub(crate) fn sort_by_round_trips(statements: &mut [StatementStats]) {
    statements.sort_by(|a, b| {
        b.round_trips
            .cmp(&a.round_trips)
            .then(a.statement.cmp(&b.statement))
    });
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
    fn a_connections_top_lines_show_its_work_before_its_session_statements() {
        let statements = [
            stats("begin", 30, 30),
            stats("rollback", 30, 30),
            stats("(connection setup)", 1, 3),
            stats("select * from t where id = $1", 30, 30),
        ];
        let order: Vec<&str> = work_first(&statements)
            .iter()
            .map(|s| s.statement.as_str())
            .collect();
        assert_eq!(
            order,
            [
                "select * from t where id = $1",
                "begin",
                "rollback",
                "(connection setup)"
            ]
        );
    }

    #[test]
    fn findings_have_kinds_fields_and_reads_are_never_told_to_copy() {
        let read = Finding::RowByRow {
            statement: "select * from t where id = $1".into(),
            example: "select * from t where id = 7".into(),
            executions: 100,
            round_trips: 100,
            rtt: Duration::from_millis(2),
        };
        let json = read.to_json();
        assert_eq!(json["kind"], "row-by-row");
        assert_eq!(json["round_trips"], 100);
        assert_eq!(json["waiting_seconds"], 0.2);
        assert!(!read.advice().contains("COPY"), "{}", read.advice());
        let write = Finding::RowByRow {
            statement: "insert into t values ($1)".into(),
            example: String::new(),
            executions: 100,
            round_trips: 100,
            rtt: Duration::ZERO,
        };
        assert!(write.advice().contains("COPY"));
        assert_eq!(write.to_json()["waiting_seconds"], Value::Null);
        for kind in FindingKind::ALL {
            assert_eq!(FindingKind::from_name(kind.name()), Some(kind));
        }
    }

    /// One finding of each kind.
    fn one_of_each() -> Vec<Finding> {
        let rtt = Duration::from_millis(2);
        vec![
            Finding::NPlusOne {
                parent: "select id from a".into(),
                rows: 120,
                keys: 40,
                statement: "select * from b where id = $1".into(),
                executions: 40,
                round_trips: 40,
                rtt,
            },
            Finding::RowByRow {
                statement: "insert into t values ($1)".into(),
                example: "insert into t values (1)".into(),
                executions: 100,
                round_trips: 100,
                rtt: Duration::ZERO,
            },
            Finding::SmallFetches {
                fetch_size: 10,
                fetches: 50,
            },
            Finding::LocatorReads { calls: 200 },
            Finding::SessionChatter {
                statements: vec!["select $1".into()],
                preceded: 30,
                work: 30,
                round_trips: 31,
                total_round_trips: 123,
            },
            Finding::TransactionPerStatement {
                single: 30,
                transactions: 30,
                round_trips: 60,
                total_round_trips: 123,
            },
            Finding::ParsedEveryTime {
                statement: "select * from t where id = $1".into(),
                parses: 100,
                executions: 100,
                round_trips: 200,
                total_round_trips: 300,
            },
        ]
    }

    /// Whether `value` is of JSON Schema type `type_name`.
    fn is_of_type(value: &Value, type_name: &str) -> bool {
        match type_name {
            "integer" => value.is_u64() || value.is_i64(),
            "number" => value.is_number(),
            "string" => value.is_string(),
            "array" => value.is_array(),
            "null" => value.is_null(),
            other => panic!("a type the schema does not use: {other}"),
        }
    }

    #[test]
    fn every_finding_is_as_the_documented_schema_says() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../../docs/src/proxy-findings.schema.json");
        let schema: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        let kinds: Vec<FindingKind> = one_of_each().iter().map(Finding::kind).collect();
        assert_eq!(
            kinds.len(),
            FindingKind::ALL.len(),
            "one finding of each kind"
        );
        for finding in one_of_each() {
            let entry = finding_entry(3, &finding);
            let object = entry.as_object().unwrap();
            let branch = schema["oneOf"]
                .as_array()
                .unwrap()
                .iter()
                .find(|branch| branch["properties"]["kind"]["const"] == entry["kind"])
                .unwrap_or_else(|| panic!("no schema for {}", entry["kind"]));
            let mut properties = schema["properties"].as_object().unwrap().clone();
            properties.extend(branch["properties"].as_object().unwrap().clone());
            for required in [&schema["required"], &branch["required"]] {
                for name in required.as_array().unwrap() {
                    let name = name.as_str().unwrap();
                    assert!(object.contains_key(name), "{name} missing from {entry}");
                }
            }
            for (name, value) in object {
                let property = properties
                    .get(name)
                    .unwrap_or_else(|| panic!("{name} of {entry} is not in the schema"));
                let types: Vec<&str> = match &property["type"] {
                    Value::String(one) => vec![one.as_str()],
                    Value::Array(many) => many.iter().filter_map(Value::as_str).collect(),
                    _ => continue,
                };
                assert!(
                    types.iter().any(|type_name| is_of_type(value, type_name)),
                    "{name} = {value} is not {types:?}"
                );
            }
        }
    }

    fn observed(statements: &[StatementStats]) -> Observed<'_> {
        Observed {
            statements,
            small_fetches: 0,
            fetch_size: 0,
            suspensions: 0,
            function_calls: 0,
            n_plus_ones: Vec::new(),
            session: Session::default(),
            round_trips: statements.iter().map(|s| s.round_trips).sum(),
            rtt: Duration::from_millis(2),
        }
    }

    #[test]
    fn patterns_are_named_and_copy_is_not() {
        let statements = [
            stats("insert into t values ($1)", 1000, 1000),
            stats("copy t from stdin", 1, 3),
            stats("insert into t values ($1), ($2)", 1000, 10),
            stats("select lo_get($1)", 500, 500),
            stats("select $1", 500, 500),
        ];
        let found = findings(&Observed {
            small_fetches: 100,
            fetch_size: 10,
            suspensions: 100,
            ..observed(&statements)
        });
        assert_eq!(found.len(), 3, "{found:?}");
        assert!(
            matches!(&found[0], Finding::RowByRow { statement, .. } if statement == "insert into t values ($1)")
        );
        assert!(found[0]
            .describe()
            .contains("2.00s waiting on the network at the RTT of 2ms"));
        assert!(matches!(
            found[1],
            Finding::SmallFetches {
                fetch_size: 10,
                fetches: 100
            }
        ));
        assert!(matches!(found[2], Finding::LocatorReads { calls: 500 }));
        assert!(findings(&observed(&[stats("copy t from stdin", 1, 3)])).is_empty());
    }

    #[test]
    fn chatty_sessions_are_named_with_their_share() {
        let statements = [
            stats("select $1", 100, 100),
            stats("begin", 100, 100),
            stats("commit", 100, 100),
            stats("update t set a = $1 where id = $2", 100, 100),
        ];
        let found = findings(&Observed {
            session: Session {
                work: 100,
                preceded_by_chatter: 100,
                transactions: 100,
                single_statement_transactions: 100,
            },
            ..observed(&statements)
        });
        let words: Vec<String> = found.iter().map(Finding::describe).collect();
        assert!(words.iter().any(|w| w.starts_with("chatty session: 100 of 100 statements were preceded by `select $1`, 100 round trips (25% of all)")), "{words:#?}");
        assert!(words.iter().any(|w| w.starts_with("a transaction per statement: 100 of 100 transactions held one statement, BEGIN/COMMIT took 200 round trips (50% of all)")), "{words:#?}");
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
            .contains(&format!("\"{REFUSED}\",5,0,0,0,0,\"\"\n")));
        assert!(report
            .to_text()
            .contains("refused connections: 5 (the limit of 32 open connections was reached)"));
        let quiet = Report::default();
        assert!(!quiet.to_csv().contains(REFUSED));
        assert!(!quiet.to_text().contains("refused"));
    }
}
