#!/usr/bin/env python3
"""Baseline for bench/mariadb.sh: load an NDJSON file into a MariaDB table
the way a typical Python service would, with PyMySQL's `executemany`.

    mariadb_import.py DB_URL INPUT --table TABLE [--batch-size N]

Each line is parsed with json.loads; the columns are the keys of the first
record, in order (what `sluice import` does too), and a key missing from a
later record loads as NULL. Values go to PyMySQL as json.loads returned them;
objects and arrays (the JSON `payload`) are re-serialized with json.dumps.

Records are sent `--batch-size` at a time (default 10,000) with
cursor.executemany(INSERT INTO t (cols) VALUES (%s, ...), batch): PyMySQL
rewrites that into multi-row INSERT statements of up to
Cursor.max_stmt_length bytes (1,024,000), one round trip each. One
transaction: autocommit off, one commit at the end.

DB_URL as for mariadb_export.py (password from MYSQL_PWD when the URL has
none). Prints `rows: N` on standard error.
"""

import argparse
import json
import sys
from itertools import islice

import pymysql

from mariadb_export import connection_params


def records(path):
    """Yields the parsed records of an NDJSON file, skipping blank lines."""
    with open(path, "r", encoding="utf-8", buffering=1 << 16) as f:
        for line in f:
            if line.strip():
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


def quote_identifier(name):
    return "`" + name.replace("`", "``") + "`"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db_url")
    parser.add_argument("input", help="NDJSON file")
    parser.add_argument("--table", required=True)
    parser.add_argument("--batch-size", type=int, default=10000)
    args = parser.parse_args()

    source = records(args.input)
    first = next(source, None)
    if first is None:
        print("rows: 0", file=sys.stderr)
        return 0
    columns = list(first)
    table = ".".join(map(quote_identifier, args.table.split(".")))
    query = "INSERT INTO {} ({}) VALUES ({})".format(
        table, ", ".join(map(quote_identifier, columns)), ", ".join(["%s"] * len(columns)))

    def rows():
        yield row_of(first, columns)
        for record in source:
            yield row_of(record, columns)

    count = 0
    conn = pymysql.connect(**connection_params(args.db_url), charset="utf8mb4", autocommit=False)
    try:
        with conn.cursor() as cur:
            pending = rows()
            while batch := list(islice(pending, args.batch_size)):
                cur.executemany(query, batch)
                count += len(batch)
        conn.commit()
    finally:
        conn.close()

    print(f"rows: {count}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
