"""The site's static search index read as its page (``pipeline/site/static/search.js``) reads it, in Python: for
tests that compare two indexes by what they find, not by their bytes (a report after a change appends documents
at new positions; one written anew has them in order)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from pipeline.site.search import SEARCH_DIR, shard_of


def _handed(path: Path) -> object:
    """What a script of the index hands the page: its last argument, as JSON."""
    text = path.read_text(encoding="utf-8")
    inner = text[text.index("(") + 1:text.rindex(")")]
    return json.loads(inner[inner.index(",") + 1:] if path.name != "ranks.js" else inner)


def static_search(site: Path, terms: list[str], limit: int = 50) -> list[tuple]:
    """The results of ``terms`` (already tokenized) as search.js ranks them: BM25 over the live postings, best
    first by the score rounded to 4 places, ties by kind, session and place (``ranks.js``); (kind, url, title,
    date, snippet, project, score) each."""
    index = site / SEARCH_DIR
    text = (index / "index.js").read_text(encoding="utf-8")
    meta = json.loads(text.split("=", 1)[1].rstrip(";\n"))
    ranks = _handed(index / "ranks.js")
    scores: dict[int, float] = {}
    for term in dict.fromkeys(terms):
        part = _handed(index / f"terms-{shard_of(term, meta['shards'])}.js")
        post = part.get(term) or []
        live = [(post[k], post[k + 1], post[k + 2]) for k in range(0, len(post), 3)
                if meta["doc_kinds"][post[k]] != "-"]
        if not live:
            continue
        idf = math.log(1 + (meta["live"] - len(live) + 0.5) / (len(live) + 0.5))
        for i, tf, length in live:
            scores[i] = scores.get(i, 0) + idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / meta["avg_terms"]))
    width = meta["rank_width"]
    best = sorted(scores, key=lambda i: (-math.floor(scores[i] * 1e4 + 0.5), int(ranks[i * width:(i + 1) * width], 36)))
    out = []
    for i in best[:limit]:
        doc = _handed(index / f"docs-{i // meta['chunk']}.js")[i % meta["chunk"]]
        out.append((*doc, round(scores[i], 4)))
    return out
