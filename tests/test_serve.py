"""``serve`` as a user runs it (``python -m pipeline serve`` in its own process): it answers only requests that
name it, says in one line when its port is taken, and an ``ingest`` of the warehouse it searches succeeds
while clients keep searching."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest

from pipeline.cli import main

from .conftest import REPO, SAMPLE_HOME


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _get(port: int, path: str, host: str | None = None) -> tuple[int, bytes]:
    con = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    try:
        con.putrequest("GET", path, skip_host=True)
        con.putheader("Host", f"127.0.0.1:{port}" if host is None else host)
        con.endheaders()
        response = con.getresponse()
        return response.status, response.read()
    finally:
        con.close()


def _start_serve(warehouse: Path, out: Path, *extra: str, wait_for: str = "/") -> tuple[subprocess.Popen, int]:
    """`python -m pipeline serve` in its own process, answering ``wait_for``: (the process, its port)."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "serve", "--warehouse", str(warehouse), "--out",
                             str(out), "--port", str(port), *extra, "--quiet"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    deadline = time.monotonic() + 120
    while True:
        try:
            if _get(port, wait_for)[0] == 200:
                return proc, port
        except OSError:
            pass
        if proc.poll() is not None or time.monotonic() > deadline:
            proc.kill()
            raise AssertionError(f"serve did not start: {proc.communicate()}")
        time.sleep(0.2)


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`serve` in its own process over an ingested copy of the sample home; yields (port, warehouse, home)."""
    folder = tmp_path_factory.mktemp("serve")
    warehouse, out = folder / "w.duckdb", folder / "out"
    assert main(["ingest", "--warehouse", str(warehouse), "--copilot-home", str(SAMPLE_HOME), "--quiet"]) == 0
    proc, port = _start_serve(warehouse, out, "--allow-host", "copilot.lan")
    try:
        yield port, warehouse
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_only_requests_naming_this_server_are_answered(served):
    """A DNS-rebinding page (its own name resolved to 127.0.0.1) sends its name as Host: refused with 421,
    on the live search and on the pages alike."""
    port, _warehouse = served
    status, body = _get(port, "/api/search?q=token&k=5")
    assert status == 200 and body.startswith(b"[{")
    for host in ("attacker.example", f"attacker.example:{port}", "127.0.0.1.attacker.example", "", "[::2]"):
        for path in ("/api/search?q=token&k=5", "/", "/index.html"):
            status, body = _get(port, path, host=host)
            assert status == 421, (host, path, status)
            assert b"token" not in body.lower() and b"session" not in body.lower()
    for host in (f"localhost:{port}", "LOCALHOST", f"[::1]:{port}", "127.0.0.1", f"copilot.lan:{port}"):
        assert _get(port, "/api/search?q=token&k=5", host=host)[0] == 200, host


def test_a_port_in_use_is_one_line_and_exit_2(served, capsys):
    port, warehouse = served
    assert main(["serve", "--warehouse", str(warehouse), "--out", str(warehouse.parent / "other"),
                 "--port", str(port)]) == 2
    captured = capsys.readouterr()
    assert captured.err.strip().splitlines() == [
        f"error: port {port} on 127.0.0.1 is in use by another program: choose another with --port"]
    assert not (warehouse.parent / "other").exists()  # told before any work


def test_ingest_succeeds_while_clients_keep_searching(served):
    """Four clients search without pause while the warehouse is ingested again and again: every ingest
    succeeds; a search during an ingest is answered 503 (the page then searches its prebuilt index), never
    an error of another kind, and searches succeed again after."""
    port, warehouse = served
    statuses: Counter[int] = Counter()
    stop = threading.Event()

    def client() -> None:
        while not stop.is_set():
            status, _body = _get(port, "/api/search?q=token+refresh&k=20")
            statuses[status] += 1

    threads = [threading.Thread(target=client) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        time.sleep(1)
        for _ in range(3):
            assert main(["ingest", "--warehouse", str(warehouse), "--copilot-home", str(SAMPLE_HOME), "--full",
                         "--quiet"]) == 0
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert set(statuses) <= {200, 503}, statuses
    assert statuses[200] > 0
    assert _get(port, "/api/search?q=token&k=5")[0] == 200


def test_a_second_writer_is_refused_in_one_line(tmp_path, capsys):
    """Two writers at once: the second waits a moment for the writer's gate, then says the warehouse is
    busy (DuckDB lets one process write a file)."""
    from pipeline.warehouse import writing

    warehouse = tmp_path / "w.duckdb"
    assert main(["ingest", "--warehouse", str(warehouse), "--copilot-home", str(SAMPLE_HOME), "--quiet"]) == 0
    before = Path(warehouse).stat().st_mtime_ns
    with writing(warehouse):
        assert main(["ingest", "--warehouse", str(warehouse), "--copilot-home", str(SAMPLE_HOME), "--full",
                     "--quiet"]) == 2
        assert main(["query", "select count(*) from dim_sessions", "--warehouse", str(warehouse)]) == 2
        assert main(["push", "--lake", str(tmp_path / "lake.duckdb"), "--data-path", str(tmp_path / "data"),
                     "--warehouse", str(warehouse)]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 3 and all(line.startswith("error: ") and "writing" in line for line in err), err
    assert not (tmp_path / "lake.duckdb").exists()
    assert Path(warehouse).stat().st_mtime_ns == before
    assert main(["query", "select count(*) from dim_sessions", "--warehouse", str(warehouse)]) == 0


def test_the_pages_follow_the_warehouse_when_an_ingest_brings_new_sessions(tmp_path):
    """serve left open: an ingest adds a session, and the next page requests rebuild the pages (on a thread of
    their own, the old pages served meanwhile) so the new session shows without running report."""
    import json
    import shutil

    home = tmp_path / "home"
    shutil.copytree(SAMPLE_HOME, home)
    warehouse, out = tmp_path / "w.duckdb", tmp_path / "out"
    assert main(["ingest", "--warehouse", str(warehouse), "--copilot-home", str(home), "--quiet"]) == 0
    proc, port = _start_serve(warehouse, out, wait_for="/sessions.html")
    try:
        assert b"Brand new session" not in _get(port, "/sessions.html")[1]
        sid = "0b0b0b0b-1111-2222-3333-444444444444"
        folder = home / "session-state" / sid
        folder.mkdir()
        (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in [
            {"type": "session.start", "data": {"sessionId": sid}, "id": "a", "timestamp": "2026-09-30T09:00:00Z"},
            {"type": "user.message", "data": {"content": "Brand new session about caching"}, "id": "b",
             "timestamp": "2026-09-30T09:00:01Z"}]))
        assert main(["ingest", "--warehouse", str(warehouse), "--copilot-home", str(home), "--quiet"]) == 0
        deadline = time.monotonic() + 90
        while b"Brand new session" not in _get(port, "/sessions.html")[1]:
            assert time.monotonic() < deadline, "the pages were not rebuilt after the ingest"
            time.sleep(0.5)
        assert _get(port, f"/sessions/{sid}.html")[0] == 200
    finally:
        proc.terminate()
        proc.communicate(timeout=30)


def test_a_page_replaced_while_it_is_served_is_sent_whole(tmp_path, monkeypatch):
    # a rebuild renames a new page over the old one between the server's lookup of the file and its reading:
    # the response is one file's bytes with that file's length (Starlette's own took the length from the old
    # file and the bytes from the new: a page cut short, an incomplete read in the client)
    import asyncio

    from starlette.staticfiles import StaticFiles

    from pipeline import serve

    site = tmp_path / "site"
    site.mkdir()
    page = site / "sessions.html"
    page.write_text("the old page " * 1000)
    looked_up = StaticFiles.lookup_path

    def replaced_after_lookup(self, path):
        found = looked_up(self, path)
        new = site / "sessions.html.tmp"
        new.write_text("the new page")
        new.replace(page)
        return found
    monkeypatch.setattr(StaticFiles, "lookup_path", replaced_after_lookup)
    sent: list[dict] = []

    async def request() -> None:
        scope = {"type": "http", "method": "GET", "path": "/sessions.html", "raw_path": b"/sessions.html",
                 "headers": [(b"host", b"127.0.0.1")], "query_string": b"", "root_path": "", "scheme": "http",
                 "server": ("127.0.0.1", 80), "http_version": "1.1"}

        async def receive() -> dict:
            return {"type": "http.request", "body": b"", "more_body": False}

        async def send(message: dict) -> None:
            sent.append(message)
        await serve.app(site, tmp_path / "w.duckdb")(scope, receive, send)
    asyncio.run(asyncio.wait_for(request(), 30))  # (Starlette's own response never finished here)
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    assert start["status"] == 200 and body == b"the new page"
    assert int(dict(start["headers"])[b"content-length"]) == len(body)
    assert dict(start["headers"])[b"content-type"].startswith(b"text/html")
