//! `[queries.NAME]` and their `params`: the named queries served at
//! `GET /queries/NAME`, their typed parameters, limits, and how Arrow Flight
//! cuts them into parts.

use std::collections::BTreeMap;
use std::ops::Range;

use sluice_core::connect::LargeObjects;
use sluice_core::word::Word;
use sluice_formats::{Declared, ParamType, Signature};

use super::databases::{database_for, DatabaseConfig};
use super::entries::Entries;
use super::error::ConfigError;
use super::keys::{Key, KeyDefault, Section, Type};
use super::limits::{self, Limits};
use super::text::is_identifier;

/// `[queries.NAME]`'s keys.
pub(super) static SECTION: Section = Section {
    path: "queries.NAME",
    heading: "[queries.NAME]",
    about: "Each is served at `GET /queries/NAME`. No named query may declare a parameter named \
            `format` or `complete`: they are the server's own query-string keys.",
    keys: &[
        Key {
            name: "database",
            ty: Type::Text,
            default: KeyDefault::Absent("the only one"),
            meaning: "Which `[databases]` entry runs it.",
            example: Some("\"main\""),
            old_names: &[],
        },
        Key {
            name: "description",
            ty: Type::Text,
            default: KeyDefault::Absent("none"),
            meaning: "Text for `/openapi.json`.",
            example: Some("\"Payments in one status since a moment\""),
            old_names: &[],
        },
        Key {
            name: "sql",
            ty: Type::Text,
            default: KeyDefault::Absent("one of `sql`, `table` is required"),
            meaning: "The statement. Its parameters are written as its database writes them: {placeholders}.",
            example: Some("\"select * from payment_events where status = $1\""),
            old_names: &[],
        },
        Key {
            name: "table",
            ty: Type::Text,
            default: KeyDefault::Absent("—"),
            meaning: "Instead of `sql`: every row of this table. A table's name, not SQL: \
                      `table` or `schema.table`, each part bare or quoted as the database quotes \
                      names; anything else is refused when the configuration loads. \
                      On a database that reads in parts, Flight cuts it by its storage.",
            example: None,
            old_names: &[],
        },
        Key {
            name: "params",
            ty: Type::Tables("queries.NAME.params"),
            default: KeyDefault::Absent("none"),
            meaning: "The parameters, in placeholder order; see below.",
            example: Some("[{ name = \"status\", type = \"text\", required = true }, \
                           { name = \"since\", type = \"timestamptz\", default = \"2024-01-01T00:00:00Z\" }]"),
            old_names: &[],
        },
        Key {
            name: "statement_timeout",
            ty: Type::Duration,
            default: KeyDefault::Absent("none"),
            meaning: "The statement's time limit; a timeout before the first byte is a 504.",
            example: Some("\"30s\""),
            old_names: &[],
        },
        limits::MAX_ROWS,
        limits::MAX_BYTES,
        limits::MAX_STREAM_DURATION,
        limits::IDLE_WRITE_TIMEOUT,
        Key {
            name: "lob",
            ty: Type::Word(LargeObjects::SPELLINGS),
            default: KeyDefault::Word("oid"),
            meaning: "`inline`: columns that reference large objects stream the objects' bytes in \
                      their place (databases that have large objects).",
            example: Some("\"inline\""),
            old_names: &[],
        },
        Key {
            name: "split_by",
            ty: Type::Text,
            default: KeyDefault::Absent("one part"),
            meaning: "Arrow Flight cuts the query into ranges of this integer column (databases that \
                      read in parts of one snapshot; see [Arrow Flight](flight.md)).",
            example: Some("\"id\""),
            old_names: &[],
        },
    ],
};

