"""Files written by real Copilot installs (../shared/real-samples); skipped when absent.

Every folder is ingested as a user would (``--copilot-home`` / ``--vscode-user``) and its warehouse
is compared with what the files themselves say, counted here by a plain reading of the JSON (not the
pipeline's reader): per session the prompts, tool calls, successes and failures; per leg the output
tokens and requests; per session the logged cost.
"""

from __future__ import annotations

import json
import re
import shutil
from collections import defaultdict
from decimal import Decimal
from pathlib import Path

import pytest

from pipeline.ingest import ingest

from .conftest import REAL, real, rows

VIBE = ("Mai0313-VibeCodingTracker",)
LANTERN = ("WildChildForLife-lantern", "fixtures", "copilot-home")
HOMES = sorted(p.parent.name for p in REAL.glob("*/copilot-home")) + \
    sorted(p.parent.name for p in REAL.glob("*/vscode-user") if not (p.parent / "copilot-home").exists())


def _ingest_folder(folder: str, tmp_path: Path) -> Path:
    base = real(folder)
    homes = [base / "copilot-home"] if (base / "copilot-home").is_dir() else []
    users = [base / "vscode-user"] if (base / "vscode-user").is_dir() else []
    wh = tmp_path / f"{folder}.duckdb"
    ingest(wh, homes, users)
    return wh


# ---------------------------------------------------------------------------------- counted from the files
_INJECTED = r"(?:current_datetime|reminder|system_reminder|tools_changed_notice|context)"


def _typed(content) -> str:
    """What the user typed: Copilot's trailing injected blocks dropped, a <userRequest> unwrapped."""
    if not isinstance(content, str):
        return ""
    m = re.search(r"<userRequest>\s*(.*?)\s*</userRequest>\s*$", content, re.S)
    text = m.group(1) if m else content
    while True:
        cut = re.sub(r"\s*<(" + _INJECTED + r")>(?:(?!<\1>).)*?</\1>\s*$", "", text, flags=re.S)
        if cut == text:
            return text.strip()
        text = cut


def _count(log: Path) -> dict:
    events = []
    for line in log.read_bytes().split(b"\n"):
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    prompts, calls, outcome = 0, set(), {}
    legs: dict[int, dict] = defaultdict(lambda: {"output": 0, "requests": set()})
    leg, checkpoints, shutdown_nano = 0, [], []
    for i, e in enumerate(events):
        t, d = e.get("type"), e.get("data") or {}
        if i == 0 or t in ("session.start", "session.resume"):
            leg += 1
        if t == "user.message" and _typed(d.get("content")):
            prompts += 1
        elif t == "assistant.message":
            legs[leg]["output"] += d.get("outputTokens") or 0
            legs[leg]["requests"].add(d.get("apiCallId") or d.get("serviceRequestId") or e.get("id"))
            calls.update(r.get("toolCallId") for r in d.get("toolRequests") or [])
        elif t == "tool.execution_start":
            calls.add(d.get("toolCallId"))
        elif t == "tool.execution_complete":
            calls.add(d.get("toolCallId"))
            outcome[d.get("toolCallId")] = d.get("success")
        elif t == "session.usage_checkpoint" and d.get("totalNanoAiu") is not None:
            checkpoints.append(d["totalNanoAiu"])
        elif t == "session.shutdown" and d.get("totalNanoAiu") is not None:
            shutdown_nano.append(d["totalNanoAiu"])
    # logged cost: the running total of a CLI that keeps usage checkpoints, else each leg's own shutdown
    nano = max(checkpoints + shutdown_nano) if checkpoints else (sum(shutdown_nano) if shutdown_nano else None)
    return {"prompts": prompts, "calls": len(calls), "ok": sum(v is True for v in outcome.values()),
            "failed": sum(v is False for v in outcome.values()), "nano": nano,
            "legs": {n: (v["output"], len(v["requests"])) for n, v in legs.items() if v["requests"]}}


def _logs(folder: str) -> dict[str, Path]:
    state = REAL / folder / "copilot-home" / "session-state"
    out = {p.parent.name: p for p in state.glob("*/events.jsonl")}
    out.update({p.stem: p for p in state.glob("*.jsonl")})
    return out


