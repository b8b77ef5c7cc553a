//! Spatial values as WKT text, as MariaDB's `ST_AsText` writes them.
//!
//! A GEOMETRY value arrives as a 4-byte SRID followed by OGC WKB. No format
//! sluice writes has a geometry type, and WKT is what people and GIS tools
//! read, so exports write `POINT(1.5 -2)`, `POLYGON((0 0,1 0,1 1,0 0))` — the
//! server's own spelling, numbers included (shortest digits that read back to
//! the same double; plain decimals for exponents from -15 to 14, else
//! `1.5e-20`). Input is untrusted: every count is checked against the bytes
//! left before anything is allocated for it, and nesting is bounded.

use std::fmt;

/// Why a value is not a geometry sluice can read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct GeometryError(pub(crate) String);

impl fmt::Display for GeometryError {
    fn fmt(&self, formatter: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(formatter, "not a geometry sluice can read: {}", self.0)
    }
}

/// Collections nested deeper than this are refused (hostile input).
const MAX_DEPTH: usize = 64;

/// Appends the WKT of `value` (SRID + WKB) to `output`.
pub(crate) fn append_wkt(value: &[u8], output: &mut Vec<u8>) -> Result<(), GeometryError> {
    let wkb = value
        .get(4..)
        .ok_or_else(|| GeometryError("shorter than its SRID".into()))?;
    let mut reader = Reader { input: wkb };
    write_geometry(&mut reader, output, 0)?;
    if !reader.input.is_empty() {
        return Err(GeometryError("bytes after the geometry".into()));
    }
    Ok(())
}

/// WKB read front to back, each geometry in its own byte order.
struct Reader<'a> {
    input: &'a [u8],
}

impl Reader<'_> {
    fn take<const N: usize>(&mut self) -> Result<[u8; N], GeometryError> {
        if self.input.len() < N {
            return Err(GeometryError("truncated".into()));
        }
        let (bytes, rest) = self.input.split_at(N);
        self.input = rest;
        Ok(bytes.try_into().expect("N bytes"))
    }

    fn u32(&mut self, little: bool) -> Result<u32, GeometryError> {
        let bytes = self.take::<4>()?;
        Ok(if little {
            u32::from_le_bytes(bytes)
        } else {
            u32::from_be_bytes(bytes)
        })
    }

    fn f64(&mut self, little: bool) -> Result<f64, GeometryError> {
        let bytes = self.take::<8>()?;
        Ok(if little {
            f64::from_le_bytes(bytes)
        } else {
            f64::from_be_bytes(bytes)
        })
    }

    /// A count of items of at least `item_bytes` each, checked against what
    /// is left so no allocation or loop follows an impossible count.
    fn count(&mut self, little: bool, item_bytes: usize) -> Result<usize, GeometryError> {
        let count = self.u32(little)? as usize;
        if count.saturating_mul(item_bytes) > self.input.len() {
            return Err(GeometryError(format!("a count of {count} past its end")));
        }
        Ok(count)
    }

    /// A geometry's header: its byte order and type.
    fn header(&mut self) -> Result<(bool, u32), GeometryError> {
        let [order] = self.take::<1>()?;
        let little = match order {
            0 => false,
            1 => true,
            other => return Err(GeometryError(format!("byte order {other}"))),
        };
        Ok((little, self.u32(little)?))
    }
}

fn write_geometry(
    reader: &mut Reader<'_>,
    output: &mut Vec<u8>,
    depth: usize,
) -> Result<(), GeometryError> {
    if depth > MAX_DEPTH {
        return Err(GeometryError("nested too deep".into()));
    }
    let (little, kind) = reader.header()?;
    let name: &[u8] = match kind {
        1 => b"POINT",
        2 => b"LINESTRING",
        3 => b"POLYGON",
        4 => b"MULTIPOINT",
        5 => b"MULTILINESTRING",
        6 => b"MULTIPOLYGON",
        7 => b"GEOMETRYCOLLECTION",
        other => return Err(GeometryError(format!("geometry type {other}"))),
    };
    output.extend_from_slice(name);
    match kind {
        1 => {
            output.push(b'(');
            write_point(reader, little, output)?;
            output.push(b')');
        }
        2 => write_points(reader, little, output)?,
        3 => write_rings(reader, little, output)?,
        _ => write_members(reader, little, kind, output, depth)?,
    }
    Ok(())
}

