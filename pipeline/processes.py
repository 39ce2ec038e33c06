"""Worker processes that never outlive their parent and never answer Ctrl-C themselves."""

from __future__ import annotations

import atexit
import gc
import logging
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor


def worker_init(parent: int | None = None) -> None:
    """A worker process ignores Ctrl-C (the main process handles it, once) and dies with its
    parent: killed on Linux when the parent dies (prctl), and on any system when it sees that its
    parent is gone (a watchdog thread), so no worker outlives a killed ingest.

    ``parent``: the pid of the process that started the pool (``initargs=(os.getpid(),)``). A worker that
    starts after its parent was killed has been handed to another process already: asked then, getppid()
    names that one, the death signal is set too late to fire, and the watchdog would watch the wrong
    process - so it exits at once when its parent is not the one given."""
    import signal
    import threading
    import time

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    exit_without_collecting()
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
        keep_freed_memory(libc)
    except (OSError, AttributeError):
        pass
    parent = parent or os.getppid()
    if os.getppid() != parent:  # after the prctl: a parent that dies later kills this worker
        os._exit(1)

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def numpy_kept_out() -> None:
    """Have ``import numpy`` fail in this process from now on (unless numpy is in it already), so that pyarrow,
    polars and DuckDB - each of which uses numpy only when it is there - do without it. The ingest's processes
    never convert to or from numpy arrays, and pyarrow imports numpy as it is imported itself: 40-100 ms and
    ~10 MB of memory in each process, which a small run pays in its main process and in each worker. The report
    draws its charts with matplotlib, which needs numpy: ``numpy_let_in`` before it."""
    sys.modules.setdefault("numpy", None)  # a None entry: the import system raises ImportError for the name


def numpy_let_in() -> None:
    """Undo ``numpy_kept_out``: numpy can be imported again (libraries imported meanwhile go on without it)."""
    if "numpy" in sys.modules and sys.modules["numpy"] is None:
        del sys.modules["numpy"]


def lean_worker_init(parent: int | None = None) -> None:
    """``worker_init`` for a worker of the ingest (a reader's or the star's), which does without numpy
    (``numpy_kept_out``)."""
    numpy_kept_out()
    worker_init(parent)


def exit_without_collecting() -> None:
    """At exit, leave the objects still alive to the end of the process rather than have the interpreter's
    shutdown look through all of them for cycles, several times over (after an ingest of a small home, ~90,000
    objects of DuckDB's, polars' and pyarrow's modules: 0.2 s of a 3 s run, after everything was written).
    Registered first, it runs after every other exit handler (they run last registered first); what needs
    doing at exit - flushing files, removing temporary folders, joining workers - is done by those handlers
    and by reference counting, never by the cycle collector."""
    atexit.register(gc.freeze)


@contextmanager
def gc_paused() -> Iterator[None]:
    """Python's cycle collector off while the block (or, as a decorator, the function) runs, and on again after
    unless it was off already. A run builds rows by the hundred thousand - dicts, tuples and strings, none in a
    cycle - and every 700 new objects the collector looked through the young ones, and now and then through all
    of them: 7-12% of a reader's CPU on the bench's `events` logs. What the block leaves in a cycle (an
    exception and its traceback) is collected once the collector is on again."""
    was = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was:
            gc.enable()


# glibc's malloc hands a block of 32 MB or more to its own mmap, and gives it back to the system when freed: each
# 32 MB window of a log and each large text a worker reads came as fresh pages, faulted in and zeroed by the
# kernel, and went back when freed. Blocks up to MMAP_BELOW come from the heap instead, and up to TRIM_ABOVE of
# what the heap frees at its top stays with the process for the next window (the heap still shrinks past that)
MMAP_BELOW = 64 << 20
TRIM_ABOVE = 128 << 20
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD = -1, -3  # mallopt's parameters (malloc.h)


def keep_freed_memory(libc: object) -> None:
    """Have glibc's malloc in this process keep large blocks on its heap (``MMAP_BELOW``, ``TRIM_ABOVE``);
    nothing where the C library is not glibc."""
    mallopt = getattr(libc, "mallopt", None)
    if mallopt is not None and getattr(libc, "gnu_get_libc_version", None) is not None:
        mallopt(_M_MMAP_THRESHOLD, MMAP_BELOW)
        mallopt(_M_TRIM_THRESHOLD, TRIM_ABOVE)


def pool(workers: int, mp_context: object = None, initializer: Callable[..., None] = worker_init,
         initargs: tuple = ()) -> ProcessPoolExecutor:
    """A pool of workers that die with this process: ``initializer`` is handed this process's pid first
    (``worker_init`` takes it; another initializer passes it on to ``worker_init``)."""
    from concurrent.futures import ProcessPoolExecutor  # not with this module: 12 ms of every run's start

    return ProcessPoolExecutor(max_workers=workers, mp_context=mp_context, initializer=initializer,
                               initargs=(os.getpid(), *initargs))


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and kill the workers, without waiting for what they are doing. The
    workers are taken before ``shutdown``, which forgets them: terminated after it, none was, and the
    interpreter's exit waited for their tasks to end."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()


VERBOSE_FORMAT = "%(levelname)s %(name)s: %(message)s"  # -v: each line names its logger


class PlainFormatter(logging.Formatter):
    """``warning: message`` / ``error: message``, as the CLI's own lines read."""

    def format(self, record: logging.LogRecord) -> str:
        return f"{record.levelname.lower()}: {record.getMessage()}"


def log_to_stderr(level: int, verbose: bool) -> None:
    """The CLI's logging, in its process or in a worker that logs as it does: ``level`` and up to stderr, each line
    ``warning: message`` (``verbose``: ``INFO pipeline.models: message``)."""
    logging.basicConfig(level=level, stream=sys.stderr, format=VERBOSE_FORMAT if verbose else "%(message)s")
    if not verbose:
        for handler in logging.getLogger().handlers:
            handler.setFormatter(PlainFormatter())
