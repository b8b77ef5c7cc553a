//! Start-up checks against the databases: what the configuration file alone
//! cannot tell, found before the first request rather than by every request.
//!
//! - Every named query is prepared once, without running (PostgreSQL: Parse and
//!   Describe; SQLite: `prepare` on the file opened read-only). SQL the database
//!   refuses, a parameter count other than the declared one, a declared type whose
//!   values PostgreSQL could not take as the type it inferred for that parameter
//!   ([`accepts`]), or a SQLite statement that writes, is a problem.
//! - With `[sql]`, a session is set up as for `POST /sql`: the `[sql] role` must
//!   be settable and the login unprivileged (see [`crate::privileges`]).
//!
//! Each problem is a [`ConfigError`] naming the file, the line and the key, as
//! configuration errors are, so `sluice serve` reports them the same way and
//! does not start. A database that cannot be reached at start keeps today's
//! behaviour (the server starts, requests get 503 until it is back);
//! [`check_when_reachable`] then runs its checks as soon as it answers and logs
//! what they find (ad-hoc SQL is also checked by every request).

use std::time::Duration;

use crate::app::AppState;
use crate::config::{ConfigError, QueryConfig};
use crate::db::{Database, Described, Refusal, StartError};
use crate::params::ParamType;

/// Longest a database's checks may take before it counts as unreachable.
pub const CHECK_TIMEOUT: Duration = Duration::from_secs(30);

/// What the start-up checks found.
#[derive(Debug, Default)]
pub struct Report {
    /// Problems, in configuration order (databases by name, then their queries).
    pub problems: Vec<ConfigError>,
    /// Databases that did not answer; their checks have not run.
    pub unreachable: Vec<String>,
}

impl AppState {
    /// Runs the checks of every database.
    pub async fn check_databases(&self) -> Report {
        let mut report = Report::default();
        for name in self.config().databases.keys() {
            match self.check_database(name).await {
                Ok(problems) => report.problems.extend(problems),
                Err(_) => report.unreachable.push(name.clone()),
            }
        }
        report
    }

    /// Runs the checks of one database: its named queries, and `[sql]` if it runs
    /// there. `Err` when the database did not answer (within [`CHECK_TIMEOUT`]).
    pub async fn check_database(&self, name: &str) -> Result<Vec<ConfigError>, StartError> {
        let database = self.database(name).map_err(|error| {
            StartError::Unavailable(sluice_core::Error::config(error.to_string()))
        })?;
        tokio::time::timeout(CHECK_TIMEOUT, self.run_checks(name, database))
            .await
            .unwrap_or_else(|_| {
                Err(StartError::Unavailable(sluice_core::Error::new(
                    sluice_core::ErrorKind::Connect,
                    format!("the checks of database {name:?} timed out"),
                )))
            })
    }

    async fn run_checks(
        &self,
        name: &str,
        database: &Database,
    ) -> Result<Vec<ConfigError>, StartError> {
        let config = self.config();
        let mut problems = Vec::new();
        for query in config
            .queries
            .values()
            .filter(|query| query.database == name)
        {
            problems.extend(check_query(database, query, &config.file).await?);
        }
        if let Some(sql) = config.sql.as_ref().filter(|sql| sql.database == name) {
            match database.check_ad_hoc(sql.role.as_deref()).await {
                Ok(()) => {}
                Err(StartError::Refused(refusal)) => problems.push(ConfigError {
                    file: config.file.clone(),
                    line: sql.line,
                    key: match refusal {
                        Refusal::Role(_) => "sql.role",
                        Refusal::Privileged(_) => "sql",
                    }
                    .to_owned(),
                    message: refusal_message(&refusal, name),
                }),
                Err(other) => return Err(other),
            }
        }
        Ok(problems)
    }
}

/// Waits until database `name` answers (trying every `interval`), then runs its
/// checks, logs each problem as an error and returns them.
pub async fn check_when_reachable(
    state: AppState,
    name: String,
    interval: Duration,
) -> Vec<ConfigError> {
    loop {
        match state.check_database(&name).await {
            Ok(problems) => {
                for problem in &problems {
                    tracing::error!(database = %name, %problem, "start-up check failed");
                }
                if problems.is_empty() {
                    tracing::info!(database = %name, "start-up checks passed");
                }
                return problems;
            }
            Err(_) => tokio::time::sleep(interval).await,
        }
    }
}

