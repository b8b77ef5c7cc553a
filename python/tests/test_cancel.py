"""Stopping a read stops the query on the server: Ctrl-C (KeyboardInterrupt),
whatever else the process has imported, and closing a batch iterator early;
Ctrl-C stops a write too, committing nothing."""

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest
from conftest import psql, running

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


# --- Ctrl-C whatever else is imported (issue 49) ----------------------------
#
# Importing polars installs a C-level SIGINT handler with SA_RESTART (see
# sluice._binary.Pipe): a read blocked on sluice's pipe was no longer interrupted, so
# KeyboardInterrupt came when the query ended and sluice was never told. Each
# case runs in a Python of its own that imports polars first, gets SIGINT once
# its statements run, and reports what it left behind.

CHILD_PREAMBLE = (
    "import json, os, sys, time\n"
    "import polars  # its SIGINT handler, installed on import, is the point\n"
    "import sluice\n"
    "def report():\n"
    "    me = str(os.getpid())\n"
    "    children = [pid for pid in os.listdir('/proc') if pid.isdigit() and _parent(pid) == me]\n"
    "    print(json.dumps({'interrupted_at': time.monotonic(), 'children': children}))\n"
    "def _parent(pid):\n"
    "    try:\n"
    "        with open(f'/proc/{pid}/stat') as stat:\n"
    "            return stat.read().rsplit(')', 1)[1].split()[1]\n"
    "    except OSError:\n"
    "        return None\n"
)


def children_of(pid):
    """The processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    parent = stat.read().rsplit(")", 1)[1].split()[1]
            except OSError:
                continue
            if parent == str(pid):
                found.append(int(entry))
    return found


def interrupt_child(url, script, arguments, started, temporary):
    """Runs `script` (after CHILD_PREAMBLE) in a Python of its own, in a new
    session, with `temporary` as its TMPDIR; once `started()` holds, sends
    SIGINT to that Python alone and returns what it reported on
    KeyboardInterrupt, the seconds from the signal to its report, and the
    sluice processes it had run."""
    child = subprocess.Popen(
        [sys.executable, "-c", CHILD_PREAMBLE + script, url, *arguments],
        env=dict(os.environ, TMPDIR=str(temporary)),
        stdout=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        assert wait_for(started, 60), "the statements never started"
        sluices = children_of(child.pid)
        assert sluices, "no sluice process"
        sent = time.monotonic()
        child.send_signal(signal.SIGINT)  # to Python alone: it must pass it on
        try:
            output, _ = child.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            pytest.fail("no KeyboardInterrupt within 30 s of SIGINT")
        assert child.returncode == 42, output
        report = json.loads(output)
        return report, report["interrupted_at"] - sent, sluices
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(child.pid, signal.SIGKILL)
        child.wait()


def assert_nothing_left(url, marker, sluices, temporary, report):
    assert report["children"] == [], "a sluice process outlived the KeyboardInterrupt"
    assert not [pid for pid in sluices if os.path.exists(f"/proc/{pid}")], "a sluice process is left"
    assert wait_for(lambda: running(url, marker) == 0, 5), "the statement still runs on the server"
    assert list(temporary.iterdir()) == [], "a temporary file is left"


def cancel_leftovers(url, marker):
    """Ends the statements an old sluice left running, so a failing test stops them."""
    psql(
        url,
        "select count(pg_cancel_backend(pid)) from pg_stat_activity "
        f"where pid <> pg_backend_pid() and query like '%{marker}%'",
    )


@pytest.mark.parametrize("function", ["read_arrow", "read_pandas", "read_polars", "read_batches"])
def test_ctrl_c_with_polars_imported_cancels_a_read_in_parts(url, schema, sql, tmp_path, function):
    marker = f"cancel_{uuid.uuid4().hex}"
    sql(f"create table {schema}.t as select generate_series(1, 2) as id")
    # Stable: the planning query (the ids' extent) does not call it; each part's row waits a minute.
    sql(
        f"create function {schema}.slow(id int) returns int language plpgsql stable "
        "as 'begin perform pg_sleep(60); return id; end'"
    )
    query = f"select id, {schema}.slow(id) as {marker} from {schema}.t"
    script = (
        "url, query, function = sys.argv[1:4]\n"
        "try:\n"
        "    result = getattr(sluice, function)(url, query, jobs=2, split_by='id')\n"
        "    for _ in result if function == 'read_batches' else ():\n"
        "        pass\n"
        "except KeyboardInterrupt:\n"
        "    report()\n"
        "    sys.exit(42)\n"
    )
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    try:
        report, seconds, sluices = interrupt_child(
            url, script, [query, function], lambda: running(url, marker) == 2, temporary
        )
        # Within a second or so; the statements would run a minute.
        assert seconds < 5, f"KeyboardInterrupt {seconds:.1f} s after SIGINT"
        assert_nothing_left(url, marker, sluices, temporary, report)
    finally:
        cancel_leftovers(url, marker)


def test_ctrl_c_with_polars_imported_stops_a_write_waiting_for_a_lock(url, schema, sql, tmp_path):
    sql(f"create table {schema}.t (id int4)")
    marker = f"{schema}.t"
    # Another session holds the table against writes, so the write's COPY
    # waits, and with it sluice, after Python has sent every row and waits for
    # it to commit.
    holder = subprocess.Popen(
        [
            "psql", url, "-X", "-q", "-c",
            f"begin; lock table {schema}.t in share mode; select pg_sleep(60) as holder_{schema}",
        ],
        stdout=subprocess.DEVNULL,
    )
    script = (
        "import pyarrow\n"
        "url, table = sys.argv[1:3]\n"
        "try:\n"
        "    sluice.write(url, table, pyarrow.table({'id': [1, 2, 3]}))\n"
        "except KeyboardInterrupt:\n"
        "    report()\n"
        "    sys.exit(42)\n"
    )
    temporary = tmp_path / "tmp"
    temporary.mkdir()
    try:
        assert wait_for(lambda: running(url, f"holder_{schema}") == 1), "the lock was never taken"
        report, seconds, sluices = interrupt_child(
            url, script, [f"{schema}.t"], lambda: running(url, f"copy {marker}") == 1, temporary
        )
        assert seconds < 5, f"KeyboardInterrupt {seconds:.1f} s after SIGINT"
        assert_nothing_left(url, f"copy {marker}", sluices, temporary, report)
    finally:
        holder.kill()
        holder.wait()
        cancel_leftovers(url, f"holder_{schema}")
        cancel_leftovers(url, f"copy {marker}")
    # Once the lock is gone nothing was committed.
    assert wait_for(lambda: running(url, f"holder_{schema}") == 0, 10)
    assert sql(f"select count(*) from {schema}.t") == "0"
