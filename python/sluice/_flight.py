"""The Flight client that :mod:`sluice.spark` and :mod:`sluice.dask` share:
asking ``sluice serve`` for a plan (or only its schema), reading one part of
it, ending it, and turning pyarrow's Flight exceptions into
:class:`FlightError`.

Everything a worker needs to read a part is a :class:`Part`, made of bytes and
strings only: engines pickle it to their workers, and a ``FlightInfo`` cannot
be pickled.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any, Iterator, Mapping, Sequence

from ._errors import Error, UsageError

# Flight SQL's CommandStatementQuery, wrapped in a protobuf Any: the command
# that asks `sluice serve` to run ad-hoc SQL (see crates/sluice-flight's
# descriptor.rs).
_STATEMENT_QUERY = b"type.googleapis.com/arrow.flight.protocol.sql.CommandStatementQuery"


class FlightError(Error):
    """``sluice serve``'s Flight service refused a call or could not be
    reached. ``status`` is the gRPC status in words (``unauthenticated``,
    ``not found``, ``failed precondition``, …); the message says which call,
    where, and the server's reason."""

    def __init__(self, message: str, status: str | None = None):
        super().__init__(message, {"kind": "flight"})
        self.status = status

    def __reduce__(self):
        # Dask's workers send errors back pickled; keep the status.
        return type(self), (self.message, self.status)


@dataclass(frozen=True)
class Part:
    """One endpoint of a plan, as a worker reads it: its signed ticket, where
    to redeem it (the endpoint's first location, else the planning one) and
    the token to send."""

    ticket: bytes
    location: str
    token: str | None


@dataclass(frozen=True)
class Plan:
    """A plan's Arrow schema and its parts, in the server's order."""

    schema: Any  # pyarrow.Schema
    parts: list[Part]


def call_options(token: str | None) -> Any:
    """Flight call options carrying ``authorization: Bearer <token>``."""
    import pyarrow.flight as flight

    if not token:
        return flight.FlightCallOptions()
    return flight.FlightCallOptions(headers=[(b"authorization", b"Bearer " + token.encode())])


def descriptor(query: str | None, sql: str | None, params: Mapping[str, Any] | None, partitions: int | None,
               columns: Sequence[str] | None = None) -> Any:
    """The descriptor asking for named ``query`` (with its parameters, number
    of parts and the ``columns`` of it to read) or for ad-hoc ``sql`` (one
    part): exactly one of them."""
    import pyarrow.flight as flight

    if (query is None) == (sql is None):
        raise UsageError("give either a named query or sql, not both and not neither")
    if sql is not None:
        if params:
            raise UsageError("ad-hoc sql takes no parameters here: write the values into the SQL")
        if columns:
            raise UsageError("ad-hoc sql reads the columns it selects: name them in the SQL, not in columns")
        return flight.FlightDescriptor.for_command(_statement_query(sql))
    command: dict[str, Any] = {"query": query}
    if params:
        command["params"] = {name: _parameter_value(name, value) for name, value in params.items()}
    if partitions is not None:
        if int(partitions) < 1:
            raise UsageError(f"partitions must be at least 1, not {partitions}")
        command["partitions"] = int(partitions)
    if columns:
        if isinstance(columns, str) or not all(isinstance(column, str) for column in columns):
            raise UsageError(f"columns is a list of column names, such as ['id', 'amount'], not {columns!r}")
        command["columns"] = list(columns)
    return flight.FlightDescriptor.for_command(json.dumps(command).encode())


def _parameter_value(name: str, value: Any) -> Any:
    """A parameter as the command's JSON carries it: a string, number or
    boolean, read by the server as the HTTP query string's text."""
    if isinstance(value, (bool, int, float, str)):
        return value
    if value is None:
        raise UsageError(f"parameter {name!r} is None: leave it out, or give its value")
    # Decimals, dates and the like: their text is what the server parses.
    return str(value)


def _statement_query(sql: str) -> bytes:
    """``Any{type_url, CommandStatementQuery{query}}`` in protobuf's wire
    format, written by hand so that no protobuf package is needed."""
    inner = _length_delimited(1, sql.encode())
    return _length_delimited(1, _STATEMENT_QUERY) + _length_delimited(2, inner)


