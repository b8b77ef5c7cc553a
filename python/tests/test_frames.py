"""DataFrames are exact by default: each value read_pandas (every
dtype_backend) and read_polars give is judged against PostgreSQL's own text of
it, as psql prints it."""

import decimal

import pyarrow as pa
import pytest

import sluice

BACKENDS = [None, "numpy_nullable", "pyarrow"]

#: psql's marker for NULL in the judge's output.
NULL = "<NULL>"


def judge_column(sql, query: str, column: str) -> list[str]:
    """PostgreSQL's text of `column` (an expression) of `query`, row by row,
    NULL as NULL."""
    text = sql(f"select coalesce({column}::text, '{NULL}') from ({query}) judged")
    return text.split("\n")


def pandas_values(frame, column: str) -> list:
    """A pandas column as Python values, missing ones as None."""
    import pandas as pd

    return [None if _missing(value, pd) else value for value in frame[column].tolist()]


def _missing(value, pd) -> bool:
    return value is None or (not isinstance(value, (list, dict)) and bool(pd.isna(value)))


def array_text(values) -> str:
    """A one-dimensional list as PostgreSQL writes an integer array."""
    return "{" + ",".join("NULL" if value is None else str(value) for value in values) + "}"


INTEGERS = (
    "select o, v from (values (1, 9007199254740993::int8), (2, null), (3, -9223372036854775808), "
    "(4, 9223372036854775807)) t(o, v) order by o"
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pandas_integers_keep_every_digit_beside_nulls(url, sql, backend):
    import pandas as pd

    frame = sluice.read_pandas(url, INTEGERS, dtype_backend=backend)
    expected = judge_column(sql, INTEGERS, "v")
    assert [NULL if value is None else str(value) for value in pandas_values(frame, "v")] == expected
    if backend != "pyarrow":
        assert frame["v"].dtype == pd.Int64Dtype()
        assert frame["o"].dtype == pd.Int32Dtype()


def test_polars_integers_keep_every_digit_beside_nulls(url, sql):
    frame = sluice.read_polars(url, INTEGERS)
    expected = judge_column(sql, INTEGERS, "v")
    assert [NULL if value is None else str(value) for value in frame["v"].to_list()] == expected


INTEGER_ARRAYS = (
    "select o, v from (values (1, '{9223372036854775807,NULL,-9223372036854775808}'::int8[]), "
    "(2, null), (3, '{}'), (4, '{9007199254740993}')) t(o, v) order by o"
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pandas_integer_array_elements_keep_every_digit_beside_nulls(url, sql, backend):
    frame = sluice.read_pandas(url, INTEGER_ARRAYS, dtype_backend=backend)
    read = [NULL if value is None else array_text(value) for value in pandas_values(frame, "v")]
    assert read == judge_column(sql, INTEGER_ARRAYS, "v")
    assert isinstance(frame["v"][0][0], int)


def test_polars_integer_array_elements_keep_every_digit(url, sql):
    frame = sluice.read_polars(url, INTEGER_ARRAYS)
    read = [NULL if value is None else array_text(value) for value in frame["v"].to_list()]
    assert read == judge_column(sql, INTEGER_ARRAYS, "v")


INFINITIES = (
    "select o, ts, d from (values (1, '-infinity'::timestamptz, 'infinity'::date), "
    "(2, 'infinity', '-infinity'), (3, '2024-02-29 13:14:15.5+00', '2024-02-29'), (4, null, null)) t(o, ts, d) "
    "order by o"
)

#: What pandas' NumPy-backed columns hold for the infinities (documented in
#: docs/src/python.md): the extremes of datetime64[us] (NaT is -2**63) and
#: Arrow's Date32 extremes as datetime64[ms].
PANDAS_TIMESTAMP_INFINITIES = (-(2**63) + 1, 2**63 - 1)
DAY_MS = 86_400_000
PANDAS_DATE_INFINITIES = ((2**31 - 1) * DAY_MS, -(2**31) * DAY_MS)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pandas_infinities_are_values_not_missing(url, sql, backend):
    frame = sluice.read_pandas(url, INFINITIES, dtype_backend=backend)
    judge_timestamps = judge_column(sql, INFINITIES, "ts")
    judge_dates = judge_column(sql, INFINITIES, "d")
    assert frame["ts"].isna().tolist() == [text == NULL for text in judge_timestamps]
    assert frame["d"].isna().tolist() == [text == NULL for text in judge_dates]
    if backend == "pyarrow":
        return
    assert judge_timestamps[:2] == ["-infinity", "infinity"]
    assert frame["ts"].dtype == "datetime64[us, UTC]" and frame["d"].dtype == "datetime64[ms]"
    assert tuple(frame["ts"].astype("int64")[:2]) == PANDAS_TIMESTAMP_INFINITIES
    assert tuple(frame["d"].astype("int64")[:2]) == PANDAS_DATE_INFINITIES
    assert frame["ts"][2].isoformat() == "2024-02-29T13:14:15.500000+00:00"
    assert frame["d"][2].date().isoformat() == judge_dates[2]


def test_polars_infinities_are_values_not_missing(url, sql):
    import polars as pl

    frame = sluice.read_polars(url, INFINITIES)
    assert frame["ts"].is_null().to_list() == [text == NULL for text in judge_column(sql, INFINITIES, "ts")]
    assert frame["d"].is_null().to_list() == [False, False, False, True]
    assert frame["ts"].cast(pl.Int64).to_list()[:2] == [-(2**63), 2**63 - 1]
    assert frame["d"].cast(pl.Int32).to_list()[:2] == [2**31 - 1, -(2**31)]


@pytest.mark.parametrize("reader", BACKENDS + ["polars"])
def test_infinities_written_back_are_infinities_again(url, schema, sql, reader):
    sql(f"create table {schema}.t (o int, ts timestamptz, d date)")
    if reader == "polars":
        frame = sluice.read_polars(url, INFINITIES)
    else:
        frame = sluice.read_pandas(url, INFINITIES, dtype_backend=reader)
    sluice.write(url, f"{schema}.t", frame)
    back = f"select o, ts, d from {schema}.t order by o"
    for column in ("ts", "d"):
        assert judge_column(sql, back, column) == judge_column(sql, INFINITIES, column)


@pytest.mark.parametrize("backend", [None, "numpy_nullable"])
def test_a_value_pandas_cannot_hold_names_its_row_and_column(url, backend):
    query = "select o, t from (values (1, '23:59:59'::time), (2, '24:00:00')) v(o, t) order by o"
    with pytest.raises(sluice.BadInput, match="row 1, column t") as raised:
        sluice.read_pandas(url, query, dtype_backend=backend)
    assert (raised.value.row, raised.value.column_name) == (1, "t")


MIXED_DIMENSIONS = (
    "select o, a from (values (1, '{1,2}'::int4[]), (2, '{{1,2},{3,4}}'), (3, null), (4, '{}')) v(o, a) "
    "order by o"
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pandas_reads_arrays_of_mixed_dimensions_as_their_text(url, sql, backend):
    with pytest.warns(UserWarning, match="column a: its arrays have different dimensions"):
        frame = sluice.read_pandas(url, MIXED_DIMENSIONS, dtype_backend=backend)
    read = [NULL if value is None else value for value in pandas_values(frame, "a")]
    assert read == judge_column(sql, MIXED_DIMENSIONS, "a")


def test_polars_reads_arrays_of_mixed_dimensions_as_their_text(url, sql):
    with pytest.warns(UserWarning, match="column a"):
        frame = sluice.read_polars(url, MIXED_DIMENSIONS)
    read = [NULL if value is None else value for value in frame["a"].to_list()]
    assert read == judge_column(sql, MIXED_DIMENSIONS, "a")


def test_a_depth_first_seen_after_the_first_batch_is_an_error_naming_row_and_column(url):
    # The first record batch (one row) fixed one dimension; the Arrow stream
    # cannot change a column's type after it.
    with pytest.raises(sluice.BadInput, match=r"row 2, column a .*more dimensions.*first record batch"):
        sluice.read_pandas(url, MIXED_DIMENSIONS, batch_rows=1)


def test_arrays_of_one_depth_stay_lists(url):
    frame = sluice.read_polars(url, "select '{{1,2},{3,NULL}}'::int4[] as a union all select '{{5}}'")
    assert frame["a"].to_list() == [[[1, 2], [3, None]], [[5]]]


DURATIONS = (
    "select o, v from (values (1, '5 days 00:00:01'::interval), (2, '-3 days 04:00:00.000001'), "
    "(3, null), (4, '00:00:00')) t(o, v) order by o"
)


def test_polars_reads_intervals_without_months_as_durations(url, sql):
    import polars as pl

    frame = sluice.read_polars(url, DURATIONS)
    assert frame.schema["v"] == pl.Duration("us")
    # PostgreSQL's own microseconds, a day counted 86,400 seconds.
    micros = judge_column(sql, DURATIONS, "(extract(epoch from v) * 1000000)::bigint")
    assert [NULL if value is None else str(value) for value in frame["v"].cast(pl.Int64).to_list()] == micros


MONTHS = (
    "select o, v from (values (1, '1 year 2 mons 3 days 00:00:04.5'::interval), (2, null), "
    "(3, '-1 mons +2 days -00:00:01')) t(o, v) order by o"
)


def test_polars_reads_intervals_with_months_as_a_struct_of_the_parts(url, sql):
    frame = sluice.read_polars(url, MONTHS)
    parts = [
        judge_column(sql, MONTHS, "(extract(year from v) * 12 + extract(month from v))::int"),
        judge_column(sql, MONTHS, "extract(day from v)::int"),
        judge_column(sql, MONTHS, "(extract(epoch from v - date_trunc('day', v)) * 1000000000)::bigint"),
    ]
    expected = [None if months == NULL else [months, days, nanos] for months, days, nanos in zip(*parts)]
    read = [
        None if value is None else [str(value["months"]), str(value["days"]), str(value["nanoseconds"])]
        for value in frame["v"].to_list()
    ]
    assert read == expected


NUMERICS = (
    "select o, sum(x) over (order by o) as s, avg(x) over (order by o) as a, x * 1 as l from (values "
    "(1, 1.25::numeric), (2, -0.05), (3, null), (4, 12345678901234567890.123)) v(o, x) order by o"
)


@pytest.mark.parametrize("backend", BACKENDS)
def test_pandas_unconstrained_numerics_are_exact_decimals(url, sql, backend):
    frame = sluice.read_pandas(url, NUMERICS, dtype_backend=backend)
    for column in ["s", "a", "l"]:
        values = pandas_values(frame, column)
        assert all(value is None or isinstance(value, decimal.Decimal) for value in values), column
        assert [NULL if value is None else value for value in values] == [
            NULL if text == NULL else decimal.Decimal(text) for text in judge_column(sql, NUMERICS, column)
        ]
    if backend == "pyarrow":
        # One scale for the result, the largest of its values: avg's 20
        # beside 19 digits before the point needs 39 digits.
        assert frame["s"].dtype.pyarrow_dtype == pa.decimal128(38, 3)
        assert frame["a"].dtype.pyarrow_dtype == pa.decimal256(76, 20)


def test_polars_unconstrained_numerics_are_exact_decimals(url, sql):
    with pytest.warns(UserWarning, match="column a: its values need 39 digits at one scale"):
        frame = sluice.read_polars(url, NUMERICS)
    for column in ["s", "l"]:
        assert frame.schema[column] == pl_decimal(38, 3)
        assert [NULL if value is None else value for value in frame[column].to_list()] == [
            NULL if text == NULL else decimal.Decimal(text) for text in judge_column(sql, NUMERICS, column)
        ]
    # More digits than polars' decimals hold: the exact text.
    assert frame["a"].to_list() == [None if text == NULL else text for text in judge_column(sql, NUMERICS, "a")]


def pl_decimal(precision: int, scale: int):
    import polars as pl

    return pl.Decimal(precision, scale)


SPECIAL_NUMERICS = "select o, n from (values (1, 1.5::numeric), (2, 'NaN'), (3, 'Infinity')) v(o, n) order by o"


def test_pandas_keeps_nan_and_infinite_numerics_as_decimals(url, sql):
    frame = sluice.read_pandas(url, SPECIAL_NUMERICS)
    values = frame["n"].tolist()
    assert [str(value) for value in values] == ["1.5", "NaN", "Infinity"] == judge_column(sql, SPECIAL_NUMERICS, "n")
    assert all(isinstance(value, decimal.Decimal) for value in values)


def test_polars_keeps_numerics_no_decimal_holds_as_their_text(url, sql):
    with pytest.warns(UserWarning, match="column n: row 1 holds NaN, which no decimal holds"):
        frame = sluice.read_polars(url, SPECIAL_NUMERICS)
    assert frame["n"].to_list() == judge_column(sql, SPECIAL_NUMERICS, "n")


def test_the_numeric_scale_setting_still_gives_its_decimal(url):
    frame = sluice.read_pandas(url, "select 1.5 as n", numeric_scale=3)
    assert frame["n"].dtype.pyarrow_dtype == pa.decimal128(38, 3)


# The cast outside VALUES keeps the declared precision (in VALUES it is lost).
WIDE_DECIMALS = (
    "select g as o, (case when g = 1 then 12345678901234567890123456789012345678901.5 end)::numeric(50,5) as n "
    "from generate_series(1, 2) g"
)


def test_polars_reads_decimals_wider_than_its_own_as_their_text(url, sql):
    with pytest.warns(UserWarning, match="column n: decimal256"):
        frame = sluice.read_polars(url, WIDE_DECIMALS)
    assert [NULL if value is None else value for value in frame["n"].to_list()] == judge_column(sql, WIDE_DECIMALS, "n")


@pytest.mark.parametrize("backend", BACKENDS)
def test_pandas_reads_intervals_as_pandas_offsets_or_arrow(url, backend):
    frame = sluice.read_pandas(url, "select '1 mon 2 days 00:00:03.5'::interval as v", dtype_backend=backend)
    value = frame["v"][0]
    if backend == "pyarrow":
        parts = (value.months, value.days, value.nanoseconds)
    else:
        parts = (value.months, value.days, value.kwds["microseconds"] * 1000 + value.nanoseconds)
    assert parts == (1, 2, 3_500_000_000)


NESTED = (
    "select array['1 day'::interval, null, '02:00:00.000001'] as durations, array['1 mon'::interval] as months, "
    "array[1.5, null, -22.125]::numeric[] as numbers"
)


def test_polars_converts_intervals_and_numerics_inside_arrays_too(url, sql):
    import polars as pl

    frame = sluice.read_polars(url, NESTED)
    assert frame.schema["durations"] == pl.List(pl.Duration("us"))
    micros = judge_column(
        sql, f"select unnest(durations) as v from ({NESTED}) n", "(extract(epoch from v) * 1000000)::bigint"
    )
    assert [NULL if value is None else str(value) for value in frame["durations"].cast(pl.List(pl.Int64))[0]] == micros
    assert frame["months"].to_list() == [[{"months": 1, "days": 0, "nanoseconds": 0}]]
    assert frame.schema["numbers"] == pl.List(pl.Decimal(38, 3))
    numbers = judge_column(sql, f"select unnest(numbers) as v from ({NESTED}) n", "v")
    assert [NULL if value is None else value for value in frame["numbers"][0]] == [
        NULL if text == NULL else decimal.Decimal(text) for text in numbers
    ]


@pytest.mark.parametrize("backend", BACKENDS)
def test_pandas_numerics_inside_arrays_are_exact_decimals(url, sql, backend):
    frame = sluice.read_pandas(url, NESTED, dtype_backend=backend)
    numbers = judge_column(sql, f"select unnest(numbers) as v from ({NESTED}) n", "v")
    read = list(frame["numbers"][0])
    assert all(value is None or isinstance(value, decimal.Decimal) for value in read)
    assert [NULL if value is None else value for value in read] == [
        NULL if text == NULL else decimal.Decimal(text) for text in numbers
    ]
