//! The value model: a result's [`Schema`] and the [`Kind`] of each column.
//!
//! Every value in a [`crate::Batch`] is a byte string in the canonical form of its
//! column's kind. Databases convert into these forms; formats read only these forms.
//! The forms follow PostgreSQL's text output with `DateStyle = ISO`, because that is
//! both unambiguous and what `COPY … CSV` prints, so CSV output can be byte-identical
//! to the server's own. Each form has one reader (and where sources build
//! values from numbers, one writer) in [`crate::canonical`]:
//!
//! | kind | canonical bytes |
//! |---|---|
//! | `Bool` | `t` or `f` |
//! | `Integer` | decimal digits with optional leading `-` |
//! | `Float` | shortest round-trip decimal, or `NaN`, `Infinity`, `-Infinity` |
//! | `Decimal` | the exact decimal text, or `NaN`, `Infinity`, `-Infinity` |
//! | `Text`, `Other` | UTF-8 text |
//! | `Bytes` | the raw bytes (inside an array or composite literal: PostgreSQL's hex form `\x…`) |
//! | `Json` | JSON text |
//! | `Date` | `YYYY-MM-DD`, optional ` BC`, or `infinity` / `-infinity` |
//! | `Time` / `TimeTz` | `HH:MM:SS[.ffffff]`, with `±HH[:MM[:SS]]` for `TimeTz` |
//! | `Timestamp` / `TimestampTz` | `YYYY-MM-DD HH:MM:SS[.ffffff]`, with `±HH[:MM[:SS]]` for `TimestampTz`, optional ` BC`, or `infinity` / `-infinity` |
//! | `Interval` | the database's interval text (ISO-8601 `P…` when the source was asked for it) |
//! | `Array` | a PostgreSQL array literal such as `{1,NULL,"a b"}`, elements in their own canonical text forms |
//! | `Composite` | a PostgreSQL record literal such as `(1,"a b",)` |
//!
//! # Binary values
//!
//! A format that stores numbers as numbers (Arrow, Parquet) would only parse
//! the text again, so a source may hand it some columns in a fixed binary form
//! instead, marked [`Encoding::Binary`] on the column. A source does so only
//! when its caller asks (`ExportOptions::binary_values`), and only for the
//! kinds below; every other column stays text. Numbers are big-endian (the
//! network's order, so PostgreSQL's binary result values arrive untouched; a
//! database with other forms converts):
//!
//! | kind | binary bytes |
//! |---|---|
//! | `Bool` | one byte, 0 or 1 |
//! | `Integer` | two's complement in 2, 4 or 8 bytes (the value's length says which) |
//! | `Float` | IEEE 754 binary32 or binary64 (4 or 8 bytes) |
//! | `Date` | `i32` days since 2000-01-01; `i32::MAX` / `i32::MIN` are `infinity` / `-infinity` |
//! | `Time` | `i64` microseconds since midnight |
//! | `Timestamp` / `TimestampTz` | `i64` microseconds since 2000-01-01 00:00 (UTC for `TimestampTz`); `i64::MAX` / `i64::MIN` are `infinity` / `-infinity` |
//! | `Other` or `Text` whose type is a UUID | its 16 bytes |
//!
//! The epoch is 2000-01-01 (PostgreSQL's) rather than 1970 so that the common
//! source needs no arithmetic per value; a format converts once, where it also
//! checks the range of its own type.
//!
//! # Native values
//!
//! Between two databases of one product (`sluice copy` from PostgreSQL to
//! PostgreSQL) the fastest value is one nobody reads: the source's own binary
//! form of the column's type, which the target's bulk load takes as it is
//! ([`Encoding::Native`]). Only a caller that asks
//! (`ExportOptions::native_values`) gets them, only from a source whose every
//! column has a form another database of its product reads the same way (all
//! or none: a batch never mixes native and canonical values), and only a
//! target of the same product whose columns have the same types as the
//! source's reads them. No format does: they are refused there.

use std::borrow::Cow;

/// How a column's values are spelled and how formats should render them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Kind {
    /// `t` / `f`.
    Bool,
    /// A whole number of any width.
    Integer,
    /// A binary floating-point number.
    Float,
    /// An exact decimal number (`numeric`), never passed through a float.
    Decimal,
    /// Text (including enums and character types).
    Text,
    /// Binary data.
    Bytes,
    /// A JSON document (`json`, `jsonb`), embedded as JSON rather than as a string.
    Json,
    /// A calendar date.
    Date,
    /// A time of day without zone.
    Time,
    /// A time of day with zone offset.
    TimeTz,
    /// A timestamp without zone.
    Timestamp,
    /// A timestamp with zone offset.
    TimestampTz,
    /// A duration.
    Interval,
    /// An array of any dimension whose elements are of the given kind.
    Array(Box<Kind>),
    /// A composite (row) value with named fields.
    Composite(Vec<Field>),
    /// Anything else, carried as the database's own text output.
    Other,
}

