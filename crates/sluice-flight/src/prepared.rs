//! Flight SQL's prepared statements, with no state on the server: enough for
//! ADBC's and the Flight SQL JDBC driver's parameterised queries.
//!
//! - `CreatePreparedStatement` (`DoAction`) answers a handle: the statement,
//!   signed with the tickets' key (so a client cannot alter it, and any
//!   replica sharing `ticket_secret` reads it);
//! - `DoPut` of a `CommandPreparedStatementQuery` with one row of parameters
//!   answers a new handle that carries their values too
//!   (`DoPutPreparedStatementResult`, which Flight SQL clients use in place of
//!   the one they had);
//! - `GetFlightInfo` of a handle plans the statement with its values, as ad-hoc
//!   SQL (`POST /sql`'s role, scope, read-only transaction and limits);
//! - `ClosePreparedStatement` has nothing to free.
//!
//! A handle grants nothing: every step is admitted again as ad-hoc SQL for the
//! token that presents it. So handles do not expire. Values are bound as
//! `POST /sql` binds JSON ones: each Arrow value becomes the JSON value it is
//! (integers and decimals keep every digit; dates and timestamps are ISO text
//! the database converts to the type the statement needs).

use arrow_array::cast::AsArray;
use arrow_array::types::{
    Date32Type, Date64Type, Decimal128Type, Decimal256Type, Int16Type, Int32Type, Int64Type,
    Int8Type, Time32MillisecondType, Time32SecondType, Time64MicrosecondType, Time64NanosecondType,
    TimestampMicrosecondType, TimestampMillisecondType, TimestampNanosecondType,
    TimestampSecondType, UInt16Type, UInt32Type, UInt64Type, UInt8Type,
};
use arrow_array::{Array, ArrowPrimitiveType, RecordBatch};
use arrow_schema::{DataType, TimeUnit};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ticket::{Refused, TicketKey};

/// Flight SQL's `ActionCreatePreparedStatementRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateRequest {
    /// The statement.
    #[prost(string, tag = "1")]
    pub query: String,
    /// A transaction to run in (refused: each statement has its own).
    #[prost(bytes = "bytes", optional, tag = "2")]
    pub transaction_id: Option<bytes::Bytes>,
}

/// Flight SQL's `ActionCreatePreparedStatementResult`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateResult {
    /// The handle.
    #[prost(bytes = "bytes", tag = "1")]
    pub prepared_statement_handle: bytes::Bytes,
    /// The result's schema, IPC-encapsulated; empty: told by `GetFlightInfo`.
    #[prost(bytes = "bytes", tag = "2")]
    pub dataset_schema: bytes::Bytes,
    /// The parameters' schema; empty: any types, converted by the database.
    #[prost(bytes = "bytes", tag = "3")]
    pub parameter_schema: bytes::Bytes,
}

/// Flight SQL's `ActionClosePreparedStatementRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CloseRequest {
    /// The handle.
    #[prost(bytes = "bytes", tag = "1")]
    pub prepared_statement_handle: bytes::Bytes,
}

/// Flight SQL's `DoPutPreparedStatementResult`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct BindResult {
    /// The handle to use from now on: the statement with its values.
    #[prost(bytes = "bytes", optional, tag = "1")]
    pub prepared_statement_handle: Option<bytes::Bytes>,
}

/// What a handle holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Prepared {
    /// The statement.
    pub statement: String,
    /// Its bound values, in order; empty until a `DoPut` binds them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub values: Vec<Value>,
}

impl Prepared {
    /// The handle's wire form.
    pub fn handle(&self, key: &TicketKey) -> bytes::Bytes {
        key.sign_json(self).into()
    }

    /// The statement of a handle this server (or a replica) made.
    pub fn open(key: &TicketKey, handle: &[u8]) -> Result<Prepared, Refused> {
        key.open_json(handle)
    }
}

