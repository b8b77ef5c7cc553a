//! The experiments, run against the user's database through an in-process
//! [`Proxy`] per RTT.
//!
//! Data lives in dedicated tables named `sluice_lab_<pid>_*` in the session's
//! first schema (a generated export source, an insert sink, a table of large
//! object OIDs), created before the first cell and dropped, with their large
//! objects unlinked, at the end: also when an experiment fails.
//!
//! Each cell gets a fresh connection through the proxy; connecting is not timed.
//! The clock and the meter cover the operation only (for inserts: `BEGIN` to
//! `COMMIT`; for the pipelined variants: preparing, too). Insert cells also read
//! the server's WAL position on their connection before and after, outside the
//! clock and the meter (see [`crate::wal`]).

use std::future::Future;
use std::time::{Duration, Instant};

use sluice_core::connect::{Driver, TableName};
use sluice_core::database::BoxFuture;
use sluice_core::{Batch, BatchSource, Error, ErrorKind, Kind, Meter};
use sluice_postgres::config::Target;
use sluice_postgres::tls::TlsSettings;
use sluice_postgres::{
    CallOutcome, Config, Connection, ParamSet, ParamSource, Pipeline, PostgresDriver, QueryOptions,
    QueryStream, Transaction,
};
use sluice_proxy::{Proxy, ProxyHandle, Shaping};

use crate::{Experiment, LabOptions, LabResults, Measurement, PathLatency};

/// `select 1`s timed for a latency figure (the median is kept).
const LATENCY_SAMPLES: usize = 21;
/// Bytes of unanswered requests a pipeline keeps in flight.
const WINDOW_BYTES: usize = 1024 * 1024;

/// Names of the lab's tables in the user's database.
#[derive(Debug, Clone)]
struct Tables {
    source: String,
    sink: String,
    lob: String,
}

impl Tables {
    fn new() -> Tables {
        let prefix = format!("sluice_lab_{}", std::process::id());
        Tables {
            source: format!("{prefix}_source"),
            sink: format!("{prefix}_sink"),
            lob: format!("{prefix}_lob"),
        }
    }
}

/// The server the proxy forwards to: the first TCP target of `config`.
fn upstream_of(config: &Config) -> Result<String, Error> {
    if !config.tls.mode.allows_plain() {
        return Err(Error::config(
            "sluice lab measures through a proxy that reads the protocol, so it speaks \
             plain TCP to the server: a connection that requires TLS (sslmode=require or \
             verify-*) cannot be measured; use a server that accepts plain connections",
        ));
    }
    for target in &config.targets {
        if let Target::Tcp(host, port) = target {
            return Ok(if host.contains(':') {
                format!("[{host}]:{port}")
            } else {
                format!("{host}:{port}")
            });
        }
    }
    let sockets: Vec<String> = config.targets.iter().map(ToString::to_string).collect();
    Err(Error::config(format!(
        "sluice lab needs to reach the server over TCP (host and port) to put its \
         latency proxy in front of it, but the connection settings name only Unix \
         sockets ({}); use e.g. postgres://user@127.0.0.1:5432/db",
        sockets.join(", ")
    )))
}

