"""Worker processes that never outlive their parent and never answer Ctrl-C themselves."""

from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor


def worker_init() -> None:
    """A worker process ignores Ctrl-C (the main process handles it, once) and dies with its
    parent: killed on Linux when the parent dies (prctl), and on any system when it sees that its
    parent is gone (a watchdog thread), so no worker outlives a killed ingest."""
    import signal
    import threading
    import time

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    parent = os.getppid()
    try:
        import ctypes

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass

    def watch() -> None:
        while True:
            if os.getppid() != parent:
                os._exit(1)
            time.sleep(1)

    threading.Thread(target=watch, daemon=True, name="parent-watch").start()


def stop_pool(pool: ProcessPoolExecutor) -> None:
    """Cancel what has not started and kill the workers, without waiting for what they are doing. The
    workers are taken before ``shutdown``, which forgets them: terminated after it, none was, and the
    interpreter's exit waited for their tasks to end."""
    processes = list((getattr(pool, "_processes", None) or {}).values())
    pool.shutdown(wait=False, cancel_futures=True)
    for process in processes:
        process.terminate()
