"""Sluice's Arrow results as pandas and polars hold them, every value exact:
per-batch pandas conversion with its column types (``dtype_backend``), the
Arrow types polars lacks (intervals, ``numeric`` text, decimals past 38
digits) converted, and the extension types as their storage."""

from __future__ import annotations

import decimal
from typing import Any

from ._errors import Error, UsageError, bad_input


#: Arrow's timestamp for PostgreSQL's ``-infinity``, which NumPy reads as
#: ``NaT``; pandas gets the earliest timestamp it holds instead.
_TIMESTAMP_MINUS_INFINITY = -(2**63)


def batch_to_pandas(table: "pyarrow.Table", mapper: Any, first_row: int) -> "pandas.DataFrame":
    """One batch's rows as a DataFrame, a block per column. Extension types
    (uuid, json) go as their storage, the same Python values, since both
    ``pandas.ArrowDtype`` and split blocks take only Arrow's own types.
    ``first_row`` is the batch's first row in the result, for errors."""
    table = _numpy_ready(storage_types(table))
    try:
        frame = table.to_pandas(types_mapper=mapper, date_as_object=False, split_blocks=True)
    except (ValueError, OverflowError, ArithmeticError) as error:
        raise _unconvertible(table, mapper, first_row, error) from error
    for field, column in zip(table.schema, table.columns):
        if _converted(field, for_polars=False):
            frame[field.name] = [_with_decimals(value, field) for value in column.to_pylist()]
    return frame


def _numpy_ready(table: "pyarrow.Table") -> "pyarrow.Table":
    """Timestamps with ``-infinity`` (Arrow's smallest value, NumPy's
    ``NaT``) moved to the earliest timestamp NumPy holds, one microsecond
    later, so that no value reads as missing."""
    import pyarrow
    import pyarrow.compute

    columns = []
    for column in table.columns:
        if pyarrow.types.is_timestamp(column.type):
            numbers = column.cast(pyarrow.int64())
            earliest = pyarrow.compute.equal(numbers, _TIMESTAMP_MINUS_INFINITY)
            if pyarrow.compute.any(earliest).as_py():
                numbers = pyarrow.compute.if_else(earliest, _TIMESTAMP_MINUS_INFINITY + 1, numbers)
                column = numbers.cast(column.type)
        columns.append(column)
    return _with_columns(table, columns)


def _with_decimals(value: Any, field: "pyarrow.Field") -> Any:
    """A Python value of ``field`` with its ``numeric`` text, at any depth of
    lists and records, as ``decimal.Decimal`` (``NaN`` and the infinities
    included)."""
    import pyarrow

    if value is None:
        return None
    if _text_of(field) == "numeric":
        return decimal.Decimal(value)
    if pyarrow.types.is_list(field.type):
        return [_with_decimals(item, field.type.value_field) for item in value]
    if pyarrow.types.is_struct(field.type):
        return {child.name: _with_decimals(value[child.name], child) for child in field.type}
    return value


def _unconvertible(table: "pyarrow.Table", mapper: Any, first_row: int, error: Exception) -> Error:
    """The error for a batch pandas' converter refused: the first value, by
    column and row, that does not convert on its own."""
    import pyarrow

    def refusal(name: str, values: "pyarrow.ChunkedArray") -> Exception | None:
        try:
            pyarrow.table([values], names=[name]).to_pandas(types_mapper=mapper, date_as_object=False)
        except (ValueError, OverflowError, ArithmeticError) as reason:
            return reason
        return None

    for name, column in zip(table.column_names, table.columns):
        if refusal(name, column) is None:
            continue
        for row in range(table.num_rows):
            reason = refusal(name, column.slice(row, 1))
            if reason is not None:
                return bad_input(
                    first_row + row, name, f"pandas cannot hold this {column.type} value{_arrow_shown(column, row)}: {reason}"
                )
    return Error(f"pandas could not convert the result: {error}")


def _arrow_shown(column: "pyarrow.ChunkedArray", row: int) -> str:
    """The value at ``row`` as Arrow writes it, for messages; empty when it
    has no text form."""
    import pyarrow

    try:
        return f" ({column.slice(row, 1).cast(pyarrow.string())[0]})"
    except (pyarrow.ArrowException, ValueError):
        return ""


def pandas_types(dtype_backend: str | None, pandas: Any) -> Any:
    """``to_pandas``'s ``types_mapper`` for ``read_pandas``'s ``dtype_backend``
    (``"pyarrow"``: ``pandas.ArrowDtype`` for every type)."""
    import pyarrow

    integers = {
        pyarrow.int8(): pandas.Int8Dtype(),
        pyarrow.int16(): pandas.Int16Dtype(),
        pyarrow.int32(): pandas.Int32Dtype(),
        pyarrow.int64(): pandas.Int64Dtype(),
        pyarrow.uint64(): pandas.UInt64Dtype(),
    }
    others = {
        pyarrow.bool_(): pandas.BooleanDtype(),
        pyarrow.float32(): pandas.Float32Dtype(),
        pyarrow.float64(): pandas.Float64Dtype(),
        pyarrow.string(): pandas.StringDtype(),
        pyarrow.large_string(): pandas.StringDtype(),
    }
    if dtype_backend is None:
        nullable = integers
    elif dtype_backend == "numpy_nullable":
        nullable = {**integers, **others}
    else:
        raise UsageError(f'dtype_backend must be None, "numpy_nullable" or "pyarrow", not {dtype_backend!r}')

    def mapper(arrow_type: "pyarrow.DataType") -> Any:
        if _arrow_backed(arrow_type):
            return pandas.ArrowDtype(arrow_type)
        return nullable.get(arrow_type)

    return mapper


