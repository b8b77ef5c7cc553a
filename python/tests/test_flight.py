"""`sluice serve`'s Arrow Flight endpoint through real Flight clients:
pyarrow.flight plans a named query and pulls its parts in parallel threads,
DuckDB queries what they return; the parts are one read in the plan's snapshot
while writes run, and clear Flight errors come back for bad tickets."""

import datetime
import decimal
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import urlsplit, urlunsplit

import adbc_driver_flightsql.dbapi as flight_sql
import duckdb
import pyarrow as pa
import pyarrow.flight as flight
import pytest

from conftest import flight_server

TOKEN = "flight-test-token-0123456789"


@pytest.fixture
def items(schema, sql):
    sql(
        f"create table {schema}.items (id int8 primary key, v int8 not null, amount numeric(12,2), "
        f"note text); insert into {schema}.items select g, g * 10, g / 100.0, 'n' || g "
        f"from generate_series(1, 50000) g; analyze {schema}.items"
    )
    return f"{schema}.items"


@pytest.fixture
def reader_url(url, schema, items, sql):
    """A login that may only read `items` (ad-hoc SQL needs an unprivileged one)."""
    role = f"{schema}_reader"
    sql(f"create role {role} login password 'reader-password'; grant usage on schema {schema} to {role}; "
        f"grant select on {items} to {role}")
    parts = urlsplit(url)
    netloc = f"{role}:reader-password@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    yield urlunsplit(parts._replace(netloc=netloc))
    sql(f"drop owned by {role}; drop role {role}")


@pytest.fixture
def server(url, reader_url, items, tmp_path):
    """`sluice serve` with Flight on a free port; yields its grpc:// location."""
    text = (
        f"""
[server]
listen = "127.0.0.1:0"
[databases.main]
url = "{url}"
[databases.adhoc]
url = "{reader_url}"
[sql]
database = "adhoc"
[queries.items]
database = "main"
table = "{items}"
[queries.above]
database = "main"
sql = "select id, v from {items} where v >= $1"
params = [{{ name = "min", type = "bigint", required = true }}]
split_by = "id"
"""
    )
    with flight_server(text, tmp_path, TOKEN) as location:
        yield location


def options():
    return flight.FlightCallOptions(headers=[(b"authorization", f"Bearer {TOKEN}".encode())])


def pull(location, info):
    """Every endpoint of `info`, each read by its own client in its own thread."""

    def read(endpoint):
        client = flight.connect(location)
        return client.do_get(endpoint.ticket, options()).read_all()

    with ThreadPoolExecutor(len(info.endpoints)) as pool:
        return list(pool.map(read, info.endpoints))


def test_parts_pulled_in_parallel_are_one_read_in_the_snapshot(server, items, sql):
    client = flight.connect(server)
    info = client.get_flight_info(
        flight.FlightDescriptor.for_command(b'{"query": "items"}'), options()
    )
    assert len(info.endpoints) == 4
    assert info.schema.names == ["id", "v", "amount", "note"]
    # NUMERIC stays exact.
    assert info.schema.field("amount").type == pa.decimal128(12, 2)
    before = sql(f"select count(*), sum(v), sum(amount) from {items}")
    sql(f"update {items} set v = -v where id % 3 = 0; delete from {items} where id % 5 = 0")
    sql(f"insert into {items} select g, 1, 0, 'new' from generate_series(50001, 60000) g")
    parts = pull(server, info)
    assert all(part.num_rows > 0 for part in parts)
    union = pa.concat_tables(parts)
    # DuckDB reads the Arrow tables the Flight client returned.
    connection = duckdb.connect()
    connection.register("union_table", union)
    count, distinct, total, amount = connection.execute(
        "select count(*), count(distinct id), sum(v), sum(amount) from union_table"
    ).fetchone()
    assert count == distinct, "the parts overlap"
    assert f"{count}|{total}|{amount}" == before


