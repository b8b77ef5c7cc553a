"""sluice.dask.read_flight against `sluice serve`'s Arrow Flight: one Dask
partition per endpoint, decimals that give psql's exact sum, mean and
groupby sums on the threaded scheduler and on a distributed LocalCluster of
two worker processes, compute() twice on one DataFrame, ad-hoc SQL, a
released plan and a wrong token as clear errors."""

import uuid
from decimal import ROUND_HALF_UP, Decimal
from urllib.parse import urlsplit, urlunsplit

import pytest

from conftest import flight_server, psql

dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
import pandas as pd  # noqa: E402
import pyarrow as pa  # noqa: E402

import sluice.dask  # noqa: E402

TOKEN = "dask-test-token-0123456789"
ROWS = 40000


@pytest.fixture(scope="module")
def payments(url):
    """numeric(12,2) amounts (some negative, some NULL) in three currencies,
    and a login that may only read them (ad-hoc SQL needs an unprivileged one)."""
    schema = f"py_dask_{uuid.uuid4().hex[:8]}"
    role = f"{schema}_reader"
    psql(url, f"create schema {schema}")
    psql(
        url,
        f"create table {schema}.payments (id int8 primary key, currency text, amount numeric(12,2)); "
        f"insert into {schema}.payments select g, (array['EUR','USD','GBP'])[1 + g % 3], "
        f"case when g % 89 = 0 then null when g in (3, 6, 9) then 9999999999.99 else ((g * 7919) % 2000003 - 500000) / 100.0 end "
        f"from generate_series(1, {ROWS}) g; analyze {schema}.payments; "
        f"create role {role} login password 'reader-password'; grant usage on schema {schema} to {role}; "
        f"grant select on {schema}.payments to {role}",
    )
    parts = urlsplit(url)
    netloc = f"{role}:reader-password@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    yield f"{schema}.payments", urlunsplit(parts._replace(netloc=netloc))
    psql(url, f"drop schema {schema} cascade; drop owned by {role}; drop role {role}")


@pytest.fixture(scope="module")
def table(payments):
    return payments[0]


@pytest.fixture(scope="module")
def server(url, payments, tmp_path_factory):
    table, reader_url = payments
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
table = "{table}"
"""
    with flight_server(config, tmp_path_factory.mktemp("dask-serve"), TOKEN) as location:
        yield location


@pytest.fixture(scope="module")
def cluster_client(tmp_path_factory):
    # Dask's scratch space (by default dask-scratch-space in the temporary
    # directory, which outlives the cluster) goes with the test run.
    scratch = str(tmp_path_factory.mktemp("dask-scratch"))
    with dask.config.set({"temporary-directory": scratch}), distributed.LocalCluster(
        n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
    ) as cluster, distributed.Client(cluster, set_as_default=False) as client:
        yield client


def expected(url, table):
    """psql's count, sum and avg of amount, and its sum by currency."""
    count, total, average = psql(url, f"select count(amount), sum(amount), avg(amount) from {table}").split("|")
    rows = psql(url, f"select currency, sum(amount) from {table} group by 1 order by 1").splitlines()
    by_currency = {row.split("|")[0]: Decimal(row.split("|")[1]) for row in rows}
    return int(count), Decimal(total), Decimal(average), by_currency


def check_exact(frame, url, table, **compute):
    count, total, average, by_currency = expected(url, table)
    got_total, got_mean, got_count = dask.compute(
        frame.amount.sum(), frame.amount.mean(), frame.amount.count(), **compute
    )
    assert (got_count, got_total) == (count, total)
    assert isinstance(got_total, Decimal) and isinstance(got_mean, Decimal)
    # The mean is the exact sum over the count in Python's decimal (28
    # significant digits); rounded to psql's scale it is psql's avg.
    assert got_mean == total / count
    assert got_mean.quantize(average, rounding=ROUND_HALF_UP) == average
    groups = frame.groupby("currency").amount.sum().compute(**compute)
    assert {key: Decimal(value) for key, value in groups.items()} == by_currency


def test_threaded_scheduler_sums_are_exact_and_compute_twice_reads_the_plan_again(server, url, table):
    frame = sluice.dask.read_flight(server, "payments", partitions=3, token=TOKEN)
    assert frame.npartitions == 3
    assert frame.dtypes["amount"] == pd.ArrowDtype(pa.decimal128(12, 2))
    check_exact(frame, url, table, scheduler="threads")
    # A second compute reads the plan's snapshot again: rows written since
    # are not in it.
    before = frame.amount.sum().compute(scheduler="threads")
    psql(url, f"update {table} set amount = amount + 1 where id between 100 and 1000")
    try:
        assert expected(url, table)[1] != before
        assert frame.amount.sum().compute(scheduler="threads") == before
    finally:
        psql(url, f"update {table} set amount = amount - 1 where id between 100 and 1000")


def test_distributed_worker_processes_sum_exactly(server, url, table, cluster_client):
    frame = sluice.dask.read_flight(server, "payments", partitions=4, token=TOKEN)
    check_exact(frame, url, table, scheduler=cluster_client.get)
    # And again, on the same DataFrame.
    count, total, _, _ = expected(url, table)
    assert cluster_client.compute(frame.amount.sum()).result() == total


def test_columns_reads_only_the_named_columns_in_their_order(server, url, table):
    frame = sluice.dask.read_flight(server, "payments", partitions=2, token=TOKEN, columns=["amount", "currency"])
    assert list(frame.columns) == ["amount", "currency"]
    assert frame.npartitions == 2
    check_exact(frame, url, table, scheduler="threads")
    with pytest.raises(sluice.UsageError, match="list of column names"):
        sluice.dask.read_flight(server, "payments", token=TOKEN, columns="amount")
    with pytest.raises(sluice.dask.FlightError, match='has no column "nope"'):
        sluice.dask.read_flight(server, "payments", token=TOKEN, columns=["nope"])


def test_ad_hoc_sql_is_one_partition(server, url, table):
    frame = sluice.dask.read_flight(
        server, sql=f"select currency, amount from {table} where id <= 500", token=TOKEN
    )
    assert frame.npartitions == 1
    got = frame.amount.sum().compute(scheduler="threads")
    assert str(got) == psql(url, f"select sum(amount) from {table} where id <= 500")


def test_a_released_plan_and_a_wrong_token_are_clear_errors(server):
    with sluice.dask.plan(server, "payments", partitions=2, token=TOKEN) as plan:
        frame = plan.dataframe()
        assert len(frame.compute(scheduler="threads")) == ROWS
    with pytest.raises(sluice.dask.FlightError, match="no longer held") as raised:
        frame.compute(scheduler="threads")
    assert raised.value.status == "precondition failed"
    with pytest.raises(sluice.dask.FlightError, match="unauthenticated.*token") as raised:
        sluice.dask.read_flight(server, "payments", token="wrong-token")
    assert raised.value.status == "unauthenticated"
    assert isinstance(raised.value, sluice.Error)
