//! [`Transfer`]: the one streaming engine. It pulls from a [`BatchSource`], pushes
//! through an [`Encoder`] and hands out output in pieces worth writing, within
//! row and byte limits. The CLI's [`crate::pump()`] writes those pieces to a file or
//! pipe; the HTTP gateway sends each as a chunk of the response body; any later
//! driver (a copy between databases, a Python iterator) does the same, so rows too
//! large to hold, limits and flushing behave alike everywhere.
//!
//! The engine is pulled, never pushed: nothing is read from the source until the
//! driver asks for the next piece, so a slow reader slows the database cursor and
//! memory stays at one batch plus one piece of output.

use std::fmt;
use std::time::{Duration, Instant};

use crate::source::Chunk;
use crate::{BatchSource, Encoder, Error};

/// A piece of output is handed out once this much is encoded: large enough that
/// per-write costs vanish, small enough to stay in cache and keep memory flat.
pub const FLUSH_BYTES: usize = 64 * 1024;

/// Smaller amounts are handed out anyway once they have waited this long, so a
/// slow query still shows its first rows promptly (and `| head` sees them).
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(50);

/// Limits a transfer stops at. Both default to none.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Limits {
    /// The most rows the result may have.
    pub max_rows: Option<u64>,
    /// The most output bytes the result may take.
    pub max_bytes: Option<u64>,
}

/// Why a transfer stopped before its end. Each variant keeps its cause
/// separate, because callers word and classify them differently (a database
/// error is the client's problem or the database's; an encoder error is a bug or
/// a value the format cannot hold; a limit is the configuration's).
#[derive(Debug)]
#[non_exhaustive]
pub enum TransferError {
    /// The source failed: the database said so, or the connection broke.
    Source(Error),
    /// The encoder refused a value.
    Encode(Error),
    /// The result has more rows than [`Limits::max_rows`] (the limit is given).
    TooManyRows(u64),
    /// The output is larger than [`Limits::max_bytes`] (the limit is given).
    TooManyBytes(u64),
}

impl fmt::Display for TransferError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TransferError::Source(error) | TransferError::Encode(error) => error.fmt(f),
            TransferError::TooManyRows(max) => write!(f, "the result has more than {max} rows"),
            TransferError::TooManyBytes(max) => {
                write!(f, "the output is larger than {max} bytes")
            }
        }
    }
}

impl std::error::Error for TransferError {}

impl From<TransferError> for Error {
    /// The error of a transfer without limits (a limit becomes a `Data` error).
    fn from(error: TransferError) -> Error {
        match error {
            TransferError::Source(error) | TransferError::Encode(error) => error,
            limit => Error::new(crate::ErrorKind::Data, limit.to_string()),
        }
    }
}

/// Where a transfer is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// `Encoder::begin` has not run yet.
    New,
    /// Rows are flowing.
    Streaming,
    /// The encoder has finished; the last piece may still be in the buffer.
    Finished,
}

/// One result on its way from a source through an encoder.
///
/// Call [`Transfer::fill`] until it returns `false`; each call appends one piece
/// of output to the caller's buffer. After a `TransferError` the transfer is
/// over; the source may still be running a query the caller should cancel.
/// `fill` is not cancel-safe: a driver that abandons a call (a shutdown) must
/// abandon the transfer too.
pub struct Transfer<S, E> {
    source: S,
    encoder: E,
    limits: Limits,
    rows: u64,
    bytes: u64,
    state: State,
}

impl<S: BatchSource, E: Encoder> Transfer<S, E> {
    /// A transfer of `source` through `encoder`, with no limits.
    pub fn new(source: S, encoder: E) -> Transfer<S, E> {
        Transfer {
            source,
            encoder,
            limits: Limits::default(),
            rows: 0,
            bytes: 0,
            state: State::New,
        }
    }

    /// Stops the transfer at these limits.
    pub fn with_limits(mut self, limits: Limits) -> Transfer<S, E> {
        self.limits = limits;
        self
    }

    /// Rows encoded so far.
    pub fn rows(&self) -> u64 {
        self.rows
    }

