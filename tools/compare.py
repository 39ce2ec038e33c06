"""Compare two warehouses table by table (EXCEPT ALL both ways): the proof a behaviour-preserving change
leaves every table as it was.

    python -m tools.compare OLD.duckdb NEW.duckdb [--skip-columns a,b] [--skip-tables t1,t2]

Prints one line per table that differs (rows only in OLD, rows only in NEW) and exits 1 when any does;
``_runs`` and run ids are skipped (they differ on every run). A table or column in one warehouse only
is named too.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import duckdb

SKIP_TABLES = {"_runs"}
SKIP_COLUMNS = {"_run_id", "last_run_id"}


def differences(a: Path, b: Path, skip_tables: set[str] = frozenset(), skip_columns: set[str] = frozenset()
                ) -> list[str]:
    """Readable lines, one per table whose rows differ between the warehouses ``a`` and ``b``."""
    con = duckdb.connect()
    con.execute(f"attach '{str(a).replace(chr(39), chr(39) * 2)}' as a (read_only)")
    con.execute(f"attach '{str(b).replace(chr(39), chr(39) * 2)}' as b (read_only)")
    skip_tables, skip_columns = SKIP_TABLES | set(skip_tables), SKIP_COLUMNS | set(skip_columns)
    out = []
    try:
        def tables(db: str) -> set[str]:
            return {r[0] for r in con.execute("select table_name from information_schema.tables where "
                                              "table_catalog = ? and table_type = 'BASE TABLE'", [db]).fetchall()}

        def columns(db: str, t: str) -> list[str]:
            return [r[0] for r in con.execute("select column_name from information_schema.columns where "
                                              "table_catalog = ? and table_name = ? order by ordinal_position",
                                              [db, t]).fetchall()]
        ta, tb = tables("a"), tables("b")
        out += [f"{t}: only in {a}" for t in sorted(ta - tb)] + [f"{t}: only in {b}" for t in sorted(tb - ta)]
        for t in sorted(ta & tb - skip_tables):
            ca, cb = columns("a", t), columns("b", t)
            if set(ca) != set(cb):
                out.append(f"{t}: columns differ ({sorted(set(ca) ^ set(cb))})")
            sel = ", ".join(f'"{c}"' for c in ca if c in cb and c not in skip_columns)
            only_a = con.execute(f'select count(*) from (select {sel} from a."{t}" except all '
                                 f'select {sel} from b."{t}")').fetchone()[0]
            only_b = con.execute(f'select count(*) from (select {sel} from b."{t}" except all '
                                 f'select {sel} from a."{t}")').fetchone()[0]
            if only_a or only_b:
                out.append(f"{t}: {only_a} rows only in the first, {only_b} only in the second")
    finally:
        con.close()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.compare", description=__doc__.split("\n\n")[0])
    ap.add_argument("first", type=Path)
    ap.add_argument("second", type=Path)
    ap.add_argument("--skip-columns", default="", help="comma-separated columns to leave out of every table")
    ap.add_argument("--skip-tables", default="", help="comma-separated tables to leave out")
    args = ap.parse_args(argv)
    diffs = differences(args.first, args.second, {t for t in args.skip_tables.split(",") if t},
                        {c for c in args.skip_columns.split(",") if c})
    for line in diffs:
        print(line)
    print("identical" if not diffs else f"{len(diffs)} tables differ", file=sys.stderr)
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
