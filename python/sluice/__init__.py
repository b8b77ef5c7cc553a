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
import decimal
import io
import json
import math
import numbers
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
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

# How often a wait for sluice (its pipe, its exit) returns to Python code, where
# the interpreter runs a pending signal's handler: see _Pipe.
_WAKE_SECONDS = 0.1


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
    """A row of the data to write cannot be converted for its column (exit code
    5), or a value read cannot be held by the DataFrame's column type."""


_ERROR_BY_EXIT_CODE = {1: DatabaseError, 2: UsageError, 3: ConnectionFailed, 5: BadInput}


@dataclass(frozen=True)
class Stats:
    """What the last call moved: rows, bytes of the Arrow stream, round trips to
    the database (connecting included), wire bytes, wall seconds, and for a read
    in parts (``jobs=N``) each part's rows."""

    rows: int
    bytes: int
    round_trips: int
    round_trips_connecting: int
    wire_bytes_sent: int
    wire_bytes_received: int
    elapsed: float
    peak_memory_bytes: int | None
    part_rows: tuple[int, ...] = ()

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
            part_rows=tuple(report.get("part_rows", ())),
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


class _Pipe(io.RawIOBase):
    """Our end of a pipe to or from sluice, waited on so that Ctrl-C is answered
    within ``_WAKE_SECONDS`` whatever else the process has imported.

    A blocking ``read`` or ``write`` on a pipe (what pyarrow's reader and writer
    do, in C++) gives the interpreter a chance to run a signal's handler only
    when the signal interrupts the call, and that happens only when the signal
    lands on this thread and its C handler was installed without
    ``SA_RESTART``, as Python installs its own. Importing polars breaks the
    second: its runtime installs a SIGINT handler of its own (through the Rust
    crate signal-hook, for interrupting its own queries) with ``SA_RESTART``,
    chained to Python's. Python's handler still notes the signal, but the
    kernel restarts the read, which sleeps on until sluice writes, after the
    whole query for one that sends nothing before its end; the
    ``KeyboardInterrupt`` came then, and sluice was never told. (Python's
    Python-level handler is unchanged: ``signal.getsignal`` shows nothing.)
    Any other library doing the same, or a signal the kernel gives to one of
    the process's other threads (pyarrow's, polars'), does it too.

    So the pipe is non-blocking and a wait on it (``poll``) returns to Python
    code every ``_WAKE_SECONDS``, where the interpreter runs whatever handler
    the signal has waiting: Python's default raises ``KeyboardInterrupt``,
    which ends the read or write, and :func:`_watched` passes it on to sluice.
    Off the main thread, where no handler runs, the wait just goes on."""

    def __init__(self, file: io.FileIO, writes: bool):
        super().__init__()
        self._file = file
        self._writes = writes
        os.set_blocking(file.fileno(), False)
        self._poll = select.poll()
        self._poll.register(file.fileno(), select.POLLOUT if writes else select.POLLIN)

    @property
    def mode(self) -> str:
        # What pyarrow asks a file object it is given (through its buffer).
        return "wb" if self._writes else "rb"

    def fileno(self) -> int:
        return self._file.fileno()

    def readable(self) -> bool:
        return not self._writes

    def writable(self) -> bool:
        return self._writes

    def readinto(self, buffer: Any) -> int:
        while True:
            count = self._file.readinto(buffer)  # None: nothing there yet
            if count is not None:
                return count
            self._poll.poll(_WAKE_SECONDS * 1000)

    def write(self, data: Any) -> int:
        while True:
            count = self._file.write(data)  # None: the pipe is full
            if count is not None:
                return count
            self._poll.poll(_WAKE_SECONDS * 1000)

    def close(self) -> None:
        self._file.close()
        super().close()


