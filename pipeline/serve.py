"""``python -m pipeline serve``: the static site on 127.0.0.1, plus live search.

The site under ``DIR/site/`` is served as files; ``/api/search?q=words&k=50`` runs the warehouse's
``search()`` macro (BM25 over prompts, answers, checkpoints and memories), which the search page asks
first when it is served over HTTP. The warehouse is opened read-only for each search and closed after,
so an ``ingest`` can run while the site is served (a search during the ingest is answered 503, and the
page searches its prebuilt index). Starlette and uvicorn: a small, well-kept ASGI pair.

The pages follow the warehouse: when an ingest has changed it since the pages were written, a page
request starts the report again on a thread of its own (``Refresher``; the pages it replaces are served
meanwhile), so a user who keeps ``serve`` open sees what each new ingest brought.

Only requests naming this server answer: a ``Host:`` header other than the address it was started on,
``localhost``, ``127.0.0.1`` or ``[::1]`` (or a name given with ``--allow-host``) gets 421 - a web page
that rebinds its own DNS name to 127.0.0.1 cannot read the history through the visitor's browser.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp, Receive, Scope, Send

from .errors import ServeError
from .site import doc_url
from .site.search import SNIPPET  # the static index's snippets are as long
from .warehouse import WarehouseBusy, WarehouseError, connect, may_read
from .wiki.markdown import fmt_ts
from .wiki.queries import page_plans

log = logging.getLogger(__name__)
MAX_RESULTS = 200


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
CHECK_S = 2.0  # a page request looks at the warehouse at most this often


def _signature(warehouse: Path) -> tuple | None:
    """What tells a changed warehouse from an unchanged one without opening it: its file's and its WAL's size
    and modification time (an ingest's commit changes them)."""
    out = []
    for path in (warehouse, warehouse.with_name(warehouse.name + ".wal")):
        try:
            st = path.stat()
            out.append((st.st_size, st.st_mtime_ns))
        except OSError:
            out.append(None)
    return tuple(out) if out[0] is not None else None


class Refresher:
    """The pages rebuilt when the warehouse changed: a page request looks at its signature (at most every
    CHECK_S seconds); when it changed and no ingest is writing, ``rebuild`` runs on a thread of its own,
    one at a time. Pages older than the warehouse when serving starts are rebuilt on the first request."""

    def __init__(self, warehouse: str | Path, rebuild: Callable[[], None], site_dir: str | Path) -> None:
        self.warehouse, self.rebuild = Path(warehouse), rebuild
        index = Path(site_dir) / "index.html"
        current = _signature(self.warehouse)
        stale = current is not None and (not index.exists() or index.stat().st_mtime_ns < current[0][1])
        self.built_from = None if stale else current
        self.checked = 0.0
        self.running = threading.Lock()
        self.n_rebuilds = 0

    def poke(self) -> None:
        now = time.monotonic()
        if now - self.checked < CHECK_S or self.running.locked():
            return
        self.checked = now
        current = _signature(self.warehouse)
        if current is None or current == self.built_from:
            return
        try:
            may_read(self.warehouse)
        except WarehouseBusy:
            return  # an ingest is writing: the next request after it looks again
        if self.running.acquire(blocking=False):
            threading.Thread(target=self._run, args=(current,), name="pages-rebuild", daemon=True).start()

    def _run(self, current: tuple) -> None:
        try:
            self.rebuild()
            self.built_from, self.n_rebuilds = current, self.n_rebuilds + 1
            log.info("pages rebuilt: the warehouse changed")
        except Exception as exc:  # noqa: BLE001 - a failed rebuild keeps the old pages; the next change tries again
            log.warning("could not rebuild the pages after the warehouse changed: %s", " ".join(str(exc).split()))
        finally:
            self.running.release()


class PageRefresh:
    """ASGI middleware: each request for a page (not the API) lets the ``Refresher`` look at the warehouse."""

    def __init__(self, app: ASGIApp, refresher: Refresher | None) -> None:
        self.app, self.refresher = app, refresher

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self.refresher is not None and scope["type"] == "http" and not scope.get("path", "").startswith("/api/"):
            self.refresher.poke()
        await self.app(scope, receive, send)


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


class SitePages(StaticFiles):
    """The site's files, each read whole from one open file: a rebuild replaces pages while they are served,
    and Starlette's file response takes the length from the path's stat and the bytes from a later open, so a
    page replaced in between was sent cut short (seen as an incomplete read by a client). Pages are small, and
    so are the search index's files (a few hundred KB each; a word in most documents: a few MB)."""

    def file_response(self, full_path: str | os.PathLike, stat_result: os.stat_result, scope: Scope,
                      status_code: int = 200) -> Response:
        import mimetypes

        try:
            with open(full_path, "rb") as fh:
                body = fh.read()
        except OSError:  # gone since it was looked up: as if it had never been there
            return PlainTextResponse("Not Found", status_code=404)
        media_type = mimetypes.guess_type(str(full_path))[0] or "application/octet-stream"
        return Response(body, status_code=status_code, media_type=media_type)


def app(site_dir: str | Path, warehouse: str | Path, hosts: set[str] | None = None,
        refresher: Refresher | None = None) -> Starlette:
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
                             Mount("/", app=SitePages(directory=str(site_dir), html=True))],
                     middleware=[Middleware(HostGuard, allowed=hosts or set(LOCAL_NAMES)),
                                 Middleware(PageRefresh, refresher=refresher)])


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
          allow_hosts: list[str] | tuple[str, ...] = (), sock: socket.socket | None = None,
          out: str | Path | None = None) -> None:
    """Serve until Ctrl-C. The socket is bound here (or by the caller, ``listen``), so a port in use is one
    line and exit 2, not uvicorn's ``ERROR:`` line and exit 3."""
    import uvicorn

    sock = sock or listen(host, port)
    refresher = None
    if out is not None:  # the report's folder: its pages follow the warehouse
        from .report import run_report

        refresher = Refresher(warehouse, lambda: run_report(warehouse, out), site_dir)
    config = uvicorn.Config(app(site_dir, warehouse, allowed_hosts(host, allow_hosts), refresher), host=host,
                            port=port, log_level="warning")
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        sock.close()
