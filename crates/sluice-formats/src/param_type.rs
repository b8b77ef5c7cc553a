//! The declared types of statement parameters ([`ParamType`]): a value is
//! checked here, bound by the database.
//!
//! A value is parsed by its declared type before any SQL runs, so a wrong value
//! is refused with the parameter's name rather than turned into a database
//! error. The checked value is a [`Param`], always *bound*, never spliced into
//! SQL; each database binds it its own way (PostgreSQL converts text itself, so the SQL should cast, e.g.
//! `$2::timestamptz`; SQLite binds the matching storage class). Dates and times
//! are normalised to sluice's canonical text, moments with an offset to UTC.

use std::str::FromStr;

use chrono::{DateTime, NaiveDate, NaiveDateTime, NaiveTime, Utc};
use sluice_core::database::{DeclaredKind, Param};

/// A parameter's declared type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ParamType {
    /// `smallint`, `int2`.
    SmallInt,
    /// `int`, `integer`, `int4`.
    Int,
    /// `bigint`, `int8`.
    BigInt,
    /// `numeric`, `decimal`: an exact decimal.
    Numeric,
    /// `real`, `float4`, `double`, `float8`, `float`.
    Float,
    /// `text`, `varchar`.
    Text,
    /// `bool`, `boolean`.
    Bool,
    /// `date`: `YYYY-MM-DD`.
    Date,
    /// `timestamp`: a date and time without zone.
    Timestamp,
    /// `timestamptz`: a moment, RFC 3339 (`2024-03-01T12:00:00Z`) or a date/time
    /// without offset taken as UTC.
    TimestampTz,
    /// `uuid`.
    Uuid,
    /// `json`, `jsonb`.
    Json,
}

impl FromStr for ParamType {
    type Err = String;

    fn from_str(name: &str) -> Result<ParamType, String> {
        Ok(match name.trim().to_ascii_lowercase().as_str() {
            "smallint" | "int2" => ParamType::SmallInt,
            "int" | "integer" | "int4" => ParamType::Int,
            "bigint" | "int8" => ParamType::BigInt,
            "numeric" | "decimal" => ParamType::Numeric,
            "real" | "float4" | "double" | "double precision" | "float8" | "float" => {
                ParamType::Float
            }
            "text" | "varchar" | "string" => ParamType::Text,
            "bool" | "boolean" => ParamType::Bool,
            "date" => ParamType::Date,
            "timestamp" => ParamType::Timestamp,
            "timestamptz" => ParamType::TimestampTz,
            "uuid" => ParamType::Uuid,
            "json" | "jsonb" => ParamType::Json,
            other => {
                return Err(format!(
                    "unknown type {other:?} (known: smallint, int, bigint, numeric, real, double, \
                     text, bool, date, timestamp, timestamptz, uuid, json)"
                ))
            }
        })
    }
}