/// A named, typed field of a composite value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Field {
    /// The field's name.
    pub name: String,
    /// The field's kind.
    pub kind: Kind,
}

/// How a column's values are spelled in a [`crate::Batch`]: see the module docs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Encoding {
    /// The canonical text of the column's kind, which every format reads.
    #[default]
    Text,
    /// The kind's binary form, sent only to a caller that asked for it.
    Binary,
    /// The source database's own binary form of the column's type
    /// ([`Column::type_name`]), for a target of the same product to take
    /// unread: see the module docs.
    Native,
}

/// The declared precision and scale of an exact decimal column (`numeric(p,s)`,
/// `DECIMAL(p,s)`), for formats that store decimals as scaled integers (Arrow,
/// Parquet). Values still arrive as their exact text; the shape only says how
/// many digits any of them can have.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DecimalShape {
    /// Significant digits in all, at most 1000 (PostgreSQL's limit).
    pub precision: u16,
    /// Digits after the decimal point; negative rounds to tens, hundreds, …
    /// (PostgreSQL 15 allows -1000..=1000).
    pub scale: i16,
}

/// One result column. Build it with [`Column::new`] (and [`Column::with_decimal`]),
/// so that a new property of columns is one more builder call, not an edit of
/// every place that makes one.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct Column {
    /// The column name as the database reports it (may repeat within a schema).
    pub name: String,
    /// How values are spelled.
    pub kind: Kind,
    /// The database's own type name, for messages and documentation (e.g. `int8`, `payment_status`).
    pub type_name: String,
    /// For [`Kind::Decimal`] columns (and arrays of them) whose type declares it,
    /// the precision and scale; `None` for an unconstrained `numeric` and every
    /// other kind.
    pub decimal: Option<DecimalShape>,
    /// For a `varchar(n)` column, the most characters a value may have;
    /// `None` for every other column (a `char(n)`'s trailing spaces mean
    /// nothing). Only a table's description says it: an import refuses a
    /// longer value rather than let the database cut its trailing spaces.
    pub length: Option<u32>,
    /// How the values are spelled: text, unless the caller asked for binary
    /// values and the source sends this column so.
    pub encoding: Encoding,
    /// Whether the column may hold NULL, where the database says (MariaDB's
    /// result metadata does, outer joins included); `None` where it cannot
    /// know (PostgreSQL describes a result's types, not its NULLs).
    pub nullable: Option<bool>,
}

impl Column {
    /// A column named `name` of `kind`, whose database type is called `type_name`.
    pub fn new(name: impl Into<String>, kind: Kind, type_name: impl Into<String>) -> Column {
        Column {
            name: name.into(),
            kind,
            type_name: type_name.into(),
            decimal: None,
            length: None,
            encoding: Encoding::Text,
            nullable: None,
        }
    }

    /// The same column, said by its database to hold NULLs or not.
    pub fn with_nullable(mut self, nullable: Option<bool>) -> Column {
        self.nullable = nullable;
        self
    }

    /// The same column with its values spelled as `encoding` says.
    pub fn with_encoding(mut self, encoding: Encoding) -> Column {
        self.encoding = encoding;
        self
    }

    /// The same column with a declared decimal shape (`None`: unconstrained).
    pub fn with_decimal(mut self, shape: Option<DecimalShape>) -> Column {
        self.decimal = shape;
        self
    }

    /// The same column with a declared most characters (`None`: unconstrained).
    pub fn with_length(mut self, length: Option<u32>) -> Column {
        self.length = length;
        self
    }

    /// The column's type as a message names it with its `limit` (`5,2`,
    /// `3`): the database's own spelling when it carries the limit (MariaDB's
    /// `decimal(5,2)`), else its name and `limit` (`numeric(5,2)`).
    pub fn type_with_limit(&self, limit: &str) -> String {
        match self.type_name.contains('(') {
            true => self.type_name.clone(),
            false => format!("{}({limit})", self.type_name),
        }
    }
}

/// The columns of a result, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Schema {
    /// The columns in result order.
    pub columns: Vec<Column>,
}

impl Schema {
    /// Number of columns.
    pub fn len(&self) -> usize {
        self.columns.len()
    }

