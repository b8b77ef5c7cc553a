//! The protocol's payloads, encoded and decoded without I/O (framing them
//! into packets is `crate::wire`'s): the commands sluice sends
//! (`COM_QUERY`, `COM_STMT_PREPARE`, `COM_STMT_EXECUTE`,
//! `COM_STMT_BULK_EXECUTE`…) and their sizes, and what it reads in place:
//! length-encoded integers and strings, OK and EOF packets, text-protocol
//! rows, and column definitions with MariaDB's extended metadata (which
//! `mysql_common`'s column parser does not read: it names JSON columns). The
//! greeting and the login are `mysql_common`'s packets (`crate::connection`),
//! the ERR packet `crate::error`'s.
//!
//! One place for the wire's bytes, so that what speaks the protocol from the
//! other end (a proxy) reads them with the same code.

use mysql_common::constants::{
    ColumnType, Command, MariadbBulkIndicator, StatusFlags, StmtBulkExecuteFlags,
};
use sluice_core::Error;

/// `COM_QUIT`: the session ends (no answer).
pub(crate) const COM_QUIT: u8 = 0x01;
/// `COM_QUERY`: a statement in the text protocol.
pub(crate) const COM_QUERY: u8 = 0x03;
/// `COM_STMT_PREPARE`.
pub(crate) const COM_STMT_PREPARE: u8 = 0x16;
/// `COM_STMT_EXECUTE`.
pub(crate) const COM_STMT_EXECUTE: u8 = 0x17;
/// `COM_STMT_CLOSE` (no answer).
pub(crate) const COM_STMT_CLOSE: u8 = 0x19;
/// `COM_STMT_FETCH`: the next rows of a cursor.
pub(crate) const COM_STMT_FETCH: u8 = 0x1C;
/// MariaDB's `COM_STMT_BULK_EXECUTE`: one statement for many parameter sets.
pub(crate) const COM_STMT_BULK_EXECUTE: u8 = Command::COM_STMT_BULK_EXECUTE as u8;

/// MariaDB's statement id for "the statement prepared just before, in this
/// pipeline".
pub(crate) const LAST_PREPARED: u32 = 0xFFFF_FFFF;

/// `MYSQL_TYPE_VAR_STRING`: parameters are sent as text the server converts.
const VAR_STRING: u8 = ColumnType::MYSQL_TYPE_VAR_STRING as u8;

/// Reads a length-encoded integer and advances `input` past it.
pub(crate) fn read_lenenc_int(input: &mut &[u8]) -> Result<u64, Error> {
    let (&first, rest) = input
        .split_first()
        .ok_or_else(|| Error::protocol("a packet ended inside a length"))?;
    let width = match first {
        0..=0xFA => {
            *input = rest;
            return Ok(u64::from(first));
        }
        0xFC => 2,
        0xFD => 3,
        0xFE => 8,
        _ => {
            return Err(Error::protocol(format!(
                "{first:#04x} is not a length prefix"
            )))
        }
    };
    if rest.len() < width {
        return Err(Error::protocol("a packet ended inside a length"));
    }
    let mut bytes = [0u8; 8];
    bytes[..width].copy_from_slice(&rest[..width]);
    *input = &rest[width..];
    Ok(u64::from_le_bytes(bytes))
}

/// Reads a length-encoded string and advances `input` past it.
pub(crate) fn read_lenenc_bytes<'a>(input: &mut &'a [u8]) -> Result<&'a [u8], Error> {
    let length = read_lenenc_int(input)?;
    let length = usize::try_from(length)
        .ok()
        .filter(|&length| length <= input.len())
        .ok_or_else(|| Error::protocol("a value runs past the end of its packet"))?;
    let (value, rest) = input.split_at(length);
    *input = rest;
    Ok(value)
}

