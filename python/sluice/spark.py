"""A PySpark (4.0 and later) data source named ``"sluice"`` that reads a named
query of ``sluice serve``'s Arrow Flight service: one Spark partition per
endpoint of one plan, so the partitions together are one read in the plan's
PostgreSQL snapshot.

.. code-block:: python

    import sluice.spark
    sluice.spark.register(spark)
    frame = (spark.read.format("sluice")
             .option("location", "grpc://gateway:8815")
             .option("query", "payment_events")
             .option("partitions", 8)
             .option("token", token)
             .load())

Options (Spark lowercases option names):

- ``location``: the Flight service, ``grpc://host:port`` (``grpc+tls://`` with TLS);
- ``query``: a named query of the server, or ``sql``: ad-hoc SQL (where the
  server's ``[sql]`` allows it; one partition);
- ``partitions``: how many parts to ask for (default: the server's ``[flight]
  partitions``);
- ``params``: the query's parameters as a JSON object, ``{"status": "settled"}``;
  or one option per parameter, ``param.status``: since Spark lowercases option
  names, parameters whose names have capitals need ``params``;
- ``columns``: the named query's columns to read, comma-separated
  (``"id, amount"``) or a JSON list (``'["id", "amount"]'``, for names with
  commas), in that order; default: all. A Python data source cannot learn
  which columns an action needs (PySpark gives it no column pruning), so
  without this option every column of the query is read;
- ``token``: sent as ``authorization: Bearer <token>`` on every call.

This module owns the data source, the mapping of Arrow types to Spark's and
the refusal of columns Spark cannot hold exactly. The schema comes from
``GetSchema`` (no snapshot held) when the DataFrame is loaded; each action
plans anew on the driver (``GetFlightInfo`` in :meth:`SluiceReader.partitions`,
so every action reads one fresh snapshot), and each task reads its endpoint,
again if Spark retries it: the server keeps a plan readable until its
``plan_timeout``, until a newer plan needs its place, or, while some part was
never read, until ``unread_plan_timeout`` passes with none being read.
"""

from __future__ import annotations

import json
from typing import Any, Iterator

from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DateType,
    DecimalType,
    DoubleType,
    FloatType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from . import _flight
from ._errors import UsageError
from ._flight import FlightError

__all__ = ["FlightError", "SluiceDataSource", "SluiceReader", "register", "spark_schema"]

# DecimalType's largest precision.
_SPARK_MAX_PRECISION = 38


def register(spark: Any) -> None:
    """Registers the ``"sluice"`` data source with ``spark`` (a SparkSession)."""
    spark.dataSource.register(SluiceDataSource)


class SluiceDataSource(DataSource):
    """``spark.read.format("sluice")``: see the module's documentation for
    its options."""

    @classmethod
    def name(cls) -> str:
        return "sluice"

    def schema(self) -> StructType:
        """The query's columns as Spark types, from the server's Arrow schema
        (``GetSchema`` for a named query; ad-hoc SQL has only a plan's)."""
        request = _Request.from_options(self.options)
        if request.sql is not None:
            arrow_schema = _flight.plan(request.location, request.descriptor(), request.token).schema
        else:
            arrow_schema = _flight.schema(request.location, request.descriptor(), request.token)
        return spark_schema(arrow_schema)

    def reader(self, schema: StructType) -> "SluiceReader":
        return SluiceReader(_Request.from_options(self.options), schema)


class SluicePartition(InputPartition):
    """One endpoint: its ticket and where to redeem it (bytes and strings,
    which Spark pickles to the executors)."""

    def __init__(self, index: int, part: _flight.Part):
        super().__init__(index)
        self.part = part


