//! [`parse_duration`]: the one spelling of a duration a person writes, shared by the
//! server's configuration file and the command line (`sluice proxy --rtt`, `sluice
//! lab --budget`), so that `30s` means the same everywhere.
//!
//! The grammar is humantime's (`500ms`, `30s`, `5m`, `1h 30m`, `0.5ms`, `300us`).
//! A bare number is refused rather than given a unit: before there was one parser,
//! `30` was 30 ms to the proxy and an error to the server, and either reading of
//! it surprises someone. Only `0`, which is the same in every unit, stands alone.

use std::fmt;
use std::time::Duration;

/// Why a text is not a duration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DurationError {
    /// A number without a unit, such as `30`.
    NoUnit {
        /// The number as written.
        number: String,
    },
    /// Anything else that is not a duration.
    Invalid {
        /// The text as written.
        text: String,
        /// What is wrong with it.
        reason: String,
    },
}

impl fmt::Display for DurationError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DurationError::NoUnit { number } => {
                write!(f, "give a unit: {number}s, {number}ms")
            }
            DurationError::Invalid { text, reason } => write!(
                f,
                "{text:?} is not a duration (e.g. 500ms, 30s, 5m, 1h 30m): {reason}"
            ),
        }
    }
}

impl std::error::Error for DurationError {}

/// Reads a duration such as `500ms`, `30s`, `5m`, `1h 30m` or `0.5ms`; `0` alone
/// is zero, any other number needs a unit.
pub fn parse_duration(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if text == "0" {
        return Ok(Duration::ZERO);
    }
    if is_bare_number(text) {
        return Err(DurationError::NoUnit {
            number: text.to_owned(),
        });
    }
    humantime::parse_duration(text).map_err(|error| DurationError::Invalid {
        text: text.to_owned(),
        reason: error.to_string(),
    })
}

fn is_bare_number(text: &str) -> bool {
    !text.is_empty()
        && text.bytes().any(|byte| byte.is_ascii_digit())
        && text
            .bytes()
            .all(|byte| byte.is_ascii_digit() || byte == b'.')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_fractions_and_compounds_parse() {
        for (text, expected) in [
            ("250ms", Duration::from_millis(250)),
            ("2m", Duration::from_secs(120)),
            ("30s", Duration::from_secs(30)),
            ("1h 30m", Duration::from_secs(5400)),
            ("0.5ms", Duration::from_micros(500)),
            ("0.2ms", Duration::from_micros(200)),
            ("300us", Duration::from_micros(300)),
            ("300µs", Duration::from_micros(300)),
            (" 1.5s ", Duration::from_millis(1500)),
            ("0ms", Duration::ZERO),
            ("0", Duration::ZERO),
        ] {
            assert_eq!(parse_duration(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn a_bare_number_asks_for_a_unit() {
        let error = parse_duration("30").unwrap_err();
        assert_eq!(
            error,
            DurationError::NoUnit {
                number: "30".into()
            }
        );
        assert_eq!(error.to_string(), "give a unit: 30s, 30ms");
        assert_eq!(
            parse_duration("1.5").unwrap_err().to_string(),
            "give a unit: 1.5s, 1.5ms"
        );
    }

    #[test]
    fn other_text_is_refused_with_examples() {
        for text in ["soon", "", "30 parsecs", "-1s", "ms"] {
            let error = parse_duration(text).unwrap_err();
            assert!(
                matches!(error, DurationError::Invalid { .. }),
                "{text}: {error:?}"
            );
            assert!(error.to_string().contains("e.g. 500ms"), "{error}");
        }
    }
}
