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
///
/// The smallest decoder: one text value per line. It takes only complete
/// lines (and, at the end of the input, the last one without its line
/// terminator), so the caller can hand it the input in blocks of any size:
///
/// ```
/// use sluice_core::decode::{Decoded, Decoder};
/// use sluice_core::{Column, Error, Kind};
///
/// /// Each line is the value of the one column.
/// struct Lines {
///     columns: Vec<Column>,
///     seen: u64,
/// }
///
/// impl Decoder for Lines {
///     fn decode(
///         &mut self,
///         input: &[u8],
///         end_of_input: bool,
///         output: &mut Decoded,
///     ) -> Result<usize, Error> {
///         let mut consumed = 0;
///         loop {
///             let rest = &input[consumed..];
///             let (record, terminator) = match rest.iter().position(|&byte| byte == b'\n') {
///                 Some(end) => (&rest[..end], 1),
///                 None if end_of_input && !rest.is_empty() => (rest, 0),
///                 None => return Ok(consumed),
///             };
///             self.seen += 1;
///             output.batch.push_value(record);
///             output.lines.push(self.seen);
///             consumed += record.len() + terminator;
///         }
///     }
///
///     fn target_columns(&self) -> Option<&[Column]> {
///         Some(&self.columns)
///     }
///
///     fn records_seen(&self) -> u64 {
///         self.seen
///     }
/// }
///
/// let columns = vec![Column::new("word", Kind::Text, "text")];
/// let mut lines = Lines { columns, seen: 0 };
/// let mut output = Decoded::default();
/// output.batch.reset(1);
/// // The second line is not complete yet: it stays with the caller.
/// assert_eq!(lines.decode(b"one\ntw", false, &mut output)?, 4);
/// assert_eq!(lines.decode(b"two", true, &mut output)?, 3);
/// assert_eq!(output.batch.row(1).get(0), Some(&b"two"[..]));
/// assert_eq!((output.lines, lines.records_seen()), (vec![1, 2], 2));
/// # Ok::<(), Error>(())
/// ```
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
