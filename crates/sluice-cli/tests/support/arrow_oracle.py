# The oracle of the Arrow and Parquet tests: reads a file sluice wrote with
# pyarrow, turns every cell back into the text PostgreSQL prints for it
# (DateStyle ISO, IntervalStyle postgres, TimeZone UTC), written here from the
# server's output rules rather than from sluice's code, and compares it with
# the server's own text of the same cell.
#
# Usage: arrow_oracle.py FORMAT PATH, where FORMAT is arrow, arrow-file or
# parquet, with the server's cells on stdin as JSON: one array per row, one
# string (or null) per column. Prints JSON: the Arrow type of each column, the
# row count and every cell that differs (row, column, server's, file's).

import decimal
import json
import struct
import sys
import uuid

import pyarrow as pa
import pyarrow.ipc as ipc
import pyarrow.parquet as pq

SPACE = " \t\n\r\v\f"


def read(kind, path):
    if kind == "arrow":
        with open(path, "rb") as source:
            return ipc.open_stream(source).read_all()
    if kind == "arrow-file":
        return ipc.open_file(path).read_all()
    return pq.read_table(path)


def civil(days):
    """Howard Hinnant's civil_from_days: (year, month, day), year astronomical."""
    z = days + 719468
    era = z // 146097
    doe = z - era * 146097
    yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
    doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
    mp = (5 * doy + 2) // 153
    day = doy - (153 * mp + 2) // 5 + 1
    month = mp + 3 if mp < 10 else mp - 9
    return yoe + era * 400 + (month <= 2), month, day


def ymd(days):
    year, month, day = civil(days)
    era = "" if year > 0 else " BC"
    return f"{year if year > 0 else 1 - year:04d}-{month:02d}-{day:02d}", era


def date_text(days):
    if days == 2**31 - 1:
        return "infinity"
    if days == -(2**31):
        return "-infinity"
    text, era = ymd(days)
    return text + era


def clock(micros):
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds, fraction = divmod(rest, 1_000_000)
    text = f"{hours:02d}:{minutes:02d}:{seconds:02d}"
    if fraction:
        text += f".{fraction:06d}".rstrip("0")
    return text


def timestamp_text(micros, zoned):
    if micros == 2**63 - 1:
        return "infinity"
    if micros == -(2**63):
        return "-infinity"
    days, rest = divmod(micros, 86_400_000_000)
    text, era = ymd(days)
    return f"{text} {clock(rest)}{'+00' if zoned else ''}{era}"


def interval_text(months, days, nanoseconds):
    """interval_out with IntervalStyle postgres (EncodeInterval)."""
    assert nanoseconds % 1000 == 0, nanoseconds
    micros = nanoseconds // 1000
    years, mons = int(months / 12), months - int(months / 12) * 12
    parts, is_before, is_zero = [], False, True
    for value, unit in ((years, "year"), (mons, "mon"), (days, "day")):
        if value == 0:
            continue
        sign = "+" if is_before and value > 0 else ""
        parts.append(f"{sign}{value} {unit}{'s' if value != 1 else ''}")
        is_before, is_zero = value < 0, False
    if is_zero or micros != 0:
        sign = "-" if micros < 0 else ("+" if is_before else "")
        parts.append(sign + clock(abs(micros)))
    return " ".join(parts)


def array_element(text):
    if text == "" or text.upper() == "NULL" or any(c in '{},"\\' or c in SPACE for c in text):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


def record_field(text):
    if text == "" or any(c in '(),"\\' or c in SPACE for c in text):
        return '"' + text.replace('"', '""').replace("\\", "\\\\") + '"'
    return text


def nested_text(kind, value):
    """The text of a value inside a list or struct (from to_pylist)."""
    if value is None:
        return None
    if pa.types.is_list(kind):
        inner_is_list = pa.types.is_list(kind.value_type)

        def element(item):
            text = nested_text(kind.value_type, item)
            if text is None:
                return "NULL"
            # A sub-array of a multi-dimensional array is never quoted.
            return text if inner_is_list else array_element(text)

        return "{" + ",".join(element(item) for item in value) + "}"
    if pa.types.is_struct(kind):
        fields = [nested_text(kind.field(i).type, value[kind.field(i).name]) for i in range(kind.num_fields)]
        return "(" + ",".join("" if f is None else record_field(f) for f in fields) + ")"
    if pa.types.is_boolean(kind):
        return "t" if value else "f"
    if pa.types.is_binary(kind):
        return "\\x" + value.hex()
    return str(value)


def is_interval_struct(kind):
    return pa.types.is_struct(kind) and [kind.field(i).name for i in range(kind.num_fields)] == ["months", "days", "nanoseconds"]


def cells(column, kind):
    """Each cell of a column: its PostgreSQL text, or for floats and decimals
    the number itself (compared by value)."""
    if isinstance(kind, pa.ExtensionType):
        column, kind = column.storage, kind.storage_type
        if pa.types.is_fixed_size_binary(kind):
            return [None if v is None else str(uuid.UUID(bytes=v)) for v in column.to_pylist()]
    if pa.types.is_date32(kind):
        return [None if v is None else date_text(v) for v in column.cast(pa.int32()).to_pylist()]
    if pa.types.is_time64(kind):
        return [None if v is None else clock(v) for v in column.cast(pa.int64()).to_pylist()]
    if pa.types.is_timestamp(kind):
        zoned = kind.tz is not None
        return [None if v is None else timestamp_text(v, zoned) for v in column.cast(pa.int64()).to_pylist()]
    if pa.types.is_interval(kind):
        return [None if v is None else interval_text(v.months, v.days, v.nanoseconds) for v in column.to_pylist()]
    if is_interval_struct(kind):
        return [None if v is None else interval_text(v["months"], v["days"], v["nanoseconds"]) for v in column.to_pylist()]
    if pa.types.is_floating(kind) or pa.types.is_decimal(kind):
        return column.to_pylist()
    return [nested_text(kind, v) for v in column.to_pylist()]


def same(kind, expected, got):
    if expected is None or got is None:
        return expected is got
    if isinstance(kind, pa.ExtensionType):
        kind = kind.storage_type
    if pa.types.is_floating(kind):
        wanted = float(expected)
        if kind.bit_width == 32:
            wanted = struct.unpack("f", struct.pack("f", wanted))[0]
        return (wanted != wanted and got != got) or wanted == got
    if pa.types.is_decimal(kind):
        return decimal.Decimal(expected) == got
    return expected == got


def main():
    kind, path = sys.argv[1], sys.argv[2]
    expected = json.load(sys.stdin)
    table = read(kind, path).combine_chunks()
    mismatches = []
    for index, field in enumerate(table.schema):
        column = table.column(index).combine_chunks() if table.num_rows else table.column(index)
        got = cells(column, field.type) if table.num_rows else []
        for row, value in enumerate(got):
            want = expected[row][index]
            if not same(field.type, want, value):
                mismatches.append([row + 1, field.name, want, repr(value) if not isinstance(value, str) else value])
    print(json.dumps({
        "types": [str(field.type) for field in table.schema],
        "names": table.schema.names,
        "rows": table.num_rows,
        "mismatches": mismatches,
    }))


main()
