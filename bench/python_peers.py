#!/usr/bin/env python3
"""Variants for bench/python.sh: `payment_events` into a DataFrame, and a
DataFrame back into a table, the way a Python user does it today, and with the
`sluice` package.

    python_peers.py VARIANT DB_URL [--source FILE] [--rows N]

Reads (the query is `select * from payment_events`):

sluice_arrow / sluice_pandas / sluice_polars
        `sluice.read_arrow` / `read_pandas` / `read_polars`.
sluice_batches
        `sluice.read_batches`, counting each batch's rows and keeping none
        (what a job that streams the result does: memory holds one batch).
connectorx_arrow / connectorx_pandas / connectorx_polars
        `connectorx.read_sql(url, query, return_type=...)`.
polars_uri
        `polars.read_database_uri(query, url)` (ConnectorX underneath).
psycopg_pandas
        psycopg 3 `cursor.fetchall()`, then `pandas.DataFrame.from_records`.

Writes (into `payment_events_py_write`, emptied first; the rows come from
--source, an Arrow IPC stream file sluice exported, read into pandas before the
clock starts, and only the first --rows of them):

sluice_write
        `sluice.write(url, table, frame)`.
to_sql  `frame.to_sql(..., method="multi", chunksize=1000)` through
        SQLAlchemy 2 and psycopg 3, `amount` and `payload` typed (Numeric,
        JSONB) as pandas cannot tell them from text.
psycopg_copy
        psycopg 3 `COPY … FROM STDIN` with `write_row` per row.

Each prints one JSON line on standard output: rows, and for writes the seconds
of the write itself.
"""

import argparse
import json
import time

import sqlalchemy.dialects.postgresql  # noqa: F401 (JSONB for to_sql)

QUERY = "select * from payment_events"
WRITE_TABLE = "payment_events_py_write"


def read(variant, url):
    if variant == "sluice_batches":
        import sluice

        return sum(batch.num_rows for batch in sluice.read_batches(url, QUERY))
    if variant.startswith("sluice_"):
        import sluice

        reader = {"arrow": sluice.read_arrow, "pandas": sluice.read_pandas, "polars": sluice.read_polars}
        return len(reader[variant.removeprefix("sluice_")](url, QUERY))
    if variant.startswith("connectorx_"):
        import connectorx

        return len(connectorx.read_sql(url, QUERY, return_type=variant.removeprefix("connectorx_")))
    if variant == "polars_uri":
        import polars

        return len(polars.read_database_uri(QUERY, url))
    if variant == "adbc_arrow":
        import adbc_driver_postgresql.dbapi as dbapi

        with dbapi.connect(url) as connection, connection.cursor() as cursor:
            cursor.execute(QUERY)
            return len(cursor.fetch_arrow_table())
    if variant == "psycopg_copy_arrow":
        return len(psycopg_binary_copy_table(url))
    if variant == "psycopg_pandas":
        import pandas
        import psycopg

        with psycopg.connect(url) as connection, connection.cursor() as cursor:
            cursor.execute(QUERY)
            names = [column.name for column in cursor.description]
            return len(pandas.DataFrame.from_records(cursor.fetchall(), columns=names))
    raise SystemExit(f"unknown variant {variant}")


def psycopg_binary_copy_table(url):
    """psycopg 3's binary COPY into a pyarrow Table, batch by batch as
    bench/columnar_peers.py reads it."""
    import pyarrow as pa
    from columnar_peers import psycopg_binary_batches

    return pa.Table.from_batches(list(psycopg_binary_batches(url, QUERY)))


def write(variant, url, frame):
    if variant == "sluice_write":
        import sluice

        sluice.write(url, WRITE_TABLE, frame)
    elif variant == "to_sql":
        import sqlalchemy

        engine = sqlalchemy.create_engine(url.replace("postgres://", "postgresql+psycopg://", 1))
        # The column types pandas cannot guess from object columns (it would send text).
        types = {"amount": sqlalchemy.Numeric(12, 2), "payload": sqlalchemy.dialects.postgresql.JSONB}
        frame.to_sql(
            WRITE_TABLE, engine, if_exists="append", index=False, method="multi", chunksize=1000, dtype=types
        )
    elif variant == "psycopg_copy":
        import psycopg

        with psycopg.connect(url) as connection, connection.cursor() as cursor:
            with cursor.copy(f"copy {WRITE_TABLE} ({', '.join(frame.columns)}) from stdin") as copy:
                for row in frame.itertuples(index=False):
                    copy.write_row(row)
    else:
        raise SystemExit(f"unknown variant {variant}")


def source_frame(path, rows):
    import pyarrow as pa

    with pa.OSFile(path) as file:
        table = pa.ipc.open_stream(file).read_all()
    return table.slice(0, rows).to_pandas()


def main():
    arguments = argparse.ArgumentParser()
    arguments.add_argument("variant")
    arguments.add_argument("url")
    arguments.add_argument("--source")
    arguments.add_argument("--rows", type=int)
    options = arguments.parse_args()
    if options.source is None:
        print(json.dumps({"rows": read(options.variant, options.url)}))
        return
    frame = source_frame(options.source, options.rows)
    if options.variant == "to_sql":
        # SQLAlchemy's JSONB takes documents, not their text: parsed before the clock.
        frame["payload"] = frame["payload"].map(json.loads)
    started = time.perf_counter()
    write(options.variant, options.url, frame)
    print(json.dumps({"rows": len(frame), "seconds": time.perf_counter() - started}))


if __name__ == "__main__":
    main()
