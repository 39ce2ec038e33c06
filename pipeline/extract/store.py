"""Reader for ``session-store.db`` (SQLite in WAL mode, written live by the CLI).

The source is never opened in place: opening it, even read-only, would take locks and write
to ``-shm``. The database and its ``-wal`` are copied to a private temp folder (the copy is
repeated if the files change while being copied) and the copy is opened, so rows committed
only in the WAL are read and the source is untouched. Tables and columns are probed with
``PRAGMA table_info``: what a given CLI version lacks reads as NULL instead of failing.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import sqlite3
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from ..schema import COUNT, INT64, TABLES
from .base import Context, Prior, Problems, ReadResult, Source, bigint, cap_text, integer, reader

log = logging.getLogger(__name__)

COPY_ATTEMPTS = 3


def store_fingerprint(path: str, st: os.stat_result | None = None) -> tuple[str, int]:
    """Size and mtime of the store and of its write-ahead log; ``st``: the store's stat if it was just taken."""
    parts, total = [], 0
    for suffix in ("", "-wal"):
        p = path + suffix
        if suffix == "" and st is not None:
            found: os.stat_result | None = st
        else:
            found = os.stat(p) if os.path.exists(p) else None
        if found is not None:
            parts.append(f"{suffix or 'db'}={found.st_size}:{found.st_mtime_ns}")
            total += found.st_size
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


def _select(con: sqlite3.Connection, table: str, wanted: list[str], aliases: dict[str, tuple[str, ...]] | None = None):
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


def _txt(v: object):
    if v is None:
        return None
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def read_snapshot(source: Source, res: ReadResult, label: str, read: Callable[[sqlite3.Connection], None],
                  ctx: Context | None = None) -> None:
    """Run ``read`` on a read-only copy of a live SQLite database and its WAL. A database that keeps
    changing or is busy is skipped (retried next run); one that cannot be read is a file reject.

    The copy holds unredacted text: it is made in the run's private scratch folder (next to the
    warehouse, removed when the run ends and, after a crash, by the next run), never elsewhere."""
    with tempfile.TemporaryDirectory(prefix="sqlite-", dir=ctx.scratch if ctx else None) as tmp:
        copy = snapshot_copy(source.path, tmp)
        if copy is None:
            res.skipped_reason = f"{label} kept changing while being copied; skipped, will retry next run"
            return
        try:
            con = sqlite3.connect(f"file:{Path(copy).as_posix()}?mode=ro", uri=True, timeout=2)
            # a text column that is not valid UTF-8 reads with U+FFFD instead of failing the table
            con.text_factory = lambda b: b.decode("utf-8", "replace")
            try:
                con.execute("select count(*) from sqlite_master").fetchone()
                read(con)
            finally:
                con.close()
        except sqlite3.DatabaseError as exc:
            msg = str(exc)
            if "locked" in msg or "busy" in msg:
                res.skipped_reason = f"{label} is busy ({msg}); skipped, will retry next run"
            else:
                res.reject(source.path, f"{label} could not be read: {msg}")


