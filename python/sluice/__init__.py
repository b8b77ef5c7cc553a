"""sluice from Python: SQL results as Arrow, pandas or polars, and DataFrames
back into tables through COPY.

The module runs the ``sluice`` binary and reads its Arrow IPC stream from a pipe
(``sluice export --format arrow``), or writes one into it (``sluice import
--format arrow``). So every database sluice reads, and every connection setting
of its command line (URLs, libpq ``key=value`` strings, ``PG*`` variables, TLS),
works here unchanged, memory stays at one record batch on either side, and
stopping a query is stopping the process: sluice cancels it on the server when
interrupted.

The binary is, in order: ``SLUICE_BIN`` when set, the one installed beside this
module or among the interpreter's scripts (the wheel puts it there), else
``sluice`` on ``PATH``.

Errors raise :class:`Error` (or a subclass by cause) carrying the SQLSTATE, the
line and column of the query the server points at, and for writes the 0-based
row index and column of the first bad row. :func:`last_stats` tells rows,
bytes, round trips and time of the last call in this thread.
"""

from __future__ import annotations

import contextlib
import datetime
import json
import os
import shutil
import signal
import subprocess
import sysconfig
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator, Mapping, Sequence

__all__ = [
    "BadInput",
    "ConnectionFailed",
    "DatabaseError",
    "Error",
    "Stats",
    "UsageError",
    "last_stats",
    "read_arrow",
    "read_batches",
    "read_pandas",
    "read_polars",
    "write",
]

# How long an interrupted sluice gets to cancel the query and exit before it is
# killed (it gives the server two seconds to take the cancel).
_INTERRUPT_GRACE_SECONDS = 10


class Error(Exception):
    """A failure sluice reported. Fields the report did not give are ``None``.

    ``kind`` is sluice's error kind (``database``, ``connect``, ``config``,
    ``data``, …); ``sqlstate`` the server's code; ``line`` and ``column`` (from
    1) where in the query the server points; ``row`` the 0-based index of the
    row a write refused and ``column_name`` its column; ``exit_code`` the
    process's.
    """

    def __init__(self, message: str, report: Mapping[str, Any] | None = None, exit_code: int | None = None):
        super().__init__(message)
        report = report or {}
        self.message = message
        self.kind: str | None = report.get("kind")
        self.sqlstate: str | None = report.get("sqlstate")
        self.line: int | None = report.get("line")
        self.column: int | None = report.get("column")
        self.position: int | None = report.get("position")
        self.detail: str | None = report.get("detail")
        self.hint: str | None = report.get("hint")
        self.column_name: str | None = report.get("column_name")
        # sluice numbers the records of an Arrow stream from 1.
        record = report.get("record")
        self.row: int | None = record - 1 if record is not None else None
        self.exit_code = exit_code if exit_code is not None else report.get("exit_code")


class DatabaseError(Error):
    """The database refused the statement or a row (exit code 1)."""


class UsageError(Error):
    """Bad arguments or connection settings, or something the database cannot do (exit code 2)."""


class ConnectionFailed(Error):
    """The server could not be reached, refused the login, or went away (exit code 3)."""


class BadInput(Error):
    """A row of the data to write cannot be converted for its column (exit code 5)."""


_ERROR_BY_EXIT_CODE = {1: DatabaseError, 2: UsageError, 3: ConnectionFailed, 5: BadInput}


@dataclass(frozen=True)
class Stats:
    """What the last call moved: rows, bytes of the Arrow stream, round trips to
    the database (connecting included), wire bytes, and wall seconds."""

    rows: int
    bytes: int
    round_trips: int
    round_trips_connecting: int
    wire_bytes_sent: int
    wire_bytes_received: int
    elapsed: float
    peak_memory_bytes: int | None

    @classmethod
    def from_report(cls, report: Mapping[str, Any]) -> Stats:
        # An export counts rows and output bytes; an import rows written and input bytes.
        return cls(
            rows=report.get("rows", report.get("rows_written", 0)),
            bytes=report.get("output_bytes", report.get("input_bytes", 0)),
            round_trips=report["round_trips"],
            round_trips_connecting=report["round_trips_connecting"],
            wire_bytes_sent=report["wire_bytes_sent"],
            wire_bytes_received=report["wire_bytes_received"],
            elapsed=report["elapsed_seconds"],
            peak_memory_bytes=report.get("peak_memory_bytes"),
        )


