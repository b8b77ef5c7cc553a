//! The input side of the model: a [`Decoder`] turns bytes of an input format into
//! rows of a [`Batch`], each tagged with the input line it came from, and reports
//! each bad record as a [`RowError`] with its line, column and reason.

use crate::{Batch, Column, Error, RowError};

/// A bad record: the error and, when it fit in memory, the record's own bytes
/// (for reject files).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejected {
    /// Where and why.
    pub error: RowError,
    /// The record as it appeared in the input, without its line terminator
    /// (empty when the record was too long to keep).
    pub record: Vec<u8>,
}

impl Rejected {
    /// A record over the size limit: reported without its bytes, which are
    /// dropped as they arrive rather than held. `what` names the unit
    /// (`line`, `record`).
    pub fn too_long(line: u64, what: &str, maximum: usize) -> Rejected {
        Rejected {
            error: RowError::new(
                line,
                None,
                format!("the {what} is longer than the maximum of {maximum} bytes"),
            ),
            record: Vec::new(),
        }
    }
}

/// What one call of [`Decoder::decode`] produced.
#[derive(Debug, Default)]
pub struct Decoded {
    /// Good rows, over the decoder's [`Decoder::target_columns`].
    pub batch: Batch,
    /// For each row of `batch`, the 1-based input line where its record starts.
    pub lines: Vec<u64>,
    /// For each row of `batch`, its record's bytes, when the decoder was asked to keep them.
    pub records: Vec<Vec<u8>>,
    /// Bad records, in input order.
    pub rejected: Vec<Rejected>,
}

impl Decoded {
    /// Empties everything, keeping allocations.
    pub fn clear(&mut self) {
        self.batch.clear();
        self.lines.clear();
        self.records.clear();
        self.rejected.clear();
    }
}

/// Turns input bytes into rows for a table.
pub trait Decoder: Send {
    /// Decodes the complete records at the start of `input`, appending to `output`,
    /// and returns how many bytes were consumed; the caller keeps the rest and
    /// calls again with more. With `end_of_input`, a final record without a line
    /// terminator is decoded too. An `Err` is a failure of the whole input (a
    /// record over the size limit); bad records go to `output.rejected`.
    fn decode(
        &mut self,
        input: &[u8],
        end_of_input: bool,
        output: &mut Decoded,
    ) -> Result<usize, Error>;

    /// The table columns the rows fill, in row order, once known (from a header,
    /// the first record, or the caller's list).
    fn target_columns(&self) -> Option<&[Column]>;

    /// Records seen so far (good and bad), for the summary's accounting.
    fn records_seen(&self) -> u64;
}

/// A boxed decoder decodes as the one inside, so callers can choose the format at
/// run time (see `sluice_formats::InputFormat::decoder`).
impl<D: Decoder + ?Sized> Decoder for Box<D> {
    fn decode(
        &mut self,
        input: &[u8],
        end_of_input: bool,
        output: &mut Decoded,
    ) -> Result<usize, Error> {
        (**self).decode(input, end_of_input, output)
    }

    fn target_columns(&self) -> Option<&[Column]> {
        (**self).target_columns()
    }

    fn records_seen(&self) -> u64 {
        (**self).records_seen()
    }
}