class _Run:
    """One sluice process: reports (JSON lines) go to a temporary file rather than a
    pipe, so a chatty standard error can never block it. A read's Arrow stream
    is ``output``, a write's is ``input``: buffered :class:`_Pipe` s."""

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
            # The pipe's own file, which _Pipe buffers.
            bufsize=0,
        )
        self.output = io.BufferedReader(_Pipe(self.process.stdout, writes=False)) if reads else None
        self.input = None if reads else io.BufferedWriter(_Pipe(self.process.stdin, writes=True))

    def interrupt(self) -> None:
        """Ctrl-C for the process: sluice cancels the query on the server and
        exits; killed if it does not within the grace period, or when waiting
        for it is interrupted in turn (a second Ctrl-C)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=_INTERRUPT_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self._kill()
            except BaseException:
                self._kill()
                self.close()
                raise
        self.close()

    def _kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def close(self) -> None:
        # The process has ended: a write's buffer left unsent breaks the pipe.
        for stream in (self.input, self.output):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.reports.close()

    def finish(self) -> None:
        """Waits for the process; raises its error, or records its stats. An
        interrupt while waiting (a write's commit) interrupts the process."""
        try:
            code = self._exit_code()
        except BaseException:
            self.interrupt()
            raise
        self.reports.seek(0)
        lines = self.reports.read().decode("utf-8", "replace").splitlines()
        self.close()
        reports = [_parse_report(line) for line in lines]
        if code != 0:
            raise _error(code, reports, lines)
        stats = next((report["stats"] for report in reports if "stats" in report), None)
        if stats is not None:
            _last.stats = Stats.from_report(stats)

    def _exit_code(self) -> int:
        """The process's exit code, waited for in steps that let a signal's
        handler run (a blocking ``waitpid`` is restarted as a read is: see
        :class:`_Pipe`)."""
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                return self.process.wait(timeout=_WAKE_SECONDS)


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

    run = _Run(_export_arguments(url, query, params, {"batch_rows": batch_rows, **settings}), reads=True)
    with _watched(run):
        reader = pyarrow.ipc.open_stream(run.output)
        _note_text_columns(reader.schema)
        yield from reader


def read_arrow(
    url: str, query: str | None = None, params: Sequence[Any] | None = None, **settings: Any
) -> "pyarrow.Table":
    """The query's rows as a ``pyarrow.Table`` (see :func:`read_batches`)."""
    import pyarrow.ipc

    run = _Run(_export_arguments(url, query, params, settings), reads=True)
    with _watched(run):
        reader = pyarrow.ipc.open_stream(run.output)
        _note_text_columns(reader.schema)
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
        table = _exact_for_arrow(read_arrow(url, query, params, **settings))
        return table.to_pandas(types_mapper=pandas.ArrowDtype)
    mapper = _pandas_types(dtype_backend, pandas)
    run = _Run(_export_arguments(url, query, params, settings), reads=True)
    with _watched(run):
        reader = pyarrow.ipc.open_stream(run.output)
        _note_text_columns(reader.schema)
        rows = 0
        parts = []
        for batch in reader:
            parts.append(_batch_to_pandas(pyarrow.Table.from_batches([batch]), mapper, rows))
            rows += batch.num_rows
    if not parts:
        return _batch_to_pandas(reader.schema.empty_table(), mapper, 0)
    return pandas.concat(parts, ignore_index=True)


#: Arrow's timestamp for PostgreSQL's ``-infinity``, which NumPy reads as
#: ``NaT``; pandas gets the earliest timestamp it holds instead.
_TIMESTAMP_MINUS_INFINITY = -(2**63)


def _batch_to_pandas(table: "pyarrow.Table", mapper: Any, first_row: int) -> "pandas.DataFrame":
    """One batch's rows as a DataFrame, a block per column. Extension types
    (uuid, json) go as their storage, the same Python values, since both
    ``pandas.ArrowDtype`` and split blocks take only Arrow's own types.
    ``first_row`` is the batch's first row in the result, for errors."""
    table = _numpy_ready(_storage_types(table))
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
                return _bad_input(
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


def _pandas_types(dtype_backend: str | None, pandas: Any) -> Any:
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

    return polars.from_arrow(_exact_for_arrow(read_arrow(url, query, params, **settings), for_polars=True))


def _exact_for_arrow(table: "pyarrow.Table", for_polars: bool = False) -> "pyarrow.Table":
    """The table with extension types as their storage, ``numeric`` text as
    decimals and, for polars (whose decimals have at most 38 digits, and
    which has no interval type), intervals as durations or structs and wider
    decimals as text: in columns and in their arrays' elements and records'
    fields alike."""
    table = _storage_types(table)
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
    :func:`_exact_for_arrow` says; lists and structs rebuilt around their
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


def _note_text_columns(schema: "pyarrow.Schema") -> None:
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
        raise _bad_input(row, name, f"the interval {value} has nanoseconds, which Duration(us) does not hold")
    micros = nanoseconds // 1000
    if not -(2**63) <= micros < 2**63:
        raise _bad_input(row, name, f"the interval {value} passes 64-bit microseconds")
    return micros


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
    column, digits a ``numeric`` column would round away, an integer or
    decimal a float column would round, trailing spaces a ``varchar(n)``
    would cut) raises :class:`BadInput` naming its row and column before
    anything is committed, whether or not the login may read the table
    (when it may not, what the database refuses itself, such as an integer
    out of its column's range, is its :class:`DatabaseError`, naming them
    too). pandas' missing values (``None``, ``NaN``, ``NaT``, ``pd.NA``) are
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
    run = _Run(arguments, reads=False)
    with _watched(run):
        # The import connects while the column types are read.
        types = _table_types(url, table)
        reader = _checked(_record_batch_reader(data, types), types)
        with pyarrow.ipc.new_stream(run.input, reader.schema) as stream:
            for batch in reader:
                stream.write_batch(batch)
        # The end of the input is what lets sluice commit.
        run.input.close()


def _record_batch_reader(data: Any, types: Mapping[str, Any] | None = None) -> "pyarrow.RecordBatchReader":
    """``data`` as a stream of record batches, without copying Arrow data.
    ``types``, the table's column types by name, choose the Arrow type of a
    pandas object column of numbers going into a ``numeric`` column."""
    import pyarrow

    if isinstance(data, pyarrow.RecordBatchReader):
        return data
    if isinstance(data, pyarrow.RecordBatch):
        data = pyarrow.Table.from_batches([data])
    if isinstance(data, pyarrow.Table):
        return data.to_reader()
    module = type(data).__module__
    if module.startswith("pandas"):
        return _pandas_batches(data, types or {})
    if module.startswith("polars"):
        return data.to_arrow().to_reader()
    if hasattr(data, "__arrow_c_stream__"):
        return pyarrow.RecordBatchReader.from_stream(data)
    raise UsageError(f"cannot write a {type(data).__name__}: pass a pyarrow Table, a pandas or polars DataFrame")


#: Rows of a DataFrame converted to Arrow at a time by :func:`write`.
PANDAS_BATCH_ROWS = 65536

#: Non-missing values of an object column whose Python types decide its Arrow type.
_TYPE_SAMPLE_ROWS = 1000

#: What a failed conversion of Python values raises: pyarrow's ArrowInvalid
#: and ArrowTypeError (ValueError, TypeError), OverflowError for an int past 64
#: bits, decimal.InvalidOperation for a signalling NaN, ArrowNotImplementedError.
_CONVERSION_ERRORS = (ValueError, TypeError, ArithmeticError, NotImplementedError)


def _pandas_batches(frame: Any, types: Mapping[str, Any]) -> "pyarrow.RecordBatchReader":
    """A pandas DataFrame as record batches converted one at a time, as sluice
    asks for them: the conversion (slow for object columns such as
    ``Decimal`` or strings) overlaps the COPY running in sluice's process, and
    memory holds one converted batch rather than a copy of the whole frame.
    Typed columns convert together; an object column on its own
    (:func:`_object_array`), so that none of its values changes on the way."""
    import pyarrow

    schema, whole, objects = _pandas_schema(frame, types)
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


def _pandas_schema(frame: Any, types: Mapping[str, Any]) -> tuple["pyarrow.Schema", dict, set]:
    """The frame's Arrow schema, the columns converted whole (by position),
    and the positions of its object columns.

    pyarrow infers an object column's type by converting all of it, which
    costs as much as the conversion itself, before the first row can go.
    Instead, typed columns take their dtype's type, and an object column the
    type of its first non-missing values (a later value that does not
    convert to it exactly fails its batch), so a column whose first rows are
    all missing still gets its type. Integers and ``Decimal`` objects going
    into a ``numeric`` column take the column's own decimal type (so an int
    past 64 bits fits). Other ``Decimal`` objects are converted whole, once
    (16 bytes a row), and sliced per batch: every value's digits decide the
    scale."""
    import pyarrow

    typed = pyarrow.Schema.from_pandas(frame.iloc[:0], preserve_index=False)
    fields = []
    whole = {}
    objects = set()
    for position, field in enumerate(typed):
        series = frame.iloc[:, position]
        if series.dtype == object:
            objects.add(position)
            sampled = _sampled_type(series, field.name)
            sampled_kind = _number_kind(sampled)
            target = types.get(field.name)
            if sampled_kind in ("integer", "decimal") and target is not None and pyarrow.types.is_decimal(target):
                field = field.with_type(target)
            elif sampled_kind == "integer" and target is not None and pyarrow.types.is_unsigned_integer(target):
                field = field.with_type(pyarrow.uint64())
            elif sampled_kind == "decimal":
                whole[position] = _decimal_array(series.to_numpy(), sampled, field.name)
                objects.discard(position)
                field = field.with_type(whole[position].type)
            else:
                field = field.with_type(sampled)
        fields.append(field)
    return pyarrow.schema(fields), whole, objects


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
        raise _bad_input(first_row, column, f"{value!r} ({type(value).__name__}) has no Arrow type: {error}") from None


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
            exact = _exact_values(values, _as_decimal, 0, column)
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

    kind = _number_kind(arrow_type)
    if kind not in _PYARROW_EXACT or infer_dtype(values, skipna=True) in _PYARROW_EXACT[kind]:
        try:
            array = pyarrow.array(values, type=arrow_type, from_pandas=True)
        except _CONVERSION_ERRORS as error:
            if kind is None:
                row = _first_unconvertible(values, arrow_type)
                value = values[row]
                raise _bad_input(
                    first_row + row,
                    column,
                    f"{value!r} ({type(value).__name__}) is not of the type of the column's first values "
                    f"({arrow_type}): {error}",
                ) from None
        else:
            _check_nulls(array, values, first_row, column)
            return array
    if kind == "integer":
        convert = lambda value: _within_integer(_as_integer(value), arrow_type)  # noqa: E731
    elif kind == "float":
        convert = _as_float
    else:
        convert = lambda value: _within_decimal(_as_decimal(value), arrow_type)  # noqa: E731
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
        except _Refused as refused:
            raise _bad_input(first_row + index, column, str(refused)) from None
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
        raise _bad_input(first_row + row, column, f"{values[row]!r} would be stored as NULL")


# ---------------------------------------------------------- exact numbers --
#
# `write` reads the Arrow types of the table's columns first (`select * from
# table limit 0` through `sluice export`: Int16/32/64, Float32/64,
# Decimal128/256(p, s), …) and checks every batch against them before it goes:
# a vectorised test of the whole array (pyarrow.compute) sorts out the values
# that surely fit, and only the others are looked at one by one, in Python,
# where the rules below decide. A value that does not fit raises BadInput with
# its row and column; the import is interrupted, so nothing is committed.
#
# This check is the early one, not the only one: `sluice import` refuses on its
# own a value its column's declared type would round or cut (digits past a
# numeric(p,s)'s scale, spaces past a varchar(n), a number a float column
# would round), with the limits it reads from the catalog. So when the types
# cannot be read here (a login without SELECT on the table), nothing is
# rounded either: the import's error names the row instead.


class _Refused(Exception):
    """Why a value cannot go into its column unchanged."""


def _bad_input(row: int, column: str, reason: str) -> BadInput:
    # `record` is sluice's 1-based numbering, which Error turns into `row`.
    return BadInput(f"row {row}, column {column}: {reason}", {"kind": "data", "record": row + 1, "column_name": column})


#: A table name `write` may put into a query (`sluice export` has no way to
#: read a --table's types without its rows): up to three dot-separated
#: identifiers, bare or quoted (PostgreSQL's double quotes, MariaDB's
#: backticks), no space around the dots. Never more than sluice's own grammar
#: of names takes (docs/src/export.md), and text another database would read
#: otherwise is at worst a syntax error there: no backslash (an escape in a
#: MariaDB string) or NUL in a quoted part. The import refuses what is no name.
_NAME_PART = r'(?:"(?:[^"\\\x00]|"")+"|`(?:[^`\\\x00]|``)+`|[^\W\d][\w$]*)'
_TABLE_NAME = re.compile(rf"\s*{_NAME_PART}(?:\.{_NAME_PART}){{0,2}}\s*")


def _table_types(url: str, table: str) -> dict:
    """The Arrow types of the table's columns by name, as `sluice export`
    reads them: what :func:`write` checks values against. Empty when the
    name is not a plain (possibly quoted) table name, or the query fails in
    the database (no such table, no SELECT privilege): the import then
    reports what is wrong, or loads with its own checks of the values
    against the catalog's column types (see "exact numbers" below). A
    connection that fails fails the write."""
    import pyarrow.ipc

    if not _TABLE_NAME.fullmatch(table):
        return {}
    run = _Run(["export", f"--db={url}", f"--query=select * from {table} limit 0", "--format=arrow"], reads=True)
    try:
        with _watched(run):
            schema = pyarrow.ipc.open_stream(run.output).read_all().schema
    except ConnectionFailed:
        raise
    except Error:
        return {}
    return {field.name: field.type for field in schema}


def _number_kind(arrow_type: Any) -> str | None:
    """``integer``, ``float`` or ``decimal`` for an Arrow number type, else ``None``."""
    import pyarrow

    if pyarrow.types.is_integer(arrow_type):
        return "integer"
    if pyarrow.types.is_floating(arrow_type):
        return "float"
    if pyarrow.types.is_decimal(arrow_type):
        return "decimal"
    return None


def _is_text(arrow_type: "pyarrow.DataType") -> bool:
    import pyarrow

    is_view = getattr(pyarrow.types, "is_string_view", lambda _: False)
    return pyarrow.types.is_string(arrow_type) or pyarrow.types.is_large_string(arrow_type) or is_view(arrow_type)


def _integer_bounds(arrow_type: "pyarrow.DataType") -> tuple[int, int]:
    import pyarrow

    bits = arrow_type.bit_width
    if pyarrow.types.is_signed_integer(arrow_type):
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


#: Bits of a float's significand, and the significant decimal digits any
#: decimal of at most that many comes back from the float with (DBL_DIG, FLT_DIG).
_SIGNIFICAND_BITS = {16: 11, 32: 24, 64: 53}
_FLOAT_DIGITS = {16: 3, 32: 6, 64: 15}


def _as_integer(value: Any) -> int:
    """An int, a whole float or a whole ``Decimal`` as the int it is."""
    if isinstance(value, bool):
        raise _Refused(f"{value!r} is a boolean, not a number")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, decimal.Decimal):
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
    elif isinstance(value, numbers.Real):
        if math.isfinite(value) and value == math.floor(value):
            return int(value)
    else:
        raise _Refused(_not_a_number(value))
    raise _Refused(f"{_shown(value)} is not a whole number, which an integer column needs")


