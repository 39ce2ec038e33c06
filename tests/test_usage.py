"""Usage and cost per leg: shutdown shapes, killed legs, usage checkpoints, store rows, prices."""

from __future__ import annotations

import json
import re
import sqlite3
from datetime import date
from decimal import Decimal
from pathlib import Path

import pytest

from pipeline.cli import main
from pipeline.ingest import ingest
from pipeline.transform import prices
from pipeline.transform.usage import is_cumulative

from .conftest import REAL, REAL_NEW, real, rows

_N = 0


def _ev(etype: str, data: dict, ts: str = "2026-08-01T10:00:00Z") -> dict:
    global _N
    _N += 1
    return {"type": etype, "data": data, "id": f"e{_N}", "timestamp": ts}


def _msg(out, model="claude-sonnet-4.6", **kw) -> dict:
    data = {"content": "ok", "toolRequests": [], "outputTokens": out, **kw}
    if model:
        data["model"] = model
    return _ev("assistant.message", data)


def _shutdown(metrics: dict, **kw) -> dict:
    mm = {m: {"requests": {"count": r, "cost": 1}, "usage": {"inputTokens": i, "outputTokens": o,
                                                              "cacheReadTokens": 0, "cacheWriteTokens": 0}}
          for m, (r, i, o) in metrics.items()}
    return _ev("session.shutdown", {"shutdownType": "routine", "modelMetrics": mm, **kw})


def _home(tmp_path: Path, events: list[dict], sid: str = "s1", version: str = "1.0.40") -> Path:
    home = tmp_path / "home"
    folder = home / "session-state" / sid
    folder.mkdir(parents=True, exist_ok=True)
    start = _ev("session.start", {"sessionId": sid, "copilotVersion": version, "context": {"cwd": "/p"}})
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in [start, *events]))
    return home


def _legs(wh) -> list[tuple]:
    return rows(wh, "select leg_index, model, requests, input_tokens, output_tokens, token_source "
                    "from fct_usage_legs order by 1, 2")


def test_per_leg_shutdowns_are_summed(tmp_path):
    events = [_ev("user.message", {"content": "a"}), _msg(100), _msg(50),
              _shutdown({"claude-sonnet-4.6": (2, 1000, 150)}), _ev("session.resume", {}),
              _ev("user.message", {"content": "b"}), _msg(30), _shutdown({"claude-sonnet-4.6": (1, 400, 30)})]
    wh = tmp_path / "w.duckdb"
    ingest(wh, [_home(tmp_path, events)])
    assert _legs(wh) == [(1, "claude-sonnet-4.6", 2, 1000, 150, "shutdown"),
                         (2, "claude-sonnet-4.6", 1, 400, 30, "shutdown")]
    assert rows(wh, "select requests, input_tokens, output_tokens, usage_source from fct_usage") == [
        (3, 1400, 180, "shutdown")]


def test_cumulative_shutdowns_are_differenced(tmp_path):
    events = [_msg(100), _msg(50), _shutdown({"claude-sonnet-4.6": (2, 1000, 150)}),
              _ev("session.resume", {}), _msg(30), _shutdown({"claude-sonnet-4.6": (3, 1400, 180)})]
    wh = tmp_path / "w.duckdb"
    ingest(wh, [_home(tmp_path, events)])
    assert _legs(wh) == [(1, "claude-sonnet-4.6", 2, 1000, 150, "shutdown"),
                         (2, "claude-sonnet-4.6", 1, 400, 30, "shutdown_delta")]


def test_without_output_tokens_the_request_counts_tell_the_shape(tmp_path):
    events = [_msg(None), _msg(None), _shutdown({"m": (2, 1000, 150)}), _ev("session.resume", {}), _msg(None),
              _shutdown({"m": (3, 1400, 180)})]
    wh = tmp_path / "w.duckdb"
    ingest(wh, [_home(tmp_path, events)])
    assert [r[2:5] for r in _legs(wh)] == [(2, 1000, 150), (1, 400, 30)]


