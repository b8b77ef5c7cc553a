"""A pandas DataFrame as Arrow record batches with every value unchanged, for
:func:`~sluice.write`: typed columns as their dtypes' Arrow types, an object
column (Python objects) as the type its values decide, a value that does not
convert exactly a :class:`~sluice.BadInput` naming its row and column.

Only the conversion to Arrow is decided here, without the table's column
types: whether a column holds each Arrow value as it is, sluice checks on
the stream (see :mod:`sluice._numbers`)."""

from __future__ import annotations

from typing import Any, Iterator

from ._errors import BadInput, bad_input
from ._numbers import Refused, as_decimal, as_float, as_integer, number_kind, within_integer

#: Rows of a DataFrame converted to Arrow at a time by :func:`~sluice.write`.
PANDAS_BATCH_ROWS = 65536

#: Non-missing values of an object column whose Python types decide its Arrow type.
_TYPE_SAMPLE_ROWS = 1000

#: What a failed conversion of Python values raises: pyarrow's ArrowInvalid
#: and ArrowTypeError (ValueError, TypeError), OverflowError for an int past 64
#: bits, decimal.InvalidOperation for a signalling NaN, ArrowNotImplementedError.
_CONVERSION_ERRORS = (ValueError, TypeError, ArithmeticError, NotImplementedError)


def pandas_batches(frame: Any) -> "pyarrow.RecordBatchReader":
    """A pandas DataFrame as record batches converted one at a time, as sluice
    asks for them: the conversion (slow for object columns such as
    ``Decimal`` or strings) overlaps the COPY running in sluice's process, and
    memory holds one converted batch rather than a copy of the whole frame.
    Typed columns convert together; an object column on its own
    (:func:`_object_array`), so that none of its values changes on the way."""
    import pyarrow

    schema, whole, objects = _pandas_schema(frame)
    values = {position: frame.iloc[:, position].to_numpy() for position in objects}
    positions = [position for position in range(len(schema)) if position not in whole and position not in values]
    rest = pyarrow.schema([schema.field(position) for position in positions])
    # The columns left to convert, chosen once: choosing them in every
    # batch's `iloc` costs more than converting the batch.
    remaining = frame.iloc[:, positions] if len(positions) < len(schema) else frame
    converted_at = {position: index for index, position in enumerate(positions)}

    def batches() -> Iterator["pyarrow.RecordBatch"]:
        for start in range(0, len(frame), PANDAS_BATCH_ROWS):
            stop = min(start + PANDAS_BATCH_ROWS, len(frame))
            converted = None
            if positions:
                part = remaining.iloc[start:stop]
                try:
                    converted = pyarrow.RecordBatch.from_pandas(part, schema=rest, preserve_index=False)
                except (pyarrow.ArrowInvalid, pyarrow.ArrowTypeError) as error:
                    raise BadInput(
                        f"rows {start} to {stop - 1} of the DataFrame cannot be converted to Arrow: {error}"
                    ) from error
            arrays = []
            for position, field in enumerate(schema):
                if position in whole:
                    arrays.append(whole[position].slice(start, stop - start))
                elif position in values:
                    arrays.append(_object_array(values[position][start:stop], field.type, start, field.name))
                else:
                    arrays.append(converted.column(converted_at[position]))
            yield pyarrow.RecordBatch.from_arrays(arrays, schema=schema)

    return pyarrow.RecordBatchReader.from_batches(schema, batches())


def _pandas_schema(frame: Any) -> tuple["pyarrow.Schema", dict, set]:
    """The frame's Arrow schema, the columns converted whole (by position),
    and the positions of the object columns converted batch by batch.

    pyarrow infers an object column's type by converting all of it, which
    costs as much as the conversion itself, before the first row can go.
    Instead, typed columns take their dtype's type, and an object column the
    type of its first non-missing values (a later value that does not
    convert to it exactly fails its batch), so a column whose first rows are
    all missing still gets its type. Two kinds of object column are
    converted whole, once, and sliced per batch, because every value decides
    their type: ``Decimal`` objects (16 bytes a row), whose digits decide the
    scale, and ints alone (8 bytes a row), decimals when one of them passes
    64 bits (an int that large loads into a ``numeric`` column)."""
    import pyarrow

    typed = pyarrow.Schema.from_pandas(frame.iloc[:0], preserve_index=False)
    fields = []
    whole = {}
    objects = set()
    for position, field in enumerate(typed):
        series = frame.iloc[:, position]
        if series.dtype == object:
            sampled = _sampled_type(series, field.name)
            array = _whole_array(series.to_numpy(), sampled, field.name)
            if array is None:
                objects.add(position)
                field = field.with_type(sampled)
            else:
                whole[position] = array
                field = field.with_type(array.type)
        fields.append(field)
    return pyarrow.schema(fields), whole, objects


