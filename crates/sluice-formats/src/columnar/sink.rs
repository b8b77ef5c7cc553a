//! The three writers behind the columnar encoder: Arrow IPC stream, Arrow IPC
//! file and Parquet, each writing into a `Vec<u8>` it owns, whose bytes are
//! moved to the caller's output after every write (an [`sluice_core::Encoder`]
//! never does I/O).

use std::sync::Arc;

use arrow_array::RecordBatch;
use arrow_ipc::writer::{FileWriter, StreamWriter};
use arrow_schema::Schema;
use parquet::arrow::ArrowWriter;
use parquet::basic::{Compression, ZstdLevel};
use parquet::file::properties::WriterProperties;
use sluice_core::{Error, ErrorKind};

use super::options::{ColumnarOptions, ParquetCompression};

/// Which container the record batches go into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Container {
    /// Arrow IPC streaming format: schema, then batches, then an end marker.
    Stream,
    /// Arrow IPC file format: the stream framed by magic bytes and a footer.
    File,
    /// Parquet.
    Parquet,
}

impl Container {
    /// The format's name in messages.
    pub(crate) fn name(self) -> &'static str {
        match self {
            Container::Stream => "Arrow IPC stream",
            Container::File => "Arrow IPC file",
            Container::Parquet => "Parquet",
        }
    }
}

/// A writer of one container, started once the schema is known.
pub(crate) enum Sink {
    Stream(StreamWriter<Vec<u8>>),
    File(FileWriter<Vec<u8>>),
    // Boxed: the Parquet writer is ten times the size of the others.
    Parquet(Box<ArrowWriter<Vec<u8>>>),
}

fn failed(container: Container, error: impl std::fmt::Display) -> Error {
    Error::new(
        ErrorKind::Data,
        format!("writing {} failed: {error}", container.name()),
    )
}

impl Sink {
    /// Starts `container` for `schema` (the IPC formats write the schema now).
    pub(crate) fn start(
        container: Container,
        schema: Arc<Schema>,
        options: &ColumnarOptions,
    ) -> Result<Sink, Error> {
        let fail = |error: &dyn std::fmt::Display| failed(container, error);
        Ok(match container {
            Container::Stream => {
                Sink::Stream(StreamWriter::try_new(Vec::new(), &schema).map_err(|e| fail(&e))?)
            }
            Container::File => {
                Sink::File(FileWriter::try_new(Vec::new(), &schema).map_err(|e| fail(&e))?)
            }
            Container::Parquet => {
                let writer = ArrowWriter::try_new(Vec::new(), schema, Some(properties(options)))
                    .map_err(|e| fail(&e))?;
                Sink::Parquet(Box::new(writer))
            }
        })
    }

    fn container(&self) -> Container {
        match self {
            Sink::Stream(_) => Container::Stream,
            Sink::File(_) => Container::File,
            Sink::Parquet(_) => Container::Parquet,
        }
    }

    /// Writes one record batch (Parquet: into the row group under way, which
    /// is written out once it is full) and moves what is ready to `output`.
    pub(crate) fn write(&mut self, batch: &RecordBatch, output: &mut Vec<u8>) -> Result<(), Error> {
        let container = self.container();
        match self {
            Sink::Stream(writer) => writer.write(batch).map_err(|e| failed(container, e))?,
            Sink::File(writer) => writer.write(batch).map_err(|e| failed(container, e))?,
            Sink::Parquet(writer) => writer.write(batch).map_err(|e| failed(container, e))?,
        }
        self.drain(output);
        Ok(())
    }

    /// Writes what ends the container (end marker, footer) and moves the rest
    /// to `output`.
    pub(crate) fn finish(&mut self, output: &mut Vec<u8>) -> Result<(), Error> {
        let container = self.container();
        match self {
            Sink::Stream(writer) => writer.finish().map_err(|e| failed(container, e))?,
            Sink::File(writer) => writer.finish().map_err(|e| failed(container, e))?,
            Sink::Parquet(writer) => {
                writer.finish().map_err(|e| failed(container, e))?;
            }
        }
        self.drain(output);
        Ok(())
    }

    /// Moves the bytes written so far to `output`, without a copy when
    /// `output` is empty (a whole record batch can be large).
    fn drain(&mut self, output: &mut Vec<u8>) {
        let buffer = match self {
            Sink::Stream(writer) => writer.get_mut(),
            Sink::File(writer) => writer.get_mut(),
            // Taking the bytes does not disturb the writer: it counts the
            // offsets it writes in the footer itself.
            Sink::Parquet(writer) => writer.inner_mut(),
        };
        if output.is_empty() {
            std::mem::swap(output, buffer);
        } else {
            output.append(buffer);
        }
    }
}

/// Parquet's settings: the codec, the row group limits, and sluice as the
/// writer in the file's metadata.
fn properties(options: &ColumnarOptions) -> WriterProperties {
    let compression = match options.compression {
        ParquetCompression::Zstd => Compression::ZSTD(ZstdLevel::default()),
        ParquetCompression::Snappy => Compression::SNAPPY,
        ParquetCompression::Lz4 => Compression::LZ4_RAW,
        ParquetCompression::None => Compression::UNCOMPRESSED,
    };
    WriterProperties::builder()
        .set_compression(compression)
        .set_max_row_group_row_count(Some(options.row_group_rows.max(1)))
        .set_max_row_group_bytes(Some(options.row_group_bytes.max(1)))
        .set_created_by(format!("sluice {}", env!("CARGO_PKG_VERSION")))
        .build()
}
