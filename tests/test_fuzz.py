"""Fuzzing every reader: valid records from the sample corpus, one of them mutated.

A mutation is what a hostile or broken file holds: one field of the wrong type, a number beyond int64
or beyond a double, NaN, deep nesting, a lone surrogate, markup or `../` in a text, a field removed;
or the record's bytes truncated, invalid UTF-8 or random bytes put in. For each reader the mutated
record sits between two good ones, and the test asserts what the brief promises: the reader never
fails as a whole, both good records are kept, and the bad one is either kept (converted, clamped,
noted) or is a reject of its own. One test runs the whole CLI on a home full of such files: exit 0.

Examples are derandomized (the same on every run, so CI is reproducible); set
``HYPOTHESIS_PROFILE=explore`` to search with fresh random examples, many more of them, and
``FUZZ_KEEP=DIR`` to keep the home of a failing whole-CLI example there.
"""

from __future__ import annotations

import json
import os
import sqlite3
import tempfile
from pathlib import Path

import yaml
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from pipeline.cli import main
from pipeline.extract import discover
from pipeline.extract.parallel import read_batch

from .conftest import REPO, rows

SAMPLE = REPO / "data" / "sample"
settings.register_profile("ci", derandomize=True, deadline=None, database=None, max_examples=150,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.register_profile("explore", deadline=None, max_examples=2000,
                          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


# ------------------------------------------------------------------------------------- templates
def _json_lines(pattern: str) -> list[dict]:
    out = []
    for f in sorted(SAMPLE.glob(pattern)):
        for line in f.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                obj = json.loads(line)
            except ValueError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
    return out


EVENTS = _json_lines("copilot-home/session-state/*/events.jsonl")
CHAT_REQUESTS = [r for f in sorted(SAMPLE.glob("vscode-user/workspaceStorage/*/chatSessions/*.json"))
                 for r in json.loads(f.read_text(encoding="utf-8-sig")).get("requests", [])]
TIMELINE = [e for f in sorted(SAMPLE.glob("copilot-home/history-session-state/*.json"))
            for e in json.loads(f.read_text())["timeline"]]
METADATA = json.loads(next(SAMPLE.glob("copilot-home/session-state/*/vscode.metadata.json")).read_text())
CHECKPOINT = json.loads(next(SAMPLE.glob("copilot-home/session-state/*/checkpoints/*.json")).read_text())
WORKSPACE = {"id": "s", "cwd": "/home/dev/app", "git_root": "/home/dev/app", "repository": "acme/app",
             "branch": "main", "summary": "a summary", "created_at": "2026-09-01T10:00:00Z"}
MUTATIONS = [{"kind": 1, "k": ["customTitle"], "v": "a title"},
             {"kind": 2, "k": ["requests", 0, "response"], "v": [{"value": "more"}]},
             {"kind": 3, "k": ["requests", 0, "result"]}]
STATE_INDEX = {"version": 1, "entries": {"s1": {"sessionId": "s1", "title": "t", "lastMessageDate": 1789376460000,
                                                "timing": {"created": 1789376400000}, "isEmpty": False}}}
assert EVENTS and CHAT_REQUESTS and TIMELINE


# ------------------------------------------------------------------------------------- mutations
MARK = "\u0000MUTATION\u0000"
_RAW_VALUES = ["1e400", "-1e400", "NaN", "Infinity", "-Infinity", str(2**63), str(-2**63 - 1), str(2**64),
               "1" + "0" * 30, "123456789012345678901234567890.5", '"\\ud800"', '"a\\udfffb"', '"\\u0000"',
               '"../../../etc/passwd"', '"<img src=x onerror=alert(1)>"', '"](javascript:alert(1))"',
               '"9999-99-99T99:99:99Z"', '"-1"', "true", "null", "[]", "{}", '""', '"x"', "0", "-1"]
raw_value = st.one_of(
    st.sampled_from(_RAW_VALUES),
    st.integers(min_value=-2**70, max_value=2**70).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.integers(1, 3000).map(lambda n: "[" * n + "]" * n),  # nesting: what parsers can, and cannot, go
    st.integers(1, 400).map(lambda n: '{"a":' * n + "1" + "}" * n),
    st.recursive(st.none() | st.booleans() | st.integers(-2**40, 2**40) | st.text(max_size=20),
                 lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=5), c, max_size=3),
                 max_leaves=8).map(json.dumps),
)


