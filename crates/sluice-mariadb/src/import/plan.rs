//! [`Plan`]: the statements and conversions of one import, chosen once from
//! the table, the input's columns and the options: `LOAD DATA LOCAL INFILE`
//! (into the table or the staging table), prepared multi-row `INSERT`s, the
//! upsert out of the stage, and the warnings the options expect.

use std::fmt::Write as _;

use sluice_core::load::{ImportOptions, OnConflict, Scope, TableInfo};
use sluice_core::{Column, Kind};

use super::values::Convert;
use crate::sql::identifier;

/// The name sluice gives the "file" `LOAD DATA LOCAL` asks for.
pub(super) const INPUT_NAME: &str = "sluice-input";

/// The temporary table rows are staged in when conflicts update.
pub(super) const STAGE: &str = "`sluice_import_stage`";

/// The statements and conversions of one import.
pub(super) struct Plan {
    pub(super) table: String,
    pub(super) columns: Vec<Column>,
    pub(super) converts: Vec<Convert>,
    /// For each column, the expression a value goes through (`?` or `@vN`
    /// inside it), when it is not stored as it is.
    pub(super) wrappers: Vec<Option<&'static str>>,
    pub(super) on_conflict: OnConflict,
    pub(super) dry_run: bool,
    pub(super) scope: Scope,
}

impl Plan {
    pub(super) fn new(
        table: &TableInfo,
        columns: &[Column],
        options: &ImportOptions,
        scope: Scope,
    ) -> Plan {
        let column_type = |column: &Column| -> String {
            table
                .columns
                .iter()
                .find(|known| known.name == column.name)
                .map(|known| known.type_name.to_ascii_lowercase())
                .unwrap_or_default()
        };
        let converts = columns
            .iter()
            .map(|column| match column.kind {
                Kind::Bool => Convert::Bool,
                Kind::TimestampTz | Kind::Timestamp => Convert::Utc,
                Kind::Bytes => Convert::Hex,
                Kind::Interval => Convert::Time,
                _ if column_type(column).starts_with("tinyint(1)") => Convert::Bool,
                _ => Convert::Verbatim,
            })
            .collect::<Vec<_>>();
        let wrappers = columns
            .iter()
            .zip(&converts)
            .map(|(column, convert)| wrapper(&column_type(column), *convert))
            .collect();
        Plan {
            table: table.name.clone(),
            columns: columns.to_vec(),
            converts,
            wrappers,
            on_conflict: options.on_conflict,
            dry_run: options.dry_run,
            scope,
        }
    }

    fn column_list(&self) -> String {
        self.columns
            .iter()
            .map(|column| identifier(&column.name))
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The `LOAD DATA LOCAL INFILE` statement, into the table or the stage.
    pub(super) fn load_statement(&self) -> String {
        let (modifier, target) = match self.on_conflict {
            OnConflict::Error => ("", self.table.as_str()),
            OnConflict::Ignore => (" IGNORE", self.table.as_str()),
            OnConflict::Update => (" REPLACE", STAGE),
        };
        let mut targets = Vec::new();
        let mut sets = Vec::new();
        for (index, column) in self.columns.iter().enumerate() {
            match self.wrappers[index] {
                None => targets.push(identifier(&column.name)),
                Some(wrapper) => {
                    let variable = format!("@v{index}");
                    sets.push(format!(
                        "{} = {}",
                        identifier(&column.name),
                        wrapper.replace('?', &variable)
                    ));
                    targets.push(variable);
                }
            }
        }
        let mut sql = format!(
            "LOAD DATA LOCAL INFILE '{INPUT_NAME}'{modifier} INTO TABLE {target} \
             CHARACTER SET utf8mb4 FIELDS TERMINATED BY '\\t' ENCLOSED BY '' ESCAPED BY '\\\\' \
             LINES TERMINATED BY '\\n' STARTING BY '' ({})",
            targets.join(", ")
        );
        if !sets.is_empty() {
            let _ = write!(sql, " SET {}", sets.join(", "));
        }
        sql
    }

    /// A prepared `INSERT` of `rows` rows.
    pub(super) fn insert_statement(&self, rows: usize) -> String {
        let placeholders: Vec<&str> = self
            .wrappers
            .iter()
            .map(|wrapper| wrapper.unwrap_or("?"))
            .collect();
        let one = format!("({})", placeholders.join(", "));
        let modifier = if self.on_conflict == OnConflict::Ignore {
            " IGNORE"
        } else {
            ""
        };
        let mut sql = format!(
            "INSERT{modifier} INTO {} ({}) VALUES {}",
            self.table,
            self.column_list(),
            vec![one; rows].join(", ")
        );
        if self.on_conflict == OnConflict::Update {
            let _ = write!(sql, " ON DUPLICATE KEY UPDATE {}", self.updates());
        }
        sql
    }

    fn updates(&self) -> String {
        self.columns
            .iter()
            .map(|column| {
                let name = identifier(&column.name);
                format!("{name} = VALUES({name})")
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// Moves the staged rows into the table (conflicts updated).
    pub(super) fn upsert_statement(&self) -> String {
        let list = self.column_list();
        format!(
            "INSERT INTO {} ({list}) SELECT {list} FROM {STAGE} ON DUPLICATE KEY UPDATE {}",
            self.table,
            self.updates()
        )
    }

    /// Whether a warning of this code is the expected effect of the options.
    pub(super) fn expected_warning(&self, code: u32) -> bool {
        code == DUPLICATE_KEY && self.on_conflict != OnConflict::Error
    }

    pub(super) fn end(&self) -> &'static str {
        if self.dry_run {
            "ROLLBACK"
        } else {
            "COMMIT"
        }
    }
}

/// The expression a column's value goes through, `?` standing for the value.
fn wrapper(column_type: &str, convert: Convert) -> Option<&'static str> {
    const SPATIAL: [&str; 8] = [
        "geometry",
        "point",
        "linestring",
        "polygon",
        "multipoint",
        "multilinestring",
        "multipolygon",
        "geometrycollection",
    ];
    if convert == Convert::Hex {
        Some("UNHEX(?)")
    } else if column_type.starts_with("bit") {
        Some("CAST(CONV(?, 2, 10) AS UNSIGNED)")
    } else if SPATIAL.iter().any(|name| column_type.starts_with(name)) {
        Some("ST_GeomFromText(?)")
    } else {
        None
    }
}

/// `ER_DUP_ENTRY`.
const DUPLICATE_KEY: u32 = 1062;
