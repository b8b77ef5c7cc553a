//! Spatial values as WKT text, spelled as MariaDB's `ST_AsText` spells them.
//!
//! A GEOMETRY value arrives in a result set as a 4-byte little-endian SRID
//! followed by OGC WKB. No format sluice writes has a geometry type, and WKT
//! is what people and GIS tools read, so exports carry `POINT(1.5 -2)`,
//! `POLYGON((0 0,1 0,1 1,0 0))`: the server's own text, numbers included.
//! This module owns that conversion: reading WKB (either byte order, per
//! geometry), writing WKT, and formatting coordinates as the server's
//! `my_gcvt` does (see `write_number`). The SRID is not part of the text.
//!
//! Where the server's text is malformed, this module writes standard WKT
//! instead: MariaDB 10.11 prints an empty multi-geometry as `MULTIPOINT)` and
//! a polygon with an empty ring as `POLYGON())`; here every empty part is
//! `EMPTY` (`MULTIPOINT EMPTY`, `POLYGON((0 0,1 0,0 0),EMPTY)`), which agrees
//! with the server's `GEOMETRYCOLLECTION EMPTY`. Values that only a raw
//! binary insert can store are read as the server reads them where that is
//! well defined: bytes after the geometry are ignored and a NaN or infinite
//! coordinate is written `0`.
//!
//! Input is untrusted: every count is checked against the bytes left before
//! it is acted on, nothing is allocated from a count, collections nest at
//! most `MAX_DEPTH` (64) deep, and a value that cannot be read is an error,
//! never a panic. On error `output` is left as it was.

use std::fmt;

/// Why a value is not a geometry sluice can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GeometryError(pub(crate) String);

impl fmt::Display for GeometryError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "not a geometry sluice can read: {}", self.0)
    }
}

impl std::error::Error for GeometryError {}

/// Collections nested deeper than this are refused, so hostile input cannot
/// exhaust the stack (one frame per level).
const MAX_DEPTH: usize = 64;

/// WKB geometry type codes (OGC, 2D only, as MariaDB stores them).
const POINT: u32 = 1;
const LINESTRING: u32 = 2;
const POLYGON: u32 = 3;
const MULTIPOINT: u32 = 4;
const MULTILINESTRING: u32 = 5;
const MULTIPOLYGON: u32 = 6;
const GEOMETRYCOLLECTION: u32 = 7;

/// Bytes of a WKB header: the byte order and the type.
const HEADER: usize = 5;
/// Bytes of a point's coordinates.
const COORDINATES: usize = 16;
/// Bytes of a count.
const COUNT: usize = 4;

/// Appends the WKT of `value` (SRID + WKB) to `output`.
pub(crate) fn append_wkt(value: &[u8], output: &mut Vec<u8>) -> Result<(), GeometryError> {
    let start = output.len();
    let result = write_value(value, output);
    if result.is_err() {
        output.truncate(start);
    }
    result
}

fn write_value(value: &[u8], output: &mut Vec<u8>) -> Result<(), GeometryError> {
    if value.len() < 4 {
        return Err(GeometryError(format!(
            "{} bytes, shorter than an SRID",
            value.len()
        )));
    }
    let mut reader = Reader {
        input: &value[4..],
        offset: 4,
    };
    write_geometry(&mut reader, output, 0)
    // Bytes after the geometry are ignored, as by the server: a raw binary
    // insert can store them and `ST_AsText` prints the geometry before them.
}

