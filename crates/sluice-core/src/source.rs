//! The two traits that meet at a [`Batch`]: databases implement [`BatchSource`],
//! formats implement [`Encoder`].
//!
//! A whole pipeline in one page: a source lending out batches of an in-memory
//! result, a format writing `name=value` lines, and [`crate::pump()`] driving
//! one into the other and into a writer, in bounded memory.
//!
//! ```
//! use sluice_core::{pump, Batch, BatchSource, Column, Encoder, Error, Kind, Progress, Schema};
//!
//! /// Hands out `rows` two at a time, reusing one batch.
//! struct Rows {
//!     schema: Schema,
//!     rows: std::vec::IntoIter<[Option<&'static str>; 2]>,
//!     batch: Batch,
//! }
//!
//! impl BatchSource for Rows {
//!     fn schema(&self) -> &Schema {
//!         &self.schema
//!     }
//!
//!     async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
//!         self.batch.clear();
//!         for row in self.rows.by_ref().take(2) {
//!             for value in row {
//!                 match value {
//!                     Some(value) => self.batch.push_value(value.as_bytes()),
//!                     None => self.batch.push_null(),
//!                 }
//!             }
//!         }
//!         Ok((!self.batch.is_empty()).then_some(&self.batch))
//!     }
//! }
//!
//! /// `name=value` pairs, one row a line; NULL is left out.
//! #[derive(Default)]
//! struct Pairs {
//!     names: Vec<String>,
//! }
//!
//! impl Encoder for Pairs {
//!     fn begin(&mut self, schema: &Schema, _output: &mut Vec<u8>) -> Result<(), Error> {
//!         self.names = schema.columns.iter().map(|column| column.name.clone()).collect();
//!         Ok(())
//!     }
//!
//!     fn encode(&mut self, batch: &Batch, output: &mut Vec<u8>) -> Result<(), Error> {
//!         for row in batch.rows() {
//!             self.begin_row(output)?;
//!             for column in 0..row.len() {
//!                 self.row_value(column, row.get(column), output)?;
//!             }
//!             self.end_row(output)?;
//!         }
//!         Ok(())
//!     }
//!
//!     fn finish(&mut self, _output: &mut Vec<u8>) -> Result<(), Error> {
//!         Ok(())
//!     }
//!
//!     fn begin_row(&mut self, _output: &mut Vec<u8>) -> Result<(), Error> {
//!         Ok(())
//!     }
//!
//!     fn row_value(&mut self, column: usize, value: Option<&[u8]>, output: &mut Vec<u8>) -> Result<(), Error> {
//!         if let Some(value) = value {
//!             self.begin_value(column, output)?;
//!             self.value_piece(column, value, output)?;
//!             self.end_value(column, output)?;
//!         }
//!         Ok(())
//!     }
//!
//!     fn begin_value(&mut self, column: usize, output: &mut Vec<u8>) -> Result<(), Error> {
//!         output.extend_from_slice(format!("{}=", self.names[column]).as_bytes());
//!         Ok(())
//!     }
//!
//!     fn value_piece(&mut self, _column: usize, piece: &[u8], output: &mut Vec<u8>) -> Result<(), Error> {
//!         output.extend_from_slice(piece);
//!         Ok(())
//!     }
//!
//!     fn end_value(&mut self, _column: usize, output: &mut Vec<u8>) -> Result<(), Error> {
//!         output.push(b' ');
//!         Ok(())
//!     }
//!
//!     fn end_row(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
//!         output.push(b'\n');
//!         Ok(())
//!     }
//! }
//!
//! # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
//! let mut source = Rows {
//!     schema: Schema {
//!         columns: vec![
//!             Column::new("id", Kind::Integer, "int8"),
//!             Column::new("note", Kind::Text, "text"),
//!         ],
//!     },
//!     rows: vec![[Some("1"), Some("a")], [Some("2"), None], [Some("3"), Some("c")]].into_iter(),
//!     batch: Batch::new(2),
//! };
//! let mut written = Vec::new();
//! let summary = pump(&mut source, &mut Pairs::default(), &mut written, &Progress::new()).await?;
//! assert_eq!(summary.rows, 3);
//! assert_eq!(String::from_utf8(written).unwrap(), "id=1 note=a \nid=2 \nid=3 note=c \n");
//! # Ok::<(), Error>(())
//! # }).unwrap();
//! ```