/// Appends `value` as a length-encoded integer.
pub(crate) fn write_lenenc_int(value: u64, output: &mut Vec<u8>) {
    match value {
        0..=0xFA => output.push(value as u8),
        0xFB..=0xFFFF => {
            output.push(0xFC);
            output.extend_from_slice(&(value as u16).to_le_bytes());
        }
        0x1_0000..=0xFF_FFFF => {
            output.push(0xFD);
            output.extend_from_slice(&(value as u32).to_le_bytes()[..3]);
        }
        _ => {
            output.push(0xFE);
            output.extend_from_slice(&value.to_le_bytes());
        }
    }
}

/// Bytes of `value` as a length-encoded integer.
pub(crate) fn lenenc_bytes(value: usize) -> usize {
    match value {
        0..=0xFA => 1,
        0xFB..=0xFFFF => 3,
        0x1_0000..=0xFF_FFFF => 4,
        _ => 9,
    }
}

/// `COM_QUERY` of `sql`.
pub(crate) fn write_query(sql: &str, payload: &mut Vec<u8>) {
    payload.push(COM_QUERY);
    payload.extend_from_slice(sql.as_bytes());
}

/// `COM_STMT_PREPARE` of `sql`.
pub(crate) fn write_prepare(sql: &str, payload: &mut Vec<u8>) {
    payload.push(COM_STMT_PREPARE);
    payload.extend_from_slice(sql.as_bytes());
}

/// `COM_STMT_CLOSE` of `statement`.
pub(crate) fn write_close(statement: u32, payload: &mut Vec<u8>) {
    payload.push(COM_STMT_CLOSE);
    payload.extend_from_slice(&statement.to_le_bytes());
}

/// `COM_STMT_FETCH`: `rows` more rows of `statement`'s cursor.
pub(crate) fn write_fetch(statement: u32, rows: u32, payload: &mut Vec<u8>) {
    payload.push(COM_STMT_FETCH);
    payload.extend_from_slice(&statement.to_le_bytes());
    payload.extend_from_slice(&rows.to_le_bytes());
}

/// `COM_STMT_EXECUTE` of `statement` with `params`, all sent as strings for
/// the server to convert (`None` is NULL); behind a read-only cursor when
/// `cursor`.
pub(crate) fn write_execute<P: AsRef<[u8]>>(
    statement: u32,
    params: &[Option<P>],
    cursor: bool,
    payload: &mut Vec<u8>,
) {
    payload.push(COM_STMT_EXECUTE);
    payload.extend_from_slice(&statement.to_le_bytes());
    payload.push(u8::from(cursor));
    payload.extend_from_slice(&1u32.to_le_bytes());
    if params.is_empty() {
        return;
    }
    let mut bitmap = vec![0u8; params.len().div_ceil(8)];
    for (index, value) in params.iter().enumerate() {
        if value.is_none() {
            bitmap[index / 8] |= 1 << (index % 8);
        }
    }
    payload.extend_from_slice(&bitmap);
    payload.push(1); // types follow
    for _ in params {
        payload.extend_from_slice(&[VAR_STRING, 0]);
    }
    for value in params.iter().flatten() {
        let value = value.as_ref();
        write_lenenc_int(value.len() as u64, payload);
        payload.extend_from_slice(value);
    }
}

/// Bytes of the packet [`write_execute`] writes for `values` (its header too).
pub(crate) fn execute_bytes(values: &[Option<String>]) -> usize {
    let fixed = 4 + 1 + 4 + 1 + 4;
    if values.is_empty() {
        return fixed;
    }
    let texts: usize = values
        .iter()
        .flatten()
        .map(|text| lenenc_bytes(text.len()) + text.len())
        .sum();
    fixed + values.len().div_ceil(8) + 1 + 2 * values.len() + texts
}

