//! Intervals: one representation, [`Interval`] (`parts`), and its two
//! readers.
//!
//! - [`read_interval`] (`strict`) reads the canonical text, what a
//!   [`crate::Batch`] holds: the `postgres` output style, a bare clock and
//!   ISO 8601 with designators; an output format uses it.
//! - [`read_interval_lenient`] (`lenient`) reads the whole interval input
//!   grammar, whatever style wrote it, for import input. The grammar is much
//!   larger than the others' lenient spellings (unit words, fractions that
//!   cascade, `ago`, SQL standard's `years-months` and its sign rule,
//!   [`IntervalSigns`]), so it is a reader of its own rather than a
//!   [`crate::canonical::Strictness`]: `fields` (after `tokens` splits the
//!   text) and `iso` read it into a `sum` of `units`.

mod fields;
mod iso;
mod lenient;
mod parts;
mod strict;
mod sum;
mod tokens;
mod units;

pub use fields::IntervalSigns;
pub use lenient::read_interval_lenient;
pub use parts::Interval;
pub use strict::read_interval;