def _arrow_backed(arrow_type: "pyarrow.DataType") -> bool:
    """Types NumPy cannot hold exactly, kept in Arrow in every backend:
    decimals, and arrays and records (whose integer elements NumPy would
    make floats beside a NULL)."""
    import pyarrow

    return (
        pyarrow.types.is_decimal(arrow_type)
        or pyarrow.types.is_list(arrow_type)
        or pyarrow.types.is_large_list(arrow_type)
        or pyarrow.types.is_struct(arrow_type)
    )


def exact_for_arrow(table: "pyarrow.Table", for_polars: bool = False) -> "pyarrow.Table":
    """The table with extension types as their storage, ``numeric`` text as
    decimals and, for polars (whose decimals have at most 38 digits, and
    which has no interval type), intervals as durations or structs and wider
    decimals as text: in columns and in their arrays' elements and records'
    fields alike."""
    table = storage_types(table)
    columns = []
    for field, column in zip(table.schema, table.columns):
        if _converted(field, for_polars):
            column = _exact_array(field, column.combine_chunks(), field.name, for_polars, nested=False)
        columns.append(column)
    return _with_columns(table, columns)


def _converted(field: "pyarrow.Field", for_polars: bool) -> bool:
    """Whether :func:`_exact_array` changes a field of this type."""
    import pyarrow

    data_type = field.type
    if _text_of(field) == "numeric":
        return True
    if for_polars and (data_type == pyarrow.month_day_nano_interval() or pyarrow.types.is_decimal256(data_type)):
        return True
    if pyarrow.types.is_list(data_type):
        return _converted(data_type.value_field, for_polars)
    if pyarrow.types.is_struct(data_type):
        return any(_converted(data_type.field(index), for_polars) for index in range(data_type.num_fields))
    return False


def _exact_array(field: "pyarrow.Field", array: "pyarrow.Array", name: str, for_polars: bool, nested: bool) -> "pyarrow.Array":
    """One column's (or element's, ``nested``) values converted as
    :func:`exact_for_arrow` says; lists and structs rebuilt around their
    converted values."""
    import pyarrow

    data_type = field.type
    if not _converted(field, for_polars):
        return array
    if _text_of(field) == "numeric":
        return _inferred_decimals(array, name, 38 if for_polars else 76, nested)
    if data_type == pyarrow.month_day_nano_interval():
        return _polars_intervals(array, name, nested)
    if pyarrow.types.is_decimal256(data_type):
        return _decimal_text(array, name)
    if pyarrow.types.is_list(data_type):
        values = _exact_array(data_type.value_field, array.values, name, for_polars, nested=True)
        return pyarrow.ListArray.from_arrays(array.offsets, values, mask=array.is_null())
    children = [
        _exact_array(data_type.field(index), array.field(index), name, for_polars, nested=True)
        for index in range(data_type.num_fields)
    ]
    fields = [
        pyarrow.field(data_type.field(index).name, child.type, metadata=data_type.field(index).metadata)
        for index, child in enumerate(children)
    ]
    return pyarrow.StructArray.from_arrays(children, fields=fields, mask=array.is_null())


def _text_of(field: "pyarrow.Field") -> str | None:
    """What a text column holds, as sluice marks it (``sluice.text``:
    ``numeric``, or ``array`` for arrays of mixed dimensions)."""
    value = (field.metadata or {}).get(b"sluice.text")
    return value.decode() if value is not None else None


def note_text_columns(schema: "pyarrow.Schema") -> None:
    """Warns, once per column, that arrays of mixed dimensions are text."""
    import warnings

    for field in schema:
        if _text_of(field) == "array":
            warnings.warn(
                f"column {field.name}: its arrays have different dimensions, which one Arrow list type "
                "cannot hold; they are read as PostgreSQL's array text",
                stacklevel=3,
            )


#: ``numeric`` values no Arrow decimal holds.
_NOT_DECIMALS = ("NaN", "Infinity", "-Infinity")