/// `x y`.
fn write_point(
    reader: &mut Reader<'_>,
    little: bool,
    output: &mut Vec<u8>,
) -> Result<(), GeometryError> {
    write_number(reader.f64(little)?, output);
    output.push(b' ');
    write_number(reader.f64(little)?, output);
    Ok(())
}

/// `(x y,x y,…)`.
fn write_points(
    reader: &mut Reader<'_>,
    little: bool,
    output: &mut Vec<u8>,
) -> Result<(), GeometryError> {
    let count = reader.count(little, 16)?;
    output.push(b'(');
    for index in 0..count {
        if index > 0 {
            output.push(b',');
        }
        write_point(reader, little, output)?;
    }
    output.push(b')');
    Ok(())
}

/// `((…),(…))`.
fn write_rings(
    reader: &mut Reader<'_>,
    little: bool,
    output: &mut Vec<u8>,
) -> Result<(), GeometryError> {
    let count = reader.count(little, 4)?;
    output.push(b'(');
    for index in 0..count {
        if index > 0 {
            output.push(b',');
        }
        write_points(reader, little, output)?;
    }
    output.push(b')');
    Ok(())
}

/// The members of a multi-geometry or collection, each a whole WKB geometry;
/// a multi-geometry writes its members without their type names, as WKT does.
fn write_members(
    reader: &mut Reader<'_>,
    little: bool,
    kind: u32,
    output: &mut Vec<u8>,
    depth: usize,
) -> Result<(), GeometryError> {
    let count = reader.count(little, 5)?;
    if count == 0 {
        output.extend_from_slice(b" EMPTY");
        return Ok(());
    }
    output.push(b'(');
    for index in 0..count {
        if index > 0 {
            output.push(b',');
        }
        if kind == 7 {
            write_geometry(reader, output, depth + 1)?;
            continue;
        }
        let (member_little, member_kind) = reader.header()?;
        match (kind, member_kind) {
            (4, 1) => write_point(reader, member_little, output)?,
            (5, 2) => write_points(reader, member_little, output)?,
            (6, 3) => write_rings(reader, member_little, output)?,
            _ => {
                return Err(GeometryError(format!(
                    "a member of type {member_kind} in a geometry of type {kind}"
                )))
            }
        }
    }
    output.push(b')');
    Ok(())
}

