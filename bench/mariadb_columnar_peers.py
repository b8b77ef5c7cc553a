"""The Python clients of bench/mariadb_columnar.sh, one variant per process:
read MariaDB's payment_events into a pyarrow Table (or a Parquet file) and
print its row count.

    python mariadb_columnar_peers.py VARIANT URL [PARQUET]

URL is the mariadb://user@host:port/database URL without a password (the
harness passes it in MYSQL_PWD to every client alike).

- sluice_arrow: ``sluice.read_arrow(url, "select * from payment_events")``;
- connectorx_arrow: ``connectorx.read_sql(mysql://…, return_type="arrow")``;
- duckdb_arrow: DuckDB's mysql scanner (the extension from PyPI's
  duckdb-extension-mysql-scanner, loaded offline), ``fetch_arrow_table()``;
- connectorx_parquet: ConnectorX's Arrow table written by pyarrow.parquet
  (zstd), the path given as the third argument;
- duckdb_parquet: the scanner's rows written by DuckDB's ``COPY … TO`` a
  Parquet file (zstd).
"""

import os
import sys
from urllib.parse import quote, unquote, urlsplit

QUERY = "select * from payment_events"


def main() -> None:
    variant, url = sys.argv[1], sys.argv[2]
    if variant == "sluice_arrow":
        import sluice

        table = sluice.read_arrow(url, QUERY)
    elif variant == "connectorx_arrow":
        table = connectorx_table(url)
    elif variant == "duckdb_arrow":
        # The relation does not keep its connection open: hold it here.
        connection = duckdb_connection(url)
        table = connection.sql("select * from my.payment_events").fetch_arrow_table()
    elif variant == "connectorx_parquet":
        import pyarrow.parquet as parquet

        table = connectorx_table(url)
        parquet.write_table(table, sys.argv[3], compression="zstd")
    elif variant == "duckdb_parquet":
        connection = duckdb_connection(url)
        path = sys.argv[3].replace("'", "''")
        connection.sql(f"copy (select * from my.payment_events) to '{path}' (format parquet, compression zstd)")
        print(connection.sql(f"select count(*) from '{path}'").fetchone()[0])
        return
    else:
        raise SystemExit(f"unknown variant {variant}")
    print(table.num_rows)


def parts(url: str):
    split = urlsplit(url)
    return {
        "host": split.hostname or "127.0.0.1",
        "port": split.port or 3306,
        "user": unquote(split.username or ""),
        "password": os.environ.get("MYSQL_PWD", ""),
        "database": unquote(split.path.lstrip("/")),
    }


def connectorx_table(url: str):
    import connectorx

    p = parts(url)
    # ConnectorX's MySQL source takes mysql:// URLs (MariaDB speaks the same).
    mysql_url = "mysql://{}:{}@{}:{}/{}".format(
        quote(p["user"], safe=""), quote(p["password"], safe=""), p["host"], p["port"],
        quote(p["database"], safe=""))
    return connectorx.read_sql(mysql_url, QUERY, return_type="arrow")


def duckdb_connection(url: str):
    import duckdb
    import duckdb_extensions

    p = parts(url)
    connection = duckdb.connect()
    duckdb_extensions.import_extension("mysql_scanner", connection)
    settings = "host={host} port={port} user={user} database={database} ssl_mode=disabled".format(**p)
    if p["password"]:
        settings += " password={}".format(p["password"])
    connection.sql(f"attach '{settings}' as my (type mysql, read_only)")
    return connection


if __name__ == "__main__":
    main()
