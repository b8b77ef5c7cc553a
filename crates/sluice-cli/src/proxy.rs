//! `sluice proxy`: a network between client and server on one machine, with
//! round trips counted per statement and faults injected on purpose
//! (`--fault`, and at run time through the control API, `--control`).

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;
use sluice_core::{parse_duration, Error, ErrorKind};
use sluice_proxy::shaping::parse_bandwidth;
use sluice_proxy::{
    ControlToken, Fault, FindingKind, Proxy, ProxyHandle, Report, Shaping, StartError,
    DEFAULT_MAX_CONNECTIONS, MAX_FAULT_DURATION as MAX_DURATION,
};
use tokio::signal::unix::{signal, SignalKind};

use crate::console::{err_line, err_text};
use crate::exit::exit_code;

/// Arguments of `sluice proxy`.
#[derive(Args)]
pub struct ProxyArgs {
    /// Address to accept clients on.
    #[arg(long, default_value = "127.0.0.1:6432")]
    listen: String,

    /// The PostgreSQL server to forward to.
    #[arg(long, default_value = "127.0.0.1:5432")]
    upstream: String,

    /// Round-trip time to add (half each way), e.g. 2ms, 0.5ms; at most 1h.
    #[arg(long, value_parser = parse_shaping_duration, default_value = "0ms")]
    rtt: Duration,

    /// Variation of each one-way delay (± half of it), e.g. 0.2ms; at most 1h.
    #[arg(long, value_parser = parse_shaping_duration, default_value = "0ms")]
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
    #[arg(long, short = 'o', value_name = "FILE")]
    output: Option<PathBuf>,

    /// Exit with code 6 when the report holds a finding of one of these kinds
    /// (comma-separated): n-plus-one, row-by-row, small-fetches,
    /// locator-reads, session-chatter, transaction-per-statement,
    /// parsed-every-time. For a CI job that runs its tests through the proxy.
    #[arg(
        long,
        value_name = "KINDS",
        value_delimiter = ',',
        value_parser = parse_finding_kind
    )]
    fail_on: Vec<FindingKind>,

    /// A fault to inject (repeat for several), e.g. cut:at-data-row=5,
    /// stall:duration=2s:at-statement=3, reset:after-bytes=1000, refuse.
    ///
    /// SPEC is an action and `:`-separated options:
    ///   cut[:TRIGGER]                  close both sides (FIN)
    ///   reset[:TRIGGER]                close both sides with a TCP RST
    ///   stall[:duration=D][:TRIGGER]   stop forwarding for D (none: until removed)
    ///   slow-close:delay=D             hold each side's close back for D
    ///   latency:delay=D[:jitter=J]     add D (± J/2) one way
    ///   bandwidth:rate=R               cap the rate one way (1mbit, 100KB)
    ///   refuse                         answer new clients with FATAL 08004
    /// TRIGGER (default: at once) is after-bytes=N (let N bytes through),
    /// at-data-row=K, at-copy-data=K or at-statement=K (act just before the
    /// K-th such message: the peer gets the K-1 before it whole). Add
    /// upstream (client to server), downstream or both (default) for the way
    /// after-bytes counts and a stall, latency, bandwidth or slow close acts;
    /// once (the first connection it acts on uses it up) or every (default).
    #[arg(long = "fault", value_name = "SPEC", value_parser = parse_fault, verbatim_doc_comment)]
    faults: Vec<Fault>,

    /// Serve the control API here (HTTP: GET, POST and DELETE /faults to list,
    /// add and remove faults while the proxy runs), e.g. 127.0.0.1:6433.
    /// Without --control-token anyone on the machine may use it: a loopback
    /// address only, unless --control-allow-remote.
    #[arg(long, value_name = "ADDRESS")]
    control: Option<String>,

    /// Let --control listen on an address other machines can reach (anyone
    /// who can reach it can cut your connections).
    #[arg(long, requires = "control")]
    control_allow_remote: bool,

    /// Require this token on every control API request (`Authorization:
    /// Bearer TOKEN`; 401 without it). Without a token, requests must be
    /// addressed to localhost or a loopback address (any IP address with
    /// --control-allow-remote), a defence against DNS rebinding.
    #[arg(
        long,
        value_name = "TOKEN",
        env = "SLUICE_PROXY_CONTROL_TOKEN",
        hide_env_values = true
    )]
    control_token: Option<ControlToken>,
}

