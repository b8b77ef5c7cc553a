"""Reading: every type sluice maps to Arrow, NULLs, empty results, parameters,
streaming in bounded batches, pandas and polars, and the stats of a read."""

import datetime
import decimal
import math
import uuid

import pyarrow as pa
import pytest

import sluice

EVERY_TYPE = """
select true as b, 32767::int2 as i2, '-2147483648'::int4 as i4, 9007199254740993::int8 as i8,
       1.5::float4 as f4, 'NaN'::float8 as f8_nan, '-Infinity'::float8 as f8_inf,
       12345678.91::numeric(10,2) as dec, 1.000000000000000000000000000001::numeric as num,
       'héllo "x"'::text as t, 'v'::varchar(3) as vc, 'a'::char(2) as ch,
       'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid as id, '\\x00ff'::bytea as bin,
       '{"a": [1, null]}'::jsonb as doc, '2024-02-29'::date as d, 'infinity'::date as d_inf,
       '13:14:15.123456'::time as tm, '13:14:15+02'::timetz as ttz,
       '2024-02-29 13:14:15.5'::timestamp as ts, '2024-02-29 13:14:15+02'::timestamptz as tstz,
       '1 mon 2 days 00:00:03.5'::interval as iv, array[[1, 2], [3, null]]::int4[] as arr,
       row(1, 'x')::record is not null as rec_ok
"""


def test_every_type_maps_as_the_readme_says(url):
    table = sluice.read_arrow(url, EVERY_TYPE)
    types = {field.name: field.type for field in table.schema}
    assert types["b"] == pa.bool_()
    assert (types["i2"], types["i4"], types["i8"]) == (pa.int16(), pa.int32(), pa.int64())
    assert (types["f4"], types["f8_nan"]) == (pa.float32(), pa.float64())
    assert types["dec"] == pa.decimal128(10, 2)
    assert types["num"] == pa.string()
    assert types["bin"] == pa.binary()
    assert types["d"] == pa.date32()
    assert types["tm"] == pa.time64("us")
    assert types["ttz"] == pa.string()
    assert types["ts"] == pa.timestamp("us")
    assert types["tstz"] == pa.timestamp("us", tz="UTC")
    assert types["iv"] == pa.month_day_nano_interval()
    assert types["arr"] == pa.list_(pa.list_(pa.int32()))
    # Python's dates end at 9999: infinity is checked as days below.
    row = table.drop_columns(["d_inf"]).to_pylist()[0]
    assert row["b"] is True and row["i2"] == 32767 and row["i4"] == -(2**31)
    assert row["i8"] == 9007199254740993  # beyond a double's exact integers
    assert row["f4"] == 1.5 and math.isnan(row["f8_nan"]) and row["f8_inf"] == -math.inf
    assert row["dec"] == decimal.Decimal("12345678.91")
    assert row["num"] == "1.000000000000000000000000000001"
    assert (row["t"], row["vc"], row["ch"]) == ('héllo "x"', "v", "a ")
    assert uuid.UUID(bytes=bytes(table.column("id").combine_chunks().storage[0].as_py())) == uuid.UUID(
        "a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11"
    )
    assert row["bin"] == b"\x00\xff"
    assert row["doc"] == '{"a": [1, null]}'
    assert row["d"] == datetime.date(2024, 2, 29)
    assert table.column("d_inf").cast(pa.int32())[0].as_py() == 2**31 - 1
    assert row["tm"] == datetime.time(13, 14, 15, 123456)
    assert row["ttz"] == "13:14:15+02"
    assert row["ts"] == datetime.datetime(2024, 2, 29, 13, 14, 15, 500000)
    assert row["tstz"] == datetime.datetime(2024, 2, 29, 11, 14, 15, tzinfo=datetime.timezone.utc)
    interval = row["iv"]
    assert (interval.months, interval.days, interval.nanoseconds) == (1, 2, 3_500_000_000)
    assert row["arr"] == [[1, 2], [3, None]]


def test_nulls_of_every_kind_are_nulls(url):
    table = sluice.read_arrow(
        url,
        "select null::int4 as i, null::numeric(5,1) as n, null::text as t, null::timestamptz as ts, "
        "null::bytea as b from generate_series(1, 3)",
    )
    assert table.num_rows == 3
    assert all(table.column(name).null_count == 3 for name in table.column_names)


