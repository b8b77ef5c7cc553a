"""sluice.spark, PySpark's "sluice" data source, in local mode against
`sluice serve`'s Arrow Flight: one Spark partition per endpoint, decimals
exact (count and sum equal psql's) with Arrow conversion on and off, two
actions on one DataFrame, a task retried after a failure, and clear errors for
a wrong token and a column Spark cannot hold.

One Spark session and one served table for the module: starting Spark is
slow. `local[2,2]` lets a failed task be tried once more."""

import os
import sys
import uuid
from decimal import Decimal
from urllib.parse import urlsplit, urlunsplit

import pytest

from conftest import flight_server, psql

pyspark = pytest.importorskip("pyspark")
from pyspark import TaskContext  # noqa: E402
from pyspark.sql import SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402
from pyspark.sql.types import (  # noqa: E402
    DecimalType,
    IntegerType,
    LongType,
    ShortType,
    StringType,
    TimestampNTZType,
    TimestampType,
)

import sluice.spark  # noqa: E402

TOKEN = "spark-test-token-0123456789"
ROWS = 60000


@pytest.fixture(scope="module")
def payments(url):
    """A table of numeric(12,2) amounts (some negative, some NULL) beside
    the types Spark maps; dropped with its schema afterwards."""
    schema = f"py_spark_{uuid.uuid4().hex[:8]}"
    psql(url, f"create schema {schema}")
    psql(
        url,
        f"create table {schema}.payments (id int8 primary key, small int2, medium int4, "
        f"amount numeric(12,2), status text, paid_at timestamptz, booked timestamp); "
        f"insert into {schema}.payments select g, (g % 100)::int2, g::int4, "
        f"case when g % 97 = 0 then null when g in (3, 6, 9) then 9999999999.99 else ((g * 7919) % 2000003 - 500000) / 100.0 end, "
        f"(array['settled','pending','failed'])[1 + g % 3], "
        f"timestamptz '2024-01-01 00:00:00+00' + g * interval '1 second', "
        f"timestamp '2024-01-01 00:00:00' + g * interval '1 second' "
        f"from generate_series(1, {ROWS}) g; analyze {schema}.payments",
    )
    yield f"{schema}.payments"
    psql(url, f"drop schema {schema} cascade")


@pytest.fixture(scope="module")
def reader_url(url, payments):
    """A login that may only read `payments` (ad-hoc SQL needs an unprivileged one)."""
    role = f"{payments.split('.')[0]}_reader"
    psql(url, f"create role {role} login password 'reader-password'; "
              f"grant usage on schema {payments.split('.')[0]} to {role}; grant select on {payments} to {role}")
    parts = urlsplit(url)
    netloc = f"{role}:reader-password@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    yield urlunsplit(parts._replace(netloc=netloc))
    psql(url, f"drop owned by {role}; drop role {role}")


@pytest.fixture(scope="module")
def server(url, payments, reader_url, tmp_path_factory):
    config = f"""
[server]
listen = "127.0.0.1:0"
[databases.main]
url = "{url}"
[databases.adhoc]
url = "{reader_url}"
[sql]
database = "adhoc"
[queries.payments]
database = "main"
table = "{payments}"
[queries.above]
database = "main"
sql = "select id, amount from {payments} where amount >= $1"
params = [{{ name = "min", type = "numeric", required = true }}]
split_by = "id"
[queries.clock]
database = "main"
sql = "select time '12:30' as at"
"""
    with flight_server(config, tmp_path_factory.mktemp("spark-serve"), TOKEN) as location:
        yield location


