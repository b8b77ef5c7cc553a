#!/usr/bin/env python3
"""Baseline for bench/run.sh: export a query as NDJSON the way a typical
Python service would, with psycopg 3 and a named (server-side) cursor.

    psycopg_export.py DB_URL OUTPUT_PATH [--query SQL] [--itersize N]

A named cursor is what keeps a Python exporter's memory bounded: the server
holds the result and the client pulls it `itersize` rows per FETCH round
trip. Named cursors only live inside a transaction, so autocommit stays off
(psycopg's default) and the transaction is closed at the end.

Each row is written as one JSON object with the columns as keys in column
order (dict_row preserves it). Types json cannot encode (Decimal, datetime)
go through str(), e.g. "12.34" and "2024-01-01 00:00:00.5+00:00"; jsonb
columns arrive already decoded and are nested as JSON objects.
"""

import argparse
import json
import sys

import psycopg
from psycopg.rows import dict_row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("db_url")
    parser.add_argument("output", help="file to write NDJSON to (e.g. /dev/null)")
    parser.add_argument("--query", default="select * from payment_events")
    parser.add_argument("--itersize", type=int, default=1000)
    args = parser.parse_args()

    rows = 0
    with psycopg.connect(args.db_url, autocommit=False) as conn:
        with conn.cursor(name="sluice_bench_export", row_factory=dict_row) as cur:
            cur.itersize = args.itersize
            cur.execute(args.query)
            # Buffered text output; one write per row is the idiomatic code.
            with open(args.output, "w", encoding="utf-8", buffering=1 << 16) as out:
                for row in cur:
                    out.write(json.dumps(row, default=str))
                    out.write("\n")
                    rows += 1
        conn.rollback()  # read-only: nothing to commit

    print(f"rows: {rows}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