impl ParamType {
    /// The type's name in messages and documentation.
    pub fn name(self) -> &'static str {
        match self {
            ParamType::SmallInt => "smallint",
            ParamType::Int => "int",
            ParamType::BigInt => "bigint",
            ParamType::Numeric => "numeric",
            ParamType::Float => "double",
            ParamType::Text => "text",
            ParamType::Bool => "bool",
            ParamType::Date => "date",
            ParamType::Timestamp => "timestamp",
            ParamType::TimestampTz => "timestamptz",
            ParamType::Uuid => "uuid",
            ParamType::Json => "json",
        }
    }

    /// The kind a database judges the declaration by.
    pub fn kind(self) -> DeclaredKind {
        match self {
            ParamType::SmallInt | ParamType::Int | ParamType::BigInt => DeclaredKind::Integer,
            ParamType::Numeric | ParamType::Float => DeclaredKind::Fractional,
            ParamType::Text => DeclaredKind::Text,
            ParamType::Bool => DeclaredKind::Bool,
            ParamType::Date | ParamType::Timestamp | ParamType::TimestampTz => DeclaredKind::Moment,
            ParamType::Uuid => DeclaredKind::Uuid,
            ParamType::Json => DeclaredKind::Json,
        }
    }

    /// Checks `text` as a value of this type; the error says what was expected.
    pub fn parse(self, text: &str) -> Result<Param, String> {
        let expected = |what: &str| format!("expected {what}, got {text:?}");
        let trimmed = text.trim();
        match self {
            ParamType::SmallInt | ParamType::Int | ParamType::BigInt => {
                let value: i64 = trimmed
                    .parse()
                    .map_err(|_| expected(&format!("an integer ({})", self.name())))?;
                let fits = match self {
                    ParamType::SmallInt => i16::try_from(value).is_ok(),
                    ParamType::Int => i32::try_from(value).is_ok(),
                    _ => true,
                };
                if !fits {
                    return Err(format!("{value} is out of range for {}", self.name()));
                }
                Ok(Param::Integer(value))
            }
            ParamType::Numeric => {
                let digits = trimmed.strip_prefix('-').unwrap_or(trimmed);
                let (whole, fraction) = digits.split_once('.').unwrap_or((digits, "0"));
                let valid = !whole.is_empty()
                    && !fraction.is_empty()
                    && whole.bytes().all(|byte| byte.is_ascii_digit())
                    && fraction.bytes().all(|byte| byte.is_ascii_digit());
                if !valid {
                    return Err(expected("a decimal number such as 12.50"));
                }
                Ok(Param::Numeric(trimmed.to_owned()))
            }
            ParamType::Float => {
                let value: f64 = trimmed.parse().map_err(|_| expected("a number"))?;
                if !value.is_finite() {
                    return Err(expected("a finite number"));
                }
                Ok(Param::Real {
                    value,
                    text: trimmed.to_owned(),
                })
            }
            // PostgreSQL's text cannot hold NUL; refused here for every
            // database, so a declared text parameter means the same everywhere.
            ParamType::Text if text.contains('\0') => {
                Err("text cannot hold the NUL character (U+0000)".to_owned())
            }
            ParamType::Text => Ok(Param::Text(text.to_owned())),
            ParamType::Bool => match trimmed.to_ascii_lowercase().as_str() {
                "true" | "t" | "1" | "yes" | "on" => Ok(Param::Bool(true)),
                "false" | "f" | "0" | "no" | "off" => Ok(Param::Bool(false)),
                _ => Err(expected("true or false")),
            },
            ParamType::Date => {
                let date = NaiveDate::parse_from_str(trimmed, "%Y-%m-%d")
                    .map_err(|_| expected("a date YYYY-MM-DD"))?;
                Ok(Param::Date(date.format("%Y-%m-%d").to_string()))
            }
            ParamType::Timestamp => {
                let moment = parse_naive(trimmed)
                    .ok_or_else(|| expected("a timestamp such as 2024-03-01T12:00:00"))?;
                Ok(Param::Timestamp(canonical_time(moment, "")))
            }
            ParamType::TimestampTz => {
                let moment = DateTime::parse_from_rfc3339(trimmed)
                    .or_else(|_| DateTime::parse_from_str(trimmed, "%Y-%m-%d %H:%M:%S%.f%#z"))
                    .map(|moment| moment.with_timezone(&Utc).naive_utc())
                    .ok()
                    .or_else(|| parse_naive(trimmed))
                    .ok_or_else(|| {
                        expected("a timestamp such as 2024-03-01T12:00:00Z (RFC 3339)")
                    })?;
                Ok(Param::TimestampUtc(canonical_time(moment, "")))
            }
            ParamType::Uuid => {
                let groups: Vec<&str> = trimmed.split('-').collect();
                let lengths: Vec<usize> = groups.iter().map(|group| group.len()).collect();
                if lengths != [8, 4, 4, 4, 12]
                    || !groups
                        .iter()
                        .all(|group| group.bytes().all(|byte| byte.is_ascii_hexdigit()))
                {
                    return Err(expected(
                        "a UUID such as 123e4567-e89b-12d3-a456-426614174000",
                    ));
                }
                Ok(Param::Uuid(trimmed.to_ascii_lowercase()))
            }
            ParamType::Json => {
                let document = serde_json::from_str::<serde_json::Value>(text)
                    .map_err(|error| format!("expected a JSON document: {error}"))?;
                if holds_nul(&document) {
                    // As for text: PostgreSQL's jsonb cannot hold \u0000.
                    return Err("a JSON string cannot hold the NUL character (\\u0000)".into());
                }
                Ok(Param::Json(text.to_owned()))
            }
        }
    }
}

