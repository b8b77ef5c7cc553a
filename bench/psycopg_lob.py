#!/usr/bin/env python3
"""Baseline for bench/lob.sh: export rows with large objects as NDJSON with
psycopg 3, inline or the locator way.

    psycopg_lob.py DB_URL OUTPUT --mode inline|locator [--query SQL]
                   [--lob-column NAME] [--piece BYTES] [--locator lo_get|open-read]
                   [--itersize N] [--text]

OUTPUT is a file (e.g. /dev/null), or - for standard output. Every row is one
JSON object with the columns as keys, in column order; bytes (bytea, and the
large objects) are base64 strings, other values as json.dumps writes them
(str() for the rest), as in bench/psycopg_export.py.

--mode inline   The query reads the objects itself (e.g. `lo_get(doc) as doc`):
                one named (server-side) cursor, `itersize` rows per FETCH round
                trip, the rows written as they arrive.
--mode locator  The query returns the objects' OIDs (column --lob-column); the
                rows come through a named cursor as above and, for every row,
                the object is read by queries of its own on the same
                connection (the "locator" pattern: round trips per row):
                  --locator lo_get     `select lo_get(%s)`: one round trip per
                                       object (the default, the cheapest form);
                  --locator open-read  `lo_open`, `loread` until a short read,
                                       `lo_close`: three or more per object,
                                       what a driver-level large-object API does.
                With --piece N (bytes), lo_get reads the object N bytes at a
                time, `select lo_get(%s, %s, %s)` until a short piece, and the
                base64 text is written piece by piece, so memory stays at a few
                pieces whatever the object's size: how a 1.5 GB object (larger
                than bytea's 1 GB limit) has to be read. (psycopg 3 has no
                large-object API of its own, unlike psycopg2's lobject.)

Bytes come in binary format (`binary=True` cursors): the same wire format
sluice asks for with bytea, and psycopg's fastest path. --text uses
psycopg's default text format (bytea as hex) instead.

Autocommit is off (named cursors live in a transaction, and so do lo_open
descriptors); the transaction is rolled back at the end (read-only).
"""

import argparse
import base64
import json
import sys

import psycopg

INV_READ = 0x40000  # lo_open mode
READ_SIZE = 1 << 20  # bytes per loread call


def encode(value):
    """json.dumps default: bytes as base64, anything else as str()."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return base64.b64encode(value).decode("ascii")
    return str(value)


class Counter:
    """Queries and fetches issued, the script's own round-trip estimate."""

    def __init__(self):
        self.calls = 0


def read_whole(cur, oid, how, count):
    """A large object's bytes, read by queries of its own."""
    if how == "lo_get":
        count.calls += 1
        cur.execute("select lo_get(%s)", (oid,))
        return cur.fetchone()[0]
    count.calls += 1
    cur.execute("select lo_open(%s, %s)", (oid, INV_READ))
    fd = cur.fetchone()[0]
    parts = []
    while True:
        count.calls += 1
        cur.execute("select loread(%s, %s)", (fd, READ_SIZE))
        part = cur.fetchone()[0]
        parts.append(part)
        if len(part) < READ_SIZE:
            break
    count.calls += 1
    cur.execute("select lo_close(%s)", (fd,))
    return b"".join(parts)


def write_pieces(out, cur, oid, piece, count):
    """Writes a large object as one base64 JSON string, piece by piece.

    base64 is written for whole groups of 3 bytes; the 0-2 bytes left over
    from a piece go in front of the next one, so the text equals that of the
    whole object.
    """
    out.write('"')
    carry = b""
    offset = 0
    while True:
        count.calls += 1
        cur.execute("select lo_get(%s, %s, %s)", (oid, offset, piece))
        data = cur.fetchone()[0]
        offset += len(data)
        # A piece shorter than asked for is the last; after a full one there
        # may be more (or an empty one, which ends the loop too).
        last = len(data) < piece
        if carry:
            data = carry + data
        cut = len(data) - len(data) % 3
        out.write(base64.b64encode(memoryview(data)[:cut]).decode("ascii"))
        carry = data[cut:]
        del data
        if last:
            break
    out.write(base64.b64encode(carry).decode("ascii"))
    out.write('"')


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db_url")
    parser.add_argument("output", help="file to write NDJSON to (e.g. /dev/null), - for stdout")
    parser.add_argument("--mode", choices=["inline", "locator"], required=True)
    parser.add_argument("--query", default=None)
    parser.add_argument("--lob-column", default="doc")
    parser.add_argument("--piece", type=int, default=0, help="read each object BYTES at a time (locator, lo_get)")
    parser.add_argument("--locator", choices=["lo_get", "open-read"], default="lo_get")
    parser.add_argument("--itersize", type=int, default=1000)
    parser.add_argument("--text", action="store_true", help="text result format instead of binary")
    args = parser.parse_args()
    if args.query is None:
        args.query = (
            "select id, t, b, lo_get(doc) as doc from lob_bench"
            if args.mode == "inline"
            else "select id, t, b, doc from lob_bench"
        )
    if args.piece and args.locator != "lo_get":
        parser.error("--piece works with --locator lo_get")
    binary = not args.text

    rows = 0
    count = Counter()
    out = sys.stdout if args.output == "-" else open(args.output, "w", encoding="ascii", buffering=1 << 16)
    try:
        with psycopg.connect(args.db_url, autocommit=False) as conn:
            with conn.cursor(name="sluice_bench_lob", binary=binary) as cur:
                cur.itersize = args.itersize
                count.calls += 1
                cur.execute(args.query)
                names = [column.name for column in cur.description]
                lob = names.index(args.lob_column) if args.mode == "locator" else -1
                reader = conn.cursor(binary=binary)
                for row in cur:
                    if args.mode == "inline" or row[lob] is None:
                        out.write(json.dumps(dict(zip(names, row)), default=encode))
                    elif not args.piece:
                        values = list(row)
                        values[lob] = read_whole(reader, row[lob], args.locator, count)
                        out.write(json.dumps(dict(zip(names, values)), default=encode))
                    else:
                        # Streamed: the other columns as JSON, the object's
                        # base64 text written as its pieces arrive.
                        out.write("{")
                        for index, (name, value) in enumerate(zip(names, row)):
                            if index:
                                out.write(", ")
                            out.write(json.dumps(name))
                            out.write(": ")
                            if index == lob:
                                write_pieces(out, reader, value, args.piece, count)
                            else:
                                out.write(json.dumps(value, default=encode))
                        out.write("}")
                    out.write("\n")
                    rows += 1
                # FETCHes of the named cursor: one per itersize rows, plus the
                # one that comes back short (or empty).
                count.calls += rows // args.itersize + 1
            conn.rollback()  # read-only: nothing to commit
    finally:
        if out is not sys.stdout:
            out.close()
        else:
            out.flush()

    print(f"rows: {rows}", file=sys.stderr)
    print(f"queries and fetches: {count.calls}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