/// `COM_STMT_BULK_EXECUTE` of `statement` for `sets` of its `parameters`
/// values: every parameter typed as a string for the server to convert, then
/// each set's values behind an indicator byte (NULL or a value).
///
/// Written here rather than with `mysql_common`'s
/// `ComStmtBulkExecuteRequestBuilder`, which wants every value copied into a
/// `Value` of a `Vec<Vec<Value>>` and serialized into a buffer of its own
/// (two copies of a bulk that may be the whole window), and splits by
/// `max_allowed_packet` alone, where a run of calls also splits by its window
/// and needs the sets again if the bulk fails.
pub(crate) fn write_bulk_execute<'a>(
    statement: u32,
    parameters: usize,
    sets: impl IntoIterator<Item = &'a [Option<String>]>,
    payload: &mut Vec<u8>,
) {
    payload.push(COM_STMT_BULK_EXECUTE);
    payload.extend_from_slice(&statement.to_le_bytes());
    payload.extend_from_slice(
        &StmtBulkExecuteFlags::SEND_TYPES_TO_SERVER
            .bits()
            .to_le_bytes(),
    );
    for _ in 0..parameters {
        payload.extend_from_slice(&[VAR_STRING, 0]);
    }
    for values in sets {
        for value in values {
            match value {
                None => payload.push(MariadbBulkIndicator::BULK_INDICATOR_NULL as u8),
                Some(text) => {
                    payload.push(MariadbBulkIndicator::BULK_INDICATOR_NONE as u8);
                    write_lenenc_int(text.len() as u64, payload);
                    payload.extend_from_slice(text.as_bytes());
                }
            }
        }
    }
}

/// Bytes of a bulk before its sets: packet header, command, statement id,
/// flags and a type per parameter.
pub(crate) fn bulk_header_bytes(parameters: usize) -> usize {
    4 + 1 + 4 + 2 + 2 * parameters
}

/// Bytes one set adds to a bulk.
pub(crate) fn bulk_set_bytes(values: &[Option<String>]) -> usize {
    values
        .iter()
        .map(|value| {
            1 + value
                .as_ref()
                .map_or(0, |text| lenenc_bytes(text.len()) + text.len())
        })
        .sum()
}

/// An OK packet (`0x00`, or `0xFE` ending a result where EOF packets are
/// deprecated), read in place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct OkPacket<'a> {
    /// Rows the statement changed.
    pub(crate) affected_rows: u64,
    /// The session's status (more results, a cursor open…).
    pub(crate) status: StatusFlags,
    /// How many warnings the statement left (`SHOW WARNINGS` lists them).
    pub(crate) warnings: u16,
    /// The server's summary of what a statement did (`Records: 3
    /// Duplicates: 1  Warnings: 0`), when it gives one.
    pub(crate) info: &'a [u8],
}

impl OkPacket<'_> {
    /// Reads `payload`, header byte first.
    pub(crate) fn parse(payload: &[u8]) -> Result<OkPacket<'_>, Error> {
        let mut rest = payload.get(1..).unwrap_or_default();
        let affected_rows = read_lenenc_int(&mut rest)?;
        let _last_insert_id = read_lenenc_int(&mut rest)?;
        // Status and warnings, then the human-readable info.
        let two_bytes = |at: usize| {
            rest.get(at..at + 2)
                .map_or(0, |bytes| u16::from_le_bytes([bytes[0], bytes[1]]))
        };
        Ok(OkPacket {
            affected_rows,
            status: StatusFlags::from_bits_truncate(two_bytes(0)),
            warnings: two_bytes(2),
            info: rest.get(4..).unwrap_or_default(),
        })
    }
}

/// The status flags of the packet that ends a result: an OK packet where EOF
/// packets are deprecated, an EOF packet otherwise.
pub(crate) fn end_status(payload: &[u8], deprecate_eof: bool) -> StatusFlags {
    if deprecate_eof {
        return OkPacket::parse(payload).map_or(StatusFlags::empty(), |ok| ok.status);
    }
    // EOF: warnings, then the status.
    let bits = payload
        .get(3..5)
        .map_or(0, |bytes| u16::from_le_bytes([bytes[0], bytes[1]]));
    StatusFlags::from_bits_truncate(bits)
}

/// A text-protocol row: `columns` length-encoded strings, `0xFB` for NULL.
pub(crate) fn text_row(packet: &[u8], columns: u64) -> Result<Vec<Option<Vec<u8>>>, Error> {
    let mut rest = packet;
    (0..columns)
        .map(|_| {
            if rest.first() == Some(&0xFB) {
                rest = &rest[1..];
                Ok(None)
            } else {
                read_lenenc_bytes(&mut rest).map(|value| Some(value.to_vec()))
            }
        })
        .collect()
}