def _within_integer(number: int, arrow_type: "pyarrow.DataType") -> int:
    low, high = _integer_bounds(arrow_type)
    if not low <= number <= high:
        unsigned = "" if low else "unsigned "
        raise _Refused(f"{number} is out of range for the column's type ({unsigned}{arrow_type.bit_width}-bit integer)")
    return number


def _as_float(value: Any, bits: int = 64) -> float:
    """A number as the float of ``bits`` bits a column holds it as: exactly,
    or as the float whose shortest text is the number (0.1)."""
    if isinstance(value, bool):
        raise _Refused(f"{value!r} is a boolean, not a number")
    if isinstance(value, numbers.Integral):
        number = int(value)
        try:
            held = _float_of(float(number), bits)
        except OverflowError:
            held = math.inf
        if held != number:
            raise _Refused(f"{number} is not exactly a {bits}-bit float: the column would hold {_shortest(held, bits)}")
        return held
    if isinstance(value, decimal.Decimal):
        if value.is_snan():
            raise _Refused(f"{value} is not a number")
        if not value.is_finite():
            return float(value)
        try:
            held = _float_of(float(value), bits)
        except OverflowError:
            held = math.inf
        shortest = _shortest(held, bits)
        if decimal.Decimal(held) != value and decimal.Decimal(shortest) != value:
            raise _Refused(f"{value} has more digits than a {bits}-bit float holds: the column would hold {shortest}")
        return held
    if isinstance(value, numbers.Real):
        number = float(value)
        if not math.isfinite(number):
            return number
        try:
            held = _float_of(number, bits)
        except OverflowError:
            held = math.inf
        if held != number and float(_shortest(held, bits)) != number:
            raise _Refused(
                f"{_shown(number)} has more digits than a {bits}-bit float holds: "
                f"the column would hold {_shortest(held, bits)}"
            )
        return number
    raise _Refused(_not_a_number(value))