_last = threading.local()


def last_stats() -> Stats | None:
    """The figures of this thread's last successful read or write, or ``None``."""
    return getattr(_last, "stats", None)


def _binary() -> str:
    """The ``sluice`` executable to run (see the module docs for the order)."""
    explicit = os.environ.get("SLUICE_BIN")
    if explicit:
        return explicit
    for directory in (Path(__file__).parent, Path(sysconfig.get_path("scripts"))):
        candidate = directory / "sluice"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("sluice")
    if found is None:
        raise UsageError("no sluice binary: install the package with pip, or set SLUICE_BIN")
    return found


class _Run:
    """One sluice process: reports (JSON lines) go to a temporary file rather than a
    pipe, so a chatty standard error can never block it."""

    def __init__(self, arguments: Sequence[str], *, reads: bool):
        self.reads = reads
        self.reports = tempfile.TemporaryFile()
        environment = dict(os.environ, SLUICE_REPORT="json")
        self.process = subprocess.Popen(
            [_binary(), *arguments],
            stdin=subprocess.DEVNULL if reads else subprocess.PIPE,
            stdout=subprocess.PIPE if reads else subprocess.DEVNULL,
            stderr=self.reports,
            env=environment,
        )

    def interrupt(self) -> None:
        """Ctrl-C for the process: sluice cancels the query on the server and
        exits; killed if it does not within the grace period."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=_INTERRUPT_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.close()

    def close(self) -> None:
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.reports.close()

    def finish(self) -> None:
        """Waits for the process; raises its error, or records its stats."""
        code = self.process.wait()
        self.reports.seek(0)
        lines = self.reports.read().decode("utf-8", "replace").splitlines()
        self.close()
        reports = [_parse_report(line) for line in lines]
        if code != 0:
            raise _error(code, reports, lines)
        stats = next((report["stats"] for report in reports if "stats" in report), None)
        if stats is not None:
            _last.stats = Stats.from_report(stats)


def _parse_report(line: str) -> dict:
    if line.startswith("{"):
        with contextlib.suppress(ValueError):
            return json.loads(line)
    return {}


def _error(code: int, reports: list[dict], lines: list[str]) -> Error:
    report = next((report["error"] for report in reports if "error" in report), None)
    kind = _ERROR_BY_EXIT_CODE.get(code, Error)
    if report is None:
        # An argument sluice's parser refused, or a crash: its words as they are.
        text = "\n".join(line for line in lines if line.strip()) or f"sluice exited with code {code}"
        return kind(text, None, code)
    return kind(report["message"], report, code)


@contextlib.contextmanager
def _watched(run: _Run) -> Iterator[None]:
    """Ends the process when the caller stops early (an exception, an iterator
    closed, Ctrl-C) and turns a failed stream into sluice's own error.

    A write's process is interrupted, never sent the end of its input, on any
    failure of ours: it would take a stream cut at a batch boundary for a
    whole one and commit it."""
    import pyarrow

    # A read's stream fails when sluice does; a write's pipe breaks (OSError)
    # when sluice has stopped reading it.
    its_failure = (pyarrow.ArrowException, OSError) if run.reads else OSError
    try:
        yield
    except its_failure:
        # The process says why.
        run.finish()
        raise
    except BaseException:
        run.interrupt()
        raise
    run.finish()


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
    """``fetch_size=1000`` as ``--fetch-size=1000``; ``True`` as a bare flag."""
    flags = []
    for name, value in settings.items():
        flag = "--" + name.replace("_", "-")
        if value is True:
            flags.append(flag)
        elif value is not None and value is not False:
            flags.append(f"{flag}={value}")
    return flags


def _export_arguments(url: str, query: str, params: Sequence[Any] | None, settings: Mapping[str, Any]) -> list[str]:
    # `--name=value` keeps a value that starts with `-` (a negative number, a
    # query opening with a comment) from being read as a flag.
    return [
        "export",
        f"--db={url}",
        f"--query={query}",
        *(f"--param={_parameter(value)}" for value in params or ()),
        "--format=arrow",
        "--stats",
        *_flags(settings),
    ]


def read_batches(
    url: str, query: str, params: Sequence[Any] | None = None, batch_rows: int = 65536, **settings: Any
) -> Iterator["pyarrow.RecordBatch"]:
    """Streams the query's rows as ``pyarrow.RecordBatch`` es of at most
    ``batch_rows`` rows, one at a time: memory holds one batch. ``$1``, ``$2`` …
    in the query are bound from ``params``; ``settings`` are ``sluice export``
    flags by name (``fetch_size=1000``, ``timeout="30s"``, ``numeric_scale=2``).
    Closing the iterator early ends the query on the server."""
    import pyarrow.ipc

    run = _Run(_export_arguments(url, query, params, {"batch_rows": batch_rows, **settings}), reads=True)
    with _watched(run):
        yield from pyarrow.ipc.open_stream(run.process.stdout)


def read_arrow(url: str, query: str, params: Sequence[Any] | None = None, **settings: Any) -> "pyarrow.Table":
    """The query's rows as a ``pyarrow.Table`` (see :func:`read_batches`)."""
    import pyarrow.ipc

    run = _Run(_export_arguments(url, query, params, settings), reads=True)
    with _watched(run):
        table = pyarrow.ipc.open_stream(run.process.stdout).read_all()
    return table