fn refusal_message(refusal: &Refusal, database: &str) -> String {
    match refusal {
        Refusal::Role(error) => format!(
            "SET ROLE failed: {error} (the login of database {database:?} must be a member of the role: GRANT role TO login)"
        ),
        Refusal::Privileged(privileges) => format!(
            "POST /sql would run on database {database:?}, where {privileges}; a token with scope \"sql\" could use that \
             (a read-only transaction does not stop it, and the statement can undo SET ROLE). Point [sql] database at a \
             [databases.NAME] entry whose login has none of these rights (e.g. CREATE ROLE sluice_sql LOGIN; GRANT SELECT \
             ON … TO sluice_sql), or revoke them"
        ),
    }
}

/// Prepares one named query and compares it with its declaration.
async fn check_query(
    database: &Database,
    query: &QueryConfig,
    file: &str,
) -> Result<Vec<ConfigError>, StartError> {
    let problem = |line: usize, key: String, message: String| ConfigError {
        file: file.to_owned(),
        line,
        key,
        message,
    };
    let key = format!("queries.{}", query.name);
    let described = match database.describe(&query.sql).await {
        Ok(described) => described,
        Err(StartError::Query(error)) => {
            return Ok(vec![problem(
                query.line,
                format!("{key}.sql"),
                format!("the database refuses this SQL: {error}"),
            )])
        }
        Err(other) => return Err(other),
    };
    let declared = query.params.len();
    let mut problems = Vec::new();
    let found = match &described {
        Described::Postgres(types) => types.len(),
        Described::Sqlite { parameters, .. } => *parameters,
    };
    if found != declared {
        problems.push(problem(
            query.line,
            format!("{key}.params"),
            count_message(found, declared, database.is_sqlite()),
        ));
    }
    match described {
        Described::Postgres(types) => {
            for (index, (param, oid)) in query.params.iter().zip(types).enumerate() {
                if !accepts(param.ty, oid) {
                    problems.push(problem(
                        param.line,
                        format!("{key}.params[{index}].type"),
                        type_message(param.ty, oid, index + 1),
                    ));
                }
            }
        }
        Described::Sqlite {
            read_only: false, ..
        } => problems.push(problem(
            query.line,
            format!("{key}.sql"),
            "this SQL writes, but SQLite databases are served read-only".into(),
        )),
        Described::Sqlite { .. } => {}
    }
    Ok(problems)
}

fn count_message(found: usize, declared: usize, sqlite: bool) -> String {
    let placeholder = if sqlite { "?" } else { "$" };
    let uses = match found {
        0 => "the SQL takes no parameters".to_owned(),
        1 => format!("the SQL takes 1 parameter ({placeholder}1)"),
        n => format!("the SQL takes {n} parameters ({placeholder}1 to {placeholder}{n})"),
    };
    format!(
        "{uses}, but {declared} {} declared",
        if declared == 1 { "is" } else { "are" }
    )
}

fn type_message(declared: ParamType, oid: u32, number: usize) -> String {
    let inferred = builtin_name(oid).unwrap_or("another type");
    format!(
        "declared {}, but PostgreSQL takes ${number} as {inferred}: cast it in the SQL \
         (${number}::{}) or declare a type of the same kind",
        declared.name(),
        cast_name(declared)
    )
}

/// PostgreSQL's name of a declared type, for a cast.
fn cast_name(ty: ParamType) -> &'static str {
    match ty {
        ParamType::SmallInt => "smallint",
        ParamType::Int => "int",
        ParamType::BigInt => "bigint",
        ParamType::Numeric => "numeric",
        ParamType::Float => "float8",
        ParamType::Text => "text",
        ParamType::Bool => "bool",
        ParamType::Date => "date",
        ParamType::Timestamp => "timestamp",
        ParamType::TimestampTz => "timestamptz",
        ParamType::Uuid => "uuid",
        ParamType::Json => "jsonb",
    }
}