/// A coordinate as MariaDB writes it: the shortest digits that read back to
/// the same double, in plain decimal for exponents from -15 to 14, otherwise
/// as `1.5e-20` / `1e15`; negative zero as `0`.
fn write_number(value: f64, output: &mut Vec<u8>) {
    if value == 0.0 {
        output.push(b'0');
        return;
    }
    if !value.is_finite() {
        output.extend_from_slice(value.to_string().as_bytes());
        return;
    }
    let scientific = format!("{value:e}");
    let (mantissa, exponent) = scientific
        .split_once('e')
        .expect("Rust's {:e} always has an exponent");
    let exponent: i32 = exponent.parse().expect("a decimal exponent");
    if !(-15..15).contains(&exponent) {
        output.extend_from_slice(scientific.as_bytes());
        return;
    }
    let (sign, mantissa) = match mantissa.strip_prefix('-') {
        Some(rest) => ("-", rest),
        None => ("", mantissa),
    };
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    output.extend_from_slice(sign.as_bytes());
    if exponent < 0 {
        output.extend_from_slice(b"0.");
        output.extend(std::iter::repeat_n(b'0', (-exponent - 1) as usize));
        output.extend_from_slice(digits.as_bytes());
        return;
    }
    let whole = exponent as usize + 1;
    if digits.len() <= whole {
        output.extend_from_slice(digits.as_bytes());
        output.extend(std::iter::repeat_n(b'0', whole - digits.len()));
    } else {
        output.extend_from_slice(&digits.as_bytes()[..whole]);
        output.push(b'.');
        output.extend_from_slice(&digits.as_bytes()[whole..]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(text: &str) -> Vec<u8> {
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

    /// SRID 0 and little-endian WKB built from parts.
    fn geometry(parts: &[&[u8]]) -> Vec<u8> {
        let mut value = vec![0, 0, 0, 0];
        for part in parts {
            value.extend_from_slice(part);
        }
        value
    }

    fn point(x: f64, y: f64) -> Vec<u8> {
        let mut wkb = vec![1];
        wkb.extend_from_slice(&1u32.to_le_bytes());
        wkb.extend_from_slice(&x.to_le_bytes());
        wkb.extend_from_slice(&y.to_le_bytes());
        wkb
    }

    #[test]
    fn numbers_are_written_as_the_server_writes_them() {
        // Pairs seen from MariaDB 10.11's ST_AsText.
        for (value, expected) in [
            (1.0, "1"),
            (-2.25, "-2.25"),
            (0.1, "0.1"),
            (1e20, "1e20"),
            (1e-7, "0.0000001"),
            // Written by the server from 123456789.123456789, which reads as this double.
            (123_456_789.123_456_79, "123456789.12345679"),
            (0.300_000_000_000_000_04, "0.30000000000000004"),
            (-0.0, "0"),
            (1e14, "100000000000000"),
            (1e15, "1e15"),
            (1_234_567_890_123_456.0, "1.234567890123456e15"),
            (1e-15, "0.000000000000001"),
            (1e-16, "1e-16"),
            (1.5e-20, "1.5e-20"),
            (12345.678e-15, "0.000000000012345678"),
            (999_999_999_999_999.9, "999999999999999.9"),
            (-1e15, "-1e15"),
            (5e-324, "5e-324"),
        ] {
            let mut output = Vec::new();
            write_number(value, &mut output);
            assert_eq!(String::from_utf8(output).unwrap(), expected, "{value:e}");
        }
    }

    #[test]
    fn every_geometry_type_as_st_astext_writes_it() {
        // POINT(1.5 -2), as the server sends it (SRID 0).
        let sent = hex("000000000101000000000000000000F83F00000000000000C0");
        assert_eq!(wkt(&sent).unwrap(), "POINT(1.5 -2)");
        // An SRID is not part of the text.
        let mut with_srid = sent.clone();
        with_srid[..4].copy_from_slice(&4326u32.to_le_bytes());
        assert_eq!(wkt(&with_srid).unwrap(), "POINT(1.5 -2)");

        let line = [
            vec![1],
            2u32.to_le_bytes().to_vec(),
            2u32.to_le_bytes().to_vec(),
            [0.0f64, 0.0, 1.0, 1.0]
                .iter()
                .flat_map(|v| v.to_le_bytes())
                .collect(),
        ]
        .concat();
        assert_eq!(wkt(&geometry(&[&line])).unwrap(), "LINESTRING(0 0,1 1)");

        let ring = |points: &[f64]| -> Vec<u8> {
            let mut ring = ((points.len() / 2) as u32).to_le_bytes().to_vec();
            ring.extend(points.iter().flat_map(|v| v.to_le_bytes()));
            ring
        };
        let outer = ring(&[0.0, 0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 0.0]);
        let inner = ring(&[0.2, 0.2, 0.3, 0.2, 0.3, 0.3, 0.2, 0.2]);
        let polygon = [
            vec![1],
            3u32.to_le_bytes().to_vec(),
            2u32.to_le_bytes().to_vec(),
            outer.clone(),
            inner,
        ]
        .concat();
        assert_eq!(
            wkt(&geometry(&[&polygon])).unwrap(),
            "POLYGON((0 0,1 0,1 1,0 0),(0.2 0.2,0.3 0.2,0.3 0.3,0.2 0.2))"
        );

        let multipoint = [
            vec![1],
            4u32.to_le_bytes().to_vec(),
            2u32.to_le_bytes().to_vec(),
            point(1.0, 1.0),
            point(2.0, 2.0),
        ]
        .concat();
        assert_eq!(
            wkt(&geometry(&[&multipoint])).unwrap(),
            "MULTIPOINT(1 1,2 2)"
        );

        let multipolygon = [
            vec![1],
            6u32.to_le_bytes().to_vec(),
            1u32.to_le_bytes().to_vec(),
            vec![1],
            3u32.to_le_bytes().to_vec(),
            1u32.to_le_bytes().to_vec(),
            outer,
        ]
        .concat();
        assert_eq!(
            wkt(&geometry(&[&multipolygon])).unwrap(),
            "MULTIPOLYGON(((0 0,1 0,1 1,0 0)))"
        );

        let collection = [
            vec![1],
            7u32.to_le_bytes().to_vec(),
            3u32.to_le_bytes().to_vec(),
            point(1.0, 2.0),
            line,
            multipoint,
        ]
        .concat();
        assert_eq!(
            wkt(&geometry(&[&collection])).unwrap(),
            "GEOMETRYCOLLECTION(POINT(1 2),LINESTRING(0 0,1 1),MULTIPOINT(1 1,2 2))"
        );
        let empty = [
            vec![1],
            7u32.to_le_bytes().to_vec(),
            0u32.to_le_bytes().to_vec(),
        ]
        .concat();
        assert_eq!(
            wkt(&geometry(&[&empty])).unwrap(),
            "GEOMETRYCOLLECTION EMPTY"
        );
    }

    #[test]
    fn big_endian_geometries_read_the_same() {
        let mut big = vec![0];
        big.extend_from_slice(&1u32.to_be_bytes());
        big.extend_from_slice(&1.5f64.to_be_bytes());
        big.extend_from_slice(&(-2.0f64).to_be_bytes());
        assert_eq!(wkt(&geometry(&[&big])).unwrap(), "POINT(1.5 -2)");
        // A big-endian collection of a little-endian point.
        let mut collection = vec![0];
        collection.extend_from_slice(&7u32.to_be_bytes());
        collection.extend_from_slice(&1u32.to_be_bytes());
        collection.extend_from_slice(&point(3.0, 4.0));
        assert_eq!(
            wkt(&geometry(&[&collection])).unwrap(),
            "GEOMETRYCOLLECTION(POINT(3 4))"
        );
    }

    #[test]
    fn malformed_values_are_errors_never_panics() {
        let polygon = geometry(&[&[
            vec![1],
            3u32.to_le_bytes().to_vec(),
            1u32.to_le_bytes().to_vec(),
            4u32.to_le_bytes().to_vec(),
            [0.0f64; 8].iter().flat_map(|v| v.to_le_bytes()).collect(),
        ]
        .concat()]);
        assert!(wkt(&polygon).is_ok());
        for cut in 0..polygon.len() {
            assert!(wkt(&polygon[..cut]).is_err(), "cut at {cut}");
        }
        let absurd = geometry(&[&[
            vec![1],
            2u32.to_le_bytes().to_vec(),
            u32::MAX.to_le_bytes().to_vec(),
        ]
        .concat()]);
        assert!(wkt(&absurd).unwrap_err().0.contains("past its end"));
        let unknown = geometry(&[&[vec![1], 99u32.to_le_bytes().to_vec()].concat()]);
        assert!(wkt(&unknown).unwrap_err().0.contains("type 99"));
        let bad_order = geometry(&[&[vec![7], 1u32.to_le_bytes().to_vec()].concat()]);
        assert!(wkt(&bad_order).is_err());
        // Collections nested a thousand deep.
        let mut bomb = Vec::new();
        for _ in 0..1000 {
            bomb.push(1);
            bomb.extend_from_slice(&7u32.to_le_bytes());
            bomb.extend_from_slice(&1u32.to_le_bytes());
        }
        bomb.extend_from_slice(&point(0.0, 0.0));
        assert!(wkt(&geometry(&[&bomb]))
            .unwrap_err()
            .0
            .contains("nested too deep"));
        let mut trailing = geometry(&[&point(1.0, 2.0)]);
        trailing.push(0);
        assert!(wkt(&trailing).is_err());
    }
}