/// WKB read front to back; `offset` counts from the start of the value (the
/// SRID), for error messages.
struct Reader<'a> {
    input: &'a [u8],
    offset: usize,
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self, what: &str) -> Result<[u8; N], GeometryError> {
        match self.input.split_first_chunk::<N>() {
            Some((bytes, rest)) => {
                self.input = rest;
                self.offset += N;
                Ok(*bytes)
            }
            None => Err(GeometryError(format!(
                "ends at byte {} inside {what}",
                self.offset + self.input.len()
            ))),
        }
    }

    fn u32(&mut self, little: bool, what: &str) -> Result<u32, GeometryError> {
        let bytes = self.take::<4>(what)?;
        Ok(if little {
            u32::from_le_bytes(bytes)
        } else {
            u32::from_be_bytes(bytes)
        })
    }

    fn f64(&mut self, little: bool) -> Result<f64, GeometryError> {
        let bytes = self.take::<8>("a coordinate")?;
        Ok(if little {
            f64::from_le_bytes(bytes)
        } else {
            f64::from_be_bytes(bytes)
        })
    }

    /// A count of items that take at least `item_bytes` each, refused when
    /// the bytes left cannot hold that many.
    fn count(&mut self, little: bool, item_bytes: usize) -> Result<usize, GeometryError> {
        let at = self.offset;
        let count = self.u32(little, "a count")?;
        let count = usize::try_from(count).unwrap_or(usize::MAX);
        if count.saturating_mul(item_bytes) > self.input.len() {
            return Err(GeometryError(format!(
                "a count of {count} at byte {at} needs more than the {} bytes left",
                self.input.len()
            )));
        }
        Ok(count)
    }

    /// A geometry's header: whether it is little endian, and its type.
    fn header(&mut self) -> Result<(bool, u32), GeometryError> {
        let at = self.offset;
        let [order] = self.take::<1>("a geometry header")?;
        let little = match order {
            0 => false,
            1 => true,
            other => {
                return Err(GeometryError(format!(
                    "byte order {other} at byte {at} (0 or 1 expected)"
                )))
            }
        };
        let kind = self.u32(little, "a geometry header")?;
        if !(POINT..=GEOMETRYCOLLECTION).contains(&kind) {
            return Err(GeometryError(format!(
                "unknown geometry type {kind} at byte {at}"
            )));
        }
        Ok((little, kind))
    }
}

/// One whole geometry, header included, with its type name.
fn write_geometry(
    reader: &mut Reader<'_>,
    output: &mut Vec<u8>,
    depth: usize,
) -> Result<(), GeometryError> {
    if depth > MAX_DEPTH {
        return Err(GeometryError(format!(
            "collections nested more than {MAX_DEPTH} deep"
        )));
    }
    let (little, kind) = reader.header()?;
    output.extend_from_slice(match kind {
        POINT => b"POINT",
        LINESTRING => b"LINESTRING",
        POLYGON => b"POLYGON",
        MULTIPOINT => b"MULTIPOINT",
        MULTILINESTRING => b"MULTILINESTRING",
        MULTIPOLYGON => b"MULTIPOLYGON",
        _ => b"GEOMETRYCOLLECTION",
    });
    let before_body = output.len();
    match kind {
        POINT => {
            output.push(b'(');
            write_coordinates(reader, little, output)?;
            output.push(b')');
        }
        LINESTRING => write_points(reader, little, output)?,
        POLYGON => write_rings(reader, little, output)?,
        _ => write_members(reader, little, kind, output, depth)?,
    }
    // `EMPTY` follows a type name after a space: `GEOMETRYCOLLECTION EMPTY`.
    if output[before_body..] == *b"EMPTY" {
        output.insert(before_body, b' ');
    }
    Ok(())
}

/// `x y`.
fn write_coordinates(
    reader: &mut Reader<'_>,
    little: bool,
    output: &mut Vec<u8>,
) -> Result<(), GeometryError> {
    let x = reader.f64(little)?;
    let y = reader.f64(little)?;
    write_number(x, output);
    output.push(b' ');
    write_number(y, output);
    Ok(())
}

/// A linestring's or ring's body: `(x y,x y,…)`, or `EMPTY`.
fn write_points(
    reader: &mut Reader<'_>,
    little: bool,
    output: &mut Vec<u8>,
) -> Result<(), GeometryError> {
    let count = reader.count(little, COORDINATES)?;
    write_list(count, output, |output| {
        write_coordinates(reader, little, output)
    })
}

/// A polygon's body: `((…),(…))`, or `EMPTY`.
fn write_rings(
    reader: &mut Reader<'_>,
    little: bool,
    output: &mut Vec<u8>,
) -> Result<(), GeometryError> {
    let count = reader.count(little, COUNT)?;
    write_list(count, output, |output| write_points(reader, little, output))
}

