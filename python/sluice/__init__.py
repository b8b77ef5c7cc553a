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

The package's modules, each importing only those listed before it:
``_errors`` (the exceptions), ``_stats`` (:class:`Stats`), ``_binary``
(running sluice and reading its report), ``_frames`` (Arrow results as pandas
and polars), ``_read`` (the readers), ``_numbers`` and ``_from_pandas`` (a
DataFrame as Arrow, every value unchanged), ``_write`` (:func:`write`).
"""

from __future__ import annotations

from ._errors import BadInput, ConnectionFailed, DatabaseError, Error, UsageError
from ._from_pandas import PANDAS_BATCH_ROWS
from ._read import read_arrow, read_batches, read_pandas, read_polars
from ._stats import Stats, last_stats
from ._write import write

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