use std::future::Future;

use crate::future::BoxFuture;
use crate::{Batch, Error, Schema};

/// What a source hands over next: a batch of rows, or a part of one row too
/// large to hold in memory, whose values arrive one at a time and the largest in
/// pieces (a 900 MB `bytea` streams through in bounded memory).
#[derive(Debug)]
pub enum Chunk<'a> {
    /// Complete rows.
    Rows(&'a Batch),
    /// A large row begins.
    RowStart,
    /// A whole value of the current large row (`None` is NULL).
    Value {
        /// Column index.
        column: usize,
        /// The canonical bytes.
        value: Option<&'a [u8]>,
    },
    /// A value given in pieces begins.
    ValueStart {
        /// Column index.
        column: usize,
    },
    /// The next piece of the value begun.
    Piece {
        /// Column index.
        column: usize,
        /// The bytes, in order.
        bytes: &'a [u8],
    },
    /// The value given in pieces is complete.
    ValueEnd {
        /// Column index.
        column: usize,
    },
    /// The large row is complete.
    RowEnd,
}

/// A result being read from a database, one [`Batch`] at a time.
///
/// The source owns the batch it lends out and reuses it for the next call, so
/// memory stays at one batch however many rows flow through.
///
/// The smallest source: its schema, and its rows in one batch (a database's
/// source fills the batch from what the server sent, and awaits the next
/// message when it is read):
///
/// ```
/// use sluice_core::{Batch, BatchSource, Column, Error, Kind, Schema};
///
/// /// The numbers 1 to 3, then the end.
/// struct Numbers {
///     schema: Schema,
///     batch: Batch,
///     sent: bool,
/// }
///
/// impl BatchSource for Numbers {
///     fn schema(&self) -> &Schema {
///         &self.schema
///     }
///
///     async fn next_batch(&mut self) -> Result<Option<&Batch>, Error> {
///         if std::mem::replace(&mut self.sent, true) {
///             return Ok(None);
///         }
///         for number in [b"1", b"2", b"3"] {
///             self.batch.push_value(number);
///         }
///         Ok(Some(&self.batch))
///     }
/// }
///
/// let schema = Schema { columns: vec![Column::new("n", Kind::Integer, "int")] };
/// let mut numbers = Numbers { schema, batch: Batch::new(1), sent: false };
/// # tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(async {
/// let batch = numbers.next_batch().await?.expect("one batch");
/// assert_eq!(batch.num_rows(), 3);
/// assert_eq!(batch.row(2).get(0), Some(&b"3"[..]));
/// assert!(numbers.next_batch().await?.is_none());
/// # Ok::<(), Error>(())
/// # }).unwrap();
/// ```
pub trait BatchSource: Send {
    /// The columns of the result, known before the first batch.
    fn schema(&self) -> &Schema;

    /// The next rows, or `None` once the result is complete. A batch holds whatever
    /// arrived together (it is never empty); awaiting the next call is what applies
    /// back-pressure to the database.
    fn next_batch(&mut self) -> impl Future<Output = Result<Option<&Batch>, Error>> + Send;

    /// The next [`Chunk`], or `None` at the end. Sources that can meet rows too
    /// large to hold override this to hand them over in pieces; by default it
    /// hands over whole batches.
    fn next_chunk(&mut self) -> impl Future<Output = Result<Option<Chunk<'_>>, Error>> + Send {
        async move { Ok(self.next_batch().await?.map(Chunk::Rows)) }
    }
}

