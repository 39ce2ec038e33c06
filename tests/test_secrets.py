"""Secrets planted in every field of every source never reach the warehouse, parquet, wiki or logs.

The bundled sample corpus is copied and every text in it gets a secret: every string value of every
JSON, JSONL and YAML file, every text column of every SQLite row, every markdown file, and every
folder and file name that carries an id. The same text always gets the same secret, so ids still join
and the data still flows through every table. Each secret holds a unique 16-hex-digit needle; after
ingest, models and report, no needle may be found anywhere.
"""

from __future__ import annotations

import hashlib
import json
import logging
import re
import shutil
import sqlite3
from pathlib import Path

import duckdb
import pytest

from pipeline.cli import main

from .conftest import REPO

SAMPLE = REPO / "data" / "sample"
STRUCTURAL = {"type", "kind", "timestamp", "role", "version", "scheme", "$mid", "mimeType", "producer",
              "created_at", "updated_at", "startTime", "start_time", "end_time", "ref_type", "source_type"}
FIXED_NAMES = {"events.jsonl", "workspace.yaml", "vscode.metadata.json", "plan.md", "index.md", "workspace.json",
               "session-store.db", "session-store.db-wal", "state.vscdb"}  # names Copilot fixes, ids aside
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\d[T ]\d\d:\d\d")


