"""A home holding every source this version reads (issue 31's "done when"): CLI logs, an OpenTelemetry export, the
desktop app's data.db, VS Code chat sessions with their debug logs. Each session appears once, every logged request
and nano-AIU is counted once, and `usage --by agent` splits the requests. The files are made up (test_otel,
test_debug_log, test_desktop build them)."""

import json

from pipeline.cli import main
from pipeline.ingest import ingest

from . import test_debug_log, test_desktop, test_otel
from .conftest import rows


def test_one_home_with_every_source_counts_each_session_and_each_nano_aiu_once(tmp_path, capsys):
    home = test_otel.home_with_otel(tmp_path)  # KILLED (events + spans), SHUT (events + shutdown + span), ONLY
    test_desktop.make_db(home / "data.db")  # d1: known only to the desktop app
    user = tmp_path / "User"
    test_debug_log.debug_folder(user)  # a VS Code chat session with its debug log (and a sub-agent's)
    test_debug_log.chat_session(user)
    wh = tmp_path / "w.duckdb"
    ingest(wh, [home], [user])
    sessions = rows(wh, "select session_id, client from dim_sessions order by 1")
    assert sessions == sorted([(test_otel.KILLED, "cli"), (test_otel.SHUT, "cli"), (test_otel.ONLY, "cli"),
                               ("d1", "cli"), (test_debug_log.SID, "vscode")])
    # each leg's logged cost from one source: spans, a shutdown, the app's totals, the debug log
    shut_nano = next(json.loads(line)["data"]["totalNanoAiu"]
                     for line in (home / "session-state" / test_otel.SHUT / "events.jsonl").read_text().splitlines()
                     if json.loads(line)["type"] == "session.shutdown")
    expected = {test_otel.KILLED: 3_500_000_000 + 1_200_000_000, test_otel.SHUT: shut_nano,
                test_otel.ONLY: 800_000_000, "d1": 4_200_000_000, test_debug_log.SID: 6_566_000_000}
    got = dict(rows(wh, "select session_id, sum(nano_aiu) from fct_usage_legs group by 1"))
    assert got == expected
    assert rows(wh, "select token_source, count(*) from fct_usage_legs group by 1 order by 1") == [
        ("debug_log", 3), ("desktop_totals", 1), ("otel", 2), ("shutdown", 1)]
    # the requests the logs record one by one, each once; by agent they add up to the same
    n_requests = rows(wh, "select count(*) from fct_requests")[0][0]
    assert rows(wh, "select count(*) from (select distinct session_id, request_id from fct_requests)") == [
        (n_requests,)]
    assert main(["usage", "--warehouse", str(wh), "--by", "agent", "--format", "json"]) == 0
    by_agent = json.loads(capsys.readouterr().out)
    assert by_agent["total"]["requests"] == n_requests
    assert {r["agent"] for r in by_agent["rows"]} >= {"main", "executionSubagent"}
    assert main(["usage", "--warehouse", str(wh), "--by", "month", "--format", "json"]) == 0
    by_month = json.loads(capsys.readouterr().out)
    assert round(by_month["total"]["ai_credits"] * 1e9) == sum(expected.values())
