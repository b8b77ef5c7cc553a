//! [`Param`]: a value bound to a query parameter, checked against its
//! declared type, which each database binds its own way.

/// A value bound to a query parameter, already checked against its declared
/// type. Each database binds it its own way: PostgreSQL sends the text and lets
/// the server convert it; SQLite binds the matching storage class.
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// SQL NULL.
    Null,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Integer(i64),
    /// A floating-point number, with the text it was given as (so PostgreSQL
    /// converts exactly what the client sent).
    Real {
        /// The number.
        value: f64,
        /// Its text.
        text: String,
    },
    /// An exact decimal, as text (`12.50`).
    Numeric(String),
    /// Text.
    Text(String),
    /// A date, `YYYY-MM-DD`.
    Date(String),
    /// A date and time without zone, in sluice's canonical text
    /// (`2024-03-01 12:00:00.25`).
    Timestamp(String),
    /// A moment in UTC, in sluice's canonical text without the offset
    /// (`2024-03-01 10:00:00.25`).
    TimestampUtc(String),
    /// A UUID, lower case.
    Uuid(String),
    /// A JSON document's text.
    Json(String),
}

impl Param {
    /// The value in its canonical text (a moment without an offset as written,
    /// meaning UTC); `None` for NULL. Databases that spell a value otherwise say
    /// so through [`crate::connect::Session::param_spelling`].
    pub fn text(&self) -> Option<String> {
        Some(match self {
            Param::Null => return None,
            Param::Bool(value) => value.to_string(),
            Param::Integer(value) => value.to_string(),
            Param::Real { text, .. } => text.clone(),
            Param::Numeric(text)
            | Param::Text(text)
            | Param::Date(text)
            | Param::Timestamp(text)
            | Param::TimestampUtc(text)
            | Param::Uuid(text)
            | Param::Json(text) => text.clone(),
        })
    }
}
