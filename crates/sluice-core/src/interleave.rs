//! The parts of a split read ([`crate::split`]) read at once and handed on as
//! one source, so that one encoder writes one output from all of them
//! (`sluice export --jobs`): each part is read by a task of its own, which
//! decodes its rows in parallel with the others, and [`Interleaved`] hands on
//! whole batches in the order they arrive. Rows keep no order across parts.
//!
//! A row too large to hold arrives in chunks (see [`Chunk`]); a part sending
//! one holds the turn until its last chunk is sent, so the chunks of one row
//! are never mixed with another part's. Memory is the channel's few batches
//! plus each part's own.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use tokio::sync::{mpsc, Mutex};
use tokio::task::JoinSet;

use crate::connect::Export;
use crate::source::BatchSource;
use crate::{Batch, Chunk, Error, Schema};

/// Batches waiting for the encoder, per part.
const QUEUED_PER_PART: usize = 2;

/// A chunk copied out of its part, to cross to the encoder's task.
#[derive(Debug)]
enum Owned {
    Rows(Batch),
    RowStart,
    Value {
        column: usize,
        value: Option<Vec<u8>>,
    },
    ValueStart {
        column: usize,
    },
    Piece {
        column: usize,
        bytes: Vec<u8>,
    },
    ValueEnd {
        column: usize,
    },
    RowEnd,
}

impl Owned {
    fn of(chunk: Chunk<'_>) -> Owned {
        match chunk {
            Chunk::Rows(batch) => Owned::Rows(batch.clone()),
            Chunk::RowStart => Owned::RowStart,
            Chunk::Value { column, value } => Owned::Value {
                column,
                value: value.map(<[u8]>::to_vec),
            },
            Chunk::ValueStart { column } => Owned::ValueStart { column },
            Chunk::Piece { column, bytes } => Owned::Piece {
                column,
                bytes: bytes.to_vec(),
            },
            Chunk::ValueEnd { column } => Owned::ValueEnd { column },
            Chunk::RowEnd => Owned::RowEnd,
        }
    }

    fn chunk(&self) -> Chunk<'_> {
        match self {
            Owned::Rows(batch) => Chunk::Rows(batch),
            Owned::RowStart => Chunk::RowStart,
            Owned::Value { column, value } => Chunk::Value {
                column: *column,
                value: value.as_deref(),
            },
            Owned::ValueStart { column } => Chunk::ValueStart { column: *column },
            Owned::Piece { column, bytes } => Chunk::Piece {
                column: *column,
                bytes,
            },
            Owned::ValueEnd { column } => Chunk::ValueEnd { column: *column },
            Owned::RowEnd => Chunk::RowEnd,
        }
    }
}

/// What a part's task sends: a chunk and the part it came from.
type Sent = Result<(usize, Owned), Error>;

/// Several exports of one schema as one [`BatchSource`].
pub struct Interleaved {
    schema: Schema,
    receiver: mpsc::Receiver<Sent>,
    /// The chunk lent out by the last call.
    held: Option<Owned>,
    /// Each part's task; it gives its export back when its rows are read.
    tasks: JoinSet<(usize, Box<dyn Export>)>,
    /// Rows handed on from each part.
    rows: Vec<u64>,
    /// Parts still reading.
    running: Arc<AtomicUsize>,
}

impl Interleaved {
    /// Starts reading every part. They must all have the first's schema
    /// (the parts of one split read do).
    pub fn start(parts: Vec<Box<dyn Export>>) -> Interleaved {
        let schema = parts
            .first()
            .map(|part| part.schema().clone())
            .unwrap_or_default();
        let (sender, receiver) = mpsc::channel(QUEUED_PER_PART * parts.len().max(1));
        let turn = Arc::new(Mutex::new(()));
        let mut tasks = JoinSet::new();
        let count = parts.len();
        let running = Arc::new(AtomicUsize::new(count));
        for (index, part) in parts.into_iter().enumerate() {
            let running = running.clone();
            let read = read_part(index, part, sender.clone(), turn.clone());
            tasks.spawn(async move {
                let ended = read.await;
                running.fetch_sub(1, Ordering::Relaxed);
                ended
            });
        }
        Interleaved {
            schema,
            receiver,
            held: None,
            tasks,
            rows: vec![0; count],
            running,
        }
    }

