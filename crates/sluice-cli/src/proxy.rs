//! `sluice proxy`: a network between client and server on one machine, with
//! round trips counted per statement.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use sluice_core::{Error, ErrorKind};
use sluice_proxy::shaping::{parse_bandwidth, parse_duration};
use sluice_proxy::{Proxy, ProxyHandle, Shaping};
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

    /// Write the report here on exit and on SIGUSR1: JSON, or CSV for a `.csv` name.
    #[arg(long, value_name = "FILE")]
    report: Option<PathBuf>,
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
        .start()
        .map_err(|error| {
            Error::new(
                ErrorKind::Connect,
                format!("cannot listen on {}: {error}", arguments.listen),
            )
        })?;
    err_line!(
        "sluice proxy: {} → {} (rtt {:?}, jitter {:?}, bandwidth {})",
        proxy.address(),
        arguments.upstream,
        shaping.rtt,
        shaping.jitter,
        shaping
            .bandwidth
            .map_or("unlimited".to_owned(), |rate| format!("{rate} B/s"))
    );
    let signal_error = |error: std::io::Error| Error::new(ErrorKind::Io, error.to_string());
    let mut interrupt = signal(SignalKind::interrupt()).map_err(signal_error)?;
    let mut terminate = signal(SignalKind::terminate()).map_err(signal_error)?;
    let mut dump = signal(SignalKind::user_defined1()).map_err(signal_error)?;
    let mut ticker = tokio::time::interval(Duration::from_secs(2));
    let mut last_trips = 0;
    loop {
        tokio::select! {
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            _ = dump.recv() => write_report(&proxy, arguments.report.as_ref())?,
            _ = ticker.tick() => {
                let report = proxy.report();
                let trips = report.round_trips();
                if trips != last_trips {
                    err_line!(
                        "sluice proxy: {} connections, {trips} round trips",
                        report.connections.len()
                    );
                    last_trips = trips;
                }
            }
        }
    }
    proxy.stop();
    write_report(&proxy, arguments.report.as_ref())
}
