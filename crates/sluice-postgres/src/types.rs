//! PostgreSQL type OIDs to [`Kind`]s.
//!
//! Built-in types come from a static table. Anything else (enums, domains,
//! composites, arrays of those, extension types, ranges) is looked up in `pg_type`
//! in one round trip per level of nesting, only when such a column appears.
//! The JSON classification follows the server's `row_to_json`: only `int2/4/8`,
//! `float4/8` and `numeric` are JSON numbers; `oid`, `money` and friends are strings.

use std::collections::HashMap;

use sluice_core::{Column, DecimalShape, Error, Field, Kind};

/// A PostgreSQL type OID.
pub type Oid = u32;

/// The `bytea` type, fetched in binary because its raw bytes are its canonical form.
pub const BYTEA: Oid = 17;

/// The kind and name of a built-in type, if it is in the static table.
pub fn builtin(oid: Oid) -> Option<(Kind, &'static str)> {
    use Kind::*;
    let array = |element: Kind| Array(Box::new(element));
    Some(match oid {
        16 => (Bool, "bool"),
        17 => (Bytes, "bytea"),
        18 => (Text, "char"),
        19 => (Text, "name"),
        20 => (Integer, "int8"),
        21 => (Integer, "int2"),
        23 => (Integer, "int4"),
        25 => (Text, "text"),
        26 => (Other, "oid"),
        114 => (Json, "json"),
        142 => (Other, "xml"),
        650 => (Other, "cidr"),
        700 => (Float, "float4"),
        701 => (Float, "float8"),
        705 => (Text, "unknown"),
        790 => (Other, "money"),
        829 => (Other, "macaddr"),
        869 => (Other, "inet"),
        1042 => (Text, "bpchar"),
        1043 => (Text, "varchar"),
        1082 => (Date, "date"),
        1083 => (Time, "time"),
        1114 => (Timestamp, "timestamp"),
        1184 => (TimestampTz, "timestamptz"),
        1186 => (Interval, "interval"),
        1266 => (TimeTz, "timetz"),
        1560 => (Other, "bit"),
        1562 => (Other, "varbit"),
        1700 => (Decimal, "numeric"),
        2950 => (Other, "uuid"),
        3802 => (Json, "jsonb"),
        4072 => (Other, "jsonpath"),
        143 => (array(Other), "_xml"),
        199 => (array(Json), "_json"),
        651 => (array(Other), "_cidr"),
        791 => (array(Other), "_money"),
        1000 => (array(Bool), "_bool"),
        1001 => (array(Bytes), "_bytea"),
        1002 => (array(Text), "_char"),
        1003 => (array(Text), "_name"),
        1005 => (array(Integer), "_int2"),
        1007 => (array(Integer), "_int4"),
        1009 => (array(Text), "_text"),
        1014 => (array(Text), "_bpchar"),
        1015 => (array(Text), "_varchar"),
        1016 => (array(Integer), "_int8"),
        1021 => (array(Float), "_float4"),
        1022 => (array(Float), "_float8"),
        1028 => (array(Other), "_oid"),
        1040 => (array(Other), "_macaddr"),
        1041 => (array(Other), "_inet"),
        1115 => (array(Timestamp), "_timestamp"),
        1182 => (array(Date), "_date"),
        1183 => (array(Time), "_time"),
        1185 => (array(TimestampTz), "_timestamptz"),
        1187 => (array(Interval), "_interval"),
        1231 => (array(Decimal), "_numeric"),
        1270 => (array(TimeTz), "_timetz"),
        2951 => (array(Other), "_uuid"),
        3807 => (array(Json), "_jsonb"),
        _ => return None,
    })
}

/// One `pg_type` row as the catalog query returns it.
#[derive(Debug, Clone)]
pub(crate) struct CatalogType {
    pub name: String,
    pub type_type: char,
    pub category: char,
    pub element: Oid,
    pub base: Oid,
    pub fields: Vec<(String, Oid)>,
}

/// Catalog entries by OID, as [`resolve`] looks them up.
pub(crate) type Catalog = HashMap<Oid, CatalogType>;

/// The catalog query: for each OID, its `pg_type` facts and, for composites, the
/// live attributes in order.
pub(crate) const CATALOG_QUERY: &str = "select t.oid::int8, t.typname::text, t.typtype::text, \
     t.typcategory::text, t.typelem::int8, t.typbasetype::int8, \
     coalesce((select json_agg(json_build_array(a.attname, a.atttypid::int8) order by a.attnum) \
               from pg_catalog.pg_attribute a \
               where a.attrelid = t.typrelid and a.attnum > 0 and not a.attisdropped)::text, '[]') \
     from pg_catalog.pg_type t where t.oid = any($1::oid[])";