def test_shape_rules():
    first = {"m": {"requests": 2, "output_tokens": 150, "input_tokens": 1000}}
    again = {"m": {"requests": 3, "output_tokens": 180, "input_tokens": 1400}}
    assert is_cumulative(again, first, leg_out=30, leg_req=1, version=None)  # 150 + 30
    assert not is_cumulative(again, first, leg_out=180, leg_req=3, version=None)  # its own leg
    assert not is_cumulative(again, None, leg_out=30, leg_req=1, version="1.0.79")  # nothing before it
    # nothing in the log tells: a figure that went down means per leg; else the version decides
    less = {"m": {"requests": 1, "output_tokens": 100, "input_tokens": 500}}
    assert not is_cumulative(less, first, leg_out=None, leg_req=None, version="1.0.79")
    assert is_cumulative(again, first, leg_out=None, leg_req=None, version="1.0.79")
    assert not is_cumulative(again, first, leg_out=None, leg_req=None, version="1.0.40")


def test_a_killed_leg_counts_its_messages_and_leaves_input_unknown(tmp_path):
    events = [_msg(100), _shutdown({"claude-sonnet-4.6": (1, 1000, 100)}), _ev("session.resume", {}),
              _msg(70), _msg(5)]  # killed: no shutdown
    wh = tmp_path / "w.duckdb"
    ingest(wh, [_home(tmp_path, events)])
    assert _legs(wh) == [(1, "claude-sonnet-4.6", 1, 1000, 100, "shutdown"),
                         (2, "claude-sonnet-4.6", 2, None, 75, "message_output_tokens")]
    # the session's input is not known as a whole: NULL, not 1000
    assert rows(wh, "select requests, input_tokens, output_tokens, usage_source, cost_source from fct_usage") == [
        (3, None, 175, "message_output_tokens+shutdown", "unknown")]
    assert rows(wh, "select count(*), count(input_tokens), sum(output_tokens), min(source) from fct_requests") == [
        (3, 0, 175, "messages")]


def test_a_message_without_a_model_takes_the_one_in_use(tmp_path):
    events = [_ev("session.model_change", {"newModel": "gpt-5-mini"}), _msg(10, model=None),
              _ev("session.model_change", {"newModel": "claude-haiku-4.5"}), _msg(20, model=None)]
    wh = tmp_path / "w.duckdb"
    ingest(wh, [_home(tmp_path, events)])
    assert rows(wh, "select model, output_tokens from fct_usage order by 1") == [("claude-haiku-4.5", 20),
                                                                                 ("gpt-5-mini", 10)]


def test_usage_checkpoints_price_the_requests_between_them(tmp_path):
    ck = lambda n: _ev("session.usage_checkpoint", {"totalNanoAiu": n})  # noqa: E731
    events = [_msg(10), ck(3_000_000_000),  # 3 credits, one model: logged
              _msg(10, model="gpt-5-mini"), _msg(10), ck(5_000_000_000),  # 2 credits, two models: shared
              _msg(10)]  # after the last checkpoint: no figure
    wh = tmp_path / "w.duckdb"
    ingest(wh, [_home(tmp_path, events)])
    # the second interval is shared by its two models in proportion to the price of their output ($15 and $2
    # per million): an estimate; sonnet's request after the last checkpoint has no figure: unknown
    got = rows(wh, "select model, nano_aiu, ai_credits::varchar, cost_source from fct_usage_legs order by 1")
    assert got == [("claude-sonnet-4.6", None, None, "unknown"), ("gpt-5-mini", None, "0.235294118", "estimated")]
    # without the unpriced tail every request is covered: the whole is the logged 5 credits
    events = events[:-1]
    wh2 = tmp_path / "w2.duckdb"
    ingest(wh2, [_home(tmp_path / "2", events)])
    got = rows(wh2, "select model, ai_credits, cost_source from fct_usage_legs order by 1")
    sonnet_share = Decimal(15) / (Decimal(15) + Decimal(2))  # output rates $15 and $2 per million
    assert got[0][0] == "claude-sonnet-4.6" and got[0][2] == "estimated"
    assert abs(got[0][1] - (3 + 2 * sonnet_share)) < Decimal("1e-8")
    assert got[1][0] == "gpt-5-mini" and abs(got[1][1] - 2 * (1 - sonnet_share)) < Decimal("1e-8")
    assert rows(wh2, "select sum(ai_credits) from fct_usage_legs") == [(Decimal("5.000000000"),)]


