"""The data dictionary ``docs/warehouse.md``, generated from the declared schema (``python -m pipeline.docs``)."""

from __future__ import annotations

import sys
from pathlib import Path

from .models import load_models
from .schema import BOOKKEEPING, MARTS, MODELS, STAGING, STAR, TEXTS, VIEWS

_BOOKKEEPING_WRITERS = {"_runs": "pipeline/runs.py", "_meta": "pipeline/warehouse.py",
                        "_source_files": "pipeline/load/state.py", "_rejects": "pipeline/load/state.py"}


def writers() -> dict[str, str]:
    """The one module or SQL file that writes each table."""
    root = Path(__file__).resolve().parent.parent
    out = {t.name: "pipeline/extract (readers), staged by pipeline/load/state.py" for t in STAGING}
    out.update({t.name: "pipeline/transform/star.py (built), pipeline/load/star.py (stored)" for t in STAR})
    out.update({m.name: str(m.path.relative_to(root)) for m in load_models() if m.layer != "macros"})
    out.update(_BOOKKEEPING_WRITERS)
    out.update({t.name: "pipeline/load/spool.py (as the rows naming it are staged)" for t in TEXTS})
    out.update({v.name: "pipeline/warehouse.py (a view)" for v in VIEWS})
    return out


def table_reference() -> str:
    out = []
    written_by = writers()
    models = [t for t in MODELS if t not in MARTS]
    for title, tables in (("Star schema (built in polars)", STAR), ("Views", VIEWS), ("Marts (sql/marts/)", MARTS),
                          ("Intermediate and report models (sql/intermediate/, sql/reports/)", models),
                          ("Bookkeeping", BOOKKEEPING), ("Staging (as read)", STAGING + TEXTS)):
        out.append(f"## {title}\n")
        for t in tables:
            out.append(f"### `{t.name}`\n\n{t.description} Grain: {t.grain}; key: "
                       f"`{', '.join(t.key)}`. Written by `{written_by[t.name]}`.\n\n"
                       "| column | type | description |\n|---|---|---|")
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
