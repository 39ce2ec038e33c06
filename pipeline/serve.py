"""``python -m pipeline serve``: the static site on 127.0.0.1, plus live search.

The site under ``DIR/site/`` is served as files; ``/api/search?q=words&k=50`` runs the warehouse's
``search()`` macro (BM25 over prompts, answers, checkpoints and memories), which the search page asks
first when it is served over HTTP. The warehouse is opened read-only for each search and closed after,
so an ``ingest`` can run while the site is served. Starlette and uvicorn: a small, well-kept ASGI pair.
"""

from __future__ import annotations

import logging
from pathlib import Path

import duckdb
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from .site import doc_url
from .warehouse import WarehouseError, connect
from .wiki.markdown import fmt_ts
from .wiki.queries import page_plans

log = logging.getLogger(__name__)
MAX_RESULTS = 200
SNIPPET = 240


def search(warehouse: str | Path, q: str, k: int = 50) -> list[dict]:
    """Results in the shape the search page shows (the static index's shape), best first."""
    con = connect(warehouse, read_only=True)
    try:
        rows = con.sql(f"""
            select r.kind, r.session_id, r.ref, r.title, r.written_at,
                   left(regexp_replace(coalesce(r.text, ''), '\\s+', ' ', 'g'), {SNIPPET}) as snippet, r.score,
                   p.name as project
            from search(?, k := ?) as r
            left join dim_sessions as s using (session_id)
            left join dim_projects as p on p.project_id = s.project_id
            order by r.score desc, r.kind, r.session_id, r.ref""", params=[q, k]).fetchall()
        plans = page_plans(con) if any(kind in ("prompt", "answer") for kind, *_rest in rows) else {}
    finally:
        con.close()
    out = []
    for kind, sid, ref, title, written_at, snippet, score, project in rows:
        url = doc_url(kind, sid, ref, plans.get(sid)) if sid else ""
        out.append({"kind": kind, "url": url, "title": title or sid or ref or "", "date": fmt_ts(written_at),
                    "snippet": snippet, "project": project or "", "score": score})
    return out


def app(site_dir: str | Path, warehouse: str | Path) -> Starlette:
    async def api_search(request: Request) -> JSONResponse:
        q = request.query_params.get("q", "").strip()
        try:
            k = max(1, min(MAX_RESULTS, int(request.query_params.get("k", "50"))))
        except ValueError:
            return JSONResponse({"error": "k must be a number"}, status_code=400)
        if not q:
            return JSONResponse([])
        from starlette.concurrency import run_in_threadpool
        try:
            return JSONResponse(await run_in_threadpool(search, warehouse, q, k))
        except (WarehouseError, duckdb.Error) as exc:  # the page falls back to its prebuilt index
            log.warning("live search failed: %s", exc)
            return JSONResponse({"error": f"live search unavailable: {str(exc).splitlines()[0]}"}, status_code=503)

    return Starlette(routes=[Route("/api/search", api_search),
                             Mount("/", app=StaticFiles(directory=str(site_dir), html=True))])


def serve(site_dir: str | Path, warehouse: str | Path, host: str = "127.0.0.1", port: int = 8000) -> None:
    import uvicorn

    uvicorn.run(app(site_dir, warehouse), host=host, port=port, log_level="warning")
