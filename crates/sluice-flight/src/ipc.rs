//! An Arrow IPC stream cut into Flight's messages.
//!
//! `DoGet` sends the same bytes `--format arrow` writes, produced by the same
//! encoder (one converter per column, chosen once), but Flight carries each
//! IPC message as a `FlightData` of its own: the message's flatbuffer header in
//! `data_header`, its body in `data_body`. Rather than decode record batches
//! and encode them again, the stream is cut at its message boundaries: each
//! message starts with the continuation marker, the header's length and the
//! header, whose `bodyLength` says how many body bytes follow. Only the
//! message being assembled is held.

use arrow_flight::FlightData;
use bytes::{Buf, Bytes, BytesMut};

/// The marker before each message's header length (IPC format since 0.15).
const CONTINUATION: u32 = 0xFFFF_FFFF;

/// A stream that is not the IPC stream the encoder writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Malformed(pub String);

/// Splits the bytes of an Arrow IPC stream, pushed in pieces of any size,
/// into its messages.
#[derive(Default)]
pub struct MessageSplitter {
    pending: BytesMut,
    ended: bool,
}

impl MessageSplitter {
    /// Adds the next bytes of the stream. When nothing is pending (the
    /// usual case: the encoder hands out whole messages) the bytes are taken
    /// over as they are, and the messages cut from them share their memory.
    pub fn push(&mut self, bytes: Vec<u8>) {
        if self.pending.is_empty() {
            self.pending = BytesMut::from(Bytes::from(bytes));
        } else {
            self.pending.extend_from_slice(&bytes);
        }
    }

    /// True once the end-of-stream marker was read.
    pub fn ended(&self) -> bool {
        self.ended
    }

    /// True when no partial message is held.
    pub fn is_empty(&self) -> bool {
        self.pending.is_empty()
    }

    /// The next complete message, if the bytes so far hold one.
    pub fn next_message(&mut self) -> Result<Option<FlightData>, Malformed> {
        if self.ended || self.pending.len() < 8 {
            return Ok(None);
        }
        let marker = u32::from_le_bytes(self.pending[0..4].try_into().expect("4 bytes"));
        if marker != CONTINUATION {
            return Err(Malformed(format!(
                "expected the continuation marker, found {marker:#010x}"
            )));
        }
        let header_length = i32::from_le_bytes(self.pending[4..8].try_into().expect("4 bytes"));
        let header_length = usize::try_from(header_length)
            .map_err(|_| Malformed(format!("negative header length {header_length}")))?;
        if header_length == 0 {
            // End of stream: Flight ends the call instead.
            self.pending.advance(8);
            self.ended = true;
            return Ok(None);
        }
        if self.pending.len() < 8 + header_length {
            return Ok(None);
        }
        let body_length = body_length(&self.pending[8..8 + header_length])?;
        if self.pending.len() < 8 + header_length + body_length {
            return Ok(None);
        }
        self.pending.advance(8);
        let header = self.pending.split_to(header_length).freeze();
        let body = self.pending.split_to(body_length).freeze();
        Ok(Some(FlightData {
            flight_descriptor: None,
            data_header: header,
            app_metadata: Bytes::new(),
            data_body: body,
        }))
    }
}

/// The body length a message header announces.
fn body_length(header: &[u8]) -> Result<usize, Malformed> {
    let message = arrow_ipc::root_as_message(header)
        .map_err(|error| Malformed(format!("unreadable message header: {error}")))?;
    usize::try_from(message.bodyLength())
        .map_err(|_| Malformed(format!("negative body length {}", message.bodyLength())))
}

/// The schema message of an IPC stream in Flight's encapsulated form (the
/// marker, the length and the header), as `FlightInfo.schema` and
/// `SchemaResult.schema` carry it.
pub fn encapsulated_schema(stream: &[u8]) -> Result<Bytes, Malformed> {
    let mut splitter = MessageSplitter::default();
    splitter.push(stream.to_vec());
    let first = splitter
        .next_message()?
        .ok_or_else(|| Malformed("the stream has no schema message".into()))?;
    let mut bytes = Vec::with_capacity(8 + first.data_header.len());
    bytes.extend_from_slice(&CONTINUATION.to_le_bytes());
    bytes.extend_from_slice(&(first.data_header.len() as i32).to_le_bytes());
    bytes.extend_from_slice(&first.data_header);
    Ok(bytes.into())
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::{Batch, Column, Kind, Schema};
    use sluice_formats::{ColumnarOptions, Format, OutputOptions};

    /// An Arrow stream of 5 rows in batches of 2 from sluice's own encoder.
    fn stream() -> Vec<u8> {
        let schema = Schema {
            columns: vec![
                Column::new("id", Kind::Integer, "int8"),
                Column::new("name", Kind::Text, "text"),
            ],
        };
        let options = OutputOptions {
            columnar: ColumnarOptions {
                batch_rows: 2,
                ..ColumnarOptions::default()
            },
            ..OutputOptions::default()
        };
        let mut encoder = Format::Arrow.encoder(options);
        let mut output = Vec::new();
        encoder.begin(&schema, &mut output).unwrap();
        let mut batch = Batch::new(2);
        for row in 0..5 {
            batch.push_value(row.to_string().as_bytes());
            batch.push_value(b"x");
        }
        encoder.encode(&batch, &mut output).unwrap();
        encoder.finish(&mut output).unwrap();
        output
    }

    #[test]
    fn messages_come_out_whole_whatever_the_pieces() {
        let stream = stream();
        for piece in [1, 7, 64, stream.len()] {
            let mut splitter = MessageSplitter::default();
            let mut messages = Vec::new();
            for chunk in stream.chunks(piece) {
                splitter.push(chunk.to_vec());
                while let Some(message) = splitter.next_message().unwrap() {
                    messages.push(message);
                }
            }
            assert!(splitter.ended() && splitter.is_empty(), "piece {piece}");
            // The schema, then three batches.
            assert_eq!(messages.len(), 4, "piece {piece}");
            assert!(messages[0].data_body.is_empty());
            let rows: Vec<i64> = messages[1..]
                .iter()
                .map(|message| {
                    arrow_ipc::root_as_message(&message.data_header)
                        .unwrap()
                        .header_as_record_batch()
                        .unwrap()
                        .length()
                })
                .collect();
            assert_eq!(rows, [2, 2, 1], "piece {piece}");
        }
    }

    #[test]
    fn the_schema_reads_as_flight_clients_read_it() {
        let schema = encapsulated_schema(&stream()).unwrap();
        let decoded = arrow_schema::Schema::try_from(arrow_flight::IpcMessage(schema)).unwrap();
        let names: Vec<&str> = decoded.fields().iter().map(|f| f.name().as_str()).collect();
        assert_eq!(names, ["id", "name"]);
    }

    #[test]
    fn what_is_not_an_arrow_stream_is_refused() {
        let mut splitter = MessageSplitter::default();
        splitter.push(b"not an arrow stream".to_vec());
        assert!(splitter.next_message().is_err());
    }
}
