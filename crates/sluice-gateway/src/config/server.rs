//! `[server]`: where the gateway listens, its connection and body limits, its
//! worker threads and HTTPS files.

use std::net::SocketAddr;
use std::time::Duration;

use super::entries::Entries;
use super::error::ConfigError;
use super::keys::{Key, KeyDefault, Section, Type};
use crate::tls::TlsFiles;

/// The default address, loopback only.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

/// The default `[server] shutdown_grace`.
pub const DEFAULT_SHUTDOWN_GRACE: Duration = Duration::from_secs(30);

/// The default `[server] header_read_timeout`.
pub const DEFAULT_HEADER_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The default `[server] keep_alive_timeout`.
pub const DEFAULT_KEEP_ALIVE_TIMEOUT: Duration = Duration::from_secs(60);

/// The default `[server] max_query_string`: far beyond any named query's
/// parameters, small enough that a query string cannot be used to fill memory.
pub const DEFAULT_MAX_QUERY_STRING: usize = 8 << 10;

/// The default `[server] max_body` for uploads and batches (streamed, so the
/// limit is about abuse, not memory).
pub const DEFAULT_MAX_BODY: u64 = 1 << 30;

/// The default `[server] max_stream_duration`.
pub const DEFAULT_MAX_STREAM_DURATION: Duration = Duration::from_secs(3600);

/// The default `[server] idle_write_timeout`.
pub const DEFAULT_IDLE_WRITE_TIMEOUT: Duration = Duration::from_secs(60);

/// The default `[server] body_read_timeout`.
pub const DEFAULT_BODY_READ_TIMEOUT: Duration = Duration::from_secs(10);

/// The default `[server] min_body_rate`, bytes a second: far below any real
/// link, far above a client that trickles a body to hold what it holds.
pub const DEFAULT_MIN_BODY_RATE: u64 = 1 << 10;

/// The largest `[server] max_connections`: beyond any open-files limit in use.
pub const MAX_CONNECTIONS: usize = 1 << 24;

/// The most worker threads a configuration may ask for: far beyond any
/// machine's cores, low enough that a typo cannot exhaust the process.
pub const MAX_THREADS: usize = 1024;

/// `[server]`'s keys.
pub(super) static SECTION: Section = Section {
    path: "server",
    heading: "[server]",
    about: "The listener and its limits. `listen`, `threads`, the connection timeouts and \
            `shutdown_grace` take effect at the next start only; the TLS files are re-read on SIGHUP.",
    keys: &[
        Key {
            name: "listen",
            ty: Type::Address,
            default: KeyDefault::Absent("`127.0.0.1:8080`"),
            meaning: "The HTTP address; `--listen` wins. Without tokens only loopback addresses are served.",
            example: Some("\"127.0.0.1:8080\""),
            old_names: &[],
        },
        Key {
            name: "shutdown_grace",
            ty: Type::Duration,
            default: KeyDefault::Duration(DEFAULT_SHUTDOWN_GRACE),
            meaning: "After SIGTERM, how long in-flight streams may finish.",
            example: Some("\"30s\""),
            old_names: &[],
        },
        Key {
            name: "header_read_timeout",
            ty: Type::Timeout,
            default: KeyDefault::Duration(DEFAULT_HEADER_READ_TIMEOUT),
            meaning: "A request's head must arrive within this (the TLS handshake counts against it).",
            example: Some("\"10s\""),
            old_names: &[],
        },
        Key {
            name: "keep_alive_timeout",
            ty: Type::Timeout,
            default: KeyDefault::Duration(DEFAULT_KEEP_ALIVE_TIMEOUT),
            meaning: "An idle kept-alive connection is closed after this.",
            example: Some("\"60s\""),
            old_names: &[],
        },
        Key {
            name: "max_connections",
            ty: Type::Count(MAX_CONNECTIONS),
            default: KeyDefault::Absent("10000, fewer under a low open-files limit"),
            meaning: "Open connections per listener (HTTP, Flight); more are closed at once.",
            example: Some("10000"),
            old_names: &[],
        },
        Key {
            name: "threads",
            ty: Type::Count(MAX_THREADS),
            default: KeyDefault::Absent("one per CPU the process may use"),
            meaning: "Worker threads; `--threads` wins.",
            example: Some("8"),
            old_names: &[],
        },
        Key {
            name: "max_query_string",
            ty: Type::Size,
            default: KeyDefault::Size(DEFAULT_MAX_QUERY_STRING as u64),
            meaning: "A longer query string is refused with 414.",
            example: Some("\"8KiB\""),
            old_names: &[],
        },
        Key {
            name: "max_body",
            ty: Type::Size,
            default: KeyDefault::Size(DEFAULT_MAX_BODY),
            meaning: "`POST /tables` and batch bodies; larger ones get 413.",
            example: Some("\"1GiB\""),
            old_names: &[],
        },
        Key {
            name: "max_stream_duration",
            ty: Type::Timeout,
            default: KeyDefault::Duration(DEFAULT_MAX_STREAM_DURATION),
            meaning: "A response body running longer is aborted, its query cancelled.",
            example: Some("\"1h\""),
            old_names: &[],
        },
        Key {
            name: "idle_write_timeout",
            ty: Type::Timeout,
            default: KeyDefault::Duration(DEFAULT_IDLE_WRITE_TIMEOUT),
            meaning: "A response body whose client takes nothing for this long is aborted.",
            example: Some("\"60s\""),
            old_names: &[],
        },
        Key {
            name: "body_read_timeout",
            ty: Type::Timeout,
            default: KeyDefault::Duration(DEFAULT_BODY_READ_TIMEOUT),
            meaning: "A request body must keep coming: each stretch of this long that the server \
                      waits for it must bring `min_body_rate` bytes a second, and at least one byte. \
                      A slower body is ended: 408 (a batch whose results are streaming is cut), \
                      nothing written ([Slow bodies](gateway.md#a-slow-body-cannot-hold-a-database-session)).",
            example: Some("\"10s\""),
            old_names: &[],
        },
        Key {
            name: "min_body_rate",
            ty: Type::Size,
            default: KeyDefault::Size(DEFAULT_MIN_BODY_RATE),
            meaning: "Bytes a second a request body must average over each `body_read_timeout` \
                      of waiting for it; `\"0\"`: only a stretch without a byte ends it.",
            example: Some("\"1KiB\""),
            old_names: &[],
        },
        Key {
            name: "tls_cert",
            ty: Type::EnvText,
            default: KeyDefault::Absent("plain HTTP"),
            meaning: "Serve HTTPS (HTTP/2 and HTTP/1.1, and Flight over TLS): the certificate chain, PEM; \
                      needs `tls_key`; re-read on SIGHUP ([HTTPS](serve.md#https)).",
            example: Some("\"/etc/sluice/server.crt\""),
            old_names: &[],
        },
        Key {
            name: "tls_key",
            ty: Type::EnvText,
            default: KeyDefault::Absent("plain HTTP"),
            meaning: "The private key of `tls_cert`, PEM; re-read on SIGHUP.",
            example: Some("\"/etc/sluice/server.key\""),
            old_names: &[],
        },
    ],
};

