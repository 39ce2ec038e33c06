"""Reader for ``session-store.db`` (SQLite in WAL mode, written live by the CLI).

The source is never opened in place: opening it, even read-only, would take locks and write
to ``-shm``. The database and its ``-wal`` are copied to a private temp folder (the copy is
repeated if the files change while being copied) and the copy is opened, so rows committed
only in the WAL are read and the source is untouched. Tables and columns are probed with
``PRAGMA table_info``: what a given CLI version lacks reads as NULL instead of failing.
"""

from __future__ import annotations

import logging
import os
import shutil
import sqlite3
import tempfile
import time
from pathlib import Path

from .base import Context, Prior, ReadResult, Source, reader

log = logging.getLogger(__name__)

COPY_ATTEMPTS = 3


def store_fingerprint(path: str) -> tuple[str, int]:
    parts, total = [], 0
    for suffix in ("", "-wal"):
        p = path + suffix
        if os.path.exists(p):
            st = os.stat(p)
            parts.append(f"{suffix or 'db'}={st.st_size}:{st.st_mtime_ns}")
            total += st.st_size
    return ";".join(parts), total


def snapshot_copy(path: str, dest_dir: str) -> str | None:
    """Copy ``path`` and its ``-wal`` into ``dest_dir``; None if they kept changing while copied."""
    dest = os.path.join(dest_dir, "store.db")
    for attempt in range(COPY_ATTEMPTS):
        before = store_fingerprint(path)[0]
        for suffix in ("", "-wal"):
            if os.path.exists(dest + suffix):
                os.remove(dest + suffix)
            if os.path.exists(path + suffix):
                shutil.copyfile(path + suffix, dest + suffix)
        if store_fingerprint(path)[0] == before:
            return dest
        time.sleep(0.05 * (attempt + 1))
    return None


def _columns(con: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in con.execute(f'pragma table_info("{table}")')}


def _select(con, table: str, wanted: list[str], aliases: dict[str, tuple[str, ...]] | None = None):
    """Rows of ``table`` as dicts with every wanted key; columns the table lacks read as None."""
    have = _columns(con, table)
    if not have:
        return None
    exprs = []
    for w in wanted:
        cands = (w, *((aliases or {}).get(w, ())))
        col = next((c for c in cands if c in have), None)
        exprs.append(f'"{col}"' if col else "null")
    order = "rowid" if "id" not in have else '"id"'
    sql = f'select {", ".join(exprs)} from "{table}" order by {order}'
    try:
        cur = con.execute(sql)
    except sqlite3.DatabaseError:  # e.g. a WITHOUT ROWID table
        cur = con.execute(f'select {", ".join(exprs)} from "{table}"')
    return [dict(zip(wanted, row, strict=True)) for row in cur]


def _txt(v):
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


