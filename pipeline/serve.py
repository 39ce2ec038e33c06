"""``python -m pipeline serve``: the static site on 127.0.0.1, plus live search.

The site under ``DIR/site/`` is served as files; ``/api/search?q=words&k=50`` runs the warehouse's
``search()`` macro (BM25 over prompts, answers, checkpoints and memories), which the search page asks
first when it is served over HTTP. The warehouse is opened read-only for each search and closed after,
so an ``ingest`` can run while the site is served (a search during the ingest is answered 503, and the
page searches its prebuilt index). Starlette and uvicorn: a small, well-kept ASGI pair.

Only requests naming this server answer: a ``Host:`` header other than the address it was started on,
``localhost``, ``127.0.0.1`` or ``[::1]`` (or a name given with ``--allow-host``) gets 421 - a web page
that rebinds its own DNS name to 127.0.0.1 cannot read the history through the visitor's browser.
"""

from __future__ import annotations

import errno
import logging
import socket
from pathlib import Path

import duckdb
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import ServeError
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


LOCAL_NAMES = ("localhost", "127.0.0.1", "::1")


def _host_name(header: str) -> str:
    """The name in a Host header, without its port; brackets of an IPv6 address dropped; lower case."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:header.find("]")] if "]" in header else header
    return header.rsplit(":", 1)[0] if header.count(":") == 1 else header


class HostGuard:
    """ASGI middleware: 421 Misdirected Request for a Host header that does not name this server."""

    def __init__(self, app: ASGIApp, allowed: set[str]) -> None:
        self.app = app
        self.allowed = {_host_name(name) for name in allowed} | set(LOCAL_NAMES)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] in ("http", "websocket"):
            headers = dict(scope.get("headers") or [])
            host = headers.get(b"host", b"").decode("latin-1")
            if _host_name(host) not in self.allowed:
                log.warning("refused a request for host %r", host[:100])
                response = PlainTextResponse("misdirected request: this server answers for "
                                             + ", ".join(sorted(self.allowed)) + "\n", status_code=421)
                await response(scope, receive, send)
                return
        await self.app(scope, receive, send)


def allowed_hosts(host: str, extra: list[str] | tuple[str, ...] = ()) -> set[str]:
    """The names this server answers for: the address it listens on (unless a wildcard), the local names and
    ``extra`` (``--allow-host``)."""
    names = {_host_name(name) for name in extra if name}
    if host not in ("0.0.0.0", "::", ""):
        names.add(_host_name(host) if not host.count(":") > 1 else host.lower())
    return names | set(LOCAL_NAMES)


def app(site_dir: str | Path, warehouse: str | Path, hosts: set[str] | None = None) -> Starlette:
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

    from starlette.middleware import Middleware

    return Starlette(routes=[Route("/api/search", api_search),
                             Mount("/", app=StaticFiles(directory=str(site_dir), html=True))],
                     middleware=[Middleware(HostGuard, allowed=hosts or set(LOCAL_NAMES))])


def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port, or one line saying why not (a port in use, an address not here)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ServeError(f"cannot listen on {host}: {exc.strerror}") from exc
    family, kind, proto, _name, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ServeError(f"port {port} on {host} is in use by another program: choose another with --port") from exc
        raise ServeError(f"cannot listen on {host}:{port}: {exc.strerror}") from exc
    sock.set_inheritable(True)
    return sock


def serve(site_dir: str | Path, warehouse: str | Path, host: str = "127.0.0.1", port: int = 8000,
          allow_hosts: list[str] | tuple[str, ...] = (), sock: socket.socket | None = None) -> None:
    """Serve until Ctrl-C. The socket is bound here (or by the caller, ``listen``), so a port in use is one
    line and exit 2, not uvicorn's ``ERROR:`` line and exit 3."""
    import uvicorn

    sock = sock or listen(host, port)
    config = uvicorn.Config(app(site_dir, warehouse, allowed_hosts(host, allow_hosts)), host=host, port=port,
                            log_level="warning")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