@reader("session_store")
def read_session_store(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    res = ReadResult()
    read_snapshot(source, res, "session-store.db", lambda con: _read_tables(con, source, ctx, res), ctx)
    res.n_records = sum(len(v) for v in res.rows.values())
    return res


# source table -> (staging table, {staging column: source column}, fallbacks for renamed source columns)
_COPIES = [
    ("sessions", "stg_session_meta",
     {"session_id": "id", "summary": "summary", "cwd": "cwd", "repository": "repository", "branch": "branch",
      "host_type": "host_type", "created_at": "created_at", "updated_at": "updated_at"}, {}),
    ("turns", "stg_store_turns",
     {"session_id": "session_id", "turn_index": "turn_index", "user_message": "user_message",
      "assistant_response": "assistant_response", "ts": "timestamp"}, {"timestamp": ("created_at",)}),
    ("checkpoints", "stg_checkpoints",
     {c: c for c in ("session_id", "checkpoint_number", "title", "overview", "history", "work_done",
                     "technical_details", "important_files", "next_steps", "created_at")}, {}),
    ("session_files", "stg_store_files",
     {c: c for c in ("session_id", "file_path", "tool_name", "turn_index", "first_seen_at")}, {}),
    ("session_refs", "stg_store_refs",
     {c: c for c in ("session_id", "ref_type", "ref_value", "turn_index", "created_at")}, {}),
    ("assistant_usage_events", "stg_store_usage",
     {"row_id": "id", "token_details": "token_details_json",
      **{c: c for c in ("session_id", "model", "input_tokens", "output_tokens", "cache_read_tokens",
                        "cache_write_tokens", "reasoning_tokens", "total_nano_aiu", "request_multiplier",
                        "turn_index", "agent_id", "parent_tool_call_id", "initiator", "duration_ms",
                        "time_to_first_token_ms", "finish_reason", "copilot_usage_model", "reasoning_effort",
                        "created_at")}}, {}),
]
_CONSTANTS = {"stg_session_meta": {"source_kind": "store"}, "stg_checkpoints": {"source_kind": "store"}}


def _read_tables(con: sqlite3.Connection, source: Source, ctx: Context, res: ReadResult) -> None:
    """Every row of the tables the store has, converted to its staging columns one by one: a value
    out of range for its column is NULL (noted), a row that cannot be converted a reject of its own.
    (Every text is redacted as the rows are stored: see parallel._redact_rows.)"""
    missing = []
    for table, stg, mapping, aliases in _COPIES:
        try:
            rows = _select(con, table, list(mapping.values()), aliases)
        except sqlite3.DatabaseError as exc:
            res.reject(source.path, f"table {table} could not be read: {exc}", line=None)
            continue
        if rows is None:
            missing.append(table)
            continue
        types = {c.name: c.type for c in TABLES[stg].columns}
        for i, row in enumerate(rows):
            problems = Problems()
            try:
                out = _row(row, mapping, types, problems, ctx)
                if out.get("session_id") is None:
                    raise ValueError("it has no session id")
            except Exception as exc:  # noqa: BLE001 - a value of any type in any column
                res.reject(source.path, f"{table} row {i + 1} could not be read: {exc}", excerpt=ctx.excerpt(
                    repr(row)))
                continue
            if problems:
                res.reject(source.path, f"{table} row {i + 1} kept; {problems.reason()}",
                           excerpt=ctx.excerpt(repr(row)))
            if stg == "stg_store_usage" and out["row_id"] is None:
                out["row_id"] = i
            out.update(_CONSTANTS.get(stg, {}), _source_path=source.path, _run_id=ctx.run_id)
            res.add(stg, out)
    path, run = source.path, ctx.run_id

    # search_index holds turns and checkpoints again (already read above); workspace artifacts exist only here
    try:
        cur = con.execute("select content, session_id, source_id from search_index "
                          "where source_type = 'workspace_artifact' order by rowid")
        for content, sid, source_id in cur:
            res.add("stg_documents", {
                "session_id": _txt(sid), "kind": "workspace_artifact",
                "path": f"session-store.db/search_index/{_txt(source_id) or ''}",
                "content": cap_text(_txt(content) or "", ctx.max_text, "content", None) if content is not None
                else None, "_source_path": path, "_run_id": run})
    except sqlite3.DatabaseError as exc:
        if "no such" in str(exc):
            missing.append("search_index")
        else:
            res.reject(path, f"search_index could not be read: {exc}")
    if missing:
        log.info("%s: tables not present in this store version: %s", path, ", ".join(missing))


def _row(row: dict, mapping: dict[str, str], types: dict[str, str], problems: Problems, ctx: Context) -> dict:
    out = {}
    for col, src_col in mapping.items():
        v = row[src_col]
        if types[col] == "INTEGER":
            out[col] = integer(v, f"{src_col}", problems)
        elif types[col] == "BIGINT":
            counted = col.endswith("_tokens") or col == "total_nano_aiu"
            out[col] = bigint(v, f"{src_col}", problems, COUNT if counted else INT64)
        elif types[col] == "DOUBLE":
            out[col] = _float(v, src_col, problems)
        else:
            text = _txt(v)
            out[col] = cap_text(text, ctx.max_text, src_col, problems) if text is not None else None
    return out


def _float(v: object, what: str, problems: Problems):
    if v is None or isinstance(v, bool):
        return None
    try:
        f = float(v)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(f):
        problems.note(f"{what} = {v} is not a finite number (set to NULL)")
        return None
    return f


@reader("orphan_wal")
def read_orphan_wal(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    """A ``session-store.db-wal`` whose database is gone: its pages cannot be read without it."""
    res = ReadResult()
    res.reject(source.path, "session-store.db-wal without its session-store.db: the write-ahead log cannot be "
                            "read on its own (copy the database beside it to read its rows)")
    return res
