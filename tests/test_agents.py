"""Which agent made each request and which skill it ran under (transform/usage.attribute), and `usage --by
agent|skill`: a CLI log built here with a skill call, a task call that starts a sub-agent, and its requests."""

import json

from pipeline.cli import main
from pipeline.ingest import ingest

from .conftest import rows

SID = "e0000000-0000-4000-8000-00000000000a"


def ev(n: int, kind: str, data: dict, secs: int, parent: int | None = None) -> str:
    return json.dumps({"type": kind, "id": f"e{n}", "parentId": f"e{parent or n - 1}",
                       "timestamp": f"2026-09-01T10:00:{secs:02d}.000Z", "data": data})


def session_log() -> str:
    lines = [
        ev(1, "session.start", {"sessionId": SID, "copilotVersion": "1.0.80", "context": {"cwd": "/srv/app"}}, 0),
        ev(2, "user.message", {"content": "deploy the app"}, 1),
        ev(3, "assistant.message", {"messageId": "m1", "apiCallId": "A1", "model": "claude-sonnet-4.6",
                                    "outputTokens": 10, "content": "",
                                    "toolRequests": [{"toolCallId": "s1", "name": "skill",
                                                      "arguments": {"skill": "deploy"}}]}, 2),
        ev(4, "tool.execution_start", {"toolCallId": "s1", "toolName": "skill", "arguments": {"skill": "deploy"}}, 3),
        ev(5, "skill.invoked", {"name": "deploy", "path": "/srv/app/.github/skills/deploy/SKILL.md"}, 3),
        ev(6, "tool.execution_complete", {"toolCallId": "s1", "success": True, "result": {"content": "ok"}}, 4),
        ev(7, "assistant.message", {"messageId": "m2", "apiCallId": "A2", "model": "claude-sonnet-4.6",
                                    "outputTokens": 20, "content": "",
                                    "toolRequests": [{"toolCallId": "t1", "name": "task",
                                                      "arguments": {"agent_type": "explore", "name": "look",
                                                                    "prompt": "find the config"}}]}, 5),
        ev(8, "tool.execution_start", {"toolCallId": "t1", "toolName": "task",
                                       "arguments": {"agent_type": "explore", "name": "look"}}, 6),
        ev(9, "subagent.started", {"toolCallId": "t1", "agentName": "explore"}, 6),
        ev(10, "assistant.message", {"messageId": "m3", "apiCallId": "A3", "model": "claude-haiku-4.5",
                                     "outputTokens": 30, "content": "found it", "parentToolCallId": "t1"}, 7),
        ev(11, "tool.execution_complete", {"toolCallId": "t1", "success": True, "result": {"content": "found"}}, 8),
        ev(12, "assistant.message", {"messageId": "m4", "apiCallId": "A4", "model": "claude-sonnet-4.6",
                                     "outputTokens": 40, "content": "Deployed."}, 9),
    ]
    return "\n".join(lines) + "\n"


def test_each_request_has_its_agent_and_skill_and_usage_splits_by_them(tmp_path, capsys):
    home = tmp_path / "home"
    (home / "session-state" / SID).mkdir(parents=True)
    (home / "session-state" / SID / "events.jsonl").write_text(session_log())
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select request_id, agent, skill, is_subagent, cost_source from fct_requests order by 1") == [
        ("A1", "main", None, False, "unknown"),  # asked for the skill: before it ran
        ("A2", "main", "deploy", False, "unknown"),
        ("A3", "explore", "deploy", True, "unknown"),
        ("A4", "main", "deploy", False, "unknown")]
    assert main(["usage", "--warehouse", str(wh), "--by", "agent", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(r["agent"], r["requests"], r["output_tokens"]) for r in out["rows"]] == [("explore", 1, 30),
                                                                                     ("main", 3, 70)]
    assert main(["usage", "--warehouse", str(wh), "--by", "skill", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(r["skill"], r["requests"]) for r in out["rows"]] == [("(none)", 1), ("deploy", 3)]
    assert out["total"]["requests"] == 4
