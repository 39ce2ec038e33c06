"""Three simulated machines for team mode: each a Copilot home with its own sessions, and one
repository (acme/shared) that all three work in."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from tools.synthlog import Log, sid

T0 = datetime(2026, 10, 5, 9, 0, tzinfo=timezone.utc)
SHARED = {"repository": "acme/shared", "branch": "main", "hostType": "github"}

# machine -> [(session name, working folder, repository or None, prompts, files touched)]
MACHINES = {
    "laptop": [("lap-1", "/home/ana/shared", "acme/shared", ["Speed up the parser", "Add a parser test"],
                ["src/parser.py", "tests/test_parser.py"]),
               ("lap-2", "/home/ana/notes", None, ["Summarise my notes"], ["notes.md"])],
    "desktop": [("desk-1", "/work/shared", "acme/shared", ["Fix the lexer token bug"],
                 ["src/lexer.py", "src/parser.py"]),
                ("desk-2", "/work/shared", "acme/shared", ["Document the parser"], ["docs/parser.md"])],
    "ci-runner": [("ci-1", "/runner/_work/shared", "acme/shared", ["Why does CI fail on the parser"],
                   ["src/parser.py", ".github/workflows/ci.yml"])],
}


def write_home(root: Path, machine: str, day: int) -> Path:
    home = root / machine / "copilot-home"
    for k, (name, cwd, repo, prompts, files) in enumerate(MACHINES[machine]):
        start = T0 + timedelta(days=day, hours=k)
        log = Log(sid(name), start)
        ctx = {"cwd": cwd, "gitRoot": cwd, **({"repository": repo} if repo else {}), "branch": "main"}
        log.start(ctx)
        for prompt in prompts:
            log.prompt(prompt)
            log.tools([("view", {"path": f"{cwd}/{f}"}, True, "1. a\n2. b") for f in files]
                      + [("edit", {"path": f"{cwd}/{files[0]}", "old_str": "a", "new_str": "b"}, True, "ok")])
            log.answer(f"Done: {prompt.lower()}.")
        log.shutdown(start, 12000, 0.5, nano=True)
        folder = home / "session-state" / sid(name)
        folder.mkdir(parents=True)
        (folder / "events.jsonl").write_text(log.text(), encoding="utf-8")
    return home


def write_machines(root: Path) -> dict[str, Path]:
    return {m: write_home(root, m, i) for i, m in enumerate(MACHINES)}
