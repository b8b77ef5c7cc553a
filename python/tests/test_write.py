"""Writing: Arrow, pandas and polars data into tables through COPY, atomically,
with the first bad row named by its index and column."""

import datetime
import decimal

import pandas as pd
import polars as pl
import pyarrow as pa
import pytest

import sluice


def test_pandas_round_trips_through_a_table(url, schema, sql):
    sql(
        f"create table {schema}.t (id int8 primary key, name text, amount numeric(12,2), "
        "ok bool, at timestamptz, day date, ratio float8, missing int4)"
    )
    frame = pd.DataFrame(
        {
            "id": [1, 2, 3],
            "name": ["a", None, 'quote " and \\ tab\t'],
            "amount": [decimal.Decimal("1.50"), decimal.Decimal("-2.25"), None],
            "ok": [True, False, None],
            "at": pd.to_datetime(["2024-01-02 03:04:05.123456", "1999-12-31 23:59:59", None], utc=True, format="ISO8601"),
            "day": [datetime.date(2024, 2, 29), datetime.date(1, 1, 1), None],
            "ratio": [0.1, float("nan"), float("-inf")],
            "missing": [None, None, None],
        }
    )
    sluice.write(url, f"{schema}.t", frame)
    stats = sluice.last_stats()
    assert stats.rows == 3 and stats.round_trips >= 1
    back = sluice.read_pandas(url, f"select * from {schema}.t order by id")
    assert list(back["id"]) == [1, 2, 3]
    assert back["name"][0] == "a" and back["name"][1] is None and back["name"][2] == 'quote " and \\ tab\t'
    assert back["amount"][1] == decimal.Decimal("-2.25")
    assert bool(back["ok"][0]) is True
    assert back["at"][0] == pd.Timestamp("2024-01-02 03:04:05.123456", tz="UTC")
    assert back["day"][1] == datetime.date(1, 1, 1)
    assert back["ratio"][0] == 0.1 and back["ratio"][2] == float("-inf")
    assert back["missing"].isna().all()


def test_a_frame_read_with_each_dtype_backend_writes_back_unchanged(url, schema, sql):
    sql(f"create table {schema}.t (id int8 primary key, amount numeric(12,2), n int4, name text)")
    sql(
        f"insert into {schema}.t select g, case when g % 3 = 0 then null else g * 1.01 end, "
        f"case when g % 5 = 0 then null else g end, 'n' || g from generate_series(1, 1000) g"
    )
    query = f"select * from {schema}.t order by id"
    expected = sluice.read_arrow(url, query)
    for backend in (None, "numpy_nullable", "pyarrow"):
        frame = sluice.read_pandas(url, query, dtype_backend=backend)
        sql(f"truncate {schema}.t")
        sluice.write(url, f"{schema}.t", frame)
        back = sluice.read_arrow(url, query)
        assert back.cast(expected.schema).equals(expected), backend


def test_polars_and_arrow_streams_load(url, schema, sql):
    sql(f"create table {schema}.t (id int4, name text, ref uuid, raw bytea)")
    frame = pl.DataFrame({"id": [1, 2], "name": ["x", "y"], "raw": [b"\x00\x01", None]})
    sluice.write(url, f"{schema}.t", frame)
    ids = pa.array([bytes(range(16))], pa.binary(16))
    table = pa.table({"id": [3], "ref": ids})
    sluice.write(url, f"{schema}.t", table.to_reader())
    rows = sluice.read_arrow(url, f"select id, name, ref::text as ref, raw from {schema}.t order by id").to_pylist()
    assert rows == [
        {"id": 1, "name": "x", "ref": None, "raw": b"\x00\x01"},
        {"id": 2, "name": "y", "ref": None, "raw": None},
        {"id": 3, "name": None, "ref": "00010203-0405-0607-0809-0a0b0c0d0e0f", "raw": None},
    ]


def test_a_bad_row_in_the_middle_leaves_the_table_unchanged(url, schema, sql):
    sql(f"create table {schema}.t (id int4 primary key, code int4 not null)")
    sql(f"insert into {schema}.t values (0, 0)")
    batches = [
        pa.record_batch({"id": list(range(1, 1001)), "code": [1] * 1000}),
        pa.record_batch({"id": [1001, 1002, 1003], "code": [1, None, 1]}),
    ]
    with pytest.raises(sluice.Error) as caught:
        sluice.write(url, f"{schema}.t", pa.Table.from_batches(batches))
    error = caught.value
    assert error.row == 1001  # the second row of the second batch
    assert error.column_name == "code"
    assert error.sqlstate == "23502"
    assert sql(f"select count(*) from {schema}.t") == "1"