class Planter:
    """Gives each text its own secret, in one of the formats people leak (tokens, keys, URL passwords)."""

    def __init__(self):
        self.needles: dict[str, str] = {}  # needle -> what it was planted in

    def secret(self, value: str, where: str) -> tuple[str, str]:
        h = hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()
        needle = h[:16]
        self.needles.setdefault(needle, where)
        kinds = [
            lambda: "ghp_" + h[:36],
            lambda: "github_pat_" + h[:22] + "_" + h[22:59],
            lambda: "sk-proj-" + h[:48],
            lambda: "sk-ant-api03-" + h[:40],
            lambda: "AKIA" + h[:16].upper(),
            lambda: "xoxb-1234567890-" + h[:24],
            lambda: "glpat-" + h[:20],
            lambda: "hf_" + h[:34],
            lambda: "api_key=" + h[:24],
            # what only the structure of the text names: an .env line, an option, a connection string
            lambda: f"\nSECRET_KEY_BASE={h[:40]}\n",
            lambda: f"mysql --password {h[:20]}Qz",
            lambda: f"Server=db;Password={h[:24]}x;",
            # quoted values whose first word is short, an option's quoted value, a shell default, a key naming
            # a connection string: shapes the rules know and the line screen once let through
            lambda: f'password = "ok {h[:24]} x"',
            lambda: f"deploy --api-key 'ab {h[:20]}'",
            lambda: f"${{DB_PASSWORD:-'{h[:20]}'}}",
            lambda: f'ConnectionString="Data Source=db;Initial Catalog={h[:20]}"',
            # a YAML or .env line inside a text (in JSON text, its line break is written out as `\\n`), a
            # quoted value with a comment after it, and the usual places: a header, a JSON text, a URL query
            lambda: f"\npassword: {h[:20]}Zq\n",
            lambda: f'token: "{h[:20]}" # comment',
            lambda: f"Authorization: Bearer {h[:32]}",
            lambda: '{"apiKey":"' + h[:24] + '"}',
            lambda: f"api.example.com?access_token={h[:32]}&x=1",
            lambda: f"$env:API_TOKEN = \"{h[:24]}\"",
            lambda: f"密码 password={h[:20]}",
            # a Kubernetes manifest's env list (the name on one line, the value on the next), a tab-separated
            # setting of hex digits, a fenced .env block, a basic credential
            lambda: f"- name: API_TOKEN\n  value: {h[:24]}",
            lambda: f"password\t=\t{h[:20]}",
            lambda: f"```env\nAPI_KEY={h[:24]}\n```",
            lambda: f"Authorization: Basic {h[:28]}==",
            # a fifth round: a Python triple-quoted value, Dockerfile ENV/ARG lines, a header in kebab-case
            lambda: f'token = """{h[:24]}"""',
            lambda: f"ARG NPM_TOKEN={h[:24]}",
            lambda: f"api-key: {h[:24]}",
            # a sixth round: commands that take a password their own way, a setting set by a command, an
            # environment indexed by name, .netrc, a call's arguments, a Cookie header, a Java property
            lambda: f"sshpass -p '{h[:20]}Zq' ssh deploy@host",
            lambda: f"mysql -u root -p{h[:20]}Zq app",
            lambda: f"setx GITHUB_TOKEN {h[:24]}",
            lambda: f'os.environ["API_KEY"] = "{h[:24]}"',
            lambda: f"machine api.example.com login ana password {h[:20]}Zq",
            lambda: f'SetEnvironmentVariable("API_TOKEN", "{h[:24]}")',
            lambda: f"Cookie: sid={h[:24]}; theme=dark",
            lambda: f"java -Dpassword={h[:20]}Zq -jar app.jar",
            # a seventh round: more commands, PowerShell's credentials, ODBC's PWD, Spring's default
            lambda: f"redis-cli -h cache -a {h[:20]}Zq ping",
            lambda: f"az login --service-principal -u app -p {h[:20]}Zq --tenant t",
            lambda: f"ConvertTo-SecureString '{h[:20]}Zq' -AsPlainText -Force",
            lambda: f"Server=db;UID=sa;PWD={h[:20]}Zq;",
            lambda: f"password: ${{DB_PASSWORD:{h[:20]}Zq}}",
            # token formats that name themselves by a prefix: AI providers', Google OAuth's
            lambda: "gsk_" + h[:52],
            lambda: "sk-or-v1-" + h[:64],
            lambda: "pplx-" + h[:48],
            lambda: "ya29.a0" + h[:40],
            # an eighth round: SQL, LDAP, keytool, Redis, a login call
            lambda: f"CREATE USER app WITH PASSWORD '{h[:20]}Zq';",
            lambda: f"ldapsearch -x -D cn=admin -w {h[:20]}Zq -b dc=ex",
            lambda: f"keytool -genkey -storepass {h[:20]}Zq -keystore k.jks",
            lambda: f"requirepass {h[:20]}Zq",
            lambda: f"smtp.login('ana', '{h[:20]}Zq')",
            # a ninth round: an archive's password, Oracle's user/password
            lambda: f"7z a -p{h[:20]}Zq backup.7z src",
            lambda: f"sqlplus system/{h[:20]}Zq@orcl",
            # a tenth round: a JSON object pairing a name with a value, as text
            lambda: '{"name": "DB_PASSWORD", "value": "' + h[:20] + 'Zq"}',
        ]
        return kinds[int(h[60:], 16) % len(kinds)](), needle

    def text(self, value: str, where: str) -> str:
        if TIMESTAMP.match(value):
            return value
        if "://" in value:  # credentials inside a URL: user:password@ or a token as the user
            scheme, rest = value.split("://", 1)
            token, _ = self.secret(value, where)
            h = hashlib.sha256(value.encode("utf-8", "surrogateescape")).hexdigest()
            cred = f"dev:{h[:16]}Pw" if int(h[-1], 16) % 2 else f"x-access-token:{token}"
            return f"{scheme}://{cred}@{rest}"
        token, _ = self.secret(value, where)
        return f"{value} {token}"

    def json(self, value, where: str, key: str | None = None):
        if isinstance(value, dict):
            out = {k: (v if k in STRUCTURAL and isinstance(v, str) else self.json(v, f"{where}.{k}", k))
                   for k, v in value.items()}
            token, _ = self.secret(f"key of {where}", f"{where} (a key)")
            out[token] = "unknown key"  # an unknown key holding a secret
            # a key that names a secret, its value in no token format (tool arguments, an MCP server's env)
            h = hashlib.sha256(f"value of {where}".encode("utf-8", "surrogateescape")).hexdigest()
            self.needles.setdefault(h[:16], f"{where} (client_secret)")
            out["client_secret"] = f"{h[:16]}/{h[16:30]}="
            return out
        if isinstance(value, list):
            if key == "k":  # a mutation log's path into the state: structure, not text
                return value
            return [self.json(v, f"{where}[]") for v in value]
        if isinstance(value, str):
            return self.text(value, where)
        return value

    def name(self, path: Path) -> Path:
        """Rename a file or folder: its stem gets the secret of the stem (ids join with the content)."""
        stem, suffix = (path.name, "") if path.is_dir() else (path.stem, path.suffix)
        new = path.with_name(self.text(stem, f"name {path.name}") + suffix)
        path.rename(new)
        return new


