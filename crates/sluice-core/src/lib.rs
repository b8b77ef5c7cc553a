//! # sluice-core
//!
//! The pieces every sluice database and format agrees on, so that N databases and
//! M formats need N + M pieces of code rather than N × M:
//!
//! - [`Schema`], [`Column`] and [`Kind`]: what a result looks like and how each
//!   column's values are spelled (see [`value`] for the canonical forms);
//! - [`Batch`]: the one intermediate representation, a block of rows whose values
//!   are byte strings in those canonical forms;
//! - [`BatchSource`] (databases produce batches) and [`Encoder`] (formats consume
//!   them), plus [`pump`] which drives one into the other with bounded memory;
//! - [`Decoder`]: the way in, input formats to batches with exact error positions;
//! - [`Meter`] and [`MeteredStream`]: round trips and wire bytes, counted at the
//!   socket so every feature reports the same figures;
//! - [`Error`]: one opaque error type with kind accessors.
#![warn(missing_docs)]

pub mod batch;
pub mod decode;
pub mod error;
pub mod meter;
pub mod pump;
pub mod source;
pub mod value;

pub use batch::{Batch, BatchMark, Row};
pub use decode::{Decoded, Decoder, Rejected, RowError};
pub use error::{DbError, Error, ErrorKind};
pub use meter::{peak_rss_bytes, Meter, MeterSnapshot, MeteredStream};
pub use pump::{pump, Progress, PumpSummary};
pub use source::{BatchSource, Chunk, Encoder};
pub use value::{Column, Field, Kind, Schema};