    /// How many parts are still reading (for a progress line), shared.
    pub fn running(&self) -> Arc<AtomicUsize> {
        self.running.clone()
    }

    /// Rows handed on so far from each part, in part order.
    pub fn rows_per_part(&self) -> &[u64] {
        &self.rows
    }

    /// After the last row: ends every part's session cleanly.
    pub async fn close(mut self) {
        while let Some(joined) = self.tasks.join_next().await {
            if let Ok((_, export)) = joined {
                export.close().await;
            }
        }
    }

    async fn next(&mut self) -> Result<Option<Chunk<'_>>, Error> {
        self.held = None;
        match self.receiver.recv().await {
            None => Ok(None),
            Some(Err(error)) => Err(error),
            Some(Ok((part, owned))) => {
                if let Owned::Rows(batch) = &owned {
                    self.rows[part] += batch.num_rows() as u64;
                }
                Ok(Some(self.held.insert(owned).chunk()))
            }
        }
    }
}

/// Reads one part to its end, sending each chunk (a large row's chunks under
/// one turn); its first error is sent and ends it.
async fn read_part(
    index: usize,
    mut part: Box<dyn Export>,
    sender: mpsc::Sender<Sent>,
    turn: Arc<Mutex<()>>,
) -> (usize, Box<dyn Export>) {
    let mut held_turn = None;
    loop {
        let owned = match part.next_chunk().await {
            Ok(Some(chunk)) => Owned::of(chunk),
            Ok(None) => break,
            Err(error) => {
                let _ = sender.send(Err(error)).await;
                break;
            }
        };
        let guard = match held_turn.take() {
            Some(guard) => guard,
            None => turn.clone().lock_owned().await,
        };
        // A large row's chunks go under one turn, from its start to its end.
        let keeps_turn = !matches!(owned, Owned::Rows(_) | Owned::RowEnd);
        if sender.send(Ok((index, owned))).await.is_err() {
            // The reader has gone: nothing more is wanted.
            break;
        }
        if keeps_turn {
            held_turn = Some(guard);
        }
    }
    (index, part)
}

impl BatchSource for Interleaved {
    fn schema(&self) -> &Schema {
        &self.schema
    }

    async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
        match self.next().await? {
            Some(Chunk::Rows(batch)) => Ok(Some(batch)),
            Some(_) => Err(Error::protocol(
                "a part handed over a row in pieces to a reader of whole batches",
            )),
            None => Ok(None),
        }
    }

    async fn next_chunk(&mut self) -> Result<Option<Chunk<'_>>, Error> {
        self.next().await
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::database::Query;
    use crate::{Column, Kind};

    /// A part of `rows` rows in batches of `per_batch`, numbered from `first`.
    struct Numbers {
        schema: Schema,
        next: u64,
        end: u64,
        per_batch: u64,
        batch: Batch,
    }

    impl BatchSource for Numbers {
        fn schema(&self) -> &Schema {
            &self.schema
        }

        async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
            if self.next >= self.end {
                return Ok(None);
            }
            self.batch.clear();
            let until = (self.next + self.per_batch).min(self.end);
            for value in self.next..until {
                self.batch.push_value(value.to_string().as_bytes());
            }
            self.next = until;
            tokio::task::yield_now().await;
            Ok(Some(&self.batch))
        }
    }

    fn part(first: u64, rows: u64) -> Box<dyn Export> {
        let source = Numbers {
            schema: Schema {
                columns: vec![Column::new("n", Kind::Integer, "int8")],
            },
            next: first,
            end: first + rows,
            per_batch: 7,
            batch: Batch::new(1),
        };
        Query::export(source, |_| Box::pin(async {}))
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn every_row_of_every_part_is_handed_on_once() {
        let mut merged = Interleaved::start(vec![part(0, 100), part(100, 250), part(350, 0)]);
        assert_eq!(merged.schema().columns[0].name, "n");
        let mut seen = Vec::new();
        while let Some(batch) = merged.next_batch().await.unwrap() {
            for row in 0..batch.num_rows() {
                let text = std::str::from_utf8(batch.row(row).get(0).unwrap()).unwrap();
                seen.push(text.parse::<u64>().unwrap());
            }
        }
        assert_eq!(merged.rows_per_part(), [100, 250, 0]);
        seen.sort_unstable();
        assert_eq!(seen, (0..350).collect::<Vec<_>>());
        merged.close().await;
    }
}