/// One column of a result, as its definition packet describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ColumnDefinition {
    pub(crate) name: String,
    /// The character set of its values (`63`: binary).
    pub(crate) character_set: u16,
    /// The declared display length (`BIT(n)`: n).
    pub(crate) length: u32,
    /// `MYSQL_TYPE_*`.
    pub(crate) column_type: u8,
    /// `*_FLAG` bits (unsigned, binary, enum, set…).
    pub(crate) flags: u16,
    pub(crate) decimals: u8,
    /// MariaDB's extended type name (`json`, `uuid`, `inet6`, `point`), if sent.
    pub(crate) extended_type: Option<String>,
    /// MariaDB's extended format (`json`), if sent.
    pub(crate) extended_format: Option<String>,
}

impl ColumnDefinition {
    /// Parses a column definition packet; `extended` when the session asked
    /// for MariaDB's extended metadata.
    pub(crate) fn parse(packet: &[u8], extended: bool) -> Result<ColumnDefinition, Error> {
        let mut rest = packet;
        for _ in 0..4 {
            // catalog, schema, table, original table
            read_lenenc_bytes(&mut rest)?;
        }
        let name = String::from_utf8_lossy(read_lenenc_bytes(&mut rest)?).into_owned();
        read_lenenc_bytes(&mut rest)?; // original name
        let (mut extended_type, mut extended_format) = (None, None);
        if extended {
            let mut metadata = read_lenenc_bytes(&mut rest)?;
            while let Some((&key, after)) = metadata.split_first() {
                metadata = after;
                let value = String::from_utf8_lossy(read_lenenc_bytes(&mut metadata)?).into_owned();
                match key {
                    0 => extended_type = Some(value),
                    1 => extended_format = Some(value),
                    _ => {}
                }
            }
        }
        read_lenenc_int(&mut rest)?; // length of the fixed fields: 0x0C
        if rest.len() < 10 {
            return Err(Error::protocol("a column definition ended early"));
        }
        Ok(ColumnDefinition {
            name,
            character_set: u16::from_le_bytes([rest[0], rest[1]]),
            length: u32::from_le_bytes([rest[2], rest[3], rest[4], rest[5]]),
            column_type: rest[6],
            flags: u16::from_le_bytes([rest[7], rest[8]]),
            decimals: rest[9],
            extended_type,
            extended_format,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lengths_round_trip_at_every_width() {
        for value in [0, 250, 251, 65535, 65536, 0xFF_FFFF, 0x100_0000, u64::MAX] {
            let mut encoded = Vec::new();
            write_lenenc_int(value, &mut encoded);
            let mut input = &encoded[..];
            assert_eq!(read_lenenc_int(&mut input).unwrap(), value);
            assert!(input.is_empty());
        }
        assert!(read_lenenc_int(&mut &[0xFC, 1][..]).is_err());
        assert!(read_lenenc_bytes(&mut &[5, b'a'][..]).is_err());
    }

    #[test]
    fn sizes_follow_the_encodings() {
        let values = vec![Some("12".to_owned()), None, Some("x".repeat(300))];
        // indicator + length + text, indicator, indicator + 3-byte length + text
        assert_eq!(bulk_set_bytes(&values), (1 + 1 + 2) + 1 + (1 + 3 + 300));
        // header, command, id, flags, iterations, bitmap, bound flag, types, values
        assert_eq!(
            execute_bytes(&values),
            4 + 1 + 4 + 1 + 4 + 1 + 1 + 6 + (1 + 2) + (3 + 300)
        );
        assert_eq!(execute_bytes(&[]), 14);
        assert_eq!(bulk_header_bytes(2), 15);
        let mut written = Vec::new();
        write_execute(7, &values, false, &mut written);
        assert_eq!(4 + written.len(), execute_bytes(&values));
        written.clear();
        write_bulk_execute(7, 3, [&values[..]], &mut written);
        assert_eq!(
            4 + written.len(),
            bulk_header_bytes(3) + bulk_set_bytes(&values)
        );
    }
}
