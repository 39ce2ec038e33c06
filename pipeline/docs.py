"""The table reference in README.md, generated from the declared schema (``python -m pipeline.docs``)."""

from __future__ import annotations

import re
import sys
from pathlib import Path

from .schema import BOOKKEEPING, MODELS, STAGING, STAR

BEGIN, END = "<!-- tables:begin -->", "<!-- tables:end -->"


def table_reference() -> str:
    out = []
    for title, tables in (("Star schema", STAR), ("SQL models (sql/)", MODELS), ("Bookkeeping", BOOKKEEPING),
                          ("Staging (as read)", STAGING)):
        out.append(f"### {title}\n")
        for t in tables:
            out.append(f"#### `{t.name}`\n\n{t.description} Grain: {t.grain}; key: "
                       f"`{', '.join(t.key)}`.\n\n| column | type | description |\n|---|---|---|")
            out.extend(f"| `{c.name}` | {c.type} | {_cell(c.description)} |" for c in t.columns)
            out.append("")
    return "\n".join(out).rstrip() + "\n"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def update_readme(path: Path) -> bool:
    text = path.read_text(encoding="utf-8")
    new = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _m: f"{BEGIN}\n{table_reference()}{END}",
                 text, flags=re.S)
    if new != text:
        path.write_text(new, encoding="utf-8")
    return new != text


if __name__ == "__main__":
    readme = Path(sys.argv[1]) if len(sys.argv) > 1 else Path("README.md")
    print(f"{readme}: {'updated' if update_readme(readme) else 'already current'}")