@reader("session_store")
def read_session_store(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    res = ReadResult()
    with tempfile.TemporaryDirectory(prefix="copilot-store-") as tmp:
        copy = snapshot_copy(source.path, tmp)
        if copy is None:
            res.skipped_reason = "session-store.db kept changing while being copied; skipped, will retry next run"
            return res
        try:
            con = sqlite3.connect(f"file:{Path(copy).as_posix()}?mode=ro", uri=True, timeout=2)
            try:
                con.execute("select count(*) from sqlite_master").fetchone()
                _read_tables(con, source, ctx, res)
            finally:
                con.close()
        except sqlite3.DatabaseError as exc:
            msg = str(exc)
            if "locked" in msg or "busy" in msg:
                res.skipped_reason = f"session-store.db is busy ({msg}); skipped, will retry next run"
            else:
                res.reject(source.path, f"session-store.db could not be read: {msg}")
            return res
    res.n_records = sum(len(v) for v in res.rows.values())
    return res


def _read_tables(con, source: Source, ctx: Context, res: ReadResult) -> None:
    r, path, run = ctx.redact, source.path, ctx.run_id
    missing = []

    rows = _select(con, "sessions", ["id", "cwd", "repository", "host_type", "branch", "summary",
                                     "created_at", "updated_at"])
    if rows is None:
        missing.append("sessions")
    for row in rows or []:
        if not row["id"]:
            res.reject(path, "sessions row without id", excerpt=str(row)[:200])
            continue
        res.add("stg_session_meta", {
            "session_id": _txt(row["id"]), "source_kind": "store", "title": None,
            "summary": r(_txt(row["summary"])), "cwd": _txt(row["cwd"]), "git_root": None,
            "repository": _txt(row["repository"]), "branch": _txt(row["branch"]),
            "host_type": _txt(row["host_type"]), "client_name": None,
            "created_at": _txt(row["created_at"]), "updated_at": _txt(row["updated_at"]),
            "first_user_message": None, "extra": None, "_source_path": path, "_run_id": run})

    rows = _select(con, "turns", ["session_id", "turn_index", "user_message", "assistant_response", "timestamp"],
                   {"timestamp": ("created_at",)})
    if rows is None:
        missing.append("turns")
    for row in rows or []:
        res.add("stg_store_turns", {
            "session_id": _txt(row["session_id"]), "turn_index": _int(row["turn_index"]),
            "user_message": r(_txt(row["user_message"])), "assistant_response": r(_txt(row["assistant_response"])),
            "ts": _txt(row["timestamp"]), "_source_path": path, "_run_id": run})

    cols = ["session_id", "checkpoint_number", "title", "overview", "history", "work_done", "technical_details",
            "important_files", "next_steps", "created_at"]
    rows = _select(con, "checkpoints", cols)
    if rows is None:
        missing.append("checkpoints")
    for row in rows or []:
        out = {k: (r(_txt(row[k])) if k not in ("checkpoint_number", "session_id", "created_at") else row[k])
               for k in cols}
        out.update({"session_id": _txt(row["session_id"]), "checkpoint_number": _int(row["checkpoint_number"]),
                    "created_at": _txt(row["created_at"]), "source_kind": "store",
                    "_source_path": path, "_run_id": run})
        res.add("stg_checkpoints", out)

    rows = _select(con, "session_files", ["session_id", "file_path", "tool_name", "turn_index", "first_seen_at"])
    if rows is None:
        missing.append("session_files")
    for row in rows or []:
        res.add("stg_store_files", {
            "session_id": _txt(row["session_id"]), "file_path": _txt(row["file_path"]),
            "tool_name": _txt(row["tool_name"]), "turn_index": _int(row["turn_index"]),
            "first_seen_at": _txt(row["first_seen_at"]), "_source_path": path, "_run_id": run})

    rows = _select(con, "session_refs", ["session_id", "ref_type", "ref_value", "turn_index", "created_at"])
    if rows is None:
        missing.append("session_refs")
    for row in rows or []:
        res.add("stg_store_refs", {
            "session_id": _txt(row["session_id"]), "ref_type": _txt(row["ref_type"]),
            "ref_value": _txt(row["ref_value"]), "turn_index": _int(row["turn_index"]),
            "created_at": _txt(row["created_at"]), "_source_path": path, "_run_id": run})

    rows = _select(con, "assistant_usage_events",
                   ["id", "session_id", "model", "input_tokens", "output_tokens", "cache_read_tokens",
                    "cache_write_tokens", "reasoning_tokens", "created_at"])
    if rows is None:
        missing.append("assistant_usage_events")
    for i, row in enumerate(rows or []):
        res.add("stg_store_usage", {
            "row_id": _int(row["id"]) if row["id"] is not None else i, "session_id": _txt(row["session_id"]),
            "model": _txt(row["model"]), "input_tokens": _int(row["input_tokens"]),
            "output_tokens": _int(row["output_tokens"]), "cache_read_tokens": _int(row["cache_read_tokens"]),
            "cache_write_tokens": _int(row["cache_write_tokens"]),
            "reasoning_tokens": _int(row["reasoning_tokens"]), "created_at": _txt(row["created_at"]),
            "_source_path": path, "_run_id": run})

    # search_index holds turns and checkpoints again (already read above); workspace artifacts exist only here
    try:
        cur = con.execute("select content, session_id, source_id from search_index "
                          "where source_type = 'workspace_artifact' order by rowid")
        for content, sid, source_id in cur:
            res.add("stg_documents", {
                "session_id": _txt(sid), "kind": "workspace_artifact",
                "path": f"session-store.db/search_index/{_txt(source_id) or ''}",
                "content": r(_txt(content)), "_source_path": path, "_run_id": run})
    except sqlite3.DatabaseError as exc:
        if "no such" in str(exc):
            missing.append("search_index")
        else:
            raise
    if missing:
        log.info("%s: tables not present in this store version: %s", path, ", ".join(missing))


def _int(v):
    if v is None or isinstance(v, int):
        return v
    try:
        return int(float(v))
    except (TypeError, ValueError):
        return None
