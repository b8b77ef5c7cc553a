//! `sluice serve`: the gateway (`sluice-gateway`) with its HTTP front end
//! (`sluice-server`) and, with `[flight]`, its Arrow Flight one
//! (`sluice-flight`), and its zero-setup demo on an embedded SQLite file.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;
use sluice_gateway::config::{DEFAULT_LISTEN, MAX_THREADS};
use sluice_gateway::{effective_listen, AppState, Config, Live, ServerTls, TlsError, TlsFile};
use sluice_server::demo::{self, Prepared, DEMO_ROWS};
use sluice_server::{serve, LiveApp};

use crate::console::err_line;
use crate::exit;

/// Arguments of `sluice serve`.
#[derive(Args)]
pub struct ServeArgs {
    /// The configuration file: databases, named queries, tokens, limits.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "demo",
        conflicts_with = "demo"
    )]
    config: Option<PathBuf>,

    /// Address to listen on [default: the file's [server] listen, else 127.0.0.1:8080].
    /// Without tokens in the configuration only loopback addresses are served.
    #[arg(long, value_name = "ADDRESS")]
    listen: Option<SocketAddr>,

    /// Serve a built-in SQLite database of 1,000,000 payment events (made on first
    /// start, reused afterwards); needs no database server.
    #[arg(long)]
    demo: bool,

    /// Where the demo database lives
    /// [default: $XDG_DATA_HOME/sluice/demo.sqlite or ~/.local/share/sluice/demo.sqlite].
    #[arg(long, value_name = "FILE", requires = "demo")]
    demo_file: Option<PathBuf>,

    /// Rows in the demo table (for tests).
    #[arg(long, hide = true, default_value_t = DEMO_ROWS, requires = "demo")]
    demo_rows: u64,

    /// Write the request log as JSON lines instead of key=value text.
    #[arg(long)]
    log_json: bool,

    /// Worker threads [default: the file's [server] threads, else one per CPU
    /// this process may use].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=MAX_THREADS as i64))]
    threads: Option<u16>,
}

/// The runtime's worker threads for `arguments`: `--threads`, else the
/// configuration's `[server] threads`, else one per usable CPU. A file that
/// does not load is reported by [`run`], with the runtime it gets here.
pub fn worker_threads(arguments: &ServeArgs) -> usize {
    if let Some(threads) = arguments.threads {
        return usize::from(threads);
    }
    arguments
        .config
        .as_deref()
        .and_then(|path| Config::load(path).ok())
        .and_then(|config| config.threads)
        .unwrap_or_else(crate::cpus::usable_cpus)
}

fn init_logging(json: bool) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("SLUICE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        // On a failed write the subscriber would report it with `eprintln!`, which
        // panics when standard error is a closed pipe; a lost log line is not worth that.
        .log_internal_errors(false)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()));
    if json {
        builder.json().init();
    } else {
        builder.init();
    }
}

