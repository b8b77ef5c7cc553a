//! Arrow's number widths from the database's type names: which integers are
//! narrowed and which floats are single precision. The text mapping and the
//! binary path both ask here, so a column maps the same whichever way its
//! values arrived.

use arrow_schema::DataType;

/// Arrow's integer type for a database type name: the narrow types where the
/// name promises the range (PostgreSQL's `int2`/`int4`, MariaDB's `TINYINT`
/// … `INT` and their unsigned forms), `UInt64` for MariaDB's `BIGINT
/// UNSIGNED`, `Int64` otherwise. SQLite's `INTEGER` is 64-bit, so it is not
/// narrowed (and neither is PostgreSQL's, whose name is `int4`).
pub(crate) fn integer_type(type_name: &str) -> DataType {
    match type_name.to_ascii_lowercase().as_str() {
        "int2" | "smallint" | "tinyint" | "tinyint unsigned" | "year" => DataType::Int16,
        "int4" | "int" | "mediumint" | "smallint unsigned" | "mediumint unsigned" => {
            DataType::Int32
        }
        "bigint unsigned" => DataType::UInt64,
        _ => DataType::Int64,
    }
}

/// Whether a float type is single precision (PostgreSQL's `float4`,
/// MariaDB's `FLOAT`), written as `Float32`; everything else, SQLite's `REAL`
/// included (it is a double), is `Float64`. The text and binary paths both
/// ask here, so a column maps the same whichever way it arrived.
pub(crate) fn is_single_precision(type_name: &str) -> bool {
    matches!(
        type_name.to_ascii_lowercase().as_str(),
        "float4" | "float" | "float unsigned"
    )
}
