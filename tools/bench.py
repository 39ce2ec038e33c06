"""``make bench``: large synthetic corpora and the timings the performance targets are read from.

    python -m tools.bench [--size-mb 1024] [--sizes 256,512,1024] [--shapes events,outputs,onelog,calls]
                          [--rounds 3] [--dir data/bench] [--real ../shared/real-samples]

Four corpus shapes: ``events`` (many small events: prompts, short tool outputs, a 56 KB system
prompt per session, 3% of outputs large) and ``outputs`` (tool outputs of ~45 KB each are ~95% of
the bytes, as in agent sessions that read whole files), both of --size-mb; ``onelog`` (one events.jsonl
of 500 MB, the ``events`` shape) and ``calls`` (one session of 200,000 tool calls), whatever the size:
what must not take memory in proportion to a log or a session. Each step runs as its own process (wall
time, and from ``wait4`` that process's peak RSS and the CPU time of it and every process and thread it
ran, workers included):
  (a) floor   one DuckDB query (``ignore_errors=true``, so it also runs on a damaged corpus) that
              parses every events.jsonl and extracts the fields the star schema uses, writing nothing;
  (b) naive   a plain-Python loader (json.loads per line, turns and tool calls into SQLite);
  (c) full    ``ingest --full`` of the corpus;
  (d) no-op   ``ingest`` again, nothing changed;
  (e) grown   ``ingest`` after one event was appended to 1% of the logs (then the logs are cut back);
  (f) report  ``report`` (parquet, wiki and site).
Then the small-home target: the real samples (``../shared/real-samples``, every Copilot home and VS Code User
folder, when present) ingested whole three times (the median) and once more with nothing changed.
The steps (a)-(f) run --rounds times in turn (3 by default), each round with a new warehouse and report
folder. A step's seconds and CPU seconds are the median of the rounds, its peak RSS the largest; each ratio
is the median of the rounds' own ratios (a step against the floor, the naive loader and the full ingest of
its round), so a noisy machine moves both sides of a ratio. The results go to ``DIR/results.json`` (with each
round's seconds) and, as the markdown table the README quotes, ``DIR/results.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import sqlite3
import subprocess
import sys
import time
import uuid
from collections.abc import Iterable
from datetime import datetime, timedelta, timezone
from pathlib import Path

from tools.synthlog import Log, iso

REPO = Path(__file__).resolve().parent.parent
NS = uuid.UUID("0b3f6f0e-5d55-4a57-9a55-1f2f1c1c0b0e")
WORDS = ["token", "refresh", "cart", "checkout", "parser", "lexer", "config", "service", "endpoint", "cache",
         "retry", "timeout", "queue", "worker", "schema", "migration", "index", "query", "report", "export",
         "import", "session", "user", "login", "auth", "billing", "invoice"]
SYSTEM_PROMPT = ("You are the GitHub Copilot CLI, a terminal assistant built by GitHub. " * 700)[:56000]


def _code(rng: random.Random, n_lines: int) -> str:
    return "\n".join(f"{i + 1}. {'    ' * rng.randint(0, 3)}{rng.choice(WORDS)}_{rng.choice(WORDS)} = "
                     f"{rng.choice(WORDS)}({rng.randint(0, 999)})  # {rng.choice(WORDS)} {rng.choice(WORDS)}"
                     for i in range(n_lines))


OUTPUT_BYTES = 45_000  # the ``outputs`` shape: each tool output about this big


def session_log(rng: random.Random, sid: str, start: datetime, target_bytes: int, project: str,
                shape: str = "events") -> tuple[str, int]:
    """One realistic events.jsonl of about ``target_bytes``; returns (text, number of prompts)."""
    log, prompts = Log(sid, start, NS), 0
    files = [f"src/{rng.choice(WORDS)}/{rng.choice(WORDS)}_{rng.choice(WORDS)}.py" for _ in range(12)]

    def add(etype: str, data: dict, secs: float = 1.0) -> int:  # the event's size in the log
        return len(json.dumps(log.add(etype, data, secs))) + 1

    size = add("session.start", {"sessionId": sid, "version": 1, "producer": "copilot-agent",
                                 "copilotVersion": "1.0.78", "startTime": iso(start),
                                 "context": {"cwd": project, "gitRoot": project, "branch": "main"}}, 0)
    if shape == "events":
        size += add("system.message", {"role": "system", "content": SYSTEM_PROMPT})
    while size < target_bytes:
        prompts += 1
        text = " ".join(rng.choice(WORDS) for _ in range(rng.randint(6, 40)))
        size += add("user.message", {"content": text, "transformedContent": f"<current_datetime/>{text}",
                                     "attachments": [], "interactionId": str(uuid.uuid5(NS, f"{sid}:i{prompts}"))})
        for turn in range(rng.randint(1, 6)):
            size += add("assistant.turn_start", {"turnId": str(turn)})
            calls = []
            for _ in range(rng.randint(0, 4)):
                tool = rng.choice(["view", "view", "edit", "bash", "grep", "create"])
                path = f"{project}/{rng.choice(files)}"
                args = {"view": {"path": path}, "edit": {"path": path, "old_str": "a", "new_str": "b"},
                        "create": {"path": path, "file_text": _code(rng, 20)},
                        "bash": {"command": f"pytest -q {rng.choice(files)}", "description": "run tests"},
                        "grep": {"pattern": rng.choice(WORDS), "path": "src"}}[tool]
                calls.append((f"toolu_{uuid.uuid5(NS, f'{sid}:{log.n}:{len(calls)}').hex[:24]}", tool, args))
            size += add("assistant.message", {
                "messageId": str(uuid.uuid5(NS, f"{sid}:m{log.n}")), "model": "claude-sonnet-4.6",
                "content": "" if calls and rng.random() < 0.5 else " ".join(rng.choice(WORDS) for _ in range(60)),
                "toolRequests": [{"toolCallId": c, "name": tool, "arguments": args, "type": "function"}
                                 for c, tool, args in calls],
                "outputTokens": rng.randint(20, 900), "reasoningText": "thinking " * 40})
            for c, tool, args in calls:
                size += add("tool.execution_start", {"toolCallId": c, "toolName": tool, "arguments": args}, 0.1)
            for c, _tool, _args in calls:
                if shape == "outputs":  # ~45 KB: about 560 lines of _code
                    out = _code(rng, rng.randint(500, 620))
                else:
                    big = rng.random() < 0.03
                    out = _code(rng, rng.randint(400, 1500) if big else rng.randint(5, 80))
                ok = rng.random() > 0.05
                data = {"toolCallId": c, "success": ok, "model": "claude-sonnet-4.6"}
                if ok:
                    data["result"] = ({"content": out} if shape == "outputs"
                                      else {"content": out, "detailedContent": out})
                else:
                    data["error"] = {"message": "command failed", "code": "failure"}
                size += add("tool.execution_complete", data, 0.5)
            size += add("assistant.turn_end", {"turnId": str(turn)}, 0.1)
    add("session.shutdown", {"shutdownType": "routine", "sessionStartTime": int(start.timestamp() * 1000),
                             "modelMetrics": {"claude-sonnet-4.6": {"requests": {"count": prompts * 3, "cost": 1},
                                                                     "usage": {"inputTokens": 90000 * prompts,
                                                                               "outputTokens": 2000 * prompts,
                                                                               "cacheReadTokens": 50000,
                                                                               "cacheWriteTokens": 0}}}})
    return log.text(), prompts


SHAPES = ("events", "outputs", "onelog", "calls")
SIZED = ("events", "outputs")  # the shapes of --size-mb; the others have one size
ONELOG_MB = 500  # the ``onelog`` shape: one events.jsonl this large, whatever --size-mb says
CALLS = 200_000  # the ``calls`` shape: one session with this many tool calls


def calls_log(sid: str, start: datetime, n_calls: int, project: str) -> str:
    """One session with ``n_calls`` tool calls (20 per prompt, small outputs): the largest session of a
    heavy agent user, whose page and star rows are built whole."""
    rng = random.Random(n_calls)
    log = Log(sid, start, NS)
    log.add("session.start", {"sessionId": sid, "version": 1, "producer": "copilot-agent", "copilotVersion": "1.0.78",
                              "startTime": iso(start), "context": {"cwd": project, "gitRoot": project}}, 0)
    for k in range(n_calls):
        if k % 20 == 0:
            log.add("user.message", {"content": f"step {k // 20}: " + " ".join(rng.choice(WORDS) for _ in range(12))})
        call = f"toolu_{k:08d}"
        path = f"{project}/src/{rng.choice(WORDS)}_{k % 300}.py"
        tool, args = rng.choice([("view", {"path": path}), ("bash", {"command": f"pytest -q {path}"}),
                                 ("edit", {"path": path, "old_str": "a", "new_str": "b"})])
        log.add("assistant.message", {"content": "", "model": "claude-sonnet-4.6", "outputTokens": rng.randint(20, 400),
                                      "toolRequests": [{"toolCallId": call, "name": tool, "arguments": args}]}, 0.2)
        log.add("tool.execution_start", {"toolCallId": call, "toolName": tool, "arguments": args}, 0.1)
        log.add("tool.execution_complete", {"toolCallId": call, "success": rng.random() > 0.03,
                                            "result": {"content": _code(rng, rng.randint(1, 4))}}, 0.4)
    return log.text()


def generate(out: Path, size_mb: int, seed: int = 7, shape: str = "events") -> Path:
    """About ``size_mb`` MB of events.jsonl (``events``: ~5 sessions per MB; ``outputs``: ~2.6 per MB, as
    1,500 sessions in 578 MB), a matching session-store.db and VS Code data; ``onelog``: one log of
    ONELOG_MB MB (the ``events`` shape); ``calls``: one session of CALLS tool calls."""
    marker = out / "corpus.json"
    if marker.is_file():
        meta = json.loads(marker.read_text())
        if meta.get("size_mb") == size_mb and meta.get("shape", "events") == shape:
            return out
    if out.exists():
        shutil.rmtree(out)
    rng = random.Random(seed)
    home = out / "copilot-home"
    (home / "session-state").mkdir(parents=True)
    if shape in ("onelog", "calls"):
        sid = str(uuid.uuid5(NS, shape))
        start = datetime(2026, 3, 1, tzinfo=timezone.utc)
        text = calls_log(sid, start, CALLS, "/home/dev/agent") if shape == "calls" else \
            session_log(rng, sid, start, ONELOG_MB * 1024 * 1024, "/home/dev/big", "events")[0]
        (home / "session-state" / sid).mkdir()
        (home / "session-state" / sid / "events.jsonl").write_text(text, encoding="utf-8")
        (out / "vscode-user").mkdir()
        marker.write_text(json.dumps({"size_mb": size_mb, "sessions": 1, "seed": seed, "shape": shape}))
        return out
    target = size_mb * 1024 * 1024
    per = 1024 * 1024 // 5 if shape == "events" else 385_000  # sessions per MB: 5 (events), 2.6 (outputs)
    t0 = datetime(2026, 1, 1, tzinfo=timezone.utc)
    store_rows, written, i = [], 0, 0
    while written < target:
        i += 1
        sid = str(uuid.uuid5(NS, f"s{i}"))
        project = f"/home/dev/project-{i % 25:02d}"
        start = t0 + timedelta(hours=7 * i)
        text, prompts = session_log(rng, sid, start, int(per * rng.uniform(0.1, 1.3)), project, shape)
        folder = home / "session-state" / sid
        folder.mkdir()
        (folder / "events.jsonl").write_text(text, encoding="utf-8")
        written += len(text.encode("utf-8"))
        (folder / "workspace.yaml").write_text(f"id: {sid}\ncwd: {project}\nname: session {i}\n", encoding="utf-8")
        store_rows.append((sid, project, start, prompts))
    con = sqlite3.connect(home / "session-store.db")
    con.execute("pragma journal_mode=wal")
    con.execute("create table sessions (id text primary key, cwd text, summary text, created_at text)")
    con.execute("create table turns (id integer primary key, session_id text, turn_index int, user_message text, "
                "assistant_response text, timestamp text)")
    con.execute("create table session_files (id integer primary key, session_id text, file_path text, "
                "tool_name text, turn_index int, first_seen_at text)")
    con.executemany("insert into sessions values (?, ?, ?, ?)",
                    [(s, p, f"session {s[:8]}", st.strftime("%Y-%m-%d %H:%M:%S")) for s, p, st, _ in store_rows])
    con.executemany("insert into turns (session_id, turn_index, user_message, assistant_response, timestamp) "
                    "values (?, ?, ?, ?, ?)",
                    [(s, k, "prompt", "answer", st.strftime("%Y-%m-%d %H:%M:%S"))
                     for s, _p, st, n in store_rows[: len(store_rows) // 3] for k in range(n)])
    con.commit()
    con.close()
    user = out / "vscode-user" / "workspaceStorage" / "bench"
    (user / "chatSessions").mkdir(parents=True)
    (user / "workspace.json").write_text('{"folder": "file:///home/dev/project-00"}')
    n_sessions = len(store_rows)
    for i in range(max(1, n_sessions // 50)):
        reqs = [{"requestId": f"r{i}-{k}", "timestamp": int(t0.timestamp() * 1000) + k * 60000,
                 "message": {"text": " ".join(rng.choice(WORDS) for _ in range(12))}, "modelId": "copilot/gpt-5.2",
                 "response": [{"value": _code(rng, 30)}]} for k in range(rng.randint(1, 8))]
        doc = {"version": 3, "sessionId": f"vs-{i}", "creationDate": int(t0.timestamp() * 1000), "requests": reqs}
        (user / "chatSessions" / f"vs-{i}.json").write_text(json.dumps(doc), encoding="utf-8")
    marker.write_text(json.dumps({"size_mb": size_mb, "sessions": n_sessions, "seed": seed, "shape": shape}))
    return out


# ------------------------------------------------------------------------------------ measuring
FLOOR_SQL = """
select count(*), count(distinct session_id), sum(length(content)), count(tool_call_id), count(tool_name),
       sum(length(arguments)), count(success), sum(length(result_content)), count(model), count(ts)