/// Runs every experiment at every RTT of `options` against the PostgreSQL
/// database `db` names (a URL or libpq `key=value` string, with the `PG*`
/// environment defaults), reporting what it is doing through `progress`. The
/// lab takes the user's text rather than a parsed configuration so that its
/// callers need not know which database crate it measures.
pub async fn run(
    db: &str,
    options: &LabOptions,
    progress: &mut (dyn FnMut(&str) + Send),
) -> Result<LabResults, Error> {
    let started = Instant::now();
    let config = &lab_sessions(db)?;
    let upstream = upstream_of(config)?;
    if options.rtts.is_empty() {
        return Err(Error::config("sluice lab needs at least one RTT"));
    }
    // A table's name, never SQL: text that is none stops the lab here.
    let export_table = match &options.table {
        Some(table) => Some(PostgresDriver.dialect().table_name(table)?),
        None => None,
    };
    let mut direct = Connection::connect(config, &Meter::new()).await?;
    let server_version = direct.server_version().to_owned();
    let real_rtt = select1_median(&mut direct).await?;
    progress(&format!(
        "real path to {upstream}: {} per round trip (median of {LATENCY_SAMPLES} `select 1`)",
        crate::human_duration(real_rtt)
    ));
    let tables = Tables::new();
    let mut lab = Lab {
        config,
        options,
        upstream: upstream.clone(),
        tables: tables.clone(),
        export_table,
        export_sql: String::new(),
        export_rows: 0,
        measurements: Vec::new(),
        latencies: Vec::new(),
        wal_error: None,
    };
    let export_source = match &options.table {
        Some(table) => format!(
            "table {table} (its first {} rows)",
            crate::thousands(options.export_rows)
        ),
        None => format!(
            "a generated table of {} rows (id int8, name text, amount numeric, at timestamptz)",
            crate::thousands(options.export_rows)
        ),
    };
    let outcome = async {
        lab.setup(&mut direct, progress).await?;
        for &rtt in &options.rtts {
            lab.at_rtt(rtt, progress).await?;
        }
        Ok::<(), Error>(())
    }
    .await;
    // Clean up whatever happened, on the direct connection or a new one.
    let cleanup = match cleanup(&mut direct, &tables).await {
        Ok(()) => Ok(()),
        Err(_) => match Connection::connect(config, &Meter::new()).await {
            Ok(mut again) => {
                let result = cleanup(&mut again, &tables).await;
                again.close().await;
                result
            }
            Err(error) => Err(error),
        },
    };
    direct.close().await;
    outcome?;
    cleanup?;
    Ok(LabResults {
        server_version,
        upstream,
        real_rtt,
        latencies: lab.latencies,
        export_source,
        options: options.clone(),
        measurements: lab.measurements,
        elapsed: started.elapsed(),
        wal_error: lab.wal_error,
    })
}

/// The settings of this process's lab sessions on the database `db` names:
/// their `application_name` names the lab and the process, so that an
/// interrupted run can find the statements its sessions still run on the server.
fn lab_sessions(db: &str) -> Result<Config, Error> {
    let mut config: Config = db.parse()?;
    config.application_name = format!("sluice lab {}", std::process::id());
    Ok(config)
}

/// How long an interrupted run waits for its cancelled statements to end.
const CANCEL_TIMEOUT: Duration = Duration::from_secs(10);

/// Drops this process's lab tables and unlinks their large objects, for a run
/// that was interrupted (a finished or failed [`run`] cleans up itself).
///
/// An interrupted run's sessions may still be running a statement on the server
/// (a session whose client has gone only notices when it next writes): one
/// creating large objects would commit them after the cleanup had looked, and
/// leave them behind. So their statements are cancelled first, and the cleanup
/// waits until none is running.
pub async fn clean_up(db: &str) -> Result<(), Error> {
    let config = lab_sessions(db)?;
    let mut connection = Connection::connect(&config, &Meter::new()).await?;
    let result = async {
        cancel_lab_statements(&mut connection, &config.application_name).await?;
        cleanup(&mut connection, &Tables::new()).await
    }
    .await;
    connection.close().await;
    result
}

