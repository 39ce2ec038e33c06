"""Data checks: each is a SELECT of offending rows (0 rows = pass), run on every ingest.

Key checks (unique and not null) are derived from the declared keys in ``schema.py``; the
hand-written ones live in ``sql/checks/*.sql`` and run in file-name order.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path

from .schema import MODELS, STAR

log = logging.getLogger(__name__)

CHECKS_DIR = Path(__file__).resolve().parent.parent / "sql" / "checks"
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


def key_check_sql(table: str, key: tuple[str, ...]) -> str:
    cols = ", ".join(f'"{k}"' for k in key)
    nulls = " or ".join(f'"{k}" is null' for k in key)
    return (f'select {cols}, count(*) as n_rows from "{table}" group by {cols} '
            f"having count(*) > 1 or {nulls}")


def all_checks(checks_dir: Path = CHECKS_DIR) -> list[tuple[str, str]]:
    out = [(f"unique_key_{t.name}", key_check_sql(t.name, t.key)) for t in STAR + MODELS]
    for path in sorted(checks_dir.glob("*.sql")):
        out.append((path.stem, path.read_text(encoding="utf-8")))
    return out


def run_checks(con, checks_dir: Path = CHECKS_DIR) -> list[CheckFailure]:
    failures = []
    checks = all_checks(checks_dir)
    bodies = [sql.strip().rstrip(";") for _name, sql in checks]
    # one query counts the offending rows of every check (one plan, one round trip); the rows of
    # a check that fails are fetched after
    counts = con.execute(" union all ".join(f"select {i} as i, count(*) as n from ({body})"
                                            for i, body in enumerate(bodies))).fetchall()
    for i, n in sorted(counts):
        if n:
            rel = con.sql(f"select * from ({bodies[i]})")
            failures.append(CheckFailure(checks[i][0], n, rel.columns, rel.limit(SHOW_ROWS).fetchall()))
    log.info("%d checks run, %d failed", len(checks), len(failures))
    return failures
