#!/usr/bin/env python3
"""Baselines for bench/mariadb.sh: export a MariaDB query the way a typical
Python service would.

    mariadb_export.py DRIVER DB_URL OUTPUT_PATH [--query SQL]

DRIVER is one of:

pymysql      PyMySQL with an unbuffered `SSCursor`: rows are read off the
             socket as they are iterated, so memory stays bounded (the default
             cursor would load the whole result first).
mysqlclient  mysqlclient (MySQLdb, on libmariadb) with its `SSCursor`
             (mysql_use_result), the same pattern in C.
connectorx   `connectorx.read_sql(url, query, return_type="arrow")`: the whole
             result as one Arrow table in memory (that is how ConnectorX
             works), then written with pyarrow's IPC stream writer (the IPC
             file format cannot go to /dev/null: its writer checks the
             footer's offset with tell(), which /dev/null answers with 0).

The row drivers write NDJSON: each row as one JSON object with the column
names as keys, in column order, one `json.dumps(row, default=str)` per row
(Decimal, datetime go through str(): "12.34", "2024-01-01 00:00:30.123456").
Both drivers return MariaDB's JSON columns (LONGTEXT underneath) as text, so
`payload` is written as a JSON string, as such code would write it.

DB_URL is `mariadb://user[:password]@host[:port]/database` (or mysql://);
without a password in it, MYSQL_PWD is used, as the mariadb client does. All
drivers connect over TCP with utf8mb4. Prints `rows: N` on standard error.
"""

import argparse
import json
import os
import sys
from urllib.parse import quote, unquote, urlsplit


def connection_params(url):
    """host, port, user, password and database of a mariadb:// URL."""
    parts = urlsplit(url)
    if parts.scheme not in ("mariadb", "mysql"):
        sys.exit(f"not a mariadb:// or mysql:// URL: {parts.scheme}://…")
    password = unquote(parts.password) if parts.password is not None else os.environ.get("MYSQL_PWD", "")
    return {
        "host": parts.hostname or "127.0.0.1",
        "port": parts.port or 3306,
        "user": unquote(parts.username) if parts.username else os.environ.get("USER", "root"),
        "password": password,
        "database": unquote(parts.path.lstrip("/")),
    }


def write_ndjson(cursor, output):
    """Iterates an unbuffered cursor into NDJSON; returns the row count."""
    names = [column[0] for column in cursor.description]
    rows = 0
    # Buffered text output; one write per row is the idiomatic code.
    with open(output, "w", encoding="utf-8", buffering=1 << 16) as out:
        for row in cursor:
            out.write(json.dumps(dict(zip(names, row)), default=str))
            out.write("\n")
            rows += 1
    return rows


def export_pymysql(params, query, output):
    import pymysql
    import pymysql.cursors

    conn = pymysql.connect(**params, charset="utf8mb4", cursorclass=pymysql.cursors.SSCursor)
    try:
        with conn.cursor() as cur:
            cur.execute(query)
            return write_ndjson(cur, output)
    finally:
        conn.close()


def export_mysqlclient(params, query, output):
    import MySQLdb
    import MySQLdb.cursors

    conn = MySQLdb.connect(**params, charset="utf8mb4", cursorclass=MySQLdb.cursors.SSCursor)
    try:
        cur = conn.cursor()
        cur.execute(query)
        rows = write_ndjson(cur, output)
        cur.close()
        return rows
    finally:
        conn.close()


def export_connectorx(params, query, output):
    import connectorx
    import pyarrow as pa

    # ConnectorX's MySQL source takes mysql:// URLs (MariaDB speaks the same).
    url = "mysql://{}:{}@{}:{}/{}".format(
        quote(params["user"], safe=""), quote(params["password"], safe=""),
        params["host"], params["port"], quote(params["database"], safe=""))
    table = connectorx.read_sql(url, query, return_type="arrow")
    with pa.OSFile(output, "wb") as sink:
        with pa.ipc.new_stream(sink, table.schema) as writer:
            writer.write_table(table)
    return table.num_rows


EXPORTERS = {
    "pymysql": export_pymysql,
    "mysqlclient": export_mysqlclient,
    "connectorx": export_connectorx,
}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("driver", choices=sorted(EXPORTERS))
    parser.add_argument("db_url")
    parser.add_argument("output", help="file to write to (e.g. /dev/null)")
    parser.add_argument("--query", default="select * from payment_events")
    args = parser.parse_args()

    rows = EXPORTERS[args.driver](connection_params(args.db_url), args.query, args.output)
    print(f"rows: {rows}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
