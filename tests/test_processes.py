"""Worker pools stop when asked: Ctrl-C never waits for the workers' tasks."""

import multiprocessing
import os
import sys
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


def _faults_of_a_second_large_block() -> int:
    """Minor page faults of allocating 48 MB again after freeing 48 MB (a log window, a large text)."""
    import resource

    block = bytearray(48 << 20)
    del block
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    again = bytearray(48 << 20)
    faults = resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
    del again
    return faults


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="glibc's malloc on Linux")
def test_a_worker_reuses_its_freed_large_blocks_instead_of_faulting_in_fresh_pages():
    """A worker's 32 MB windows came from mmap and went back when freed: every window was faulted in and zeroed
    by the kernel again (reading 205 MB of logs: 117,500 minor faults, 0.7 s of system time; kept: 65,800,
    0.4 s). A pool's worker keeps them; a bare process does not."""
    from pipeline.processes import pool

    spawn = multiprocessing.get_context("spawn")
    with pool(1, spawn) as workers:
        tuned = workers.submit(_faults_of_a_second_large_block).result()
    with ProcessPoolExecutor(1, mp_context=spawn) as bare:
        untuned = bare.submit(_faults_of_a_second_large_block).result()
    assert untuned > 10_000  # 48 MB of fresh 4 KiB pages
    assert tuned < 1_000


EXIT_PROBE = """
import atexit, gc, sys, tempfile
from pathlib import Path
from pipeline.processes import exit_without_collecting

exit_without_collecting()
folder = tempfile.TemporaryDirectory()  # removed by its own exit handler
(Path(folder.name) / "kept").write_text("x")
print(folder.name, flush=True)

class Cycle:
    def __init__(self):
        self.me = self
    def __del__(self):
        sys.stdout.write("collected\\n"); sys.stdout.flush()

Cycle()
atexit.register(lambda: print("handler ran", flush=True))
"""


@pytest.mark.parametrize("register", [True, False])
def test_the_exit_runs_every_handler_then_collects_nothing(tmp_path, register):
    """exit_without_collecting: the exit handlers registered after it still run (a temporary folder is
    removed, a handler prints) and the objects left in cycles are never looked through (a cycle's __del__
    does not run); without it, the interpreter's exit collects the cycle."""
    import subprocess

    code = EXIT_PROBE if register else EXIT_PROBE.replace("exit_without_collecting()\n", "")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split("\n")
    folder, rest = out[0], [line for line in out[1:] if line]
    assert "handler ran" in rest
    assert not os.path.exists(folder)
    assert ("collected" in rest) is not register


def _parts_without_numpy(folder: str) -> tuple[str, list[dict], list[dict]]:
    """What an ingest worker does with Arrow and polars: a table converted, written as a Parquet part and read
    back by both; and whether numpy came in meanwhile."""
    import polars as pl
    import pyarrow as pa

    from pipeline.parts import read_part, write_part
    from pipeline.schema import to_arrow

    part = os.path.join(folder, "part.parquet")
    write_part(to_arrow("_rejects", [{"source_path": "/a", "line_number": 3, "reason": "x"}]), part)
    table = read_part(part)
    frame = pl.from_arrow(pa.table({"n": [1, None, 3], "s": ["a", None, "c"]}))
    numpy = "absent" if "numpy" not in sys.modules else "kept out" if sys.modules["numpy"] is None else "imported"
    return numpy, table.to_dicts(), frame.with_columns(pl.col("n") * 2).to_dicts()


def test_an_ingest_worker_converts_and_writes_its_parts_without_numpy(tmp_path):
    """The ingest's workers (lean_worker_init) keep numpy out: pyarrow, polars and the parts do without it,
    and it is not imported (a None entry: an import of it fails)."""
    from pipeline.processes import lean_worker_init, pool

    with pool(1, multiprocessing.get_context("spawn"), lean_worker_init) as workers:
        numpy, rows, frame = workers.submit(_parts_without_numpy, str(tmp_path)).result()
    assert numpy == "kept out"
    assert [(r["source_path"], r["line_number"], r["reason"]) for r in rows] == [("/a", 3, "x")]
    assert frame == [{"n": 2, "s": "a"}, {"n": None, "s": None}, {"n": 6, "s": "c"}]
    with pool(1, multiprocessing.get_context("spawn")) as workers:  # any other worker: numpy as usual
        assert workers.submit(_parts_without_numpy, str(tmp_path)).result()[0] == "imported"


NUMPY_PROBE = """
import sys
from pipeline.processes import numpy_kept_out, numpy_let_in

numpy_kept_out()
import pyarrow, polars, duckdb
try:
    import numpy
    print("imported")
except ImportError:
    print("kept out")
numpy_let_in()
from pipeline import charts
svg = charts.horizontal_bars(["a", "b"], [1.0, 2.5], "t", "x")
print("chart", svg.startswith("<?xml") and "<svg" in svg, type(sys.modules["numpy"]).__name__)
"""


def test_numpy_kept_out_then_let_in_for_the_charts():
    """An ingest's process keeps numpy out (processes.numpy_kept_out); the demo then lets it in, and the
    report's charts are drawn with it although pyarrow and polars were imported without it."""
    import subprocess

    from .conftest import REPO

    out = subprocess.run([sys.executable, "-c", NUMPY_PROBE], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["kept out", "chart True module"]


INGEST_PROBE = """
import sys
from pipeline.cli import SAMPLE, main

code = main(["ingest", "-q", "--warehouse", sys.argv[1], "--copilot-home", str(SAMPLE / "copilot-home"),
             "--vscode-user", str(SAMPLE / "vscode-user")])
print(code, "pyarrow" in sys.modules, "polars" in sys.modules, repr(sys.modules.get("numpy", "absent")))
"""


def test_the_ingest_verb_runs_without_numpy(tmp_path):
    """`ingest` keeps numpy out of its process (and its workers'): the run reads, stages and builds the star with
    pyarrow and polars, and numpy is never imported."""
    import subprocess

    from .conftest import REPO

    out = subprocess.run([sys.executable, "-c", INGEST_PROBE, str(tmp_path / "w.duckdb")], cwd=REPO,
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[-2] == "0 True True None"