/// A multi-geometry's or collection's body. Each member is a whole WKB
/// geometry with its own header and byte order; a multi-geometry's members
/// must be of its one member type and are written without their type name
/// (`MULTIPOINT(1 1,2 2)`), a collection's with it.
fn write_members(
    reader: &mut Reader<'_>,
    little: bool,
    kind: u32,
    output: &mut Vec<u8>,
    depth: usize,
) -> Result<(), GeometryError> {
    let (member_kind, member_bytes) = match kind {
        MULTIPOINT => (POINT, HEADER + COORDINATES),
        MULTILINESTRING => (LINESTRING, HEADER + COUNT),
        MULTIPOLYGON => (POLYGON, HEADER + COUNT),
        _ => (GEOMETRYCOLLECTION, HEADER + COUNT),
    };
    let count = reader.count(little, member_bytes)?;
    write_list(count, output, |output| {
        if kind == GEOMETRYCOLLECTION {
            return write_geometry(reader, output, depth + 1);
        }
        let at = reader.offset;
        let (member_little, found) = reader.header()?;
        if found != member_kind {
            return Err(GeometryError(format!(
                "a member of type {found} at byte {at} in a geometry of type {kind}"
            )));
        }
        match member_kind {
            POINT => write_coordinates(reader, member_little, output),
            LINESTRING => write_points(reader, member_little, output),
            _ => write_rings(reader, member_little, output),
        }
    })
}

/// `(item,item,…)` for `count` items, or `EMPTY` for none.
fn write_list(
    count: usize,
    output: &mut Vec<u8>,
    mut write_item: impl FnMut(&mut Vec<u8>) -> Result<(), GeometryError>,
) -> Result<(), GeometryError> {
    if count == 0 {
        output.extend_from_slice(b"EMPTY");
        return Ok(());
    }
    output.push(b'(');
    for index in 0..count {
        if index > 0 {
            output.push(b',');
        }
        write_item(output)?;
    }
    output.push(b')');
    Ok(())
}

