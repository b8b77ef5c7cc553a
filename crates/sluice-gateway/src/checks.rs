//! Start-up checks against the databases: what the configuration file alone
//! cannot tell, found before the first request rather than by every request.
//!
//! - Every named query is prepared once, without running (PostgreSQL: Parse and
//!   Describe; SQLite: `prepare` on the file opened read-only). SQL the database
//!   refuses, a parameter count other than the declared one, a declared type whose
//!   values the database could not take as the type it inferred for that
//!   parameter, or a statement that writes on a database served read-only, is a
//!   problem (the database crate finds them, this module words them).
//! - With `[sql]`, a session is set up as for `POST /sql`: the `[sql] role` must
//!   be settable and the login unprivileged (see `sluice_postgres::privileges`).
//!
//! Each problem is a [`ConfigError`] naming the file, the line and the key, as
//! configuration errors are, so `sluice serve` reports them the same way and
//! does not start. A database that cannot be reached at start keeps today's
//! behaviour (the server starts, requests get 503 until it is back);
//! [`check_when_reachable`] then runs its checks as soon as it answers and logs
//! what they find (ad-hoc SQL is also checked by every request).

use std::time::Duration;

use crate::config::{ConfigError, QueryConfig};
use crate::db::{Database, Refusal, StartError, StatementProblem};
use crate::state::AppState;
use sluice_core::Schema;
use sluice_formats::ParamType;

/// How often the checks of a database that did not answer are tried again.
pub const DEFERRED_CHECK_INTERVAL: Duration = Duration::from_secs(5);

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

impl Report {
    /// Starts, in the background, the checks of each database that did not
    /// answer, to run once it does (every `DEFERRED_CHECK_INTERVAL`), with
    /// their problems logged.
    pub fn check_unreachable_later(&self, state: &AppState) {
        for name in &self.unreachable {
            tokio::spawn(check_when_reachable(
                state.clone(),
                name.clone(),
                DEFERRED_CHECK_INTERVAL,
            ));
        }
    }
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
    /// there. `Err` when the database did not answer (within `CHECK_TIMEOUT`).
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
            let (query_problems, columns) = check_query(database, query, &config.file).await?;
            problems.extend(query_problems);
            if let Some(columns) = columns {
                self.set_described_columns(&query.name, columns);
            }
        }
        if let Some(sql) = config.sql.as_ref().filter(|sql| sql.database == name) {
            match database.kind().check_ad_hoc(sql.role.as_deref()).await {
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
             [databases.NAME] entry whose login has none of these rights (a login of its own, granted SELECT on what ad-hoc \
             SQL may read), or revoke them"
        ),
    }
}

/// Prepares one named query and compares it with its declaration: the
/// problems, and the result's columns where the database describes them.
async fn check_query(
    database: &Database,
    query: &QueryConfig,
    file: &str,
) -> Result<(Vec<ConfigError>, Option<Schema>), StartError> {
    let key = format!("queries.{}", query.name);
    let declared: Vec<_> = query.params.iter().map(|param| param.ty.kind()).collect();
    let checked = match database.kind().check_statement(&query.sql, &declared).await {
        Ok(checked) => checked,
        Err(StartError::Query(error)) => {
            let problem = ConfigError {
                file: file.to_owned(),
                line: query.line,
                key: format!("{key}.sql"),
                message: format!("the database refuses this SQL: {error}"),
            };
            return Ok((vec![problem], None));
        }
        Err(other) => return Err(other),
    };
    let problems = checked
        .problems
        .into_iter()
        .map(|problem| {
            let (line, key, message) = match &problem {
                StatementProblem::Count { found, declared } => (
                    query.line,
                    format!("{key}.params"),
                    count_message(*found, *declared, database.kind()),
                ),
                StatementProblem::Type { index, inferred } => {
                    let param = &query.params[*index];
                    (
                        param.line,
                        format!("{key}.params[{index}].type"),
                        type_message(param.ty, inferred, *index + 1, database.kind()),
                    )
                }
                StatementProblem::Writes => (
                    query.line,
                    format!("{key}.sql"),
                    format!(
                        "this SQL writes, but {} databases are served read-only",
                        database.kind().product()
                    ),
                ),
            };
            ConfigError {
                file: file.to_owned(),
                line,
                key,
                message,
            }
        })
        .collect();
    Ok((problems, checked.columns))
}

fn count_message(
    found: usize,
    declared: usize,
    database: &dyn sluice_core::database::Database,
) -> String {
    let uses = match found {
        0 => "the SQL takes no parameters".to_owned(),
        1 => format!("the SQL takes 1 parameter ({})", database.placeholder(1)),
        n => format!(
            "the SQL takes {n} parameters ({} to {})",
            database.placeholder(1),
            database.placeholder(n)
        ),
    };
    format!(
        "{uses}, but {declared} {} declared",
        if declared == 1 { "is" } else { "are" }
    )
}

fn type_message(
    declared: ParamType,
    inferred: &str,
    number: usize,
    database: &dyn sluice_core::database::Database,
) -> String {
    let placeholder = database.placeholder(number);
    format!(
        "declared {}, but {} takes {placeholder} as {inferred}: cast it in the SQL \
         ({placeholder}::{}) or declare a type of the same kind",
        declared.name(),
        database.product(),
        cast_name(declared)
    )
}

/// The SQL name of a declared type, for a cast.
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn messages_say_what_the_sql_takes_and_how_to_fix_it() {
        let postgres = sluice_postgres::gateway::PostgresDatabase::new(
            "postgres://localhost/x".parse().unwrap(),
            sluice_postgres::gateway::PoolOptions {
                size: 1,
                wait: Duration::from_secs(1),
            },
        );
        let sqlite = sluice_sqlite::gateway::SqliteDatabase::new("x.db", 1, Duration::from_secs(1));
        assert_eq!(
            count_message(2, 1, &postgres),
            "the SQL takes 2 parameters ($1 to $2), but 1 is declared"
        );
        assert_eq!(
            count_message(0, 2, &sqlite),
            "the SQL takes no parameters, but 2 are declared"
        );
        assert_eq!(
            count_message(1, 2, &sqlite),
            "the SQL takes 1 parameter (?1), but 2 are declared"
        );
        let message = type_message(ParamType::Int, "text", 2, &postgres);
        assert!(message.starts_with("declared int, but PostgreSQL takes $2 as text"));
        assert!(message.contains("($2::int)"), "{message}");
    }
}
