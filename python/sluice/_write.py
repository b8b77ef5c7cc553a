"""Writing: Arrow, pandas or polars data into a table through ``sluice import
--format arrow``, atomically."""

from __future__ import annotations

from typing import Any, Sequence

from ._binary import Run, watched
from ._errors import UsageError
from ._from_pandas import pandas_batches


def write(
    url: str,
    table: str,
    data: Any,
    on_conflict: str = "error",
    key: Sequence[str] | None = None,
) -> None:
    """Loads ``data`` into ``table`` (a table's name, never SQL: ``orders``,
    ``shop.orders``, parts quoted as the database quotes names) through COPY,
    atomically: every row or none. ``data`` is a ``pyarrow.Table``,
    ``RecordBatch`` or ``RecordBatchReader``, a pandas or polars DataFrame, or
    anything with ``__arrow_c_stream__``; its column names name the table's
    columns it fills. ``on_conflict`` is ``error``, ``ignore`` (keep existing
    rows) or ``update`` (overwrite them, by the columns of ``key``).

    A row the table refuses raises :class:`DatabaseError` (or :class:`BadInput`)
    whose ``row`` is its 0-based index in ``data`` and ``column_name`` its column.
    Memory holds one record batch: a ``RecordBatchReader`` streams.

    Every value goes in as it is or not at all: a value its column's type
    cannot hold exactly (a fraction or an out-of-range number in an integer
    column, digits a ``numeric`` column would round away or too many before
    its point, an integer or decimal a float column would round, trailing
    spaces a ``varchar(n)`` would cut, a time of day in a date column)
    raises :class:`BadInput` naming its row and column, and nothing is
    committed. sluice checks each value against its column's type as the
    catalog declares it, which needs no privilege on the table's rows.
    pandas' missing values (``None``, ``NaN``, ``NaT``, ``pd.NA``) are
    NULL."""
    import pyarrow.ipc

    arguments = [
        "import",
        f"--db={url}",
        f"--table={table}",
        "--format=arrow",
        f"--on-conflict={on_conflict}",
        "--stats",
    ]
    if key:
        arguments.append("--key=" + ",".join(key))
    run = Run(arguments, reads=False)
    with watched(run):
        reader = record_batch_reader(data)
        with pyarrow.ipc.new_stream(run.input, reader.schema) as stream:
            for batch in reader:
                stream.write_batch(batch)
        # The end of the input is what lets sluice commit.
        run.input.close()


def record_batch_reader(data: Any) -> "pyarrow.RecordBatchReader":
    """``data`` as a stream of record batches, without copying Arrow data."""
    import pyarrow

    if isinstance(data, pyarrow.RecordBatchReader):
        return data
    if isinstance(data, pyarrow.RecordBatch):
        data = pyarrow.Table.from_batches([data])
    if isinstance(data, pyarrow.Table):
        return data.to_reader()
    module = type(data).__module__
    if module.startswith("pandas"):
        return pandas_batches(data)
    if module.startswith("polars"):
        return data.to_arrow().to_reader()
    if hasattr(data, "__arrow_c_stream__"):
        return pyarrow.RecordBatchReader.from_stream(data)
    raise UsageError(f"cannot write a {type(data).__name__}: pass a pyarrow Table, a pandas or polars DataFrame")