def read_pandas(
    url: str,
    query: str,
    params: Sequence[Any] | None = None,
    dtype_backend: str | None = None,
    **settings: Any,
) -> "pandas.DataFrame":
    """The query's rows as a pandas DataFrame.

    ``dtype_backend`` is pandas' own choice of column types (as in
    ``pandas.read_sql``):

    - ``None`` (the default): NumPy dtypes, as ``pyarrow.Table.to_pandas`` gives
      them, except exact decimals (NUMERIC with a scale), which stay
      Arrow-backed as ``pandas.ArrowDtype(pyarrow.decimal128(p, s))``: exact,
      and without a ``decimal.Decimal`` object per value (an element still
      reads as a ``Decimal``);
    - ``"numpy_nullable"``: pandas' nullable dtypes (``Int64``, ``boolean``,
      ``string``, ``Float64``), decimals as above;
    - ``"pyarrow"``: every column Arrow-backed (``pandas.ArrowDtype``), which
      converts without copying.

    Each record batch is converted as it arrives, while sluice reads the next
    (converting strings to Python objects costs about as much as reading
    them), and its Arrow memory is freed once converted: the peak holds the
    DataFrame and one batch. UUIDs read as 16 ``bytes``, JSON as ``str``."""
    import pandas
    import pyarrow.ipc

    mapper = _pandas_types(dtype_backend, pandas)
    run = _Run(_export_arguments(url, query, params, settings), reads=True)
    with _watched(run):
        reader = pyarrow.ipc.open_stream(run.process.stdout)
        parts = [_batch_to_pandas(pyarrow.Table.from_batches([batch]), mapper) for batch in reader]
    if not parts:
        return _batch_to_pandas(reader.schema.empty_table(), mapper)
    return pandas.concat(parts, ignore_index=True)


def _batch_to_pandas(table: "pyarrow.Table", mapper: Any) -> "pandas.DataFrame":
    """One batch's rows as a DataFrame: a block per column, each column's
    Arrow memory released as soon as it is converted (the table is ours
    alone). Extension types (uuid, json) go as their storage, the same
    Python values, since both ``pandas.ArrowDtype`` and split blocks take
    only Arrow's own types."""
    return _storage_types(table).to_pandas(types_mapper=mapper, split_blocks=True, self_destruct=True)