/// Loads the configuration (or prepares the demo) and serves until SIGTERM or
/// Ctrl-C; returns the exit code.
pub async fn run(arguments: ServeArgs) -> u8 {
    init_logging(arguments.log_json);
    let open_files = sluice_gateway::raise_open_files_limit();
    if let Err(error) = &open_files {
        err_line!("sluice: could not raise the open-files limit: {error}");
    }
    let demo_mode = arguments.demo;
    let config = match load(&arguments).await {
        Ok(config) => config,
        Err(message) => {
            err_line!("sluice: {message}");
            return exit::USAGE;
        }
    };
    let requested = arguments
        .listen
        .or(config.listen)
        .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("a valid default address"));
    let grace = config.shutdown_grace;
    let names: Vec<String> = config.queries.keys().cloned().collect();
    let tls = match config.tls.as_ref().map(ServerTls::load).transpose() {
        Ok(tls) => tls,
        Err(error) => {
            err_line!("sluice: {} {error}", tls_setting(&error));
            return exit::USAGE;
        }
    };
    let state = AppState::new(config);
    if let Err(code) = check_databases(&state).await {
        return code;
    }
    let (address, warning) = effective_listen(requested, state.auth_enabled(), tls.is_some());
    match warning {
        Some(warning) => err_line!("sluice: {warning}"),
        None if !state.auth_enabled() => err_line!(
            "sluice: no [[tokens]] configured: listening on localhost only, named queries need no token"
        ),
        None => {}
    }
    let shutdown = shutdown_signal();
    let flight = state.config().flight.clone();
    let live = LiveApp::new(Live::new(state));
    reload_on_hangup(tls.clone(), arguments.config.clone(), live.clone());
    let listener = match sluice_gateway::bind(address) {
        Ok(listener) => listener,
        Err(error) => {
            err_line!("sluice: cannot listen on {address}: {error}");
            return exit::IO;
        }
    };
    let bound = listener.local_addr().unwrap_or(address);
    let scheme = if tls.is_some() { "https" } else { "http" };
    let threads = tokio::runtime::Handle::current().metrics().num_workers();
    err_line!(
        "sluice serve: listening on {scheme}://{bound} with {} named quer{}: {}; {threads} worker thread{}; {}",
        names.len(),
        if names.len() == 1 { "y" } else { "ies" },
        names.join(", "),
        if threads == 1 { "" } else { "s" },
        connection_room(&live, open_files.ok().and_then(|files| files.raised_from)),
    );
    if demo_mode {
        err_line!("  try: curl -s http://{bound}/queries/payment_events | head -n 3");
        err_line!("       curl -s 'http://{bound}/queries/daily_totals?since=2024-06-01' -H 'Accept: text/csv'");
        err_line!("       curl -s http://{bound}/openapi.json");
    }
    // Flight stops with HTTP: both wait on the one signal.
    let stopping = tokio_util::sync::CancellationToken::new();
    if let Some(flight) = flight {
        if let Err(code) = start_flight(&live, flight, tls.clone(), &stopping) {
            return code;
        }
    }
    let signalled = stopping.clone();
    let shutdown = async move {
        shutdown.await;
        signalled.cancel();
    };
    match serve(live, listener, tls, shutdown, grace).await {
        Ok(()) => 0,
        Err(error) => {
            err_line!("sluice: serving failed: {error}");
            exit::IO
        }
    }
}

/// The start line's account of descriptors: the open-files limit (and what
/// it was raised from) and each listener's connection cap.
fn connection_room(live: &LiveApp, raised_from: Option<u64>) -> String {
    let limit = sluice_gateway::open_files_limit();
    let cap = sluice_gateway::cap_for(live.state().config());
    let limit = if limit == u64::MAX {
        "unlimited".to_owned()
    } else {
        limit.to_string()
    };
    let raised = raised_from.map_or(String::new(), |from| format!(" (raised from {from})"));
    format!("open files {limit}{raised}, at most {cap} connections per listener")
}

/// Binds `[flight] listen` (loopback only without tokens, as HTTP) and serves
/// Arrow Flight there, over HTTP's TLS when it has one, until `stopping` is
/// cancelled.
fn start_flight(
    live: &LiveApp,
    flight: sluice_gateway::config::FlightConfig,
    tls: Option<ServerTls>,
    stopping: &tokio_util::sync::CancellationToken,
) -> Result<(), u8> {
    let https = tls.is_some();
    let (address, warning) = effective_listen(flight.listen, live.state().auth_enabled(), https);
    if let Some(warning) = warning {
        err_line!("sluice: Flight: {warning}");
    }
    let listener = sluice_gateway::bind(address).map_err(|error| {
        err_line!("sluice: cannot listen for Flight on {address}: {error}");
        exit::IO
    })?;
    let bound = listener.local_addr().unwrap_or(address);
    err_line!(
        "sluice serve: Arrow Flight on {}://{bound}, {} part{} per plan by default",
        if https { "grpc+tls" } else { "grpc" },
        flight.partitions,
        if flight.partitions == 1 { "" } else { "s" }
    );
    let stopped = stopping.clone().cancelled_owned();
    let live = live.clone();
    tokio::spawn(async move {
        if let Err(error) =
            sluice_flight::serve(live.live().clone(), flight, listener, tls, stopped).await
        {
            tracing::error!(%error, "Flight stopped");
        }
    });
    Ok(())
}

/// Prepares every named query and vets `[sql]` on the databases that answer (a
/// problem stops the start, like a configuration error); the others are checked
/// in the background once they answer, with problems logged.
async fn check_databases(state: &AppState) -> Result<(), u8> {
    let report = state.check_databases().await;
    if !report.problems.is_empty() {
        for problem in &report.problems {
            err_line!("sluice: {problem}");
        }
        return Err(exit::USAGE);
    }
    for name in &report.unreachable {
        err_line!(
            "sluice: database {name:?} is unavailable: requests get 503 until it is back; \
             its named queries are checked when it answers"
        );
    }
    report.check_unreachable_later(state);
    Ok(())
}

