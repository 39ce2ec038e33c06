"""Discovery of a Copilot CLI home and the readers for its per-session side files."""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

import yaml

from .base import Context, Prior, ReadResult, Source, as_text, load_json_file, read_bytes, reader, to_json
from .events import history_session_id

log = logging.getLogger(__name__)

CHECKPOINT_SECTIONS = ("overview", "history", "work_done", "technical_details", "important_files", "next_steps")


def default_copilot_homes(env=os.environ) -> list[Path]:
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


def discover_copilot_home(root: Path) -> list[Source]:
    """Every source unit under a Copilot CLI home, in a stable order."""
    root = root.resolve()
    r = str(root)
    out: list[Source] = []
    state = root / "session-state"
    if state.is_dir():
        # os.scandir: one directory read per folder, file types without a stat (10k+ sessions)
        with os.scandir(state) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            if entry.is_dir():
                out.extend(_session_folder(entry.path, entry.name, r))
            elif entry.is_file() and entry.name.endswith(".jsonl"):
                out.append(Source(entry.path, "legacy_jsonl", entry.name[: -len(".jsonl")], r))
    hist = root / "history-session-state"
    if hist.is_dir():
        for entry in sorted(hist.glob("*.json")):
            out.append(Source(str(entry), "history_json", history_session_id(str(entry)), r))
    store = root / "session-store.db"
    if store.is_file():
        out.append(Source(str(store), "session_store", None, r))
    elif (root / "session-store.db-wal").is_file():
        out.append(Source(str(root / "session-store.db-wal"), "orphan_wal", None, r))
    return out


_SESSION_FILES = (("workspace.yaml", "workspace_yaml"), ("events.jsonl", "events"),
                  ("vscode.metadata.json", "vscode_metadata"), ("plan.md", "plan_md"),
                  ("index.md", "session_index_md"))


def _session_folder(folder: str, sid: str, root: str) -> list[Source]:
    with os.scandir(folder) as it:
        entries = {e.name: e for e in it}
    out = []
    for name, kind in _SESSION_FILES:
        e = entries.get(name)
        if e is not None and e.is_file():
            out.append(Source(e.path, kind, sid, root))
    cp = entries.get("checkpoints")
    if cp is not None and cp.is_dir():
        with os.scandir(cp.path) as it:
            if next(it, None) is not None:
                out.append(Source(cp.path, "checkpoints", sid, root))
    return out


# ------------------------------------------------------------------------------ workspace.yaml
_YAML_LINE = re.compile(r"^(?P<k>[A-Za-z_][A-Za-z0-9_]*):\s?(?P<v>.*)$")
_WORKSPACE_FIELDS = {"name", "summary", "cwd", "git_root", "repository", "branch", "host_type",
                     "client_name", "created_at", "updated_at"}


# libyaml's C loader when PyYAML was built with it (10x faster on thousands of small files)
_YAML_LOADER = getattr(yaml, "CBaseLoader", yaml.BaseLoader)


@reader("workspace_yaml")
def read_workspace_yaml(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    res = ReadResult()
    raw = read_bytes(source.path)
    text = raw.lstrip(b"\xef\xbb\xbf").replace(b"\x00", b"").decode("utf-8", "replace")
    try:
        doc = yaml.load(text, Loader=_YAML_LOADER)  # BaseLoader: every value stays a string
        if doc is None:
            doc = {}
        if not isinstance(doc, dict):
            raise yaml.YAMLError("top level is not a mapping")
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())[:300]
        res.reject(source.path, f"workspace.yaml is not valid YAML ({reason}); simple key: value lines kept",
                   excerpt=ctx.redact(text[:200]))
        doc = _salvage_yaml(text)
    r = ctx.redact
    row = {
        "session_id": source.session_id, "source_kind": "workspace_yaml",
        "title": r(_s(doc.get("name"))), "summary": r(_s(doc.get("summary"))),
        "cwd": _s(doc.get("cwd")), "git_root": _s(doc.get("git_root")),
        "repository": _s(doc.get("repository")), "branch": _s(doc.get("branch")),
        "host_type": _s(doc.get("host_type")), "client_name": _s(doc.get("client_name")),
        "created_at": _s(doc.get("created_at")), "updated_at": _s(doc.get("updated_at")),
        "first_user_message": None,
        "extra": to_json({k: v for k, v in doc.items() if k not in _WORKSPACE_FIELDS}) or None,
        "_source_path": source.path, "_run_id": ctx.run_id,
    }
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
            out[m.group("k")] = m.group("v").strip().strip("'\"")
    return out


def _s(v) -> str | None:
    if v is None:
        return None
    if isinstance(v, (dict, list)):
        return to_json(v)
    v = str(v)
    return v if v.strip() else None


