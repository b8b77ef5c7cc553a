"""Writing: Arrow, pandas and polars data into tables through COPY, atomically,
with the first bad row named by its index and column."""

import datetime
import decimal
import subprocess
import urllib.parse
from dataclasses import dataclass

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
    # Dates read as datetime64[ms], which holds every PostgreSQL date.
    assert back["day"][1] == pd.Timestamp("0001-01-01") and back["day"].dtype == "datetime64[ms]"
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
    with pytest.raises(sluice.BadInput, match=r"row 5000, column note: 12 \(int\) is not of the type") as caught:
        sluice.write(url, f"{schema}.t", frame)
    assert (caught.value.row, caught.value.column_name) == (5000, "note")
    assert sql(f"select count(*) from {schema}.t") == "0"


# --- Every number goes in as it is, or not at all (issue 35) ---------------
#
# Each refused value sits in row 2 (0-based) of column `n`, after rows that
# load; the write raises BadInput naming that row and column, and the table
# stays empty.


def _refuses(url, schema, sql, column_type, data, row=2):
    sql(f"create table {schema}.t (id int4, n {column_type})")
    with pytest.raises(sluice.BadInput) as caught:
        sluice.write(url, f"{schema}.t", data)
    error = caught.value
    assert (error.row, error.column_name) == (row, "n"), str(error)
    assert sql(f"select count(*) from {schema}.t") == "0"
    return error


def _loads(url, schema, sql, column_type, data, shown="n::text"):
    sql(f"create table {schema}.t (id int4, n {column_type})")
    sluice.write(url, f"{schema}.t", data)
    return sql(f"select string_agg(coalesce({shown}, 'NULL'), ',' order by id) from {schema}.t")


def _objects(*values):
    """A frame whose column n is an object column of these values."""
    return pd.DataFrame({"id": range(len(values)), "n": pd.Series(values, dtype=object)})


@pytest.mark.parametrize("bad", [1.5, decimal.Decimal("1.5"), decimal.Decimal("2.7")], ids=repr)
def test_a_fraction_at_row_150000_of_an_integer_object_column_writes_nothing(url, schema, sql, bad):
    # The case: 200,000 rows, the fraction in the third converted batch.
    rows = 200_000
    values = list(range(rows))
    values[150_000] = bad
    sql(f"create table {schema}.t (id int8, n int8)")
    frame = pd.DataFrame({"id": range(rows), "n": pd.Series(values, dtype=object)})
    with pytest.raises(sluice.BadInput) as caught:
        sluice.write(url, f"{schema}.t", frame)
    assert caught.value.row == 150_000 and caught.value.column_name == "n"
    assert f"row 150000, column n: {bad} is not a whole number" in str(caught.value)
    assert sql(f"select count(*) from {schema}.t") == "0"


INTEGER_TYPES = ["bigint", "int4", "int2"]


@pytest.mark.parametrize("column_type", INTEGER_TYPES)
@pytest.mark.parametrize(
    "bad, words",
    [
        (1.5, "1.5 is not a whole number"),
        (-0.5, "-0.5 is not a whole number"),
        (float("inf"), "Infinity is not a whole number"),
        (decimal.Decimal("2.7"), "2.7 is not a whole number"),
        (decimal.Decimal("Infinity"), "Infinity is not a whole number"),
        (2**63, "9223372036854775808 is out of range"),
        (-(2**63) - 1, "-9223372036854775809 is out of range"),
        (True, "True is a boolean"),
        ("12", "'12' (str) is not a number"),
    ],
    ids=repr,
)
def test_an_integer_object_column_refuses_what_is_no_integer(url, schema, sql, column_type, bad, words):
    # Past the first values, which choose the column's Arrow type (int64).
    error = _refuses(url, schema, sql, column_type, _objects(*range(1500), bad), row=1500)
    assert words in str(error)


@pytest.mark.parametrize("column_type", INTEGER_TYPES)
def test_whole_floats_and_decimals_among_integers_go_in_as_integers(url, schema, sql, column_type):
    frame = _objects(1, 2.0, decimal.Decimal("3"), decimal.Decimal("4.00"), None, float("nan"), -5)
    assert _loads(url, schema, sql, column_type, frame) == "1,2,3,4,NULL,NULL,-5"


