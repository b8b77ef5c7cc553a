//! [`pump`]: drive a [`BatchSource`] through an [`Encoder`] into a writer in bounded memory.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::source::Chunk;
use crate::{BatchSource, Encoder, Error};

/// Output is written once this much is encoded: large enough that per-write costs
/// vanish, small enough to stay in cache and keep memory flat.
pub const FLUSH_BYTES: usize = 64 * 1024;

/// Smaller amounts are written anyway once they have waited this long, so a slow
/// query still shows its first rows promptly (and `| head` sees them).
pub const FLUSH_INTERVAL: Duration = Duration::from_millis(50);

/// Live counters for progress displays, updated after every batch.
#[derive(Debug, Default)]
pub struct Progress {
    rows: AtomicU64,
    bytes: AtomicU64,
}

impl Progress {
    /// Counters at zero.
    pub fn new() -> Progress {
        Progress::default()
    }

    /// Rows encoded so far.
    pub fn rows(&self) -> u64 {
        self.rows.load(Ordering::Relaxed)
    }

    /// Output bytes written so far (for imports: input bytes read).
    pub fn bytes(&self) -> u64 {
        self.bytes.load(Ordering::Relaxed)
    }

    /// Counts `rows` more rows.
    pub fn add_rows(&self, rows: u64) {
        self.rows.fetch_add(rows, Ordering::Relaxed);
    }

    /// Counts `bytes` more bytes.
    pub fn add_bytes(&self, bytes: u64) {
        self.bytes.fetch_add(bytes, Ordering::Relaxed);
    }
}

/// What a completed [`pump`] moved.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PumpSummary {
    /// Rows encoded.
    pub rows: u64,
    /// Output bytes written.
    pub bytes: u64,
}

/// Reads every batch of `source`, encodes it with `encoder` and writes the bytes to
/// `writer`, flushing every [`FLUSH_BYTES`] or [`FLUSH_INTERVAL`]. Memory is one batch
/// plus one output buffer, whatever the row count. A failed write is reported as
/// [`crate::ErrorKind::OutputClosed`] when the reader went away, so callers can stop
/// quietly and cancel the query.
pub async fn pump<S, E, W>(
    source: &mut S,
    encoder: &mut E,
    writer: &mut W,
    progress: &Progress,
) -> Result<PumpSummary, Error>
where
    S: BatchSource,
    E: Encoder,
    W: AsyncWrite + Unpin + Send,
{
    let mut output = Vec::with_capacity(FLUSH_BYTES * 2);
    let mut summary = PumpSummary::default();
    encoder.begin(source.schema(), &mut output)?;
    let mut last_flush = Instant::now();
    while let Some(chunk) = source.next_chunk().await? {
        match chunk {
            Chunk::Rows(batch) => {
                encoder.encode(batch, &mut output)?;
                summary.rows += batch.num_rows() as u64;
                progress
                    .rows
                    .fetch_add(batch.num_rows() as u64, Ordering::Relaxed);
            }
            Chunk::RowStart => encoder.begin_row(&mut output)?,
            Chunk::Value { column, value } => encoder.row_value(column, value, &mut output)?,
            Chunk::ValueStart { column } => encoder.begin_value(column, &mut output)?,
            Chunk::Piece { column, bytes } => encoder.value_piece(column, bytes, &mut output)?,
            Chunk::ValueEnd { column } => encoder.end_value(column, &mut output)?,
            Chunk::RowEnd => {
                encoder.end_row(&mut output)?;
                summary.rows += 1;
                progress.rows.fetch_add(1, Ordering::Relaxed);
            }
        }
        if output.len() >= FLUSH_BYTES || last_flush.elapsed() >= FLUSH_INTERVAL {
            summary.bytes += write_out(writer, &mut output, progress).await?;
            last_flush = Instant::now();
        }
    }
    encoder.finish(&mut output)?;
    summary.bytes += write_out(writer, &mut output, progress).await?;
    writer.flush().await.map_err(Error::output)?;
    Ok(summary)
}

async fn write_out<W: AsyncWrite + Unpin>(
    writer: &mut W,
    output: &mut Vec<u8>,
    progress: &Progress,
) -> Result<u64, Error> {
    if output.is_empty() {
        return Ok(0);
    }
    writer.write_all(output).await.map_err(Error::output)?;
    let written = output.len() as u64;
    progress.bytes.fetch_add(written, Ordering::Relaxed);
    output.clear();
    Ok(written)
}