    /// Output bytes produced so far.
    pub fn bytes(&self) -> u64 {
        self.bytes
    }

    /// True once the result was read to its end and the encoder finished.
    pub fn is_complete(&self) -> bool {
        self.state == State::Finished
    }

    /// The source, e.g. to read its round trips.
    pub fn source(&self) -> &S {
        &self.source
    }

    /// Ends the transfer and gives the source back (to return its connection to a
    /// pool, or to cancel its query).
    pub fn into_source(self) -> S {
        self.source
    }

    /// Appends the next piece of output to `output`: encodes until
    /// [`FLUSH_BYTES`] are there, [`FLUSH_INTERVAL`] has passed, or the result
    /// ends. Returns `false` once the end has been appended (the encoder's
    /// closing bytes included); later calls append nothing.
    pub async fn fill(&mut self, output: &mut Vec<u8>) -> Result<bool, TransferError> {
        let started = Instant::now();
        let length_before = output.len();
        if self.state == State::New {
            self.encoder
                .begin(self.source.schema(), output)
                .map_err(TransferError::Encode)?;
            self.state = State::Streaming;
            self.count_bytes(output.len() - length_before)?;
        }
        while self.state == State::Streaming {
            let length = output.len();
            self.step(output).await?;
            self.count_bytes(output.len() - length)?;
            if output.len() - length_before >= FLUSH_BYTES || started.elapsed() >= FLUSH_INTERVAL {
                break;
            }
        }
        Ok(self.state == State::Streaming)
    }

    /// Takes the next chunk from the source and encodes it (or finishes).
    async fn step(&mut self, output: &mut Vec<u8>) -> Result<(), TransferError> {
        let encoder = &mut self.encoder;
        let chunk = self
            .source
            .next_chunk()
            .await
            .map_err(TransferError::Source)?;
        let encoded = match chunk {
            None => {
                self.state = State::Finished;
                encoder.finish(output)
            }
            Some(Chunk::Rows(batch)) => {
                let rows = batch.num_rows() as u64;
                check_rows(self.limits, self.rows + rows)?;
                self.rows += rows;
                encoder.encode(batch, output)
            }
            Some(Chunk::RowStart) => {
                check_rows(self.limits, self.rows + 1)?;
                encoder.begin_row(output)
            }
            Some(Chunk::Value { column, value }) => encoder.row_value(column, value, output),
            Some(Chunk::ValueStart { column }) => encoder.begin_value(column, output),
            Some(Chunk::Piece { column, bytes }) => encoder.value_piece(column, bytes, output),
            Some(Chunk::ValueEnd { column }) => encoder.end_value(column, output),
            Some(Chunk::RowEnd) => {
                self.rows += 1;
                encoder.end_row(output)
            }
        };
        encoded.map_err(TransferError::Encode)
    }

    fn count_bytes(&mut self, added: usize) -> Result<(), TransferError> {
        self.bytes += added as u64;
        match self.limits.max_bytes {
            Some(max) if self.bytes > max => Err(TransferError::TooManyBytes(max)),
            _ => Ok(()),
        }
    }
}