def _float_of(number: float, bits: int) -> float:
    """The float of ``bits`` bits nearest ``number`` (OverflowError past its range)."""
    if bits >= 64:
        return number
    return struct.unpack("f", struct.pack("f", number))[0]


def _shortest(number: float, bits: int) -> str:
    """The shortest text that reads back as ``number`` in a float of ``bits`` bits."""
    if bits >= 64 or not math.isfinite(number):
        return _shown(number)
    for digits in range(1, 10):
        text = f"{number:.{digits}g}"
        if _float_of(float(text), bits) == number:
            return text
    return repr(number)


def _as_decimal(value: Any) -> decimal.Decimal:
    """An int, a float (as its shortest text, what sluice writes for it) or a
    ``Decimal`` as the ``Decimal`` it is; an Arrow decimal holds no NaN or infinity."""
    if isinstance(value, bool):
        raise _Refused(f"{value!r} is a boolean, not a number")
    if isinstance(value, decimal.Decimal):
        number = value
    elif isinstance(value, numbers.Integral):
        number = decimal.Decimal(int(value))
    elif isinstance(value, numbers.Real):
        number = decimal.Decimal(repr(float(value)))
    else:
        raise _Refused(_not_a_number(value))
    if not number.is_finite():
        raise _Refused(f"{_shown(value)} is not a number a decimal column holds")
    return number


