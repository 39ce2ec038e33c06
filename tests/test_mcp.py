"""``python -m pipeline mcp``: a real MCP client session over stdio (the official SDK's client) against the
server started as an agent starts it: initialize, tools/list and every tool."""

from __future__ import annotations

import json
import os
import sys
from datetime import datetime, timezone
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from pipeline.ingest import ingest

from .conftest import REPO, SAMPLE_HOME


@pytest.fixture(scope="module")
def warehouse(tmp_path_factory) -> Path:
    wh = tmp_path_factory.mktemp("mcp") / "w.duckdb"
    ingest(wh, [SAMPLE_HOME], [REPO / "data" / "sample" / "vscode-user"])
    return wh


def _structured(result) -> object:
    """A tool result's JSON: its structured content (a list is wrapped as {"result": [...]}), else its text."""
    if result.structured_content is not None:
        value = result.structured_content
        return value.get("result", value) if isinstance(value, dict) and set(value) == {"result"} else value
    return json.loads(result.content[0].text)


async def _session(warehouse: Path, calls: list[tuple[str, dict]]) -> tuple[object, list, list]:
    params = StdioServerParameters(command=sys.executable, args=["-m", "pipeline", "mcp", "--warehouse",
                                                                 str(warehouse)],
                                   cwd=str(REPO), env={"PATH": os.environ.get("PATH", "")})
    with open(os.devnull, "w") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            init = await session.initialize()
            tools = (await session.list_tools()).tools
            results = [await session.call_tool(name, args) for name, args in calls]
    return init, tools, results


def test_an_agent_lists_and_calls_every_tool_over_stdio(warehouse):
    calls = [("search", {"words": "refresh token", "limit": 3}),
             ("session", {"session_id": "dd47978c"}),
             ("usage", {"by": "model"}),
             ("query", {"sql": "select count(*) as n from dim_sessions"}),
             ("query", {"sql": "select * from read_csv('/etc/passwd')"}),
             ("query", {"sql": "delete from dim_sessions"}),
             ("session", {"session_id": "ffffffff"}),
             ("usage", {"by": "month", "since": "2000-01-01", "until": "today"}),
             ("usage", {"by": "month", "since": "this-month"}),
             ("usage", {"since": "soon"})]
    init, tools, results = anyio.run(_session, warehouse, calls)
    assert init.server_info.name == "copilot-history"
    assert {t.name for t in tools} == {"search", "session", "usage", "query"}
    assert all(t.description and t.input_schema for t in tools)
    search, session, usage, count, passwd, delete, missing, dated, this_month, bad_period = results
    hits = _structured(search)
    assert not search.is_error and 1 <= len(hits) <= 3
    assert all({"score", "kind", "session_id", "snippet"} <= set(h) for h in hits)
    assert any("refresh" in h["snippet"].lower() for h in hits)
    s = _structured(session)
    assert s["session_id"] == "dd47978c-bf05-5f0e-ae2a-1880e2c4898a" and s["title"] == "Token refresh rotation"
    assert len(s["prompts"]) == s["n_turns"] == 2 and s["prompts"][0]["tool_calls"]
    assert any(c["is_success"] is False for p in s["prompts"] for c in p["tool_calls"])
    u = _structured(usage)
    assert {r["model"] for r in u["rows"]} >= {"claude-sonnet-4.6"} and u["total"]["requests"] > 0
    assert _structured(count)["rows"] == [{"n": 13}]
    # read-only and nothing but the warehouse: each refused as a tool error the agent can read
    assert passwd.is_error and "disabled" in passwd.content[0].text
    assert delete.is_error and "read-only" in delete.content[0].text
    assert missing.is_error and "no session" in missing.content[0].text
    # since / until take dates and the period words `usage --since` takes
    assert _structured(dated)["total"]["requests"] == u["total"]["requests"]
    from pipeline.usage_report import period_start
    first = period_start("this-month", datetime.now(timezone.utc).date()).isoformat()
    assert not this_month.is_error and all(r["month"] >= first[:7] for r in _structured(this_month)["rows"])
    assert bad_period.is_error and "this-month" in bad_period.content[0].text


def test_a_missing_warehouse_is_one_line(tmp_path):
    import subprocess
    r = subprocess.run([sys.executable, "-m", "pipeline", "mcp", "--warehouse", str(tmp_path / "none.duckdb")],
                       capture_output=True, text=True, cwd=REPO, timeout=60, stdin=subprocess.DEVNULL)
    assert r.returncode == 2 and r.stderr.startswith("error: no warehouse at") and r.stdout == ""
