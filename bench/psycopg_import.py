#!/usr/bin/env python3
"""Baseline for bench/import.sh: load an NDJSON file into a table the way a
typical Python service would, with psycopg 3.

    psycopg_import.py DB_URL INPUT --table TABLE [--method copy|executemany]
                      [--limit N]

Each line is parsed with json.loads; the columns are the keys of the first
record, in order (what `sluice import` does too), and a key missing from a
later record loads as NULL. Values go to psycopg as json.loads returned them
(int, float, str, bool, None); objects and arrays -- the jsonb `payload` --
are re-serialized with json.dumps, since psycopg adapts neither dict nor list
on its own.

--method copy         COPY TABLE (cols) FROM STDIN, one copy.write_row() per
                      record: psycopg's fast path.
--method executemany  cursor.executemany(INSERT ... VALUES (%s, ...), rows):
                      since psycopg 3.1 this runs in pipeline mode (no wait
                      for each row's reply) when libpq supports it; the script
                      prints whether it does.

Either way it is one transaction (autocommit off, commit at the end), like
psql's \\copy and sluice import. --limit N stops after N records, for
variants too slow to run on the whole file.
"""

import argparse
import json
import sys
from itertools import islice

import psycopg
from psycopg import sql


def records(path, limit):
    """Yields the parsed records of an NDJSON file, skipping blank lines."""
    with open(path, "r", encoding="utf-8", buffering=1 << 16) as f:
        lines = (line for line in f if line.strip())
        for line in islice(lines, limit):
            yield json.loads(line)


def row_of(record, columns):
    """The record's values in column order, objects/arrays as JSON text."""
    row = []
    for column in columns:
        value = record.get(column)
        if isinstance(value, (dict, list)):
            value = json.dumps(value)
        row.append(value)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db_url")
    parser.add_argument("input", help="NDJSON file")
    parser.add_argument("--table", required=True)
    parser.add_argument("--method", choices=["copy", "executemany"], default="copy")
    parser.add_argument("--limit", type=int, default=None, help="load only the first N records")
    args = parser.parse_args()

    source = records(args.input, args.limit)
    first = next(source, None)
    if first is None:
        print("rows: 0", file=sys.stderr)
        return 0
    columns = list(first)
    table = sql.Identifier(*args.table.split("."))
    column_list = sql.SQL(", ").join(map(sql.Identifier, columns))

    def rows():
        yield row_of(first, columns)
        for record in source:
            yield row_of(record, columns)

    count = 0
    with psycopg.connect(args.db_url, autocommit=False) as conn:
        with conn.cursor() as cur:
            if args.method == "copy":
                query = sql.SQL("COPY {} ({}) FROM STDIN").format(table, column_list)
                with cur.copy(query) as copy:
                    for row in rows():
                        copy.write_row(row)
                        count += 1
            else:
                query = sql.SQL("INSERT INTO {} ({}) VALUES ({})").format(
                    table, column_list, sql.SQL(", ").join([sql.Placeholder()] * len(columns))
                )

                def counted():
                    nonlocal count
                    for row in rows():
                        count += 1
                        yield row

                print(f"pipeline mode supported: {psycopg.Pipeline.is_supported()}", file=sys.stderr)
                cur.executemany(query, counted())
        conn.commit()

    print(f"rows: {count}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
