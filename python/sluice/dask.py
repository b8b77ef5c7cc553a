"""A named query of ``sluice serve``'s Arrow Flight service as a Dask
DataFrame: one Dask partition per endpoint of one plan, so the partitions
together are one read in the plan's PostgreSQL snapshot, and every
``compute()`` of the DataFrame reads that same snapshot while the plan lives.

.. code-block:: python

    import sluice.dask
    frame = sluice.dask.read_flight("grpc://gateway:8815", "payment_events",
                                    partitions=8, token=token)
    frame.amount.sum().compute()          # a decimal.Decimal, exact

This module owns the Dask side: the plan, the partitions' pandas types (every
column Arrow-backed, ``pandas.ArrowDtype``, so that every value stays exact)
and what makes Dask's reductions exact over decimal columns.

Decimal columns are ``pandas.ArrowDtype(pyarrow.decimal128(p, s))``: ``sum()``
and ``groupby(…).sum()`` add in Arrow's decimals and give ``decimal.Decimal``
values, exact; ``mean()`` is that exact sum divided by the count in Python's
``decimal`` (28 significant digits). Dask on its own cannot take the mean of a
decimal column (it makes a placeholder string for a ``Decimal`` result and
divides it), so importing this module teaches Dask's ``make_meta`` that a
``Decimal`` is its own placeholder. ``groupby(…).mean()`` divides in Arrow's
decimals at 20 more digits of scale, cutting the digits past them.
"""

from __future__ import annotations

import decimal
from typing import Any, Mapping, Sequence

import dask.dataframe as dd
import pandas
from dask.dataframe.dispatch import make_meta_dispatch

from . import _flight
from ._flight import FlightError, Part
from ._frames import storage_types

__all__ = ["FlightError", "FlightPlan", "plan", "read_flight"]


@make_meta_dispatch.register(decimal.Decimal)
def _decimal_meta(value: decimal.Decimal, index: Any = None) -> decimal.Decimal:
    # Dask's default placeholder for a scalar it does not know is the string
    # "foo", which breaks mean() (sum / count) of decimal columns.
    return value


class FlightPlan:
    """A plan of ``sluice serve``: its Arrow ``schema`` and ``parts``. The
    server holds the plan's snapshot until its ``plan_timeout``, a newer plan
    needing its place, ``unread_plan_timeout`` with parts never read and none
    being read, or :meth:`release`; used as a context manager, the plan is
    released on leaving the block."""

    def __init__(self, location: str, schema: Any, parts: list[Part]):
        self.location = location
        self.schema = schema
        self.parts = parts

    def dataframe(self) -> dd.DataFrame:
        """The plan as a Dask DataFrame, one partition per part; each
        ``compute()`` reads the parts again (the same rows while the plan
        lives)."""
        return dd.from_map(
            _read_part,
            self.parts,
            meta=_frame(self.schema.empty_table()),
            label="sluice-flight",
        )

    def release(self) -> None:
        """Ends the plan on the server (its snapshot is released); computing
        its DataFrame afterwards is a :class:`FlightError`."""
        _flight.release(self.location, self.parts)

    def __enter__(self) -> FlightPlan:
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.release()


def plan(
    location: str,
    query: str | None = None,
    *,
    sql: str | None = None,
    params: Mapping[str, Any] | None = None,
    token: str | None = None,
    partitions: int | None = None,
    columns: Sequence[str] | None = None,
) -> FlightPlan:
    """Asks ``sluice serve``'s Flight service at ``location``
    (``grpc://host:port``) for a plan of the named ``query`` with its
    ``params`` in ``partitions`` parts (default: the server's ``[flight]
    partitions``), or of ad-hoc ``sql`` (one part, where the server's
    ``[sql]`` allows it). ``columns`` names the query's columns to read, in
    that order (default: all); the database then reads only those.
    ``token`` is sent as ``authorization: Bearer …``. Refusals raise
    :class:`FlightError`."""
    descriptor = _flight.descriptor(query, sql, params, partitions, columns)
    made = _flight.plan(location, descriptor, token)
    return FlightPlan(location, made.schema, made.parts)


def read_flight(
    location: str,
    query: str | None = None,
    *,
    sql: str | None = None,
    params: Mapping[str, Any] | None = None,
    token: str | None = None,
    partitions: int | None = None,
    columns: Sequence[str] | None = None,
) -> dd.DataFrame:
    """The named ``query`` (or ad-hoc ``sql``) as a Dask DataFrame, one
    partition per endpoint of a plan made now (arguments as :func:`plan`).
    The plan lives on the server until its ``plan_timeout``, until a newer
    plan needs its place, or, left unread, until ``unread_plan_timeout``; use
    :func:`plan` to end it yourself."""
    return plan(location, query, sql=sql, params=params, token=token, partitions=partitions,
                columns=columns).dataframe()


def _read_part(part: Part) -> pandas.DataFrame:
    """One part as a pandas DataFrame (run by Dask's workers)."""
    return _frame(_flight.read_part_table(part))


def _frame(table: Any) -> pandas.DataFrame:
    """Every column Arrow-backed: exact decimals, integers that stay integers
    beside NULLs, dates and timestamps of any year; extension types (uuid,
    JSON) as their storage (16 bytes, text)."""
    return storage_types(table).to_pandas(types_mapper=pandas.ArrowDtype)