def _within_decimal(number: decimal.Decimal, arrow_type: "pyarrow.DataType") -> decimal.Decimal:
    """``number`` when ``numeric(p, s)`` holds it without rounding."""
    precision, scale = arrow_type.precision, arrow_type.scale
    _, digits, exponent = number.as_tuple()
    if exponent < -scale:
        cut = -scale - exponent
        unscaled = int("".join(map(str, digits)))
        if unscaled and (cut >= len(digits) or unscaled % 10**cut):
            raise _Refused(
                f"{number} has more than {scale} digits after the point: "
                f"the column's type (numeric({precision},{scale})) would round it"
            )
    if abs(number) >= 10 ** (precision - scale):
        raise _Refused(
            f"{number} has more than {precision - scale} digits before the point, "
            f"more than the column's type (numeric({precision},{scale})) holds"
        )
    return number


def _not_a_number(value: Any) -> str:
    return f"{value!r} ({type(value).__name__}) is not a number, unlike the column's first values"


def _shown(value: Any) -> str:
    """A number as a message shows it: a float's shortest text, with
    PostgreSQL's (and sluice's) NaN and Infinity."""
    if isinstance(value, decimal.Decimal):
        return str(value)
    if isinstance(value, numbers.Real):
        number = float(value)
        if math.isnan(number):
            return "NaN"
        if math.isinf(number):
            return "Infinity" if number > 0 else "-Infinity"
        return repr(number)
    return repr(value)