    /// True when the result has no columns (e.g. a statement that returns no rows).
    pub fn is_empty(&self) -> bool {
        self.columns.is_empty()
    }

    /// Column names made unique, in column order: the first occurrence of a name is
    /// kept as is and each later duplicate gets the smallest suffix `_2`, `_3`, … that
    /// is not already taken. JSON objects need unique keys; this rule is deterministic
    /// and keeps every column's data. Names kept as they are are borrowed.
    pub fn unique_names(&self) -> Vec<Cow<'_, str>> {
        if !self.has_duplicate_names() {
            return self
                .columns
                .iter()
                .map(|column| Cow::Borrowed(column.name.as_str()))
                .collect();
        }
        let mut used: std::collections::HashSet<String> = std::collections::HashSet::new();
        // Reserve every original name first so a renamed duplicate never collides
        // with a later column that genuinely carries that name.
        for column in &self.columns {
            used.insert(column.name.clone());
        }
        let mut seen: std::collections::HashSet<&str> = std::collections::HashSet::new();
        let mut names = Vec::with_capacity(self.columns.len());
        for column in &self.columns {
            if seen.insert(column.name.as_str()) {
                names.push(Cow::Borrowed(column.name.as_str()));
                continue;
            }
            let mut suffix = 2usize;
            loop {
                let candidate = format!("{}_{}", column.name, suffix);
                if used.insert(candidate.clone()) {
                    names.push(Cow::Owned(candidate));
                    break;
                }
                suffix += 1;
            }
        }
        names
    }

    /// Whether two columns share a name. The gateway asks once per response,
    /// so the usual handful of columns is compared pairwise: hashing every
    /// name into sets cost more than encoding a short query's rows.
    fn has_duplicate_names(&self) -> bool {
        const PAIRWISE_UP_TO: usize = 32;
        let columns = &self.columns;
        if columns.len() <= PAIRWISE_UP_TO {
            return columns.iter().enumerate().any(|(index, column)| {
                columns[..index]
                    .iter()
                    .any(|earlier| earlier.name == column.name)
            });
        }
        let mut seen = std::collections::HashSet::with_capacity(columns.len());
        !columns
            .iter()
            .all(|column| seen.insert(column.name.as_str()))
    }
}

/// A decimal's text taken apart: sign, digits around the point, and the
/// point's position counted in digits from the left (the exponent applied),
/// for whoever rebuilds the number in another form (Arrow's scaled integers,
/// PostgreSQL's base-10000 digits).
pub struct DecimalText<'a> {
    /// A leading `-`.
    pub negative: bool,
    /// The digits before the point.
    pub integer: &'a [u8],
    /// The digits after it.
    pub fraction: &'a [u8],
    /// Where the point falls, in digits from the first (the exponent applied):
    /// may be negative or beyond the digits.
    pub point: i64,
}