def test_conflicts_are_errors_or_ignored_or_updated(url, schema, sql):
    sql(f"create table {schema}.t (id int4 primary key, v text)")
    sluice.write(url, f"{schema}.t", pa.table({"id": [1, 2], "v": ["a", "b"]}))
    with pytest.raises(sluice.DatabaseError) as caught:
        sluice.write(url, f"{schema}.t", pa.table({"id": [2], "v": ["B"]}))
    assert caught.value.sqlstate == "23505"
    sluice.write(url, f"{schema}.t", pa.table({"id": [2, 3], "v": ["B", "c"]}), on_conflict="ignore")
    sluice.write(url, f"{schema}.t", pa.table({"id": [1], "v": ["A"]}), on_conflict="update", key=["id"])
    assert sql(f"select string_agg(v, ',' order by id) from {schema}.t") == "A,b,c"


def test_a_column_the_table_lacks_is_a_usage_error(url, schema, sql):
    sql(f"create table {schema}.t (id int4)")
    with pytest.raises(sluice.UsageError) as caught:
        sluice.write(url, f"{schema}.t", pa.table({"id": [1], "colour": ["red"]}))
    assert "colour" in str(caught.value)


def test_an_empty_frame_writes_nothing(url, schema, sql):
    sql(f"create table {schema}.t (id int4)")
    sluice.write(url, f"{schema}.t", pa.table({"id": pa.array([], pa.int32())}))
    assert sql(f"select count(*) from {schema}.t") == "0"


def test_a_large_frame_goes_in_batches_typed_by_all_its_rows(url, schema, sql):
    # More rows than one converted batch; the note column is missing in the
    # whole first batch and text later, and a bad row sits in the third batch.
    rows = 2 * sluice.PANDAS_BATCH_ROWS + 1000
    sql(f"create table {schema}.t (id int8 primary key, note text, code int4 not null)")
    frame = pd.DataFrame(
        {
            "id": range(rows),
            "note": [None] * (sluice.PANDAS_BATCH_ROWS + 10) + ["n"] * (rows - sluice.PANDAS_BATCH_ROWS - 10),
            "code": pd.array([1] * rows, dtype="Int64"),
        }
    )
    sluice.write(url, f"{schema}.t", frame)
    assert sql(f"select count(*), count(note), sum(code) from {schema}.t") == f"{rows}|{rows - sluice.PANDAS_BATCH_ROWS - 10}|{rows}"
    sql(f"truncate {schema}.t")
    frame.loc[rows - 5, "code"] = pd.NA
    with pytest.raises(sluice.Error) as caught:
        sluice.write(url, f"{schema}.t", frame)
    assert caught.value.row == rows - 5
    assert caught.value.column_name == "code"
    assert sql(f"select count(*) from {schema}.t") == "0"


def test_an_empty_pandas_frame_writes_nothing(url, schema, sql):
    sql(f"create table {schema}.t (id int8)")
    sluice.write(url, f"{schema}.t", pd.DataFrame({"id": pd.Series([], dtype="int64")}))
    assert sql(f"select count(*) from {schema}.t") == "0"


def test_decimals_keep_digits_beyond_the_first_rows_scale(url, schema, sql):
    # The first rows say scale 2; a later one has 4 digits after the point.
    sql(f"create table {schema}.t (id int4, amount numeric)")
    amounts = [decimal.Decimal("1.50")] * 5000 + [decimal.Decimal("2.1234"), None, decimal.Decimal("-3E+2")]
    frame = pd.DataFrame({"id": range(len(amounts)), "amount": amounts})
    sluice.write(url, f"{schema}.t", frame)
    assert sql(f"select sum(amount), count(amount), max(amount) from {schema}.t") == "7202.1234|5002|2.1234"


def test_a_value_of_another_type_than_its_columns_first_rows_is_refused(url, schema, sql):
    sql(f"create table {schema}.t (id int4, note text)")
    notes = ["text"] * 5000 + [12]
    frame = pd.DataFrame({"id": range(len(notes)), "note": notes})
    with pytest.raises(sluice.BadInput, match="rows 0 to 5000 .*int.*column note"):
        sluice.write(url, f"{schema}.t", frame)
    assert sql(f"select count(*) from {schema}.t") == "0"