/// True when a string of `value` (or a key) holds NUL.
fn holds_nul(value: &serde_json::Value) -> bool {
    match value {
        serde_json::Value::String(text) => text.contains('\0'),
        serde_json::Value::Array(items) => items.iter().any(holds_nul),
        serde_json::Value::Object(members) => members
            .iter()
            .any(|(key, value)| key.contains('\0') || holds_nul(value)),
        _ => false,
    }
}

/// A date, or a date and time separated by `T` or a space, without offset.
fn parse_naive(text: &str) -> Option<NaiveDateTime> {
    for format in [
        "%Y-%m-%dT%H:%M:%S%.f",
        "%Y-%m-%d %H:%M:%S%.f",
        "%Y-%m-%dT%H:%M",
        "%Y-%m-%d %H:%M",
    ] {
        if let Ok(moment) = NaiveDateTime::parse_from_str(text, format) {
            return Some(moment);
        }
    }
    NaiveDate::parse_from_str(text, "%Y-%m-%d")
        .ok()
        .map(|date| date.and_time(NaiveTime::MIN))
}

/// sluice's canonical timestamp text (PostgreSQL's ISO output): fractional
/// seconds only when non-zero, trailing zeros dropped, then `suffix`.
pub fn canonical_time(moment: NaiveDateTime, suffix: &str) -> String {
    let mut text = moment.format("%Y-%m-%d %H:%M:%S").to_string();
    let micros = moment.and_utc().timestamp_subsec_micros();
    if micros > 0 {
        let fraction = format!("{micros:06}");
        text.push('.');
        text.push_str(fraction.trim_end_matches('0'));
    }
    text.push_str(suffix);
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_checked_by_type_and_normalised() {
        assert_eq!(ParamType::Int.parse(" 42").unwrap(), Param::Integer(42));
        assert!(ParamType::SmallInt.parse("40000").is_err());
        assert!(ParamType::BigInt.parse("4x").is_err());
        assert!(ParamType::Numeric.parse("12.50").is_ok());
        assert!(ParamType::Numeric.parse("1e5").is_err());
        assert_eq!(ParamType::Bool.parse("on").unwrap(), Param::Bool(true));
        assert!(ParamType::Date.parse("2024-02-30").is_err());
        assert_eq!(
            ParamType::TimestampTz
                .parse("2024-03-01T12:00:00.250+02:00")
                .unwrap(),
            Param::TimestampUtc("2024-03-01 10:00:00.25".into())
        );
        assert_eq!(
            ParamType::TimestampTz.parse("2024-03-01").unwrap(),
            Param::TimestampUtc("2024-03-01 00:00:00".into())
        );
        assert_eq!(
            ParamType::Timestamp.parse("2024-03-01T12:00").unwrap(),
            Param::Timestamp("2024-03-01 12:00:00".into())
        );
        assert!(ParamType::TimestampTz.parse("yesterday").is_err());
        assert!(ParamType::Uuid
            .parse("123e4567-e89b-12d3-a456-42661417400")
            .is_err());
        assert!(ParamType::Json.parse("{\"a\":1}").is_ok());
        assert!(ParamType::Text.parse("a\0b").unwrap_err().contains("NUL"));
        assert!(ParamType::Json
            .parse("{\"a\": [\"\\u0000\"]}")
            .unwrap_err()
            .contains("NUL"));
        assert!("tiemstamp".parse::<ParamType>().is_err());
    }
}
