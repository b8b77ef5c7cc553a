//! `sluice proxy`: a network between client and server on one machine, with
//! round trips counted per statement.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use sluice_core::{parse_duration, Error, ErrorKind};
use sluice_proxy::shaping::parse_bandwidth;
use sluice_proxy::{Proxy, ProxyHandle, Report, Shaping, DEFAULT_MAX_CONNECTIONS};
use tokio::signal::unix::{signal, SignalKind};

use crate::console::{err_line, err_text};
use crate::report::exit_code;

/// Arguments of `sluice proxy`.
#[derive(Args)]
pub struct ProxyArgs {
    /// Address to accept clients on.
    #[arg(long, default_value = "127.0.0.1:6432")]
    listen: String,

    /// The PostgreSQL server to forward to.
    #[arg(long, default_value = "127.0.0.1:5432")]
    upstream: String,

    /// Round-trip time to add (half each way), e.g. 2ms, 0.5ms.
    #[arg(long, value_parser = parse_duration, default_value = "0ms")]
    rtt: Duration,

    /// Variation of each one-way delay (± half of it), e.g. 0.2ms.
    #[arg(long, value_parser = parse_duration, default_value = "0ms")]
    jitter: Duration,

    /// Bandwidth cap per direction, e.g. 100mbit, 1gbit, 10MB.
    #[arg(long, value_parser = parse_bandwidth)]
    bandwidth: Option<u64>,

    /// Client connections open at once; a client beyond them is refused with
    /// PostgreSQL's error 53300 (too_many_connections), before any connection to
    /// the server. Keep it below the server's max_connections.
    #[arg(
        long,
        value_name = "N",
        default_value_t = DEFAULT_MAX_CONNECTIONS,
        value_parser = parse_connection_limit
    )]
    max_connections: usize,

    /// Write the report here on exit and on SIGUSR1: JSON, or CSV for a `.csv` name.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
}

/// A limit of open connections: a whole number, at least 1.
fn parse_connection_limit(text: &str) -> Result<usize, String> {
    match text.parse::<usize>() {
        Ok(0) => Err("the proxy must allow at least 1 connection".to_owned()),
        Ok(limit) => Ok(limit),
        Err(_) => Err(format!("{text:?} is not a number of connections")),
    }
}

/// Runs the proxy until Ctrl-C or SIGTERM and returns the exit code.
pub async fn run(arguments: ProxyArgs) -> u8 {
    match serve(&arguments).await {
        Ok(()) => 0,
        Err(error) => {
            err_line!("sluice: {error}");
            exit_code(&error)
        }
    }
}

fn write_report(proxy: &ProxyHandle, path: Option<&PathBuf>) -> Result<(), Error> {
    let report = proxy.report();
    err_text!("{}", report.to_text());
    if let Some(path) = path {
        let text = if path.extension().is_some_and(|ext| ext == "csv") {
            report.to_csv()
        } else {
            serde_json::to_string_pretty(&report.to_json()).expect("JSON values serialize")
        };
        std::fs::write(path, text).map_err(|error| {
            Error::new(
                ErrorKind::Io,
                format!("cannot write {}: {error}", path.display()),
            )
        })?;
        err_line!("report written to {}", path.display());
    }
    Ok(())
}

async fn serve(arguments: &ProxyArgs) -> Result<(), Error> {
    let shaping = Shaping {
        rtt: arguments.rtt,
        jitter: arguments.jitter,
        bandwidth: arguments.bandwidth,
    };
    let proxy = Proxy::new(&arguments.listen, &arguments.upstream, shaping)
        .max_connections(arguments.max_connections)
        .start()
        .map_err(|error| {
            Error::new(
                ErrorKind::Connect,
                format!("cannot listen on {}: {error}", arguments.listen),
            )
        })?;
    err_line!(
        "sluice proxy: {} → {} (rtt {:?}, jitter {:?}, bandwidth {}, at most {} connections)",
        proxy.address(),
        arguments.upstream,
        shaping.rtt,
        shaping.jitter,
        shaping
            .bandwidth
            .map_or("unlimited".to_owned(), |rate| format!("{rate} B/s")),
        arguments.max_connections
    );
    let signal_error = |error: std::io::Error| Error::new(ErrorKind::Io, error.to_string());
    let mut interrupt = signal(SignalKind::interrupt()).map_err(signal_error)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(signal_error)?;
    let mut dump = signal(SignalKind::user_defined1()).map_err(signal_error)?;
    let mut ticker = tokio::time::interval(Duration::from_secs(2));
    let mut last = (0, 0);
    loop {
        tokio::select! {
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            _ = dump.recv() => write_report(&proxy, arguments.report.as_ref())?,
            _ = ticker.tick() => {
                let report = proxy.report();
                let now = (report.round_trips(), report.refused_connections);
                if now != last {
                    err_line!("sluice proxy: {}", summary(&report));
                    last = now;
                }
            }
        }
    }
    proxy.stop();
    write_report(&proxy, arguments.report.as_ref())
}

/// The live summary line: connections, round trips, refusals.
fn summary(report: &Report) -> String {
    let mut line = format!(
        "{} connections ({} open), {} round trips",
        report.connections.len(),
        report.open_connections,
        report.round_trips()
    );
    if report.refused_connections > 0 {
        line += &format!(
            ", {} refused at the limit of {}",
            report.refused_connections, report.max_connections
        );
    }
    line
}
