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
from urllib.parse import unquote, urlparse

import pytest

from pipeline.ingest import ingest

from .conftest import REAL, REAL_NEW, real, rows

VIBE = ("Mai0313-VibeCodingTracker",)
LANTERN = ("WildChildForLife-lantern", "fixtures", "copilot-home")
# every folder of both batches (the newest, real-samples-new/, until it moves into real-samples/)
HOMES = sorted({p.parent.name for root in (REAL, REAL_NEW) for p in root.glob("*/copilot-home")}) + \
    sorted({p.parent.name for root in (REAL, REAL_NEW) for p in root.glob("*/vscode-user")
            if not (p.parent / "copilot-home").exists()})


def _ingest_folder(folder: str, tmp_path: Path) -> Path:
    base = real(folder)
    homes = [base / "copilot-home"] if (base / "copilot-home").is_dir() else []
    users = sorted(p for p in base.glob("vscode-user*") if p.is_dir())  # vscode-user-oss: a Code - OSS one
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
    leg, checkpoints, shutdown_nano, errors = 0, [], [], 0
    for i, e in enumerate(events):
        t, d = e.get("type"), e.get("data") or {}
        if i == 0 or t in ("session.start", "session.resume"):
            leg += 1
        if t == "user.message" and _typed(d.get("content")) and not str(d.get("source") or "").startswith("skill-"):
            prompts += 1  # a skill's file the CLI injects (`source: skill-<name>`) is no prompt
        elif t == "assistant.message":
            legs[leg]["output"] += d.get("outputTokens") or 0
            legs[leg]["requests"].add(d.get("apiCallId") or d.get("serviceRequestId") or e.get("id"))
            calls.update(r.get("toolCallId") for r in d.get("toolRequests") or [])
        elif t == "tool.execution_start":
            calls.add(d.get("toolCallId"))
        elif t == "tool.execution_complete":
            calls.add(d.get("toolCallId"))
            outcome[d.get("toolCallId")] = d.get("success")
        elif t == "session.error":
            errors += 1
        elif t == "session.usage_checkpoint" and d.get("totalNanoAiu") is not None:
            checkpoints.append(d["totalNanoAiu"])
        elif t == "session.shutdown" and d.get("totalNanoAiu") is not None and (
                d.get("modelMetrics") or d["totalNanoAiu"]):
            shutdown_nano.append(d["totalNanoAiu"])  # `modelMetrics: {}` with 0: nothing new, not free
    # logged cost: the running total of a CLI that keeps usage checkpoints, else each leg's own shutdown
    nano = max(checkpoints + shutdown_nano) if checkpoints else (sum(shutdown_nano) if shutdown_nano else None)
    return {"prompts": prompts, "errors": errors, "calls": len(calls), "ok": sum(v is True for v in outcome.values()),
            "failed": sum(v is False for v in outcome.values()), "nano": nano,
            "legs": {n: (v["output"], len(v["requests"])) for n, v in legs.items() if v["requests"]}}


def _logs(folder: str) -> dict[str, Path]:
    state = real(folder) / "copilot-home" / "session-state"
    out = {p.parent.name: p for p in state.glob("*/events.jsonl")}
    out.update({p.stem: p for p in state.glob("*.jsonl")})
    return out


# ---------------------------------------------------------------------------------- VS Code, counted the same way
def _replay(path: Path):
    """A chat session file as its last state: a flat .json, or a mutation log replayed (kind 0 the state,
    1 set, 2 push with an optional truncation, 3 delete)."""
    if path.suffix == ".json":
        return json.loads(path.read_bytes().lstrip(b"\xef\xbb\xbf"))
    state = None
    for line in path.read_bytes().split(b"\n"):
        if not line.strip():
            continue
        e = json.loads(line)
        if e["kind"] == 0:
            state = e["v"]
            continue
        keys, parent = e.get("k") or [], state
        for k in keys[:-1]:
            parent = parent[k]
        if e["kind"] == 1:
            if isinstance(parent, list) and keys[-1] == len(parent):
                parent.append(e["v"])
            else:
                parent[keys[-1]] = e["v"]
        elif e["kind"] == 2:
            target = parent[keys[-1]] if keys else parent
            if isinstance(e.get("i"), int):
                del target[e["i"]:]
            target.extend(e["v"] if isinstance(e["v"], list) else [e["v"]])
        elif e["kind"] == 3:
            parent.pop(keys[-1]) if isinstance(parent, dict) else parent.__delitem__(keys[-1])
    return state


