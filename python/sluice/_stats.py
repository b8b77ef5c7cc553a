"""What the last read or write of a thread moved (:class:`Stats`), as sluice's
``--stats`` report gives it."""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import Any, Mapping


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


def record(report: Mapping[str, Any]) -> None:
    """Keeps a finished call's ``--stats`` report as this thread's last."""
    _last.stats = Stats.from_report(report)
