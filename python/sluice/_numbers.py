"""A Python number (a value of a pandas object column) as the value of the
Arrow number type its column goes as, exactly or not at all: an int, a whole
float or a whole ``Decimal`` as an integer within its type's range, a number
as a double only when the double is it (or is the double whose shortest text
it is, ``0.1``), a number as a ``Decimal`` only when it is finite. Booleans
and strings are no numbers.

This is about the Arrow value only. Whether the table's column holds it as
it is (an integer column's range, a ``numeric(p,s)``'s digits, a ``float4``)
is sluice's check, made on the Arrow stream for every writer of one
(``crates/sluice-formats/src/arrow_decode/exact.rs``)."""

from __future__ import annotations

import decimal
import math
import numbers
from typing import Any


class Refused(Exception):
    """Why a value cannot go into its column unchanged."""


def number_kind(arrow_type: Any) -> str | None:
    """``integer``, ``float`` or ``decimal`` for an Arrow number type, else ``None``."""
    import pyarrow

    if pyarrow.types.is_integer(arrow_type):
        return "integer"
    if pyarrow.types.is_floating(arrow_type):
        return "float"
    if pyarrow.types.is_decimal(arrow_type):
        return "decimal"
    return None


def _integer_bounds(arrow_type: "pyarrow.DataType") -> tuple[int, int]:
    import pyarrow

    bits = arrow_type.bit_width
    if pyarrow.types.is_signed_integer(arrow_type):
        return -(2 ** (bits - 1)), 2 ** (bits - 1) - 1
    return 0, 2**bits - 1


def as_integer(value: Any) -> int:
    """An int, a whole float or a whole ``Decimal`` as the int it is."""
    if isinstance(value, bool):
        raise Refused(f"{value!r} is a boolean, not a number")
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, decimal.Decimal):
        if value.is_finite() and value == value.to_integral_value():
            return int(value)
    elif isinstance(value, numbers.Real):
        if math.isfinite(value) and value == math.floor(value):
            return int(value)
    else:
        raise Refused(_not_a_number(value))
    raise Refused(f"{_shown(value)} is not a whole number, which an integer column needs")


def within_integer(number: int, arrow_type: "pyarrow.DataType") -> int:
    """``number`` when the integer type ``arrow_type`` holds it."""
    low, high = _integer_bounds(arrow_type)
    if not low <= number <= high:
        unsigned = "" if low else "unsigned "
        raise Refused(f"{number} is out of range for the column's type ({unsigned}{arrow_type.bit_width}-bit integer)")
    return number


def as_float(value: Any) -> float:
    """A number as the double a ``float64`` column holds it as: exactly, or as
    the double whose shortest text is the number (0.1)."""
    if isinstance(value, bool):
        raise Refused(f"{value!r} is a boolean, not a number")
    if isinstance(value, numbers.Integral):
        number = int(value)
        held = _double(number)
        if held != number:
            raise Refused(f"{number} is not exactly a 64-bit float: the column would hold {_shown(held)}")
        return held
    if isinstance(value, decimal.Decimal):
        if value.is_snan():
            raise Refused(f"{value} is not a number")
        if not value.is_finite():
            return float(value)
        held = _double(value)
        shortest = _shown(held)
        if decimal.Decimal(held) != value and decimal.Decimal(shortest) != value:
            raise Refused(f"{value} has more digits than a 64-bit float holds: the column would hold {shortest}")
        return held
    if isinstance(value, numbers.Real):
        return float(value)
    raise Refused(_not_a_number(value))


def _double(number: int | decimal.Decimal) -> float:
    """The double nearest ``number``; infinity past the doubles' range."""
    try:
        return float(number)
    except OverflowError:
        return math.inf


def as_decimal(value: Any) -> decimal.Decimal:
    """An int, a float (as its shortest text, what sluice writes for it) or a
    ``Decimal`` as the ``Decimal`` it is; an Arrow decimal holds no NaN or infinity."""
    if isinstance(value, bool):
        raise Refused(f"{value!r} is a boolean, not a number")
    if isinstance(value, decimal.Decimal):
        number = value
    elif isinstance(value, numbers.Integral):
        number = decimal.Decimal(int(value))
    elif isinstance(value, numbers.Real):
        number = decimal.Decimal(repr(float(value)))
    else:
        raise Refused(_not_a_number(value))
    if not number.is_finite():
        raise Refused(f"{_shown(value)} is not a number a decimal column holds")
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
