"""The Python clients of bench/parallel.sh, one variant per process: read
payment_events into a pyarrow Table and print its row count.

    python parallel_peers.py VARIANT URL [JOBS]

- sluice_arrow: ``sluice.read_arrow(url, table="payment_events", jobs=JOBS)``;
- duckdb_arrow: DuckDB's postgres scanner (the extension from PyPI's
  duckdb-extension-postgres, loaded offline), ``fetch_arrow_table()``;
- duckdb_parquet: the scanner's rows written by DuckDB's ``COPY … TO`` a
  Parquet file (zstd), the path given as the third argument.
"""

import sys


def main() -> None:
    variant, url = sys.argv[1], sys.argv[2]
    if variant == "sluice_arrow":
        import sluice

        table = sluice.read_arrow(url, table="payment_events", jobs=int(sys.argv[3]))
    elif variant == "duckdb_arrow":
        # The relation does not keep its connection open: hold it here.
        connection = duckdb_connection(url)
        table = connection.sql("select * from pg.public.payment_events").fetch_arrow_table()
    elif variant == "duckdb_parquet":
        connection = duckdb_connection(url)
        path = sys.argv[3].replace("'", "''")
        connection.sql(f"copy (select * from pg.public.payment_events) to '{path}' (format parquet, compression zstd)")
        print(connection.sql(f"select count(*) from '{path}'").fetchone()[0])
        return
    else:
        raise SystemExit(f"unknown variant {variant}")
    print(table.num_rows)


def duckdb_connection(url: str):
    import duckdb
    import duckdb_extensions

    connection = duckdb.connect()
    duckdb_extensions.import_extension("postgres", connection)
    connection.sql(f"attach '{url}' as pg (type postgres, read_only)")
    return connection


if __name__ == "__main__":
    main()