def _workspace_folder(storage: Path) -> str | None:
    ws = storage / "workspace.json"
    if not ws.is_file():
        return None
    folder = json.loads(ws.read_bytes()).get("folder")
    return unquote(urlparse(folder).path) if isinstance(folder, str) else None  # a multi-root one: no folder


def _result_text(entry: dict) -> str:
    out = []

    def walk(node):
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                if node.get("lineBreakBefore") and out and not out[-1].endswith("\n"):
                    out.append("\n")
                out.append(node["text"])
            for key in ("node", "children", "value"):
                if key in node and not isinstance(node[key], str):
                    walk(node[key])
        elif isinstance(node, list):
            for n in node:
                walk(n)
    for part in entry.get("content") or []:
        out.append(part["value"]) if isinstance(part.get("value"), str) else walk(part.get("value"))
    return "".join(out)


def _answering_model(req: dict) -> str | None:
    """The selected model unless auto / missing, else the one `result.details` names (display name as id),
    else `resolvedModel`."""
    result = req.get("result") or {}
    selected = re.sub(r"^(copilot|github\.copilot-chat)/", "", req.get("modelId") or "")
    if selected and selected != "auto":
        return selected
    details = (result.get("details") or "").split("•")[0]
    details = re.sub(r"\((preview|beta|experimental)\)", "", details, flags=re.I).strip().lower()
    return re.sub(r"\s+", "-", details) or (result.get("metadata") or {}).get("resolvedModel")


def _count_chat(doc: dict) -> dict:
    """What one chat session's file says, per the reference (more-sources.md §9): prompts (a "Continue"
    click is none), tool calls of the rounds joined to toolCallResults by id (parts only where a request has
    no rounds; a call left by maxToolCallsExceeded runs in the click after), failures, outputs, tokens,
    requests answered, models, errors, cancellations, title."""
    out = {"prompts": 0, "clicks": 0, "calls": 0, "failed": 0, "outputs": 0, "requests": 0, "input": 0,
           "output": 0, "models": {}, "status": [], "title": doc.get("customTitle"), "first": None}
    for req in doc.get("requests") or []:
        text = _typed((req.get("message") or {}).get("text"))
        if req.get("confirmation"):
            out["clicks"] += 1
        elif text:
            out["prompts"] += 1
            out["first"] = out["first"] or text
        result, response = req.get("result") or {}, [p for p in req.get("response") or [] if isinstance(p, dict)]
        meta = result.get("metadata") or {}
        results = meta.get("toolCallResults") or {}
        rounds = [c for r in meta.get("toolCallRounds") or [] for c in r.get("toolCalls") or []]
        for c in rounds:
            if c["id"] in results:
                out["calls"] += 1
                text_out = _result_text(results[c["id"]])
                out["failed"] += text_out.lstrip().startswith("ERROR while calling tool:")
                out["outputs"] += 1
            elif not meta.get("maxToolCallsExceeded"):
                out["calls"] += 1
        parts = [p for p in response if p.get("kind") == "toolInvocationSerialized"]
        if not rounds:
            out["calls"] += len(parts)
        state = (req.get("modelState") or {}).get("value")
        error = bool(result.get("errorDetails")) or state == 3 or (
            any(p.get("kind") == "warning" for p in response) and not parts
            and not any("value" in p and "kind" not in p for p in response))
        status = "error" if error else "cancelled" if state == 2 or req.get("isCanceled") is True else "ok"
        answered = bool(result or parts or any("value" in p and "kind" not in p for p in response))
        if answered and not (status == "error" and not parts):
            out["requests"] += 1
            model = _answering_model(req) or "(unknown)"
            out["models"][model] = out["models"].get(model, 0) + 1
        for src in (req, result.get("usage") or {}, meta):
            if isinstance(src.get("promptTokens"), int):
                out["input"] += src["promptTokens"]
                break
        for src in (req, result.get("usage") or {}, meta):
            n = src.get("completionTokens", src.get("outputTokens"))
            if isinstance(n, int):
                out["output"] += n
                break
        if not req.get("confirmation") and text:
            code = (result.get("errorDetails") or {}).get("code") or ("warning" if error is True else None)
            out["status"].append((status, code if status == "error" else None))
    return out


