"""Worker pools stop when asked: Ctrl-C never waits for the workers' tasks."""

import multiprocessing
import os
import time
from concurrent.futures import ProcessPoolExecutor

import pytest

from pipeline.processes import stop_pool, worker_init


def _long_task(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def _gone(pid: int) -> bool:
    """Whether the process has ended (asked of the system: multiprocessing's own is_alive() can say True
    for a worker the pool's manager thread reaped at the same moment)."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] in ("Z", "X")
    except (FileNotFoundError, ProcessLookupError):  # gone before the open, or between the open and the read
        return True


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="asks /proc whether a process ended")
def test_stop_pool_kills_workers_in_the_middle_of_a_task():
    pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"), initializer=worker_init)
    futures = [pool.submit(_long_task, 120) for _ in range(4)]
    deadline = time.monotonic() + 60
    while not any(f.running() for f in futures) and time.monotonic() < deadline:
        time.sleep(0.05)
    pids = list(pool._processes)
    assert pids and any(f.running() for f in futures)
    stop_pool(pool)
    deadline = time.monotonic() + 30  # killed, not left to finish a two-minute task
    while not all(_gone(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert all(_gone(pid) for pid in pids)
    assert all(f.cancelled() or f.done() for f in futures)


def test_a_worker_started_after_its_parent_died_exits_at_once():
    """A worker whose parent was killed while it started has been handed to another process: it is told
    its parent's pid by the pool (processes.pool) and exits at once, where it watched its new parent."""
    import subprocess
    import sys

    from .conftest import REPO

    code = "import time; from pipeline.processes import worker_init; worker_init({}); time.sleep({}); print('alive')"
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    started = time.monotonic()
    proc = subprocess.run([sys.executable, "-c", code.format(ended.pid, 30)], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 1 and "alive" not in proc.stdout and time.monotonic() - started < 20, proc
    # its parent alive: it works on
    proc = subprocess.run([sys.executable, "-c", code.format(os.getpid(), 0.1)], cwd=REPO, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout == "alive\n", proc
