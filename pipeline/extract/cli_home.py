"""Discovery of a Copilot CLI home and the readers for its per-session side files."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Mapping
from functools import cache
from pathlib import Path

from .base import (
    Context,
    Finder,
    Prior,
    Problems,
    ReadResult,
    Source,
    as_text,
    cap_text,
    epoch_ms_iso,
    integer,
    load_json_file,
    read_bytes,
    reader,
    to_json,
)
from .events import history_session_id

log = logging.getLogger(__name__)

CHECKPOINT_SECTIONS = ("overview", "history", "work_done", "technical_details", "important_files", "next_steps")


def default_copilot_homes(env: Mapping[str, str] = os.environ) -> list[Path]:
    """``$COPILOT_HOME``, ``$XDG_STATE_HOME/.copilot`` and ``~/.copilot``, those that exist."""
    cands = []
    if env.get("COPILOT_HOME"):
        cands.append(Path(env["COPILOT_HOME"]))
    if env.get("XDG_STATE_HOME"):
        cands.append(Path(env["XDG_STATE_HOME"]) / ".copilot")
    cands.append(Path.home() / ".copilot")
    seen, out = set(), []
    for c in cands:
        key = str(c.resolve()) if c.exists() else None
        if key and key not in seen and c.is_dir():
            seen.add(key)
            out.append(c)
    return out


def discover_copilot_home(root: Path, finder: Finder | None = None) -> list[Source]:
    """Every source unit under a Copilot CLI home, in a stable order. What cannot be listed or
    examined is noted in ``finder.problems`` and left out; discovery never fails."""
    finder = finder or Finder()
    root = root.resolve()
    r = str(root)
    out: list[Source] = []
    # os.scandir: one directory read per folder, file types without a stat (10k+ sessions)
    top = {e.name: e for e in finder.entries(r)}
    state = top.get("session-state")
    if state is not None and finder.is_dir(state):
        for entry in finder.entries(state.path):
            if finder.is_dir(entry):
                out.extend(_session_folder(entry.path, entry.name, r, finder))
            elif entry.name.endswith(".jsonl") and finder.is_file(entry):
                out.append(Source(entry.path, "legacy_jsonl", entry.name[: -len(".jsonl")], r))
    hist = top.get("history-session-state")
    if hist is not None and finder.is_dir(hist):
        for entry in finder.entries(hist.path):
            if entry.name.endswith(".json") and finder.is_file(entry):
                out.append(Source(entry.path, "history_json", history_session_id(entry.path), r))
    desktop = top.get("data.db")  # the desktop app's store (extract/desktop.py)
    if desktop is not None and finder.is_file(desktop):
        out.append(Source(desktop.path, "desktop_db", None, r))
    otel = top.get("otel")  # OpenTelemetry file exports (extract/otel.py), where people point them
    if otel is not None and finder.is_dir(otel):
        out.extend(Source(e.path, "otel", None, r) for e in finder.entries(otel.path)
                   if e.name.endswith(".jsonl") and finder.is_file(e))
    store, wal = top.get("session-store.db"), top.get("session-store.db-wal")
    if store is not None and finder.is_file(store):
        out.append(Source(store.path, "session_store", None, r))
    elif wal is not None and finder.is_file(wal):
        out.append(Source(wal.path, "orphan_wal", None, r))
    return out


_SESSION_FILES = (("workspace.yaml", "workspace_yaml"), ("events.jsonl", "events"),
                  ("vscode.metadata.json", "vscode_metadata"), ("plan.md", "plan_md"),
                  ("index.md", "session_index_md"))


def _session_folder(folder: str, sid: str, root: str, finder: Finder) -> list[Source]:
    entries = {e.name: e for e in finder.entries(folder)}
    out = []
    for name, kind in _SESSION_FILES:
        e = entries.get(name)
        if e is not None and finder.is_file(e):
            out.append(Source(e.path, kind, sid, root))
    cp = entries.get("checkpoints")
    if cp is not None and finder.is_dir(cp) and finder.entries(cp.path):
        out.append(Source(cp.path, "checkpoints", sid, root))
    return out


# ------------------------------------------------------------------------------ workspace.yaml
_YAML_LINE = re.compile(r"^(?P<k>[A-Za-z_][A-Za-z0-9_]*):\s?(?P<v>.*)$")
_WORKSPACE_FIELDS = {"name", "summary", "cwd", "git_root", "repository", "branch", "host_type",
                     "client_name", "created_at", "updated_at"}


@cache
def _yaml():
    """PyYAML and the loader to read with: libyaml's C loader when PyYAML was built with it (10x faster on
    thousands of small files). Imported when a workspace.yaml is read, not with the readers (11 ms of every
    run's start)."""
    import yaml

    return yaml, getattr(yaml, "CBaseLoader", yaml.BaseLoader)


# Copilot writes flat key: value files. Anchors and aliases are refused (a few lines of nested
# aliases expand to gigabytes), and so is a file this large.
MAX_YAML_BYTES = 1024 * 1024


def _uses_aliases(text: str) -> bool:
    """Whether the YAML defines an anchor or uses an alias, told by its parser's events (which expand
    nothing): ``**bold**`` inside a quoted title is text, not an alias. Text that does not parse is not
    loaded either, so it says no here."""
    yaml, loader = _yaml()
    try:
        return any(isinstance(e, yaml.AliasEvent) or getattr(e, "anchor", None) is not None
                   for e in yaml.parse(text, Loader=loader))
    except (yaml.YAMLError, RecursionError, ValueError):
        return False


@reader("workspace_yaml")
def read_workspace_yaml(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    yaml, loader = _yaml()
    res = ReadResult()
    raw = read_bytes(source.path, limit=MAX_YAML_BYTES + 1)
    text = raw.lstrip(b"\xef\xbb\xbf").replace(b"\x00", b"").decode("utf-8", "replace")
    refused = ("it is larger than 1 MiB" if len(raw) > MAX_YAML_BYTES
               else "it uses YAML anchors or aliases" if _uses_aliases(text) else None)
    try:
        if refused:
            raise yaml.YAMLError(f"not parsed: {refused}")
        doc = yaml.load(text, Loader=loader)  # BaseLoader: every value stays a string
        if doc is None:
            doc = {}
        if not isinstance(doc, dict):
            raise yaml.YAMLError("top level is not a mapping")
    except (yaml.YAMLError, RecursionError, ValueError) as exc:
        reason = "nested too deep" if isinstance(exc, RecursionError) else " ".join(str(exc).split())[:300]
        res.reject(source.path, f"workspace.yaml is not valid YAML ({reason}); simple key: value lines kept",
                   excerpt=ctx.excerpt(text))
        doc = _salvage_yaml(text[:MAX_YAML_BYTES])
    row = {
        "session_id": source.session_id, "source_kind": "workspace_yaml",
        "title": _s(doc.get("name")), "summary": _s(doc.get("summary")),
        "cwd": _s(doc.get("cwd")), "git_root": _s(doc.get("git_root")),
        "repository": _s(doc.get("repository")), "branch": _s(doc.get("branch")),
        "host_type": _s(doc.get("host_type")), "client_name": _s(doc.get("client_name")),
        "created_at": _s(doc.get("created_at")), "updated_at": _s(doc.get("updated_at")),
        "first_user_message": None,
        "extra": to_json({str(k): v for k, v in doc.items() if k not in _WORKSPACE_FIELDS}) or None,
        "_source_path": source.path, "_run_id": ctx.run_id,
    }  # every text of a metadata row is redacted as the row is stored (see parallel._redact_rows)
    if doc.get("id") and doc.get("id") != source.session_id:
        log.info("%s: id %s differs from its folder name; the folder name is used", source.path, doc.get("id"))
    res.add("stg_session_meta", row)
    res.n_records = 1
    return res


def _salvage_yaml(text: str) -> dict:
    out = {}
    for line in text.splitlines():
        m = _YAML_LINE.match(line)
        # plain scalars only: block scalars and flow collections are what failed to parse
        if m and m.group("v").strip() and not m.group("v").strip().startswith(("|", ">", "[", "{")):
            out[m.group("k")] = _scalar(m.group("v").strip())
    return out


def _scalar(value: str) -> str:
    """A salvaged line's value as YAML reads it: a quoted one with its quotes and escapes undone
    (``"a \\"b\\""`` is ``a "b"``), when it parses alone, else without the quotes around it; a plain one as it
    is (``Key="a b"`` keeps both its quotes)."""
    if value[:1] not in ("'", '"'):
        return value
    yaml, loader = _yaml()
    try:
        parsed = yaml.load(value, Loader=loader)
    except (yaml.YAMLError, RecursionError, ValueError):
        parsed = None
    return parsed if isinstance(parsed, str) else value.strip("'\"")


def _s(v: object) -> str | None:
    if v is None:
        return None
    if isinstance(v, (dict, list)):
        return to_json(v)
    v = str(v)
    return cap_text(v, MAX_FIELD_CHARS, "a value", None) if v.strip() else None


MAX_FIELD_CHARS = 64 * 1024  # a metadata field (a title, a path, a branch) longer than this is cut


# ------------------------------------------------------------------------------ vscode.metadata.json
@reader("vscode_metadata")
def read_vscode_metadata(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    res = ReadResult()
    problems = Problems()
    doc = load_json_file(source, res, ctx, problems)
    if doc is None:
        return res
    folder = doc.get("workspaceFolder") if isinstance(doc.get("workspaceFolder"), dict) else {}
    repo = {}
    for key in ("worktreeProperties", "repositoryProperties"):
        if isinstance(doc.get(key), dict):
            repo = doc[key]
            break
    res.add("stg_session_meta", {
        "session_id": source.session_id, "source_kind": "vscode_metadata",
        "title": _s(doc.get("customTitle")) if isinstance(doc.get("customTitle"), str) else None, "summary": None,
        "cwd": _s(folder.get("folderPath")), "git_root": _s(repo.get("repositoryPath")),
        "repository": None, "branch": _s(repo.get("branchName")), "host_type": "vscode",
        "client_name": "vscode", "created_at": epoch_ms_iso(folder.get("timestamp"), "workspaceFolder.timestamp",
                                                            problems),
        "updated_at": None,
        "first_user_message": _s(doc.get("firstUserMessage")) if isinstance(doc.get("firstUserMessage"), str)
        else None,
        "extra": to_json({k: v for k, v in doc.items()
                          if k not in ("customTitle", "firstUserMessage", "workspaceFolder")}),
        "_source_path": source.path, "_run_id": ctx.run_id,
    })
    if problems:
        res.reject(source.path, f"file kept; {problems.reason()}")
    res.n_records = 1
    return res


# ------------------------------------------------------------------------------ checkpoints/
_SECTION = re.compile(r"<(?P<tag>" + "|".join(CHECKPOINT_SECTIONS) + r")>\s*(?P<body>.*?)\s*</(?P=tag)>", re.S)
_TAG = re.compile(r"<(?P<close>/?)(?P<tag>" + "|".join(CHECKPOINT_SECTIONS) + r")>")


def checkpoint_sections(text: str) -> dict[str, str]:
    """The sections of a checkpoint file. A section whose tags do not pair up keeps its text: a closing tag
    ends whatever section is open (``<overview>`` ... ``</history>`` is the overview), and text closed by a
    tag no section opened is that section's (`... </history>` with no ``<history>``)."""
    sections = {m.group("tag"): m.group("body") for m in _SECTION.finditer(text)}
    loose: dict[str, str] = {}
    current, start = None, 0
    for m in _TAG.finditer(text):
        body = text[start:m.start()].strip()
        if m.group("close"):
            name = current or m.group("tag")
            if body:
                loose.setdefault(name, body)
            current = None
        else:
            if current and body:
                loose.setdefault(current, body)
            current = m.group("tag")
        start = m.end()
    if current and text[start:].strip():
        loose.setdefault(current, text[start:].strip())
    return sections | {k: v for k, v in loose.items() if k not in sections}


_MD_NAME = re.compile(r"^(?P<n>\d+)[-_ ]?(?P<slug>.*)\.md$")
_INDEX_ROW = re.compile(r"^\|\s*(?P<n>\d+)\s*\|(?P<rest>.*)\|\s*$")
_HEADING = re.compile(r"^#{1,3}\s+(?P<t>.+?)\s*$", re.M)


@reader("checkpoints")
def read_checkpoints(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    """``checkpoints/index.md`` + ``NNN-slug.md`` (real CLI) and ``<uuid>.json`` (the seed note).
    A file that cannot be read or whose number does not fit is a reject of its own."""
    res = ReadResult()
    finder = Finder()
    files = [e for e in finder.entries(source.path) if finder.is_file(e)]
    for path, reason in finder.problems:
        res.reject(path, reason)
    titles = _index_titles(Path(source.path) / "index.md", res, ctx)
    for e in files:
        m = _MD_NAME.match(e.name)
        if not m or e.name == "index.md":
            continue
        problems = Problems()
        try:
            n = integer(int(m.group("n")), "checkpoint number", problems)
            if n is None:
                raise ValueError(f"its number {m.group('n')} is out of range")
            raw = read_bytes(e.path, limit=ctx.max_text * 4 + 1)
            text = cap_text(raw.lstrip(b"\xef\xbb\xbf").replace(b"\x00", b"").decode("utf-8", "replace"),
                            ctx.max_text, "the file", problems)
            sections = checkpoint_sections(text)
            if not sections and not text.strip():
                res.reject(e.path, "checkpoint file is empty")
                continue
            if not sections:
                sections["overview"] = text.strip()
            heading = _HEADING.search(text.split("<", 1)[0])
            title = titles.get(n) or (heading.group("t") if heading else None) or \
                m.group("slug").replace("-", " ").strip() or None
        except (OSError, ValueError, RecursionError) as exc:
            res.reject(e.path, f"checkpoint not read: {exc}")
            continue
        if problems:
            res.reject(e.path, f"checkpoint kept; {problems.reason()}")
        res.add("stg_checkpoints", _checkpoint_row(source, ctx, "folder_md", n, title, sections, None, e.path))
    json_rows = []
    for e in files:
        if not e.name.endswith(".json"):
            continue
        problems = Problems()
        try:
            doc = load_json_file(Source(e.path, "checkpoint_json", source.session_id), res, ctx, problems)
            if doc is None:
                continue
            raw_number = doc.get("checkpoint_number", doc.get("checkpointNumber", doc.get("number")))
            number = integer(raw_number, "checkpoint_number", problems)
            created = _s(doc.get("created_at") or doc.get("createdAt") or doc.get("timestamp"))
            sections = {k: as_text(doc.get(k) if k in doc else doc.get(_camel(k))) for k in CHECKPOINT_SECTIONS}
            title = _s(doc.get("title"))
        except (OSError, ValueError, RecursionError) as exc:
            res.reject(e.path, f"checkpoint not read: {exc}")
            continue
        if problems:
            res.reject(e.path, f"checkpoint kept; {problems.reason()}")
        json_rows.append((number, created or "", e.name, title, sections, e.path))
    # JSON checkpoints without a number are numbered by creation time, then file name
    taken = {row["checkpoint_number"] for row in res.rows.get("stg_checkpoints", [])}
    next_n = max(taken, default=0)
    for number, created, _name, title, sections, path in sorted(json_rows, key=lambda t: (t[1], t[2])):
        if number is None or number in taken:
            next_n += 1
            number = next_n
        taken.add(number)
        next_n = max(next_n, number)
        res.add("stg_checkpoints", _checkpoint_row(source, ctx, "folder_json", number, title, sections,
                                                   created or None, path))
    res.n_records = len(res.rows.get("stg_checkpoints", []))
    return res


def _camel(k: str) -> str:
    head, *rest = k.split("_")
    return head + "".join(w.title() for w in rest)


def _checkpoint_row(source: Source, ctx: Context, kind: str, n: int | None, title: str | None, sections: dict,
                    created: str | None, path: str) -> dict:
    row = {"session_id": source.session_id, "source_kind": kind, "checkpoint_number": n,
           "title": title, "created_at": created, "_source_path": path, "_run_id": ctx.run_id}
    for k in CHECKPOINT_SECTIONS:
        v = sections.get(k)
        row[k] = cap_text(v.strip(), ctx.max_text, k, None) if isinstance(v, str) and v.strip() else None
    return row


def _index_titles(index: Path, res: ReadResult, ctx: Context) -> dict[int, str]:
    """Checkpoint titles from the markdown table in ``checkpoints/index.md``."""
    try:
        if not index.is_file():
            return {}
        text = read_bytes(str(index), limit=MAX_YAML_BYTES).decode("utf-8", "replace")
    except OSError as exc:
        res.reject(str(index), f"checkpoint index not read: {exc.strerror or exc}")
        return {}
    out = {}
    for line in text.splitlines():
        m = _INDEX_ROW.match(line.strip())
        if not m:
            continue
        cells = [c.strip() for c in m.group("rest").split("|")]
        title = next((c for c in cells if c and not c.endswith(".md") and not re.fullmatch(r"[-:]+", c)), None)
        if title:
            out[int(m.group("n"))] = title
    return out


# ------------------------------------------------------------------------------ plan.md / index.md
def _read_document(source: Source, ctx: Context, kind: str) -> ReadResult:
    res = ReadResult()
    text = read_bytes(source.path).lstrip(b"\xef\xbb\xbf").replace(b"\x00", b"").decode("utf-8", "replace")
    rel = os.path.relpath(source.path, source.root) if source.root else source.path
    res.add("stg_documents", {"session_id": source.session_id, "kind": kind, "path": rel.replace(os.sep, "/"),
                              "content": ctx.redact(text), "_source_path": source.path, "_run_id": ctx.run_id})
    res.n_records = 1
    return res


@reader("plan_md")
def read_plan(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    return _read_document(source, ctx, "plan")


@reader("session_index_md")
def read_session_index(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    return _read_document(source, ctx, "session_index")