def _plant_sqlite(db: Path, p: Planter) -> None:
    con = sqlite3.connect(db)
    con.text_factory = lambda b: b.decode("utf-8", "surrogateescape")
    tables = [r[0] for r in con.execute("select name from sqlite_master where type = 'table' and sql not like "
                                        "'CREATE TABLE ''%' and name not like 'sqlite_%'")]
    for table in tables:
        if table in ("schema_version",):
            continue
        cols = [r[1] for r in con.execute(f'pragma table_info("{table}")')]
        for rowid, *values in con.execute(f'select rowid, * from "{table}"').fetchall():
            new = []
            for col, v in zip(cols, values, strict=True):
                if not isinstance(v, str) or col in STRUCTURAL or col == "key":
                    new.append(v)
                elif table == "ItemTable" and col == "value":
                    new.append(json.dumps(p.json(json.loads(v), f"{db.name}.{table}")))
                else:
                    new.append(p.text(v, f"{db.name} {table}.{col}"))
            sets = ", ".join(f'"{c}" = ?' for c in cols)
            con.execute(f'update "{table}" set {sets} where rowid = ?', [*new, rowid])
    con.commit()
    con.execute("pragma wal_checkpoint(truncate)")
    con.close()


def _plant_line(p: Planter, line: str, where: str) -> str:
    try:
        return json.dumps(p.json(json.loads(line), where))
    except ValueError:  # the sample's broken lines (an event split in two, a torn tail) stay as they are
        return line


def plant_corpus(dst: Path) -> Planter:
    p = Planter()
    shutil.copytree(SAMPLE, dst)
    files = sorted((f for f in dst.rglob("*") if f.is_file()), key=lambda f: -len(f.parts))
    for f in files:
        where = str(f.relative_to(dst))
        if f.suffix == ".json":
            f.write_text(json.dumps(p.json(json.loads(f.read_text(encoding="utf-8-sig")), where)))
        elif f.suffix == ".jsonl":
            f.write_text("".join(_plant_line(p, line, where) + "\n"
                                 for line in f.read_text(encoding="utf-8-sig").splitlines()))
        elif f.suffix == ".yaml":  # line by line: the sample holds a broken workspace.yaml too
            lines = []
            for line in f.read_text().splitlines():
                m = re.match(r"^([A-Za-z_]+):\s*(.+)$", line)
                if m and m.group(1) not in STRUCTURAL:
                    value = m.group(2).strip().strip("'\"")
                    line = f"{m.group(1)}: {json.dumps(p.text(value, f'{where}:{m.group(1)}'))}"
                lines.append(line)
            token, _ = p.secret(f"yaml key {where}", f"{where} (unknown key)")
            f.write_text("\n".join(lines) + f"\nunknown_setting: {token}\n")
        elif f.suffix == ".md":
            f.write_text(p.text(f.read_text(), where) + "\n")
        elif f.suffix in (".db", ".vscdb"):
            _plant_sqlite(f, p)
    # every name that carries an id or a title: sessions, workspaces, chat files, checkpoints, memories
    for f in files:
        if f.name not in FIXED_NAMES and f.exists():
            p.name(f)
    for d in sorted((d for d in dst.rglob("*") if d.is_dir()), key=lambda d: -len(d.parts)):
        if d.parent.name in ("session-state", "workspaceStorage", "memories"):
            p.name(d)
    # what the sample does not have: an unknown event type, reasoning, transformed content
    folder = next(d for d in sorted((dst / "copilot-home" / "session-state").iterdir()) if d.is_dir())
    if folder.is_dir():
        log = folder / "events.jsonl"
        token, _ = p.secret("event type", "an unknown event type")
        with open(log, "a") as fh:
            for ev in ({"type": f"custom.{token}", "id": "planted-1", "data": {}},
                       {"type": "assistant.reasoning", "id": "planted-2",
                        "data": {"reasoningId": "r1", "content": "zebra reasoning text"}},
                       {"type": "assistant.reasoning_delta", "id": "planted-3",
                        "data": {"reasoningId": "r1", "deltaContent": "zebra reasoning delta"}},
                       {"type": "user.message", "id": "planted-4",
                        "data": {"content": "plain prompt", "transformedContent": "zebra transformed prompt"}},
                       {"type": "assistant.message", "id": "planted-5",
                        "data": {"content": "answer", "reasoningText": "zebra chain", "reasoningOpaque": "zebraop"}}):
                fh.write(json.dumps(ev) + "\n")
    return p


