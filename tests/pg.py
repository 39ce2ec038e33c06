"""A throwaway PostgreSQL server on 127.0.0.1 for the team-mode tests (stdlib only).

    python3 tests/pg.py start DIR   # initdb in DIR, start on a free port, print the catalog string
    python3 tests/pg.py stop DIR

``.ci/run`` starts one and exports ``COPILOT_TEST_POSTGRES``; without it, the tests start their own
when PostgreSQL's binaries are installed (and skip otherwise).
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path


def binaries() -> Path | None:
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if found:
        return Path(found[-1]).parent
    initdb = shutil.which("initdb")
    return Path(initdb).parent if initdb else None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _as_owner(cmd: list[str]) -> list[str]:
    """PostgreSQL refuses to run as root: as root, run it as the `postgres` user."""
    return ["runuser", "-u", "postgres", "--", *cmd] if os.geteuid() == 0 else cmd


def start(folder: str | Path) -> str:
    """Start a server with its data under ``folder``; returns the catalog string for ``--lake``."""
    bin_dir = binaries()
    if bin_dir is None:
        raise RuntimeError("PostgreSQL is not installed (initdb not found)")
    folder = Path(folder).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        shutil.chown(folder, "postgres")
    port = _free_port()
    subprocess.run(_as_owner([str(bin_dir / "initdb"), "-D", str(folder / "data"), "-A", "trust", "-U", "postgres",
                              "--no-sync"]), check=True, capture_output=True)
    subprocess.run(_as_owner([str(bin_dir / "pg_ctl"), "-D", str(folder / "data"), "-l", str(folder / "log"), "-w",
                              "-o", f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off", "start"]),
                   check=True, capture_output=True)
    (folder / "port").write_text(str(port))
    for _ in range(50):
        if subprocess.run([str(bin_dir / "pg_isready"), "-h", "127.0.0.1", "-p", str(port)],
                          capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    return f"postgres:host=127.0.0.1 port={port} user=postgres"


def stop(folder: str | Path) -> None:
    bin_dir = binaries()
    folder = Path(folder).resolve()
    if bin_dir and (folder / "data").is_dir():
        subprocess.run(_as_owner([str(bin_dir / "pg_ctl"), "-D", str(folder / "data"), "-m", "immediate", "stop"]),
                       capture_output=True)


def create_database(server: str, name: str) -> str:
    """A new empty database on ``server`` (a catalog string without dbname); returns its catalog string."""
    parts = dict(p.split("=", 1) for p in server.split(":", 1)[1].split())
    bin_dir = binaries()
    createdb = str(bin_dir / "createdb") if bin_dir else "createdb"
    subprocess.run([createdb, "-h", parts.get("host", "127.0.0.1"), "-p", parts.get("port", "5432"),
                    "-U", parts.get("user", "postgres"), name], check=True, capture_output=True)
    return f"{server} dbname={name}"


if __name__ == "__main__":
    verb, where = sys.argv[1], sys.argv[2]
    if verb == "start":
        print(start(where))
    else:
        stop(where)
