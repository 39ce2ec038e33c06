"""Worker processes that never outlive their parent and never answer Ctrl-C themselves."""

from __future__ import annotations

import os
from collections.abc import Callable
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
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
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


def pool(workers: int, mp_context: object = None, initializer: Callable[..., None] = worker_init,
         initargs: tuple = ()) -> ProcessPoolExecutor:
    """A pool of workers that die with this process: ``initializer`` is handed this process's pid first
    (``worker_init`` takes it; another initializer passes it on to ``worker_init``)."""
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
