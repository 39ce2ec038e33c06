"""Large texts that recur are staged once (stg_texts; issue 29): a system prompt, logged at every start and
resume of a session, is stored one time however many events hold it; its events name it by key, the star reads
it through the key, and a text no row names any more is removed."""

from __future__ import annotations

import json
import shutil

import pytest

from pipeline.ingest import ingest

from .conftest import rows

PROMPT = "You are the GitHub Copilot CLI.\nCurrent working directory: {cwd}\n" + "Follow the rules. " * 300


def _log(home, sid: str, prompt: str, resumes: int = 1) -> None:
    """A session log: start (no context), the system prompt, a prompt and an answer, then ``resumes`` resumes that
    log the prompt again."""
    folder = home / "session-state" / sid
    folder.mkdir(parents=True, exist_ok=True)
    events = [{"type": "session.start", "data": {"sessionId": sid, "copilotVersion": "1.0.40"},
               "timestamp": "2026-11-01T10:00:00.000Z"}]
    for leg in range(resumes + 1):
        if leg:
            events.append({"type": "session.resume", "data": {}, "timestamp": f"2026-11-01T1{leg}:00:00.000Z"})
        events += [
            {"type": "system.message", "data": {"content": prompt}, "timestamp": f"2026-11-01T1{leg}:00:01.000Z"},
            {"type": "user.message", "data": {"content": f"step {leg}"}, "timestamp": f"2026-11-01T1{leg}:00:02.000Z"},
            {"type": "assistant.message", "data": {"content": "done", "messageId": f"m{leg}"},
             "timestamp": f"2026-11-01T1{leg}:00:03.000Z"},
        ]
    (folder / "events.jsonl").write_text("".join(json.dumps(e) + "\n" for e in events), encoding="utf-8")


def _texts(warehouse) -> list[tuple]:
    return rows(warehouse, "select text_key, length(text) from stg_texts order by 1")


@pytest.mark.parametrize("through_parts", [False, True])
def test_a_system_prompt_is_stored_once_however_many_events_hold_it(tmp_path, monkeypatch, through_parts):
    if through_parts:  # every add writes a Parquet part, loaded by one INSERT per table (a large run's path)
        from pipeline.load.spool import Spool

        monkeypatch.setattr(Spool, "PART_BYTES", 1)
    home, wh = tmp_path / "home", tmp_path / "wh.duckdb"
    prompt = PROMPT.format(cwd="/work/compiler")
    _log(home, "s-a", prompt, resumes=2)
    _log(home, "s-b", prompt, resumes=1)
    ingest(wh, [home])
    assert _texts(wh) == [(rows(wh, "select md5(text) from stg_texts")[0][0], len(prompt))]
    held = rows(wh, "select session_id, content is null, content_key is not null from stg_events "
                    "where event_type = 'system.message' order by session_id, event_index")
    assert held == [("s-a", True, True)] * 3 + [("s-b", True, True)] * 2
    # the text, as it was read, by its key; every other event's text where it always was
    assert rows(wh, "select distinct coalesce(e.content, t.text) from stg_events e left join stg_texts t "
                    "on t.text_key = e.content_key where e.event_type = 'system.message'") == [(prompt,)]
    assert rows(wh, "select count(*) from stg_events where event_type = 'user.message' and content_key is null "
                    "and content like 'step %'") == [(5,)]
    # the star reads the working directory out of it (no session.start context here)
    assert rows(wh, "select session_id, cwd from dim_sessions order by 1") == [("s-a", "/work/compiler"),
                                                                              ("s-b", "/work/compiler")]


def test_a_text_no_row_names_any_more_is_removed_and_one_still_named_is_kept(tmp_path):
    home, wh = tmp_path / "home", tmp_path / "wh.duckdb"
    old, new = PROMPT.format(cwd="/work/old"), PROMPT.format(cwd="/work/new")
    _log(home, "s-a", old)
    _log(home, "s-b", old)
    ingest(wh, [home])
    assert len(_texts(wh)) == 1
    _log(home, "s-a", new)  # rewritten, not grown: its rows are read again
    ingest(wh, [home])
    assert len(_texts(wh)) == 2  # s-b still names the old prompt
    _log(home, "s-b", new)
    ingest(wh, [home])
    assert [n for _k, n in _texts(wh)] == [len(new)]
    assert rows(wh, "select distinct cwd from dim_sessions") == [("/work/new",)]
    # a log grown by another resume: the text is there already
    _log(home, "s-a", new, resumes=2)
    ingest(wh, [home])
    assert len(_texts(wh)) == 1
    assert rows(wh, "select count(*) from stg_events where content_key is not null") == [(5,)]


def test_the_text_of_a_session_gone_from_disk_survives_a_rebuild_from_scratch(tmp_path):
    home, wh = tmp_path / "home", tmp_path / "wh.duckdb"
    gone, kept = PROMPT.format(cwd="/work/gone"), PROMPT.format(cwd="/work/kept")
    _log(home, "s-gone", gone)
    _log(home, "s-kept", kept)
    ingest(wh, [home])
    shutil.rmtree(home / "session-state" / "s-gone")
    ingest(wh, [home], full=True)  # its rows are kept: nothing can read them again
    assert len(_texts(wh)) == 2
    assert rows(wh, "select count(*) from stg_events e where content_key is not null and not exists "
                    "(select 1 from stg_texts t where t.text_key = e.content_key)") == [(0,)]
    assert rows(wh, "select session_id, cwd, is_gone from dim_sessions order by 1") == [
        ("s-gone", "/work/gone", True), ("s-kept", "/work/kept", False)]


def test_a_short_system_message_stays_in_its_row(tmp_path):
    home, wh = tmp_path / "home", tmp_path / "wh.duckdb"
    _log(home, "s-a", "Current working directory: /work/short\nBe brief.")
    ingest(wh, [home])
    assert _texts(wh) == []
    assert rows(wh, "select count(*) from stg_events where event_type = 'system.message' and content_key is null "
                    "and content like 'Current working directory%'") == [(2,)]
    assert rows(wh, "select cwd from dim_sessions") == [("/work/short",)]