/// The values of the one row of `batches` (a query binds one set of
/// parameters); the error says what is wrong, for the client.
pub fn bound_values(batches: &[RecordBatch]) -> Result<Vec<Value>, String> {
    let rows: usize = batches.iter().map(RecordBatch::num_rows).sum();
    let batch = match (rows, batches.iter().find(|batch| batch.num_rows() > 0)) {
        (1, Some(batch)) => batch,
        _ => {
            return Err(format!(
                "bind one row of parameters to a query ({rows} were sent): run it once per row"
            ))
        }
    };
    batch
        .columns()
        .iter()
        .enumerate()
        .map(|(index, column)| {
            value_at(column.as_ref(), 0).map_err(|type_name| {
                format!(
                    "parameter {} is of Arrow type {type_name}, which sluice does not bind: \
                     send it as text and cast it in the SQL",
                    index + 1
                )
            })
        })
        .collect()
}

/// The JSON value of `array[row]`; `Err` with the type's name when it has none.
fn value_at(array: &dyn Array, row: usize) -> Result<Value, String> {
    if array.is_null(row) {
        return Ok(Value::Null);
    }
    let value = match array.data_type() {
        DataType::Null => Value::Null,
        DataType::Boolean => Value::Bool(array.as_boolean().value(row)),
        DataType::Int8 => integer::<Int8Type>(array, row),
        DataType::Int16 => integer::<Int16Type>(array, row),
        DataType::Int32 => integer::<Int32Type>(array, row),
        DataType::Int64 => integer::<Int64Type>(array, row),
        DataType::UInt8 => integer::<UInt8Type>(array, row),
        DataType::UInt16 => integer::<UInt16Type>(array, row),
        DataType::UInt32 => integer::<UInt32Type>(array, row),
        DataType::UInt64 => integer::<UInt64Type>(array, row),
        DataType::Float32 => float(f64::from(
            array
                .as_primitive::<arrow_array::types::Float32Type>()
                .value(row),
        )),
        DataType::Float64 => float(
            array
                .as_primitive::<arrow_array::types::Float64Type>()
                .value(row),
        ),
        DataType::Utf8 => Value::from(array.as_string::<i32>().value(row)),
        DataType::LargeUtf8 => Value::from(array.as_string::<i64>().value(row)),
        DataType::Utf8View => Value::from(array.as_string_view().value(row)),
        DataType::Decimal128(..) => {
            decimal(array.as_primitive::<Decimal128Type>().value_as_string(row))
        }
        DataType::Decimal256(..) => {
            decimal(array.as_primitive::<Decimal256Type>().value_as_string(row))
        }
        other => return moment(array, row, other).ok_or_else(|| other.to_string()),
    };
    Ok(value)
}

fn integer<T: ArrowPrimitiveType>(array: &dyn Array, row: usize) -> Value
where
    T::Native: Into<Value>,
{
    array.as_primitive::<T>().value(row).into()
}

/// A float as a JSON number, or its name when JSON has none (`NaN`,
/// `Infinity`), which the database reads as text.
fn float(value: f64) -> Value {
    match serde_json::Number::from_f64(value) {
        Some(number) => Value::Number(number),
        None if value.is_nan() => Value::from("NaN"),
        None if value > 0.0 => Value::from("Infinity"),
        None => Value::from("-Infinity"),
    }
}

/// A decimal's exact digits as a JSON number (serde_json keeps them: the
/// workspace builds it with `arbitrary_precision`).
fn decimal(text: String) -> Value {
    serde_json::from_str(&text).unwrap_or(Value::String(text))
}