/// Turns batches into bytes of one output format.
///
/// Encoders append to a caller-owned buffer and never do I/O, so the same encoder
/// serves files, pipes and HTTP bodies; the caller decides when to flush.
///
/// The smallest encoder: every call written out. A row too large to hold
/// comes value by value, and a value too large in pieces, so an encoder
/// that writes as it goes needs no buffer of its own:
///
/// ```
/// use sluice_core::{Batch, Column, Encoder, Error, Kind, Schema};
///
/// /// One line per row, its values between tabs; NULL is `\N`.
/// struct Tabs;
///
/// impl Encoder for Tabs {
///     fn begin(&mut self, _schema: &Schema, _output: &mut Vec<u8>) -> Result<(), Error> {
///         Ok(())
///     }
///
///     fn encode(&mut self, batch: &Batch, output: &mut Vec<u8>) -> Result<(), Error> {
///         for row in batch.rows() {
///             self.begin_row(output)?;
///             for column in 0..row.len() {
///                 self.row_value(column, row.get(column), output)?;
///             }
///             self.end_row(output)?;
///         }
///         Ok(())
///     }
///
///     fn finish(&mut self, _output: &mut Vec<u8>) -> Result<(), Error> {
///         Ok(())
///     }
///
///     fn begin_row(&mut self, _output: &mut Vec<u8>) -> Result<(), Error> {
///         Ok(())
///     }
///
///     fn row_value(
///         &mut self,
///         column: usize,
///         value: Option<&[u8]>,
///         output: &mut Vec<u8>,
///     ) -> Result<(), Error> {
///         self.begin_value(column, output)?;
///         self.value_piece(column, value.unwrap_or(&b"\\N"[..]), output)?;
///         self.end_value(column, output)
///     }
///
///     fn begin_value(&mut self, column: usize, output: &mut Vec<u8>) -> Result<(), Error> {
///         if column > 0 {
///             output.push(b'\t');
///         }
///         Ok(())
///     }
///
///     fn value_piece(
///         &mut self,
///         _column: usize,
///         piece: &[u8],
///         output: &mut Vec<u8>,
///     ) -> Result<(), Error> {
///         output.extend_from_slice(piece);
///         Ok(())
///     }
///
///     fn end_value(&mut self, _column: usize, _output: &mut Vec<u8>) -> Result<(), Error> {
///         Ok(())
///     }
///
///     fn end_row(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
///         output.push(b'\n');
///         Ok(())
///     }
/// }
///
/// let schema = Schema {
///     columns: vec![
///         Column::new("id", Kind::Integer, "int"),
///         Column::new("note", Kind::Text, "text"),
///     ],
/// };
/// let mut batch = Batch::new(2);
/// batch.push_value(b"1");
/// batch.push_null();
/// let mut output = Vec::new();
/// Tabs.begin(&schema, &mut output)?;
/// Tabs.encode(&batch, &mut output)?;
/// // A large row: its one large value arrives in two pieces.
/// Tabs.begin_row(&mut output)?;
/// Tabs.row_value(0, Some(b"2"), &mut output)?;
/// Tabs.begin_value(1, &mut output)?;
/// Tabs.value_piece(1, b"lo", &mut output)?;
/// Tabs.value_piece(1, b"ng", &mut output)?;
/// Tabs.end_value(1, &mut output)?;
/// Tabs.end_row(&mut output)?;
/// Tabs.finish(&mut output)?;
/// assert_eq!(output, b"1\t\\N\n2\tlong\n");
/// # Ok::<(), Error>(())
/// ```
pub trait Encoder: Send {
    /// Writes whatever precedes the rows (a CSV header, a JSON `[`).
    fn begin(&mut self, schema: &Schema, output: &mut Vec<u8>) -> Result<(), Error>;

    /// Appends the rows of `batch`.
    fn encode(&mut self, batch: &Batch, output: &mut Vec<u8>) -> Result<(), Error>;

    /// Writes whatever follows the rows (a JSON `]`). Must be called exactly once, last.
    fn finish(&mut self, output: &mut Vec<u8>) -> Result<(), Error>;

    /// Starts a row too large to hold, whose values follow one by one, in column order.
    fn begin_row(&mut self, output: &mut Vec<u8>) -> Result<(), Error>;