def _whole_array(values: Any, sampled: "pyarrow.DataType", column: str) -> "pyarrow.Array | None":
    """An object column (a NumPy array) of ``Decimal`` objects, or of ints
    alone, as one Arrow array; ``None`` for any other, converted batch by
    batch."""
    from pandas.api.types import infer_dtype

    kind = number_kind(sampled)
    if kind == "decimal":
        return _decimal_array(values, sampled, column)
    if kind == "integer" and infer_dtype(values, skipna=True) == "integer":
        return _integer_array(values, column)
    return None


def _integer_array(values: Any, column: str) -> "pyarrow.Array":
    """Python ints as ``Int64``, or as decimals when one passes 64 bits."""
    import pyarrow

    try:
        array = pyarrow.array(values, type=pyarrow.int64(), from_pandas=True)
    except _CONVERSION_ERRORS:
        return _decimal_array(values, pyarrow.decimal128(38, 0), column)
    _check_nulls(array, values, 0, column)
    return array


def _sampled_type(series: Any, column: str) -> "pyarrow.DataType":
    """The Arrow type of an object column's first non-missing values; of the
    first alone when pyarrow finds none for them all (the conversion then
    names the row of the first value that does not fit it)."""
    import pyarrow

    sample, first_row = _first_present(series)
    if not len(sample):
        return pyarrow.null()
    try:
        return pyarrow.infer_type(sample, from_pandas=True)
    except _CONVERSION_ERRORS:
        pass
    try:
        return pyarrow.infer_type(sample[:1], from_pandas=True)
    except _CONVERSION_ERRORS as error:
        value = sample[0]
        raise bad_input(first_row, column, f"{value!r} ({type(value).__name__}) has no Arrow type: {error}") from None


def _first_present(series: Any) -> tuple[Any, int]:
    """Up to ``_TYPE_SAMPLE_ROWS`` of the column's first non-missing values
    (a NumPy array), looking past its head only when the head has none, and
    the row of the first."""
    import numpy

    values = series.to_numpy()
    head = values[: 4 * _TYPE_SAMPLE_ROWS]
    rows = numpy.flatnonzero(~_missing(head))
    if len(rows) == 0 and len(values) > len(head):
        rows = len(head) + numpy.flatnonzero(~_missing(values[len(head) :]))
    rows = rows[:_TYPE_SAMPLE_ROWS]
    return values[rows], int(rows[0]) if len(rows) else 0


def _decimal_array(values: Any, sampled: "pyarrow.DataType", column: str) -> "pyarrow.Array":
    """A column of ``Decimal`` objects as one Arrow array: at the sampled
    values' scale with the widest precision, which converts four times faster
    than letting pyarrow find both from every value; that, when a later value
    has more digits after the point than the sample; value by value (ints
    and floats as the decimals they are) when the column mixes in other
    numbers, and a BadInput naming the first value that is none."""
    import pyarrow

    widest = pyarrow.decimal128(38, sampled.scale) if sampled.scale <= 38 else sampled
    try:
        array = pyarrow.array(values, type=widest, from_pandas=True)
    except _CONVERSION_ERRORS:
        try:
            array = pyarrow.array(values, from_pandas=True)
        except _CONVERSION_ERRORS:
            array = None
        if array is None or not pyarrow.types.is_decimal(array.type):
            exact = _exact_values(values, as_decimal, 0, column)
            try:
                array = pyarrow.array(exact)
            except _CONVERSION_ERRORS as error:
                raise BadInput(
                    f"column {column}: its decimals have more digits than an Arrow decimal holds: {error}",
                    {"kind": "data", "column_name": column},
                ) from None
    _check_nulls(array, values, 0, column)
    return array


