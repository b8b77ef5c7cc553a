//! The configuration's text: byte offsets turned into line numbers, errors
//! built at a place, `${NAME}` replaced by the environment, and the readers of
//! the value forms every section shares (durations, sizes, counts, names).

use std::ops::Range;
use std::time::Duration;

use sluice_core::parse_duration;

use super::error::ConfigError;

/// The configuration's text: turns byte offsets into line numbers and builds errors.
pub(super) struct ConfigText<'a> {
    pub(super) file: &'a str,
    pub(super) text: &'a str,
}

impl ConfigText<'_> {
    /// The 1-based line of a byte offset.
    pub(super) fn line(&self, offset: usize) -> usize {
        self.text[..offset.min(self.text.len())]
            .bytes()
            .filter(|&byte| byte == b'\n')
            .count()
            + 1
    }

    /// A problem at `span`, for the key at dotted path `key`.
    pub(super) fn error(
        &self,
        span: Range<usize>,
        key: &str,
        message: impl Into<String>,
    ) -> ConfigError {
        ConfigError {
            file: self.file.to_owned(),
            line: self.line(span.start),
            key: key.to_owned(),
            message: message.into(),
        }
    }

    /// A TOML syntax or shape error, with the key read off the offending line.
    pub(super) fn parse_error(&self, error: &toml::de::Error) -> ConfigError {
        let span = error.span().unwrap_or(0..0);
        let line = self.line(span.start);
        let text = self.text.lines().nth(line - 1).unwrap_or("");
        let key = match text.split_once('=') {
            Some((key, _)) if !text.trim_start().starts_with('[') => key.trim().to_owned(),
            _ => text.trim().to_owned(),
        };
        ConfigError {
            file: self.file.to_owned(),
            line,
            key,
            message: error.message().trim().to_owned(),
        }
    }

    /// Replaces each `${NAME}` in `text` by the environment variable; an unset
    /// one is an error at `span`, never an empty password.
    pub(super) fn substitute(
        &self,
        text: &str,
        span: Range<usize>,
        key: &str,
    ) -> Result<String, ConfigError> {
        let mut output = String::with_capacity(text.len());
        let mut rest = text;
        while let Some(start) = rest.find("${") {
            output.push_str(&rest[..start]);
            let after = &rest[start + 2..];
            let Some(end) = after.find('}') else {
                return Err(self.error(span, key, "unterminated ${ in value"));
            };
            let name = &after[..end];
            match std::env::var(name) {
                Ok(found) => output.push_str(&found),
                Err(_) => {
                    return Err(self.error(
                        span,
                        key,
                        format!("environment variable {name} is not set"),
                    ))
                }
            }
            rest = &after[end + 1..];
        }
        output.push_str(rest);
        Ok(output)
    }
}

/// A duration with a unit (see [`parse_duration`]); `positive`: zero is refused.
pub(super) fn duration(text: &str, positive: bool) -> Result<Duration, String> {
    match parse_duration(text) {
        Ok(duration) if positive && duration.is_zero() => Err("must be more than zero".into()),
        Ok(duration) => Ok(duration),
        Err(error) => Err(error.to_string()),
    }
}

/// A byte count: an integer, or a string such as `"512KiB"`, `"64MiB"`, `"2GB"`.
pub(super) fn parse_bytes(value: &toml::Value) -> Result<u64, String> {
    let bad = || format!("{value} is not a size (e.g. 1048576, \"64MiB\", \"2GB\")");
    match value {
        toml::Value::Integer(bytes) if *bytes > 0 => Ok(*bytes as u64),
        toml::Value::String(text) => {
            let text = text.trim();
            let split = text
                .find(|character: char| !character.is_ascii_digit())
                .unwrap_or(text.len());
            let (number, unit) = text.split_at(split);
            let number: u64 = number.parse().map_err(|_| bad())?;
            let factor = unit_factor(unit).ok_or_else(bad)?;
            number.checked_mul(factor).ok_or_else(bad)
        }
        _ => Err(bad()),
    }
}

/// The bytes in one of a size's units.
fn unit_factor(unit: &str) -> Option<u64> {
    Some(match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kb" => 1_000,
        "kib" => 1 << 10,
        "mb" => 1_000_000,
        "mib" => 1 << 20,
        "gb" => 1_000_000_000,
        "gib" => 1 << 30,
        "tb" => 1_000_000_000_000,
        "tib" => 1 << 40,
        _ => return None,
    })
}

/// Letters, digits and `_`, not starting with a digit.
pub(super) fn is_identifier(name: &str) -> bool {
    let mut characters = name.chars();
    characters
        .next()
        .is_some_and(|first| first.is_ascii_alphabetic() || first == '_')
        && characters.all(|character| character.is_ascii_alphanumeric() || character == '_')
}