def _length_delimited(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _varint(number: int) -> bytes:
    out = bytearray()
    while True:
        low, number = number & 0x7F, number >> 7
        out.append(low | (0x80 if number else 0))
        if not number:
            return bytes(out)


def plan(location: str, flight_descriptor: Any, token: str | None) -> Plan:
    """``GetFlightInfo``: the plan's schema and parts."""
    import pyarrow.flight as flight

    with _translated("planning", location), flight.connect(location) as client:
        info = client.get_flight_info(flight_descriptor, call_options(token))
    parts = [
        Part(
            endpoint.ticket.ticket,
            endpoint.locations[0].uri.decode() if endpoint.locations else location,
            token,
        )
        for endpoint in info.endpoints
    ]
    return Plan(info.schema, parts)


def schema(location: str, flight_descriptor: Any, token: str | None) -> Any:
    """The Arrow schema of a named query (``GetSchema``: no plan is made, no
    snapshot held)."""
    import pyarrow.flight as flight

    with _translated("asking for the schema", location), flight.connect(location) as client:
        return client.get_schema(flight_descriptor, call_options(token)).schema


def read_part(part: Part) -> Iterator[Any]:
    """The part's record batches, streamed (``DoGet``): memory holds one."""
    import pyarrow.flight as flight

    with _translated("reading a part", part.location), flight.connect(part.location) as client:
        reader = client.do_get(flight.Ticket(part.ticket), call_options(part.token))
        for chunk in reader:
            yield chunk.data


def read_part_table(part: Part) -> Any:
    """The whole part as one ``pyarrow.Table``."""
    import pyarrow.flight as flight

    with _translated("reading a part", part.location), flight.connect(part.location) as client:
        return client.do_get(flight.Ticket(part.ticket), call_options(part.token)).read_all()


def release(location: str, parts: Sequence[Part]) -> None:
    """Ends the plan of ``parts`` (action ``release`` with any of its
    tickets): the server drops its snapshot. Ending an ended plan is no
    error."""
    import pyarrow.flight as flight

    if not parts:
        return
    first = parts[0]
    with _translated("releasing a plan", location), flight.connect(location) as client:
        for _ in client.do_action(flight.Action("release", first.ticket), call_options(first.token)):
            pass


class _translated:
    """Turns pyarrow's Flight exceptions inside the block into
    :class:`FlightError`, saying what was being done and where."""

    def __init__(self, doing: str, location: str):
        self.doing = doing
        self.location = location

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: BaseException | None, traceback: Any) -> bool:
        if error is None or isinstance(error, Error):
            return False
        status = _status(error)
        if status is None:
            return False
        raise FlightError(self._message(status, error), status) from error

    def _message(self, status: str, error: BaseException) -> str:
        reason = _server_reason(error)
        text = f"sluice Flight at {self.location}, {self.doing}: {status}: {reason}"
        if status == "unauthenticated":
            text += " (the token is missing or wrong: give the token sluice serve's [[tokens]] lists)"
        elif status == "permission denied":
            text += " (the token may not run this query: see its `queries` in sluice serve's [[tokens]])"
        elif status == "unavailable":
            text += " (is sluice serve running with [flight] listen at this address?)"
        return text


def _status(error: BaseException) -> str | None:
    """gRPC's status of a pyarrow Flight exception, in words; ``None`` for an
    exception that did not come from a Flight call."""
    import pyarrow.flight as flight

    # pyarrow raises KeyError, ArrowInvalid, NotImplementedError … for some
    # codes, with the code in the message: "Flight returned not found error,
    # with message: …" (or "gRPC returned …").
    said = re.search(r"(?:Flight|gRPC) returned ([a-z ]+?) error, with message", str(error))
    if said:
        return said.group(1)
    by_class = [
        (flight.FlightUnauthenticatedError, "unauthenticated"),
        (flight.FlightUnauthorizedError, "permission denied"),
        (flight.FlightUnavailableError, "unavailable"),
        (flight.FlightTimedOutError, "deadline exceeded"),
        (flight.FlightCancelledError, "cancelled"),
        (flight.FlightInternalError, "internal"),
        (flight.FlightError, "error"),
    ]
    return next((status for kind, status in by_class if isinstance(error, kind)), None)


def _server_reason(error: BaseException) -> str:
    """The server's message, without pyarrow's framing (``gRPC returned …
    error, with message: …. Client context: …``)."""
    text = error.args[0] if isinstance(error, KeyError) and error.args else str(error)
    text = str(text)
    marker = "with message: "
    if marker in text:
        text = text.split(marker, 1)[1]
    return text.split(". Client context:", 1)[0].split(". Detail:", 1)[0].strip()
