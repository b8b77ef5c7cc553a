#!/usr/bin/env python3
"""Peers for bench/columnar.sh: a PostgreSQL query to Arrow or Parquet the way
a data engineer would do it in Python today.

    columnar_peers.py PEER FORMAT DB_URL OUTPUT_PATH [--query SQL]

FORMAT is `arrow` (an Arrow IPC stream) or `parquet` (zstd, pyarrow's default
row groups). PEER is one of:

connectorx  `connectorx.read_sql(url, query, return_type="arrow")`: the whole
            result as one Arrow table in memory (that is how ConnectorX
            works), then written.
polars      `polars.read_database_uri(query, url)` (ConnectorX underneath),
            then `DataFrame.write_ipc_stream` / `write_parquet`.
psycopg     psycopg 3 `COPY (query) TO STDOUT (FORMAT binary)` with the
            column types set, rows gathered per column in Python lists and
            turned into a record batch every 65,536 rows, each written as it
            is made (memory bounded, the best psycopg can do).
adbc        `adbc_driver_postgresql` (binary COPY in C++): the cursor's
            `fetch_record_batch()` reader written batch by batch.

Each writes its output and prints `rows: N` on standard error.
"""

import argparse
import sys

import pyarrow as pa
import pyarrow.parquet as pq

BATCH_ROWS = 65536


class Writer:
    """One Arrow IPC stream or Parquet file, opened on the first batch's schema."""

    def __init__(self, form, path):
        self.form, self.path, self.inner, self.rows = form, path, None, 0

    def write(self, batch):
        if self.inner is None:
            self.open(batch.schema)
        if self.form == "arrow":
            self.inner.write_batch(batch)
        else:
            self.inner.write_table(pa.Table.from_batches([batch]))
        self.rows += batch.num_rows

    def open(self, schema):
        if self.form == "arrow":
            self.inner = pa.ipc.new_stream(self.path, schema)
        else:
            self.inner = pq.ParquetWriter(self.path, schema, compression="zstd")

    def write_table(self, table):
        for batch in table.to_batches(max_chunksize=BATCH_ROWS):
            self.write(batch)
        if self.inner is None:
            self.open(table.schema)

    def close(self):
        self.inner.close()
        return self.rows


def connectorx(form, url, query, path):
    import connectorx as cx

    writer = Writer(form, path)
    table = cx.read_sql(url, query, return_type="arrow")
    if form == "parquet":
        pq.write_table(table, path, compression="zstd")
        return table.num_rows
    writer.write_table(table)
    return writer.close()


def polars(form, url, query, path):
    import polars as pl

    frame = pl.read_database_uri(query, url)
    if form == "arrow":
        frame.write_ipc_stream(path)
    else:
        frame.write_parquet(path, compression="zstd")
    return frame.height


def psycopg_copy(form, url, query, path):
    writer = Writer(form, path)
    for batch in psycopg_binary_batches(url, query):
        writer.write(batch)
    return writer.close()


def psycopg_binary_batches(url, query):
    """psycopg 3's binary COPY of `query`, its rows gathered into record
    batches of BATCH_ROWS (at least one batch, empty for no rows). Also used by
    bench/python_peers.py."""
    import psycopg

    with psycopg.connect(url) as connection:
        with connection.cursor() as cursor:
            cursor.execute(f"select * from ({query}) as q limit 0")
            names = [column.name for column in cursor.description]
            types = [column.type_code for column in cursor.description]
            with cursor.copy(f"copy ({query}) to stdout (format binary)") as copy:
                copy.set_types(types)
                columns = [[] for _ in names]
                sent = False
                for row in copy.rows():
                    for column, value in zip(columns, row):
                        column.append(value)
                    if len(columns[0]) == BATCH_ROWS:
                        yield to_batch(names, columns)
                        sent = True
                        columns = [[] for _ in names]
                if columns[0] or not sent:
                    yield to_batch(names, columns)


def to_batch(names, columns):
    # pyarrow infers each column's type from the Python values (Decimal,
    # datetime with tzinfo, dict for jsonb), as such code would let it.
    arrays = [pa.array(column) for column in columns]
    return pa.RecordBatch.from_arrays(arrays, names=names)


def adbc(form, url, query, path):
    import adbc_driver_postgresql.dbapi as dbapi

    with dbapi.connect(url) as connection:
        with connection.cursor() as cursor:
            cursor.execute(query)
            reader = cursor.fetch_record_batch()
            writer = Writer(form, path)
            for batch in reader:
                writer.write(batch)
            if writer.inner is None:
                writer.open(reader.schema)
            return writer.close()


PEERS = {"connectorx": connectorx, "polars": polars, "psycopg": psycopg_copy, "adbc": adbc}


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("peer", choices=sorted(PEERS))
    parser.add_argument("format", choices=["arrow", "parquet"])
    parser.add_argument("db_url")
    parser.add_argument("output")
    parser.add_argument("--query", default="select * from payment_events")
    args = parser.parse_args()
    rows = PEERS[args.peer](args.format, args.db_url, args.query, args.output)
    print(f"rows: {rows}", file=sys.stderr)


if __name__ == "__main__":
    main()
