"""``serve`` as a user runs it (``python -m pipeline serve`` in its own process): it answers only requests that
name it, and says in one line when its port is taken."""

from __future__ import annotations

import http.client
import os
import socket
import subprocess
import sys
import time

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


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """`serve` in its own process over an ingested copy of the sample home; yields (port, warehouse, home)."""
    folder = tmp_path_factory.mktemp("serve")
    warehouse, out = folder / "w.duckdb", folder / "out"
    assert main(["ingest", "--warehouse", str(warehouse), "--copilot-home", str(SAMPLE_HOME), "--quiet"]) == 0
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "pipeline", "serve", "--warehouse", str(warehouse), "--out",
                             str(out), "--port", str(port), "--allow-host", "copilot.lan", "--quiet"],
                            cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)})
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                if _get(port, "/")[0] == 200:
                    break
            except OSError:
                pass
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "serve did not start"
            time.sleep(0.2)
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
