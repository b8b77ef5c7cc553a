//! Prometheus metrics: what `/metrics` shows and the one place they are recorded.
//!
//! | metric | type | labels |
//! |---|---|---|
//! | `sluice_http_requests_total` | counter | `route`, `query`, `status`, `outcome` |
//! | `sluice_rows_total` | counter (rows sent; imports: records read; batches: calls) | `query` |
//! | `sluice_response_bytes_total` | counter (before compression) | `query` |
//! | `sluice_db_round_trips_total` | counter | `query` |
//! | `sluice_request_duration_seconds` | histogram (until the last byte) | `route`, `query` |
//! | `sluice_response_rows` | histogram | `query` |
//! | `sluice_pool_connections_in_use` | gauge | `database` |
//! | `sluice_pool_connections_max` | gauge | `database` |
//! | `sluice_pool_waiting` | gauge (requests waiting for a connection) | `database` |
//! | `sluice_http_connection_timeouts_total` | counter (connections closed for sending no request in time) | `timeout`: `header_read`, `keep_alive` |
//! | `sluice_tls_handshake_failures_total` | counter (HTTPS connections whose TLS handshake failed) | |
//! | `sluice_connections_open` | gauge | `listener`: `http`, `flight` |
//! | `sluice_connections_refused_total` | counter (closed at once: the listener had `max_connections` open) | `listener` |
//! | `sluice_accept_failures_total` | counter (`accept` failed: out of file descriptors and the like) | `listener` |
//! | `sluice_flight_plans_held` | gauge (Flight plans holding a snapshot open, each a database connection in a transaction) | |
//! | `sluice_flight_oldest_plan_seconds` | gauge (how long the oldest held plan's snapshot has been open: VACUUM waits for it) | |
//!
//! The `metrics` facade has one global recorder per process, so it is installed
//! once and every app in the process (tests build many) shares it.

use std::sync::{Arc, OnceLock};

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The process's Prometheus recorder, installed on first use.
pub fn handle() -> &'static PrometheusHandle {
    HANDLE.get_or_init(|| {
        let recorder = PrometheusBuilder::new()
            .set_buckets_for_metric(
                Matcher::Full("sluice_request_duration_seconds".into()),
                &[
                    0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
                    300.0,
                ],
            )
            .and_then(|builder| {
                builder.set_buckets_for_metric(
                    Matcher::Full("sluice_response_rows".into()),
                    &[0.0, 1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7],
                )
            })
            .expect("bucket lists are not empty")
            .build_recorder();
        let handle = recorder.handle();
        // Fails only if something else installed a recorder first; then our
        // handle shows nothing, which /metrics makes visible.
        let _ = metrics::set_global_recorder(recorder);
        metrics::describe_counter!(
            "sluice_http_requests_total",
            "HTTP requests, by route, query, status and outcome"
        );
        metrics::describe_counter!("sluice_rows_total", "Rows streamed to clients");
        metrics::describe_counter!(
            "sluice_response_bytes_total",
            "Response body bytes before compression"
        );
        metrics::describe_counter!("sluice_db_round_trips_total", "Round trips to the database");
        metrics::describe_histogram!(
            "sluice_request_duration_seconds",
            "Time from request to the last byte"
        );
        metrics::describe_histogram!("sluice_response_rows", "Rows per query response");
        metrics::describe_gauge!(
            "sluice_pool_connections_in_use",
            "Database sessions in use: connections, or queries at once on a database read in this process"
        );
        metrics::describe_gauge!("sluice_pool_connections_max", "Pool size");
        metrics::describe_counter!(
            "sluice_http_connection_timeouts_total",
            "Connections closed because no complete request head arrived in time"
        );
        metrics::describe_counter!(
            "sluice_tls_handshake_failures_total",
            "HTTPS connections whose TLS handshake failed"
        );
        metrics::describe_counter!(
            "sluice_connections_refused_total",
            "Connections closed at once because their listener had max_connections open, by listener"
        );
        metrics::describe_counter!(
            "sluice_accept_failures_total",
            "Failed accepts (out of file descriptors and the like), by listener"
        );
        metrics::describe_gauge!(
            "sluice_connections_open",
            "Connections open, by listener"
        );
        metrics::describe_gauge!(
            "sluice_pool_waiting",
            "Requests waiting for a database session (a connection, or a query slot)"
        );
        handle
    })
}

