"""Recall and precision of secret redaction on a labelled corpus (tests/secrets_corpus.py): every planted
secret - 79 token formats and values named secret in 119 syntaxes and structures, in the places Copilot's
logs hold text - is redacted, and no look-alike from the real samples (code naming tokens and passwords,
placeholders, hashes, ids) is changed. The README quotes the figures this prints."""

from __future__ import annotations

import json

import pytest

from pipeline.extract.base import Context
from pipeline.extract.events import event_rows
from pipeline.redact import Redactor

from .secrets_corpus import lookalikes, measure, planted


def test_the_corpus_is_what_it_says():
    cases = planted()
    kinds = {c.kind for c in cases} | {f"named: {c.place}" for c in cases if c.kind == "secret_value"}
    assert len(cases) >= 200 and len(kinds) >= 25
    assert len(lookalikes()) >= 200
    assert len({c.secret for c in cases}) >= 200  # distinct secrets, each token format in five places


def test_every_planted_secret_is_redacted_and_no_lookalike_is_changed(capsys):
    score = measure(lambda text: Redactor()(text), lambda value: Redactor().structure(value))
    with capsys.disabled():
        print(f"\nsecret redaction on the labelled corpus: {score.line()}")
    assert [f"{c.kind} in {c.place}: {c.value!r:.120}" for c in score.missed] == []
    assert score.changed == []


@pytest.mark.parametrize("case", [c for c in planted() if isinstance(c.value, dict)][::3],
                         ids=lambda c: c.place)
def test_a_secret_in_tool_arguments_or_an_mcp_configuration_never_reaches_a_staged_row(case):
    """The reader's line screen sends the event to the rules, and the structure walk finds the value by its key
    or its option: in the arguments of a tool call and in an MCP server's configuration (session.start)."""
    import orjson

    from pipeline.redact import screen_lines

    for event in ({"type": "tool.execution_start", "data": {"toolCallId": "c1", "arguments": case.value}},
                  {"type": "session.mcp_servers_loaded", "data": {"servers": {"db": case.value}}}):
        line = orjson.dumps(event)
        screened = (bool(screen_lines(line, [0])), False)
        row, _requests = event_rows(orjson.loads(line), session_id="s", source_kind="events", index=0, line=1,
                                    offset=0, source_path="p", ctx=Context("r", Redactor()), screen=screened)
        assert screened[0] and case.secret not in json.dumps(row)


def test_the_redaction_measures_better_than_detect_secrets_on_the_corpus():
    """Kept over a maintained rule set because it measures better on the same corpus (tools/secrets_compare.py
    prints both): detect-secrets' default plugins and filters, each text scanned as a file."""
    pytest.importorskip("detect_secrets")
    from tools.secrets_compare import detect_secrets_redactor

    ours = measure(lambda text: Redactor()(text), lambda value: Redactor().structure(value))
    theirs = measure(detect_secrets_redactor())
    assert ours.recall > theirs.recall and ours.precision >= theirs.precision
    assert theirs.n_found > 50  # it did run, and find things


def test_the_line_screen_passes_every_planted_text_however_its_line_is_written():
    """The reader sends an event's raw line to the rules only when the line screen flags it: every planted text,
    written as Copilot writes a line (compact UTF-8), as Python's json writes it (every non-ASCII character
    escaped) and as JSON inside a JSON string (a tool's arguments), is flagged and comes out redacted."""
    import orjson

    from pipeline.redact import screen_lines

    for case in planted():
        if not isinstance(case.value, str):
            continue
        for line in (orjson.dumps({"data": {"content": case.value}}),
                     json.dumps({"data": {"content": case.value}}).encode(),
                     orjson.dumps({"data": {"arguments": json.dumps({"command": case.value})}})):
            assert screen_lines(line, [0]), f"{case.place}: {line[:160]!r}"
            redacted = Redactor()(line.decode())
            assert case.secret not in redacted, f"{case.place}: {redacted[:200]}"