impl<'a> DecimalText<'a> {
    /// Splits `[sign] digits [. digits] [e [sign] digits]` (an exact decimal's
    /// canonical text, or the same with an exponent); `None` for anything else.
    pub fn split(text: &'a [u8]) -> Option<DecimalText<'a>> {
        let (negative, rest) = match text.split_first()? {
            (b'-', rest) => (true, rest),
            (b'+', rest) => (false, rest),
            _ => (false, text),
        };
        let (mantissa, exponent) = match rest.iter().position(|&b| b == b'e' || b == b'E') {
            Some(at) => (&rest[..at], Some(&rest[at + 1..])),
            None => (rest, None),
        };
        let (integer, fraction) = match mantissa.iter().position(|&b| b == b'.') {
            Some(at) => (&mantissa[..at], &mantissa[at + 1..]),
            None => (mantissa, &[][..]),
        };
        let all_digits = |part: &[u8]| part.iter().all(u8::is_ascii_digit);
        if integer.len() + fraction.len() == 0 || !all_digits(integer) || !all_digits(fraction) {
            return None;
        }
        let exponent = match exponent {
            Some(exponent) => std::str::from_utf8(exponent).ok()?.parse::<i32>().ok()?,
            None => 0,
        };
        Some(DecimalText {
            negative,
            integer,
            fraction,
            point: integer.len() as i64 + i64::from(exponent),
        })
    }

    /// Every digit as a number 0–9, integer part first.
    pub fn digits(&self) -> Vec<u8> {
        self.digit_bytes().map(|digit| digit - b'0').collect()
    }

    /// Every digit's ASCII byte, integer part first, without allocating.
    fn digit_bytes(&self) -> impl DoubleEndedIterator<Item = &'a u8> + Clone + 'a {
        self.integer.iter().chain(self.fraction)
    }

    /// The indices of the first and the last non-zero digit among all the
    /// digits; `None` for zero.
    fn significant(&self) -> Option<(usize, usize)> {
        let first = self.digit_bytes().position(|&digit| digit != b'0')?;
        let trailing_zeros = self.digit_bytes().rev().position(|&digit| digit != b'0')?;
        Some((
            first,
            self.integer.len() + self.fraction.len() - 1 - trailing_zeros,
        ))
    }

    /// The place of the last non-zero digit: 1 for tenths, 2 for hundredths,
    /// 0 for units, -1 for tens (`1.50`: 1; `1200`: -2); `None` for zero, which
    /// every scale holds.
    pub fn last_place(&self) -> Option<i64> {
        self.significant()
            .map(|(_, last)| last as i64 + 1 - self.point)
    }

    /// How many digits stand before the point, leading zeros not counted
    /// (`0012.5`: 2; `-0.05`: 0; `1.5e3`: 4).
    pub fn integer_digits(&self) -> i64 {
        self.significant()
            .map_or(0, |(first, _)| (self.point - first as i64).max(0))
    }

    /// Whether `other` is the same number (`0.10` and `1e-1`; `-0` and `0`).
    pub fn same_value(&self, other: &DecimalText<'_>) -> bool {
        match (self.significant(), other.significant()) {
            (None, None) => true,
            (Some((first, last)), Some((other_first, other_last))) => {
                self.negative == other.negative
                    && self.point - first as i64 == other.point - other_first as i64
                    && last - first == other_last - other_first
                    && self
                        .digit_bytes()
                        .skip(first)
                        .take(last - first + 1)
                        .eq(other.digit_bytes().skip(other_first).take(last - first + 1))
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schema(names: &[&str]) -> Schema {
        Schema {
            columns: names
                .iter()
                .map(|name| Column::new(*name, Kind::Text, "text"))
                .collect(),
        }
    }

    #[test]
    fn duplicate_names_get_suffixes_that_never_collide() {
        let schema = schema(&["id", "id", "id_2", "x", "id"]);
        assert_eq!(schema.unique_names(), ["id", "id_3", "id_2", "x", "id_4"]);
    }

    #[test]
    fn names_are_checked_for_duplicates_in_wide_schemas_too() {
        let mut names: Vec<String> = (0..40).map(|index| format!("c{index}")).collect();
        let wide = names.iter().map(String::as_str).collect::<Vec<_>>();
        assert_eq!(
            schema(&wide).unique_names(),
            names,
            "no duplicate: as they are"
        );
        names.push("c39".to_owned());
        let wide = names.iter().map(String::as_str).collect::<Vec<_>>();
        assert_eq!(schema(&wide).unique_names().last().unwrap(), "c39_2");
        assert_eq!(schema(&["a", "b", "a"]).unique_names(), ["a", "b", "a_2"]);
    }

    #[test]
    fn a_decimal_text_says_where_its_last_digit_sits_and_which_numbers_it_equals() {
        fn read(text: &str) -> DecimalText<'_> {
            DecimalText::split(text.as_bytes()).unwrap()
        }
        let place = |text: &str| read(text).last_place();
        assert_eq!(place("0012.50"), Some(1));
        let integer_digits = |text: &str| read(text).integer_digits();
        assert_eq!(integer_digits("0012.5"), 2);
        assert_eq!(integer_digits("-0.05"), 0);
        assert_eq!(integer_digits("1.5e3"), 4);
        assert_eq!(integer_digits("0"), 0);
        assert_eq!(integer_digits("100000000.0"), 9);
        assert_eq!(place("-0.005"), Some(3));
        assert_eq!(place("1200"), Some(-2));
        assert_eq!(place("1.5e3"), Some(-2));
        assert_eq!(place("12.3456e-1"), Some(5));
        assert_eq!(place("-0.000"), None);
        for (one, other) in [
            ("0.10", "1e-1"),
            ("-0", "0.0"),
            ("1500", "1.5e3"),
            (".5", "0.50"),
        ] {
            assert!(read(one).same_value(&read(other)), "{one} = {other}");
        }
        for (one, other) in [
            ("0.1", "0.10000000000000001"),
            ("-1", "1"),
            ("15", "1.5"),
            ("0", "1e-9"),
        ] {
            assert!(!read(one).same_value(&read(other)), "{one} != {other}");
        }
    }
}