    /// A whole value of the current large row.
    fn row_value(
        &mut self,
        column: usize,
        value: Option<&[u8]>,
        output: &mut Vec<u8>,
    ) -> Result<(), Error>;

    /// Starts a value of the current large row that arrives in pieces.
    fn begin_value(&mut self, column: usize, output: &mut Vec<u8>) -> Result<(), Error>;

    /// The next piece of the value begun.
    fn value_piece(
        &mut self,
        column: usize,
        piece: &[u8],
        output: &mut Vec<u8>,
    ) -> Result<(), Error>;

    /// Ends the value begun.
    fn end_value(&mut self, column: usize, output: &mut Vec<u8>) -> Result<(), Error>;

    /// Ends the large row.
    fn end_row(&mut self, output: &mut Vec<u8>) -> Result<(), Error>;
}

impl<S: BatchSource + ?Sized> BatchSource for &mut S {
    fn schema(&self) -> &Schema {
        (**self).schema()
    }

    fn next_batch(&mut self) -> impl Future<Output = Result<Option<&Batch>, Error>> + Send {
        (**self).next_batch()
    }

    fn next_chunk(&mut self) -> impl Future<Output = Result<Option<Chunk<'_>>, Error>> + Send {
        (**self).next_chunk()
    }
}

/// A [`BatchSource`] that can be a trait object (its futures boxed), the base
/// of the query results databases hand out (`Export`, `RunningQuery`).
pub trait DynSource: Send {
    /// See [`BatchSource::schema`].
    fn schema(&self) -> &Schema;

    /// See [`BatchSource::next_batch`].
    fn next_batch(&mut self) -> BoxFuture<'_, Result<Option<&Batch>, Error>>;

    /// See [`BatchSource::next_chunk`].
    fn next_chunk(&mut self) -> BoxFuture<'_, Result<Option<Chunk<'_>>, Error>>;
}

/// A boxed result is a [`BatchSource`] again, for the pump and the transfer engine.
impl<T: DynSource + ?Sized> BatchSource for Box<T> {
    fn schema(&self) -> &Schema {
        (**self).schema()
    }

    fn next_batch(&mut self) -> impl Future<Output = Result<Option<&Batch>, Error>> + Send {
        (**self).next_batch()
    }

    fn next_chunk(&mut self) -> impl Future<Output = Result<Option<Chunk<'_>>, Error>> + Send {
        (**self).next_chunk()
    }
}

/// Forwards every call, so a caller can lend an encoder (`&mut E`) or box one.
macro_rules! forward_encoder {
    ($wrapper:ty) => {
        impl<E: Encoder + ?Sized> Encoder for $wrapper {
            fn begin(&mut self, schema: &Schema, output: &mut Vec<u8>) -> Result<(), Error> {
                (**self).begin(schema, output)
            }

            fn encode(&mut self, batch: &Batch, output: &mut Vec<u8>) -> Result<(), Error> {
                (**self).encode(batch, output)
            }

            fn finish(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
                (**self).finish(output)
            }

            fn begin_row(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
                (**self).begin_row(output)
            }

            fn row_value(
                &mut self,
                column: usize,
                value: Option<&[u8]>,
                output: &mut Vec<u8>,
            ) -> Result<(), Error> {
                (**self).row_value(column, value, output)
            }

            fn begin_value(&mut self, column: usize, output: &mut Vec<u8>) -> Result<(), Error> {
                (**self).begin_value(column, output)
            }

            fn value_piece(
                &mut self,
                column: usize,
                piece: &[u8],
                output: &mut Vec<u8>,
            ) -> Result<(), Error> {
                (**self).value_piece(column, piece, output)
            }

            fn end_value(&mut self, column: usize, output: &mut Vec<u8>) -> Result<(), Error> {
                (**self).end_value(column, output)
            }

            fn end_row(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
                (**self).end_row(output)
            }
        }
    };
}

forward_encoder!(Box<E>);
forward_encoder!(&mut E);
