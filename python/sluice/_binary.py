"""Running the ``sluice`` binary: finding it, its process and the pipe its
Arrow stream goes through (read without blocking, so that Ctrl-C is
answered), and its report turned into the package's exceptions and
:func:`~sluice.last_stats`.

The binary is, in order: ``SLUICE_BIN`` when set, the one installed beside this
module or among the interpreter's scripts (the wheel puts it there), else
``sluice`` on ``PATH``.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import select
import shutil
import signal
import subprocess
import sysconfig
import tempfile
from pathlib import Path
from typing import Any, Iterator, Sequence

from . import _stats
from ._errors import ERROR_BY_EXIT_CODE, BadInput, Error, UsageError, row_message

# How long an interrupted sluice gets to cancel the query and exit before it is
# killed (it gives the server two seconds to take the cancel).
_INTERRUPT_GRACE_SECONDS = 10

# How often a wait for sluice (its pipe, its exit) returns to Python code, where
# the interpreter runs a pending signal's handler: see Pipe.
_WAKE_SECONDS = 0.1


def binary() -> str:
    """The ``sluice`` executable to run (see the module's docs for the order)."""
    explicit = os.environ.get("SLUICE_BIN")
    if explicit:
        return explicit
    for directory in (Path(__file__).parent, Path(sysconfig.get_path("scripts"))):
        candidate = directory / "sluice"
        if candidate.is_file() and os.access(candidate, os.X_OK):
            return str(candidate)
    found = shutil.which("sluice")
    if found is None:
        raise UsageError("no sluice binary: install the package with pip, or set SLUICE_BIN")
    return found


class Pipe(io.RawIOBase):
    """Our end of a pipe to or from sluice, waited on so that Ctrl-C is answered
    within ``_WAKE_SECONDS`` whatever else the process has imported.

    A blocking ``read`` or ``write`` on a pipe (what pyarrow's reader and writer
    do, in C++) gives the interpreter a chance to run a signal's handler only
    when the signal interrupts the call, and that happens only when the signal
    lands on this thread and its C handler was installed without
    ``SA_RESTART``, as Python installs its own. Importing polars breaks the
    second: its runtime installs a SIGINT handler of its own (through the Rust
    crate signal-hook, for interrupting its own queries) with ``SA_RESTART``,
    chained to Python's. Python's handler still notes the signal, but the
    kernel restarts the read, which sleeps on until sluice writes, after the
    whole query for one that sends nothing before its end; the
    ``KeyboardInterrupt`` came then, and sluice was never told. (Python's
    Python-level handler is unchanged: ``signal.getsignal`` shows nothing.)
    Any other library doing the same, or a signal the kernel gives to one of
    the process's other threads (pyarrow's, polars'), does it too.

    So the pipe is non-blocking and a wait on it (``poll``) returns to Python
    code every ``_WAKE_SECONDS``, where the interpreter runs whatever handler
    the signal has waiting: Python's default raises ``KeyboardInterrupt``,
    which ends the read or write, and :func:`watched` passes it on to sluice.
    Off the main thread, where no handler runs, the wait just goes on."""

    def __init__(self, file: io.FileIO, writes: bool):
        super().__init__()
        self._file = file
        self._writes = writes
        os.set_blocking(file.fileno(), False)
        self._poll = select.poll()
        self._poll.register(file.fileno(), select.POLLOUT if writes else select.POLLIN)

    @property
    def mode(self) -> str:
        # What pyarrow asks a file object it is given (through its buffer).
        return "wb" if self._writes else "rb"

    def fileno(self) -> int:
        return self._file.fileno()

    def readable(self) -> bool:
        return not self._writes

    def writable(self) -> bool:
        return self._writes

    def readinto(self, buffer: Any) -> int:
        while True:
            count = self._file.readinto(buffer)  # None: nothing there yet
            if count is not None:
                return count
            self._poll.poll(_WAKE_SECONDS * 1000)

    def write(self, data: Any) -> int:
        while True:
            count = self._file.write(data)  # None: the pipe is full
            if count is not None:
                return count
            self._poll.poll(_WAKE_SECONDS * 1000)

    def close(self) -> None:
        self._file.close()
        super().close()


class Run:
    """One sluice process: reports (JSON lines) go to a temporary file rather than a
    pipe, so a chatty standard error can never block it. A read's Arrow stream
    is ``output``, a write's is ``input``: buffered :class:`Pipe` s."""

    def __init__(self, arguments: Sequence[str], *, reads: bool):
        self.reads = reads
        self.reports = tempfile.TemporaryFile()
        environment = dict(os.environ, SLUICE_REPORT="json")
        self.process = subprocess.Popen(
            [binary(), *arguments],
            stdin=subprocess.DEVNULL if reads else subprocess.PIPE,
            stdout=subprocess.PIPE if reads else subprocess.DEVNULL,
            stderr=self.reports,
            env=environment,
            # The pipe's own file, which Pipe buffers.
            bufsize=0,
        )
        self.output = io.BufferedReader(Pipe(self.process.stdout, writes=False)) if reads else None
        self.input = None if reads else io.BufferedWriter(Pipe(self.process.stdin, writes=True))

    def interrupt(self) -> None:
        """Ctrl-C for the process: sluice cancels the query on the server and
        exits; killed if it does not within the grace period, or when waiting
        for it is interrupted in turn (a second Ctrl-C)."""
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(timeout=_INTERRUPT_GRACE_SECONDS)
            except subprocess.TimeoutExpired:
                self._kill()
            except BaseException:
                self._kill()
                self.close()
                raise
        self.close()

    def _kill(self) -> None:
        self.process.kill()
        self.process.wait()

    def close(self) -> None:
        # The process has ended: a write's buffer left unsent breaks the pipe.
        for stream in (self.input, self.output):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self.reports.close()

    def finish(self) -> None:
        """Waits for the process; raises its error, or records its stats. An
        interrupt while waiting (a write's commit) interrupts the process."""
        try:
            code = self._exit_code()
        except BaseException:
            self.interrupt()
            raise
        self.reports.seek(0)
        lines = self.reports.read().decode("utf-8", "replace").splitlines()
        self.close()
        reports = [parse_report(line) for line in lines]
        if code != 0:
            raise error_of(code, reports, lines, self.reads)
        stats = next((report["stats"] for report in reports if "stats" in report), None)
        if stats is not None:
            _stats.record(stats)

    def _exit_code(self) -> int:
        """The process's exit code, waited for in steps that let a signal's
        handler run (a blocking ``waitpid`` is restarted as a read is: see
        :class:`Pipe`)."""
        while True:
            with contextlib.suppress(subprocess.TimeoutExpired):
                return self.process.wait(timeout=_WAKE_SECONDS)


def parse_report(line: str) -> dict:
    """A JSON line of sluice's standard error as a dict; another line as an empty one."""
    if line.startswith("{"):
        with contextlib.suppress(ValueError):
            return json.loads(line)
    return {}


def error_of(code: int, reports: list[dict], lines: list[str], reads: bool) -> Error:
    """The exception for sluice's exit ``code``, from its error report (or
    its words, when it printed none)."""
    report = next((report["error"] for report in reports if "error" in report), None)
    kind = ERROR_BY_EXIT_CODE.get(code, Error)
    if report is None:
        # An argument sluice's parser refused, or a crash: its words as they are.
        text = "\n".join(line for line in lines if line.strip()) or f"sluice exited with code {code}"
        return kind(text, None, code)
    message = report["message"]
    if kind is BadInput and not reads and "record" in report and "reason" in report:
        # A value of the written data sluice refused (its column's type would
        # change it): named by its 0-based row in the data, as this package's
        # own refusals name theirs, not by sluice's record number ("line").
        message = row_message(report["record"] - 1, report.get("column_name"), report["reason"])
    return kind(message, report, code)


@contextlib.contextmanager
def watched(run: Run) -> Iterator[None]:
    """Ends the process when the caller stops early (an exception, an iterator
    closed, Ctrl-C) and turns a failed stream into sluice's own error.

    A write's process is interrupted, never sent the end of its input, on any
    failure of ours: it would take a stream cut at a batch boundary for a
    whole one and commit it."""
    import pyarrow

    # A read's stream fails when sluice does; a write's pipe breaks (OSError)
    # when sluice has stopped reading it.
    its_failure = (pyarrow.ArrowException, OSError) if run.reads else OSError
    try:
        yield
    except its_failure:
        # The process says why.
        run.finish()
        raise
    except BaseException:
        run.interrupt()
        raise
    run.finish()
