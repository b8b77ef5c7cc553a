//! Which Arrow type each column becomes, and the converter that builds it: the
//! type table of [`super`]'s docs, decided here and nowhere else (the number
//! widths, which the binary path asks too, in [`super::widths`]).
//!
//! The [`Kind`] says how values are spelled; the database's type name refines
//! it where Arrow has narrower types (integer and float widths, UUIDs), and the
//! declared [`DecimalShape`] gives decimals their precision and scale.

use arrow_array::types::{
    Date32Type, Decimal128Type, Decimal256Type, Float32Type, Float64Type, Int16Type, Int32Type,
    Int64Type, Time64MicrosecondType, TimestampMicrosecondType, UInt64Type,
};
use arrow_buffer::i256;
use arrow_schema::{DataType, TimeUnit};
use sluice_core::{Column, DecimalShape, Encoding, Kind};

use super::convert::{
    extension, text_of, Binary, Bool, Interval, Metadata, Primitive, TextConverter, Utf8,
};
use super::nested::{List, Struct, TopList};
use super::text;
use super::widths::{integer_type, is_single_precision};

/// Settings that change the mapping.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Mapping {
    /// The scale of Decimal128(38, scale) for decimals without a declared
    /// shape; `None` writes their exact text.
    pub numeric_scale: Option<i8>,
    /// Parquet cannot store Arrow's month-day-nanosecond intervals: they
    /// become a struct of the three parts.
    pub intervals_as_structs: bool,
}

/// What is known of a value's type beyond its kind: the column's type name
/// and decimal shape at top level and for array elements, nothing inside
/// composites (whose fields carry only kinds).
#[derive(Clone, Copy)]
struct Hints<'a> {
    type_name: &'a str,
    decimal: Option<DecimalShape>,
}

const NO_HINTS: Hints<'static> = Hints {
    type_name: "",
    decimal: None,
};

/// The converter for a result column.
pub(crate) fn column_converter(column: &Column, mapping: Mapping) -> Box<dyn TextConverter> {
    if column.encoding == Encoding::Binary {
        if let Some(converter) = super::binary::binary_converter(column) {
            return converter;
        }
    }
    let hints = Hints {
        type_name: &column.type_name,
        decimal: column.decimal,
    };
    match &column.kind {
        // `box` arrays separate elements with `;`, which the list parser does
        // not read; their literal stays text.
        Kind::Array(_) if column.type_name == "_box" => Box::new(Utf8::new(Metadata::new())),
        Kind::Array(element) => {
            let element_hints = Hints {
                type_name: column
                    .type_name
                    .strip_prefix('_')
                    .unwrap_or(&column.type_name),
                ..hints
            };
            Box::new(TopList::new(converter(
                element,
                element_hints,
                mapping,
                true,
            )))
        }
        kind => converter(kind, hints, mapping, false),
    }
}

/// The converter for a value of `kind`; `in_literal` for elements of arrays
/// and fields of records, where binary values are hex text.
fn converter(
    kind: &Kind,
    hints: Hints<'_>,
    mapping: Mapping,
    in_literal: bool,
) -> Box<dyn TextConverter> {
    match kind {
        Kind::Bool => Box::new(Bool::default()),
        Kind::Integer => integer_converter(hints.type_name),
        Kind::Float => float_converter(hints.type_name),
        Kind::Decimal => decimal_converter(hints.decimal, mapping.numeric_scale),
        Kind::Bytes => Box::new(Binary::new(in_literal)),
        Kind::Json => Box::new(Utf8::new(extension("arrow.json"))),
        Kind::Date => Box::new(Primitive::<Date32Type, _>::new(
            DataType::Date32,
            text::parse_date,
        )),
        Kind::Time => Box::new(Primitive::<Time64MicrosecondType, _>::new(
            DataType::Time64(TimeUnit::Microsecond),
            text::parse_time,
        )),
        Kind::Timestamp => Box::new(Primitive::<TimestampMicrosecondType, _>::new(
            DataType::Timestamp(TimeUnit::Microsecond, None),
            |text: &[u8]| text::parse_timestamp(text, false),
        )),
        Kind::TimestampTz => Box::new(Primitive::<TimestampMicrosecondType, _>::new(
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into())),
            |text: &[u8]| text::parse_timestamp(text, true),
        )),
        Kind::Interval => Box::new(Interval::new(mapping.intervals_as_structs)),
        // PostgreSQL's `uuid` is of kind Other, MariaDB's `UUID` of kind Text.
        Kind::Other | Kind::Text if is_uuid(hints.type_name) => {
            Box::new(super::convert::Uuid::new())
        }
        Kind::Array(element) => Box::new(List::new(1, converter(element, NO_HINTS, mapping, true))),
        Kind::Composite(fields) if !fields.is_empty() => Box::new(Struct::new(
            fields.iter().map(|field| field.name.clone()).collect(),
            fields
                .iter()
                .map(|field| converter(&field.kind, NO_HINTS, mapping, true))
                .collect(),
        )),
        // Times with a zone (Arrow has no such type), composites without
        // fields, text and anything else: the text itself.
        Kind::Text | Kind::TimeTz | Kind::Composite(_) | Kind::Other => {
            Box::new(Utf8::new(Metadata::new()))
        }
    }
}