def _problem(value: Any, target: "pyarrow.DataType") -> str | None:
    """Why ``value`` (a Python value of an Arrow array) cannot go into a
    column of Arrow type ``target`` unchanged, or ``None``."""
    kind = _number_kind(target)
    try:
        if kind == "integer":
            _within_integer(_as_integer(value), target)
        elif kind == "float":
            _as_float(value, target.bit_width)
        else:
            # The database decides on NaN, infinities and text that is not
            # a number (PostgreSQL's numeric holds NaN; its input reads
            # spellings Python's does not).
            if isinstance(value, str):
                try:
                    value = decimal.Decimal(value)
                except decimal.InvalidOperation:
                    return None
            if isinstance(value, float) and not math.isfinite(value):
                return None
            if isinstance(value, decimal.Decimal) and not value.is_finite():
                return None
            _within_decimal(_as_decimal(value), target)
    except _Refused as refused:
        return str(refused)
    return None


def _checked(reader: "pyarrow.RecordBatchReader", types: Mapping[str, Any]) -> "pyarrow.RecordBatchReader":
    """``reader``'s batches, each number checked against its column's type
    (see :func:`_check_for`) before it goes; a decimal going into an integer
    column goes as the integer it is (its text with a scale, ``3.0``, is
    not an integer's)."""
    import pyarrow

    checks = {}
    fields = []
    for position, field in enumerate(reader.schema):
        target = types.get(field.name)
        check = (_check_for(field.type, target) or _temporal_check_for(field.type, target)) if target is not None else None
        if check is not None:
            checks[position], output_type = check
            field = field.with_type(output_type)
        fields.append(field)
    if not checks:
        return reader
    schema = pyarrow.schema(fields, metadata=reader.schema.metadata)

    def batches() -> Iterator["pyarrow.RecordBatch"]:
        first_row = 0
        for batch in reader:
            arrays = batch.columns
            for position, check in checks.items():
                arrays[position] = check(arrays[position], first_row, schema.field(position).name)
            yield pyarrow.RecordBatch.from_arrays(arrays, schema=schema)
            first_row += batch.num_rows

    return pyarrow.RecordBatchReader.from_batches(schema, batches())