class SluiceReader(DataSourceReader):
    """Plans on the driver (:meth:`partitions`), reads one endpoint per task
    (:meth:`read`)."""

    def __init__(self, request: "_Request", schema: StructType):
        self.request = request
        self.schema = schema

    def partitions(self) -> list[SluicePartition]:
        plan = _flight.plan(self.request.location, self.request.descriptor(), self.request.token)
        # The plan's columns must still be the DataFrame's: a query changed on
        # the server since `load()` is an error, not values read under other
        # columns' names (a changed type is cast safely in `read`, or fails).
        current = spark_schema(plan.schema)
        if [field.name for field in current] != [field.name for field in self.schema]:
            raise UsageError(
                f"the query's columns changed since the DataFrame was loaded: now {current.simpleString()}, "
                f"was {self.schema.simpleString()}; load it again"
            )
        return [SluicePartition(index, part) for index, part in enumerate(plan.parts)]

    def read(self, partition: SluicePartition | None) -> Iterator[Any]:
        """The endpoint's record batches, as the DataFrame's Arrow types."""
        from pyspark.sql.pandas.types import to_arrow_schema

        if partition is None:
            # Spark reads a plan of no endpoints as one partition of None.
            return
        target = to_arrow_schema(self.schema)
        for batch in _flight.read_part(partition.part):
            yield _as_target(batch, target)


def _as_target(batch: Any, target: Any) -> Any:
    """``batch`` with Spark's Arrow types: the server's own when they are
    equal (the usual case, no copy); else cast safely, so a value that does
    not fit is an error rather than a changed value (extension types become
    their storage; ``Decimal(p, s)`` with ``s > p`` becomes ``Decimal(s, s)``)."""
    import pyarrow

    if all(field.type == wanted.type for field, wanted in zip(batch.schema, target)):
        return batch
    columns = [column.cast(wanted.type, safe=True) if column.type != wanted.type else column
               for column, wanted in zip(_storage(batch).columns, target)]
    return pyarrow.RecordBatch.from_arrays(columns, schema=target)


def _storage(batch: Any) -> Any:
    """The batch with extension columns (``arrow.uuid``, ``arrow.json``) as
    their storage arrays."""
    import pyarrow

    columns = [column.storage if isinstance(column.type, pyarrow.BaseExtensionType) else column
               for column in batch.columns]
    return pyarrow.RecordBatch.from_arrays(columns, names=batch.schema.names)


def spark_schema(arrow_schema: Any) -> StructType:
    """Spark's schema for an Arrow schema of ``sluice serve``: every type one
    that holds every value exactly; a column no Spark type holds exactly is a
    :class:`~sluice.UsageError` naming it."""
    return StructType([StructField(field.name, _spark_type(field.type, field.name), True) for field in arrow_schema])


def _spark_type(arrow_type: Any, column: str) -> DataType:
    import pyarrow
    import pyarrow.types as t

    if isinstance(arrow_type, pyarrow.BaseExtensionType):
        # arrow.uuid (16 bytes) and arrow.json (text) read as their storage.
        return _spark_type(arrow_type.storage_type, column)
    simple = [
        (t.is_boolean, BooleanType()),
        (t.is_int16, ShortType()),
        (t.is_int32, IntegerType()),
        (t.is_int64, LongType()),
        (t.is_float32, FloatType()),
        (t.is_float64, DoubleType()),
        (t.is_string, StringType()),
        (t.is_large_string, StringType()),
        (t.is_binary, BinaryType()),
        (t.is_large_binary, BinaryType()),
        (t.is_fixed_size_binary, BinaryType()),
        (t.is_date32, DateType()),
    ]
    for test, spark_type in simple:
        if test(arrow_type):
            return spark_type
    if t.is_timestamp(arrow_type) and arrow_type.unit == "us":
        # An instant (timestamptz, UTC in Arrow) or a wall-clock time.
        return TimestampType() if arrow_type.tz is not None else TimestampNTZType()
    if t.is_decimal(arrow_type):
        return _decimal(arrow_type, column)
    if t.is_list(arrow_type) or t.is_large_list(arrow_type):
        return ArrayType(_spark_type(arrow_type.value_type, f"{column}[]"), True)
    if t.is_struct(arrow_type):
        return StructType([
            StructField(field.name, _spark_type(field.type, f"{column}.{field.name}"), True) for field in arrow_type
        ])
    raise UsageError(_refusal(arrow_type, column))