def _pandas_types(dtype_backend: str | None, pandas: Any) -> Any:
    """``to_pandas``'s ``types_mapper`` for ``read_pandas``'s ``dtype_backend``."""
    import pyarrow

    def decimals_as_arrow(arrow_type: "pyarrow.DataType") -> Any:
        return pandas.ArrowDtype(arrow_type) if pyarrow.types.is_decimal(arrow_type) else None

    if dtype_backend is None:
        return decimals_as_arrow
    if dtype_backend == "pyarrow":
        return pandas.ArrowDtype
    if dtype_backend == "numpy_nullable":
        nullable = {
            pyarrow.int8(): pandas.Int8Dtype(),
            pyarrow.int16(): pandas.Int16Dtype(),
            pyarrow.int32(): pandas.Int32Dtype(),
            pyarrow.int64(): pandas.Int64Dtype(),
            pyarrow.bool_(): pandas.BooleanDtype(),
            pyarrow.float32(): pandas.Float32Dtype(),
            pyarrow.float64(): pandas.Float64Dtype(),
            pyarrow.string(): pandas.StringDtype(),
            pyarrow.large_string(): pandas.StringDtype(),
        }
        return lambda arrow_type: nullable.get(arrow_type) or decimals_as_arrow(arrow_type)
    raise UsageError(f'dtype_backend must be None, "numpy_nullable" or "pyarrow", not {dtype_backend!r}')


def read_polars(url: str, query: str, params: Sequence[Any] | None = None, **settings: Any) -> "polars.DataFrame":
    """The query's rows as a polars DataFrame, built from the Arrow columns
    without copying where polars can."""
    import polars

    return polars.from_arrow(_storage_types(read_arrow(url, query, params, **settings)))


def write(
    url: str,
    table: str,
    data: Any,
    on_conflict: str = "error",
    key: Sequence[str] | None = None,
) -> None:
    """Loads ``data`` into ``table`` (optionally schema-qualified) through COPY,
    atomically: every row or none. ``data`` is a ``pyarrow.Table``,
    ``RecordBatch`` or ``RecordBatchReader``, a pandas or polars DataFrame, or
    anything with ``__arrow_c_stream__``; its column names name the table's
    columns it fills. ``on_conflict`` is ``error``, ``ignore`` (keep existing
    rows) or ``update`` (overwrite them, by the columns of ``key``).

    A row the table refuses raises :class:`DatabaseError` (or :class:`BadInput`)
    whose ``row`` is its 0-based index in ``data`` and ``column_name`` its column.
    Memory holds one record batch: a ``RecordBatchReader`` streams."""
    import pyarrow.ipc

    reader = _record_batch_reader(data)
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
    run = _Run(arguments, reads=False)
    with _watched(run):
        with pyarrow.ipc.new_stream(run.process.stdin, reader.schema) as stream:
            for batch in reader:
                stream.write_batch(batch)
        # The end of the input is what lets sluice commit.
        run.process.stdin.close()


def _record_batch_reader(data: Any) -> "pyarrow.RecordBatchReader":
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
        return _pandas_batches(data)
    if module.startswith("polars"):
        return data.to_arrow().to_reader()
    if hasattr(data, "__arrow_c_stream__"):
        return pyarrow.RecordBatchReader.from_stream(data)
    raise UsageError(f"cannot write a {type(data).__name__}: pass a pyarrow Table, a pandas or polars DataFrame")


#: Rows of a DataFrame converted to Arrow at a time by :func:`write`.
PANDAS_BATCH_ROWS = 65536

#: Non-missing values of an object column whose Python types decide its Arrow type.
_TYPE_SAMPLE_ROWS = 1000