def _inferred_decimals(column: "pyarrow.Array", name: str, widest: int, nested: bool) -> "pyarrow.Array":
    """``numeric`` text as a decimal of ``s``, the largest scale of the
    column (PostgreSQL writes no exponents): ``Decimal128(38, s)``, or
    ``Decimal256(76, s)`` when more digits are needed and ``widest`` is 76.
    The text itself, with a warning, when a value is ``NaN`` or an infinity
    or the digits do not fit (``nested``: the values are array elements or
    record fields, so no row is named)."""
    import warnings

    import pyarrow
    import pyarrow.compute as compute

    special = compute.is_in(column, value_set=pyarrow.array(_NOT_DECIMALS))
    if compute.any(special).as_py():
        first = compute.index(special, True).as_py()
        where = "an element" if nested else f"row {first}"
        warnings.warn(
            f"column {name}: {where} holds {column[first].as_py()}, which no decimal holds; "
            "the column is read as its exact text",
            stacklevel=4,
        )
        return column
    scale, integer_digits = _decimal_extent(column)
    precision = 38 if integer_digits + scale <= 38 else 76
    if integer_digits + scale > widest:
        warnings.warn(
            f"column {name}: its values need {integer_digits + scale} digits at one scale ({scale}), "
            f"more than a {widest}-digit decimal holds; the column is read as its exact text",
            stacklevel=4,
        )
        return column
    decimal_type = pyarrow.decimal128 if precision == 38 else pyarrow.decimal256
    return column.cast(decimal_type(precision, scale))


def _decimal_extent(column: "pyarrow.ChunkedArray") -> tuple[int, int]:
    """The largest scale and the most digits before the point of a column of
    decimal text, leading zeros not counted (``-0.05``: scale 2, none)."""
    import pyarrow.compute as compute

    point = compute.find_substring(column, ".")
    without_point = compute.less(point, 0)
    length = compute.utf8_length(column)
    scales = compute.if_else(without_point, 0, compute.subtract(compute.subtract(length, point), 1))
    unsigned = compute.utf8_ltrim(compute.replace_substring(column, "-", ""), "0")
    digits = compute.subtract(compute.utf8_length(unsigned), compute.if_else(without_point, 0, 1))
    integer_digits = compute.max(compute.subtract(digits, scales)).as_py() or 0
    return compute.max(scales).as_py() or 0, max(integer_digits, 0)


def _decimal_text(column: "pyarrow.Array", name: str) -> "pyarrow.Array":
    """A decimal of more than 38 digits (``numeric(50,5)``), which polars'
    decimals do not hold, as its exact text, with a warning."""
    import warnings

    import pyarrow

    warnings.warn(
        f"column {name}: {column.type} has more digits than polars' decimals hold; it is read as its exact text",
        stacklevel=4,
    )
    return column.cast(pyarrow.string())


#: The struct an interval with months becomes in polars, as in Parquet.
_INTERVAL_PARTS = ("months", "days", "nanoseconds")


def _polars_intervals(column: "pyarrow.Array", name: str, nested: bool) -> "pyarrow.Array":
    """Intervals as polars reads them: ``Duration("us")`` when no value has
    months, else a struct of months, days and nanoseconds. A duration past
    64-bit microseconds is a :class:`BadInput` naming its row (``nested``:
    an element's index among the column's elements)."""
    import pyarrow

    values = column.to_pylist()
    if any(value is not None and value.months != 0 for value in values):
        parts = [None if value is None else dict(zip(_INTERVAL_PARTS, value)) for value in values]
        parts_type = pyarrow.struct(
            [("months", pyarrow.int32()), ("days", pyarrow.int32()), ("nanoseconds", pyarrow.int64())]
        )
        return pyarrow.array(parts, parts_type)
    column_name = f"{name} (an element)" if nested else name
    micros = [None if value is None else _duration_micros(value, row, column_name) for row, value in enumerate(values)]
    return pyarrow.array(micros, pyarrow.duration("us"))


def _duration_micros(value: Any, row: int, name: str) -> int:
    """An interval without months in microseconds, a day counted 24 hours."""
    nanoseconds = value.days * 86_400_000_000_000 + value.nanoseconds
    if nanoseconds % 1000:
        raise bad_input(row, name, f"the interval {value} has nanoseconds, which Duration(us) does not hold")
    micros = nanoseconds // 1000
    if not -(2**63) <= micros < 2**63:
        raise bad_input(row, name, f"the interval {value} passes 64-bit microseconds")
    return micros


def storage_types(table: "pyarrow.Table") -> "pyarrow.Table":
    """The table with extension types (``arrow.uuid``, ``arrow.json``) as their
    storage, which every reader knows; fields keep their metadata."""
    import pyarrow

    columns = [
        column.cast(column.type.storage_type) if isinstance(column.type, pyarrow.BaseExtensionType) else column
        for column in table.columns
    ]
    return _with_columns(table, columns)


def _with_columns(table: "pyarrow.Table", columns: list) -> "pyarrow.Table":
    """``table`` with new columns (of new types, perhaps), each field keeping
    its name and metadata (``sluice.text``)."""
    import pyarrow

    fields = [
        pyarrow.field(field.name, column.type, nullable=True, metadata=field.metadata)
        for field, column in zip(table.schema, columns)
    ]
    return pyarrow.table(columns, schema=pyarrow.schema(fields))