/// Cancels the statements this process's other lab sessions are running and waits
/// (up to [`CANCEL_TIMEOUT`]) until none is.
async fn cancel_lab_statements(connection: &mut Connection, name: &str) -> Result<(), Error> {
    let others = "from pg_stat_activity where application_name = $1 \
                  and pid <> pg_backend_pid() and state <> 'idle'";
    let deadline = Instant::now() + CANCEL_TIMEOUT;
    loop {
        let running = connection
            .query_rows(
                &format!("select pg_cancel_backend(pid) {others}"),
                &[Some(name)],
            )
            .await?;
        if running.is_empty() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            return Err(Error::new(
                ErrorKind::Connect,
                format!(
                    "{} statement(s) of the interrupted lab are still running after {:?}",
                    running.len(),
                    CANCEL_TIMEOUT
                ),
            ));
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

async fn cleanup(connection: &mut Connection, tables: &Tables) -> Result<(), Error> {
    let exists = connection
        .query_rows("select to_regclass($1) is not null", &[Some(&tables.lob)])
        .await?;
    if exists.first().and_then(|row| row[0].as_deref()) == Some("t") {
        connection
            .simple_query(&format!(
                "select lo_unlink(data) from {} where data is not null",
                tables.lob
            ))
            .await?;
    }
    connection
        .simple_query(&format!(
            "drop table if exists {}, {}, {}",
            tables.source, tables.sink, tables.lob
        ))
        .await?;
    Ok(())
}

/// Median time of a `select 1` (one round trip) on `connection`.
async fn select1_median(connection: &mut Connection) -> Result<Duration, Error> {
    connection.simple_query("select 1").await?;
    let mut times = Vec::with_capacity(LATENCY_SAMPLES);
    for _ in 0..LATENCY_SAMPLES {
        let start = Instant::now();
        connection.simple_query("select 1").await?;
        times.push(start.elapsed());
    }
    times.sort();
    Ok(times[times.len() / 2])
}

/// What a cell did before it stopped.
struct Ran {
    units: u64,
    time: Duration,
}

struct Lab<'a> {
    config: &'a Config,
    options: &'a LabOptions,
    upstream: String,
    tables: Tables,
    /// The user's table to export instead of a generated one (`--table`).
    export_table: Option<TableName>,
    export_sql: String,
    export_rows: u64,
    measurements: Vec<Measurement>,
    latencies: Vec<PathLatency>,
    /// The first refusal to report the WAL position.
    wal_error: Option<String>,
}

/// Whether a cell measures the WAL its work writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Wal {
    Measure,
    Skip,
}

/// The proxy of one RTT and a config that goes through it.
struct Path {
    proxy: ProxyHandle,
    config: Config,
    rtt: Duration,
}

impl Path {
    async fn connect(&self) -> Result<(Connection, Meter), Error> {
        let meter = Meter::new();
        let connection = Connection::connect(&self.config, &meter).await?;
        Ok((connection, meter))
    }
}