/// `[server]`, checked.
pub(super) struct ServerSection {
    pub(super) listen: Option<SocketAddr>,
    pub(super) shutdown_grace: Duration,
    pub(super) header_read_timeout: Duration,
    pub(super) keep_alive_timeout: Duration,
    pub(super) max_connections: Option<usize>,
    pub(super) tls: Option<TlsFiles>,
    pub(super) threads: Option<usize>,
    pub(super) max_query_string: usize,
    pub(super) max_body: u64,
    pub(super) max_stream_duration: Duration,
    pub(super) idle_write_timeout: Duration,
    pub(super) body_read_timeout: Duration,
    pub(super) min_body_rate: u64,
}

/// Reads `[server]`; every key with a default has one, so the `unwrap_or`s
/// below are never taken.
pub(super) fn server_section(entries: &Entries<'_>) -> Result<ServerSection, ConfigError> {
    let duration =
        |name| -> Result<Duration, ConfigError> { Ok(entries.duration(name)?.unwrap_or_default()) };
    let count = |name| -> Result<Option<usize>, ConfigError> {
        Ok(entries.count(name)?.map(|count| count as usize))
    };
    Ok(ServerSection {
        listen: entries.address("listen")?,
        shutdown_grace: duration("shutdown_grace")?,
        header_read_timeout: duration("header_read_timeout")?,
        keep_alive_timeout: duration("keep_alive_timeout")?,
        max_connections: count("max_connections")?,
        tls: tls_files(entries)?,
        threads: count("threads")?,
        max_query_string: usize::try_from(entries.size("max_query_string")?.unwrap_or_default())
            .unwrap_or(usize::MAX),
        max_body: entries.size("max_body")?.unwrap_or_default(),
        max_stream_duration: duration("max_stream_duration")?,
        idle_write_timeout: duration("idle_write_timeout")?,
        body_read_timeout: duration("body_read_timeout")?,
        min_body_rate: entries.size("min_body_rate")?.unwrap_or_default(),
    })
}

/// `tls_cert` and `tls_key`: both or neither. The files are read when the
/// server starts ([`crate::tls::ServerTls::load`]), not here.
fn tls_files(entries: &Entries<'_>) -> Result<Option<TlsFiles>, ConfigError> {
    match (entries.text("tls_cert")?, entries.text("tls_key")?) {
        (None, None) => Ok(None),
        (Some(certificate), Some(key)) => Ok(Some(TlsFiles {
            certificate: certificate.value.into(),
            key: key.value.into(),
        })),
        (Some(certificate), None) => Err(entries.error(
            "tls_cert",
            certificate.span,
            "tls_cert needs tls_key, the certificate's private key",
        )),
        (None, Some(key)) => Err(entries.error(
            "tls_key",
            key.span,
            "tls_key needs tls_cert, the certificate chain it belongs to",
        )),
    }
}