def _found(p: Planter, text: str) -> list[str]:
    return [f"{n} ({p.needles[n]})" for n in p.needles if n in text]


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    root = tmp_path_factory.mktemp("secrets")
    p = plant_corpus(root / "corpus")
    return root, p


def test_no_planted_secret_reaches_any_table_parquet_wiki_or_log(planted, capfd, caplog):
    root, p = planted
    caplog.set_level(logging.DEBUG)
    assert len(p.needles) > 500  # every field of every source got one
    wh, out = root / "w.duckdb", root / "out"
    assert main(["-v", "ingest", "--copilot-home", str(root / "corpus" / "copilot-home"),
                 "--vscode-user", str(root / "corpus" / "vscode-user"), "--warehouse", str(wh)]) == 0
    assert main(["-v", "report", "--warehouse", str(wh), "--out", str(out)]) == 0
    out_err = capfd.readouterr()
    assert len(caplog.records) > 3  # what was logged, workers' warnings included
    assert _found(p, out_err.out + out_err.err + caplog.text) == []

    con = duckdb.connect(str(wh), read_only=True)
    tables = [r[0] for r in con.execute("select table_name from information_schema.tables "
                                        "where table_type = 'BASE TABLE'").fetchall()]
    n_redacted = 0
    for table in tables:
        text = repr(con.execute(f'select * from "{table}"').fetchall())
        n_redacted += text.count("[REDACTED:")
        assert _found(p, text) == [], table
        assert "zebra" not in text, table  # reasoning and transformedContent are never stored
    con.close()
    assert n_redacted > 500
    assert _found(p, wh.read_bytes().decode("latin-1")) == []

    parquet = list(out.rglob("*.parquet"))
    assert parquet
    con = duckdb.connect()
    for f in parquet:
        text = repr(con.execute("select * from read_parquet(?)", [str(f)]).fetchall())
        assert _found(p, text) == [], f.name
    pages = [f for f in out.rglob("*") if f.is_file() and f.suffix != ".parquet"]
    assert pages
    for f in pages:
        assert _found(p, f.name + f.read_bytes().decode("utf-8", "replace")) == [], f
    assert not list(root.glob(".ingest-*"))  # no unredacted copy left beside the warehouse


def test_the_planted_corpus_still_flows_through_every_table(planted, tmp_path):
    """The test above proves something only if the planted data reached the tables it could leak into:
    every table the clean sample fills is filled from the planted one too."""
    root, _p = planted
    counts = {}
    for name, home, user in (("clean", SAMPLE / "copilot-home", SAMPLE / "vscode-user"),
                             ("planted", root / "corpus" / "copilot-home", root / "corpus" / "vscode-user")):
        wh = tmp_path / f"{name}.duckdb"
        assert main(["ingest", "--copilot-home", str(home), "--vscode-user", str(user), "--warehouse", str(wh),
                     "--quiet"]) == 0
        con = duckdb.connect(str(wh), read_only=True)
        counts[name] = {t: con.execute(f'select count(*) from "{t}"').fetchone()[0] for (t,) in con.execute(
            "select table_name from information_schema.tables where table_type = 'BASE TABLE'").fetchall()}
        if name == "planted":
            assert con.execute("select count(*) from dim_files where path like '%[REDACTED:%'").fetchone()[0] > 0
        con.close()
    # file pairs need two files under one planted root: coupling is computed from dim_files, checked above
    empty = [t for t, n in counts["clean"].items() if n and not counts["planted"][t] and t != "report_file_coupling"]
    assert empty == []
    assert counts["planted"]["stg_events"] == counts["clean"]["stg_events"] + 5  # the five events added
