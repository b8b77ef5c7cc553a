//! Reading one table of the file through its [`Section`]: a key the section
//! does not define is an error, an old spelling is read with a deprecation
//! note, each value is read as its key's [`Type`] says and a key left out
//! takes its [`KeyDefault`].

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::ops::Range;
use std::time::Duration;

use toml::Spanned;

use super::error::ConfigError;
use super::keys::{quoted, KeyDefault, Section, Type};
use super::text::{self, ConfigText};

/// A section's keys as the file gives them, each with where it is.
pub(super) type RawTable = BTreeMap<Spanned<String>, Spanned<toml::Value>>;

/// A value and where it is in the file.
pub(super) struct Given<T> {
    pub(super) value: T,
    pub(super) span: Range<usize>,
}

/// One table of the file, its keys checked against its [`Section`].
pub(super) struct Entries<'a> {
    source: &'a ConfigText<'a>,
    section: &'static Section,
    path: String,
    span: Range<usize>,
    values: BTreeMap<&'static str, &'a Spanned<toml::Value>>,
}

impl<'a> Entries<'a> {
    /// `table`, at dotted `path`, read as `section` defines: an unknown key is
    /// an error, an old spelling adds a note to `notes`.
    pub(super) fn read(
        source: &'a ConfigText<'a>,
        section: &'static Section,
        path: String,
        table: &'a Spanned<RawTable>,
        notes: &RefCell<Vec<String>>,
    ) -> Result<Entries<'a>, ConfigError> {
        let (span, raw) = (table.span(), table.get_ref());
        let mut values = BTreeMap::new();
        for (name, value) in raw {
            let written = name.get_ref().as_str();
            let Some(key) = section.spelled(written) else {
                return Err(source.error(
                    name.span(),
                    &format!("{path}.{written}"),
                    format!(
                        "unknown key {written:?}: {} takes {}",
                        section.heading,
                        names(section)
                    ),
                ));
            };
            if key.name != written {
                notes.borrow_mut().push(format!(
                    "{}:{}: {path}.{written} is deprecated: write {} = … instead (the same value)",
                    source.file,
                    source.line(name.span().start),
                    key.name
                ));
            }
            if values.insert(key.name, value).is_some() {
                return Err(source.error(
                    name.span(),
                    &format!("{path}.{written}"),
                    format!(
                        "{} is given twice (old and new spelling): keep {}",
                        key.name, key.name
                    ),
                ));
            }
        }
        Ok(Entries {
            source,
            section,
            path,
            span,
            values,
        })
    }

    /// The table's dotted path (`queries.by_status`).
    pub(super) fn path(&self) -> &str {
        &self.path
    }

    /// Where the table is.
    pub(super) fn span(&self) -> Range<usize> {
        self.span.clone()
    }

    /// The dotted path of key `name`.
    pub(super) fn key_path(&self, name: &str) -> String {
        format!("{}.{name}", self.path)
    }

    /// An error at `span` about key `name`.
    pub(super) fn error(
        &self,
        name: &str,
        span: Range<usize>,
        message: impl Into<String>,
    ) -> ConfigError {
        self.source.error(span, &self.key_path(name), message)
    }

    /// The 1-based line where `span` starts.
    pub(super) fn line(&self, span: Range<usize>) -> usize {
        self.source.line(span.start)
    }

    /// An error about the table as a whole, at its start.
    pub(super) fn table_error(&self, message: impl Into<String>) -> ConfigError {
        self.source.error(self.span(), &self.path, message)
    }

    /// Whether the file gives key `name`.
    pub(super) fn has(&self, name: &str) -> bool {
        self.section.key(name);
        self.values.contains_key(name)
    }

    /// Key `name`'s value, checked to be of `expected` type family.
    fn raw(&self, name: &str, expected: fn(Type) -> bool) -> Option<&'a Spanned<toml::Value>> {
        let key = self.section.key(name);
        assert!(
            expected(key.ty),
            "[{}] {name} is a {:?}, read as another type",
            self.section.path,
            key.ty
        );
        self.values.get(key.name).copied()
    }

    /// The value, or an error at the table when the key is required and absent.
    fn given(
        &self,
        name: &str,
        expected: fn(Type) -> bool,
    ) -> Result<Option<&'a Spanned<toml::Value>>, ConfigError> {
        let value = self.raw(name, expected);
        if value.is_none() && self.section.key(name).default == KeyDefault::Required {
            return Err(self.error(name, self.span(), format!("{name} is required")));
        }
        Ok(value)
    }

    /// A text key (`${NAME}` replaced for [`Type::EnvText`]).
    pub(super) fn text(&self, name: &str) -> Result<Option<Given<String>>, ConfigError> {
        let Some(value) = self.given(name, |ty| matches!(ty, Type::Text | Type::EnvText))? else {
            return Ok(None);
        };
        let toml::Value::String(written) = value.get_ref() else {
            return Err(self.error(name, value.span(), "expected text in quotes"));
        };
        let text = match self.section.key(name).ty {
            Type::EnvText => self
                .source
                .substitute(written, value.span(), &self.key_path(name))?,
            _ => written.clone(),
        };
        Ok(Some(Given {
            value: text,
            span: value.span(),
        }))
    }

    /// A text key the section requires ([`KeyDefault::Required`]).
    pub(super) fn required_text(&self, name: &str) -> Result<Given<String>, ConfigError> {
        self.text(name)?
            .ok_or_else(|| self.error(name, self.span(), format!("{name} is required")))
    }

    /// A [`Type::Word`] key: one of its words, else the default word.
    pub(super) fn word(&self, name: &str) -> Result<Given<&'static str>, ConfigError> {
        let key = self.section.key(name);
        let (Type::Word(words), KeyDefault::Word(default)) = (key.ty, key.default) else {
            panic!(
                "[{}] {name} is not a word with a default",
                self.section.path
            );
        };
        let Some(value) = self.values.get(name) else {
            return Ok(Given {
                value: default,
                span: self.span(),
            });
        };
        match words
            .iter()
            .find(|word| value.get_ref().as_str() == Some(**word))
        {
            Some(word) => Ok(Given {
                value: word,
                span: value.span(),
            }),
            None => Err(self.error(
                name,
                value.span(),
                format!(
                    "expected {}, not {}",
                    quoted(words, " or "),
                    value.get_ref()
                ),
            )),
        }
    }

    /// A duration key; its default when absent (`None` when it has none).
    pub(super) fn duration(&self, name: &str) -> Result<Option<Duration>, ConfigError> {
        let key = self.section.key(name);
        let Some(value) = self.given(name, |ty| matches!(ty, Type::Duration | Type::Timeout))?
        else {
            return Ok(match key.default {
                KeyDefault::Duration(duration) => Some(duration),
                _ => None,
            });
        };
        let Some(written) = value.get_ref().as_str() else {
            return Err(self.error(
                name,
                value.span(),
                "expected a duration in quotes, e.g. \"30s\"",
            ));
        };
        text::duration(written, key.ty == Type::Timeout)
            .map(Some)
            .map_err(|message| self.error(name, value.span(), message))
    }

    /// A size key; its default when absent.
    pub(super) fn size(&self, name: &str) -> Result<Option<u64>, ConfigError> {
        let Some(value) = self.given(name, |ty| ty == Type::Size)? else {
            return Ok(match self.section.key(name).default {
                KeyDefault::Size(size) => Some(size),
                _ => None,
            });
        };
        text::parse_bytes(value.get_ref())
            .map(Some)
            .map_err(|message| self.error(name, value.span(), message))
    }

    /// A [`Type::Scale`] key: the digits after a decimal's point.
    pub(super) fn scale(&self, name: &str) -> Result<Option<i8>, ConfigError> {
        let Some(value) = self.given(name, |ty| ty == Type::Scale)? else {
            return Ok(None);
        };
        match value.get_ref().as_integer() {
            Some(scale @ 0..=38) => Ok(Some(scale as i8)),
            _ => Err(self.error(name, value.span(), "must be between 0 and 38")),
        }
    }

    /// A [`Type::Count`] or [`Type::Positive`] key; its default when absent.
    pub(super) fn count(&self, name: &str) -> Result<Option<u64>, ConfigError> {
        let key = self.section.key(name);
        let Some(value) = self.given(name, |ty| matches!(ty, Type::Count(_) | Type::Positive))?
        else {
            return Ok(match key.default {
                KeyDefault::Count(count) => Some(count as u64),
                _ => None,
            });
        };
        let most = match key.ty {
            Type::Count(most) => most as u64,
            _ => i64::MAX as u64,
        };
        match value.get_ref().as_integer() {
            Some(count) if count >= 1 && count as u64 <= most => Ok(Some(count as u64)),
            _ if key.ty == Type::Positive => {
                Err(self.error(name, value.span(), "must be positive"))
            }
            _ => Err(self.error(name, value.span(), format!("must be between 1 and {most}"))),
        }
    }

    /// A number key (integer or fraction).
    pub(super) fn number(&self, name: &str) -> Result<Option<Given<f64>>, ConfigError> {
        let Some(value) = self.given(name, |ty| ty == Type::Number)? else {
            return Ok(None);
        };
        let number = match value.get_ref() {
            toml::Value::Integer(number) => *number as f64,
            toml::Value::Float(number) => *number,
            other => {
                return Err(self.error(name, value.span(), format!("{other} is not a number")))
            }
        };
        Ok(Some(Given {
            value: number,
            span: value.span(),
        }))
    }

    /// A flag key; its default when absent.
    pub(super) fn flag(&self, name: &str) -> Result<bool, ConfigError> {
        let key = self.section.key(name);
        let Some(value) = self.given(name, |ty| ty == Type::Flag)? else {
            return Ok(key.default == KeyDefault::Flag(true));
        };
        value
            .get_ref()
            .as_bool()
            .ok_or_else(|| self.error(name, value.span(), "expected true or false"))
    }

    /// A [`Type::Scalar`] key, as text.
    pub(super) fn scalar(&self, name: &str) -> Result<Option<Given<String>>, ConfigError> {
        let Some(value) = self.given(name, |ty| ty == Type::Scalar)? else {
            return Ok(None);
        };
        let text = match value.get_ref() {
            toml::Value::String(text) => text.clone(),
            toml::Value::Array(_) | toml::Value::Table(_) => {
                return Err(self.error(name, value.span(), "expected text, a number or a boolean"))
            }
            other => other.to_string(),
        };
        Ok(Some(Given {
            value: text,
            span: value.span(),
        }))
    }

    /// An address key (`"host:port"`).
    pub(super) fn address(&self, name: &str) -> Result<Option<SocketAddr>, ConfigError> {
        let Some(value) = self.given(name, |ty| ty == Type::Address)? else {
            return Ok(None);
        };
        let example = self
            .section
            .key(name)
            .example
            .unwrap_or("\"127.0.0.1:8080\"");
        match value.get_ref().as_str().map(str::parse::<SocketAddr>) {
            Some(Ok(address)) => Ok(Some(address)),
            _ => Err(self.error(
                name,
                value.span(),
                format!("{} is not an address such as {example}", value.get_ref()),
            )),
        }
    }

    /// A list key: each item text (one of the words of a [`Type::WordList`]);
    /// empty when absent.
    pub(super) fn list(&self, name: &str) -> Result<Vec<Given<String>>, ConfigError> {
        let Some(value) =
            self.given(name, |ty| matches!(ty, Type::TextList | Type::WordList(_)))?
        else {
            return Ok(Vec::new());
        };
        let words = match self.section.key(name).ty {
            Type::WordList(words) => Some(words),
            _ => None,
        };
        let Some(items) = value.get_ref().as_array() else {
            return Err(self.error(name, value.span(), "expected a list in [ ]"));
        };
        let mut list = Vec::new();
        for item in items {
            let Some(text) = item.as_str() else {
                return Err(self.error(
                    name,
                    value.span(),
                    format!("{item} is not text in quotes"),
                ));
            };
            if let Some(words) = words.filter(|words| !words.contains(&text)) {
                return Err(self.error(
                    name,
                    value.span(),
                    format!("unknown {text:?}: expected {}", quoted(words, " or ")),
                ));
            }
            list.push(Given {
                value: text.to_owned(),
                span: value.span(),
            });
        }
        Ok(list)
    }
}

/// A section's key names, for the unknown-key error.
fn names(section: &Section) -> String {
    let names: Vec<&str> = section.keys.iter().map(|key| key.name).collect();
    names.join(", ")
}
