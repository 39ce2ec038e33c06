"""The Copilot desktop app's ``~/.copilot/data.db``: each session's lifetime totals and its context-window series.

The file also holds the user's OAuth tokens (``accounts.access_token``, ``settings.github_access_token``), so it is
read under rules of its own (more-sources.md section 0):

- opened **in place, read-only**, never copied (not even into the run's scratch folder): ``mode=ro``, and
  ``immutable=1`` when no ``-wal`` is beside it (``mode=ro`` alone creates ``data.db-wal`` and ``-shm`` in the
  app's folder when they are absent). With a ``-wal`` present, a busy or locked database is skipped and tried on
  the next run;
- an SQLite authorizer allows reading only the columns of ``ALLOWED`` (and the schema probe): any other table or
  column, ``accounts`` and ``settings`` among them, is refused by SQLite itself, whatever a query asks;
- columns are probed and selected by name, never ``SELECT *``.

The totals are a lifetime snapshot per session, not requests: they become ``stg_desktop_sessions`` rows, a session's
title, model and time where no other source names them, and its usage only where nothing else records any (its
events and the store count its requests; adding both would count them twice).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from ..schema import COUNT
from .base import Context, Prior, Problems, ReadResult, Source, bigint, cap_text, reader

SOURCE_KIND = "desktop"
# the only tables and columns ever read
ALLOWED = {
    "sessions": ("id", "title", "mode", "model", "reasoning_effort", "agent", "permission_mode", "created_at",
                 "updated_at", "archived_at", "total_input_tokens", "total_output_tokens", "total_cached_tokens",
                 "total_reasoning_tokens", "total_nano_aiu", "total_agent_merge_nano_aiu",
                 "context_input_token_limit"),
    "session_context_usage": ("session_id", "ts_ms", "current_tokens", "token_limit"),
}
_TOTALS = ("total_input_tokens", "total_output_tokens", "total_cached_tokens", "total_reasoning_tokens",
           "total_nano_aiu", "total_agent_merge_nano_aiu", "context_input_token_limit")


def _authorizer(action: int, arg1: str | None, arg2: str | None, _db: str | None, _trigger: str | None) -> int:
    """SQLite's check of every table and column a statement touches: only ALLOWED ones may be read."""
    if action == sqlite3.SQLITE_READ:
        if arg1 in ("sqlite_master", "sqlite_schema"):  # the schema, as SQLite reads it to prepare a statement
            return sqlite3.SQLITE_OK
        return sqlite3.SQLITE_OK if arg2 in ALLOWED.get(arg1 or "", ()) else sqlite3.SQLITE_DENY
    if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_FUNCTION):
        return sqlite3.SQLITE_OK
    if action == sqlite3.SQLITE_PRAGMA:
        return sqlite3.SQLITE_OK if arg1 == "table_info" and arg2 in ALLOWED else sqlite3.SQLITE_DENY
    return sqlite3.SQLITE_DENY


class Busy(Exception):
    """The app's database cannot be opened without writing beside it now: tried again on the next run."""


def open_read_only(path: str) -> sqlite3.Connection:
    """The database opened in place for reading only, the authorizer in force: nothing is written beside it.
    Without a ``-wal``, ``immutable=1``; with one, only when its ``-shm`` is there too (else SQLite would create
    it in the app's folder: ``Busy``)."""
    wal = os.path.exists(path + "-wal")
    if wal and not os.path.exists(path + "-shm"):
        raise Busy("its -wal is there without its -shm")
    immutable = "" if wal else "&immutable=1"
    con = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro{immutable}", uri=True, timeout=0.5)
    con.set_authorizer(_authorizer)
    return con


def _columns(con: sqlite3.Connection, table: str) -> list[str]:
    return [r[1] for r in con.execute(f'pragma table_info("{table}")') if r[1] in ALLOWED[table]]


def _rows(con: sqlite3.Connection, table: str) -> list[dict]:
    cols = _columns(con, table)
    if not cols:
        return []
    names = ", ".join(f'"{c}"' for c in cols)
    return [dict(zip(cols, r, strict=True)) for r in con.execute(f'select {names} from "{table}"')]


def _text(v: object, ctx: Context, problems: Problems, what: str) -> str | None:
    if v is None:
        return None
    text = v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)
    return cap_text(text, ctx.max_text, what, problems)


def _iso(v: object) -> str | None:
    """A time as the app writes it (epoch milliseconds or seconds, or ISO text) as ISO-8601 UTC text."""
    from .base import epoch_ms_iso

    if isinstance(v, (int, float)) and not isinstance(v, bool):
        return epoch_ms_iso(v * 1000 if 0 < v < 1e11 else v, "a time", None)
    return v if isinstance(v, str) and v else None


@reader("desktop_db")
def read_desktop_db(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    res = ReadResult()
    try:
        con = open_read_only(source.path)
    except (sqlite3.Error, Busy) as exc:
        res.skipped_reason = f"could not be opened read-only ({exc}): tried again on the next run"
        return res
    try:
        sessions, usage = _rows(con, "sessions"), _rows(con, "session_context_usage")
    except sqlite3.OperationalError as exc:  # busy, locked, a WAL being checkpointed
        res.skipped_reason = f"busy ({exc}): tried again on the next run"
        return res
    except sqlite3.DatabaseError as exc:
        res.reject(source.path, f"not a database the app writes: {exc}")
        return res
    finally:
        con.close()
    for r in sessions:
        problems = Problems()
        sid = _text(r.get("id"), ctx, problems, "id")
        if not sid:
            res.reject(source.path, "a sessions row without an id: not read")
            continue
        row = {"session_id": sid, "source_kind": SOURCE_KIND,
               **{k: _text(r.get(k), ctx, problems, k) for k in ("title", "mode", "model", "reasoning_effort",
                                                                  "agent", "permission_mode")},
               "created_at": _iso(r.get("created_at")), "updated_at": _iso(r.get("updated_at")),
               "archived_at": _iso(r.get("archived_at")),
               **{k: bigint(r.get(k), k, problems, COUNT) for k in _TOTALS},
               "_source_path": source.path, "_run_id": ctx.run_id}
        res.add("stg_desktop_sessions", row)
        res.add("stg_session_meta", {
            "session_id": sid, "source_kind": SOURCE_KIND, "title": row["title"], "summary": None, "cwd": None,
            "git_root": None, "repository": None, "branch": None, "host_type": "desktop", "client_name": "desktop",
            "created_at": row["created_at"], "updated_at": row["updated_at"], "first_user_message": None,
            "extra": None, "_source_path": source.path, "_run_id": ctx.run_id})
        if problems:
            res.reject(source.path, f"session {sid} kept; {problems.reason()}")
    for r in usage:
        problems = Problems()
        sid = _text(r.get("session_id"), ctx, problems, "session_id")
        if sid:
            res.add("stg_desktop_context", {
                "session_id": sid, "ts_ms": bigint(r.get("ts_ms"), "ts_ms", problems, COUNT),
                "current_tokens": bigint(r.get("current_tokens"), "current_tokens", problems, COUNT),
                "token_limit": bigint(r.get("token_limit"), "token_limit", problems, COUNT),
                "_source_path": source.path, "_run_id": ctx.run_id})
    res.n_records = len(sessions) + len(usage)
    return res