/// The built-in types the comparison knows, by OID.
const BUILTINS: [(u32, &str); 20] = [
    (16, "bool"),
    (17, "bytea"),
    (19, "name"),
    (20, "bigint"),
    (21, "smallint"),
    (23, "int"),
    (25, "text"),
    (114, "json"),
    (700, "real"),
    (701, "double precision"),
    (1042, "character"),
    (1043, "varchar"),
    (1082, "date"),
    (1083, "time"),
    (1114, "timestamp"),
    (1184, "timestamptz"),
    (1186, "interval"),
    (1700, "numeric"),
    (2950, "uuid"),
    (3802, "jsonb"),
];

fn builtin_name(oid: u32) -> Option<&'static str> {
    BUILTINS
        .iter()
        .find(|(known, _)| *known == oid)
        .map(|(_, name)| *name)
}

/// Whether a parameter declared `declared` may be taken by PostgreSQL as type
/// `oid` (values are sent as text, which the server converts). The kinds must
/// agree: a number as a number, a moment as a date or time, and so on; widths
/// may differ (an `int` value out of `smallint` range is a 400 naming the value,
/// not a broken query), but a fraction may not meet an integer, nor anything but
/// `text` meet text (an `int` compared as text sorts `10` before `9`). `text` is
/// sent as given, for the server to convert to whatever the SQL needs, so it
/// goes with any type; types the comparison does not know (arrays, domains,
/// enums, extensions' types) are not judged.
pub fn accepts(declared: ParamType, oid: u32) -> bool {
    const INT2: u32 = 21;
    const INT4: u32 = 23;
    const INT8: u32 = 20;
    const NUMERIC: u32 = 1700;
    const FLOAT4: u32 = 700;
    const FLOAT8: u32 = 701;
    const DATE: u32 = 1082;
    const TIMESTAMP: u32 = 1114;
    const TIMESTAMPTZ: u32 = 1184;
    if builtin_name(oid).is_none() {
        return true;
    }
    let takes: &[u32] = match declared {
        ParamType::Text => return true,
        ParamType::SmallInt | ParamType::Int | ParamType::BigInt => {
            &[INT2, INT4, INT8, NUMERIC, FLOAT4, FLOAT8]
        }
        ParamType::Numeric | ParamType::Float => &[NUMERIC, FLOAT4, FLOAT8],
        ParamType::Bool => &[16],
        ParamType::Date | ParamType::Timestamp | ParamType::TimestampTz => {
            &[DATE, TIMESTAMP, TIMESTAMPTZ]
        }
        ParamType::Uuid => &[2950],
        ParamType::Json => &[114, 3802],
    };
    takes.contains(&oid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_go_with_the_types_that_take_all_their_values() {
        assert!(accepts(ParamType::Int, 20));
        assert!(accepts(ParamType::Int, 21), "a width is not a kind");
        assert!(accepts(ParamType::BigInt, 1700));
        assert!(!accepts(ParamType::Int, 25), "an int compared as text");
        assert!(!accepts(ParamType::Numeric, 23), "12.5 is not an int");
        assert!(accepts(ParamType::Date, 1184));
        assert!(accepts(ParamType::TimestampTz, 1082));
        assert!(
            !accepts(ParamType::TimestampTz, 1186),
            "a moment is not an interval"
        );
        assert!(!accepts(ParamType::Bool, 23));
        assert!(accepts(ParamType::Json, 3802));
        assert!(!accepts(ParamType::Uuid, 25));
        assert!(
            accepts(ParamType::Text, 23),
            "text is the server's to convert"
        );
        assert!(accepts(ParamType::Int, 1007), "arrays are not judged");
        assert!(accepts(ParamType::Int, 16_400), "user types are not judged");
    }

    #[test]
    fn messages_say_what_the_sql_takes_and_how_to_fix_it() {
        assert_eq!(
            count_message(2, 1, false),
            "the SQL takes 2 parameters ($1 to $2), but 1 is declared"
        );
        assert_eq!(
            count_message(0, 2, true),
            "the SQL takes no parameters, but 2 are declared"
        );
        let message = type_message(ParamType::Int, 25, 2);
        assert!(message.starts_with("declared int, but PostgreSQL takes $2 as text"));
        assert!(message.contains("($2::int)"), "{message}");
    }
}
