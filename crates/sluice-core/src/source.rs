//! The two traits that meet at a [`Batch`]: databases implement [`BatchSource`],
//! formats implement [`Encoder`].

use std::future::Future;

use crate::{Batch, Error, Schema};

/// A result being read from a database, one [`Batch`] at a time.
///
/// The source owns the batch it lends out and reuses it for the next call, so
/// memory stays at one batch however many rows flow through.
pub trait BatchSource: Send {
    /// The columns of the result, known before the first batch.
    fn schema(&self) -> &Schema;

    /// The next rows, or `None` once the result is complete. A batch holds whatever
    /// arrived together (it is never empty); awaiting the next call is what applies
    /// back-pressure to the database.
    fn next_batch(&mut self) -> impl Future<Output = Result<Option<&Batch>, Error>> + Send;
}

/// Turns batches into bytes of one output format.
///
/// Encoders append to a caller-owned buffer and never do I/O, so the same encoder
/// serves files, pipes and HTTP bodies; the caller decides when to flush.
pub trait Encoder: Send {
    /// Writes whatever precedes the rows (a CSV header, a JSON `[`).
    fn begin(&mut self, schema: &Schema, output: &mut Vec<u8>) -> Result<(), Error>;

    /// Appends the rows of `batch`.
    fn encode(&mut self, batch: &Batch, output: &mut Vec<u8>) -> Result<(), Error>;

    /// Writes whatever follows the rows (a JSON `]`). Must be called exactly once, last.
    fn finish(&mut self, output: &mut Vec<u8>) -> Result<(), Error>;
}

impl<E: Encoder + ?Sized> Encoder for Box<E> {
    fn begin(&mut self, schema: &Schema, output: &mut Vec<u8>) -> Result<(), Error> {
        (**self).begin(schema, output)
    }

    fn encode(&mut self, batch: &Batch, output: &mut Vec<u8>) -> Result<(), Error> {
        (**self).encode(batch, output)
    }

    fn finish(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
        (**self).finish(output)
    }
}