fn check_rows(limits: Limits, rows: u64) -> Result<(), TransferError> {
    match limits.max_rows {
        Some(max) if rows > max => Err(TransferError::TooManyRows(max)),
        _ => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Batch, Column, ErrorKind, Kind, Schema};

    /// Batches of one-column rows, then optionally one large row in pieces.
    struct Scripted {
        schema: Schema,
        batches: Vec<Batch>,
        next: usize,
        large_row: Vec<&'static [u8]>,
        large_step: usize,
        fail_at_end: bool,
    }

    fn scripted(batches: &[usize], large_row: Vec<&'static [u8]>) -> Scripted {
        let batches = batches
            .iter()
            .map(|&rows| {
                let mut batch = Batch::new(1);
                for row in 0..rows {
                    batch.push_value(format!("{row:09}").as_bytes());
                }
                batch
            })
            .collect();
        Scripted {
            schema: Schema {
                columns: vec![Column::new("value", Kind::Text, "text")],
            },
            batches,
            next: 0,
            large_row,
            large_step: 0,
            fail_at_end: false,
        }
    }

    impl BatchSource for Scripted {
        fn schema(&self) -> &Schema {
            &self.schema
        }

        async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
            unreachable!("the engine asks for chunks")
        }

        async fn next_chunk(&mut self) -> Result<Option<Chunk<'_>>, Error> {
            if self.next < self.batches.len() {
                self.next += 1;
                return Ok(Some(Chunk::Rows(&self.batches[self.next - 1])));
            }
            if self.large_row.is_empty() {
                return match self.fail_at_end {
                    true => Err(Error::new(ErrorKind::Closed, "the connection broke")),
                    false => Ok(None),
                };
            }
            let pieces = self.large_row.len();
            let step = self.large_step;
            self.large_step += 1;
            Ok(match step {
                0 => Some(Chunk::RowStart),
                1 => Some(Chunk::ValueStart { column: 0 }),
                step if step < pieces + 2 => Some(Chunk::Piece {
                    column: 0,
                    bytes: self.large_row[step - 2],
                }),
                step if step == pieces + 2 => Some(Chunk::ValueEnd { column: 0 }),
                step if step == pieces + 3 => Some(Chunk::RowEnd),
                _ => None,
            })
        }
    }

    /// One line per row; `[`/`]` around everything, so begin and finish count.
    struct Lines;

    impl Encoder for Lines {
        fn begin(&mut self, _: &Schema, output: &mut Vec<u8>) -> Result<(), Error> {
            output.push(b'[');
            Ok(())
        }
        fn encode(&mut self, batch: &Batch, output: &mut Vec<u8>) -> Result<(), Error> {
            for row in batch.rows() {
                output.extend_from_slice(row.get(0).unwrap_or(b"null"));
                output.push(b'\n');
            }
            Ok(())
        }
        fn finish(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
            output.push(b']');
            Ok(())
        }
        fn begin_row(&mut self, _: &mut Vec<u8>) -> Result<(), Error> {
            Ok(())
        }
        fn row_value(&mut self, _: usize, _: Option<&[u8]>, _: &mut Vec<u8>) -> Result<(), Error> {
            Ok(())
        }
        fn begin_value(&mut self, _: usize, _: &mut Vec<u8>) -> Result<(), Error> {
            Ok(())
        }
        fn value_piece(
            &mut self,
            _: usize,
            piece: &[u8],
            output: &mut Vec<u8>,
        ) -> Result<(), Error> {
            output.extend_from_slice(piece);
            Ok(())
        }
        fn end_value(&mut self, _: usize, _: &mut Vec<u8>) -> Result<(), Error> {
            Ok(())
        }
        fn end_row(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
            output.push(b'\n');
            Ok(())
        }
    }

    /// Every piece the transfer hands out, and how it ended.
    async fn drain<S: BatchSource>(
        transfer: &mut Transfer<S, Lines>,
    ) -> (Vec<Vec<u8>>, Result<(), TransferError>) {
        let mut pieces = Vec::new();
        loop {
            let mut output = Vec::new();
            let filled = transfer.fill(&mut output).await;
            pieces.push(output);
            match filled {
                Ok(true) => continue,
                Ok(false) => return (pieces, Ok(())),
                Err(error) => return (pieces, Err(error)),
            }
        }
    }

    #[tokio::test]
    async fn pieces_are_at_least_the_flush_size_and_hold_everything_in_order() {
        // 10-byte lines: 20,000 of them are about three pieces.
        let mut transfer = Transfer::new(scripted(&[5000; 4], Vec::new()), Lines);
        let (pieces, ended) = drain(&mut transfer).await;
        ended.unwrap();
        assert!(transfer.is_complete());
        assert_eq!(transfer.rows(), 20_000);
        let whole: Vec<u8> = pieces.concat();
        assert_eq!(whole.len() as u64, transfer.bytes());
        assert_eq!(whole.len(), 1 + 20_000 * 10 + 1);
        assert!(whole.starts_with(b"[000000000\n") && whole.ends_with(b"000004999\n]"));
        // Every piece but the last waited for a full flush (the source is instant).
        for piece in &pieces[..pieces.len() - 1] {
            assert!(piece.len() >= FLUSH_BYTES, "{}", piece.len());
        }
        assert!(!transfer.fill(&mut Vec::new()).await.unwrap());
    }

    #[tokio::test]
    async fn the_row_limit_stops_before_the_batch_that_would_pass_it() {
        let limits = Limits {
            max_rows: Some(7500),
            max_bytes: None,
        };
        let mut transfer =
            Transfer::new(scripted(&[5000, 5000], Vec::new()), Lines).with_limits(limits);
        let (pieces, ended) = drain(&mut transfer).await;
        assert!(
            matches!(ended, Err(TransferError::TooManyRows(7500))),
            "{ended:?}"
        );
        assert_eq!(transfer.rows(), 5000);
        assert_eq!(pieces.concat().len(), 1 + 5000 * 10);
        // Exactly at the limit is allowed.
        let limits = Limits {
            max_rows: Some(10_000),
            max_bytes: None,
        };
        let mut transfer =
            Transfer::new(scripted(&[5000, 5000], Vec::new()), Lines).with_limits(limits);
        drain(&mut transfer).await.1.unwrap();
    }

    #[tokio::test]
    async fn a_large_row_counts_once_against_the_row_limit_and_its_pieces_against_the_byte_limit() {
        let large: Vec<&'static [u8]> = vec![&[b'x'; 40_000], &[b'y'; 40_000]];
        let mut transfer = Transfer::new(scripted(&[3], large.clone()), Lines);
        let (pieces, ended) = drain(&mut transfer).await;
        ended.unwrap();
        assert_eq!(transfer.rows(), 4);
        assert_eq!(pieces.concat().len(), 1 + 30 + 80_000 + 1 + 1);

        let limits = Limits {
            max_rows: Some(3),
            max_bytes: None,
        };
        let mut transfer = Transfer::new(scripted(&[3], large.clone()), Lines).with_limits(limits);
        assert!(matches!(
            drain(&mut transfer).await.1,
            Err(TransferError::TooManyRows(3))
        ));

        let limits = Limits {
            max_rows: None,
            max_bytes: Some(50_000),
        };
        let mut transfer = Transfer::new(scripted(&[3], large), Lines).with_limits(limits);
        let (pieces, ended) = drain(&mut transfer).await;
        assert!(
            matches!(ended, Err(TransferError::TooManyBytes(50_000))),
            "{ended:?}"
        );
        // Stopped at the first piece that passed the limit, not at the end.
        assert!(pieces.concat().len() <= 1 + 30 + 40_000 + 40_000);
        assert!(transfer.bytes() > 50_000 && transfer.bytes() <= 1 + 30 + 80_000);
    }

    #[tokio::test]
    async fn the_byte_limit_counts_what_precedes_and_follows_the_rows() {
        let exact = 1 + 3 * 10 + 1;
        let limits = Limits {
            max_rows: None,
            max_bytes: Some(exact),
        };
        let mut transfer = Transfer::new(scripted(&[3], Vec::new()), Lines).with_limits(limits);
        drain(&mut transfer).await.1.unwrap();
        let limits = Limits {
            max_rows: None,
            max_bytes: Some(exact - 1),
        };
        let mut transfer = Transfer::new(scripted(&[3], Vec::new()), Lines).with_limits(limits);
        assert!(matches!(
            drain(&mut transfer).await.1,
            Err(TransferError::TooManyBytes(_))
        ));
    }

    #[tokio::test]
    async fn a_source_failure_is_told_apart_and_the_transfer_is_not_complete() {
        let mut source = scripted(&[10], Vec::new());
        source.fail_at_end = true;
        let mut transfer = Transfer::new(source, Lines);
        let (pieces, ended) = drain(&mut transfer).await;
        match ended {
            Err(TransferError::Source(error)) => assert_eq!(error.kind(), ErrorKind::Closed),
            other => panic!("{other:?}"),
        }
        assert!(!transfer.is_complete());
        // The rows before the failure were handed out, without the closing `]`.
        assert_eq!(pieces.concat().len(), 1 + 10 * 10);
    }
}
