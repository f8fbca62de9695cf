"""Clear up after an `ajax-tune` process that was killed: `python -m ajax_tune.cli.reaper PID`.

When a driver that started its own Ray is killed (SIGKILL, an OOM kill), the kernel takes its
GCS server and raylet with it, but Ray's dashboard and runtime-env agents outlive them: they
try to report the raylet's death to the GCS that is already gone, ignore SIGTERM meanwhile,
and linger for about a minute (longer when that call hangs). This process watches the driver
through a pipe, remembering the driver's descendants while it lives; when the pipe closes (the
driver is gone, however it ended) it kills whichever of them are still there. It runs in its own
session, so a Ctrl-C or a kill of the driver's process group does not take it first.

Only processes that descended from the driver are touched, each checked by its start time, so a
recycled pid is never killed.
"""

from __future__ import annotations

import contextlib
import os
import select
import sys

import psutil

POLL_S = 1.0


def watch(driver_pid: int, fd: int = 0) -> list[int]:
    """Block until `fd` reaches end of file; then kill the driver's remembered descendants.
    Returns the pids it killed."""
    known: dict[int, float] = {}
    while True:
        readable, _, _ = select.select([fd], [], [], POLL_S)
        if readable and not os.read(fd, 4096):
            break
        try:
            for child in psutil.Process(driver_pid).children(recursive=True):
                with contextlib.suppress(psutil.Error):
                    known[child.pid] = child.create_time()
        except psutil.Error:
            break  # the driver is gone; its pipe closes with it
    killed = []
    for pid, started in known.items():
        if pid == os.getpid():
            continue
        try:
            process = psutil.Process(pid)
            if process.create_time() == started:
                process.kill()
                killed.append(pid)
        except psutil.Error:
            pass
    return killed


if __name__ == "__main__":
    watch(int(sys.argv[1]))