@pytest.mark.parametrize(
    "column_type, bad",
    [("int2", 32768), ("int2", -32769), ("int4", 2**31), ("int4", -(2**31) - 1)],
)
def test_an_integer_past_the_column_s_range_is_bad_input(url, schema, sql, column_type, bad):
    # From an object column, a NumPy int64 column and an Arrow table alike.
    for data in (_objects(1, 2, bad), pd.DataFrame({"id": [0, 1, 2], "n": [1, 2, bad]}), pa.table({"id": [0, 1, 2], "n": [1, 2, bad]})):
        error = _refuses(url, schema, sql, column_type, data)
        assert f"{bad} is out of range for the column's type" in str(error)
        sql(f"drop table {schema}.t")


def test_a_bad_value_in_a_later_arrow_batch_is_named_by_its_row_in_the_stream(url, schema, sql):
    batches = [
        pa.record_batch({"id": pa.array(range(1000), pa.int32()), "n": pa.array([7] * 1000, pa.int64())}),
        pa.record_batch({"id": pa.array(range(1000, 2000), pa.int32()), "n": pa.array([7] * 500 + [40000] + [7] * 499, pa.int64())}),
    ]
    error = _refuses(url, schema, sql, "int2", pa.Table.from_batches(batches).to_reader(), row=1500)
    assert "40000 is out of range for the column's type (16-bit integer)" in str(error)


@pytest.mark.parametrize("column_type", INTEGER_TYPES)
@pytest.mark.parametrize("bad", [1.5, float("inf"), float("-inf")], ids=repr)
def test_a_float64_column_refuses_a_fraction_or_infinity_in_an_integer_column(url, schema, sql, column_type, bad):
    _refuses(url, schema, sql, column_type, pd.DataFrame({"id": [0, 1, 2], "n": [1.0, 2.0, bad]}))


@pytest.mark.parametrize("column_type, bad", [("int2", 32768.0), ("int4", 2.0**31), ("bigint", 2.0**63)])
def test_a_float64_column_refuses_a_whole_float_past_the_integer_column_s_range(url, schema, sql, column_type, bad):
    error = _refuses(url, schema, sql, column_type, pd.DataFrame({"id": [0, 1, 2], "n": [1.0, 2.0, bad]}))
    assert "out of range for the column's type" in str(error)


def test_nan_is_a_missing_value_in_pandas_and_a_refused_one_in_arrow(url, schema, sql):
    # pandas holds an integer column with a missing value as float64 with NaN
    # (as read_pandas gives it): NULL. In Arrow or polars data NaN is a value,
    # which no integer column holds.
    frame = pd.DataFrame({"id": [0, 1, 2], "n": [1.0, float("nan"), -(2.0**63)]})
    assert _loads(url, schema, sql, "bigint", frame) == "1,NULL,-9223372036854775808"
    sql(f"drop table {schema}.t")
    error = _refuses(url, schema, sql, "bigint", pa.table({"id": [0, 1, 2], "n": [1.0, 2.0, float("nan")]}))
    assert "NaN is not a whole number" in str(error)
    sql(f"drop table {schema}.t")
    _refuses(url, schema, sql, "bigint", pl.DataFrame({"id": [0, 1, 2], "n": [1.0, 2.0, float("nan")]}))


def test_text_and_booleans_are_read_by_an_integer_column_s_own_input(url, schema, sql):
    assert _loads(url, schema, sql, "int4", pa.table({"id": [0, 1], "n": ["12", " -7 "]})) == "12,-7"
    for data in (pa.table({"id": [0, 1, 2], "n": ["1", "2", "1.5"]}), pa.table({"id": [0, 1, 2], "n": [True, False, True]})):
        with pytest.raises(sluice.Error) as caught:
            sluice.write(url, f"{schema}.t", data)
        assert caught.value.column_name == "n"
        assert sql(f"select count(*) from {schema}.t") == "2"  # the rows loaded above, no more