@pytest.mark.parametrize("folder", HOMES or ["(real samples absent)"])
def test_every_real_home_matches_its_own_files(folder, tmp_path):
    if not HOMES:
        pytest.skip(f"real samples not available at {REAL}")
    wh = _ingest_folder(folder, tmp_path)
    logs = _logs(folder)
    for sid, log in sorted(logs.items()):
        want = _count(log)
        assert rows(wh, "select n_turns, n_tool_calls, n_failed_tool_calls from dim_sessions where session_id = ?",
                    [sid]) == [(want["prompts"], want["calls"], want["failed"])], (folder, sid)
        assert rows(wh, "select count(*) filter (where is_success), count(*) filter (where not is_success) "
                        "from fct_tool_calls where session_id = ?", [sid]) == [(want["ok"], want["failed"])]
        got_legs = {n: (int(out or 0), req) for n, out, req in rows(
            wh, "select leg_index, sum(output_tokens), sum(requests) from fct_usage_legs where session_id = ? "
                "group by 1", [sid]) if req}
        assert got_legs == want["legs"], (folder, sid)
        if want["nano"] is not None:
            assert rows(wh, "select sum(nano_aiu), bool_and(cost_source = 'logged') from fct_usage "
                            "where session_id = ?", [sid]) == [(want["nano"], True)], (folder, sid)
    # every figure a bill is checked against: no 0 stands in for an unknown, no usage row is made up
    assert rows(wh, "select count(*) from fct_usage where output_tokens = 0 and input_tokens is null") == [(0,)]
    assert rows(wh, "select count(*) from fct_usage_legs where cost_source = 'logged' and nano_aiu is null") == [(0,)]
    assert rows(wh, "select count(*) from fct_usage where cost_source = 'unknown' and ai_credits is not null") == [
        (0,)]


# ---------------------------------------------------------------------------------- the figures the issue names
def _usage(wh, sid_prefix):
    return rows(wh, "select sum(requests), sum(output_tokens), sum(input_tokens), sum(nano_aiu), sum(cost_usd), "
                    "list(distinct model order by model) from fct_usage where session_id like ?", [sid_prefix + "%"])[0]


def test_per_leg_shutdowns_are_summed(tmp_path):
    wh = _ingest_folder("shinelu2013-myAssistant", tmp_path)
    requests, output, _inp, _nano, _usd, models = _usage(wh, "a15933af")
    assert (requests, output, models) == (47, 23452, ["gpt-5.4-mini"])
    assert rows(wh, "select count(*), min(token_source), max(token_source) from fct_usage_legs "
                    "where session_id like 'a15933af%'") == [(11, "shutdown", "shutdown")]
    wh = _ingest_folder("Kaijon-little-hou-claw", tmp_path)
    assert _usage(wh, "f9a21148")[:3] == (62, 21726, 4405798)
    assert rows(wh, "select count(*) from fct_usage_legs where session_id like 'f9a21148%'") == [(8,)]


def test_cumulative_shutdowns_are_differenced_and_cost_is_logged(tmp_path):
    wh = _ingest_folder("mitchwindoo-github-copilot", tmp_path)
    assert _usage(wh, "266e8d9c")[:2] == (44, 14770)
    assert rows(wh, "select leg_index, output_tokens, token_source from fct_usage_legs "
                    "where session_id like '266e8d9c%' order by 1") == [(1, 12055, "shutdown"),
                                                                         (2, 2715, "shutdown_delta")]
    _req, output, _inp, nano, usd, _models = _usage(wh, "611b7f4d")
    assert (output, nano, round(usd, 3)) == (56992, 184442744500, Decimal("1.844"))
    # killed legs: their tokens are only in the messages (input unknown), their cost in the usage checkpoints
    _req, output, inp, nano, usd, models = _usage(wh, "c31e7115")
    assert (output, inp, nano, round(usd, 2), models) == (
        37905, None, 276561536000, Decimal("2.77"), ["claude-haiku-4.5", "gpt-5.6-terra"])
    assert rows(wh, "select model, input_tokens, cost_source from fct_usage where session_id like 'c31e7115%' "
                    "order by 1") == [("claude-haiku-4.5", None, "logged"), ("gpt-5.6-terra", None, "logged")]


def test_legs_without_a_shutdown_count_their_messages(tmp_path):
    wh = _ingest_folder("softwaresalt-agent-engram", tmp_path)
    # four legs, shutdowns for the first two only: 71,134 output tokens over opus and its haiku subagent
    assert _usage(wh, "8baa78ec")[1] == 71134
    assert rows(wh, "select model, requests, output_tokens, input_tokens from fct_usage where session_id like "
                    "'8baa78ec%' order by 1") == [("claude-haiku-4.5", 16, 5463, 364103),
                                                  ("claude-opus-4.6", 199, 65671, None)]
    assert rows(wh, "select leg_index, model, input_tokens is not null, token_source from fct_usage_legs "
                    "where session_id like '8baa78ec%' order by 1, 2") == [
        (1, "claude-haiku-4.5", True, "shutdown"), (1, "claude-opus-4.6", True, "shutdown"),
        (2, "claude-opus-4.6", True, "shutdown"), (4, "claude-opus-4.6", False, "message_output_tokens")]
    # no shutdown at all, and messages without `model` (CLI 1.0.10): the model comes from session.model_change
    assert rows(wh, "select model, output_tokens, input_tokens from fct_usage where session_id like '07c40cd0%' "
                    "order by 1") == [("claude-opus-4.6", 19401, None), ("claude-sonnet-4.6", 2784, None)]
    wh = _ingest_folder("jjwvanboxtel-poule_v2", tmp_path)
    assert rows(wh, "select model, requests, output_tokens, input_tokens, cost_source from fct_usage") == [
        ("gpt-5-mini", 60, 24788, None, "unknown")]