from (
    select regexp_extract(filename, '([^/]+)/events\\.jsonl$', 1) as session_id, type, timestamp as ts,
           json_extract_string(data, '$.content') as content,
           json_extract_string(data, '$.toolCallId') as tool_call_id,
           json_extract_string(data, '$.toolName') as tool_name,
           json_extract(data, '$.arguments')::varchar as arguments,
           json_extract(data, '$.success')::varchar as success,
           json_extract_string(data, '$.result.content') as result_content,
           json_extract_string(data, '$.model') as model
    from read_json(?, format = 'newline_delimited', filename = true, maximum_object_size = 67108864,
                   ignore_errors = true,
                   columns = {type: 'VARCHAR', data: 'JSON', id: 'VARCHAR', timestamp: 'VARCHAR', parentId: 'VARCHAR'})
)
"""

NAIVE = r'''
import json, sqlite3, sys, glob
db = sqlite3.connect(sys.argv[2])
db.execute("create table turns (session_id text, turn_index int, user_message text, started_at text)")
db.execute("create table tool_calls (session_id text, tool_call_id text, tool_name text, success int, ts text)")
for path in sorted(glob.glob(sys.argv[1] + "/*/events.jsonl")):
    sid = path.split("/")[-2]
    turns, calls, idx = [], [], -1
    with open(path, encoding="utf-8", newline="\n") as fh:
        for line in fh:
            try:
                ev = json.loads(line)
            except ValueError:
                continue
            d = ev.get("data") or {}
            if ev.get("type") == "user.message":
                idx += 1
                turns.append((sid, idx, d.get("content"), ev.get("timestamp")))
            elif ev.get("type") == "tool.execution_complete":
                calls.append((sid, d.get("toolCallId"), d.get("toolName"), d.get("success"), ev.get("timestamp")))
    db.executemany("insert into turns values (?, ?, ?, ?)", turns)
    db.executemany("insert into tool_calls values (?, ?, ?, ?, ?)", calls)
db.commit()
'''


def run(cmd: list[str]) -> tuple[float, float, float, int]:
    """Wall seconds, peak RSS (MB) of exactly this process tree's main process, CPU seconds (user and
    system) of the process and of every worker process it waited for, exit code."""
    # every step starts with the writes of the one before on disk: the full ingest leaves ~2 GB to
    # write back, and a later step's commit would otherwise wait on that flush (0.1 s vs 1.5 s seen)
    os.sync()
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _pid, status, usage = os.wait4(proc.pid, 0)
    seconds = time.perf_counter() - start
    err = proc.stderr.read().decode(errors="replace") if proc.stderr else ""
    code = os.waitstatus_to_exitcode(status)
    if code != 0:
        print(f"  {' '.join(cmd[:4])}... failed ({code}): {err.strip().splitlines()[-1:] or ''}", file=sys.stderr)
    return seconds, usage.ru_maxrss / 1024, usage.ru_utime + usage.ru_stime, code


def grow(home: Path, fraction: float = 0.01) -> list[tuple[Path, int]]:
    """Append one event (a prompt) to ``fraction`` of the logs, a second after the log's last event as Copilot
    appends them; returns (file, original size) to undo it."""
    logs = sorted((home / "session-state").glob("*/events.jsonl"))
    picked = logs[:: max(1, round(1 / fraction))]
    undo = []
    for p in picked:
        undo.append((p, p.stat().st_size))
        at = _after_last_event(p)
        with open(p, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"type": "user.message", "data": {"content": "grown"},
                                 "id": "grown-0", "timestamp": at}) + "\n")
    return undo


_TIMESTAMP = re.compile(rb'"timestamp": ?"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)')


def _after_last_event(log: Path, tail: int = 1 << 16) -> str:
    """A second after the last event's time in the end of ``log`` (2027-01-01 when its end names none). Appended
    before the session's start instead, a prompt moved 36 of the 53 grown sessions of the 1 GB `events` corpus to
    another month, which no real append does."""
    with open(log, "rb") as fh:
        fh.seek(max(0, log.stat().st_size - tail))
        found = _TIMESTAMP.findall(fh.read())
    if not found:
        return "2027-01-01T00:00:00.000Z"
    return (datetime.fromisoformat(found[-1].decode()) + timedelta(seconds=1)).strftime("%Y-%m-%dT%H:%M:%S.000Z")


ROUNDS = 3  # each step's figure is the median of this many rounds (the "median of 3 alternating runs")


def bench(corpus: Path, out: Path, rounds: int = ROUNDS) -> list[dict]:
    """Every step (a)-(f) on ``corpus``, ``rounds`` times in turn: each round measures its own floor and naive
    loader next to the pipeline's steps, so a slow moment of a shared machine moves a round's ratios less than
    its seconds. Returns one row per step (``combine``)."""
    home = corpus / "copilot-home"
    logs_mb = sum(p.stat().st_size for p in home.glob("session-state/*/events.jsonl")) / 1e6
    out.mkdir(parents=True, exist_ok=True)
    measured = [_round(corpus, out) for _ in range(rounds)]
    return combine(measured, logs_mb)


QUERY = "import duckdb,sys; c=duckdb.connect(); c.execute(sys.argv[1], [sys.argv[2]]).fetchall()"  # SQL, a glob


def warm(paths: Iterable[Path]) -> None:
    """The files read once, so that a step starts with them in the page cache."""
    for p in sorted(paths):
        if p.is_file():
            with open(p, "rb") as fh:
                while fh.read(1 << 24):
                    pass


def _round(corpus: Path, out: Path) -> list[dict]:
    """One round of the steps (a)-(f): a new warehouse, naive database and report folder each time (a report
    into the folder of the round before rendered again only what changed: nothing)."""
    home, user = corpus / "copilot-home", corpus / "vscode-user"
    wh = out / "bench.duckdb"
    for p in (wh, out / "naive.sqlite"):
        if p.exists():
            p.unlink()
    shutil.rmtree(out / "report", ignore_errors=True)
    py = sys.executable
    glob = str(home / "session-state" / "*" / "events.jsonl")
    steps = []

    def step(name: str, cmd: list) -> None:
        secs, rss, cpu, code = run(cmd)
        steps.append({"step": name, "seconds": secs, "rss_mb": rss, "cpu_s": cpu, "ok": code == 0})

    warm(corpus.rglob("*"))  # every step starts with the corpus in the page cache
    step("(a) floor: DuckDB parses every events.jsonl", [py, "-c", QUERY, FLOOR_SQL, glob])
    step("(b) naive loader: json.loads per line into SQLite",
         [py, "-c", NAIVE, str(home / "session-state"), str(out / "naive.sqlite")])
    ingest = [py, "-m", "pipeline", "ingest", "--copilot-home", str(home), "--vscode-user", str(user),
              "--warehouse", str(wh), "--quiet"]
    step("(c) full ingest", [*ingest, "--full"])
    step("(d) no-op re-ingest", ingest)
    undo = grow(home)
    try:
        step("(e) ingest after 1% of the logs grew by one event", ingest)
    finally:
        for p, size in undo:
            with open(p, "r+b") as fh:
                fh.truncate(size)
    step("(f) report", [py, "-m", "pipeline", "report", "--warehouse", str(wh), "--out", str(out / "report"),
                        "--quiet"])
    return steps


def _median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def combine(rounds: list[list[dict]], logs_mb: float) -> list[dict]:
    """One row per step from the rounds: the median seconds and CPU seconds, the largest peak RSS, and each ratio
    the median of the rounds' own (step / that round's floor, naive loader or full ingest: ``x_floor``,
    ``x_naive``, ``x_full``; CPU time / the floor's CPU time: ``x_floor_cpu``). A step failed when it failed in
    any round; ``rounds`` keeps each round's seconds."""
    rows = []
    for i, name in enumerate(r["step"] for r in rounds[0]):
        steps = [r[i] for r in rounds]

        def ratio(j: int, key: str = "seconds", steps: list[dict] = steps) -> float:
            return _median([s[key] / r[j][key] if r[j][key] else 0.0 for s, r in zip(steps, rounds, strict=True)])
        seconds = _median([s["seconds"] for s in steps])
        rows.append({"logs_mb": logs_mb, "step": name, "seconds": seconds,
                     "cpu_s": _median([s["cpu_s"] for s in steps]), "rss_mb": max(s["rss_mb"] for s in steps),
                     "ok": all(s["ok"] for s in steps), "mb_per_s": logs_mb / seconds if seconds else 0,
                     "x_floor": ratio(0), "x_naive": ratio(1), "x_full": ratio(2), "x_floor_cpu": ratio(0, "cpu_s"),
                     "rounds": [round(s["seconds"], 3) for s in steps]})
    return rows


