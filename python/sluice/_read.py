"""Reading: a query's (or a table's) rows from ``sluice export --format
arrow`` as Arrow record batches, a ``pyarrow.Table``, or a pandas or polars
DataFrame."""

from __future__ import annotations

import datetime
from typing import Any, Iterator, Mapping, Sequence

from ._binary import Run, watched
from ._errors import UsageError
from ._frames import batch_to_pandas, exact_for_arrow, note_text_columns, pandas_types


def _parameter(value: Any) -> str:
    """A parameter's text, as the server reads it for the parameter's type."""
    if value is None:
        raise UsageError("a parameter cannot be None: write NULL in the query instead")
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (bytes, bytearray, memoryview)):
        return "\\x" + bytes(value).hex()
    if isinstance(value, (datetime.date, datetime.time)):
        return value.isoformat()
    return str(value)


def _flags(settings: Mapping[str, Any]) -> list[str]:
    """``fetch_size=1000`` as ``--fetch-size=1000``; ``True`` as a bare flag;
    a list (``columns=["id", "amount"]``) as its items between commas."""
    flags = []
    for name, value in settings.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif isinstance(value, (list, tuple)):
            if any(not isinstance(item, str) or "," in item for item in value):
                raise UsageError(f"{name} is a list of names without commas, not {value!r}")
            flags.append(f"{flag}={','.join(value)}")
        elif value is not None and value is not False:
            flags.append(f"{flag}={value}")
    return flags


def _export_arguments(
    url: str, query: str | None, params: Sequence[Any] | None, settings: Mapping[str, Any]
) -> list[str]:
    if (query is None) == (settings.get("table") is None):
        raise UsageError("give a query, or table= to read every row of a table (not both)")
    # `--name=value` keeps a value that starts with `-` (a negative number, a
    # query opening with a comment) from being read as a flag.
    return [
        "export",
        f"--db={url}",
        *([f"--query={query}"] if query is not None else []),
        *(f"--param={_parameter(value)}" for value in params or ()),
        "--format=arrow",
        "--stats",
        *_flags(settings),
    ]


def read_batches(
    url: str, query: str | None = None, params: Sequence[Any] | None = None, batch_rows: int = 65536, **settings: Any
) -> Iterator["pyarrow.RecordBatch"]:
    """Streams the query's rows as ``pyarrow.RecordBatch`` es of at most
    ``batch_rows`` rows, one at a time: memory holds one batch. ``$1``, ``$2`` …
    in the query are bound from ``params``; ``settings`` are ``sluice export``
    flags by name (``fetch_size=1000``, ``timeout="30s"``, ``numeric_scale=2``).
    Closing the iterator early ends the query on the server.

    ``table="name"`` reads every row of a table instead of a query: a
    table's name, never SQL (``orders``, ``shop.orders``, parts quoted as the
    database quotes names); anything else raises :class:`UsageError` before
    any SQL runs (with
    ``columns=["id", "amount"]``, only those columns, in that order: the
    database reads no other), and ``jobs=N`` reads in N parts of one snapshot
    at once (PostgreSQL): a table is cut by its storage, a query by
    ``split_by="an_integer_column"``. The parts' batches arrive interleaved:
    rows keep no order with ``jobs`` above 1."""
    import pyarrow.ipc

    run = Run(_export_arguments(url, query, params, {"batch_rows": batch_rows, **settings}), reads=True)
    with watched(run):
        reader = pyarrow.ipc.open_stream(run.output)
        note_text_columns(reader.schema)
        yield from reader


def read_arrow(
    url: str, query: str | None = None, params: Sequence[Any] | None = None, **settings: Any
) -> "pyarrow.Table":
    """The query's rows as a ``pyarrow.Table`` (see :func:`read_batches`)."""
    import pyarrow.ipc

    run = Run(_export_arguments(url, query, params, settings), reads=True)
    with watched(run):
        reader = pyarrow.ipc.open_stream(run.output)
        note_text_columns(reader.schema)
        table = reader.read_all()
    return table