def test_logged_credits_and_dollars(tmp_path):
    wh = _ingest_folder("XEFF09-dotfiles", tmp_path)
    got = rows(wh, "select session_id[:8], nano_aiu, ai_credits::varchar, cost_usd::varchar, cost_source "
                   "from fct_usage order by 1")
    assert got == [("3cc3555e", 47576625000, "47.576625000", "0.47576625000", "logged"),
                   ("9a493a94", 7431900000, "7.431900000", "0.07431900000", "logged"),
                   ("b87feda8", 28367820000, "28.367820000", "0.28367820000", "logged"),
                   ("feeb765c", 33616230000, "33.616230000", "0.33616230000", "logged")]


def test_old_flat_logs_get_their_folder_from_the_system_prompt(tmp_path):
    wh = _ingest_folder("Tokisaki7-Dev-HAWZX-AI", tmp_path)
    assert rows(wh, "select session_id[:8], cwd from dim_sessions order by 1") == [
        ("27d7ef99", r"c:\Users\endri\Desktop\Projetos\HAWZX-AI"), ("63df9229", r"c:\Users\endri\HAWZX\HAWZX-AI"),
        ("99a32bf6", r"c:\Users\endri\HAWZX\HAWZX-AI")]
    assert rows(wh, "select name, n_sessions from dim_projects order by 2") == [("HAWZX-AI", 1), ("HAWZX-AI", 2)]
    assert rows(wh, "select count(*) filter (where not is_in_project), count(*) from dim_files") == [(0, 32)]
    # Copilot's `<current_datetime>` is not part of the prompt, nor of the title made from it
    assert rows(wh, "select count(*) from fct_turns where user_message like '%current_datetime%'") == [(0,)]
    assert rows(wh, "select title from dim_sessions where session_id like '63df9229%'") == [("fechei sem querer",)]


def test_checkpoint_times_come_from_the_store(tmp_path):
    wh = _ingest_folder("lkk12014402-auto-round-new", tmp_path)
    assert rows(wh, "select count(*), count(created_at), min(source_kind) from fct_checkpoints") == [
        (17, 17, "folder_md")]
    assert rows(wh, "select created_at::varchar from fct_checkpoints where checkpoint_number = 1") == [
        ("2026-05-07 07:54:19.093+00",)]


def test_vscode_sessions_cwd_version_tool_times_and_tokens(tmp_path):
    wh = _ingest_folder("git-ai-project-git-ai", tmp_path)
    assert rows(wh, "select session_id[:8], cwd, copilot_version from dim_sessions order by 1") == [
        ("331fed7f", "/Users/svarlamov/projects/testing-git", "0.31.5"),
        ("7de89a80", "/Users/svarlamov/projects/testing-git", "0.37.1")]
    # a chat session does not time its tool calls: unknown, not the request's end time
    assert rows(wh, "select count(*), count(requested_at), count(started_at), count(completed_at) "
                    "from fct_tool_calls") == [(4, 0, 0, 0)]
    # 0.37.1 records promptTokens / completionTokens per request (gpt-4o, a model included in the plan: no
    # price); 0.31.5 records none: NULL, never 0
    assert rows(wh, "select session_id[:8], model, requests, input_tokens, output_tokens, cost_source "
                    "from fct_usage order by 1") == [("331fed7f", "claude-sonnet-4", 3, None, None, "unknown"),
                                                     ("7de89a80", "gpt-4o", 2, 9723 + 9948, 33 + 40, "unknown")]


def test_an_orphan_store_wal_is_reported(tmp_path):
    wh = _ingest_folder("softwaresalt-agent-engram", tmp_path)
    assert rows(wh, "select regexp_extract(source_path, '[^/]+$'), position from _rejects") == [
        ("session-store.db-wal", "file")]


def test_autopilot_nudges_are_not_prompts(tmp_path):
    home = _home_with_events(tmp_path, real(*VIBE, "tests", "fixtures", "sessions", "copilot.jsonl"))
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    # one typed prompt; the second user.message is empty (its text only in transformedContent)
    assert rows(wh, "select n_turns, n_continuations from dim_sessions") == [(1, 1)]
    assert rows(wh, "select turn_index, n_continuations, n_tool_calls from fct_turns") == [(0, 1, 13)]


