"""The exceptions sluice raises, one class per cause (sluice's exit code), and
the :class:`BadInput` this package raises itself for a value it cannot pass
on unchanged."""

from __future__ import annotations

from typing import Any, Mapping


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


#: The class of sluice's error by its exit code; others are :class:`Error`.
ERROR_BY_EXIT_CODE = {1: DatabaseError, 2: UsageError, 3: ConnectionFailed, 5: BadInput}


def bad_input(row: int, column: str, reason: str) -> BadInput:
    """A :class:`BadInput` for the value at ``row`` (0-based) of ``column``,
    numbered as sluice numbers records."""
    # `record` is sluice's 1-based numbering, which Error turns into `row`.
    return BadInput(row_message(row, column, reason), {"kind": "data", "record": row + 1, "column_name": column})


def row_message(row: int, column: str | None, reason: str) -> str:
    """Why the row at ``row`` (0-based) of the data was refused, as a
    :class:`BadInput`'s message says it."""
    return f"row {row}, column {column}: {reason}" if column else f"row {row}: {reason}"