async fn load(arguments: &ServeArgs) -> Result<Config, String> {
    if !arguments.demo {
        let path = arguments
            .config
            .as_ref()
            .ok_or("give --config FILE or --demo")?;
        return Config::load(path).map_err(|error| error.to_string());
    }
    let path = match &arguments.demo_file {
        Some(path) => path.clone(),
        None => demo::default_path().ok_or(
            "cannot find a data directory for the demo database (set HOME or XDG_DATA_HOME, or give --demo-file)",
        )?,
    };
    let rows = arguments.demo_rows;
    let file = path.clone();
    let prepared = tokio::task::spawn_blocking(move || demo::ensure(&file, rows))
        .await
        .map_err(|error| format!("preparing the demo database failed: {error}"))?
        .map_err(|error| error.to_string())?;
    match prepared {
        Prepared::Reused => err_line!("sluice: demo database {} (reused)", path.display()),
        Prepared::Created(seconds) => err_line!(
            "sluice: demo database {} created: {rows} payment events in {seconds:.1} s",
            path.display()
        ),
    }
    demo::config(&path).map_err(|error| error.to_string())
}

/// The setting a certificate problem is about.
fn tls_setting(error: &TlsError) -> &'static str {
    match error {
        TlsError::File {
            file: TlsFile::Key, ..
        } => "[server] tls_key",
        TlsError::File { .. } => "[server] tls_cert",
        TlsError::Pair { .. } => "[server] tls_cert and tls_key",
    }
}

/// On each SIGHUP, re-reads the configuration file (queries, tokens, limits,
/// databases: see `sluice_gateway::Live`) and the certificate and key. New
/// requests get the new configuration and new connections the new
/// certificate; requests and streams in flight go on as they started. A file
/// that does not load, a configuration whose checks find a problem, or a
/// certificate that does not load is logged and the previous one stays in use.
/// The demo has no file to re-read.
fn reload_on_hangup(tls: Option<ServerTls>, config: Option<PathBuf>, live: LiveApp) {
    use tokio::signal::unix::{signal, SignalKind};
    let Ok(mut hangup) = signal(SignalKind::hangup()) else {
        return;
    };
    tokio::spawn(async move {
        while hangup.recv().await.is_some() {
            if let Some(path) = &config {
                reload_config(path, &live).await;
            }
            let Some(tls) = &tls else {
                continue;
            };
            match tls.reload() {
                Ok(()) => tracing::info!(
                    certificate = %tls.files().certificate.display(),
                    "SIGHUP: TLS certificate reloaded; new connections use it"
                ),
                Err(error) => tracing::error!(
                    %error,
                    "SIGHUP: TLS certificate not reloaded; the previous one stays in use"
                ),
            }
        }
    });
}

/// Re-reads `path` into `live`, logging what happened.
async fn reload_config(path: &std::path::Path, live: &LiveApp) {
    let config = match Config::load(path) {
        Ok(config) => config,
        Err(error) => {
            tracing::error!(
                %error,
                "SIGHUP: configuration not reloaded; the previous one keeps serving"
            );
            return;
        }
    };
    let queries = config.queries.len();
    match live.reload(config).await {
        Ok(reloaded) => {
            tracing::info!(
                file = %path.display(),
                queries,
                "SIGHUP: configuration reloaded; new requests use it, requests in flight finish as they started"
            );
            if !reloaded.needs_restart.is_empty() {
                tracing::warn!(
                    settings = %reloaded.needs_restart.join(", "),
                    "SIGHUP: these [server] settings changed and take effect at the next start"
                );
            }
            for name in reloaded.unreachable {
                tracing::warn!(
                    database = %name,
                    "SIGHUP: database unavailable; its named queries are checked when it answers"
                );
            }
        }
        Err(problems) => {
            for problem in problems {
                tracing::error!(%problem, "SIGHUP: configuration not reloaded");
            }
            tracing::error!("SIGHUP: the previous configuration keeps serving");
        }
    }
}

/// Resolves on SIGTERM or SIGINT. The handlers are registered now, not when the
/// future is first polled, so a signal right after "listening" is not fatal.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    use tokio::signal::unix::{signal, SignalKind};
    let terminate = signal(SignalKind::terminate());
    let interrupt = signal(SignalKind::interrupt());
    async move {
        match (terminate, interrupt) {
            (Ok(mut terminate), Ok(mut interrupt)) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = interrupt.recv() => {}
                }
            }
            _ => std::future::pending().await,
        }
    }
}