/// What one request did, recorded when it ends.
#[derive(Debug, Clone, Default)]
pub struct RequestRecord {
    /// `queries`, `sql`, `tables`, `batch`, `health`, …
    pub route: &'static str,
    /// The named query, or empty.
    pub query: String,
    /// The HTTP status sent.
    pub status: u16,
    /// `complete`, `client_gone`, `error`, `limit`, `shutdown`, `rejected`.
    pub outcome: &'static str,
    /// Rows sent.
    pub rows: u64,
    /// Body bytes sent (before compression).
    pub bytes: u64,
    /// Database round trips.
    pub round_trips: u64,
    /// Seconds from request to the end.
    pub seconds: f64,
}

/// Records `record` in the metrics.
pub fn record(record: &RequestRecord) {
    handle();
    // One shared copy of the query's name for its six labels, rather than a
    // String each: this runs once per request.
    let query: Arc<str> = Arc::from(record.query.as_str());
    metrics::counter!(
        "sluice_http_requests_total",
        "route" => record.route,
        "query" => query.clone(),
        "status" => status_label(record.status),
        "outcome" => record.outcome
    )
    .increment(1);
    metrics::histogram!("sluice_request_duration_seconds", "route" => record.route, "query" => query.clone())
        .record(record.seconds);
    if matches!(record.route, "queries" | "sql" | "tables" | "batch") {
        metrics::counter!("sluice_rows_total", "query" => query.clone()).increment(record.rows);
        metrics::counter!("sluice_response_bytes_total", "query" => query.clone())
            .increment(record.bytes);
        metrics::counter!("sluice_db_round_trips_total", "query" => query.clone())
            .increment(record.round_trips);
        metrics::histogram!("sluice_response_rows", "query" => query).record(record.rows as f64);
    }
}

/// A status code as a label, without formatting the ones the gateway sends.
fn status_label(status: u16) -> metrics::SharedString {
    let label = match status {
        200 => "200",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        408 => "408",
        413 => "413",
        422 => "422",
        429 => "429",
        499 => "499",
        500 => "500",
        503 => "503",
        504 => "504",
        other => return other.to_string().into(),
    };
    metrics::SharedString::const_str(label)
}

/// Sets the pool gauges of one database.
pub fn pool(database: &str, in_use: usize, max: usize, waiting: usize) {
    handle();
    metrics::gauge!("sluice_pool_connections_in_use", "database" => database.to_owned())
        .set(in_use as f64);
    metrics::gauge!("sluice_pool_connections_max", "database" => database.to_owned())
        .set(max as f64);
    metrics::gauge!("sluice_pool_waiting", "database" => database.to_owned()).set(waiting as f64);
}

/// Counts a connection closed by a timeout (`header_read` or `keep_alive`).
pub fn connection_timed_out(timeout: &'static str) {
    handle();
    metrics::counter!("sluice_http_connection_timeouts_total", "timeout" => timeout).increment(1);
}

/// Counts a connection refused because `listener` had its cap open.
pub fn connection_refused(listener: &'static str) {
    handle();
    metrics::counter!("sluice_connections_refused_total", "listener" => listener).increment(1);
}

/// Counts a failed `accept` on `listener`.
pub fn accept_failed(listener: &'static str) {
    handle();
    metrics::counter!("sluice_accept_failures_total", "listener" => listener).increment(1);
}

/// Sets how many connections `listener` has open.
pub fn connections_open(listener: &'static str, open: usize) {
    handle();
    metrics::gauge!("sluice_connections_open", "listener" => listener).set(open as f64);
}

/// Counts an HTTPS connection whose TLS handshake failed (an untrusting
/// client, a scanner, plain HTTP sent to the HTTPS port).
pub fn tls_handshake_failed() {
    handle();
    metrics::counter!("sluice_tls_handshake_failures_total").increment(1);
}

/// Sets how many Flight plans hold a snapshot and how long the oldest has.
pub fn flight_plans(held: usize, oldest: std::time::Duration) {
    handle();
    metrics::gauge!("sluice_flight_plans_held").set(held as f64);
    metrics::gauge!("sluice_flight_oldest_plan_seconds").set(oldest.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_status_label_is_the_code_in_decimal() {
        for status in 100..600 {
            assert_eq!(&*status_label(status), status.to_string(), "{status}");
        }
    }
}