@pytest.mark.parametrize(
    "data, words",
    [
        (_objects(decimal.Decimal("1.00"), decimal.Decimal("2.5"), decimal.Decimal("1.234")), "1.234 has more than 2 digits after the point"),
        (_objects(decimal.Decimal("1.00"), decimal.Decimal("2.5"), decimal.Decimal("123456789")), "123456789 has more than 8 digits before the point"),
        (_objects(decimal.Decimal("1.00"), 2, 1.005), "1.005 has more than 2 digits after the point"),
        (_objects(decimal.Decimal("1.00"), 2, True), "True is a boolean"),
        (_objects(decimal.Decimal("1.00"), 2, "3"), "'3' (str) is not a number"),
        (_objects(1, 2, 10**8), "100000000 has more than 8 digits before the point"),
        (_objects(1, 2, 2**63), "9223372036854775808 has more than 8 digits before the point"),
        (pd.DataFrame({"id": [0, 1, 2], "n": [0.1, 2.5, 1.234]}), "1.234 has more than 2 digits after the point"),
        (pd.DataFrame({"id": [0, 1, 2], "n": [0.1, 2.5, 2.675]}), "2.675 has more than 2 digits after the point"),
        (pd.DataFrame({"id": [0, 1, 2], "n": [0.1, 2.5, 1e8]}), "100000000.0 has more than 8 digits before the point"),
        (pa.table({"id": [0, 1, 2], "n": ["0.1", "2.5", "1.234"]}), "1.234 has more than 2 digits after the point"),
        (pa.table({"id": [0, 1, 2], "n": pa.array([decimal.Decimal(v) for v in ("0.100", "2.500", "1.234")], pa.decimal128(6, 3))}), "1.234 has more than 2 digits after the point"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_a_numeric_column_refuses_what_it_would_round(url, schema, sql, data, words):
    error = _refuses(url, schema, sql, "numeric(10,2)", data)
    assert words in str(error)


def test_a_numeric_column_takes_every_number_it_holds_exactly(url, schema, sql):
    frame = _objects(decimal.Decimal("2.7"), decimal.Decimal("1.230"), 0.1, 3, -99999999.99, 2.0, None, decimal.Decimal("NaN"))
    assert _loads(url, schema, sql, "numeric(10,2)", frame) == "2.70,1.23,0.10,3.00,-99999999.99,2.00,NULL,NULL"
    sql(f"drop table {schema}.t")
    floats = pd.DataFrame({"id": [0, 1, 2, 3], "n": [0.1, 1.1, 99999999.99, float("nan")]})
    assert _loads(url, schema, sql, "numeric(10,2)", floats) == "0.10,1.10,99999999.99,NULL"
    sql(f"drop table {schema}.t")
    # Integers past 64 bits go as the decimals they are.
    big = _objects(2**63, -(2**63) - 1, 10**29, 1)
    assert _loads(url, schema, sql, "numeric(30,0)", big) == f"{2**63},{-(2**63) - 1},{10**29},1"


@pytest.mark.parametrize(
    "data, words",
    [
        (pd.DataFrame({"id": [0, 1, 2], "n": [1, 2, 2**53 + 1]}), "9007199254740993 is not exactly a 64-bit float"),
        (_objects(1, 2, 2**53 + 1), "9007199254740993 is not exactly a 64-bit float"),
        (_objects(1.5, 2, 2**64 * 3 + 1), "is not exactly a 64-bit float"),
        (_objects(1.5, 2.5, decimal.Decimal("0.10000000000000001")), "0.10000000000000001 has more digits than a 64-bit float holds"),
        (_objects(1.5, 2.5, True), "True is a boolean"),
        (_objects(1.5, 2.5, "3"), "'3' (str) is not a number"),
        (pa.table({"id": [0, 1, 2], "n": pa.array([decimal.Decimal("0.1"), decimal.Decimal("0.2"), decimal.Decimal("0.1000000000000000055511151231257827")], pa.decimal128(38, 34))}), "has more digits than a 64-bit float holds"),
    ],
    ids=lambda value: value if isinstance(value, str) else "",
)
def test_a_float8_column_refuses_a_number_it_would_round(url, schema, sql, data, words):
    error = _refuses(url, schema, sql, "float8", data)
    assert words in str(error)


def test_a_float8_column_takes_numbers_a_double_holds(url, schema, sql):
    frame = _objects(0.1, 2**60, decimal.Decimal("0.1"), decimal.Decimal("2.5"), -3, None)
    assert _loads(url, schema, sql, "float8", frame) == "0.1,1.152921504606847e+18,0.1,2.5,-3,NULL"
    sql(f"drop table {schema}.t")
    # NaN is a value of a float column in Arrow data, pandas' missing value in a frame.
    table = pa.table({"id": [0, 1, 2], "n": [float("nan"), float("-inf"), 2.0**60]})
    assert _loads(url, schema, sql, "float8", table) == "NaN,-Infinity,1.152921504606847e+18"
    sql(f"drop table {schema}.t")
    assert _loads(url, schema, sql, "float8", pd.DataFrame({"id": [0, 1], "n": [float("nan"), 1.5]})) == "NULL,1.5"
    sql(f"drop table {schema}.t")
    assert _loads(url, schema, sql, "float8", pa.table({"id": [0], "n": ["1.5"]})) == "1.5"


def test_a_float4_column_takes_a_double_s_shortest_digits_but_refuses_more(url, schema, sql):
    assert _loads(url, schema, sql, "float4", pd.DataFrame({"id": [0, 1, 2], "n": [0.1, 2.0**30, 16777216.0]})) == "0.1,1.0737418e+09,1.6777216e+07"
    sql(f"drop table {schema}.t")
    error = _refuses(url, schema, sql, "float4", pd.DataFrame({"id": [0, 1, 2], "n": [0.1, 0.5, 0.123456789]}))
    assert "0.123456789 has more digits than a 32-bit float holds: the column would hold 0.12345679" in str(error)
    sql(f"drop table {schema}.t")
    error = _refuses(url, schema, sql, "float4", pd.DataFrame({"id": [0, 1, 2], "n": [1, 2, 16777217]}))
    assert "16777217 is not exactly a 32-bit float" in str(error)


def test_a_quoted_schema_qualified_table_is_checked_too(url, schema, sql):
    sql(f'create table {schema}."Odd Name" (id int4, n numeric(10,2))')
    with pytest.raises(sluice.BadInput) as caught:
        sluice.write(url, f'{schema}."Odd Name"', pa.table({"id": [0, 1, 2], "n": [0.5, 0.25, 1.125]}))
    assert (caught.value.row, caught.value.column_name) == (2, "n")
    assert sql(f'select count(*) from {schema}."Odd Name"') == "0"


@dataclass
class Login:
    role: str
    url: str


@pytest.fixture
def writer(url, schema, sql):
    """A login of the test's own with USAGE on its schema and nothing else."""
    role = f"{schema}_writer"
    sql(f"create role {role} login password 'writer'; grant usage on schema {schema} to {role}")
    parts = urllib.parse.urlsplit(url)
    address = parts.hostname + (f":{parts.port}" if parts.port else "")
    yield Login(role, urllib.parse.urlunsplit(parts._replace(netloc=f"{role}:writer@{address}")))
    sql(f"drop owned by {role}; drop role {role}")


@pytest.mark.parametrize(
    "data, column, words",
    [
        (
            pd.DataFrame({"id": [0, 1], "amount": [0.12, 0.125]}),
            "amount",
            "0.125 has more than 2 digits after the point: the column's type (numeric(5,2)) would round it",
        ),
        (
            pa.table({"id": [0, 1], "amount": pa.array([decimal.Decimal("0.120"), decimal.Decimal("0.125")], pa.decimal128(4, 3))}),
            "amount",
            "0.125 has more than 2 digits after the point",
        ),
        (
            pl.DataFrame({"id": [0, 1], "code": ["abc", "ab  "]}),
            "code",
            "the value has 4 characters, more than the column's type (varchar(3)) holds",
        ),
        (
            pd.DataFrame({"id": [0, 1], "ratio": [0.1, 0.123456789]}),
            "ratio",
            "0.123456789 has more digits than a 32-bit float holds: the column would hold 0.12345679",
        ),
        # What the database would refuse without naming the row (an integer
        # or numeric overflow, a fraction into an integer) or cut without a
        # word (a date's time of day), sluice refuses on the Arrow stream.
        (pa.table({"id": [0, 1], "n": pa.array([7, 40000], pa.int64())}), "n", "40000 is out of range for the column's type (16-bit integer)"),
        (
            pa.table({"id": [0, 1], "amount": pa.array([decimal.Decimal("1.00"), decimal.Decimal("1234.00")], pa.decimal128(6, 2))}),
            "amount",
            "1234 has more than 3 digits before the point, more than the column's type (numeric(5,2)) holds",
        ),
        (
            pd.DataFrame({"id": [0, 1], "day": pd.to_datetime(["2024-01-01", "2024-01-01 10:00"], format="ISO8601")}),
            "day",
            "has a time of day, which a date column does not hold",
        ),
        (
            pa.table({"id": [0, 1], "n": pa.array([decimal.Decimal("4.0"), decimal.Decimal("2.5")], pa.decimal128(3, 1))}),
            "n",
            "2.5 is not a whole number, which an integer column needs",
        ),
    ],
    ids=[
        "pandas float",
        "arrow decimal",
        "polars text",
        "pandas float into float4",
        "integer range",
        "digits before the point",
        "time of day in a date",
        "fraction in an integer",
    ],
)
def test_a_login_that_may_not_select_still_never_rounds_or_cuts(url, schema, sql, writer, data, column, words):
    # PostgreSQL would store 0.125 as 0.13, 'ab  ' as 'ab ' and 0.123456789 as
    # 0.12345679 without a word, and this login cannot read the column types.
    sql(f"create table {schema}.t (id int4, amount numeric(5,2), code varchar(3), ratio float4, n int2, day date)")
    sql(f"grant insert on {schema}.t to {writer.role}")
    with pytest.raises(sluice.DatabaseError, match="permission denied"):
        sluice.read_arrow(writer.url, f"select * from {schema}.t")
    with pytest.raises(sluice.BadInput) as caught:
        sluice.write(writer.url, f"{schema}.t", data)
    assert (caught.value.row, caught.value.column_name) == (1, column), str(caught.value)
    assert f"row 1, column {column}: " in str(caught.value) and words in str(caught.value)
    assert sql(f"select count(*) from {schema}.t") == "0"
    fits = pa.table({"id": [2], "amount": [decimal.Decimal("0.12")], "code": ["abc"], "ratio": [0.1]})
    sluice.write(writer.url, f"{schema}.t", fits)
    assert sql(f"select concat_ws('|', amount, code, ratio) from {schema}.t") == "0.12|abc|0.1"


def test_a_write_runs_sluice_once_and_asks_the_database_nothing_first(url, schema, sql, monkeypatch):
    # The column types were once read first by a `sluice export` of their own
    # (a connection and a query more): the import checks the values itself.
    sql(f"create table {schema}.t (id int4, amount numeric(10,2), day date)")
    commands = []
    popen = subprocess.Popen

    def counted(arguments, *rest, **options):
        commands.append(arguments[1])
        return popen(arguments, *rest, **options)

    monkeypatch.setattr(subprocess, "Popen", counted)
    frame = pd.DataFrame({"id": [1, 2], "amount": [decimal.Decimal("1.50"), None], "day": pd.to_datetime(["2024-02-29", None])})
    sluice.write(url, f"{schema}.t", frame)
    assert commands == ["import"]
    with pytest.raises(sluice.BadInput):
        sluice.write(url, f"{schema}.t", pa.table({"id": [3], "amount": [0.125]}))
    assert commands == ["import", "import"]
    assert sql(f"select string_agg(concat_ws('|', id, amount, day), ',' order by id) from {schema}.t") == "1|1.50|2024-02-29,2"


def test_dates_read_as_datetime64_write_back_as_dates(url, schema, sql):
    sql(f"create table {schema}.t (id int4, day date)")
    sql(f"insert into {schema}.t values (1, '2024-02-29'), (2, '1969-12-31'), (3, '4713-01-01 BC'), (4, null)")
    frame = sluice.read_pandas(url, f"select id + 10 as id, day from {schema}.t order by id")
    sluice.write(url, f"{schema}.t", frame)
    assert sql(f"select string_agg(coalesce(day::text, 'NULL'), ',' order by id) from {schema}.t where id > 10") == (
        "2024-02-29,1969-12-31,4713-01-01 BC,NULL"
    )
    with_time = pd.DataFrame({"id": [20, 21], "day": pd.to_datetime(["2024-01-01", "2024-01-01 10:00"], format="ISO8601")})
    with pytest.raises(sluice.BadInput, match="has a time of day") as raised:
        sluice.write(url, f"{schema}.t", with_time)
    assert (raised.value.row, raised.value.column_name) == (1, "day")
    assert sql(f"select count(*) from {schema}.t where id >= 20") == "0"