/// The keys of each entry of a query's `params`.
pub(super) static PARAMS: Section = Section {
    path: "queries.NAME.params",
    heading: "params = [{ … }] of [queries.NAME]",
    about: "Each parameter of a named query, as an inline table. A value is checked against its \
            type before any SQL runs (a wrong one is a 400 naming the parameter), then bound, never \
            spliced into SQL ([Parameters](serve.md#parameters)).",
    keys: &[
        Key {
            name: "name",
            ty: Type::Text,
            default: KeyDefault::Required,
            meaning: "The query-string key: letters, digits and `_`.",
            example: Some("\"status\""),
            old_names: &[],
        },
        Key {
            name: "type",
            ty: Type::Text,
            default: KeyDefault::Required,
            meaning: "Its type (see [Parameter types](#parameter-types)).",
            example: Some("\"text\""),
            old_names: &[],
        },
        Key {
            name: "required",
            ty: Type::Flag,
            default: KeyDefault::Flag(false),
            meaning: "A request without it is a 400.",
            example: Some("true"),
            old_names: &[],
        },
        Key {
            name: "default",
            ty: Type::Scalar,
            default: KeyDefault::Absent("SQL NULL"),
            meaning: "The value used when a request does not give one (not with `required`).",
            example: None,
            old_names: &[],
        },
        Key {
            name: "description",
            ty: Type::Text,
            default: KeyDefault::Absent("none"),
            meaning: "Text for `/openapi.json`.",
            example: Some("\"The payment status\""),
            old_names: &[],
        },
    ],
};

/// A typed parameter of a named query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamSpec {
    /// The query-string key.
    pub name: String,
    /// Its type; values are checked against it before the query runs.
    pub ty: ParamType,
    /// A request without it is a 400.
    pub required: bool,
    /// The value used when the request does not give one (SQL NULL when absent).
    pub default: Option<String>,
    /// For the OpenAPI document.
    pub description: Option<String>,
    /// The line of its `type` in the configuration file, for start-up errors.
    pub line: usize,
}

impl ParamSpec {
    /// The declaration request values are checked against.
    pub fn declared(&self) -> Declared {
        Declared {
            name: self.name.clone(),
            ty: Some(self.ty),
            required: self.required,
            default: self.default.clone(),
        }
    }
}

/// A named query.
#[derive(Debug, Clone)]
pub struct QueryConfig {
    /// Its name, the last part of `/queries/{name}`.
    pub name: String,
    /// The database it runs on.
    pub database: String,
    /// The SQL, with its database's placeholders.
    pub sql: String,
    /// For the OpenAPI document.
    pub description: Option<String>,
    /// The parameters, in placeholder order.
    pub params: Vec<ParamSpec>,
    /// How request values bind to them (from `params`).
    pub signature: Signature,
    /// Its limits.
    pub limits: Limits,
    /// `lob = "inline"`: large objects are read and streamed in the place of
    /// their references.
    pub inline_large_objects: bool,
    /// How Arrow Flight cuts it into parts that read one snapshot
    /// (`split_by`, or the storage of a `table` query); `None`: one part.
    pub split: Option<QuerySplit>,
    /// The line of its `sql` in the configuration file, for start-up errors.
    pub line: usize,
}

/// How a named query is cut into parts ([`sluice_core::split`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum QuerySplit {
    /// By ranges of this table's storage (`table = "…"` without `split_by`).
    Storage {
        /// The table, as the database knows it.
        table: String,
    },
    /// By ranges of this integer column's values (`split_by = "…"`).
    Column(String),
}