def test_a_split_query_keeps_its_parameters(server, items, sql):
    client = flight.connect(server)
    command = b'{"query": "above", "params": {"min": 400000}, "partitions": 3}'
    info = client.get_flight_info(flight.FlightDescriptor.for_command(command), options())
    assert len(info.endpoints) == 3
    union = pa.concat_tables(pull(server, info))
    expected = sql(f"select count(*), sum(v) from {items} where v >= 400000")
    connection = duckdb.connect()
    connection.register("parts", union)
    count, total = connection.execute("select count(*), sum(v) from parts").fetchone()
    assert f"{count}|{total}" == expected


def test_bad_tickets_and_missing_tokens_are_flight_errors(server):
    client = flight.connect(server)
    with pytest.raises(flight.FlightUnauthenticatedError):
        client.get_flight_info(flight.FlightDescriptor.for_command(b'{"query": "items"}'))
    # gRPC's NOT_FOUND: pyarrow raises it as a KeyError.
    with pytest.raises(KeyError, match="unknown ticket"):
        client.do_get(flight.Ticket(b"made up"), options()).read_all()
    with pytest.raises(KeyError, match="no query named"):
        client.get_flight_info(flight.FlightDescriptor.for_path("nothing"), options())


def test_adbc_flight_sql_runs_ad_hoc_sql(server, items):
    connection = flight_sql.connect(
        server, db_kwargs={"adbc.flight.sql.authorization_header": f"Bearer {TOKEN}"}
    )
    with connection, connection.cursor() as cursor:
        cursor.execute(f"select id, amount from {items} where id <= 5 order by id")
        table = cursor.fetch_arrow_table()
    assert table.column("id").to_pylist() == [1, 2, 3, 4, 5]
    assert table.schema.field("amount").type == pa.decimal128(12, 2)


def test_adbc_flight_sql_binds_parameters_of_prepared_statements(server, items, sql):
    connection = flight_sql.connect(
        server, db_kwargs={"adbc.flight.sql.authorization_header": f"Bearer {TOKEN}"}
    )
    with connection, connection.cursor() as cursor:
        cursor.execute(f"select id, amount, note from {items} where id between $1 and $2 order by id", (3, 6))
        table = cursor.fetch_arrow_table()
        assert table.column("id").to_pylist() == [3, 4, 5, 6]
        # The same statement again with other values, and values of other types.
        cursor.execute(f"select id, amount, note from {items} where id between $1 and $2 order by id", (10, 11))
        assert cursor.fetch_arrow_table().column("id").to_pylist() == [10, 11]
        cursor.execute(f"select count(*) as n from {items} where note = $1 and amount >= $2",
                       ("n7", decimal.Decimal("0.07")))
        assert cursor.fetch_arrow_table().column("n").to_pylist() == [1]
        cursor.execute("select $1::date + 1 as next, $2::timestamptz as at",
                       (datetime.date(2024, 2, 28), datetime.datetime(2024, 6, 1, 10, 0, 0, 250000,
                                                                     tzinfo=datetime.timezone.utc)))
        row = cursor.fetch_arrow_table().to_pylist()[0]
        assert row["next"] == datetime.date(2024, 2, 29)
        assert row["at"] == datetime.datetime(2024, 6, 1, 10, 0, 0, 250000, tzinfo=datetime.timezone.utc)


def test_flight_sql_errors_say_what_the_database_said(server, items):
    connection = flight_sql.connect(
        server, db_kwargs={"adbc.flight.sql.authorization_header": f"Bearer {TOKEN}"}
    )
    with connection, connection.cursor() as cursor:
        # A data error is the statement's fault: INVALID_ARGUMENT, as POST /sql's 400.
        with pytest.raises(Exception) as division:
            cursor.execute("select 1/0 as x")
            cursor.fetch_arrow_table()
        assert "division by zero" in str(division.value)
        assert "INVALID_ARGUMENT" in str(division.value), repr(division.value)
        # A syntax error's position counts characters of the user's SQL.
        with pytest.raises(Exception) as syntax:
            cursor.execute("select 1 from items where id = = 1")
            cursor.fetch_arrow_table()
        assert "at character 32" in str(syntax.value), str(syntax.value)