fn is_uuid(type_name: &str) -> bool {
    type_name.eq_ignore_ascii_case("uuid")
}

fn integer_converter(type_name: &str) -> Box<dyn TextConverter> {
    match integer_type(type_name) {
        DataType::Int16 => Box::new(Primitive::<Int16Type, _>::new(
            DataType::Int16,
            |text: &[u8]| text::parse_narrow::<i16>(text, 16),
        )),
        DataType::Int32 => Box::new(Primitive::<Int32Type, _>::new(
            DataType::Int32,
            |text: &[u8]| text::parse_narrow::<i32>(text, 32),
        )),
        DataType::UInt64 => Box::new(Primitive::<UInt64Type, _>::new(
            DataType::UInt64,
            text::parse_u64,
        )),
        _ => Box::new(Primitive::<Int64Type, _>::new(
            DataType::Int64,
            text::parse_i64,
        )),
    }
}

fn float_converter(type_name: &str) -> Box<dyn TextConverter> {
    if is_single_precision(type_name) {
        Box::new(Primitive::<Float32Type, _>::new(
            DataType::Float32,
            text::parse_f32,
        ))
    } else {
        Box::new(Primitive::<Float64Type, _>::new(
            DataType::Float64,
            text::parse_f64,
        ))
    }
}

/// The Arrow decimal for a declared shape, as precision and scale Arrow and
/// Parquet both accept: a negative scale (PostgreSQL 15's `numeric(5,-2)`)
/// becomes scale 0 with the digits it implies, a scale above the precision
/// (`numeric(3,5)`) widens the precision to the scale. `None` when no Arrow
/// decimal is wide enough (more than 76 digits).
pub(crate) fn arrow_decimal(shape: DecimalShape) -> Option<(u8, i8)> {
    let (precision, scale) = (i32::from(shape.precision), i32::from(shape.scale));
    let (precision, scale) = match scale {
        scale if scale < 0 => (precision - scale, 0),
        scale if scale > precision => (scale, scale),
        scale => (precision, scale),
    };
    Some((
        u8::try_from(precision).ok().filter(|p| *p <= 76)?,
        i8::try_from(scale).ok()?,
    ))
}