/// Parses the catalog query's rows.
pub(crate) fn parse_catalog_rows(
    rows: Vec<Vec<Option<String>>>,
) -> Result<HashMap<Oid, CatalogType>, Error> {
    let bad = || Error::protocol("unexpected row from the type catalog query");
    let mut types = HashMap::new();
    for row in rows {
        let text = |index: usize| row.get(index).cloned().flatten().ok_or_else(bad);
        let number = |index: usize| -> Result<Oid, Error> {
            text(index)?
                .parse::<i64>()
                .map(|n| n as Oid)
                .map_err(|_| bad())
        };
        let fields: Vec<(String, i64)> = serde_json::from_str(&text(6)?).map_err(|_| bad())?;
        types.insert(
            number(0)?,
            CatalogType {
                name: text(1)?,
                type_type: text(2)?.chars().next().unwrap_or('b'),
                category: text(3)?.chars().next().unwrap_or('U'),
                element: number(4)?,
                base: number(5)?,
                fields: fields
                    .into_iter()
                    .map(|(name, oid)| (name, oid as Oid))
                    .collect(),
            },
        );
    }
    Ok(types)
}

/// The OIDs a catalog entry refers to, which must be known before it can be turned into a kind.
pub(crate) fn references(entry: &CatalogType) -> Vec<Oid> {
    match entry.type_type {
        'd' => vec![entry.base],
        'c' => entry.fields.iter().map(|(_, oid)| *oid).collect(),
        'b' if entry.category == 'A' && entry.element != 0 => vec![entry.element],
        _ => Vec::new(),
    }
}

/// The kind of `oid`, given the catalog entries looked up so far. Types that cannot
/// be resolved (missing entries, cycles) fall back to [`Kind::Other`]: the server's
/// text output is always a faithful rendering.
pub(crate) fn kind_of(oid: Oid, catalog: &HashMap<Oid, CatalogType>, depth: usize) -> Kind {
    if let Some((kind, _)) = builtin(oid) {
        return kind;
    }
    let Some(entry) = catalog.get(&oid) else {
        return Kind::Other;
    };
    if depth > 32 {
        return Kind::Other;
    }
    match entry.type_type {
        'd' => kind_of(entry.base, catalog, depth + 1),
        'e' => Kind::Text,
        'c' => Kind::Composite(
            entry
                .fields
                .iter()
                .map(|(name, field_oid)| Field {
                    name: name.clone(),
                    kind: kind_of(*field_oid, catalog, depth + 1),
                })
                .collect(),
        ),
        'b' if entry.category == 'A' && entry.element != 0 => {
            Kind::Array(Box::new(kind_of(entry.element, catalog, depth + 1)))
        }
        'b' if entry.category == 'S' => Kind::Text,
        _ => Kind::Other,
    }
}

/// A result column as the server describes it: its name, its type's OID and
/// its type modifier (`atttypmod`), which holds `numeric(p,s)`'s precision and
/// scale. A description without modifiers (the table catalog's) counts as -1,
/// PostgreSQL's "none".
pub(crate) trait Described {
    /// The column's name.
    fn name(&self) -> &str;
    /// The column's type.
    fn oid(&self) -> Oid;
    /// The type modifier, -1 when there is none.
    fn modifier(&self) -> i32 {
        -1
    }
}

impl Described for (String, Oid) {
    fn name(&self) -> &str {
        &self.0
    }

    fn oid(&self) -> Oid {
        self.1
    }
}

impl Described for (String, Oid, i32) {
    fn name(&self) -> &str {
        &self.0
    }

    fn oid(&self) -> Oid {
        self.1
    }

    fn modifier(&self) -> i32 {
        self.2
    }
}

/// The precision and scale a `numeric` type modifier declares, which packs
/// them as `((p << 16) | s) + 4`; the scale is an 11-bit signed number since
/// PostgreSQL 15 allows negative scales (older servers never set the bits that
/// sign-extends). `None` for -1 (unconstrained) and anything malformed.
pub(crate) fn numeric_shape(modifier: i32) -> Option<DecimalShape> {
    let packed = modifier.checked_sub(4).filter(|packed| *packed >= 0)?;
    let precision = u16::try_from((packed >> 16) & 0xffff).ok()?;
    let scale = (((packed & 0x7ff) ^ 1024) - 1024) as i16;
    (1..=1000)
        .contains(&precision)
        .then_some(DecimalShape { precision, scale })
}

