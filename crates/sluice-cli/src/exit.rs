//! The exit codes of `sluice` (documented in docs/src/errors.md, whose table
//! is made from [`MEANINGS`]) and which code an error ends the process with
//! ([`exit_code`]).

use sluice_core::{Error, ErrorKind};

/// The database reported an error for the statement.
pub const DATABASE: u8 = 1;
/// Invalid arguments or connection settings.
pub const USAGE: u8 = 2;
/// The database could not be reached, refused the login, or went away.
pub const CONNECTION: u8 = 3;
/// Reading input or writing output failed.
pub const IO: u8 = 4;
/// The input holds a bad record (import, aborting on the first error).
pub const BAD_INPUT: u8 = 5;
/// `sluice proxy --fail-on`: the traffic showed a pattern of a listed kind.
pub const FINDINGS: u8 = 6;
/// Interrupted by Ctrl-C (128 + SIGINT).
pub const INTERRUPTED: u8 = 130;
/// Stopped by SIGTERM (128 + SIGTERM).
pub const TERMINATED: u8 = 143;

/// Every exit code and what it means to a user: the book's table of exit
/// codes is made from this (a test keeps docs/src/errors.md current).
pub const MEANINGS: [(u8, &str); 9] = [
    (
        0,
        "success, or the reader closed the output early (`| head`)",
    ),
    (
        DATABASE,
        "the database reported an error for the statement (bad SQL, wrong parameter type, \
         division by zero mid-stream, a row the table refuses on import, …)",
    ),
    (
        USAGE,
        "invalid arguments or connection settings (unparseable URL, wrong number of \
         `--param` values), or a command the database cannot serve (`sluice import` into a \
         SQLite file, `--jobs` above 1 on MariaDB)",
    ),
    (
        CONNECTION,
        "the server could not be reached, refused the login, broke the protocol (e.g. asked \
         for a local file sluice did not offer), or went away (including a session it ended \
         with a `FATAL` error, e.g. `pg_terminate_backend` or a shutdown, a connection cut or \
         reset mid-way, and a server silent for longer than `--timeout`)",
    ),
    (
        IO,
        "reading or writing a file failed (including an input cut off mid-way)",
    ),
    (
        BAD_INPUT,
        "import: the input holds a bad record (malformed JSON, unknown key, invalid UTF-8, \
         line too long) and `--on-error` is `abort`, or its CSV header does not name the \
         columns it must (`--columns`, `--header match`)",
    ),
    (
        FINDINGS,
        "`sluice proxy --fail-on`: the traffic showed a finding of a listed kind ([Findings \
         as data](proxy.md#findings-as-data-and---fail-on))",
    ),
    (
        INTERRUPTED,
        "interrupted with Ctrl-C (the query was cancelled)",
    ),
    (
        TERMINATED,
        "stopped with SIGTERM, which `export`, `import`, `copy` and `call` take as Ctrl-C \
         (the query was cancelled)",
    ),
];

/// The exit code for an error, by kind.
pub fn exit_code(error: &Error) -> u8 {
    match error.kind() {
        // A FATAL error ends the session (pg_terminate_backend, a shutdown): the
        // database went away; the statement did not fail.
        ErrorKind::Database if ends_the_session(error) => CONNECTION,
        ErrorKind::Database => DATABASE,
        ErrorKind::Config | ErrorKind::Unsupported => USAGE,
        // A server that breaks the protocol is no more usable than one gone.
        ErrorKind::Connect
        | ErrorKind::Authentication
        | ErrorKind::Closed
        | ErrorKind::Protocol => CONNECTION,
        ErrorKind::Cancelled => INTERRUPTED,
        ErrorKind::Data => BAD_INPUT,
        _ => IO,
    }
}

fn ends_the_session(error: &Error) -> bool {
    error
        .as_db_error()
        .is_some_and(|db| matches!(db.severity.as_str(), "FATAL" | "PANIC"))
}