def _pandas_batches(frame: Any) -> "pyarrow.RecordBatchReader":
    """A pandas DataFrame as record batches converted one at a time, as sluice
    asks for them: the conversion (slow for object columns such as
    ``Decimal`` or strings) overlaps the COPY running in sluice's process, and
    memory holds one converted batch rather than a copy of the whole frame."""
    import pyarrow

    schema, whole = _pandas_schema(frame)
    positions = [index for index, name in enumerate(schema.names) if name not in whole]
    rest = pyarrow.schema([schema.field(index) for index in positions])
    # The columns left to convert, chosen once: choosing them in every
    # batch's `iloc` costs more than converting the batch.
    remaining = frame.iloc[:, positions] if whole else frame

    def batches() -> Iterator["pyarrow.RecordBatch"]:
        for start in range(0, len(frame), PANDAS_BATCH_ROWS):
            part = remaining.iloc[start : start + PANDAS_BATCH_ROWS]
            try:
                converted = pyarrow.RecordBatch.from_pandas(part, schema=rest, preserve_index=False)
            except (pyarrow.ArrowInvalid, pyarrow.ArrowTypeError) as error:
                raise BadInput(
                    f"rows {start} to {start + len(part) - 1} of the DataFrame cannot be converted to Arrow: {error}"
                ) from error
            arrays = [
                whole[name].slice(start, len(part)) if name in whole else converted.column(name)
                for name in schema.names
            ]
            yield pyarrow.RecordBatch.from_arrays(arrays, schema=schema)

    return pyarrow.RecordBatchReader.from_batches(schema, batches())


def _pandas_schema(frame: Any) -> tuple["pyarrow.Schema", dict]:
    """The frame's Arrow schema, and the columns converted whole.

    pyarrow infers an object column's type by converting all of it, which
    costs as much as the conversion itself, before the first row can go.
    Instead, typed columns take their dtype's type, and an object column the
    type of its first non-missing values (a later value of another Python
    type fails its batch), so a column whose first rows are all missing
    still gets its type. ``Decimal`` objects are the exception: every
    value's digits decide the scale, so such a column is converted whole,
    once (16 bytes a row), and sliced per batch."""
    import pyarrow

    typed = pyarrow.Schema.from_pandas(frame.iloc[:0], preserve_index=False)
    fields = []
    whole = {}
    for position, field in enumerate(typed):
        series = frame.iloc[:, position]
        if series.dtype == object:
            sample = _first_present(series)
            field = field.with_type(pyarrow.infer_type(sample.to_numpy(), from_pandas=True) if len(sample) else pyarrow.null())
            if pyarrow.types.is_decimal(field.type):
                whole[field.name] = _decimal_array(series, field.type)
                field = field.with_type(whole[field.name].type)
        fields.append(field)
    return pyarrow.schema(fields), whole


def _first_present(series: Any) -> Any:
    """Up to ``_TYPE_SAMPLE_ROWS`` of the column's first non-missing values,
    looking past its head only when the head has none."""
    head = series.iloc[: 4 * _TYPE_SAMPLE_ROWS]
    present = head[head.notna()]
    if len(present) == 0 and len(series) > len(head):
        rest = series.iloc[len(head) :]
        present = rest[rest.notna()]
    return present.iloc[:_TYPE_SAMPLE_ROWS]


def _decimal_array(series: Any, sampled: "pyarrow.DataType") -> "pyarrow.Array":
    """A column of ``Decimal`` objects as one Arrow array: at the sampled
    values' scale with the widest precision, which converts four times faster
    than letting pyarrow find both from every value; that, when a later value
    has more digits after the point than the sample."""
    import pyarrow

    widest = pyarrow.decimal128(38, sampled.scale) if sampled.scale <= 38 else sampled
    try:
        return pyarrow.array(series, type=widest, from_pandas=True)
    except (pyarrow.ArrowInvalid, pyarrow.ArrowTypeError):
        return pyarrow.array(series, from_pandas=True)


def _storage_types(table: "pyarrow.Table") -> "pyarrow.Table":
    """The table with extension types (``arrow.uuid``, ``arrow.json``) as their
    storage, which every reader knows."""
    import pyarrow

    columns = [
        column.cast(column.type.storage_type) if isinstance(column.type, pyarrow.BaseExtensionType) else column
        for column in table.columns
    ]
    return pyarrow.table(columns, names=table.column_names)