# ---------------------------------------------------------------------------------- earlier checks, kept
def _home_with_events(tmp_path, src, sid="96ef38f0-9d09-45c3-8124-6448c36090ed"):
    home = tmp_path / "home"
    (home / "session-state" / sid).mkdir(parents=True)
    shutil.copyfile(src, home / "session-state" / sid / "events.jsonl")
    return home


def test_vibecodingtracker_cli_1_0_34_log(tmp_path):
    home = _home_with_events(tmp_path, real(*VIBE, "tests", "fixtures", "sessions", "copilot.jsonl"))
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select n_turns, n_tool_calls, n_failed_tool_calls, cwd, repository, branch, copilot_version "
                    "from dim_sessions") == [
        (1, 13, 0, "/home/wei/repo/VibeCodingTracker", "Mai0313/VibeCodingTracker",
         "refactor/gemini-copilot-new-formats", "1.0.34")]
    assert rows(wh, "select model, requests, input_tokens, output_tokens, cache_read_tokens, usage_source "
                    "from fct_usage") == [("claude-sonnet-4.6", 6, 186809, 2848, 151738, "shutdown")]
    assert rows(wh, "select count(*), count(completed_at), bool_and(is_success) from fct_tool_calls") == [
        (13, 13, True)]
    assert rows(wh, "select tool_name, tool_family, count(*) from fct_tool_calls group by 1, 2 order by 1") == [
        ("bash", "shell", 2), ("glob", "search", 1), ("report_intent", "other", 1), ("task_complete", "other", 1),
        ("view", "read", 4), ("web_fetch", "web", 1), ("web_search", "web", 3)]
    # the project's own files: Cargo.toml viewed; folder views are not file touches
    assert rows(wh, "select f.path, t.action from fct_file_touches t join dim_files f using (file_id)") == [
        ("Cargo.toml", "view")]
    assert rows(wh, "select count(*) from stg_events where extra like '%transformedContent%'") == [(0,)]


def test_the_same_session_captured_earlier_then_later_is_reread_not_appended(tmp_path):
    sid = "96ef38f0-9d09-45c3-8124-6448c36090ed"
    home = _home_with_events(tmp_path, real(*VIBE, "examples_at_f64d3c6", "test_conversation_copilot.jsonl"))
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select n_tool_calls from dim_sessions") == [(11,)]
    # the later capture inserts events in the middle: not an append, so the file is read whole again
    shutil.copyfile(real(*VIBE, "tests", "fixtures", "sessions", "copilot.jsonl"),
                    home / "session-state" / sid / "events.jsonl")
    ingest(wh, [home])
    assert rows(wh, "select n_turns, n_tool_calls from dim_sessions") == [(1, 13)]
    assert rows(wh, "select count(*), count(distinct _source_line) from stg_events") == [(55, 55)]


def test_legacy_history_session_state_timeline(tmp_path):
    src = real(*VIBE, "examples_at_bcec23f", "test_conversation_copilot.json")
    home = tmp_path / "home"
    (home / "history-session-state").mkdir(parents=True)
    shutil.copyfile(src, home / "history-session-state" /
                    "session_0b2a81da-02cf-4cbb-ae14-07c597b84f4e_1760187292206.json")
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select session_id, n_turns, n_tool_calls, sources from dim_sessions") == [
        ("0b2a81da-02cf-4cbb-ae14-07c597b84f4e", 1, 15, ["history_json"])]
    assert rows(wh, "select action, count(*) from fct_file_touches group by 1 order by 1") == [
        ("create", 1), ("edit", 3), ("view", 3)]


def test_lantern_cli_1_0_78_session_folders(tmp_path):
    home = tmp_path / "home"
    shutil.copytree(real(*LANTERN), home)
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select count(*), sum(n_turns), min(n_turns), max(n_turns) from dim_sessions") == [(4, 4, 1, 1)]
    assert rows(wh, "select title, n_tool_calls, n_failed_tool_calls from dim_sessions "
                    "where n_failed_tool_calls > 0") == [
        ("In src/orders.py make average_item_price return 0 when the cart has no items.", 2, 2)]
    assert rows(wh, "select distinct error_message from fct_tool_calls where not is_success") == [
        ('"path": Required',)]
    # a local model through BYOK: Copilot logged its cost as 0 nano-AIU, and 0 it is
    assert rows(wh, "select distinct model, usage_source, cost_source, nano_aiu from fct_usage") == [
        ("qwen3:0.6b", "shutdown", "logged", 0)]
    assert rows(wh, "select f.path from dim_files f") == [("src/orders.py",)]
    assert rows(wh, "select count(*) from dim_projects") == [(1,)]
