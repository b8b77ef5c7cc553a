//! Parameter sets: the one parser of the values a statement is run with.
//!
//! A statement's [`Signature`] lists its parameters `$1`, `$2`, … in order, each
//! with a name, a declared type (or none: the value's text goes to the database
//! as given) and whether it is required or has a default. Values arrive two ways
//! and are checked by the same rules:
//!
//! - as `key=value` text pairs ([`Signature::bind_pairs`]: the query string of
//!   `GET /queries/{name}`);
//! - as JSON, one parameter set per NDJSON line ([`Signature::parse_line`]:
//!   `sluice call` and `POST /queries/{name}/batch`; [`ParamLines`] reads the
//!   lines). A line is an array (the n-th value is `$n`), an object keyed by the
//!   parameter names (`$name` too), or, for a statement with one parameter, a
//!   single value.
//!
//! The rules: every key names a parameter and is given once; a missing value
//! takes its default, else is NULL, unless the parameter is required; a typed
//! value is checked by its [`ParamType`] (an array or object only where the type
//! is `json`); an untyped value is bound as what JSON says it is
//! ([`untyped_param`]).
//! Faults name the parameter ([`ParamFault`]); the CLI and the server word the
//! rest for their users.

use std::fmt;

use serde_json::Value;
use sluice_core::calls::{ParamSet, ParamSource};
use sluice_core::database::{BoxFuture, Param};
use sluice_core::{Error, ErrorKind};
use tokio::io::{AsyncBufRead, AsyncBufReadExt};

use crate::param_type::ParamType;

/// One parameter of a statement.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Declared {
    /// Its name: the key that gives its value.
    pub name: String,
    /// Its type; `None` binds the value as what JSON says it is ([`untyped_param`]).
    pub ty: Option<ParamType>,
    /// A set without a value for it (or with `null`) is refused.
    pub required: bool,
    /// The value's text when the set gives none (NULL when absent).
    pub default: Option<String>,
}

/// Why a parameter set was refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParamFault {
    /// The parameter (or key) at fault, if the fault is one parameter's.
    pub parameter: Option<String>,
    /// What is wrong, without the parameter's name.
    pub message: String,
}

impl ParamFault {
    fn of(parameter: &str, message: impl Into<String>) -> ParamFault {
        ParamFault {
            parameter: Some(parameter.to_owned()),
            message: message.into(),
        }
    }

    fn whole(message: impl Into<String>) -> ParamFault {
        ParamFault {
            parameter: None,
            message: message.into(),
        }
    }
}

impl fmt::Display for ParamFault {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.parameter {
            Some(parameter) => write!(formatter, "parameter {parameter:?}: {}", self.message),
            None => formatter.write_str(&self.message),
        }
    }
}

impl std::error::Error for ParamFault {}

/// A value as given, before it is checked.
enum Given<'a> {
    Text(&'a str),
    Json(Value),
}

/// The parameters of a statement, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Signature {
    params: Vec<Declared>,
}

impl Signature {
    /// A signature of `params`, `$1` first.
    pub fn new(params: Vec<Declared>) -> Signature {
        Signature { params }
    }

    /// Untyped, optional parameters named `names`.
    pub fn untyped(names: impl IntoIterator<Item = String>) -> Signature {
        Signature::new(
            names
                .into_iter()
                .map(|name| Declared {
                    name,
                    ty: None,
                    required: false,
                    default: None,
                })
                .collect(),
        )
    }

    /// The parameters, `$1` first.
    pub fn params(&self) -> &[Declared] {
        &self.params
    }

    /// The position of the parameter `key` names: its name, or its name after `$`.
    pub fn position(&self, key: &str) -> Option<usize> {
        let named = |key: &str| self.params.iter().position(|param| param.name == key);
        named(key).or_else(|| key.strip_prefix('$').and_then(named))
    }