def test_an_intervals_cost_is_shared_by_the_prices_of_the_day_it_was_logged(tmp_path):
    # o3's output cost $40 per million until 2025-06-10 and $8 since (the bundled table): a checkpoint of May 2025
    # shares its cost by May's prices, whatever day the logs are read on (the share once used today's prices,
    # so the same logs gave other figures on another day)
    assert prices.rates("o3", date(2025, 5, 1)).output == 40 and prices.rates("o3", date(2025, 7, 1)).output == 8
    may = "2025-05-02T10:00:00Z"
    events = [_ev("assistant.message", {"content": "ok", "toolRequests": [], "outputTokens": 10, "model": m}, may)
              for m in ("o3", "claude-sonnet-4.5")]
    events.append(_ev("session.usage_checkpoint", {"totalNanoAiu": 11_000_000_000}, may))
    wh = tmp_path / "w.duckdb"
    ingest(wh, [_home(tmp_path, events)])
    got = dict(rows(wh, "select model, ai_credits from fct_usage_legs"))
    assert got["o3"] + got["claude-sonnet-4.5"] == Decimal(11)  # the logged cost, shared
    assert abs(got["o3"] - Decimal(11) * 40 / 55) < Decimal("1e-8")  # $40 against sonnet's $15, not $8


def test_store_rows_win_over_the_messages_of_their_leg(tmp_path):
    home = _home(tmp_path, [_ev("user.message", {"content": "a"}), _msg(40)])
    con = sqlite3.connect(home / "session-store.db")
    con.execute("create table assistant_usage_events (id integer primary key, session_id text, model text, "
                "input_tokens integer, output_tokens integer, cache_read_tokens integer, cache_write_tokens "
                "integer, total_nano_aiu integer, request_multiplier real, created_at text)")
    con.execute("insert into assistant_usage_events values (1, 's1', 'claude-sonnet-4.6', 1000, 40, 200, 0, "
                "3460000000, 1.0, '2026-08-01T10:00:05Z')")
    con.commit()
    con.close()
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home])
    assert rows(wh, "select request_id, turn_index, input_tokens, output_tokens, nano_aiu, source "
                    "from fct_requests") == [("store:1", 0, 1000, 40, 3460000000, "store_usage_events")]
    assert rows(wh, "select requests, input_tokens, premium_requests, ai_credits::varchar, cost_source, usage_source "
                    "from fct_usage") == [(1, 1000, Decimal("1"), "3.460000000", "logged", "store_usage_events")]


def test_an_estimate_needs_a_price_and_known_tokens():
    sonnet = prices.rates("claude-sonnet-4.6")
    assert sonnet is not None and (sonnet.input, sonnet.output) == (Decimal(3), Decimal(15))
    # fresh input = input - cache read - cache write; auto model selection is 10% off
    assert sonnet.usd(596075, 6315, 536945, 56757) == Decimal("0.47576625")
    assert sonnet.usd(596075, 6315, 536945, 56757, auto=True) == Decimal("0.428189625")
    assert prices.rates("claude-opus-4.6").ref.endswith("anthropic/claude-opus-4-6")  # the maker's rate
    assert prices.rates("gpt-4o") is None  # listed by Copilot without a rate (included in the plan)
    assert prices.rates("qwen3:0.6b") is None  # a local model: no price anywhere


def test_estimates_reproduce_the_logged_cost_of_real_logs():
    """Where a real shutdown logs both tokens and nano-AIU, the price table gives the same figure."""
    logs = sorted(REAL.glob("*/copilot-home/session-state/*/events.jsonl")) + sorted(
        REAL_NEW.glob("*/copilot-home/session-state/*/events.jsonl"))
    if not logs:
        pytest.skip(f"real samples not available at {REAL}")
    checked = 0
    for log in logs:
        auto = False
        for line in log.read_bytes().splitlines():
            e = json.loads(line)
            d = e.get("data") or {}
            auto = auto or e.get("type") == "session.auto_mode_resolved"
            if e.get("type") != "session.shutdown" or len(d.get("modelMetrics") or {}) != 1:
                continue
            (model, m), = d["modelMetrics"].items()
            u = m["usage"]
            if not m.get("totalNanoAiu") or not u.get("inputTokens"):
                continue
            usd = prices.rates(model).usd(u["inputTokens"], u["outputTokens"], u.get("cacheReadTokens"),
                                          u.get("cacheWriteTokens"), auto)
            assert usd * 100 * prices.NANO_PER_CREDIT == m["totalNanoAiu"], (log, model)
            checked += 1
    assert checked >= 8