def _chat_sessions(folder: str) -> dict[str, tuple[dict, str | None]]:
    """session id -> (its chat file counted, its workspace folder), every VS Code User folder of ``folder``."""
    out = {}
    for user in sorted(real(folder).glob("vscode-user*")):
        files = [(f, _workspace_folder(f.parent.parent))
                 for f in sorted(user.glob("workspaceStorage/*/chatSessions/*"))]
        files += [(f, None) for f in sorted(user.glob("globalStorage/emptyWindowChatSessions/*"))]
        for f, cwd in files:
            doc = _replay(f)
            out[doc.get("sessionId") or f.stem] = (_count_chat(doc), cwd)
    return out


def _transcripts(folder: str) -> dict[str, Path]:
    return {p.stem: p for p in sorted(real(folder).glob("vscode-user*/workspaceStorage/*/GitHub.copilot-chat/"
                                                        "transcripts/*.jsonl"))}


def _title(text: str) -> str:
    """A title as a list shows it: on one line, at most 120 characters."""
    one = " ".join(text.split())
    return one if len(one) <= 120 else one[:119] + "…"


def _check_vscode(folder: str, wh: Path) -> int:
    """Every chat session and transcript of the folder against the warehouse; returns how many were checked."""
    chats, checked = _chat_sessions(folder), 0
    for sid, (want, cwd) in sorted(chats.items()):
        got = rows(wh, "select n_turns, n_continuations, n_tool_calls, n_failed_tool_calls, cwd, title "
                       "from dim_sessions where session_id = ?", [sid])
        if want["prompts"] == 0 and want["requests"] == 0 and not want["status"] and sid not in _transcripts(folder):
            assert got == [], (folder, sid, "an empty stub is no session")
            continue
        failed_title = re.match(r"(?i)sure, please provide", want["title"] or "")
        title = want["title"] if want["title"] and not failed_title else want["first"]
        assert got and got[0][:5] == (want["prompts"], want["clicks"], want["calls"], want["failed"], cwd), \
            (folder, sid, got, want)
        assert got[0][5] == _title(title), (folder, sid)
        assert rows(wh, "select count(*) filter (where result_content is not null), "
                        "count(*) filter (where not is_success) from fct_tool_calls where session_id = ?",
                    [sid]) == [(want["outputs"], want["failed"])], (folder, sid)
        assert rows(wh, "select coalesce(sum(input_tokens), 0), coalesce(sum(output_tokens), 0), count(*) "
                        "from fct_requests where session_id = ?", [sid]) == [
            (want["input"], want["output"], want["requests"])], (folder, sid)
        assert dict(rows(wh, "select model, count(*) from fct_requests where session_id = ? group by 1",
                         [sid])) == want["models"], (folder, sid)
        assert rows(wh, "select status, error_code from fct_turns where session_id = ? order by turn_index",
                    [sid]) == want["status"], (folder, sid)
        checked += 1
    for sid, path in _transcripts(folder).items():  # sessions known only from their transcript
        if sid in chats:
            continue
        events = [json.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        users = [e["data"].get("content") or "" for e in events if e["type"] == "user.message"]
        clicks = [u for u in users if re.fullmatch(r'(Continue: "Continue to iterate\?"|Try Again)', u.strip())]
        prompts = [u for u in users if _typed(u) and u not in clicks]
        starts = {e["data"]["toolCallId"] for e in events if e["type"] == "tool.execution_start"}
        assert rows(wh, "select n_turns, n_continuations, n_tool_calls, title from dim_sessions where session_id = ?",
                    [sid]) == [(len(prompts), len(clicks), len(starts), _title(_typed(prompts[0])))], (folder, sid)
        checked += 1
    return checked


@pytest.mark.parametrize("folder", HOMES or ["(real samples absent)"])
def test_every_real_home_matches_its_own_files(folder, tmp_path):
    if not HOMES:
        pytest.skip(f"real samples not available at {REAL}")
    wh = _ingest_folder(folder, tmp_path)
    logs = _logs(folder)
    for sid, log in sorted(logs.items()):
        want = _count(log)
        assert rows(wh, "select n_turns, n_tool_calls, n_failed_tool_calls, n_errors from dim_sessions "
                        "where session_id = ?", [sid]) == [(want["prompts"], want["calls"], want["failed"],
                                                            want["errors"])], (folder, sid)
        assert rows(wh, "select count(*) filter (where is_success), count(*) filter (where not is_success) "
                        "from fct_tool_calls where session_id = ?", [sid]) == [(want["ok"], want["failed"])]
        got_legs = {n: (int(out or 0), req) for n, out, req in rows(
            wh, "select leg_index, sum(output_tokens), sum(requests) from fct_usage_legs where session_id = ? "
                "group by 1", [sid]) if req}
        assert got_legs == want["legs"], (folder, sid)
        if want["nano"] is not None:
            assert rows(wh, "select sum(nano_aiu), bool_and(cost_source = 'logged') from fct_usage "
                            "where session_id = ?", [sid]) == [(want["nano"], True)], (folder, sid)
    _check_vscode(folder, wh)
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
    # a chat session dates a tool call by its round (when the model asked for it), never by the request's end;
    # when it ran and ended is not recorded
    assert rows(wh, "select count(*), count(requested_at), count(started_at), count(completed_at) "
                    "from fct_tool_calls") == [(4, 4, 4, 0)]
    assert rows(wh, "select count(*) from fct_tool_calls c join fct_turns t using (session_id, turn_index) "
                    "where c.requested_at < t.started_at or c.requested_at > t.ended_at") == [(0,)]
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


# ---------------------------------------------------------------------------------- the fourth batch's cases
def test_vscode_calls_joined_by_id_with_outputs_failures_and_the_deferred_call(tmp_path):
    wh = _ingest_folder("cuong75201-Arch-dotfile-b4", tmp_path)
    # 4c0b3fe9 prompt 1: read_file demo/pom.xml failed validation (its toolCallResults entry), the last call worked
    got = rows(wh, "select tool_name, is_success, left(error_message, 39), result_chars > 0 from fct_tool_calls "
                   "where session_id like '4c0b3fe9%' and turn_index = 0 order by requested_at, tool_call_id")
    assert got[0] == ("read_file", False, "ERROR while calling tool: Invalid input", True)
    assert [g[1] for g in got[1:]] == [True] * 6 and all(g[3] for g in got)
    # tokens in result.metadata (0.38): request 3 is 41,511 in / 685 out; 9bf9f1ba request 5 35,998 / 101
    assert rows(wh, "select session_id[:8], input_tokens, output_tokens, model, selected_model from fct_requests "
                    "where input_tokens in (41511, 35998) order by 1") == [
        ("4c0b3fe9", 41511, 685, "claude-haiku-4.5", "auto"), ("9bf9f1ba", 35998, 101, "claude-haiku-4.5", "auto")]
    # cancellations (modelState 2) are prompts with status cancelled; a multi-root workspace names no folder
    assert rows(wh, "select session_id[:8], turn_index from fct_turns where status = 'cancelled' order by 1") == [
        ("4c0b3fe9", 3), ("89c6e1eb", 0), ("e43eefbe", 0)]
    assert rows(wh, "select count(*) from dim_sessions where cwd like '%/Code/Workspaces/%' "
                    "or cwd like '%1773210789679%'") == [(0,)]
    assert rows(wh, "select count(*) from dim_projects where name = '1773210789679'") == [(0,)]
    wh = _ingest_folder("aholicg-Debian-b4", tmp_path)
    # 57354b3e: request 0 hit maxToolCallsExceeded, its 47th call ran after the "Continue" click: 66 calls ran
    assert rows(wh, "select n_turns, n_continuations, n_tool_calls from dim_sessions where session_id like '57354b3e%'"
                ) == [(2, 1, 66)]
    # 0d90d5be: rate-limited, an error and no answered request; f25b9a1e (transcript only): 3 clicks, 1 prompt
    assert rows(wh, "select status, error_code from fct_turns where session_id like '0d90d5be%'") == [
        ("error", "rateLimited")]
    assert rows(wh, "select count(*) from fct_requests where session_id like '0d90d5be%'") == [(0,)]
    assert rows(wh, "select n_turns, n_continuations, title like 'Tôi được giao%' from dim_sessions "
                    "where session_id like 'f25b9a1e%'") == [(1, 3, True)]
    # the two empty-window stubs and the kind-0 stub are no sessions
    assert rows(wh, "select count(*) from dim_sessions where session_id similar to '(175b4520|821115e7).*'") == [(0,)]


def test_vscode_models_that_answered(tmp_path):
    wh = _ingest_folder("Hanamizuiro-dotfiles-b4", tmp_path)
    # d697283c request 0 has no modelId: result.details says "GPT-4.1 • 0x" (not the next request's model)
    assert rows(wh, "select model, selected_model from fct_turns where session_id like 'd697283c%' "
                    "and turn_index = 0") == [("gpt-4.1", None)]
    assert rows(wh, "select model, requests, premium_requests from fct_usage where session_id like 'd697283c%' "
                    "order by 1") == [("claude-3.7-sonnet", 1, None), ("claude-sonnet-4", 4, Decimal(4)),
                                      ("gpt-4.1", 1, Decimal(0))]
    wh = _ingest_folder("co-z-dotfiles-b4", tmp_path)
    # "Raptor mini (Preview)" under auto; a failed title generation is no title
    assert rows(wh, "select distinct model, selected_model from fct_requests") == [("raptor-mini", "auto")]
    assert rows(wh, "select title from dim_sessions") == [("/explain",)]
    wh = _ingest_folder("pranavjrat-.config-b4", tmp_path)
    assert rows(wh, "select model from fct_usage order by 1") == [("claude-sonnet-4",), ("gpt-4.1",)]


def test_cli_skill_context_errors_assets_and_active_time(tmp_path):
    wh = _ingest_folder("mitchwindoo-github-copilot-b4", tmp_path)
    # f9aa7b7b: the skill's file (source skill-...) is no prompt; its work is the prompt's before it
    assert rows(wh, "select n_turns, n_continuations from dim_sessions where session_id like 'f9aa7b7b%'") == [(2, 1)]
    # agent host sessions ran in VS Code; 17960a88: 7 minutes of work, re-opened 19 days later
    assert rows(wh, "select distinct client from dim_sessions") == [("vscode",)]
    active, span = rows(wh, "select active_s, duration_s from dim_sessions where session_id like '17960a88%'")[0]
    assert span > 18 * 86400 and active < 3600
    # binary assets: id, type, size kept, not the base64 image
    assets = sum(log.read_bytes().count(b'"type":"session.binary_asset"') for log in
                 _logs("mitchwindoo-github-copilot-b4").values())
    assert assets > 0
    assert rows(wh, "select count(*), max(length(extra)) < 400, bool_and(extra like '%sha256:%') "
                    "from stg_events where event_type = 'session.binary_asset'") == [(assets, True, True)]
    # a workspace.yaml with **bold** in a quoted name parses; its title is one line
    assert rows(wh, "select count(*) from _rejects where reason like '%anchors%'") == [(0,)]
    assert rows(wh, "select title not like '%' || chr(10) || '%' and length(title) <= 120 from dim_sessions "
                    "where session_id like '51d50364%'") == [(True,)]
    # 51b97709: an <overview> closed by </history> keeps its overview and history
    assert rows(wh, "select overview like 'The user is setting up a Docker%', length(history) > 1000 "
                    "from fct_checkpoints where session_id like '51b97709%'") == [(True, True)]
    wh = _ingest_folder("yenkaiwang-nividaClaw-b4", tmp_path)
    # provider errors of BYOK models in CI (401 key, 404 model, 504): each prompt's and its session's error
    assert rows(wh, "select session_id[:8], status, error_code, error_message like '%HTTP 401%' from fct_turns "
                    "where status = 'error' order by 1") == [
        ("23495593", "error", "404", False), ("7de4e80e", "error", "401", True), ("b5b0590d", "error", "504", False)]
    assert rows(wh, "select sum(n_errors), count(error_message) from dim_sessions") == [(3, 3)]


def test_cost_is_the_logged_running_total_when_model_metrics_leave_a_prompt_out(tmp_path):
    wh = _ingest_folder("jasonyannn-Proxima-b4", tmp_path)
    # 9f89aa39: modelMetrics 29 requests / 11,484 output / 4,420,152,000 nano-AIU; the session logged
    # 5,454,144,000 and its messages 34 requests / 14,330 output tokens: the first prompt was left out
    assert rows(wh, "select model, requests, output_tokens, input_tokens, nano_aiu, premium_requests, cost_source, "
                    "usage_source from fct_usage where session_id like '9f89aa39%'") == [
        ("mai-code-1.1-flash", 34, 14330, None, 5454144000, Decimal(5), "logged", "shutdown_messages")]


def test_final_answers_apart_from_progress_notes_and_permission_events_known(tmp_path):
    # CLI 1.0.8x marks each assistant message commentary (a progress note) or final_answer: counted from the logs
    wh = _ingest_folder("mitchwindoo-github-copilot", tmp_path)
    finals, notes, permissions = set(), set(), 0
    for log in _logs("mitchwindoo-github-copilot").values():
        for line in log.read_bytes().splitlines():
            obj = json.loads(line) if line.strip() else {}
            data = obj.get("data") if isinstance(obj.get("data"), dict) else {}
            text = (data.get("content") or "").strip() if isinstance(data.get("content"), str) else ""
            if obj.get("type") == "assistant.message" and text:
                (finals if data.get("phase") == "final_answer" else notes if data.get("phase") == "commentary"
                 else set()).add(text)
            permissions += obj.get("type") == "session.permissions_changed"
    assert finals and notes
    stored = "\n\n".join(r[0] for r in rows(wh, "select final_answer from fct_turns where final_answer is not null"))
    assert all(t in stored for t in finals)
    assert not any(t in stored for t in notes - finals)  # progress notes stay out of the answers
    answers = "\n\n".join(r[0] for r in rows(wh, "select assistant_response from fct_turns "
                                                 "where assistant_response is not null"))
    assert all(t in answers for t in finals | notes)  # ... and in assistant_response, every message as before
    # session.permissions_changed is an event this version knows
    assert permissions > 0
    assert rows(wh, "select count(*) from stg_events where event_type = 'session.permissions_changed'") == [
        (permissions,)]
    from pipeline.vocabulary import KNOWN_TYPES
    assert rows(wh, "select sum(n_unknown_events) from dim_sessions")[0][0] == sum(
        1 for log in _logs("mitchwindoo-github-copilot").values() for line in log.read_bytes().splitlines()
        if line.strip() and json.loads(line).get("type") not in KNOWN_TYPES)


def _all_real_sources(tmp_path: Path) -> tuple[list[Path], list[Path]]:
    """Every Copilot home and VS Code User folder of both batches, copied under ``tmp_path`` (tests change them)."""
    folders = [p for root in (REAL, REAL_NEW) if root.is_dir() for p in sorted(root.iterdir()) if p.is_dir()]
    if not folders:
        pytest.skip(f"real samples not available at {REAL}")
    homes, users = [], []
    for k, folder in enumerate(folders):
        for src in [folder / "copilot-home", *sorted(folder.glob("vscode-user*"))]:
            if src.is_dir():
                dst = tmp_path / "homes" / f"{k:02d}-{folder.name}" / src.name
                shutil.copytree(src, dst, symlinks=True)
                (homes if src.name == "copilot-home" else users).append(dst)
    return homes, users


def test_every_real_file_edited_in_place_with_its_mtime_set_back_is_read_again(tmp_path):
    """Every text file of every real folder (logs, workspace.yaml, checkpoints, plans, chats, memories) edited in place
    after an ingest - a word "the" past its middle upper-cased, its size kept and its mtime set back - then ingested
    again: every table equals a full ingest of the edited files (before fingerprints held the change time and inode
    of every source, 18 tables differed)."""
    import os

    from tools.compare import differences

    homes, users = _all_real_sources(tmp_path)
    edited = tmp_path / "edited.duckdb"
    ingest(edited, homes, users)
    n = 0
    for path in sorted(p for top in homes + users for p in top.rglob("*") if p.suffix in (".jsonl", ".json", ".yaml",
                                                                                          ".md")):
        if not path.is_file() or path.is_symlink():
            continue
        data, st = path.read_bytes(), path.stat()
        word = re.compile(rb"\bthe\b")  # in prose: the file stays as readable as it was
        found = word.search(data, len(data) // 2) or word.search(data)
        if found is None:
            continue
        path.write_bytes(data[:found.start()] + b"THE" + data[found.end():])
        os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
        n += 1
    assert n > 200
    again = ingest(edited, homes, users)
    assert again.n_files_read > 150
    whole = tmp_path / "whole.duckdb"
    ingest(whole, homes, users, full=True)
    assert differences(whole, edited) == []


def test_every_real_log_read_as_it_grew_gives_the_warehouse_a_full_ingest_gives(tmp_path):
    """Copilot appends to its logs while a user ingests. Every JSONL file of every real folder (CLI event logs, VS
    Code chat sessions, transcripts, debug logs) cut at a line, then inside a line (a record half written), then
    whole, with an ingest at each step: every table equals one full ingest of the whole files (tools.compare)."""
    from tools.compare import differences

    homes, users = _all_real_sources(tmp_path)
    logs = {p: p.read_bytes() for top in homes + users for p in sorted(top.rglob("*.jsonl"))
            if p.is_file() and not p.is_symlink()}
    assert len(logs) > 50
    grown = tmp_path / "grown.duckdb"

    def at_line(data: bytes) -> bytes:  # the first third of its lines
        lines = data.splitlines(keepends=True)
        return b"".join(lines[:len(lines) // 3])

    summaries = []
    for cut in (at_line, lambda data: data[:len(data) * 2 // 3], lambda data: data):
        for path, data in logs.items():
            path.write_bytes(cut(data))
        summaries.append(ingest(grown, homes, users))
    assert [s.mode for s in summaries] == ["full", "incremental", "incremental"]
    assert summaries[2].n_records > 0 and summaries[2].n_sessions_changed > 20
    whole = tmp_path / "whole.duckdb"
    ingest(whole, homes, users, full=True)
    assert differences(whole, grown) == []


def test_every_real_folder_moved_elsewhere_counts_once(tmp_path):
    """Every real folder ingested, then moved to another place and ingested from there into the same warehouse: the
    old places are gone from disk (their rows kept), and every star and model table equals a fresh ingest of the new
    place. Before, the stores' file touches counted twice and each memory was two (5 of those tables differed)."""
    from pipeline.schema import MODELS, STAR
    from tools.compare import differences

    homes, users = _all_real_sources(tmp_path / "old")
    wh = tmp_path / "w.duckdb"
    ingest(wh, homes, users)
    shutil.move(str(tmp_path / "old"), str(tmp_path / "new"))

    def moved(paths: list[Path]) -> list[Path]:
        return [tmp_path / "new" / p.relative_to(tmp_path / "old") for p in paths]
    summary = ingest(wh, moved(homes), moved(users))
    assert summary.n_files_gone == summary.n_files_read > 200
    fresh = tmp_path / "fresh.duckdb"
    ingest(fresh, moved(homes), moved(users))
    kept = {t.name for t in STAR} | {t.name for t in MODELS}
    others = {r[0] for r in rows(wh, "select table_name from information_schema.tables")} - kept
    assert differences(fresh, wh, skip_tables=others) == []


def test_deleted_real_sessions_are_kept_alike_by_an_incremental_run_and_a_rebuild_from_scratch(tmp_path):
    """A third of the session folders and VS Code chats of every real folder deleted after an ingest (as Copilot prunes
    old sessions): an incremental run keeps their rows, and `ingest --full` afterwards keeps exactly the same - every
    table equal (before, a rebuild lost the checkpoints of deleted session folders)."""
    import random

    from tools.compare import differences

    homes, users = _all_real_sources(tmp_path)
    wh = tmp_path / "w.duckdb"
    ingest(wh, homes, users)
    rng = random.Random(7)
    doomed = [p for top in homes for p in sorted(top.glob("session-state/*")) if rng.random() < 1 / 3] + \
        [p for top in users for p in sorted(top.glob("workspaceStorage/*/chatSessions/*")) if rng.random() < 1 / 3]
    assert len(doomed) > 20
    for path in doomed:
        shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
    assert ingest(wh, homes, users).n_files_gone > 20
    incremental = tmp_path / "incremental.duckdb"
    shutil.copy(wh, incremental)
    ingest(wh, homes, users, full=True)
    assert differences(incremental, wh) == []


def test_a_session_in_two_captures_of_one_home_counts_its_store_rows_once(tmp_path):
    """lkk12014402-auto-round and -auto-round-new are one home captured twice: both stores hold session 124e4a47, the
    later every file row of the earlier (counted here from the SQLite files). Read together, the session's file
    touches and memories are those of the later capture alone - before, 16 of its 50 file touches counted twice
    and one workspace artifact was two memories."""
    import sqlite3

    earlier, later = real("lkk12014402-auto-round", "copilot-home"), real("lkk12014402-auto-round-new", "copilot-home")
    sid = "124e4a47-138d-4d6a-be96-3011a0d30977"

    def file_rows(home: Path) -> set:  # on a copy: opening a store in WAL mode where it lies writes beside it
        copy = tmp_path / home.parent.name
        copy.mkdir(exist_ok=True)
        for name in ("session-store.db", "session-store.db-wal"):
            if (home / name).exists():
                shutil.copyfile(home / name, copy / name)
        con = sqlite3.connect(f"file:{copy / 'session-store.db'}?mode=ro", uri=True)
        try:
            return set(con.execute("select file_path, tool_name, turn_index, first_seen_at from session_files "
                                   "where session_id = ?", [sid]).fetchall())
        finally:
            con.close()
    assert file_rows(earlier) and file_rows(earlier) < file_rows(later)
    both, alone = tmp_path / "both.duckdb", tmp_path / "alone.duckdb"
    ingest(both, [earlier, later])
    ingest(alone, [later])
    for sql in ("select file_id, action, n_touches, first_seen_at, last_seen_at from fct_file_touches "
                "where session_id = ? order by all", "select kind, path, content from fct_memories "
                                                     "where session_id = ? order by all"):
        assert rows(both, sql, [sid]) == rows(alone, sql, [sid])
    assert rows(both, "select sum(n_touches) from fct_file_touches where session_id = ?", [sid]) == [
        (len(file_rows(later)),)]


def test_every_real_folder_ingested_on_its_own_run_gives_the_warehouse_one_run_of_all_gives(tmp_path):
    """Each real folder ingested by a run of its own into one warehouse, then every folder in one run into another:
    every table is equal. Before, a session's duration and active time differed in their last digit with the
    sessions built beside it (polars multiplies by 0.001 where it divides a column of more than one row by 1000:
    5112.864 s alone, 5112.8640000000005 s in a batch)."""
    from tools.compare import differences

    homes, users = _all_real_sources(tmp_path)
    one_by_one = tmp_path / "one-by-one.duckdb"
    for home in homes:
        ingest(one_by_one, [home])
    for user in users:
        ingest(one_by_one, [], [user])
    together = tmp_path / "together.duckdb"
    ingest(together, homes, users)
    assert differences(together, one_by_one) == []
