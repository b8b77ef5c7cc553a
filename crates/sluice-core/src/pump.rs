//! [`pump`]: the [`Transfer`] engine driven into an `AsyncWrite` (a file, a pipe,
//! standard output), with live [`Progress`] for displays.

use std::sync::atomic::{AtomicU64, Ordering};

use tokio::io::{AsyncWrite, AsyncWriteExt};

use crate::transfer::{Transfer, FLUSH_BYTES};
use crate::{BatchSource, Encoder, Error};

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
/// `writer` in the pieces [`Transfer`] hands out ([`crate::transfer::FLUSH_BYTES`]
/// or [`crate::transfer::FLUSH_INTERVAL`]). Memory is one batch plus one output
/// buffer, whatever the row count. A failed write is reported as
/// [`crate::ErrorKind::OutputClosed`] when the reader went away, so callers can
/// stop quietly and cancel the query.
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
    let mut transfer = Transfer::new(source, encoder);
    let mut output = Vec::with_capacity(FLUSH_BYTES * 2);
    let mut rows_reported = 0;
    loop {
        let more = transfer.fill(&mut output).await?;
        progress.add_rows(transfer.rows() - rows_reported);
        rows_reported = transfer.rows();
        if !output.is_empty() {
            writer.write_all(&output).await.map_err(Error::output)?;
            progress.add_bytes(output.len() as u64);
            output.clear();
        }
        if !more {
            break;
        }
    }
    writer.flush().await.map_err(Error::output)?;
    Ok(PumpSummary {
        rows: transfer.rows(),
        bytes: transfer.bytes(),
    })
}
