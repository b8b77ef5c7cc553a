//! The protocol's small encodings read in place: length-encoded integers and
//! strings, and column definitions with MariaDB's extended metadata (which
//! `mysql_common`'s column parser does not read: it names JSON columns).

use sluice_core::Error;

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
}