/// A coordinate as the server writes it (`String::qs_append(double)`, which
/// is `my_gcvt` with a width far wider than any double needs):
///
/// - the digits are the shortest that read back to the same double (dtoa
///   mode 4 with that width, which is mode 0's shortest round trip; ryu
///   finds the same digits);
/// - with the value `0.DIGITS × 10^decpt` and `len` digits, fixed notation is
///   used when `decpt >= -14` and either `decpt <= 15` or the number has a
///   fraction (`len > decpt`): `0.0000001`, `100000000000000`,
///   `1234567890123456.5`;
/// - otherwise scientific, with no `+` and no padding: `1e15`, `1.5e-20`,
///   `9.999999999999998e15`, `1e308`;
/// - zero, negative zero, NaN and the infinities are all `0` (dtoa's
///   overflow marker makes `my_gcvt` write `0`).
fn write_number(value: f64, output: &mut Vec<u8>) {
    if value == 0.0 || !value.is_finite() {
        output.push(b'0');
        return;
    }
    let mut buffer = ryu::Buffer::new();
    let text = buffer.format_finite(value).as_bytes();
    let (negative, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let (mantissa, mut decpt) = match text.iter().position(|&byte| byte == b'e') {
        Some(at) => (&text[..at], parse_exponent(&text[at + 1..])),
        None => (text, 0),
    };
    // ryu writes `123.0`, `0.00123`, `1.5e-7`, `1e16`; read its significant
    // digits and where the decimal point falls before them.
    let mut digits = [0u8; 32];
    let mut len = 0usize;
    let mut after_point = false;
    for &byte in mantissa {
        if byte == b'.' {
            after_point = true;
        } else if len == 0 && byte == b'0' {
            if after_point {
                decpt -= 1;
            }
        } else {
            if len < digits.len() {
                digits[len] = byte;
                len += 1;
            }
            if !after_point {
                decpt += 1;
            }
        }
    }
    while len > 1 && digits[len - 1] == b'0' {
        len -= 1;
    }
    let digits = &digits[..len];
    let len = len as i32;

    if negative {
        output.push(b'-');
    }
    if decpt >= -14 && (decpt <= 15 || len > decpt) {
        if decpt <= 0 {
            output.extend_from_slice(b"0.");
            output.extend(std::iter::repeat_n(b'0', (-decpt) as usize));
            output.extend_from_slice(digits);
        } else if decpt < len {
            let (whole, fraction) = digits.split_at(decpt as usize);
            output.extend_from_slice(whole);
            output.push(b'.');
            output.extend_from_slice(fraction);
        } else {
            output.extend_from_slice(digits);
            output.extend(std::iter::repeat_n(b'0', (decpt - len) as usize));
        }
    } else {
        let (first, rest) = digits.split_at(1);
        output.extend_from_slice(first);
        if !rest.is_empty() {
            output.push(b'.');
            output.extend_from_slice(rest);
        }
        output.push(b'e');
        let exponent = decpt - 1;
        if exponent < 0 {
            output.push(b'-');
        }
        write_small_integer(exponent.unsigned_abs(), output);
    }
}

/// The exponent ryu wrote after its `e` (`-7`, `16`; at most three digits).
fn parse_exponent(text: &[u8]) -> i32 {
    let (negative, text) = match text.split_first() {
        Some((b'-', rest)) => (true, rest),
        _ => (false, text),
    };
    let magnitude = text
        .iter()
        .fold(0i32, |sum, &digit| sum * 10 + i32::from(digit - b'0'));
    if negative {
        -magnitude
    } else {
        magnitude
    }
}

/// A decimal exponent's magnitude (at most 324).
fn write_small_integer(value: u32, output: &mut Vec<u8>) {
    if value >= 10 {
        write_small_integer(value / 10, output);
    }
    output.push(b'0' + (value % 10) as u8);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
        assert!(text.len().is_multiple_of(2), "odd hex literal");
        (0..text.len())
            .step_by(2)
            .map(|index| u8::from_str_radix(&text[index..index + 2], 16).unwrap())
            .collect()
    }

    fn wkt(value: &[u8]) -> Result<String, GeometryError> {
        let mut output = Vec::new();
        append_wkt(value, &mut output)?;
        Ok(String::from_utf8(output).unwrap())
    }

    fn number(value: f64) -> String {
        let mut output = Vec::new();
        write_number(value, &mut output);
        String::from_utf8(output).unwrap()
    }

    /// `select ST_AsText(ST_GeomFromText('POINT(x y)'))` on MariaDB
    /// 10.11.19: the literal typed (read as the nearest double, as by the
    /// server) and the text.
    #[test]
    fn numbers_are_written_as_the_server_writes_them() {
        for (typed, expected) in [
            ("1", "1"),
            ("2", "2"),
            ("1.5", "1.5"),
            ("-2.25", "-2.25"),
            ("0.1", "0.1"),
            ("0.2", "0.2"),
            ("1e20", "1e20"),
            ("1e-7", "0.0000001"),
            ("123456789.123456789", "123456789.12345679"),
            ("0.30000000000000004", "0.30000000000000004"),
            ("1e14", "100000000000000"),
            ("1e15", "1e15"),
            ("1e-15", "0.000000000000001"),
            ("1e-16", "1e-16"),
            ("1234567890123456", "1.234567890123456e15"),
            ("1.5e-20", "1.5e-20"),
            ("999999999999999.9", "999999999999999.9"),
            ("-1e15", "-1e15"),
            ("12345.678e-15", "0.000000000012345678"),
            ("5e-324", "5e-324"),
            ("1e-5", "0.00001"),
            ("1e-4", "0.0001"),
            ("0.000123456789012345678", "0.00012345678901234567"),
            ("1.7976931348623157e308", "1.7976931348623157e308"),
            ("2.2250738585072014e-308", "2.2250738585072014e-308"),
            ("3.141592653589793", "3.141592653589793"),
            ("12345678901234567890", "1.2345678901234567e19"),
            ("123456789012345.6", "123456789012345.6"),
            ("1e21", "1e21"),
            ("1e22", "1e22"),
            ("100", "100"),
            ("1000000", "1000000"),
            ("-0.5", "-0.5"),
            ("-0.0001", "-0.0001"),
            ("1.0000000000000002", "1.0000000000000002"),
            ("0.1e-14", "0.000000000000001"),
            // A fraction keeps fixed notation past 10^15; an integer does not.
            ("1234567890123456.5", "1234567890123456.5"),
            ("4503599627370495.5", "4503599627370495.5"),
            ("1000000000000000.1", "1000000000000000.1"),
            ("-1234567890123456.2", "-1234567890123456.2"),
            ("1.5e15", "1.5e15"),
            ("9999999999999998", "9.999999999999998e15"),
            (
                "1.2345678901234567e-15",
                "0.0000000000000012345678901234568",
            ),
            ("1.2345678901234567e-16", "1.2345678901234568e-16"),
            ("12345678901234567", "1.2345678901234568e16"),
            ("123456789012345678", "1.2345678901234568e17"),
            ("1e100", "1e100"),
            ("-1e-100", "-1e-100"),
            ("1e308", "1e308"),
            ("1e-308", "1e-308"),
        ] {
            let value: f64 = typed.parse().unwrap();
            assert_eq!(number(value), expected, "{typed}");
        }
    }

    /// Coordinates only a raw binary insert can store, with what the
    /// server's `ST_AsText` printed for them.
    #[test]
    fn odd_coordinates_are_written_as_the_server_writes_them() {
        // NaN and +inf: POINT(0 0).
        let value = hex("000000000101000000000000000000F87F000000000000F07F");
        assert_eq!(wkt(&value).unwrap(), "POINT(0 0)");
        // -inf and -0: POINT(0 0).
        let value = hex("000000000101000000000000000000F0FF0000000000000080");
        assert_eq!(wkt(&value).unwrap(), "POINT(0 0)");
        // Subnormals (a linestring's bytes read as points by the server).
        assert_eq!(number(f64::from_bits(1)), "5e-324");
        assert_eq!(number(f64::from_bits(0x3FF0_0000)), "5.299808824e-315");
    }

    /// `select hex(g), ST_AsText(g)` for GEOMETRY column values on MariaDB
    /// 10.11.19.
    #[test]
    fn every_geometry_type_as_st_astext_writes_it() {
        for (sent, expected) in [
            (
                "000000000101000000000000000000F83F00000000000000C0",
                "POINT(1.5 -2)",
            ),
            (
                "0000000001020000000300000000000000000000000000000000000000000000000000F03F000000000000F03F000000000000044000000000000008C0",
                "LINESTRING(0 0,1 1,2.5 -3)",
            ),
            (
                "000000000103000000020000000500000000000000000000000000000000000000000000000000244000000000000000000000000000002440000000000000244000000000000000000000000000002440000000000000000000000000000000000400000000000000000000400000000000000040000000000000104000000000000000400000000000001040000000000000104000000000000000400000000000000040",
                "POLYGON((0 0,10 0,10 10,0 10,0 0),(2 2,4 2,4 4,2 2))",
            ),
            (
                "000000000104000000020000000101000000000000000000F03F000000000000F03F010100000000000000000000400000000000000040",
                "MULTIPOINT(1 1,2 2)",
            ),
            (
                "0000000001050000000200000001020000000200000000000000000000000000000000000000000000000000F03F000000000000F03F010200000003000000000000000000004000000000000000400000000000000840000000000000084000000000000010400000000000001440",
                "MULTILINESTRING((0 0,1 1),(2 2,3 3,4 5))",
            ),
            (
                "000000000106000000020000000103000000010000000400000000000000000000000000000000000000000000000000F03F0000000000000000000000000000F03F000000000000F03F00000000000000000000000000000000010300000002000000040000000000000000001440000000000000144000000000000018400000000000001440000000000000184000000000000018400000000000001440000000000000144004000000CDCCCCCCCCCC144066666666666614403333333333331740666666666666144033333333333317400000000000001640CDCCCCCCCCCC14406666666666661440",
                "MULTIPOLYGON(((0 0,1 0,1 1,0 0)),((5 5,6 5,6 6,5 5),(5.2 5.1,5.8 5.1,5.8 5.5,5.2 5.1)))",
            ),
            ("00000000010700000000000000", "GEOMETRYCOLLECTION EMPTY"),
            (
                "00000000010700000001000000010700000000000000",
                "GEOMETRYCOLLECTION(GEOMETRYCOLLECTION EMPTY)",
            ),
            (
                "00000000010700000001000000010700000001000000010100000000000000000008400000000000001040",
                "GEOMETRYCOLLECTION(GEOMETRYCOLLECTION(POINT(3 4)))",
            ),
            (
                "0000000001070000000200000001070000000100000001010000000000000000000840000000000000104001010000000000000000000840000000000000F03F",
                "GEOMETRYCOLLECTION(GEOMETRYCOLLECTION(POINT(3 4)),POINT(3 1))",
            ),
            (
                "000000000107000000020000000101000000000000000000F03F0000000000000040010700000001000000010100000000000000000008400000000000001040",
                "GEOMETRYCOLLECTION(POINT(1 2),GEOMETRYCOLLECTION(POINT(3 4)))",
            ),
            (
                "000000000107000000030000000101000000000000000000F03F000000000000004001020000000200000000000000000000000000000000000000000000000000F03F000000000000F03F01040000000200000001010000000000000000001440000000000000184001010000000000000000001C400000000000002040",
                "GEOMETRYCOLLECTION(POINT(1 2),LINESTRING(0 0,1 1),MULTIPOINT(5 6,7 8))",
            ),
            // SRID 4326 and 3857: not part of the text.
            (
                "E610000001010000009A9999999999B93F9A9999999999C93F",
                "POINT(0.1 0.2)",
            ),
            (
                "110F00000101000000756B7E54346F9D41408CB5781DAF1544",
                "POINT(123456789.12345679 1e20)",
            ),
            // A raw insert kept a byte after the point; the server ignores it.
            (
                "000000000101000000000000000000F83F00000000000000C000",
                "POINT(1.5 -2)",
            ),
        ] {
            assert_eq!(wkt(&hex(sent)).unwrap(), expected, "{sent}");
        }
    }

    /// The server prints `MULTIPOINT)`, `MULTILINESTRING)`, `MULTIPOLYGON)`,
    /// `POLYGON)` and `POLYGON())` for these raw-inserted values, and NULL for
    /// the empty linestring; sluice writes standard WKT.
    #[test]
    fn empty_parts_are_written_as_standard_wkt() {
        for (sent, expected) in [
            ("00000000010400000000000000", "MULTIPOINT EMPTY"),
            ("00000000010500000000000000", "MULTILINESTRING EMPTY"),
            ("00000000010600000000000000", "MULTIPOLYGON EMPTY"),
            ("00000000010300000000000000", "POLYGON EMPTY"),
            ("0000000001030000000100000000000000", "POLYGON(EMPTY)"),
            ("00000000010200000000000000", "LINESTRING EMPTY"),
            // Server: `GEOMETRYCOLLECTION(MULTIPOINT),GEOMETRYCOLLECTION EMPTY)`.
            (
                "00000000010700000002000000010400000000000000010700000000000000",
                "GEOMETRYCOLLECTION(MULTIPOINT EMPTY,GEOMETRYCOLLECTION EMPTY)",
            ),
            (
                "0000000001060000000100000001030000000000000000",
                "MULTIPOLYGON(EMPTY)",
            ),
            (
                "0000000001050000000100000001020000000000000000",
                "MULTILINESTRING(EMPTY)",
            ),
        ] {
            assert_eq!(wkt(&hex(sent)).unwrap(), expected, "{sent}");
        }
    }

    /// The server stores WKB little endian (it converts on input and refuses
    /// a raw big-endian insert), so big-endian values are built by hand.
    #[test]
    fn big_endian_geometries_read_the_same() {
        // POINT(1.5 -2): ST_GeomFromWKB(x'00000000013FF8…') printed this.
        let mut point = vec![0, 0, 0, 0, 0];
        point.extend_from_slice(&POINT.to_be_bytes());
        point.extend_from_slice(&1.5f64.to_be_bytes());
        point.extend_from_slice(&(-2.0f64).to_be_bytes());
        assert_eq!(wkt(&point).unwrap(), "POINT(1.5 -2)");

        // A big-endian polygon with a hole.
        let mut polygon = vec![9, 0, 0, 0, 0];
        polygon.extend_from_slice(&POLYGON.to_be_bytes());
        polygon.extend_from_slice(&2u32.to_be_bytes());
        for ring in [
            &[0.0f64, 0.0, 10.0, 0.0, 10.0, 10.0, 0.0, 0.0][..],
            &[2.0, 2.0, 4.0, 2.0, 4.0, 4.0, 2.0, 2.0][..],
        ] {
            polygon.extend_from_slice(&((ring.len() / 2) as u32).to_be_bytes());
            for value in ring {
                polygon.extend_from_slice(&value.to_be_bytes());
            }
        }
        assert_eq!(
            wkt(&polygon).unwrap(),
            "POLYGON((0 0,10 0,10 10,0 0),(2 2,4 2,4 4,2 2))"
        );

        // A big-endian collection of a little-endian point, a big-endian
        // multipoint of one little-endian and one big-endian point, and a
        // little-endian multilinestring of a big-endian linestring.
        let mut collection = vec![0, 0, 0, 0, 0];
        collection.extend_from_slice(&GEOMETRYCOLLECTION.to_be_bytes());
        collection.extend_from_slice(&3u32.to_be_bytes());
        collection.extend_from_slice(&hex("0101000000000000000000084000000000000010C0"));
        collection.push(0);
        collection.extend_from_slice(&MULTIPOINT.to_be_bytes());
        collection.extend_from_slice(&2u32.to_be_bytes());
        collection.extend_from_slice(&hex("0101000000000000000000F03F000000000000F03F"));
        collection.push(0);
        collection.extend_from_slice(&POINT.to_be_bytes());
        collection.extend_from_slice(&0.1f64.to_be_bytes());
        collection.extend_from_slice(&1e20f64.to_be_bytes());
        collection.extend_from_slice(&hex("010500000001000000"));
        collection.push(0);
        collection.extend_from_slice(&LINESTRING.to_be_bytes());
        collection.extend_from_slice(&2u32.to_be_bytes());
        for value in [0.0f64, 0.0, -1.5, 1e-7] {
            collection.extend_from_slice(&value.to_be_bytes());
        }
        assert_eq!(
            wkt(&collection).unwrap(),
            "GEOMETRYCOLLECTION(POINT(3 -4),MULTIPOINT(1 1,0.1 1e20),\
             MULTILINESTRING((0 0,-1.5 0.0000001)))"
        );
    }

    /// The polygon with a hole from the server, cut at every byte.
    #[test]
    fn every_truncation_of_a_polygon_is_an_error() {
        let polygon = hex("000000000103000000020000000500000000000000000000000000000000000000000000000000244000000000000000000000000000002440000000000000244000000000000000000000000000002440000000000000000000000000000000000400000000000000000000400000000000000040000000000000104000000000000000400000000000001040000000000000104000000000000000400000000000000040");
        assert!(wkt(&polygon).is_ok());
        for cut in 0..polygon.len() {
            let error = wkt(&polygon[..cut]).unwrap_err();
            assert!(
                error.0.contains("ends at byte")
                    || error.0.contains("needs more than")
                    || error.0.contains("shorter than an SRID"),
                "cut at {cut}: {error}"
            );
        }
    }

    #[test]
    fn malformed_values_are_errors() {
        let error = |sent: &str| wkt(&hex(sent)).unwrap_err().0;
        // Absurd counts in every counted position.
        assert!(error("000000000102000000FFFFFFFF").contains("a count of 4294967295"));
        assert!(error("000000000103000000FFFFFFFF").contains("needs more than"));
        assert!(error("00000000010300000001000000FFFFFFFF").contains("needs more than"));
        assert!(error("000000000104000000FFFFFFFF").contains("needs more than"));
        assert!(error("000000000105000000FFFFFFFF").contains("needs more than"));
        assert!(error("000000000106000000FFFFFFFF").contains("needs more than"));
        assert!(error("000000000107000000FFFFFFFF").contains("needs more than"));
        // A count one more than the bytes hold.
        assert!(
            error("0000000001020000000200000000000000000000000000000000000000")
                .contains("a count of 2 at byte 9 needs more than the 16 bytes left")
        );
        // Unknown types, at the top and nested.
        assert!(error("000000000163000000").contains("unknown geometry type 99 at byte 4"));
        assert!(error("000000000100000000").contains("unknown geometry type 0"));
        assert!(error("000000000107000000010000000163000000000000000000")
            .contains("type 99 at byte 13"));
        assert!(error("000000000001000007").contains("unknown geometry type 16777223"));
        // A byte order that is neither 0 nor 1.
        assert!(
            error("000000000201000000000000000000F83F00000000000000C0").contains("byte order 2")
        );
        // A multipoint whose member is a linestring (the server reads its
        // bytes as a point's; sluice refuses it).
        assert!(error(
            "00000000010400000001000000010200000001000000000000000000F03F000000000000F03F"
        )
        .contains("a member of type 2 at byte 13 in a geometry of type 4"));
        assert!(
            error("0000000001060000000100000001020000000000000000").contains("member of type 2")
        );
        // Nothing but an SRID, or less.
        assert!(error("00000000").contains("ends at byte 4"));
        assert!(error("000000").contains("3 bytes"));
        assert!(error("").contains("0 bytes"));
    }

    #[test]
    fn errors_leave_the_output_as_it_was() {
        let mut output = b"kept".to_vec();
        let polygon = hex(
            "0000000001030000000100000004000000000000000000000000000000000000000000000000000000",
        );
        assert!(append_wkt(&polygon, &mut output).is_err());
        assert_eq!(output, b"kept");
        append_wkt(
            &hex("000000000101000000000000000000F83F00000000000000C0"),
            &mut output,
        )
        .unwrap();
        assert_eq!(output, b"keptPOINT(1.5 -2)");
        assert_eq!(
            GeometryError("x".into()).to_string(),
            "not a geometry sluice can read: x"
        );
    }

    fn nested_collections(levels: usize) -> Vec<u8> {
        let mut value = vec![0, 0, 0, 0];
        for _ in 0..levels {
            value.extend_from_slice(&hex("010700000001000000"));
        }
        value.extend_from_slice(&hex("0101000000000000000000F03F0000000000000040"));
        value
    }

    #[test]
    fn nesting_is_bounded() {
        // 64 collections around a point read; 65 do not, nor a million.
        let text = wkt(&nested_collections(MAX_DEPTH)).unwrap();
        assert!(text.starts_with("GEOMETRYCOLLECTION(GEOMETRYCOLLECTION("));
        assert!(text.ends_with(&format!("POINT(1 2){}", ")".repeat(MAX_DEPTH))));
        for levels in [MAX_DEPTH + 1, 1_000_000] {
            assert!(wkt(&nested_collections(levels))
                .unwrap_err()
                .0
                .contains("nested more than 64 deep"));
        }
    }

    /// Every value above with bytes flipped, cut or repeated: errors or text,
    /// never a panic, and text is ASCII.
    #[test]
    fn mangled_values_never_panic() {
        let samples = [
            "000000000103000000020000000500000000000000000000000000000000000000000000000000244000000000000000000000000000002440000000000000244000000000000000000000000000002440000000000000000000000000000000000400000000000000000000400000000000000040000000000000104000000000000000400000000000001040000000000000104000000000000000400000000000000040",
            "000000000106000000020000000103000000010000000400000000000000000000000000000000000000000000000000F03F0000000000000000000000000000F03F000000000000F03F00000000000000000000000000000000010300000002000000040000000000000000001440000000000000144000000000000018400000000000001440000000000000184000000000000018400000000000001440000000000000144004000000CDCCCCCCCCCC144066666666666614403333333333331740666666666666144033333333333317400000000000001640CDCCCCCCCCCC14406666666666661440",
            "000000000107000000030000000101000000000000000000F03F000000000000004001020000000200000000000000000000000000000000000000000000000000F03F000000000000F03F01040000000200000001010000000000000000001440000000000000184001010000000000000000001C400000000000002040",
        ];
        let mut state = 0x9E37_79B9_7F4A_7C15u64;
        let mut next = move || {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state
        };
        for sample in samples {
            let original = hex(sample);
            for position in 0..original.len() {
                for byte in [0x00, 0x01, 0x07, 0x7F, 0x80, 0xFF] {
                    let mut value = original.clone();
                    value[position] = byte;
                    if let Ok(text) = wkt(&value) {
                        assert!(text.is_ascii());
                    }
                }
            }
            for _ in 0..20_000 {
                let mut value = original.clone();
                for _ in 0..1 + next() % 4 {
                    let position = (next() % value.len() as u64) as usize;
                    value[position] = next() as u8;
                }
                value.truncate((next() % (value.len() as u64 + 1)) as usize);
                if let Ok(text) = wkt(&value) {
                    assert!(text.is_ascii());
                }
            }
        }
    }
}
