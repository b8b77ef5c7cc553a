//! # sluice-core
//!
//! The pieces every sluice database and format agrees on, so that N databases and
//! M formats need N + M pieces of code rather than N × M:
//!
//! - [`Schema`], [`Column`] and [`Kind`]: what a result looks like and how each
//!   column's values are spelled (see [`value`] for the canonical forms, and
//!   [`canonical`] for their one reader each);
//! - [`Batch`]: the one intermediate representation, a block of rows whose values
//!   are byte strings in those canonical forms;
//! - [`BatchSource`] (databases produce batches) and [`Encoder`] (formats consume
//!   them), plus [`Transfer`], the one streaming engine that drives one into the
//!   other with bounded memory and limits (every output — files, pipes, HTTP
//!   bodies — is fed by it; [`pump()`] drives it into a writer);
//! - [`Decoder`]: the way in, input formats to batches with exact error positions;
//! - [`Meter`] and [`MeteredStream`]: round trips and wire bytes, counted at the
//!   socket so every feature reports the same figures; [`Socket`]: the TCP or
//!   Unix-domain stream under them, opened the same way for every database;
//! - [`connect`]: the [`connect::Driver`] each database crate offers, and the
//!   [`connect::Drivers`] registry front ends open URLs with, so none of them
//!   names a database; [`load`] and [`calls`] hold the vocabulary of loading a
//!   table and of running one statement for many parameter sets, [`split`] that
//!   of reading one snapshot in parallel parts;
//! - [`pool`]: the gateway's pool of sessions, one for every database crate;
//! - [`Error`]: one opaque error type with kind accessors; [`WaitLimit`]: the
//!   one way a session gives a silent server up ([`Stalled`]);
//! - [`parse_duration`]: the one spelling of durations people write;
//!   [`word::Word`]: settings spelled as one of a few words, each type listing
//!   its spellings once for every front end.
#![warn(missing_docs)]

pub mod batch;
pub mod calendar;
pub mod calls;
pub mod canonical;
pub mod connect;
pub mod database;
pub mod decode;
pub mod dialect;
pub mod duration;
pub mod error;
pub mod future;
pub mod host;
pub mod interleave;
pub mod load;
pub mod meter;
pub mod param;
pub mod pool;
pub mod pump;
pub mod row_error;
pub mod running;
pub mod session;
pub mod socket;
pub mod source;
pub mod split;
pub mod transfer;
pub mod value;
pub mod wait;
pub mod word;

pub use batch::{Batch, BatchMark, Row};
pub use decode::{Decoded, Decoder, Rejected};
pub use duration::{parse_duration, DurationError};
pub use error::{DbCause, DbError, Error, ErrorKind, Stalled};
pub use meter::{peak_rss_bytes, Meter, MeterSnapshot, MeteredStream};
pub use pump::{pump, Progress, PumpSummary};
pub use row_error::{RowError, RowFault};
pub use socket::{Keepalive, Socket, TcpSettings};
pub use source::{BatchSource, Chunk, DynSource, Encoder};
pub use transfer::{Limits, Transfer, TransferError};
pub use value::{Column, DecimalShape, DecimalText, Encoding, Field, Kind, Schema};
pub use wait::WaitLimit;