    /// Binds `key=value` text pairs; `skip` says which keys are not parameters
    /// (such as `format`).
    pub fn bind_pairs<'a>(
        &self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
        skip: impl Fn(&str) -> bool,
    ) -> Result<Vec<Param>, ParamFault> {
        let mut given: Vec<Option<Given<'a>>> = self.params.iter().map(|_| None).collect();
        for (key, value) in pairs {
            if skip(key) {
                continue;
            }
            let index = self.position(key).ok_or_else(|| self.unknown(key))?;
            if given[index].replace(Given::Text(value)).is_some() {
                return Err(ParamFault::of(key, "given more than once"));
            }
        }
        self.check(given)
    }

    /// Parses one parameter-set line of JSON.
    pub fn parse_line(&self, line: &[u8]) -> Result<Vec<Param>, ParamFault> {
        let value: Value = serde_json::from_slice(line)
            .map_err(|error| ParamFault::whole(format!("invalid JSON: {error}")))?;
        let mut given: Vec<Option<Given<'_>>> = self.params.iter().map(|_| None).collect();
        match value {
            Value::Array(items) => {
                if items.len() > self.params.len() {
                    return Err(ParamFault::whole(format!(
                        "{} values, but the statement takes {} parameters{}",
                        items.len(),
                        self.params.len(),
                        self.listed()
                    )));
                }
                for (slot, item) in given.iter_mut().zip(items) {
                    *slot = Some(Given::Json(item));
                }
            }
            Value::Object(object) => {
                for (key, item) in object {
                    let index = self.position(&key).ok_or_else(|| self.unknown(&key))?;
                    given[index] = Some(Given::Json(item));
                }
            }
            scalar if self.params.len() == 1 => given[0] = Some(Given::Json(scalar)),
            _ => {
                return Err(ParamFault::whole(format!(
                    "expected a JSON array or object for the statement's {} parameters{}",
                    self.params.len(),
                    self.listed()
                )))
            }
        }
        self.check(given)
    }

    /// ` (a, b)`: the names, for messages; empty for a statement without parameters.
    fn listed(&self) -> String {
        if self.params.is_empty() {
            return String::new();
        }
        format!(" ({})", self.names())
    }

    fn names(&self) -> String {
        let names: Vec<&str> = self
            .params
            .iter()
            .map(|param| param.name.as_str())
            .collect();
        names.join(", ")
    }

    fn unknown(&self, key: &str) -> ParamFault {
        ParamFault::of(
            key,
            if self.params.is_empty() {
                "unknown parameter: the statement takes none".to_owned()
            } else {
                format!("unknown parameter (the statement takes: {})", self.names())
            },
        )
    }

    /// Checks each given value by its declaration; fills in defaults and NULLs.
    fn check(&self, given: Vec<Option<Given<'_>>>) -> Result<Vec<Param>, ParamFault> {
        self.params
            .iter()
            .zip(given)
            .map(|(param, value)| {
                param
                    .check(value)
                    .map_err(|message| ParamFault::of(&param.name, message))
            })
            .collect()
    }
}

impl Declared {
    /// The value of this parameter for `given`, or what is wrong with it.
    fn check(&self, given: Option<Given<'_>>) -> Result<Param, String> {
        let type_name = self.ty.map_or("a value", ParamType::name);
        let text = match given {
            None if self.required => return Err(format!("required ({type_name})")),
            None => match &self.default {
                Some(default) => default.clone(),
                None => return Ok(Param::Null),
            },
            Some(Given::Json(Value::Null)) if self.required => {
                return Err(format!("required ({type_name}), got null"))
            }
            Some(Given::Json(Value::Null)) => return Ok(Param::Null),
            Some(Given::Json(value)) if self.ty.is_none() => return Ok(untyped_param(value)),
            Some(Given::Json(Value::String(text))) => text,
            Some(Given::Json(composite @ (Value::Array(_) | Value::Object(_))))
                if self.ty.is_some_and(|ty| ty != ParamType::Json) =>
            {
                let shape = if composite.is_array() {
                    "an array"
                } else {
                    "an object"
                };
                return Err(format!("expected {type_name}, got {shape}"));
            }
            Some(Given::Json(other)) => other.to_string(),
            Some(Given::Text(text)) => text.to_owned(),
        };
        match self.ty {
            Some(ty) => ty.parse(&text),
            None => Ok(Param::Text(text)),
        }
    }
}

/// A value without a declared type, bound as what JSON says it is: null,
/// a boolean, an integer (`i64`), another number (with its text, so the
/// database converts exactly what was sent), text, or, for an array or an
/// object, a JSON document.
pub fn untyped_param(value: Value) -> Param {
    match value {
        Value::Null => Param::Null,
        Value::Bool(flag) => Param::Bool(flag),
        Value::Number(number) => match number.as_i64() {
            Some(integer) => Param::Integer(integer),
            None => Param::Real {
                value: number.as_f64().unwrap_or(f64::NAN),
                text: number.to_string(),
            },
        },
        Value::String(text) => Param::Text(text),
        composite @ (Value::Array(_) | Value::Object(_)) => Param::Json(composite.to_string()),
    }
}

/// A database's way of spelling a checked parameter as the text it is sent as
/// (see `Session::param_spelling`).
pub type Spelling = fn(&Param) -> Option<String>;

