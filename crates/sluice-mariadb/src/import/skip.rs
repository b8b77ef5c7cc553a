//! Skip mode (`OnError::Skip`): rows in chunks under savepoints; a refused
//! chunk is rolled back to its savepoint, the rows its warnings or error
//! name are rejected (or, when no row is named, the chunk is halved until
//! the refused row stands alone) and the rest is sent again.

use sluice_core::load::{ImportOptions, ImportSummary, RejectSink, RowFeed};
use sluice_core::{Decoded, Error, ErrorKind, Rejected};

use super::insert::insert_segment;
use super::load_data::load_segment;
use super::plan::Plan;
use super::warnings::reason_of;
use crate::connection::Connection;

/// How a chunk of rows travels.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Path {
    Load,
    Insert,
}

/// Chunks under savepoints; refused rows rejected, the rest sent again.
/// `input` is the feed, the rows read from it already, and whether it has more.
pub(super) async fn load_skipping(
    connection: &mut Connection,
    plan: &Plan,
    (input, decoded, mut more): (&mut dyn RowFeed, &mut Decoded, bool),
    options: &ImportOptions,
    rejects: &mut RejectSink<'_>,
    path: Path,
) -> Result<ImportSummary, Error> {
    let mut summary = ImportSummary::default();
    loop {
        for rejected in decoded.rejected.drain(..) {
            rejects(&rejected)?;
        }
        if decoded.batch.num_rows() >= options.chunk_rows.max(1) || !more {
            let (accepted, written) = send_chunk(connection, plan, decoded, rejects, path).await?;
            input.progress().add_rows(accepted);
            summary.accepted += accepted;
            summary.written += written;
            decoded.clear();
        }
        if !more {
            return Ok(summary);
        }
        more = input.next(decoded).await?;
    }
}

/// Sends the rows of `decoded` under savepoints, rejecting each row the
/// server refuses: rows accepted and rows written.
async fn send_chunk(
    connection: &mut Connection,
    plan: &Plan,
    decoded: &Decoded,
    rejects: &mut RejectSink<'_>,
    path: Path,
) -> Result<(u64, u64), Error> {
    let (mut accepted, mut written) = (0, 0);
    let mut pending: Vec<Vec<usize>> = vec![(0..decoded.batch.num_rows()).collect()];
    while let Some(segment) = pending.pop() {
        if segment.is_empty() {
            continue;
        }
        connection.queue_setting("SAVEPOINT sluice_chunk");
        let attempt = match path {
            Path::Load => load_segment(connection, plan, &decoded.batch, &segment).await,
            Path::Insert => insert_segment(connection, plan, &decoded.batch, &segment).await,
        };
        match attempt {
            Ok(rows_written) => {
                connection.queue_setting("RELEASE SAVEPOINT sluice_chunk");
                accepted += segment.len() as u64;
                written += rows_written;
            }
            Err(error) if error.kind() == ErrorKind::Database => {
                connection
                    .simple_query("ROLLBACK TO SAVEPOINT sluice_chunk")
                    .await?;
                let refused = refused_rows(&error, segment.len());
                if refused.is_empty() && segment.len() > 1 {
                    // The server cannot say which row: halve until it is one.
                    let half = segment.len() / 2;
                    pending.push(segment[half..].to_vec());
                    pending.push(segment[..half].to_vec());
                    continue;
                }
                let refused = if refused.is_empty() { vec![0] } else { refused };
                for &index in &refused {
                    let row = segment[index];
                    rejects(&Rejected {
                        error: reason_of(&error, decoded.lines[row]),
                        record: decoded.records.get(row).cloned().unwrap_or_default(),
                    })?;
                }
                let rest = segment
                    .iter()
                    .enumerate()
                    .filter(|(index, _)| !refused.contains(index))
                    .map(|(_, &row)| row)
                    .collect();
                pending.push(rest);
            }
            Err(error) => return Err(error),
        }
    }
    // The last RELEASE travels with the next command.
    Ok((accepted, written))
}

/// The rows (0-based within the segment) an error names, from the server's
/// "at row N" (1-based within the statement).
fn refused_rows(error: &Error, segment_rows: usize) -> Vec<usize> {
    let mut rows: Vec<usize> = error
        .as_row_error()
        .map(|row| row.line)
        .into_iter()
        .chain(row_numbers_in(error))
        .filter_map(|row| usize::try_from(row).ok()?.checked_sub(1))
        .filter(|&index| index < segment_rows)
        .collect();
    rows.sort_unstable();
    rows.dedup();
    rows
}

fn row_numbers_in(error: &Error) -> Vec<u64> {
    error
        .as_db_error()
        .and_then(|db| db.detail.as_deref())
        .map(|detail| {
            detail
                .split(',')
                .filter_map(|row| row.trim().parse().ok())
                .collect()
        })
        .unwrap_or_default()
}
