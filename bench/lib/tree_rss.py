"""Runs a command and prints "elapsed_s peak_tree_rss_kb": the wall time and
the peak of the summed resident memory of the command and every process it
starts (a Python client and the sluice child it runs both count), sampled from
/proc every 10 ms. GNU time's %M is the largest single process, not the sum.

    python tree_rss.py OUTPUT_FILE COMMAND [ARGUMENT...]

Standard output and error of COMMAND pass through; its exit status is ours.
"""

import os
import subprocess
import sys
import time


def children() -> dict[int, list[int]]:
    """Each process's children, by parent pid."""
    tree: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as stat:
                # The command name may hold spaces and parentheses: ppid follows the last ')'.
                fields = stat.read().rsplit(b")", 1)[1].split()
        except OSError:
            continue
        tree.setdefault(int(fields[1]), []).append(int(entry))
    return tree


def rss_kb(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as status:
            for line in status:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def tree_rss_kb(root: int) -> int:
    tree = children()
    total, pending = 0, [root]
    while pending:
        pid = pending.pop()
        total += rss_kb(pid)
        pending.extend(tree.get(pid, ()))
    return total


def main() -> int:
    output, command = sys.argv[1], sys.argv[2:]
    started = time.monotonic()
    process = subprocess.Popen(command)
    peak = 0
    while process.poll() is None:
        peak = max(peak, tree_rss_kb(process.pid))
        time.sleep(0.01)
    elapsed = time.monotonic() - started
    with open(output, "w") as file:
        file.write(f"{elapsed:.3f} {peak}\n")
    return process.returncode


if __name__ == "__main__":
    sys.exit(main())