def _decimal(arrow_type: Any, column: str) -> DecimalType:
    precision, scale = arrow_type.precision, arrow_type.scale
    # numeric(2, 5) holds 0.00012: Decimal(5, 5) holds every such value.
    precision = max(precision, scale)
    if precision > _SPARK_MAX_PRECISION:
        raise UsageError(
            f"column {column}: Spark's decimals hold at most {_SPARK_MAX_PRECISION} digits, "
            f"the column has {arrow_type.precision} ({arrow_type}): cast it in the query "
            f"(numeric(38, {min(scale, _SPARK_MAX_PRECISION)}) if its values fit, or text)"
        )
    return DecimalType(precision, scale)


def _refusal(arrow_type: Any, column: str) -> str:
    """Why Spark cannot take a column, and the cast in the query that helps."""
    import pyarrow.types as t

    if t.is_uint64(arrow_type):
        advice = "Spark has no unsigned 64-bit integer and a bigint would overflow: cast it to numeric(20, 0)"
    elif t.is_time(arrow_type):
        advice = "Spark has no time of day type by default: cast it to text, or to interval and extract the seconds"
    elif t.is_interval(arrow_type):
        advice = "Spark cannot read Arrow's month-day-nanosecond intervals: cast it to text, or extract(epoch from …)"
    else:
        advice = "cast it to text in the query"
    return f"column {column}: Spark cannot hold Arrow's {arrow_type} exactly; {advice}"


class _Request:
    """The data source's options, checked: where to ask, what, and with
    which token. Picklable (strings and numbers)."""

    def __init__(self, location: str, query: str | None, sql: str | None, params: dict, partitions: int | None,
                 token: str | None, columns: list[str] | None = None):
        self.location = location
        self.query = query
        self.sql = sql
        self.params = params
        self.partitions = partitions
        self.token = token
        self.columns = columns

    @classmethod
    def from_options(cls, options: Any) -> "_Request":
        location = options.get("location")
        if not location:
            raise UsageError('the sluice data source needs option("location", "grpc://host:port")')
        query, sql = options.get("query"), options.get("sql")
        if (query is None) == (sql is None):
            raise UsageError('give the sluice data source option("query", "<named query>") or option("sql", …)')
        return cls(location, query, sql, _params(options), _partitions(options.get("partitions")),
                   options.get("token"), _columns(options.get("columns")))

    def descriptor(self) -> Any:
        return _flight.descriptor(self.query, self.sql, self.params, self.partitions, self.columns)


def _columns(text: str | None) -> list[str] | None:
    """The ``columns`` option: a JSON list of names, or names between commas."""
    if text is None or not text.strip():
        return None
    if text.lstrip().startswith("["):
        try:
            columns = json.loads(text)
        except ValueError as error:
            raise UsageError(f'option columns must be names between commas or a JSON list such as ["id", "amount"]: '
                             f'{error}') from None
        if not isinstance(columns, list) or not all(isinstance(column, str) for column in columns):
            raise UsageError('option columns must be names between commas or a JSON list such as ["id", "amount"]')
        return columns
    return [column.strip() for column in text.split(",") if column.strip()]


def _params(options: Any) -> dict:
    """The ``params`` JSON object merged with the ``param.<name>`` options."""
    params: dict = {}
    text = options.get("params")
    if text:
        try:
            params = json.loads(text)
        except ValueError as error:
            raise UsageError(f'option params must be a JSON object such as {{"status": "settled"}}: {error}') from None
        if not isinstance(params, dict):
            raise UsageError('option params must be a JSON object such as {"status": "settled"}')
    for key, value in options.items():
        if key.startswith("param."):
            params[key[len("param."):]] = value
    return params


def _partitions(value: Any) -> int | None:
    if value is None:
        return None
    try:
        number = int(value)
    except ValueError:
        raise UsageError(f"option partitions must be a whole number, not {value!r}") from None
    if number < 1:
        raise UsageError(f"option partitions must be at least 1, not {number}")
    return number