#: The kinds of column pandas' ``infer_dtype`` finds that pyarrow converts to
#: an integer or a float type without changing a value (it truncates floats
#: and Decimals into integers, and turns True into 1.0); other columns of
#: those types convert value by value. pyarrow's decimal conversion refuses
#: whatever it cannot hold exactly.
_PYARROW_EXACT = {
    "integer": {"integer", "empty"},
    "float": {"floating", "integer", "mixed-integer-float", "empty"},
}


def _object_array(values: Any, arrow_type: "pyarrow.DataType", first_row: int, column: str) -> "pyarrow.Array":
    """A batch of an object column (a NumPy array of Python objects) as
    ``arrow_type``; a value that does not convert exactly raises
    :class:`BadInput` naming its row. pandas' missing values are nulls."""
    import pyarrow
    from pandas.api.types import infer_dtype

    kind = number_kind(arrow_type)
    if kind not in _PYARROW_EXACT or infer_dtype(values, skipna=True) in _PYARROW_EXACT[kind]:
        try:
            array = pyarrow.array(values, type=arrow_type, from_pandas=True)
        except _CONVERSION_ERRORS as error:
            if kind is None:
                row = _first_unconvertible(values, arrow_type)
                value = values[row]
                raise bad_input(
                    first_row + row,
                    column,
                    f"{value!r} ({type(value).__name__}) is not of the type of the column's first values "
                    f"({arrow_type}): {error}",
                ) from None
        else:
            _check_nulls(array, values, first_row, column)
            return array
    if kind == "integer":
        convert = lambda value: within_integer(as_integer(value), arrow_type)  # noqa: E731
    else:
        convert = as_float
    return pyarrow.array(_exact_values(values, convert, first_row, column), type=arrow_type)


def _first_unconvertible(values: Any, arrow_type: "pyarrow.DataType") -> int:
    """The index of the first of ``values`` pyarrow will not convert to
    ``arrow_type`` (which it will not do for all of them), converting about
    as many values as there are in all."""
    import pyarrow

    low, high = 0, len(values)
    while high - low > 1:
        middle = (low + high) // 2
        try:
            pyarrow.array(values[low:middle], type=arrow_type, from_pandas=True)
        except _CONVERSION_ERRORS:
            high = middle
        else:
            low = middle
    return low


def _missing(values: Any) -> Any:
    """Which of ``values`` pandas takes for missing (a NumPy bool array)."""
    import numpy
    import pandas

    try:
        return numpy.asarray(pandas.isna(values), dtype=bool)
    except _CONVERSION_ERRORS:
        # A signalling NaN makes pandas raise: that one value is no number.
        def missing(value: Any) -> bool:
            try:
                return bool(pandas.isna(value))
            except _CONVERSION_ERRORS:
                return False

        return numpy.fromiter((missing(value) for value in values), dtype=bool, count=len(values))


def _exact_values(values: Any, convert: Any, first_row: int, column: str) -> list:
    """``convert`` applied to each value pandas does not take for missing
    (``None`` for those); the first it refuses raises :class:`BadInput`."""
    missing = _missing(values)
    exact = []
    for index, value in enumerate(values):
        if missing[index]:
            exact.append(None)
            continue
        try:
            exact.append(convert(value))
        except Refused as refused:
            raise bad_input(first_row + index, column, str(refused)) from None
    return exact


def _check_nulls(array: "pyarrow.Array", values: Any, first_row: int, column: str) -> None:
    """Raises :class:`BadInput` when the conversion made a null of a value
    that pandas does not take for missing: no value silently becomes NULL."""
    import numpy

    if not array.null_count:
        return
    nulls = array.is_null().to_numpy(zero_copy_only=False)
    changed = numpy.flatnonzero(nulls & ~_missing(values))
    if len(changed):
        row = int(changed[0])
        raise bad_input(first_row + row, column, f"{values[row]!r} would be stored as NULL")