/// One `[queries.NAME]` with its `params` entries.
pub(super) fn query_entry(
    entries: &Entries<'_>,
    params: &[Entries<'_>],
    databases: &BTreeMap<String, DatabaseConfig>,
) -> Result<QueryConfig, ConfigError> {
    let name = entries.path().trim_start_matches("queries.").to_owned();
    if !is_identifier(&name) {
        return Err(entries.table_error("query names are letters, digits and _"));
    }
    let database = &databases[&database_for(entries, databases)?];
    let (sql, sql_span) = query_sql(entries, database)?;
    let mut specs: Vec<ParamSpec> = Vec::new();
    for param in params {
        specs.push(param_entry(param, &specs)?);
    }
    let split = query_split(entries, &specs, database)?;
    Ok(QueryConfig {
        name,
        database: database.name.clone(),
        sql,
        split,
        description: entries.text("description")?.map(|text| text.value),
        signature: Signature::new(specs.iter().map(ParamSpec::declared).collect()),
        params: specs,
        limits: limits::limits(entries)?,
        inline_large_objects: inline_large_objects(entries, database)?,
        line: entries.line(sql_span),
    })
}

/// `lob`: whether large objects are read in place of their references.
fn inline_large_objects(
    entries: &Entries<'_>,
    database: &DatabaseConfig,
) -> Result<bool, ConfigError> {
    let lob = entries.word("lob")?;
    let inline = lob.value.parse() == Ok(LargeObjects::Inline);
    if inline && !database.target.has_large_objects() {
        return Err(entries.error(
            "lob",
            lob.span,
            format!(
                "database {:?} is {}, which has no large objects to inline",
                database.name,
                database.target.product()
            ),
        ));
    }
    Ok(inline)
}

/// A query's SQL: its `sql`, or the whole of its `table` (a table's name
/// read by its database's one grammar of names, quoted into the SQL); and
/// where it is.
fn query_sql(
    entries: &Entries<'_>,
    database: &DatabaseConfig,
) -> Result<(String, Range<usize>), ConfigError> {
    match (entries.text("sql")?, entries.text("table")?) {
        (Some(sql), None) if sql.value.trim().is_empty() => {
            Err(entries.error("sql", sql.span, "the SQL is empty"))
        }
        (Some(sql), None) => Ok((sql.value, sql.span)),
        (None, Some(table)) => match database.target.dialect().table_name(&table.value) {
            Ok(name) => Ok((format!("select * from {name}"), table.span)),
            Err(error) => Err(entries.error("table", table.span, error.to_string())),
        },
        _ => Err(entries.table_error(
            "give exactly one of sql = \"…\" or table = \"…\" (every row of a table)",
        )),
    }
}

/// `split_by`, or the storage of a `table` query on a database that splits
/// reads: how Flight cuts the query into parts.
fn query_split(
    entries: &Entries<'_>,
    params: &[ParamSpec],
    database: &DatabaseConfig,
) -> Result<Option<QuerySplit>, ConfigError> {
    let table = entries.text("table")?;
    if let (Some(table), false) = (&table, params.is_empty()) {
        return Err(entries.error(
            "params",
            table.span.clone(),
            "a table query takes no parameters: write the SQL with sql = \"…\"",
        ));
    }
    let splits = database.target.splits_reads();
    match (entries.text("split_by")?, table) {
        (Some(column), _) if !splits => Err(entries.error(
            "split_by",
            column.span,
            format!(
                "database {:?} is {}, which cannot read parts of one snapshot in parallel",
                database.name,
                database.target.product()
            ),
        )),
        (Some(column), _) if !is_identifier(&column.value) => Err(entries.error(
            "split_by",
            column.span,
            "a column is named by letters, digits and _",
        )),
        (Some(column), _) => Ok(Some(QuerySplit::Column(column.value))),
        (None, Some(table)) if splits => Ok(Some(QuerySplit::Storage { table: table.value })),
        (None, _) => Ok(None),
    }
}

/// Request keys the front ends read themselves (HTTP's query string:
/// `?format=`, `?complete=`), never a query's parameters.
pub const RESERVED_PARAMETERS: [&str; 2] = ["format", "complete"];

/// One of a query's `params`, after `earlier` ones.
fn param_entry(entries: &Entries<'_>, earlier: &[ParamSpec]) -> Result<ParamSpec, ConfigError> {
    let name = entries.required_text("name")?;
    if !is_identifier(&name.value) || RESERVED_PARAMETERS.contains(&name.value.as_str()) {
        return Err(entries.error(
            "name",
            name.span,
            format!(
                "{:?} cannot be a parameter name (letters, digits and _; not \"format\" or \"complete\", which the server reads itself)",
                name.value
            ),
        ));
    }
    if earlier.iter().any(|earlier| earlier.name == name.value) {
        return Err(entries.error(
            "name",
            name.span,
            format!("parameter {:?} is declared twice", name.value),
        ));
    }
    let ty_text = entries.required_text("type")?;
    let ty: ParamType = ty_text
        .value
        .parse()
        .map_err(|message| entries.error("type", ty_text.span.clone(), message))?;
    let required = entries.flag("required")?;
    let default = match entries.scalar("default")? {
        Some(_) if required => {
            return Err(entries.error("default", name.span, "a required parameter has no default"))
        }
        Some(value) => {
            ty.parse(&value.value)
                .map_err(|message| entries.error("default", value.span, message))?;
            Some(value.value)
        }
        None => None,
    };
    Ok(ParamSpec {
        name: name.value,
        ty,
        required,
        default,
        description: entries.text("description")?.map(|text| text.value),
        line: entries.line(ty_text.span),
    })
}
