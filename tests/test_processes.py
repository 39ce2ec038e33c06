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