/// A delay the shaping adds, bounded as a fault's delay is: a huge one would
/// only make every connection fail.
fn parse_shaping_duration(text: &str) -> Result<Duration, String> {
    let duration = parse_duration(text).map_err(|error| error.to_string())?;
    if duration > MAX_DURATION {
        return Err(format!("{text} is too long: at most 1h"));
    }
    Ok(duration)
}

fn parse_finding_kind(text: &str) -> Result<FindingKind, String> {
    FindingKind::from_name(text).ok_or_else(|| {
        let kinds: Vec<&str> = FindingKind::ALL.iter().map(|kind| kind.name()).collect();
        format!("{text:?} is not a kind of finding: {}", kinds.join(", "))
    })
}

fn parse_fault(text: &str) -> Result<Fault, String> {
    text.parse::<Fault>().map_err(|error| error.reason)
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
        Ok(report) => verdict(&report, &arguments.fail_on),
        Err(error) => {
            err_line!("sluice: {error}");
            exit_code(&error)
        }
    }
}

/// The exit code of a proxy that ran: [`crate::exit::FINDINGS`] when `report`
/// holds a finding of a kind in `fail_on`.
fn verdict(report: &Report, fail_on: &[FindingKind]) -> u8 {
    let found: Vec<&str> = fail_on
        .iter()
        .filter(|kind| report.has_finding(**kind))
        .map(|kind| kind.name())
        .collect();
    if found.is_empty() {
        return 0;
    }
    err_line!("sluice proxy: found {} (--fail-on)", found.join(", "));
    crate::exit::FINDINGS
}

fn write_report(proxy: &ProxyHandle, path: Option<&PathBuf>) -> Result<Report, Error> {
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
    Ok(report)
}

/// Runs the proxy until Ctrl-C or SIGTERM; its last report.
async fn serve(arguments: &ProxyArgs) -> Result<Report, Error> {
    let shaping = Shaping {
        rtt: arguments.rtt,
        jitter: arguments.jitter,
        bandwidth: arguments.bandwidth,
    };
    let mut proxy = Proxy::new(&arguments.listen, &arguments.upstream, shaping)
        .max_connections(arguments.max_connections)
        .allow_remote_control(arguments.control_allow_remote);
    for fault in &arguments.faults {
        proxy = proxy.fault(*fault);
    }
    if let Some(control) = &arguments.control {
        proxy = proxy.control(control);
    }
    if let Some(token) = &arguments.control_token {
        proxy = proxy.control_token(token.clone());
    }
    let proxy = proxy.start().map_err(start_error)?;
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
    announce_faults(&proxy, arguments.control_token.is_some());
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
            _ = dump.recv() => {
                write_report(&proxy, arguments.output.as_ref())?;
            }
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
    write_report(&proxy, arguments.output.as_ref())
}

/// Why the proxy could not start, in this command's terms.
fn start_error(error: StartError) -> Error {
    match error {
        StartError::ControlNotLoopback { address } => Error::config(format!(
            "--control {address} is not a loopback address: anyone who can reach the control \
             API can cut your connections; use 127.0.0.1:PORT, or add --control-allow-remote \
             (and --control-token)"
        )),
        StartError::Upstream { .. } => Error::config(format!("--upstream: {error}")),
        other => Error::new(ErrorKind::Connect, other.to_string()),
    }
}

/// Says where the control API is and which faults are in force from the start.
fn announce_faults(proxy: &ProxyHandle, token: bool) {
    if let Some(control) = proxy.control_address() {
        let access = if token {
            "bearer token required"
        } else {
            "no token: requests to localhost only"
        };
        err_line!("sluice proxy: control API on http://{control}/faults ({access})");
    }
    for listed in proxy.faults().list() {
        err_line!("sluice proxy: fault {}: {}", listed.id, listed.fault);
    }
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