def test_usage_shows_premium_requests_and_the_legs_that_lack_them(tmp_path, capsys):
    wh = tmp_path / "w.duckdb"
    ingest(wh, [real("softwaresalt-agent-engram", "copilot-home")])
    assert main(["usage", "--by", "session", "--warehouse", str(wh), "--format", "json"]) == 0
    got = {r["session_id"][:8]: r for r in json.loads(capsys.readouterr().out)["rows"]}
    # 8baa78ec: its legs' shutdowns say 15 and 9 premium requests of opus (and 0 of its haiku subagent); the
    # fourth leg has no shutdown: summed as known, with the leg that lacks them named
    assert got["8baa78ec"]["premium_requests"] == 24.0
    assert "1 without premium requests" in got["8baa78ec"]["unknown"]
    assert main(["usage", "--by", "model", "--warehouse", str(wh)]) == 0
    table = capsys.readouterr().out
    assert "premium" in table.splitlines()[0]


def test_usage_reads_like_a_usage_tool(tmp_path, capsys):
    from pipeline.usage_report import budget, period_end, period_start, render, status_line, usage_table
    from pipeline.warehouse import connect

    wh = tmp_path / "w.duckdb"
    ingest(wh, [real("softwaresalt-agent-engram", "copilot-home"), real("shinelu2013-myAssistant", "copilot-home")])
    today = date(2026, 12, 2)
    assert period_start("7d", today) == date(2026, 11, 26) and period_start("today", today) == today
    assert period_start("this-month", today) == date(2026, 12, 1)
    assert period_start("last-month", today) == date(2026, 11, 1) and period_end("last-month", today) == date(
        2026, 11, 30)
    con = connect(wh, read_only=True)
    try:
        months = usage_table(con, "month")
        assert [r["month"] for r in months.rows] == sorted({r["month"] for r in months.rows})
        assert all(re.fullmatch(r"\d{4}-\d\d", r["month"]) for r in months.rows)
        assert all(re.fullmatch(r"\d{4}-W\d\d", r["week"]) for r in usage_table(con, "week").rows)
        sessions = usage_table(con, "session")
        assert sessions.columns[:4] == ["date", "session_id", "project", "title"]
        assert "sessions" not in sessions.columns
        assert [r["date"] for r in sessions.rows] == sorted(r["date"] for r in sessions.rows)
        # a budget of the month the logs are from: the spend, and over or not
        first = next(r for r in months.rows if r["cost_usd"])
        month = date.fromisoformat(first["month"] + "-15")
        line, over = budget(con, Decimal("0.01"), "month", month)
        assert over and line.startswith(f"this month ({first['month']}): ${first['cost_usd']:,.2f} of $0.01")
        assert budget(con, Decimal(10_000), "month", month)[1] is False
        assert status_line(con, month).startswith("Copilot today $")
        # a narrow terminal: fewer figure columns, every line within the width; CJK titles by display width
        from pipeline.usage_report import _width
        wide = render(sessions, "table").splitlines()
        ends = set()
        for r in sessions.rows:  # the USD column ends in the same terminal column on every row, CJK titles too
            line = next(x for x in wide if x.split()[1] == r["session_id"][:8])
            usd = f"${r['cost_usd']:,.2f}" if r["cost_usd"] is not None else "—"
            cut = line.index("  " + usd + "  ") + 2 + len(usd) if usd != "—" else None
            if cut:
                ends.add(_width(line[:cut]))
        assert len(ends) == 1 and any(re.search(r"[\u4e00-\u9fff]", r["title"] or "") for r in sessions.rows)
        narrow = render(sessions, "table", 100)
        assert all(len(x) <= 100 for x in narrow.splitlines()[:-1])
        assert "cache write" not in narrow.splitlines()[0] and "USD" in narrow.splitlines()[0]
    finally:
        con.close()
    assert main(["usage", "--warehouse", str(wh), "--budget", "1000000"]) == 0
    assert capsys.readouterr().out.startswith("this month (")
    assert main(["usage", "--warehouse", str(wh), "--since", "not-a-day"]) == 2
