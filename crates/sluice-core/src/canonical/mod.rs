//! The canonical text forms of [`crate::value`] as code: one reader (and, for
//! the forms a source builds itself, one writer) per form, so every format,
//! encoder and database that meets a value reads it the same way.
//!
//! The canonical text is PostgreSQL's text output with `DateStyle = ISO` and
//! `IntervalStyle = postgres` (see [`crate::value`]), so these readers read
//! PostgreSQL's literal grammars: dates with ` BC`, array literals such as
//! `{1,NULL,"a b"}`, record literals such as `(1,"a b",)`.
//!
//! Each reader takes a [`Strictness`]:
//! - [`Strictness::Canonical`] reads exactly what a [`crate::Batch`] holds
//!   (what PostgreSQL prints, and what the other databases' conversions write):
//!   an output format uses it, so text in any other form is an error there
//!   rather than a guess;
//! - [`Strictness::Lenient`] also reads the other spellings PostgreSQL's input
//!   functions take for the same value, which an import's input may hold
//!   (blanks around a value, words in any case, `T` between date and time,
//!   `Z`, `epoch`, a time without seconds, more than six fraction digits
//!   rounded half to even, `yes`/`on`, braces around a UUID, blanks and
//!   backslash escapes in array literals). It is not every spelling the
//!   server reads: month names, `DateStyle` orders, two-digit years and zone
//!   names are refused, so an importer that must take them sends text.
//!
//! Intervals are the exception: their input grammar is far larger than a
//! few more spellings (unit words, fractions, `ago`, SQL standard's sign
//! rule), so [`read_interval`] reads the canonical text and
//! [`read_interval_lenient`] the whole grammar, both into one [`Interval`].
//!
//! Whatever the canonical reader takes, the lenient one takes too and reads as
//! the same value (the property tests and the `canonical_forms` fuzz target
//! hold both to that). Readers never panic and never allocate except where a
//! literal's escaped element needs a buffer.
//!
//! Errors are [`FormError`] values without text: each caller words them for
//! its own users (an Arrow column, a COPY line, a SQLite cell).

mod interval;
mod literal;
mod moment;
mod reading;
mod scalar;
mod write;

#[cfg(test)]
mod tests;

pub use interval::{read_interval, read_interval_lenient, Interval, IntervalSigns};
pub use literal::{
    read_array, read_record, ArrayShape, ArrayVisitor, LiteralError, MAX_DIMENSIONS,
};
pub use moment::{
    read_date, read_time, read_time_tz, read_timestamp, read_timestamp_and_offset, Moment, Zone,
    MAX_OFFSET,
};
pub use reading::{trim_blanks, FormError, Strictness};
pub use scalar::{hex_digit, read_bool, read_hex_pairs, read_uuid};
pub use write::{write_clock, write_date, write_offset, write_timestamp, write_uuid};