def test_an_empty_result_keeps_its_schema(url):
    table = sluice.read_arrow(url, "select 1::int8 as a, 'x'::text as b where false")
    assert table.num_rows == 0
    assert table.schema.names == ["a", "b"]
    assert table.schema.field("a").type == pa.int64()
    assert sluice.read_pandas(url, "select 1 as a where false").shape == (0, 1)


def test_parameters_are_bound_as_text_the_server_converts(url):
    table = sluice.read_arrow(
        url,
        "select $1::int4 + 1 as n, $2::text as t, $3::bool as b, $4::date as d, $5::bytea as raw",
        params=[-41, "-- not a flag", False, datetime.date(2020, 1, 2), b"\x01\x02"],
    )
    assert table.to_pylist() == [
        {"n": -40, "t": "-- not a flag", "b": False, "d": datetime.date(2020, 1, 2), "raw": b"\x01\x02"}
    ]


def test_a_query_opening_with_a_comment_or_a_dash_is_not_a_flag(url):
    assert sluice.read_arrow(url, "-- leading comment\nselect 1 as one").column("one").to_pylist() == [1]


def test_read_batches_streams_in_bounded_batches(url):
    batches = 0
    rows = 0
    for batch in sluice.read_batches(
        url, "select g as id, md5(g::text) as h from generate_series(1, 200000) g", batch_rows=10000
    ):
        assert isinstance(batch, pa.RecordBatch)
        assert batch.num_rows <= 10000
        batches += 1
        rows += batch.num_rows
    assert rows == 200000
    assert batches >= 20
    stats = sluice.last_stats()
    assert stats.rows == 200000 and stats.round_trips >= 1 and stats.elapsed > 0


def test_pandas_and_polars_get_the_same_rows(url):
    query = "select g as id, (g * 1.25)::numeric(10,2) as amount, 'n' || g as name, " \
            "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid as ref from generate_series(1, 5) g"
    frame = sluice.read_pandas(url, query)
    assert list(frame["id"]) == [1, 2, 3, 4, 5]
    assert frame["amount"][1] == decimal.Decimal("2.50")
    polars_frame = sluice.read_polars(url, query)
    assert polars_frame["id"].to_list() == [1, 2, 3, 4, 5]
    assert str(polars_frame.schema["amount"]).startswith("Decimal")
    assert polars_frame["name"].to_list()[-1] == "n5"
    assert polars_frame["ref"][0] == uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11").bytes


def test_settings_are_export_flags(url):
    table = sluice.read_arrow(url, "select 1.5::numeric as n", numeric_scale=2, fetch_size=100)
    assert table.schema.field("n").type == pa.decimal128(38, 2)


def test_stats_count_the_last_read(url):
    sluice.read_arrow(url, "select g from generate_series(1, 1234) g")
    stats = sluice.last_stats()
    assert stats.rows == 1234
    assert stats.bytes > 0 and stats.wire_bytes_received > 0
    assert stats.round_trips > stats.round_trips_connecting >= 1


def test_streaming_memory_stays_flat(url):
    # 5,000,000 rows of about 45 bytes: some 225 MB if they were held.
    import resource

    def peak_mb():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    batches = sluice.read_batches(
        url, "select g, md5(g::text) as hash from generate_series(1, 5000000) g", batch_rows=65536
    )
    rows = next(batches).num_rows
    baseline = peak_mb()
    for batch in batches:
        rows += batch.num_rows
    assert rows == 5000000
    assert peak_mb() - baseline < 24, "memory grew with the rows read"


PANDAS_QUERY = (
    "select g::int8 as id, case when g = 2 then null else g * 1.25 end::numeric(10,2) as amount, "
    "case when g = 3 then null else g end::int4 as n, 'n' || g as name, "
    "'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11'::uuid as ref from generate_series(1, 4) g"
)


def test_pandas_decimals_stay_exact_and_arrow_backed(url):
    import pandas as pd

    frame = sluice.read_pandas(url, PANDAS_QUERY)
    assert frame["amount"].dtype == pd.ArrowDtype(pa.decimal128(10, 2))
    assert frame["amount"][0] == decimal.Decimal("1.25")
    assert pd.isna(frame["amount"][1])
    # Exact arithmetic, no float rounding: 1.25 + 3.75 + 5.00.
    assert frame["amount"].sum() == decimal.Decimal("10.00")
    # Integers are pandas' nullable ones, so that a NULL keeps them integers.
    assert frame["id"].dtype == pd.Int64Dtype()
    assert frame["n"].dtype == pd.Int32Dtype() and frame["n"][2] is pd.NA