# ------------------------------------------------------------------------------ vscode.metadata.json
@reader("vscode_metadata")
def read_vscode_metadata(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    res = ReadResult()
    doc = load_json_file(source, res, ctx)
    if doc is None:
        return res
    folder = doc.get("workspaceFolder") if isinstance(doc.get("workspaceFolder"), dict) else {}
    repo = {}
    for key in ("worktreeProperties", "repositoryProperties"):
        if isinstance(doc.get(key), dict):
            repo = doc[key]
            break
    r = ctx.redact
    res.add("stg_session_meta", {
        "session_id": source.session_id, "source_kind": "vscode_metadata",
        "title": r(_s(doc.get("customTitle"))), "summary": None,
        "cwd": _s(folder.get("folderPath")), "git_root": _s(repo.get("repositoryPath")),
        "repository": None, "branch": _s(repo.get("branchName")), "host_type": "vscode",
        "client_name": "vscode", "created_at": _epoch_ms_iso(folder.get("timestamp")), "updated_at": None,
        "first_user_message": r(_s(doc.get("firstUserMessage"))),
        "extra": to_json({k: v for k, v in doc.items()
                          if k not in ("customTitle", "firstUserMessage", "workspaceFolder")}),
        "_source_path": source.path, "_run_id": ctx.run_id,
    })
    res.n_records = 1
    return res


def _epoch_ms_iso(v) -> str | None:
    if isinstance(v, (int, float)) and not isinstance(v, bool):
        from datetime import datetime, timezone
        return datetime.fromtimestamp(v / 1000, tz=timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return _s(v)


# ------------------------------------------------------------------------------ checkpoints/
_SECTION = re.compile(r"<(?P<tag>" + "|".join(CHECKPOINT_SECTIONS) + r")>\s*(?P<body>.*?)\s*</(?P=tag)>", re.S)
_MD_NAME = re.compile(r"^(?P<n>\d+)[-_ ]?(?P<slug>.*)\.md$")
_INDEX_ROW = re.compile(r"^\|\s*(?P<n>\d+)\s*\|(?P<rest>.*)\|\s*$")
_HEADING = re.compile(r"^#{1,3}\s+(?P<t>.+?)\s*$", re.M)


@reader("checkpoints")
def read_checkpoints(source: Source, ctx: Context, prior: Prior | None) -> ReadResult:
    """``checkpoints/index.md`` + ``NNN-slug.md`` (real CLI) and ``<uuid>.json`` (the seed note)."""
    res = ReadResult()
    folder = Path(source.path)
    titles = _index_titles(folder / "index.md", res, ctx)
    r = ctx.redact
    md_files = sorted(p for p in folder.iterdir() if p.is_file() and _MD_NAME.match(p.name))
    for p in md_files:
        m = _MD_NAME.match(p.name)
        n = int(m.group("n"))
        text = read_bytes(str(p)).lstrip(b"\xef\xbb\xbf").replace(b"\x00", b"").decode("utf-8", "replace")
        sections = {mm.group("tag"): mm.group("body") for mm in _SECTION.finditer(text)}
        if not sections and not text.strip():
            res.reject(str(p), "checkpoint file is empty")
            continue
        if not sections:
            sections["overview"] = text.strip()
        heading = _HEADING.search(text.split("<", 1)[0])
        title = titles.get(n) or (heading.group("t") if heading else None) or \
            m.group("slug").replace("-", " ").strip() or None
        res.add("stg_checkpoints", _checkpoint_row(source, ctx, "folder_md", n, title, sections, None, str(p)))
    json_files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix == ".json")
    json_rows = []
    for p in json_files:
        doc = load_json_file(Source(str(p), "checkpoint_json", source.session_id), res, ctx)
        if doc is None:
            continue
        number = doc.get("checkpoint_number", doc.get("checkpointNumber", doc.get("number")))
        created = _s(doc.get("created_at") or doc.get("createdAt") or doc.get("timestamp"))
        sections = {k: as_text(doc.get(k) if k in doc else doc.get(_camel(k))) for k in CHECKPOINT_SECTIONS}
        json_rows.append((number if isinstance(number, int) else None, created or "", p.name, doc, sections, p))
    # JSON checkpoints without a number are numbered by creation time, then file name
    taken = {row["checkpoint_number"] for row in res.rows.get("stg_checkpoints", [])}
    next_n = max(taken, default=0)
    for number, created, _name, doc, sections, p in sorted(json_rows, key=lambda t: (t[1], t[2])):
        if number is None or number in taken:
            next_n += 1
            number = next_n
        taken.add(number)
        next_n = max(next_n, number)
        res.add("stg_checkpoints", _checkpoint_row(source, ctx, "folder_json", number, r(_s(doc.get("title"))),
                                                   sections, created or None, str(p)))
    res.n_records = len(res.rows.get("stg_checkpoints", []))
    return res


def _camel(k: str) -> str:
    head, *rest = k.split("_")
    return head + "".join(w.title() for w in rest)


def _checkpoint_row(source, ctx, kind, n, title, sections, created, path):
    r = ctx.redact
    row = {"session_id": source.session_id, "source_kind": kind, "checkpoint_number": n,
           "title": r(title), "created_at": created, "_source_path": path, "_run_id": ctx.run_id}
    for k in CHECKPOINT_SECTIONS:
        v = sections.get(k)
        row[k] = r(v.strip()) if isinstance(v, str) and v.strip() else None
    return row


def _index_titles(index: Path, res: ReadResult, ctx: Context) -> dict[int, str]:
    """Checkpoint titles from the markdown table in ``checkpoints/index.md``."""
    if not index.is_file():
        return {}
    out = {}
    text = read_bytes(str(index)).decode("utf-8", "replace")
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
