"""DuckDB extensions from their wheels, never from the network.

The ``duckdb-extension-*`` packages on the package index carry one extension file each, built for
one DuckDB version (1.5.5 here, which is why DuckDB is pinned to it). DuckDB finds an extension in
``<extension_directory>/v<version>/<platform>/<name>.duckdb_extension``; this module lays such a
folder out with links to the wheels' files (under the user's cache folder) and every connection is
opened with it and with automatic installation off, so ``LOAD ducklake`` (or an ``ATTACH
'ducklake:postgres:...'`` that needs the postgres scanner) loads from disk or fails - it never
downloads.
"""

from __future__ import annotations

import importlib.util
import os
import tempfile
from pathlib import Path

import duckdb

# wheel package -> the extension's name inside DuckDB (the file name DuckDB looks for)
WHEELS = {"duckdb_extension_ducklake": "ducklake", "duckdb_extension_postgres": "postgres_scanner",
          "duckdb_extension_sqlite": "sqlite_scanner", "duckdb_extension_fts": "fts"}


class ExtensionError(Exception):
    """An extension's wheel is not installed (or not for this DuckDB)."""


def _cache_root() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "copilot-warehouse" / "duckdb-extensions"


def _platform() -> str:
    con = duckdb.connect()
    try:
        return con.execute("pragma platform").fetchone()[0]
    finally:
        con.close()


_DIR: list[str] = []


def extension_directory() -> str:
    """The folder of links to the installed wheels' extension files (made once per process)."""
    if _DIR:
        return _DIR[0]
    for root in (_cache_root(), Path(tempfile.gettempdir()) / f"copilot-warehouse-{os.getuid()}-duckdb-extensions"):
        folder = root / f"v{duckdb.__version__}" / _platform()
        try:
            folder.mkdir(parents=True, exist_ok=True)
            for package, name in WHEELS.items():
                spec = importlib.util.find_spec(package)
                if spec is None or spec.origin is None:
                    continue
                found = sorted(Path(spec.origin).parent.glob(f"extensions/v{duckdb.__version__}/*.duckdb_extension"))
                link = folder / f"{name}.duckdb_extension"
                if found and (not link.exists() or link.resolve() != found[0].resolve()):
                    tmp = folder / f".{name}.{os.getpid()}.tmp"
                    tmp.unlink(missing_ok=True)
                    tmp.symlink_to(found[0])
                    tmp.replace(link)
        except OSError:
            continue  # a read-only home: the temp folder
        _DIR.append(str(root))
        return str(root)
    raise ExtensionError("no folder to lay the DuckDB extensions out in (cache and temp folders not writable)")


def config() -> dict[str, object]:
    """DuckDB connection settings: extensions from the wheels only."""
    return {"extension_directory": extension_directory(), "autoinstall_known_extensions": False,
            "autoload_known_extensions": True}


def load(con: duckdb.DuckDBPyConnection, *names: str) -> None:
    """Load extensions (``ducklake``, ``postgres_scanner``, ``sqlite_scanner``, ``fts``) from the wheels."""
    for name in names:
        try:
            con.execute(f"load {name}")
        except duckdb.Error as exc:
            package = next((p for p, n in WHEELS.items() if n == name), name)
            raise ExtensionError(f"DuckDB extension {name} is not available: install "
                                 f"{package.replace('_', '-')}=={duckdb.__version__} ({str(exc).splitlines()[0]})"
                                 ) from exc