def test_pandas_dtype_backends_are_pandas_own(url):
    import pandas as pd

    nullable = sluice.read_pandas(url, PANDAS_QUERY, dtype_backend="numpy_nullable")
    assert nullable["n"].dtype == pd.Int32Dtype() and nullable["n"][2] is pd.NA
    assert nullable["name"].dtype == pd.StringDtype()
    assert nullable["amount"].dtype == pd.ArrowDtype(pa.decimal128(10, 2))
    arrow = sluice.read_pandas(url, PANDAS_QUERY, dtype_backend="pyarrow")
    assert all(isinstance(dtype, pd.ArrowDtype) for dtype in arrow.dtypes)
    assert arrow["n"].dtype == pd.ArrowDtype(pa.int32())
    assert arrow["ref"][0] == uuid.UUID("a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11").bytes


def test_an_unknown_dtype_backend_is_refused_before_the_query_runs(url):
    with pytest.raises(sluice.UsageError, match="dtype_backend"):
        sluice.read_pandas(url, "select pg_sleep(30)", dtype_backend="numpy")


def test_jobs_read_a_table_or_a_split_query_in_parts_of_one_snapshot(url, schema, sql):
    sql(f"create table {schema}.parts (id int8 primary key, amount numeric(12,2)); "
        f"insert into {schema}.parts select g, g / 100.0 from generate_series(1, 20000) g; "
        f"analyze {schema}.parts")
    whole = sluice.read_arrow(url, f"select * from {schema}.parts order by id")
    in_parts = sluice.read_arrow(url, table=f"{schema}.parts", jobs=3)
    assert in_parts.schema == whole.schema
    assert in_parts.sort_by("id").equals(whole)
    parts = sluice.last_stats().part_rows
    assert len(parts) == 3 and sum(parts) == 20000

    frame = sluice.read_pandas(url, f"select id, amount from {schema}.parts where id > $1", [10],
                               jobs=2, split_by="id")
    assert len(frame) == 19990
    assert sum(frame["amount"]) == decimal.Decimal("2000099.45")
    polars_frame = sluice.read_polars(url, table=f"{schema}.parts", jobs=2)
    assert polars_frame.height == 20000
    narrow = sluice.read_arrow(url, table=f"{schema}.parts", columns=["amount", "id"], jobs=2)
    assert narrow.column_names == ["amount", "id"]
    assert narrow.sort_by("id").equals(whole.select(["amount", "id"]))
    with pytest.raises(sluice.UsageError, match="without commas"):
        sluice.read_arrow(url, table=f"{schema}.parts", columns=["a,b"])

    with pytest.raises(sluice.UsageError, match="table="):
        sluice.read_arrow(url)
    with pytest.raises(sluice.Error, match="split-by"):
        sluice.read_arrow(url, f"select * from {schema}.parts", jobs=2)


def test_a_table_name_is_never_sql(url, schema, sql):
    sql(f"create table {schema}.ev (id int8, secret text); insert into {schema}.ev values (1, 'hidden'); "
        f"create table {schema}.other (id int8, note text); insert into {schema}.other values (2, 'public'); "
        f'create table {schema}."Odd ""Näme"" Mixed" ("Straße" text, id int8); '
        f'insert into {schema}."Odd ""Näme"" Mixed" values (\'x\', 3)')
    for text in (
        f"{schema}.other union all select id::int, secret from {schema}.ev",
        f"(select * from {schema}.ev) s",
        f"{schema}.other -- x",
        f"{schema}.other; select 1",
    ):
        with pytest.raises(sluice.UsageError, match="is not a table name") as raised:
            sluice.read_arrow(url, table=text)
        assert raised.value.exit_code == 2
        with pytest.raises(sluice.UsageError, match="is not a table name"):
            list(sluice.read_batches(url, table=text, jobs=2))
    awkward = sluice.read_arrow(url, table=f'{schema}."Odd ""Näme"" Mixed"', columns=["id", "Straße"])
    assert awkward.to_pylist() == [{"id": 3, "Straße": "x"}]
