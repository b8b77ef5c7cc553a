"""Fixtures of the Python package's tests: the PostgreSQL to test against
(SLUICE_TEST_PG_URL; python/tests/run.sh starts one when it is not set), SQL run
with psql beside the code under test, and a schema of each test's own so tests
run in parallel."""

import os
import subprocess
import uuid

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