/// A line of parameter-set input, as [`ParamLines::next_line`] gives it.
pub enum Line<'a> {
    /// The line's text, without its terminator and surrounding blanks.
    Text(&'a [u8]),
    /// The line was longer than the limit; it was read to its end, not kept.
    TooLong,
}

/// Parameter sets read from NDJSON lines: a [`ParamSource`] for pipelined calls.
///
/// Blank lines are skipped (but counted); a line longer than the limit fails its
/// call without being held in memory.
pub struct ParamLines<R> {
    reader: R,
    signature: Signature,
    spell: Spelling,
    max_line_bytes: usize,
    line: u64,
    buffer: Vec<u8>,
    input_failed: bool,
}

impl<R: AsyncBufRead + Unpin + Send> ParamLines<R> {
    /// Reads `reader`'s lines as sets of `signature`, spelled by `spell`, each
    /// line at most `max_line_bytes` long.
    pub fn new(
        reader: R,
        signature: Signature,
        spell: Spelling,
        max_line_bytes: usize,
    ) -> ParamLines<R> {
        ParamLines {
            reader,
            signature,
            spell,
            max_line_bytes,
            line: 0,
            buffer: Vec::new(),
            input_failed: false,
        }
    }

    /// Reading the input failed (for a request body: the client went away).
    pub fn input_failed(&self) -> bool {
        self.input_failed
    }

    /// The next line that is not blank, with its 1-based number; `None` at the end.
    pub async fn next_line(&mut self) -> Result<Option<(u64, Line<'_>)>, Error> {
        Ok(match self.advance().await? {
            None => None,
            Some((line, true)) => Some((line, Line::TooLong)),
            Some((line, false)) => Some((line, Line::Text(self.buffer.trim_ascii()))),
        })
    }

    /// Reads up to the next line that is not blank: its number and whether it
    /// was too long to keep; its text is in `self.buffer`.
    async fn advance(&mut self) -> Result<Option<(u64, bool)>, Error> {
        loop {
            let Some(too_long) = self.read_line().await? else {
                return Ok(None);
            };
            self.line += 1;
            if too_long || !self.buffer.trim_ascii().is_empty() {
                return Ok(Some((self.line, too_long)));
            }
        }
    }

    /// The next line into `self.buffer`: `Some(true)` if it was too long to
    /// keep, `None` at the end of the input.
    async fn read_line(&mut self) -> Result<Option<bool>, Error> {
        self.buffer.clear();
        let mut too_long = false;
        let mut any = false;
        loop {
            let available = match self.reader.fill_buf().await {
                Ok(available) => available,
                Err(error) => {
                    self.input_failed = true;
                    return Err(Error::new(
                        ErrorKind::Io,
                        format!("reading the parameter sets failed: {error}"),
                    ));
                }
            };
            if available.is_empty() {
                return Ok(any.then_some(too_long));
            }
            any = true;
            let (piece, used, done) = match memchr::memchr(b'\n', available) {
                Some(end) => (&available[..end], end + 1, true),
                None => (available, available.len(), false),
            };
            if !too_long && self.buffer.len() + piece.len() <= self.max_line_bytes {
                self.buffer.extend_from_slice(piece);
            } else {
                too_long = true;
                self.buffer.clear();
            }
            self.reader.consume(used);
            if done {
                return Ok(Some(too_long));
            }
        }
    }

    async fn next_set(&mut self) -> Result<Option<ParamSet>, Error> {
        let Some((line, too_long)) = self.advance().await? else {
            return Ok(None);
        };
        let values = if too_long {
            Err(format!(
                "the line is longer than {} bytes",
                self.max_line_bytes
            ))
        } else {
            self.signature
                .parse_line(self.buffer.trim_ascii())
                .map(|params| params.iter().map(self.spell).collect())
                .map_err(|fault| fault.to_string())
        };
        Ok(Some(ParamSet { line, values }))
    }
}

impl<R: AsyncBufRead + Unpin + Send> ParamSource for ParamLines<R> {
    fn next(&mut self) -> BoxFuture<'_, Result<Option<ParamSet>, Error>> {
        Box::pin(self.next_set())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn declared(name: &str, ty: ParamType, required: bool, default: Option<&str>) -> Declared {
        Declared {
            name: name.into(),
            ty: Some(ty),
            required,
            default: default.map(str::to_owned),
        }
    }

    fn typed() -> Signature {
        Signature::new(vec![
            declared("id", ParamType::Int, true, None),
            declared("since", ParamType::TimestampTz, false, Some("2024-01-01")),
            declared("note", ParamType::Text, false, None),
        ])
    }