/// The most characters a `varchar(n)` modifier allows (`n + 4` packed);
/// `None` for other types (a `char(n)`'s trailing spaces mean nothing: it
/// pads and compares without them) and for -1 (no limit).
pub(crate) fn character_length(oid: Oid, modifier: i32) -> Option<u32> {
    const VARCHAR: Oid = 1043;
    (oid == VARCHAR)
        .then(|| modifier.checked_sub(4))
        .flatten()
        .and_then(|length| u32::try_from(length).ok())
}

/// Whether values of the built-in type `oid` in PostgreSQL's binary result
/// format are the binary form of [`sluice_core::value`]: big-endian integers
/// and floats, one-byte booleans, dates and timestamps from 2000-01-01, times in
/// microseconds, UUIDs' 16 bytes. Only these exact OIDs: a domain over one of
/// them, or `oid` (unsigned), stays text.
pub(crate) fn sends_binary(oid: Oid) -> bool {
    matches!(
        oid,
        16 | 20 | 21 | 23 | 700 | 701 | 1082 | 1083 | 1114 | 1184 | 2950
    )
}

/// Whether values of type `oid` in PostgreSQL's binary format mean the same to
/// any other PostgreSQL server, so that a copy may pass them on unread
/// ([`sluice_core::Encoding::Native`]): the built-in types of [`builtin`],
/// whose OIDs are fixed (an array's binary form names its element's OID, a
/// user-defined type's differs between databases). `unknown` is left out: no
/// table column has it.
pub(crate) fn portable_binary(oid: Oid) -> bool {
    oid != 705 && builtin(oid).is_some()
}

/// The schema of result columns given by name, type OID and modifier, once the
/// catalog entries they need have been looked up with [`resolve`]. Decimal
/// columns (and arrays of decimals, whose modifier is the element's) get the
/// shape their modifier declares.
pub(crate) fn schema_of<C: Described>(columns: &[C], catalog: &Catalog) -> sluice_core::Schema {
    sluice_core::Schema {
        columns: columns
            .iter()
            .map(|described| {
                let kind = kind_of(described.oid(), catalog, 0);
                let shape = match &kind {
                    Kind::Decimal => numeric_shape(described.modifier()),
                    Kind::Array(element) if **element == Kind::Decimal => {
                        numeric_shape(described.modifier())
                    }
                    _ => None,
                };
                Column::new(described.name(), kind, name_of(described.oid(), catalog))
                    .with_decimal(shape)
            })
            .collect(),
    }
}

/// The type's name, from the static table or the catalog.
pub(crate) fn name_of(oid: Oid, catalog: &HashMap<Oid, CatalogType>) -> String {
    builtin(oid)
        .map(|(_, name)| name.to_owned())
        .or_else(|| catalog.get(&oid).map(|entry| entry.name.clone()))
        .unwrap_or_else(|| format!("oid {oid}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numeric_modifiers_give_precision_and_scale() {
        let modifier = |precision: i32, scale: i32| ((precision << 16) | (scale & 0x7ff)) + 4;
        let shape = |precision, scale| Some(DecimalShape { precision, scale });
        assert_eq!(numeric_shape(modifier(10, 2)), shape(10, 2));
        assert_eq!(numeric_shape(modifier(1000, 0)), shape(1000, 0));
        // PostgreSQL 15: numeric(5,-2) rounds to hundreds, numeric(3,5) holds < 0.001.
        assert_eq!(numeric_shape(modifier(5, -2)), shape(5, -2));
        assert_eq!(numeric_shape(modifier(3, 5)), shape(3, 5));
        assert_eq!(numeric_shape(-1), None);
        assert_eq!(numeric_shape(3), None);
    }

    #[test]
    fn decimal_columns_and_arrays_of_them_carry_their_shape() {
        let catalog = HashMap::new();
        let typed = [
            ("a".to_owned(), 1700, ((12 << 16) | 3) + 4),
            ("b".to_owned(), 1231, ((7 << 16) | 2) + 4),
            ("c".to_owned(), 1700, -1),
            ("d".to_owned(), 23, -1),
        ];
        let schema = schema_of(&typed, &catalog);
        let shapes: Vec<_> = schema.columns.iter().map(|column| column.decimal).collect();
        assert_eq!(
            shapes,
            [
                Some(DecimalShape {
                    precision: 12,
                    scale: 3
                }),
                Some(DecimalShape {
                    precision: 7,
                    scale: 2
                }),
                None,
                None
            ]
        );
        // Without modifiers (the table catalog's columns), no shapes.
        let untyped = [("a".to_owned(), 1700)];
        assert_eq!(schema_of(&untyped, &catalog).columns[0].decimal, None);
    }
}