impl Lab<'_> {
    async fn setup(
        &mut self,
        direct: &mut Connection,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), Error> {
        let Tables { source, sink, lob } = &self.tables;
        let options = self.options;
        progress("creating the lab's tables");
        match &self.export_table {
            Some(table) => {
                self.export_sql = format!("select * from {table} limit {}", options.export_rows);
                let count = direct
                    .simple_query(&format!("select count(*) from ({}) t", self.export_sql))
                    .await?;
                self.export_rows = count
                    .first()
                    .and_then(|row| row[0].as_deref())
                    .and_then(|text| text.parse().ok())
                    .unwrap_or(0);
            }
            None => {
                direct
                    .simple_query(&format!(
                        "create table {source} as select g::int8 as id, 'item ' || g as name, \
                         (g % 100000) * 0.25 as amount, \
                         timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second' as at \
                         from generate_series(1, {}) g",
                        options.export_rows
                    ))
                    .await?;
                self.export_sql = format!("select id, name, amount, at from {source}");
                self.export_rows = options.export_rows;
            }
        }
        direct
            .simple_query(&format!(
                "create table {sink} (id int8, name text, amount numeric)"
            ))
            .await?;
        direct
            .simple_query(&format!("create table {lob} (id int4, data oid)"))
            .await?;
        // Large objects of `lob_bytes` each, filled with hex digits.
        let repeats = options.lob_bytes.div_ceil(32).max(1);
        direct
            .simple_query(&format!(
                "insert into {lob} select g, lo_from_bytea(0, \
                 substr(convert_to(repeat(md5(g::text), {repeats}), 'UTF8'), 1, {})) \
                 from generate_series(1, {}) g",
                options.lob_bytes, options.lob_count
            ))
            .await?;
        direct.simple_query(&format!("analyze {lob}")).await?;
        Ok(())
    }

    async fn at_rtt(
        &mut self,
        rtt: Duration,
        progress: &mut (dyn FnMut(&str) + Send),
    ) -> Result<(), Error> {
        let proxy = Proxy::new(
            "127.0.0.1:0",
            &self.upstream,
            Shaping {
                rtt,
                ..Shaping::default()
            },
        )
        .start()
        .map_err(|error| {
            Error::new(
                ErrorKind::Io,
                format!("could not start the lab's proxy: {error}"),
            )
        })?;
        let mut config = self.config.clone();
        config.targets = vec![Target::Tcp("127.0.0.1".into(), proxy.address().port())];
        // The proxy reads the protocol to count trips: it cannot see into TLS.
        config.tls = TlsSettings::disabled();
        let path = Path { proxy, config, rtt };
        let label = crate::rtt_label(rtt);

        let (mut connection, _) = path.connect().await?;
        let select1 = select1_median(&mut connection).await?;
        connection.close().await;
        self.latencies.push(PathLatency {
            injected: rtt,
            select1,
        });
        progress(&format!(
            "{label}: `select 1` takes {} through the proxy",
            crate::human_duration(select1)
        ));

        let options = self.options;
        progress(&format!(
            "{label}: export of {} rows by fetch size",
            crate::thousands(self.export_rows)
        ));
        let mut fetch_sizes: Vec<Option<u32>> =
            options.fetch_sizes.iter().map(|&f| Some(f)).collect();
        fetch_sizes.push(None);
        for fetch_size in fetch_sizes {
            self.export(&path, fetch_size).await?;
        }

        progress(&format!(
            "{label}: insert of {} rows by method",
            crate::thousands(options.insert_rows)
        ));
        for &batch in &options.batch_sizes {
            self.insert_batches(&path, batch).await?;
        }
        self.insert_pipelined(&path).await?;
        self.insert_copy(&path).await?;

        progress(&format!(
            "{label}: {} large objects, inline and locator-style",
            crate::thousands(options.lob_count)
        ));
        self.lob_inline(&path).await?;
        self.lob_locator(&path).await?;

        progress(&format!(
            "{label}: {} small calls, loop and pipelined",
            crate::thousands(options.calls)
        ));
        self.calls_loop(&path).await?;
        self.calls_pipelined(&path).await?;
        Ok(())
    }

    /// Times `work` on a fresh connection through `path`, counting round trips with
    /// sluice's meter and the proxy, and files the cell. `per_unit` is the round
    /// trips each further unit would cost, for extrapolating a cell the budget cut
    /// short. With [`Wal::Measure`], the WAL written meanwhile is read on the same
    /// connection, before the clock starts and after it stops.
    #[allow(clippy::too_many_arguments)]
    async fn cell<F, Fut>(
        &mut self,
        path: &Path,
        experiment: Experiment,
        variant: String,
        units: u64,
        per_unit: f64,
        wal: Wal,
        work: F,
    ) -> Result<(), Error>
    where
        F: FnOnce(Connection, Instant) -> Fut,
        Fut: Future<Output = Result<(Ran, Option<Connection>), Error>>,
    {
        let (mut connection, meter) = path.connect().await?;
        let wal_before = match wal {
            Wal::Measure => self.wal_read(crate::wal::position(&mut connection).await)?,
            Wal::Skip => None,
        };
        let proxy_before = path.proxy.report().round_trips();
        let before = meter.snapshot();
        let start = Instant::now();
        let (ran, connection) = work(connection, start).await?;
        let counted = (meter.snapshot() - before).round_trips;
        let proxy_counted = path
            .proxy
            .report()
            .round_trips()
            .saturating_sub(proxy_before);
        let mut wal_bytes = None;
        if let Some(mut connection) = connection {
            if let Some(before) = wal_before {
                wal_bytes = self.wal_read(crate::wal::since(&mut connection, &before).await)?;
            }
            connection.close().await;
        }
        let (time, round_trips) = if ran.units < units && ran.units > 0 {
            let scale = units as f64 / ran.units as f64;
            let extra = ((units - ran.units) as f64 * per_unit).ceil() as u64;
            (ran.time.mul_f64(scale), counted + extra)
        } else {
            (ran.time, counted)
        };
        self.measurements.push(Measurement {
            experiment,
            variant,
            rtt: path.rtt,
            units,
            measured_units: ran.units.min(units),
            time,
            round_trips,
            measured_time: ran.time,
            measured_round_trips: counted,
            proxy_round_trips: proxy_counted,
            wal_bytes,
        });
        Ok(())
    }

    /// A WAL reading, or `None` when the server refused it (a role denied
    /// `pg_current_wal_insert_lsn()`): the figure is then reported unavailable
    /// rather than failing the lab. Other errors (a lost connection) still fail.
    fn wal_read<T>(&mut self, reading: Result<T, Error>) -> Result<Option<T>, Error> {
        match reading {
            Ok(value) => Ok(Some(value)),
            Err(error) if error.kind() == ErrorKind::Database => {
                self.wal_error.get_or_insert_with(|| error.to_string());
                Ok(None)
            }
            Err(error) => Err(error),
        }
    }

    async fn export(&mut self, path: &Path, fetch_size: Option<u32>) -> Result<(), Error> {
        let sql = self.export_sql.clone();
        let total = self.export_rows;
        let budget = self.options.cell_budget;
        let variant = fetch_size.map_or("streaming".to_owned(), |size| size.to_string());
        let per_unit = fetch_size.map_or(0.0, |size| 1.0 / f64::from(size));
        self.cell(
            path,
            Experiment::Export,
            variant,
            total,
            per_unit,
            Wal::Skip,
            |connection, start| async move {
                let mut stream = QueryStream::start(
                    connection,
                    &sql,
                    QueryOptions {
                        params: Vec::new(),
                        fetch_size,
                        lob_inline: false,
                        ..QueryOptions::default()
                    },
                )
                .await?;
                let mut rows = 0u64;
                let mut cut_short = false;
                while let Some(batch) = stream.next_batch().await? {
                    rows += batch.num_rows() as u64;
                    if fetch_size.is_some() && rows < total && start.elapsed() > budget {
                        cut_short = true;
                        break;
                    }
                }
                let time = start.elapsed();
                // A portal left open goes with its connection.
                let connection = if cut_short {
                    None
                } else {
                    stream.into_connection()
                };
                Ok((Ran { units: rows, time }, connection))
            },
        )
        .await
    }

    async fn insert_batches(&mut self, path: &Path, batch: u64) -> Result<(), Error> {
        let total = self.options.insert_rows;
        let budget = self.options.cell_budget;
        let sink = self.tables.sink.clone();
        let variant = if batch <= 1 {
            "row-by-row".to_owned()
        } else {
            format!("batch {batch}")
        };
        let batch = batch.max(1);
        self.cell(
            path,
            Experiment::Insert,
            variant,
            total,
            1.0 / batch as f64,
            Wal::Measure,
            |mut connection, start| async move {
                connection.simple_query("begin").await?;
                let mut done = 0u64;
                let mut values: Vec<String> = Vec::new();
                while done < total {
                    let rows = batch.min(total - done);
                    let mut sql = format!("insert into {sink} (id, name, amount) values ");
                    values.clear();
                    for index in 0..rows {
                        let n = index as usize * 3;
                        if index > 0 {
                            sql.push_str(", ");
                        }
                        sql.push_str(&format!("(${}, ${}, ${})", n + 1, n + 2, n + 3));
                        values.extend(row_values(done + index + 1));
                    }
                    let params: Vec<Option<&str>> =
                        values.iter().map(|v| Some(v.as_str())).collect();
                    connection.query_rows(&sql, &params).await?;
                    done += rows;
                    if done < total && start.elapsed() > budget {
                        break;
                    }
                }
                connection.simple_query("commit").await?;
                let time = start.elapsed();
                Ok((Ran { units: done, time }, Some(connection)))
            },
        )
        .await?;
        self.truncate_sink().await
    }

    async fn insert_pipelined(&mut self, path: &Path) -> Result<(), Error> {
        let total = self.options.insert_rows;
        let sink = self.tables.sink.clone();
        self.cell(
            path,
            Experiment::Insert,
            "pipelined".into(),
            total,
            0.0,
            Wal::Measure,
            |mut connection, start| async move {
                let sql = format!("insert into {sink} (id, name, amount) values ($1, $2, $3)");
                let mut source = Generated {
                    next: 1,
                    last: total,
                    values: |n| row_values(n).into_iter().map(Some).collect(),
                };
                let pipeline = Pipeline::prepare(&mut connection, &sql).await?;
                let summary = pipeline
                    .run(
                        &mut source,
                        Transaction::Single,
                        WINDOW_BYTES,
                        &mut |_: u64, _: CallOutcome<'_>| Ok(()),
                    )
                    .await?;
                if summary.failed > 0 {
                    return Err(Error::new(
                        ErrorKind::Database,
                        "the pipelined insert failed".to_owned(),
                    ));
                }
                let time = start.elapsed();
                Ok((
                    Ran {
                        units: summary.calls,
                        time,
                    },
                    Some(connection),
                ))
            },
        )
        .await?;
        self.truncate_sink().await
    }

    async fn insert_copy(&mut self, path: &Path) -> Result<(), Error> {
        let total = self.options.insert_rows;
        let sink = self.tables.sink.clone();
        self.cell(
            path,
            Experiment::Insert,
            "COPY".into(),
            total,
            0.0,
            Wal::Measure,
            |mut connection, start| async move {
                let statement = format!("copy {sink} (id, name, amount) from stdin");
                let mut copy = connection
                    .copy_in(&statement, &[Kind::Integer, Kind::Text, Kind::Decimal])
                    .await?;
                let mut batch = Batch::new(3);
                let mut done = 0u64;
                while done < total {
                    batch.clear();
                    let rows = 1000.min(total - done);
                    for index in 0..rows {
                        for value in row_values(done + index + 1) {
                            batch.push_value(value.as_bytes());
                        }
                    }
                    copy.write_rows(&batch, 0..rows as usize).await?;
                    done += rows;
                }
                let stored = copy.finish().await?;
                let time = start.elapsed();
                Ok((
                    Ran {
                        units: stored,
                        time,
                    },
                    Some(connection),
                ))
            },
        )
        .await?;
        self.truncate_sink().await
    }

    async fn lob_inline(&mut self, path: &Path) -> Result<(), Error> {
        let lob = self.tables.lob.clone();
        self.cell(
            path,
            Experiment::Lob,
            "inline".into(),
            self.options.lob_count,
            0.0,
            Wal::Skip,
            |connection, start| async move {
                let sql = format!("select id, lo_get(data) from {lob} order by id");
                let mut stream =
                    QueryStream::start(connection, &sql, QueryOptions::default()).await?;
                let mut objects = 0u64;
                while let Some(batch) = stream.next_batch().await? {
                    objects += batch.num_rows() as u64;
                }
                let time = start.elapsed();
                Ok((
                    Ran {
                        units: objects,
                        time,
                    },
                    stream.into_connection(),
                ))
            },
        )
        .await
    }

    async fn lob_locator(&mut self, path: &Path) -> Result<(), Error> {
        let lob = self.tables.lob.clone();
        let total = self.options.lob_count;
        let budget = self.options.cell_budget;
        self.cell(
            path,
            Experiment::Lob,
            "locator".into(),
            total,
            1.0,
            Wal::Skip,
            |mut connection, start| async move {
                let locators = connection
                    .query_rows(&format!("select data from {lob} order by id"), &[])
                    .await?;
                let mut objects = 0u64;
                for locator in &locators {
                    connection
                        .query_rows("select lo_get($1::oid)", &[locator[0].as_deref()])
                        .await?;
                    objects += 1;
                    if objects < total && start.elapsed() > budget {
                        break;
                    }
                }
                let time = start.elapsed();
                Ok((
                    Ran {
                        units: objects,
                        time,
                    },
                    Some(connection),
                ))
            },
        )
        .await
    }

    async fn calls_loop(&mut self, path: &Path) -> Result<(), Error> {
        let total = self.options.calls;
        let budget = self.options.cell_budget;
        self.cell(
            path,
            Experiment::Calls,
            "loop".into(),
            total,
            1.0,
            Wal::Skip,
            |mut connection, start| async move {
                let mut calls = 0u64;
                while calls < total {
                    let value = (calls + 1).to_string();
                    connection
                        .query_rows(CALL_SQL, &[Some(value.as_str())])
                        .await?;
                    calls += 1;
                    if calls < total && start.elapsed() > budget {
                        break;
                    }
                }
                let time = start.elapsed();
                Ok((Ran { units: calls, time }, Some(connection)))
            },
        )
        .await
    }

    async fn calls_pipelined(&mut self, path: &Path) -> Result<(), Error> {
        let total = self.options.calls;
        self.cell(
            path,
            Experiment::Calls,
            "pipelined".into(),
            total,
            0.0,
            Wal::Skip,
            |mut connection, start| async move {
                let mut source = Generated {
                    next: 1,
                    last: total,
                    values: |n: u64| vec![Some(n.to_string())],
                };
                let pipeline = Pipeline::prepare(&mut connection, CALL_SQL).await?;
                let summary = pipeline
                    .run(
                        &mut source,
                        Transaction::Single,
                        WINDOW_BYTES,
                        &mut |_: u64, _: CallOutcome<'_>| Ok(()),
                    )
                    .await?;
                let time = start.elapsed();
                Ok((
                    Ran {
                        units: summary.calls,
                        time,
                    },
                    Some(connection),
                ))
            },
        )
        .await
    }

    async fn truncate_sink(&mut self) -> Result<(), Error> {
        let mut connection = Connection::connect(self.config, &Meter::new()).await?;
        connection
            .simple_query(&format!("truncate {}", self.tables.sink))
            .await?;
        connection.close().await;
        Ok(())
    }
}

