"""Worker pools stop when asked: Ctrl-C never waits for the workers' tasks."""

import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor

from pipeline.processes import stop_pool, worker_init


def _long_task(seconds: float) -> float:
    time.sleep(seconds)
    return seconds


def test_stop_pool_kills_workers_in_the_middle_of_a_task():
    pool = ProcessPoolExecutor(max_workers=2, mp_context=multiprocessing.get_context("spawn"), initializer=worker_init)
    futures = [pool.submit(_long_task, 120) for _ in range(4)]
    deadline = time.monotonic() + 60
    while not any(f.running() for f in futures) and time.monotonic() < deadline:
        time.sleep(0.05)
    workers = list(pool._processes.values())
    assert workers and any(f.running() for f in futures)
    stop_pool(pool)
    for process in workers:  # killed, not left to finish a two-minute task
        process.join(timeout=30)
        assert not process.is_alive()
    assert all(f.cancelled() or f.done() for f in futures)
