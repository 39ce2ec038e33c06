"""Data checks: each is a SELECT of offending rows (0 rows = pass), run on every ingest.

Key checks (unique and not null) are derived from the declared keys in ``schema.py``; the
hand-written ones live in ``sql/checks/*.sql`` and run in file-name order.

``CHECKS_DIR`` (None: ``sql/checks`` of this repository) is read when the checks run, so a test
can point it elsewhere.
"""

from __future__ import annotations

import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path

import duckdb

from .models import load_models, sql_dir
from .schema import MODELS, STAR
from .warehouse import key_table

log = logging.getLogger(__name__)

CHECKS_DIR: Path | None = None
SHOW_ROWS = 10


@dataclass
class CheckFailure:
    name: str
    n_rows: int
    columns: list[str]
    rows: list[tuple]

    def describe(self) -> str:
        lines = [f"check {self.name} failed: {self.n_rows} offending rows", "  " + " | ".join(self.columns)]
        lines += ["  " + " | ".join(map(str, r)) for r in self.rows]
        return "\n".join(lines)


class ChecksFailed(Exception):
    def __init__(self, failures: list[CheckFailure]):
        self.failures = failures
        super().__init__("\n".join(f.describe() for f in failures))

    def __reduce__(self) -> tuple:  # raised in a worker process: pickled with its failures, not its message
        return ChecksFailed, (self.failures,)


def key_check_sql(table: str, key: tuple[str, ...], rows: str | None = None) -> str:
    """Offending rows of a key: duplicates and nulls (``rows``: a subquery to check instead of the table)."""
    cols = ", ".join(f'"{k}"' for k in key)
    nulls = " or ".join(f'"{k}" is null' for k in key)
    source = rows or f'"{table}"'
    return f"select {cols}, count(*) as n_rows from {source} group by {cols} having count(*) > 1 or {nulls}"


def reads_star_alone(sql: str) -> bool:
    """Whether a check's SQL reads star tables only (no model): the tables after FROM and JOIN, less the
    names its WITH defines."""
    defined = set(re.findall(r"\b([a-z_][a-z0-9_]*)\s+as\s*\(", sql, re.IGNORECASE))
    read = set(re.findall(r"\b(?:from|join)\s+([a-z_][a-z0-9_]*)", sql, re.IGNORECASE)) - defined
    return bool(read) and read <= {t.name for t in STAR}


def all_checks(checks_dir: Path | None = None, *, scoped: bool = False) -> list[tuple[str, str]]:
    """Every check as (name, SQL). ``scoped``: the keys of the star tables and the per-session models are
    checked on the rows of the sessions in the temporary table ``_check_scope`` (and the rows of no session)
    only. The other sessions' rows are as the run that wrote them checked them: a run replaces a session's
    rows whole, and no such key spans two sessions (each includes the session or a document id made from
    it). The per-project models, a row per project and term or file, are checked whole."""
    checks_dir = checks_dir or CHECKS_DIR or sql_dir() / "checks"
    narrowed = set()
    if scoped:
        narrowed = {m.name for m in load_models() if m.incremental == "session_id"}
        narrowed |= {t.name for t in STAR if "session_id" in t.key}
    out = []
    for t in STAR + MODELS:
        rows = None
        if t.name in narrowed:  # two scans: one with `is null or in (...)` reads every row's session id
            rows = (f'(select * from "{t.name}" where session_id in (select key from _check_scope) '
                    f'union all select * from "{t.name}" where session_id is null)')
        out.append((f"unique_key_{t.name}", key_check_sql(t.name, t.key, rows)))
    for path in sorted(checks_dir.glob("*.sql")):
        out.append((path.stem, path.read_text(encoding="utf-8")))
    return out


def run_checks(con: duckdb.DuckDBPyConnection, checks_dir: Path | None = None, *,
               sessions: list[str] | None = None, together: bool = True,
               models_only: bool = False) -> list[CheckFailure]:
    """Run every check; ``sessions`` (an incremental ingest's changed sessions) narrows the key
    checks of the star tables and the per-session models to their rows (see ``all_checks``).
    ``together``: every check in one query (one plan, one round trip); else one query each, so that
    what DuckDB holds at once is one check's (the lake's refresh: its checks read the whole lake, and
    43 of them at once ran out of 512 MB at 1,000 machines). ``models_only``: the checks that read a
    model (the lake's refresh: its star tables are the rows of warehouses whose ingests checked them,
    and checking the whole lake's star again took 1.4 of a one-session refresh's 9.8 s at 1,000
    machines)."""
    failures = []
    scoped = sessions is not None
    if scoped:
        key_table(con, "_check_scope", sessions)  # a table, not a list parameter (see key_table)
    checks = all_checks(checks_dir, scoped=scoped)
    if models_only:
        star = {f"unique_key_{t.name}" for t in STAR}
        checks = [(name, sql) for name, sql in checks if name not in star and not reads_star_alone(sql)]
    bodies = [sql.strip().rstrip(";") for _name, sql in checks]
    # one query counts the offending rows of every check (one plan, one round trip); the rows of
    # a check that fails are fetched after
    queries = [f"select {i} as i, count(*) as n from ({body})" for i, body in enumerate(bodies)]
    if together:
        counts = con.execute(" union all ".join(queries)).fetchall()
    else:
        counts = []
        for query in queries:
            t = time.perf_counter()
            counts += con.execute(query).fetchall()
            log.debug("check %s: %.2fs", checks[counts[-1][0]][0], time.perf_counter() - t)
    for i, n in sorted(counts):
        if n:
            rel = con.sql(f"select * from ({bodies[i]})")
            failures.append(CheckFailure(checks[i][0], n, rel.columns, rel.limit(SHOW_ROWS).fetchall()))
    if scoped:
        con.execute("drop table _check_scope")
    log.info("%d checks run, %d failed", len(checks), len(failures))
    return failures