@pytest.fixture(scope="module")
def spark():
    # The Python workers run this interpreter (the venv's pyarrow, sluice on
    # PYTHONPATH).
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2,2]")
        .appName("sluice-spark-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    sluice.spark.register(session)
    yield session
    session.stop()


def load(spark, server, options):
    reader = spark.read.format("sluice").option("location", server).option("token", TOKEN)
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


@pytest.mark.parametrize("arrow", ["true", "false"])
def test_count_and_sum_are_exact_with_arrow_on_and_off(spark, server, payments, url, arrow):
    spark.conf.set("spark.sql.execution.arrow.pyspark.enabled", arrow)
    frame = load(spark, server, {"query": "payments", "partitions": 3})
    fields = {field.name: field.dataType for field in frame.schema}
    assert fields == {
        "id": LongType(),
        "small": ShortType(),
        "medium": IntegerType(),
        "amount": DecimalType(12, 2),
        "status": StringType(),
        "paid_at": TimestampType(),
        "booked": TimestampNTZType(),
    }
    assert frame.rdd.getNumPartitions() == 3
    expected = psql(url, f"select count(*), sum(amount), count(distinct id) from {payments}")
    # Two actions on one DataFrame: each plans and reads anew.
    count = frame.count()
    total = frame.agg(F.sum("amount"), F.countDistinct("id")).collect()[0]
    assert f"{count}|{total[0]}|{total[1]}" == expected
    assert isinstance(total[0], Decimal)
    # Through pandas as well (Arrow's conversion or the row-by-row one).
    by_status = frame.groupBy("status").agg(F.sum("amount").alias("total")).toPandas()
    expected_by_status = psql(url, f"select string_agg(status || '=' || total, ',' order by status) from "
                                   f"(select status, sum(amount) as total from {payments} group by 1) s")
    got = ",".join(f"{row.status}={row.total}" for row in by_status.sort_values("status").itertuples())
    assert got == expected_by_status


def test_parameters_reach_a_split_query(spark, server, payments, url):
    frame = load(spark, server, {"query": "above", "param.min": "1000.50", "partitions": 2})
    expected = psql(url, f"select count(*), sum(amount) from {payments} where amount >= 1000.50")
    row = frame.agg(F.count("*"), F.sum("amount")).collect()[0]
    assert f"{row[0]}|{row[1]}" == expected
    assert frame.rdd.getNumPartitions() == 2


def test_columns_reads_only_the_named_columns_in_their_order(spark, server, payments, url):
    frame = load(spark, server, {"query": "payments", "partitions": 3, "columns": "amount, id"})
    assert [field.name for field in frame.schema] == ["amount", "id"]
    assert frame.rdd.getNumPartitions() == 3
    row = frame.agg(F.count("*"), F.sum("amount"), F.countDistinct("id")).collect()[0]
    expected = psql(url, f"select count(*), sum(amount), count(distinct id) from {payments}")
    assert f"{row[0]}|{row[1]}|{row[2]}" == expected
    listed = load(spark, server, {"query": "payments", "partitions": 1, "columns": '["status"]'})
    assert listed.columns == ["status"] and listed.count() == ROWS
    with pytest.raises(Exception) as raised:
        load(spark, server, {"query": "payments", "columns": "id, nope"})
    assert 'has no column "nope"' in str(raised.value), str(raised.value)


def test_ad_hoc_sql_is_one_partition(spark, server, payments, url):
    frame = load(spark, server, {"sql": f"select status, amount from {payments} where id <= 5000"})
    assert frame.rdd.getNumPartitions() == 1
    total = frame.agg(F.sum("amount")).collect()[0][0]
    assert str(total) == psql(url, f"select sum(amount) from {payments} where id <= 5000")


def test_a_task_that_fails_once_is_retried_and_the_sum_stays_exact(spark, server, payments, url):
    @F.udf(DecimalType(12, 2))
    def fails_first_attempt_of_partition_0(amount):
        context = TaskContext.get()
        # The scan of this partition is under way when its first row fails.
        if context.partitionId() == 0 and context.attemptNumber() == 0:
            raise RuntimeError("injected failure of the first attempt")
        return amount

    frame = load(spark, server, {"query": "payments", "partitions": 2})
    total = frame.select(fails_first_attempt_of_partition_0("amount").alias("amount")).agg(F.sum("amount"))
    expected = psql(url, f"select sum(amount) from {payments}")
    assert str(total.collect()[0][0]) == expected


def test_a_wrong_token_is_a_clear_error(spark, server):
    with pytest.raises(Exception) as raised:
        spark.read.format("sluice").option("location", server).option("query", "payments").option(
            "token", "wrong-token"
        ).load()
    message = str(raised.value)
    assert "unauthenticated" in message and "token" in message, message


def test_a_column_spark_cannot_hold_is_refused_by_name(spark, server):
    with pytest.raises(Exception) as raised:
        load(spark, server, {"query": "clock"})
    message = str(raised.value)
    assert "column at" in message and "time" in message, message