/// Dates, times and timestamps as ISO text (a moment with a zone in UTC,
/// with its offset); `None` for any other type.
fn moment(array: &dyn Array, row: usize, data_type: &DataType) -> Option<Value> {
    const STAMP: &str = "%Y-%m-%d %H:%M:%S%.f";
    let text = match data_type {
        DataType::Date32 => array
            .as_primitive::<Date32Type>()
            .value_as_date(row)?
            .to_string(),
        DataType::Date64 => array
            .as_primitive::<Date64Type>()
            .value_as_date(row)?
            .to_string(),
        DataType::Time32(TimeUnit::Second) => array
            .as_primitive::<Time32SecondType>()
            .value_as_time(row)?
            .to_string(),
        DataType::Time32(TimeUnit::Millisecond) => array
            .as_primitive::<Time32MillisecondType>()
            .value_as_time(row)?
            .to_string(),
        DataType::Time64(TimeUnit::Microsecond) => array
            .as_primitive::<Time64MicrosecondType>()
            .value_as_time(row)?
            .to_string(),
        DataType::Time64(TimeUnit::Nanosecond) => array
            .as_primitive::<Time64NanosecondType>()
            .value_as_time(row)?
            .to_string(),
        DataType::Timestamp(unit, zone) => {
            let local = match unit {
                TimeUnit::Second => array
                    .as_primitive::<TimestampSecondType>()
                    .value_as_datetime(row),
                TimeUnit::Millisecond => array
                    .as_primitive::<TimestampMillisecondType>()
                    .value_as_datetime(row),
                TimeUnit::Microsecond => array
                    .as_primitive::<TimestampMicrosecondType>()
                    .value_as_datetime(row),
                TimeUnit::Nanosecond => array
                    .as_primitive::<TimestampNanosecondType>()
                    .value_as_datetime(row),
            }?;
            // Arrow's value is the moment in UTC whatever its zone says.
            let offset = if zone.is_some() { "+00" } else { "" };
            format!("{}{offset}", local.format(STAMP))
        }
        _ => return None,
    };
    Some(Value::String(text))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use arrow_array::{
        ArrayRef, BooleanArray, Date32Array, Decimal128Array, Float64Array, Int64Array,
        StringArray, TimestampMicrosecondArray,
    };

    use super::*;

    fn batch(columns: Vec<ArrayRef>) -> RecordBatch {
        RecordBatch::try_from_iter(
            columns
                .into_iter()
                .enumerate()
                .map(|(index, column)| (format!("p{index}"), column)),
        )
        .unwrap()
    }

    #[test]
    fn each_arrow_value_becomes_the_json_value_it_is() {
        let row = batch(vec![
            Arc::new(Int64Array::from(vec![9007199254740993])),
            Arc::new(StringArray::from(vec!["settled"])),
            Arc::new(BooleanArray::from(vec![true])),
            Arc::new(Float64Array::from(vec![f64::NAN])),
            Arc::new(
                Decimal128Array::from(vec![123450])
                    .with_precision_and_scale(12, 2)
                    .unwrap(),
            ),
            Arc::new(Date32Array::from(vec![19782])),
            Arc::new(
                TimestampMicrosecondArray::from(vec![1_717_236_000_250_000]).with_timezone("UTC"),
            ),
            Arc::new(Int64Array::from(vec![None])),
        ]);
        let values = bound_values(&[row]).unwrap();
        assert_eq!(values[0].to_string(), "9007199254740993");
        assert_eq!(values[1], Value::from("settled"));
        assert_eq!(values[2], Value::Bool(true));
        assert_eq!(values[3], Value::from("NaN"));
        assert_eq!(values[4].to_string(), "1234.50");
        assert_eq!(values[5], Value::from("2024-02-29"));
        assert_eq!(values[6], Value::from("2024-06-01 10:00:00.250+00"));
        assert_eq!(values[7], Value::Null);
    }

    #[test]
    fn a_query_binds_exactly_one_row_of_known_types() {
        let two = batch(vec![Arc::new(Int64Array::from(vec![1, 2]))]);
        assert!(bound_values(&[two]).unwrap_err().contains("one row"));
        assert!(bound_values(&[]).unwrap_err().contains("0 were sent"));
        let binary = batch(vec![Arc::new(arrow_array::BinaryArray::from_vec(vec![
            b"x",
        ]))]);
        let error = bound_values(&[binary]).unwrap_err();
        assert!(
            error.contains("parameter 1 is of Arrow type Binary"),
            "{error}"
        );
    }

    #[test]
    fn handles_open_with_their_key_only_and_never_as_tickets() {
        let key = TicketKey::random();
        let prepared = Prepared {
            statement: "select $1".into(),
            values: vec![Value::from(5)],
        };
        let handle = prepared.handle(&key);
        assert_eq!(Prepared::open(&key, &handle), Ok(prepared));
        assert_eq!(
            Prepared::open(&TicketKey::random(), &handle),
            Err(Refused::Unknown)
        );
        assert!(key.open(&handle).is_err(), "a handle is no ticket");
    }
}