fn decimal_converter(
    shape: Option<DecimalShape>,
    numeric_scale: Option<i8>,
) -> Box<dyn TextConverter> {
    let declared = shape.map(arrow_decimal);
    let (precision, scale) = match (declared, numeric_scale) {
        (Some(Some(arrow)), _) => arrow,
        (None, Some(scale)) => (38, scale),
        // Declared but wider than 76 digits, or not declared: only text
        // holds every value, marked so that readers can make it numbers.
        (Some(None), _) | (None, None) => return Box::new(Utf8::new(text_of("numeric"))),
    };
    if precision <= 38 {
        Box::new(Primitive::<Decimal128Type, _>::new(
            DataType::Decimal128(precision, scale),
            move |text: &[u8]| text::parse_decimal::<i128>(text, precision, scale),
        ))
    } else {
        Box::new(Primitive::<Decimal256Type, _>::new(
            DataType::Decimal256(precision, scale),
            move |text: &[u8]| text::parse_decimal::<i256>(text, precision, scale),
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use sluice_core::Field;

    const IPC: Mapping = Mapping {
        numeric_scale: None,
        intervals_as_structs: false,
    };

    fn data_type(column: Column, mapping: Mapping) -> DataType {
        let mut converter = column_converter(&column, mapping);
        converter.finish().data_type().clone()
    }

    fn shape(precision: u16, scale: i16) -> Option<DecimalShape> {
        Some(DecimalShape { precision, scale })
    }

    #[test]
    fn integer_and_float_widths_follow_the_type_name() {
        for (name, expected) in [
            ("int2", DataType::Int16),
            ("int4", DataType::Int32),
            ("int8", DataType::Int64),
            ("tinyint", DataType::Int16),
            ("mediumint unsigned", DataType::Int32),
            ("int unsigned", DataType::Int64),
            ("bigint unsigned", DataType::UInt64),
            ("integer", DataType::Int64),
        ] {
            assert_eq!(
                data_type(Column::new("n", Kind::Integer, name), IPC),
                expected,
                "{name}"
            );
        }
        assert_eq!(
            data_type(Column::new("f", Kind::Float, "float4"), IPC),
            DataType::Float32
        );
        assert_eq!(
            data_type(Column::new("f", Kind::Float, "real"), IPC),
            DataType::Float64
        );
        assert_eq!(
            data_type(Column::new("f", Kind::Float, "float8"), IPC),
            DataType::Float64
        );
    }

    #[test]
    fn decimals_by_shape_then_by_the_numeric_scale_setting() {
        let decimal = |shape| Column::new("d", Kind::Decimal, "numeric").with_decimal(shape);
        assert_eq!(
            data_type(decimal(shape(10, 2)), IPC),
            DataType::Decimal128(10, 2)
        );
        assert_eq!(
            data_type(decimal(shape(50, 5)), IPC),
            DataType::Decimal256(50, 5)
        );
        assert_eq!(
            data_type(decimal(shape(5, -2)), IPC),
            DataType::Decimal128(7, 0)
        );
        assert_eq!(
            data_type(decimal(shape(3, 5)), IPC),
            DataType::Decimal128(5, 5)
        );
        for text in [decimal(shape(1000, 0)), decimal(None)] {
            let converter = column_converter(&text, IPC);
            assert_eq!(converter.metadata()["sluice.text"], "numeric");
            assert_eq!(data_type(text, IPC), DataType::Utf8);
        }
        let scaled = Mapping {
            numeric_scale: Some(4),
            ..IPC
        };
        assert_eq!(
            data_type(decimal(None), scaled),
            DataType::Decimal128(38, 4)
        );
        assert_eq!(
            data_type(decimal(shape(10, 2)), scaled),
            DataType::Decimal128(10, 2)
        );
    }

    #[test]
    fn nested_and_special_kinds() {
        let uuids = data_type(
            Column::new("u", Kind::Array(Box::new(Kind::Other)), "_uuid"),
            IPC,
        );
        let DataType::List(item) = uuids else {
            panic!("{uuids:?}")
        };
        assert_eq!(item.data_type(), &DataType::FixedSizeBinary(16));
        assert_eq!(item.metadata()["ARROW:extension:name"], "arrow.uuid");
        let numerics = Column::new("n", Kind::Array(Box::new(Kind::Decimal)), "_numeric")
            .with_decimal(shape(6, 1));
        assert!(
            matches!(data_type(numerics, IPC), DataType::List(item) if item.data_type() == &DataType::Decimal128(6, 1))
        );
        let record = Kind::Composite(vec![Field {
            name: "at".into(),
            kind: Kind::Interval,
        }]);
        let parquet = Mapping {
            intervals_as_structs: true,
            ..IPC
        };
        let DataType::Struct(fields) = data_type(Column::new("r", record, "pair"), parquet) else {
            panic!()
        };
        assert_eq!(
            fields[0].data_type(),
            &DataType::Struct(Interval::struct_fields())
        );
        assert_eq!(
            data_type(Column::new("e", Kind::Composite(vec![]), "empty"), IPC),
            DataType::Utf8
        );
        assert_eq!(
            data_type(Column::new("t", Kind::TimeTz, "timetz"), IPC),
            DataType::Utf8
        );
        assert_eq!(
            data_type(Column::new("t", Kind::TimestampTz, "timestamptz"), IPC),
            DataType::Timestamp(TimeUnit::Microsecond, Some("UTC".into()))
        );
    }
}