def _paths(value, path=()):
    yield path
    if isinstance(value, dict):
        for k, v in value.items():
            yield from _paths(v, (*path, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _paths(v, (*path, i))


def _set(value, path, new):
    if not path:
        return new
    value = json.loads(json.dumps(value))
    target = value
    for p in path[:-1]:
        target = target[p]
    if new is _DELETE:
        del target[path[-1]]
    else:
        target[path[-1]] = new
    return value


_DELETE = object()


@st.composite
def mutated(draw, template: dict) -> tuple[bytes, str]:
    """``template`` serialized with one mutation; what was done, for the failure message."""
    how = draw(st.sampled_from(["value", "value", "value", "delete", "truncate", "bytes", "invalid-utf8"]))
    paths = list(_paths(template))
    if how in ("value", "delete"):
        path = draw(st.sampled_from(paths[1:] if how == "delete" and len(paths) > 1 else paths))
        if how == "delete" and path:
            return json.dumps(_set(template, path, _DELETE)).encode(), f"deleted {path}"
        raw = draw(raw_value)
        text = json.dumps(_set(template, path, MARK)).replace(json.dumps(MARK), raw)
        return text.encode(), f"{path} = {raw[:60]}"
    data = json.dumps(template).encode()
    at = draw(st.integers(0, len(data)))
    if how == "truncate":
        return data[:at], f"truncated at {at}"
    if how == "invalid-utf8":
        return data[:at] + b"\xff\xfe\xc3" + data[at:], f"invalid UTF-8 at {at}"
    junk = draw(st.binary(min_size=1, max_size=64))
    return data[:at] + junk + data[at:], f"bytes {junk!r} at {at}"


# ------------------------------------------------------------------------------------- running a reader
def _read(home: Path, user: Path | None, kind: str):
    sources = [s for s in discover([home], [user] if user else []) if s.kind == kind]
    assert sources, kind
    batch = read_batch([(s, None) for s in sources], "fuzz", True)
    for read in batch.reads:
        # a reader never fails as a whole: what it cannot read is a reject of its own
        assert read.error is None, read.error
    return batch, [r for read in batch.reads for r in read.result.rejects]


def _column(batch, table: str, column: str) -> list:
    return batch.tables[table].column(column).to_pylist() if table in batch.tables else []


def _good_event(eid: str) -> bytes:
    return json.dumps({"type": "user.message", "id": eid, "timestamp": "2026-09-01T10:00:00Z",
                       "data": {"content": f"prompt {eid}"}}).encode()


def _three_lines(bad: bytes) -> bytes:
    return _good_event("good-1") + b"\n" + bad + b"\n" + _good_event("good-2") + b"\n"


def _assert_line_log(batch, rejects, n_bad_rows: int, bad: bytes):
    ids = _column(batch, "stg_events", "event_id")
    assert "good-1" in ids and "good-2" in ids
    if n_bad_rows == 0 and bad.strip(b" \t\r\n\x00"):  # the bad record was not kept: a reject says where
        assert any(r["line_number"] and r["line_number"] >= 2 for r in rejects), rejects


@given(data=st.data(), where=st.sampled_from(["events", "legacy_jsonl", "transcript"]))
def test_event_logs(data, where):
    template = data.draw(st.sampled_from(EVENTS))
    bad, what = data.draw(mutated(template))
    with tempfile.TemporaryDirectory() as tmp:
        home, user = Path(tmp) / "home", Path(tmp) / "user"
        if where == "events":
            path = home / "session-state" / "s1" / "events.jsonl"
        elif where == "legacy_jsonl":
            path = home / "session-state" / "s1.jsonl"
        else:
            path = user / "workspaceStorage" / "w" / "GitHub.copilot-chat" / "transcripts" / "s1.jsonl"
        home.mkdir(parents=True)
        path.parent.mkdir(parents=True)
        path.write_bytes(_three_lines(bad))
        batch, rejects = _read(home, user if where == "transcript" else None, where)
        n_rows = len(_column(batch, "stg_events", "event_id"))
        _assert_line_log(batch, rejects, n_rows - 2, bad)


def _chat_session(requests: list[bytes]) -> bytes:
    return (b'{"version": 3, "sessionId": "s1", "creationDate": 1789290000000, "requests": ['
            + b", ".join(requests) + b"]}")


def _good_request(n: int) -> bytes:
    return json.dumps({"requestId": f"good-{n}", "timestamp": 1789290000000,
                       "message": {"text": f"good prompt {n}"}, "response": [{"value": "ok"}]}).encode()


@given(data=st.data())
def test_chat_sessions(data):
    bad, what = data.draw(mutated(data.draw(st.sampled_from(CHAT_REQUESTS))))
    with tempfile.TemporaryDirectory() as tmp:
        home, user = Path(tmp) / "home", Path(tmp) / "user"
        home.mkdir()
        folder = user / "workspaceStorage" / "w" / "chatSessions"
        folder.mkdir(parents=True)
        (folder / "s1.json").write_bytes(_chat_session([_good_request(1), bad, _good_request(2)]))
        batch, rejects = _read(home, user, "chat_session")
        prompts = _column(batch, "stg_events", "content")
        if "good prompt 1" not in prompts:  # only a file that is no JSON at all is lost as a whole
            assert any(r["position"] == "file" for r in rejects), (what, rejects)
            assert not _parses(_chat_session([_good_request(1), bad, _good_request(2)])), what
        else:
            assert "good prompt 2" in prompts, what


def _lenient(bad: bytes):
    """A mutated line as leniently as the readers parse it (None: no JSON they can read)."""
    from pipeline.extract.jsonl import TOO_DEEP, loads_cut

    obj, _cut = loads_cut(bad.strip(b" \t\r\n\x00"))
    return None if obj is TOO_DEEP else obj


DEBUG_CALL = {"ts": 1790000001000, "dur": 2000, "sid": "s1", "type": "llm_request", "name": "chat:m",
              "spanId": "000000000000000b", "parentSpanId": "0000000000000001", "status": "ok",
              "attrs": {"model": "m", "debugName": "panel/editAgent", "inputTokens": 20000, "outputTokens": 100,
                        "cachedTokens": 0, "ttft": 900, "copilotUsageNanoAiu": 5000000000}}


@given(data=st.data())
def test_debug_logs(data):
    bad, what = data.draw(mutated(DEBUG_CALL))
    with tempfile.TemporaryDirectory() as tmp:
        home, user = Path(tmp) / "home", Path(tmp) / "user"
        home.mkdir()
        folder = user / "workspaceStorage" / "w" / "GitHub.copilot-chat" / "debug-logs" / "s1"
        folder.mkdir(parents=True)
        good = [json.dumps(dict(DEBUG_CALL, spanId=f"good-{n}")).encode() for n in (1, 2)]
        (folder / "main.jsonl").write_bytes(good[0] + b"\n" + bad + b"\n" + good[1] + b"\n")
        batch, rejects = _read(home, user, "debug_log")
        spans = _column(batch, "stg_debug_requests", "span_id")
        assert "good-1" in spans and "good-2" in spans, what
        obj = _lenient(bad)
        if isinstance(obj, dict) and obj.get("type") == "llm_request":
            assert len(spans) == 3, what  # a call is kept, whatever its values (those that do not fit: NULL, noted)
        elif obj is not None and not isinstance(obj, dict) or obj is None and bad.strip(b" \t\r\n\x00"):
            assert any(r["line_number"] == 2 for r in rejects), (what, rejects)  # repaired or not: said
        else:  # a line of another type: read and left (prompts and answers come from the chat session)
            assert len(spans) == 2, what


OTEL_CHAT = {"type": "span", "traceId": "t" * 32, "spanId": "e29bcc1a19d15884", "parentSpanId": "29ba6949a03e4e3a",
             "name": "chat m", "kind": 2, "startTime": [1790205585, 536000000], "endTime": [1790205587, 269000000],
             "attributes": {"gen_ai.operation.name": "chat", "gen_ai.conversation.id": "s1",
                            "gen_ai.response.model": "m", "gen_ai.usage.input_tokens": 20000,
                            "gen_ai.usage.output_tokens": 300, "gen_ai.usage.cache_read.input_tokens": 15000,
                            "github.copilot.nano_aiu": 8262700000.0, "github.copilot.cost": 1.0,
                            "gen_ai.response.time_to_first_chunk": 1.5},
             "status": {"code": 0}, "events": [],
             "resource": {"attributes": {"service.name": "github-copilot", "service.version": "1.0.89-0"}}}


@given(data=st.data())
def test_otel_exports(data):
    bad, what = data.draw(mutated(OTEL_CHAT))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        (home / "otel").mkdir(parents=True)
        good = [json.dumps(dict(OTEL_CHAT, spanId=f"good-{n}")).encode() for n in (1, 2)]
        (home / "otel" / "x.jsonl").write_bytes(good[0] + b"\n" + bad + b"\n" + good[1] + b"\n")
        batch, rejects = _read(home, None, "otel")
        spans = _column(batch, "stg_otel_requests", "span_id")
        assert "good-1" in spans and "good-2" in spans, what
        obj = _lenient(bad)
        if obj is None and bad.strip(b" \t\r\n\x00") or obj is not None and not isinstance(obj, dict):
            assert any(r["line_number"] == 2 for r in rejects), (what, rejects)  # repaired or not: said
        elif len(spans) == 2 and isinstance(obj, dict) and isinstance(obj.get("attributes"), dict) \
                and obj["attributes"].get("gen_ai.operation.name") == "chat" and obj.get("type", "span") == "span":
            assert any(r["line_number"] == 2 for r in rejects), what  # a chat span not kept: said why


def _parses(data: bytes) -> bool:
    try:
        json.loads(data.decode("utf-8", "surrogatepass"))
        return True
    except ValueError:
        return False


@given(data=st.data())
def test_chat_mutation_logs(data):
    snapshot = {"kind": 0, "v": {"version": 3, "sessionId": "s1", "creationDate": 1789290000000,
                                 "requests": [json.loads(_good_request(1))]}}
    template = data.draw(st.sampled_from(MUTATIONS))
    bad, what = data.draw(mutated(template))
    assume("requests" not in what and "kind" not in what and "'k'" not in what)  # a replay that changes
    push = {"kind": 2, "k": ["requests"], "v": [json.loads(_good_request(2))]}  # what the goods sit in
    with tempfile.TemporaryDirectory() as tmp:
        home, user = Path(tmp) / "home", Path(tmp) / "user"
        home.mkdir()
        folder = user / "workspaceStorage" / "w" / "chatSessions"
        folder.mkdir(parents=True)
        (folder / "s1.jsonl").write_bytes(json.dumps(snapshot).encode() + b"\n" + bad + b"\n"
                                          + json.dumps(push).encode() + b"\n")
        batch, rejects = _read(home, user, "chat_session")
        prompts = _column(batch, "stg_events", "content")
        assert "good prompt 1" in prompts and "good prompt 2" in prompts, (what, rejects)


@given(data=st.data())
def test_history_files(data):
    bad, what = data.draw(mutated(data.draw(st.sampled_from(TIMELINE))))
    good = [json.dumps({"type": "user", "id": f"g{n}", "text": f"good prompt {n}",
                        "timestamp": "2026-06-03T09:00:05.000Z"}).encode() for n in (1, 2)]
    doc = b'{"sessionId": "s1", "startTime": "2026-06-03T09:00:00.000Z", "timeline": [' + \
        b", ".join([good[0], bad, good[1]]) + b"]}"
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        (home / "history-session-state").mkdir(parents=True)
        (home / "history-session-state" / "session_s1_1759669955294.json").write_bytes(doc)
        batch, rejects = _read(home, None, "history_json")
        prompts = _column(batch, "stg_events", "content")
        if "good prompt 1" not in prompts:
            assert any(r["position"] == "file" for r in rejects) and not _parses(doc), (what, rejects)
        else:
            assert "good prompt 2" in prompts, what


@given(data=st.data(), which=st.sampled_from(["vscode_metadata", "checkpoints"]))
def test_session_folder_json(data, which):
    bad, what = data.draw(mutated(METADATA if which == "vscode_metadata" else CHECKPOINT))
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        folder = home / "session-state" / "s1"
        (folder / "checkpoints").mkdir(parents=True)
        (folder / "events.jsonl").write_bytes(_good_event("good-1") + b"\n")
        if which == "vscode_metadata":
            (folder / "vscode.metadata.json").write_bytes(bad)
            table = "stg_session_meta"
        else:
            (folder / "checkpoints" / "a.json").write_bytes(bad)
            (folder / "checkpoints" / "001-good.md").write_text("<overview>good checkpoint</overview>")
            table = "stg_checkpoints"
        batch, rejects = _read(home, None, which)
        if which == "checkpoints":
            assert "good checkpoint" in _column(batch, table, "overview")
        n = len(_column(batch, table, "session_id")) - (which == "checkpoints")
        assert n == 1 or any(r["position"] == "file" for r in rejects), (what, rejects)


@given(data=st.data())
def test_workspace_yaml(data):
    how = data.draw(st.sampled_from(["value", "bytes", "alias", "deep"]))
    doc = dict(WORKSPACE)
    if how == "value":
        key = data.draw(st.sampled_from(sorted(doc)))
        doc[key] = data.draw(st.one_of(st.integers(-2**80, 2**80), st.floats(), st.none(), st.booleans(),
                                       st.text(max_size=30), st.lists(st.integers(), max_size=3)))
        try:
            text = yaml.safe_dump(doc).encode("utf-8", "surrogatepass")
        except yaml.YAMLError:
            assume(False)
    elif how == "bytes":
        text = yaml.safe_dump(doc).encode()
        at = data.draw(st.integers(0, len(text)))
        text = text[:at] + data.draw(st.binary(min_size=1, max_size=40)) + text[at:]
    elif how == "alias":
        text = b"a: &a [x, x, x, x, x, x, x, x]\n" + b"".join(
            b"%c: &%c [*%c, *%c, *%c, *%c]\n" % (98 + i, 98 + i, 97 + i, 97 + i, 97 + i, 97 + i) for i in range(20))
    else:
        n = data.draw(st.integers(1, 5000))
        text = b"cwd: " + b"[" * n + b"]" * n + b"\nsummary: kept\n"
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        folder = home / "session-state" / "s1"
        folder.mkdir(parents=True)
        (folder / "workspace.yaml").write_bytes(text)
        batch, rejects = _read(home, None, "workspace_yaml")
        assert len(_column(batch, "stg_session_meta", "session_id")) == 1 or rejects


STORE_SCHEMA = """
    create table sessions (id text primary key, cwd text, repository text, branch text, summary text,
        created_at text, updated_at text);
    create table turns (id integer primary key, session_id text, turn_index integer, user_message text,
        assistant_response text, timestamp text);
    create table checkpoints (id integer primary key, session_id text, checkpoint_number integer, title text,
        overview text, created_at text);
    create table session_files (id integer primary key, session_id text, file_path text, tool_name text,
        turn_index integer, first_seen_at text);
    create table session_refs (id integer primary key, session_id text, ref_type text, ref_value text,
        turn_index integer, created_at text);
    create table assistant_usage_events (id integer primary key, session_id text, model text,
        input_tokens integer, output_tokens integer, total_nano_aiu integer, request_multiplier real,
        created_at text);
"""
_STORE_ROWS = {
    "sessions": ["s1", "/home/dev/app", "acme/app", "main", "fine", "2026-09-01 10:00:00", "2026-09-01 11:00:00"],
    "turns": [None, "s1", 5, "bad turn", "x", "2026-09-01 10:03:00"],
    "checkpoints": [None, "s1", 1, "t", "o", "2026-09-01 10:04:00"],
    "session_files": [None, "s1", "src/a.py", "edit", 0, "2026-09-01 10:05:00"],
    "session_refs": [None, "s1", "pr", "7", 0, "2026-09-01 10:06:00"],
    "assistant_usage_events": [None, "s1", "gpt-5", 10, 5, 1000, 1.0, "2026-09-01 10:07:00"],
}
sqlite_value = st.one_of(st.none(), st.integers(-2**63, 2**63 - 1), st.floats(), st.text(max_size=40),
                         st.binary(max_size=40), st.sampled_from([b"\xff\xfe", b"caf\xe9", "\ud800".encode(
                             "utf-8", "surrogatepass"), "x" * 10_000]))


@given(data=st.data())
def test_session_store_rows(data):
    table = data.draw(st.sampled_from(sorted(_STORE_ROWS)))
    row = list(_STORE_ROWS[table])
    col = data.draw(st.integers(1 if table != "sessions" else 0, len(row) - 1))
    value = data.draw(sqlite_value)
    row[col] = value
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        con = sqlite3.connect(home / "session-store.db")
        con.executescript(STORE_SCHEMA)
        con.execute("insert into turns values (null, 's1', 0, 'good turn 1', 'a', '2026-09-01 10:01:00')")
        if isinstance(value, bytes) and data.draw(st.booleans()):  # text that is not UTF-8, stored as text
            row[col] = None
            con.execute(f"insert into {table} values ({', '.join('?' * len(row))})", row)
            con.execute(f"update {table} set {_cols(con, table)[col]} = cast(? as text) where rowid = "
                        f"(select max(rowid) from {table})", [value])
        else:
            con.execute(f"insert into {table} values ({', '.join('?' * len(row))})", row)
        con.execute("insert into turns values (null, 's1', 1, 'good turn 2', 'b', '2026-09-01 10:02:00')")
        con.commit()
        con.close()
        batch, _rejects = _read(home, None, "session_store")
        turns = _column(batch, "stg_store_turns", "user_message")
        assert "good turn 1" in turns and "good turn 2" in turns


def _cols(con, table):
    return [r[1] for r in con.execute(f"pragma table_info({table})")]


@given(data=st.data())
def test_vscode_state_db(data):
    bad, what = data.draw(mutated(STATE_INDEX))
    with tempfile.TemporaryDirectory() as tmp:
        home, user = Path(tmp) / "home", Path(tmp) / "user"
        home.mkdir()
        ws = user / "workspaceStorage" / "w"
        ws.mkdir(parents=True)
        (ws / "workspace.json").write_text('{"folder": "file:///home/dev/app"}')
        con = sqlite3.connect(ws / "state.vscdb")
        con.execute("create table ItemTable (key text unique on conflict replace, value blob)")
        con.execute("insert into ItemTable values ('chat.ChatSessionStore.index', ?)", [bad])
        con.commit()
        con.close()
        _read(home, user, "vscode_state_db")


@given(content=st.binary(max_size=2000), which=st.sampled_from(["plan_md", "checkpoints", "vscode_memory"]))
def test_markdown_files(content, which):
    with tempfile.TemporaryDirectory() as tmp:
        home, user = Path(tmp) / "home", Path(tmp) / "user"
        folder = home / "session-state" / "s1"
        (folder / "checkpoints").mkdir(parents=True)
        if which == "plan_md":
            (folder / "plan.md").write_bytes(content)
        elif which == "checkpoints":
            (folder / "checkpoints" / "001-x.md").write_bytes(b"<overview>" + content + b"</overview>")
        else:
            mem = user / "globalStorage" / "github.copilot-chat" / "memory-tool" / "memories"
            mem.mkdir(parents=True)
            (mem / "notes.md").write_bytes(content)
        batch, rejects = _read(home, user, which)
        table = "stg_checkpoints" if which == "checkpoints" else "stg_documents"
        assert len(_column(batch, table, "session_id")) == 1 or rejects


# ------------------------------------------------------------------------------------- the whole CLI
@settings(max_examples=int(os.environ.get("FUZZ_CLI_EXAMPLES", "6")))
@given(data=st.data())
def test_a_home_full_of_mutated_files_ingests_and_reports(data):
    """Star schema, SQL models, data checks and the report all take what the readers let through."""
    with tempfile.TemporaryDirectory() as tmp:
        home, user = Path(tmp) / "home", Path(tmp) / "user"
        for i in range(6):
            bad, _ = data.draw(mutated(data.draw(st.sampled_from(EVENTS))))
            folder = home / "session-state" / f"s{i}"
            folder.mkdir(parents=True)
            (folder / "events.jsonl").write_bytes(_three_lines(bad).replace(b"good-", f"s{i}-good-".encode()))
        chats = user / "workspaceStorage" / "w" / "chatSessions"
        chats.mkdir(parents=True)
        for i in range(3):
            bad, _ = data.draw(mutated(data.draw(st.sampled_from(CHAT_REQUESTS))))
            (chats / f"c{i}.json").write_bytes(
                _chat_session([_good_request(1), bad, _good_request(2)]).replace(b'"s1"', f'"c{i}"'.encode()))
        con = sqlite3.connect(home / "session-store.db")
        con.executescript(STORE_SCHEMA)
        for table, row in _STORE_ROWS.items():
            row = list(row)
            if table == "sessions":
                row[0] = "s0"
            col = data.draw(st.integers(1, len(row) - 1))
            row[col] = data.draw(sqlite_value)
            con.execute(f"insert into {table} values ({', '.join('?' * len(row))})", row)
        con.commit()
        con.close()
        wh, out = Path(tmp) / "w.duckdb", Path(tmp) / "out"
        code = main(["ingest", "--copilot-home", str(home), "--vscode-user", str(user), "--warehouse", str(wh),
                     "--quiet"])
        if code and os.environ.get("FUZZ_KEEP"):
            import shutil
            shutil.rmtree(os.environ["FUZZ_KEEP"], ignore_errors=True)
            shutil.copytree(tmp, os.environ["FUZZ_KEEP"])
        assert code == 0
        kept = {r[0] for r in rows(wh, "select event_id from stg_events")}
        assert {f"s{i}-good-{n}" for i in range(6) for n in (1, 2)} <= kept
        assert main(["report", "--warehouse", str(wh), "--out", str(out), "--quiet"]) == 0


@example({"title": "\x85"})  # NEL: the pure-Python SafeDumper wrote `'\x85  '`, which loads back as another text
@example({"title": "a\u2028b", "tags": ["\ufeff", "- x", "null"], "turns": 3, "project": None})
@example({"title": "fix: parser\n---\nsession_id: forged # x", "session_id": "<b>x</b>: y"})
@given(st.dictionaries(st.sampled_from(["title", "session_id", "project", "tags", "turns"]),
                       st.one_of(st.text(), st.integers(), st.none(), st.lists(st.text(), max_size=3)),
                       max_size=5))
def test_a_wiki_page_front_matter_loads_back_to_what_it_says(meta):
    """Titles, folders and names in a page's front matter come from the logs: any text must survive
    the YAML round trip, so tools that read the wiki's front matter see the warehouse's values."""
    from pipeline.wiki.markdown import front_matter

    text = front_matter(meta)
    assert text.startswith("---\n") and text.endswith("---\n")
    assert (yaml.safe_load(text[4:-4]) or {}) == meta  # no keys: an empty front matter
    # one line per key, every text quoted: a newline, `---`, `: ` or `#` in a title cannot end the front matter
    # early or add a key for tools that read it by lines
    lines = text.split("\n")[1:-2]
    assert [line.split(": ", 1)[0] for line in lines] == list(meta)
    for line, value in zip(lines, meta.values(), strict=True):
        assert isinstance(value, str) == line.split(": ", 1)[1].startswith('"')