#: The units of pandas' ``datetime64`` in a day.
_UNITS_PER_DAY = {"s": 86_400, "ms": 86_400_000, "us": 86_400_000_000, "ns": 86_400_000_000_000}


def _temporal_check_for(data_type: "pyarrow.DataType", target: "pyarrow.DataType") -> tuple[Any, Any] | None:
    """Dates as :func:`read_pandas` gives them (``datetime64``) going into a
    ``date`` column go as dates, which the column's input reads; a time of
    day is a :class:`BadInput`."""
    import pyarrow

    if pyarrow.types.is_timestamp(data_type) and data_type.tz is None and pyarrow.types.is_date32(target):
        return _as_dates, pyarrow.date32()
    return None


def _as_dates(array: "pyarrow.Array", first_row: int, column: str) -> "pyarrow.Array":
    import pyarrow
    import pyarrow.compute as pc

    per_day = _UNITS_PER_DAY[array.type.unit]
    numbers = array.cast(pyarrow.int64())
    # Integers all the way: a float would round the far dates.
    days = _floor_divide(numbers, per_day)
    with_time = pc.fill_null(pc.not_equal(pc.subtract(numbers, pc.multiply(days, per_day)), 0), False)
    if pc.any(with_time).as_py():
        row = pc.index(with_time, True).as_py()
        shown = _arrow_shown(pyarrow.chunked_array([array]), row)
        raise _bad_input(first_row + row, column, f"a timestamp{shown} has a time of day, which a date column does not hold")
    return days.cast(pyarrow.int32()).cast(pyarrow.date32())


def _floor_divide(numbers: "pyarrow.Array", divisor: int) -> "pyarrow.Array":
    """Integer division rounding down, as a date of a time before 1970 needs."""
    import pyarrow.compute as pc

    quotient = pc.divide(numbers, divisor)  # integer division truncates toward zero
    below = pc.and_(pc.less(numbers, 0), pc.not_equal(pc.multiply(quotient, divisor), numbers))
    return pc.if_else(below, pc.subtract(quotient, 1), quotient)


def _check_for(data_type: "pyarrow.DataType", target: "pyarrow.DataType") -> tuple[Any, Any] | None:
    """The check of an array of ``data_type`` going into a column of Arrow
    type ``target`` and the type it leaves the array in, or ``None`` when
    every such value fits (or the database's own input decides: booleans,
    text into integer and float columns, dates, …)."""
    import pyarrow
    import pyarrow.compute as pc

    wanted = _number_kind(target)
    if wanted is None:
        return None
    dictionary = pyarrow.types.is_dictionary(data_type)
    values_type = data_type.value_type if dictionary else data_type
    given = _number_kind(values_type) or ("text" if _is_text(values_type) else None)
    if given is None or (given == "text" and wanted != "decimal"):
        return None
    if given == "integer":
        low, high = _integer_bounds(values_type)
        if wanted == "integer":
            target_low, target_high = _integer_bounds(target)
            if target_low <= low and high <= target_high:
                return None
        elif wanted == "float":
            if max(-low, high) <= 2 ** _SIGNIFICAND_BITS[target.bit_width]:
                return None
        elif max(-low, high) < 10 ** (target.precision - target.scale):
            return None
    if given == "float" and wanted == "float" and values_type.bit_width <= target.bit_width:
        return None
    if given == "decimal":
        if wanted == "decimal":
            if values_type.scale <= target.scale and values_type.precision - values_type.scale <= target.precision - target.scale:
                return None
        elif wanted == "float" and values_type.precision <= _FLOAT_DIGITS[target.bit_width]:
            return None
    to_integer = given == "decimal" and wanted == "integer"

    def check(array: "pyarrow.Array", first_row: int, column: str) -> "pyarrow.Array":
        values = array.dictionary_decode() if dictionary else array
        converted = None
        if to_integer:
            try:
                converted = pc.cast(values, target, safe=True)
            except _CONVERSION_ERRORS:
                suspects = _ALL
            else:
                suspects = None
        else:
            suspects = _suspects(values, given, target)
        if suspects is not None:
            _refuse_first(values, suspects, target, first_row, column)
        if to_integer:
            if converted is None:
                raise BadInput(
                    f"column {column}: rows {first_row} to {first_row + len(values) - 1} "
                    f"do not convert to the column's type ({target})",
                    {"kind": "data", "column_name": column},
                )
            return converted
        return array

    return check, target if to_integer else data_type


#: Every value of the array is a suspect.
_ALL = object()


