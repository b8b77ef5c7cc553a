"""Fixtures of the Python package's tests: the PostgreSQL to test against
(SLUICE_TEST_PG_URL; python/tests/run.sh starts one when it is not set), SQL run
with psql beside the code under test, a schema of each test's own so tests
run in parallel, and `sluice serve` with Arrow Flight for the Flight, Spark and
Dask tests."""

import os
import re
import subprocess
import threading
import time
import uuid
from contextlib import contextmanager

import pytest


@pytest.fixture(scope="session")
def url() -> str:
    value = os.environ.get("SLUICE_TEST_PG_URL")
    if not value:
        pytest.fail("SLUICE_TEST_PG_URL is not set: run the tests with python/tests/run.sh")
    return value


def psql(url: str, sql: str) -> str:
    """Runs `sql` with psql and returns its unaligned output."""
    result = subprocess.run(
        ["psql", url, "-X", "-v", "ON_ERROR_STOP=1", "-qAt", "-c", sql],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        raise AssertionError(f"psql failed: {result.stderr}")
    return result.stdout.strip()


@pytest.fixture
def sql(url):
    return lambda text: psql(url, text)


@pytest.fixture
def schema(url, request):
    """A fresh schema named after the test, dropped afterwards."""
    name = f"py_{request.node.name[:30].lower()}_{uuid.uuid4().hex[:8]}"
    name = "".join(character if character.isalnum() else "_" for character in name)
    psql(url, f"create schema {name}")
    yield name
    psql(url, f"drop schema {name} cascade")


def running(url: str, marker: str) -> int:
    """How many sessions other than this one run a statement containing `marker`."""
    return int(
        psql(
            url,
            "select count(*) from pg_stat_activity where pid <> pg_backend_pid() "
            f"and state = 'active' and query like '%{marker}%'",
        )
    )


@contextmanager
def flight_server(config_text, directory, token):
    """`sluice serve` with the given configuration, the token `token` (named
    analyst, every query, scope sql) and Flight in 4 parts; yields its grpc://
    location, and stops it afterwards."""
    config = directory / "sluice.toml"
    config.write_text(
        config_text
        + f"""
[[tokens]]
name = "analyst"
token = "{token}"
queries = ["*"]
scopes = ["sql"]
[flight]
listen = "127.0.0.1:0"
partitions = 4
"""
    )
    process = subprocess.Popen(
        [os.environ["SLUICE_BIN"], "serve", "--config", str(config)], stderr=subprocess.PIPE, text=True
    )
    location = None
    deadline = time.monotonic() + 30
    while location is None and time.monotonic() < deadline:
        line = process.stderr.readline()
        if not line:
            break
        found = re.search(r"Arrow Flight on (grpc://\S+),", line)
        location = found.group(1) if found else None
    # Keep reading its log so the server never blocks on a full pipe.
    threading.Thread(target=process.stderr.read, daemon=True).start()
    try:
        if location is None:
            pytest.fail("sluice serve did not say where Flight listens")
        yield location
    finally:
        process.terminate()
        process.wait(timeout=30)