/// The small call of the calls experiment.
const CALL_SQL: &str = "select $1::int8 * 2 as doubled";

/// The values of generated row `n`: id, name, amount.
fn row_values(n: u64) -> [String; 3] {
    [
        n.to_string(),
        format!("item {n}"),
        format!("{}.{:02}", n / 100, n % 100),
    ]
}

/// Parameter sets `next..=last`, made by `values`.
struct Generated<F> {
    next: u64,
    last: u64,
    values: F,
}

impl<F: FnMut(u64) -> Vec<Option<String>> + Send> ParamSource for Generated<F> {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<ParamSet>, Error>> {
        let set = (self.next <= self.last).then(|| {
            let line = self.next;
            self.next += 1;
            ParamSet {
                line,
                values: Ok((self.values)(line)),
            }
        });
        Box::pin(std::future::ready(Ok(set)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unix_socket_configs_are_refused_with_a_reason() {
        let config: Config = "host=/var/run/postgresql user=postgres dbname=test"
            .parse()
            .unwrap();
        let error = upstream_of(&config).unwrap_err();
        assert_eq!(error.kind(), ErrorKind::Config);
        assert!(error.to_string().contains("TCP"), "{error}");
        let config: Config = "postgres://u@[::1]:5433/db".parse().unwrap();
        assert_eq!(upstream_of(&config).unwrap(), "[::1]:5433");
    }

    #[test]
    fn generated_rows_are_valid_input() {
        assert_eq!(row_values(1234), ["1234", "item 1234", "12.34"]);
        assert_eq!(row_values(5), ["5", "item 5", "0.05"]);
    }
}