    #[test]
    fn lines_are_arrays_or_objects_checked_by_type() {
        let signature = typed();
        let set = |line: &str| signature.parse_line(line.as_bytes());
        assert_eq!(
            set(r#"[7, "2024-03-01T12:00:00+02:00", "x"]"#).unwrap(),
            [
                Param::Integer(7),
                Param::TimestampUtc("2024-03-01 10:00:00".into()),
                Param::Text("x".into())
            ]
        );
        assert_eq!(
            set(r#"{"id": "8", "$note": null}"#).unwrap(),
            [
                Param::Integer(8),
                Param::TimestampUtc("2024-01-01 00:00:00".into()),
                Param::Null
            ]
        );
        assert_eq!(set("[9]").unwrap()[0], Param::Integer(9));
        for (line, fault) in [
            (r#"{"note": "x"}"#, "parameter \"id\": required (int)"),
            (
                r#"{"id": null}"#,
                "parameter \"id\": required (int), got null",
            ),
            (
                r#"{"id": 1, "colour": "red"}"#,
                "parameter \"colour\": unknown parameter (the statement takes: id, since, note)",
            ),
            (r#"["x"]"#, "parameter \"id\": expected an integer"),
            (r#"[1, "yesterday"]"#, "parameter \"since\""),
            (
                "[1, null, null, 4]",
                "4 values, but the statement takes 3 parameters (id, since, note)",
            ),
            (
                "[1, null, [2]]",
                "parameter \"note\": expected text, got an array",
            ),
            ("{", "invalid JSON"),
            ("5", "expected a JSON array or object"),
        ] {
            let error = set(line).unwrap_err().to_string();
            assert!(error.starts_with(fault), "{line}: {error}");
        }
        let one = Signature::new(vec![declared("n", ParamType::BigInt, true, None)]);
        assert_eq!(one.parse_line(b"42").unwrap(), [Param::Integer(42)]);
    }

    #[test]
    fn untyped_values_are_what_json_says() {
        let signature = Signature::untyped(["1".to_owned(), "2".to_owned()]);
        assert_eq!(
            signature.parse_line(br#"[true, {"a": [1]}]"#).unwrap(),
            [Param::Bool(true), Param::Json(r#"{"a":[1]}"#.into())]
        );
        assert_eq!(
            signature.parse_line(br#"{"$2": "x"}"#).unwrap(),
            [Param::Null, Param::Text("x".into())]
        );
        assert_eq!(
            signature
                .parse_line(br#"{"2": 1.50, "1": 18446744073709551616}"#)
                .unwrap(),
            [
                Param::Real {
                    value: 18446744073709551616.0,
                    text: "18446744073709551616".into()
                },
                Param::Real {
                    value: 1.5,
                    text: "1.50".into()
                }
            ]
        );
        assert!(
            signature.parse_line(b"7").is_err(),
            "two parameters, one value"
        );
    }

    #[test]
    fn pairs_are_checked_by_the_same_rules() {
        let signature = typed();
        let bind = |pairs: &[(&str, &str)]| {
            signature.bind_pairs(pairs.iter().copied(), |key| key == "format")
        };
        assert_eq!(
            bind(&[("id", "3"), ("format", "csv")]).unwrap(),
            [
                Param::Integer(3),
                Param::TimestampUtc("2024-01-01 00:00:00".into()),
                Param::Null
            ]
        );
        let fault = bind(&[("id", "3"), ("id", "4")]).unwrap_err();
        assert_eq!(fault.parameter.as_deref(), Some("id"));
        assert_eq!(fault.message, "given more than once");
        assert_eq!(
            bind(&[]).unwrap_err().to_string(),
            "parameter \"id\": required (int)"
        );
        assert_eq!(
            Signature::default()
                .bind_pairs([("x", "1")], |_| false)
                .unwrap_err()
                .to_string(),
            "parameter \"x\": unknown parameter: the statement takes none"
        );
    }

    #[tokio::test]
    async fn lines_skip_blanks_and_refuse_long_ones_without_holding_them() {
        let input: &[u8] = b"[1]\n\n  \n[\"xxxxxxxxxxxxxxxxxxxxxxxx\"]\n[3]";
        let mut lines =
            ParamLines::new(input, Signature::untyped(["a".to_owned()]), Param::text, 16);
        let mut sets = Vec::new();
        while let Some(set) = lines.next().await.unwrap() {
            sets.push((set.line, set.values));
        }
        assert_eq!(
            sets,
            [
                (1, Ok(vec![Some("1".to_owned())])),
                (4, Err("the line is longer than 16 bytes".to_owned())),
                (5, Ok(vec![Some("3".to_owned())])),
            ]
        );
    }
}
