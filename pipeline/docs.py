"""The data dictionary ``docs/warehouse.md``, generated from the declared schema (``python -m pipeline.docs``)."""

from __future__ import annotations

import sys
from pathlib import Path

from .schema import BOOKKEEPING, MODELS, STAGING, STAR


def table_reference() -> str:
    out = []
    for title, tables in (("Star schema", STAR), ("SQL models (sql/)", MODELS), ("Bookkeeping", BOOKKEEPING),
                          ("Staging (as read)", STAGING)):
        out.append(f"## {title}\n")
        for t in tables:
            out.append(f"### `{t.name}`\n\n{t.description} Grain: {t.grain}; key: "
                       f"`{', '.join(t.key)}`.\n\n| column | type | description |\n|---|---|---|")
            out.extend(f"| `{c.name}` | {c.type} | {_cell(c.description)} |" for c in t.columns)
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


HEADER = """# Warehouse data dictionary

Generated from `pipeline/schema.py` by `python -m pipeline.docs`; do not edit by hand. The same
descriptions are DuckDB comments (`select * from duckdb_columns() where comment is not null`),
so BI tools that read them show them. Timestamps are UTC (`TIMESTAMPTZ`). Every `dim_`, `fct_` and
`report_` table is also written as `parquet/<table>.parquet` by `python -m pipeline report`. The
section on usage and cost comes from `docs/usage-and-cost.md`.

"""


# hand-written sections the dictionary includes before the table reference (what a figure means)
SECTIONS = [Path(__file__).resolve().parent.parent / "docs" / "usage-and-cost.md"]


def dictionary() -> str:
    return HEADER + "".join(p.read_text(encoding="utf-8") for p in SECTIONS) + table_reference()


def write_dictionary(path: Path) -> bool:
    text = dictionary()
    old = path.read_text(encoding="utf-8") if path.is_file() else None
    if old != text:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return old != text


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("docs/warehouse.md")
    print(f"{target}: {'updated' if write_dictionary(target) else 'already current'}")
