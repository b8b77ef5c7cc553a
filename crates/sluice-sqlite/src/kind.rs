//! Declared column types to [`Kind`]s.
//!
//! SQLite stores values by *storage class* (NULL, INTEGER, REAL, TEXT, BLOB) and
//! keeps a column's declared type only as a hint. sluice needs a kind per column
//! before the first row, so it reads that hint in two steps:
//!
//! 1. the declared type's **first word** names a type SQLite has no class for but
//!    sluice renders specially: `BOOL`/`BOOLEAN`, `DATE`, `TIME`, `TIMETZ`,
//!    `TIMESTAMP`/`DATETIME`, `TIMESTAMPTZ`, `INTERVAL`, `DECIMAL`/`NUMERIC`,
//!    `JSON`/`JSONB`, `UUID`;
//! 2. otherwise SQLite's own affinity rules apply (`INT` → integer, `CHAR`/`CLOB`/
//!    `TEXT` → text, `BLOB` → bytes, `REAL`/`FLOA`/`DOUB` → float, anything else
//!    numeric → decimal).
//!
//! Because SQLite decides storage from the *whole* declared type, a column declared
//! `DECIMAL TEXT` is stored as text exactly as written (SQLite: TEXT affinity, so
//! `12.30` keeps its zero) and rendered as an exact decimal (sluice: first word).
//! A result column with no declared type (an expression) takes its kind from the
//! storage class of its first non-NULL value in the first row, text when NULL.

use sluice_core::Kind;

/// The kind for a declared column type, `None` when there is no declared type.
pub fn kind_of_declared(declared: &str) -> Option<Kind> {
    let upper = declared.trim().to_ascii_uppercase();
    if upper.is_empty() {
        return None;
    }
    let first = upper
        .split(|character: char| character.is_whitespace() || character == '(')
        .next()
        .unwrap_or("");
    let special = match first {
        "BOOL" | "BOOLEAN" => Some(Kind::Bool),
        "DATE" => Some(Kind::Date),
        "TIME" => Some(Kind::Time),
        "TIMETZ" => Some(Kind::TimeTz),
        "TIMESTAMP" | "DATETIME" if upper.contains("WITH TIME ZONE") => Some(Kind::TimestampTz),
        "TIMESTAMP" | "DATETIME" => Some(Kind::Timestamp),
        "TIMESTAMPTZ" => Some(Kind::TimestampTz),
        "INTERVAL" => Some(Kind::Interval),
        "DECIMAL" | "NUMERIC" => Some(Kind::Decimal),
        "JSON" | "JSONB" => Some(Kind::Json),
        "UUID" => Some(Kind::Other),
        _ => None,
    };
    if special.is_some() {
        return special;
    }
    // SQLite's affinity rules, in SQLite's order (datatype3.html, 3.1).
    Some(if upper.contains("INT") {
        Kind::Integer
    } else if upper.contains("CHAR") || upper.contains("CLOB") || upper.contains("TEXT") {
        Kind::Text
    } else if upper.contains("BLOB") {
        Kind::Bytes
    } else if upper.contains("REAL") || upper.contains("FLOA") || upper.contains("DOUB") {
        Kind::Float
    } else {
        Kind::Decimal
    })
}

/// The kind of a storage class, for result columns without a declared type.
pub fn kind_of_storage(value: rusqlite::types::ValueRef<'_>) -> Kind {
    use rusqlite::types::ValueRef;
    match value {
        ValueRef::Null | ValueRef::Text(_) => Kind::Text,
        ValueRef::Integer(_) => Kind::Integer,
        ValueRef::Real(_) => Kind::Float,
        ValueRef::Blob(_) => Kind::Bytes,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_types_map_by_first_word_then_affinity() {
        let cases = [
            ("INTEGER", Kind::Integer),
            ("bigint", Kind::Integer),
            ("VARCHAR(20)", Kind::Text),
            ("char(3)", Kind::Text),
            ("TEXT", Kind::Text),
            ("BLOB", Kind::Bytes),
            ("DOUBLE PRECISION", Kind::Float),
            ("REAL", Kind::Float),
            ("NUMERIC(12,2)", Kind::Decimal),
            ("DECIMAL TEXT", Kind::Decimal),
            ("BOOLEAN", Kind::Bool),
            ("DATE", Kind::Date),
            ("DATETIME", Kind::Timestamp),
            ("TIMESTAMP WITH TIME ZONE", Kind::TimestampTz),
            ("TIMESTAMPTZ", Kind::TimestampTz),
            ("JSONB", Kind::Json),
            ("UUID", Kind::Other),
            ("money", Kind::Decimal),
        ];
        for (declared, kind) in cases {
            assert_eq!(kind_of_declared(declared), Some(kind), "{declared}");
        }
        assert_eq!(kind_of_declared(""), None);
    }
}
