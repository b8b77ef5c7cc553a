//! Rows of 16 MiB or more, read value by value and the largest values in
//! pieces, so a 900 MB `LONGBLOB` costs one piece of memory, not the row.
//!
//! Such a row's payload spans several packets (each 16 MiB − 1 bytes but the
//! last). [`LargeRow`] reads the payload across packet boundaries straight
//! from the connection's buffer: small parts (the null bitmap, lengths, fixed
//! size values, values up to [`SMALL_VALUE_BYTES`]) are gathered into a small
//! vector; a large text or binary value is lent out piece by piece, and any
//! other value (a number, a moment, bits, a geometry) is gathered whole by
//! [`value_bytes`] to be converted.

use sluice_core::Error;

use crate::types::Decode;
use crate::wire::{Wire, MAX_PAYLOAD};

/// Values of a large row up to this size are handed over whole.
pub(crate) const SMALL_VALUE_BYTES: usize = 64 * 1024;

/// The largest piece of a value handed over at once.
pub(crate) const PIECE_BYTES: usize = 1024 * 1024;

/// Where the reading of a large row stands.
#[derive(Debug, Clone)]
pub(crate) struct LargeRow {
    /// Payload bytes left in the current packet.
    packet_left: usize,
    /// Whether another packet continues the payload.
    continued: bool,
    /// The column whose value comes next.
    pub(crate) column: usize,
    /// The row's null bitmap.
    bitmap: Vec<u8>,
    /// Bytes left of a value being handed over in pieces.
    pub(crate) value_left: Option<usize>,
}

impl LargeRow {
    /// Begins the row at the front of `wire` (whose packet has the maximum
    /// length): reads its header byte and null bitmap.
    pub(crate) async fn begin(wire: &mut Wire, bitmap_bytes: usize) -> Result<LargeRow, Error> {
        while wire.buffered().len() < 4 {
            wire.fill().await?;
        }
        let length = wire.take_header();
        let mut row = LargeRow {
            packet_left: length,
            continued: length == MAX_PAYLOAD,
            column: 0,
            bitmap: Vec::new(),
            value_left: None,
        };
        let head = row.take(wire, 1 + bitmap_bytes).await?;
        if head[0] != 0x00 {
            return Err(Error::protocol(
                "a large packet in a result that is not a row",
            ));
        }
        row.bitmap = head[1..].to_vec();
        Ok(row)
    }

    /// Whether column `index` is NULL.
    pub(crate) fn is_null(&self, index: usize) -> bool {
        let bit = index + 2;
        self.bitmap[bit / 8] >> (bit % 8) & 1 == 1
    }

    /// Makes payload bytes available in the buffer, crossing into the next
    /// packet when this one is used up; returns how many are available.
    pub(crate) async fn ready(&mut self, wire: &mut Wire) -> Result<usize, Error> {
        while self.packet_left == 0 {
            if !self.continued {
                return Err(Error::protocol("a row's values run past its end"));
            }
            while wire.buffered().len() < 4 {
                wire.fill().await?;
            }
            let length = wire.take_header();
            self.packet_left = length;
            self.continued = length == MAX_PAYLOAD;
        }
        if wire.buffered().is_empty() {
            wire.fill().await?;
        }
        Ok(self.packet_left.min(wire.buffered().len()))
    }

    /// Drops `length` payload bytes (no more than [`LargeRow::ready`] said).
    pub(crate) fn consume(&mut self, wire: &mut Wire, length: usize) {
        wire.discard(length);
        self.packet_left -= length;
    }

    /// Gathers the next `length` payload bytes (small parts only).
    pub(crate) async fn take(&mut self, wire: &mut Wire, length: usize) -> Result<Vec<u8>, Error> {
        let mut gathered = Vec::with_capacity(length);
        while gathered.len() < length {
            let available = self.ready(wire).await?;
            let count = available.min(length - gathered.len());
            gathered.extend_from_slice(&wire.buffered()[..count]);
            self.consume(wire, count);
        }
        Ok(gathered)
    }

    /// Reads a length-encoded integer; returns it with its encoded bytes.
    pub(crate) async fn take_length(&mut self, wire: &mut Wire) -> Result<(u64, Vec<u8>), Error> {
        let mut encoded = self.take(wire, 1).await?;
        let width = match encoded[0] {
            0xFC => 2,
            0xFD => 3,
            0xFE => 8,
            0xFB | 0xFF => return Err(Error::protocol("a value without a length in a row")),
            _ => 0,
        };
        encoded.extend(self.take(wire, width).await?);
        let mut input = &encoded[..];
        let length = crate::protocol::read_lenenc_int(&mut input)?;
        Ok((length, encoded))
    }

    /// After the last value: nothing may be left of the payload (an empty
    /// packet ends a payload whose length is a multiple of the packet limit).
    pub(crate) async fn finish(&mut self, wire: &mut Wire) -> Result<(), Error> {
        if self.packet_left != 0 {
            return Err(Error::protocol("bytes after a row's last value"));
        }
        while self.continued {
            while wire.buffered().len() < 4 {
                wire.fill().await?;
            }
            let length = wire.take_header();
            if length != 0 {
                return Err(Error::protocol("bytes after a row's last value"));
            }
            self.continued = false;
        }
        Ok(())
    }
}

/// The wire bytes of one value of a large row that is not verbatim text:
/// fixed-size numbers, length-prefixed moments, bits and geometries (whole:
/// they are converted, and bounded by the server's packet limit).
pub(crate) async fn value_bytes(
    row: &mut LargeRow,
    wire: &mut Wire,
    decode: Decode,
) -> Result<Vec<u8>, Error> {
    match decode {
        Decode::Integer { width, .. } | Decode::BinaryInteger { width, .. } => {
            row.take(wire, usize::from(width)).await
        }
        Decode::Float32 | Decode::BinaryFloat32 => row.take(wire, 4).await,
        Decode::Float64 | Decode::BinaryFloat64 => row.take(wire, 8).await,
        Decode::Date
        | Decode::DateTime { .. }
        | Decode::Time
        | Decode::BinaryDate
        | Decode::BinaryDateTime => {
            let mut encoded = row.take(wire, 1).await?;
            let length = usize::from(encoded[0]);
            encoded.extend(row.take(wire, length).await?);
            Ok(encoded)
        }
        Decode::Verbatim | Decode::Bits { .. } | Decode::Geometry => {
            let (length, mut encoded) = row.take_length(wire).await?;
            let length = usize::try_from(length)
                .map_err(|_| Error::protocol("a value longer than this machine can address"))?;
            encoded.extend(row.take(wire, length).await?);
            Ok(encoded)
        }
    }
}