TARGETS = "full <= 3x floor in wall time and <= 4x in CPU time; peak RSS <= 1 GB, flat as the logs double; " \
          "no-op <= 3% of full; 1%-grown <= 5% of full; report <= full"
REAL_TARGETS = "full ingest <= 1.5 s and <= 250 MB peak RSS"
REAL = REPO.parent / "shared" / "real-samples"  # real Copilot homes and VS Code User folders (when present)
REAL_RUNS = 3  # full ingests of the real samples: the median is the figure


def real_sources(root: Path = REAL) -> list[str]:
    """The ``ingest`` options that name every Copilot home and VS Code User folder of the real samples."""
    args = []
    for folder in sorted(p for p in root.iterdir() if p.is_dir()) if root.is_dir() else []:
        if (folder / "copilot-home").is_dir():
            args += ["--copilot-home", str(folder / "copilot-home")]
        args += [arg for user in sorted(folder.glob("vscode-user*")) if user.is_dir()
                 for arg in ("--vscode-user", str(user))]
    return args


def bench_real(out: Path, root: Path = REAL, runs: int = REAL_RUNS) -> dict | None:
    """The issue's small-home target, on the real samples (None when they are absent): ``runs`` full ingests
    into a new warehouse each (the median's seconds and CPU, the largest peak RSS), then a no-op."""
    sources = real_sources(root)
    if not sources:
        return None
    out.mkdir(parents=True, exist_ok=True)
    wh = out / "real.duckdb"
    ingest = [sys.executable, "-m", "pipeline", "ingest", *sources, "--warehouse", str(wh), "--quiet"]
    warm(root.rglob("*"))  # in the page cache, as the corpora are
    full = []
    for _ in range(runs):
        for p in out.glob("real.duckdb*"):
            p.unlink()
        full.append(run([*ingest, "--full"]))
    noop = run(ingest)
    ordered = sorted(full)
    secs, _rss, cpu, _code = ordered[len(ordered) // 2]
    return {"mb": sum(p.stat().st_size for p in root.rglob("*") if p.is_file()) / 1e6, "runs": runs,
            "seconds": secs, "cpu_s": cpu, "rss_mb": max(r[1] for r in full),
            "noop_seconds": noop[0], "ok": all(r[3] == 0 for r in [*full, noop])}


def real_line(real: dict) -> str:
    """The real samples' figures against their target."""
    met = "met" if real["seconds"] <= 1.5 and real["rss_mb"] <= 250 else "MISSED"
    state = met if real["ok"] else "not measured: an ingest failed"
    return (f"real samples ({real['mb']:.0f} MB, median of {real['runs']} full ingests): {real['seconds']:.2f} s, "
            f"{real['cpu_s']:.2f} CPU s, peak RSS {real['rss_mb']:.0f} MB, no-op {real['noop_seconds']:.2f} s "
            f"({REAL_TARGETS}: {state})")


def label(shape: str, rows: list[dict]) -> str:
    """A corpus as the tables name it."""
    if shape == "calls":
        return f"calls, one session of {CALLS:,} tool calls ({rows[0]['logs_mb']:.0f} MB)"
    if shape == "onelog":
        return f"onelog, one {rows[0]['logs_mb']:.0f} MB log"
    return f"{shape}, {rows[0]['logs_mb']:.0f} MB"


def print_table(size_mb: int, rows: list[dict], shape: str = "events") -> None:
    print(f"\ncorpus {label(shape, rows)} of events.jsonl")
    print(f"{'step':<48} {'seconds':>8} {'CPU s':>7} {'MB/s':>7} {'peak RSS MB':>12} {'x floor':>8} {'x naive':>8}")
    for r in rows:
        flag = "" if r["ok"] else "  FAILED"
        print(f"{r['step']:<48} {r['seconds']:>8.1f} {_cpu(r):>7} {r['mb_per_s']:>7.1f} {r['rss_mb']:>12.0f} "
              f"{r['x_floor']:>8.2f} {r['x_naive']:>8.2f}{flag}")
    print(f"targets ({TARGETS}): " + "; ".join(f"{k} {v}" for k, v in verdict(rows).items()))


def _cpu(row: dict) -> str:
    """A step's CPU seconds, or "-" where they were not measured (results of an older bench)."""
    return f"{row['cpu_s']:.1f}" if row.get("cpu_s") is not None else "-"


def verdict(rows: list[dict]) -> dict[str, str]:
    """Each target with the measured value and whether it is met; a target one of whose steps failed is
    "not measured" (a failed step's seconds and peak RSS are those of its failure, not of the work)."""
    full = rows[2]["seconds"]
    # of the full ingest: the median of the rounds' ratios (``combine``), else of the seconds given
    share = {i: rows[i].get("x_full", rows[i]["seconds"] / full if full else 0.0) for i in (3, 4, 5)}
    rss = max(r["rss_mb"] for r in rows[2:])

    def mark(ok: bool, *steps: int) -> str:
        failed = [rows[i]["step"].split(")")[0] + ")" for i in steps if not rows[i]["ok"]]
        if failed:
            return f"not measured: {', '.join(failed)} failed"
        return "met" if ok else "MISSED"
    cpu_measured = rows[0].get("cpu_s") and rows[2].get("cpu_s") is not None and rows[0]["ok"] and rows[2]["ok"]
    cpu_ratio = rows[2].get("x_floor_cpu") or (rows[2]["cpu_s"] / rows[0]["cpu_s"] if cpu_measured else 0.0)
    return {"full/floor": f"{rows[2]['x_floor']:.2f}x {mark(rows[2]['x_floor'] <= 3, 0, 2)}",
            "full/naive": f"{rows[2]['x_naive']:.2f}x" + ("" if rows[1]["ok"] and rows[2]["ok"] else " (not measured)"),
            "full/floor in CPU time": (f"{cpu_ratio:.2f}x {mark(cpu_ratio <= 4, 0, 2)}"
                                       if cpu_measured else "not measured"),
            "peak RSS": f"{rss:.0f} MB {mark(rss <= 1024, 2, 3, 4, 5)}",
            "no-op/full": f"{share[3]:.1%} {mark(share[3] <= 0.03, 2, 3)}",
            "grown/full": f"{share[4]:.1%} {mark(share[4] <= 0.05, 2, 4)}",
            "report/full": f"{share[5]:.2f}x {mark(share[5] <= 1, 2, 5)}"}


def markdown(results: dict, real: dict | None = None) -> str:
    """The results as the markdown table the README quotes (and the real samples' line, when measured)."""
    lines = ["| corpus | step | seconds | CPU s | MB/s | peak RSS MB | × floor | × naive |",
             "|---|---|---|---|---|---|---|---|"]
    for (shape, _size), rows in results.items():
        name = label(shape, rows)
        for r in rows:
            step = r["step"] if r["ok"] else f"{r['step']} (FAILED)"
            lines.append(f"| {name} | {step} | {r['seconds']:.1f} | {_cpu(r)} | {r['mb_per_s']:.1f} | "
                         f"{r['rss_mb']:.0f} | {r['x_floor']:.2f} | {r['x_naive']:.2f} |")
    rounds = {len(r.get("rounds", [])) for rows in results.values() for r in rows}
    if rounds and min(rounds) > 1:
        lines += ["", f"Each figure: the median of {min(rounds)} rounds (peak RSS: the largest); × floor and × naive "
                      "the median of each round's ratio."]
    lines += ["", f"Targets: {TARGETS}.", ""]
    for (shape, _size), rows in results.items():
        lines.append(f"- {label(shape, rows)}: "
                     + "; ".join(f"{k} {v}" for k, v in verdict(rows).items()))
    if real is not None:
        lines.append(f"- {real_line(real)}")
    return "\n".join(lines) + "\n"


def generated(out: Path, size_mb: int, shape: str) -> Path:
    """``generate`` in a process of its own. Linux gives a child the peak RSS of the process that started
    it (its maximum RSS is kept across exec), so a bench process that had held a 500 MB log it wrote gave
    every step after it that peak (1.7 GB for the floor of ``onelog``); the steps are started from a
    process that stays small."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(generate, out, size_mb, shape=shape).result()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tools.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--size-mb", type=int, default=1024, help="events.jsonl volume of the corpus (default 1024)")
    ap.add_argument("--sizes", default="", help="comma-separated sizes to run in turn, e.g. 256,512,1024")
    ap.add_argument("--shapes", default=",".join(SHAPES),
                    help="corpus shapes: events, outputs (of each size), onelog, calls (one size) (default all)")
    ap.add_argument("--rounds", type=int, default=ROUNDS,
                    help=f"rounds of the steps per corpus; each figure is their median (default {ROUNDS})")
    ap.add_argument("--dir", type=Path, default=REPO / "data" / "bench")
    ap.add_argument("--real", type=Path, default=REAL,
                    help=f"folder of real samples for the small-home target (default {REAL}; skipped when absent)")
    args = ap.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s] or [args.size_mb]
    shapes = [s for s in args.shapes.split(",") if s]
    results = {}
    for shape in shapes:
        for size in (sizes if shape in SIZED else [ONELOG_MB if shape == "onelog" else 0]):
            t = time.perf_counter()
            corpus = generated(args.dir / f"corpus-{shape}-{size}mb", size, shape)
            print(f"corpus {size} MB ({shape}) ready in {time.perf_counter() - t:.0f}s at {corpus}", flush=True)
            results[(shape, size)] = bench(corpus, args.dir / f"run-{shape}-{size}mb", max(1, args.rounds))
            print_table(size, results[(shape, size)], shape)
    if len(sizes) > 1:
        for shape in (s for s in shapes if s in SIZED):
            print(f"\npeak RSS of the full ingest by corpus size ({shape}): " + ", ".join(
                f"{s} MB -> {results[(shape, s)][2]['rss_mb']:.0f} MB" for s in sizes))
    real = bench_real(args.dir / "run-real", args.real)
    print(f"\n{real_line(real)}" if real else f"\nreal samples: none at {args.real} (not measured)")
    (args.dir / "results.json").write_text(json.dumps({**{f"{sh}-{sz}": r for (sh, sz), r in results.items()},
                                                       "real": real}, indent=1, default=str))
    (args.dir / "results.md").write_text(markdown(results, real))
    print(f"\nmarkdown table: {args.dir / 'results.md'}")
    ok = all(r["ok"] for rows in results.values() for r in rows) and (real is None or real["ok"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