def read_pandas(
    url: str,
    query: str | None = None,
    params: Sequence[Any] | None = None,
    dtype_backend: str | None = None,
    **settings: Any,
) -> "pandas.DataFrame":
    """The query's rows as a pandas DataFrame, every value exact.

    ``dtype_backend`` is pandas' own choice of column types (as in
    ``pandas.read_sql``):

    - ``None`` (the default): NumPy dtypes where they hold every value,
      pandas' nullable integers (``Int16``, ``Int32``, ``Int64``, ``UInt64``)
      so that NULLs never turn integers into floats, and Arrow-backed
      ``pandas.ArrowDtype`` columns for decimals with a scale, arrays and
      records (their elements exact: an element reads as a ``Decimal``, a
      ``list``, a ``dict``);
    - ``"numpy_nullable"``: as above, with pandas' ``boolean``, ``string`` and
      ``Float32``/``Float64`` too;
    - ``"pyarrow"``: every column Arrow-backed (``pandas.ArrowDtype``), which
      converts without copying.

    Dates are ``datetime64[ms]`` and timestamps ``datetime64[us]`` (both
    backends but ``"pyarrow"``), so that every PostgreSQL date converts:
    ``infinity`` is the latest value of the type and ``-infinity`` the
    earliest (never ``NaT``). ``numeric`` without a declared scale is
    ``decimal.Decimal`` objects (with ``"pyarrow"``, ``Decimal128(38, s)`` or
    ``Decimal256(76, s)`` of the result's largest scale ``s``, or the exact
    text, with a warning, for ``NaN``, infinities or more digits). A value pandas cannot
    hold (``time '24:00'``) raises :class:`BadInput` naming its row and
    column.

    Each record batch is converted as it arrives, while sluice reads the next
    (converting strings to Python objects costs about as much as reading
    them), and its Arrow memory is freed once converted: the peak holds the
    DataFrame and one batch. UUIDs read as 16 ``bytes``, JSON as ``str``."""
    import pandas
    import pyarrow.ipc

    if dtype_backend == "pyarrow":
        # Arrow-backed columns convert without copying: nothing to overlap
        # with reading, and decimals take one scale for the whole result.
        table = exact_for_arrow(read_arrow(url, query, params, **settings))
        return table.to_pandas(types_mapper=pandas.ArrowDtype)
    mapper = pandas_types(dtype_backend, pandas)
    run = Run(_export_arguments(url, query, params, settings), reads=True)
    with watched(run):
        reader = pyarrow.ipc.open_stream(run.output)
        note_text_columns(reader.schema)
        rows = 0
        parts = []
        for batch in reader:
            parts.append(batch_to_pandas(pyarrow.Table.from_batches([batch]), mapper, rows))
            rows += batch.num_rows
    if not parts:
        return batch_to_pandas(reader.schema.empty_table(), mapper, 0)
    return pandas.concat(parts, ignore_index=True)


def read_polars(
    url: str, query: str | None = None, params: Sequence[Any] | None = None, **settings: Any
) -> "polars.DataFrame":
    """The query's rows as a polars DataFrame, built from the Arrow columns
    without copying where polars can, every value exact.

    Two Arrow types polars lacks are converted: an ``interval`` column is a
    ``Duration("us")`` when none of its values has months (days count 24
    hours, as ``timedelta`` has them), else a struct of ``months``, ``days``
    and ``nanoseconds``; ``numeric`` without a declared scale is a
    ``Decimal(38, s)`` of the result's largest scale, or its exact text (with
    a warning) when a value is ``NaN`` or an infinity or the values need more
    than 38 digits at that scale."""
    import polars

    return polars.from_arrow(exact_for_arrow(read_arrow(url, query, params, **settings), for_polars=True))