def _suspects(values: "pyarrow.Array", given: str, target: "pyarrow.DataType") -> Any:
    """The values that may not fit a column of type ``target``: ``None``,
    an array of their indices, or ``_ALL``; a vectorised test, looser than
    :func:`_problem` but never letting a value through that it refuses."""
    import pyarrow
    import pyarrow.compute as pc

    wanted = _number_kind(target)
    if given == "integer":
        if wanted == "integer":
            low, high = _integer_bounds(target)
        elif wanted == "float":
            high = 2 ** _SIGNIFICAND_BITS[target.bit_width]
            low = -high
        else:
            high = 10 ** (target.precision - target.scale) - 1
            low = -high
        extremes = pc.min_max(values)
        least, most = extremes["min"].as_py(), extremes["max"].as_py()
        if least is None or (low <= least and most <= high):
            return None
        if wanted != "float":
            return _ALL
        # Past 2**53 only some integers are doubles.
        return _failing(pc.and_(pc.greater_equal(values, low), pc.less_equal(values, high)))
    if given == "float":
        number = pc.cast(values, pyarrow.float64())
        if wanted == "integer":
            low, high = _integer_bounds(target)
            fits = pc.and_(
                pc.and_(pc.is_finite(number), pc.equal(pc.floor(number), number)),
                # -2**(n-1) and 2**(n-1) (or 2**n) are doubles exactly.
                pc.and_(pc.greater_equal(number, float(low)), pc.less(number, float(high + 1))),
            )
        elif wanted == "float":
            held = pc.cast(number, pyarrow.float32(), safe=False)
            fits = pc.or_(pc.equal(pc.cast(held, pyarrow.float64()), number), pc.is_nan(number))
            if pc.all(fits).as_py() is False:
                # The float whose shortest text (0.1) is the number's.
                shortest = pc.cast(pc.cast(held, pyarrow.string()), pyarrow.float64())
                fits = pc.or_(fits, pc.equal(shortest, number))
        else:
            scale = target.scale
            if scale > 22:
                return _ALL
            # x is the double of a decimal with at most `scale` digits
            # after the point (its shortest text has no more) when rounding
            # it to `scale` digits gives it back: 10**scale is a double
            # exactly, and the division rounds correctly.
            limit = _float_below(10 ** (target.precision - scale))
            fits = pc.or_(
                pc.invert(pc.is_finite(number)),
                pc.and_(pc.equal(pc.round(number, scale), number), pc.less(pc.abs(number), limit)),
            )
        return _failing(fits)
    if given == "decimal":
        if wanted == "float":
            # A decimal of at most DBL_DIG (FLT_DIG) significant digits.
            bound = 0.9 * 10.0 ** (_FLOAT_DIGITS[target.bit_width] - values.type.scale)
            return _failing(pc.less(pc.abs(pc.cast(values, pyarrow.float64())), bound))
        try:
            pc.cast(values, target, safe=True)
        except _CONVERSION_ERRORS:
            return _ALL
        return None
    # Text into a decimal column: pyarrow reads the common spellings;
    # the others (" 1.5", "NaN") are looked at one by one.
    try:
        pc.cast(values, target, safe=True)
    except _CONVERSION_ERRORS:
        return _ALL
    return None


def _float_below(number: int) -> float:
    """The largest double not above ``number``."""
    if number > sys.float_info.max:
        return sys.float_info.max
    nearest = float(number)
    return math.nextafter(nearest, 0.0) if nearest > number else nearest


def _failing(fits: "pyarrow.Array") -> Any:
    """The indices where ``fits`` is false (a null, from a null value, fits)."""
    import pyarrow.compute as pc

    fits = pc.fill_null(fits, True)
    if pc.all(fits).as_py() is not False:
        return None
    return pc.indices_nonzero(pc.invert(fits))


def _refuse_first(values: "pyarrow.Array", suspects: Any, target: "pyarrow.DataType", first_row: int, column: str) -> None:
    """Raises :class:`BadInput` for the first suspect :func:`_problem` refuses."""
    if suspects is _ALL:
        indices = range(len(values))
        python_values = values.to_pylist()
    else:
        indices = suspects.to_pylist()
        python_values = values.take(suspects).to_pylist()
    for index, value in zip(indices, python_values):
        if value is None:
            continue
        reason = _problem(value, target)
        if reason is not None:
            raise _bad_input(first_row + index, column, reason)


def _storage_types(table: "pyarrow.Table") -> "pyarrow.Table":
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
