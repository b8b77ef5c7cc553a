"""Stopping a read stops the query on the server: Ctrl-C (KeyboardInterrupt)
and closing a batch iterator early."""

import os
import signal
import subprocess
import sys
import time
import uuid

from conftest import running

import sluice


def wait_for(condition, seconds=15.0):
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.1)
    return False


def test_ctrl_c_cancels_the_query_on_the_server(url):
    marker = f"cancel_{uuid.uuid4().hex}"
    script = (
        "import sluice, sys\n"
        "try:\n"
        f"    sluice.read_arrow(sys.argv[1], 'select pg_sleep(30) as {marker}')\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(42)\n"
    )
    child = subprocess.Popen([sys.executable, "-c", script, url], env=os.environ)
    try:
        assert wait_for(lambda: running(url, marker) == 1), "the query never started"
        started = time.monotonic()
        child.send_signal(signal.SIGINT)  # to Python alone: it must pass it on
        assert child.wait(timeout=15) == 42
        assert time.monotonic() - started < 10
        assert wait_for(lambda: running(url, marker) == 0, 5), "the query still runs"
    finally:
        child.kill()


def test_closing_the_batch_iterator_early_ends_the_query(url):
    marker = f"close_{uuid.uuid4().hex}"
    batches = sluice.read_batches(
        # In the select list the series streams (in FROM it would be materialized first).
        url, f"select generate_series(1, 1000000000) as {marker}",
        batch_rows=1000,
    )
    first = next(batches)
    assert first.num_rows == 1000
    batches.close()
    assert wait_for(lambda: running(url, marker) == 0, 5), "the query still runs"
