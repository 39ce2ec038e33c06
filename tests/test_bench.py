"""The benchmark harness itself (not its timings): a tiny corpus, every step runs and reports."""

import json

from tools import bench


def test_bench_generates_a_corpus_and_runs_every_step(tmp_path, capsys):
    corpus = bench.generate(tmp_path / "corpus", 1)
    meta = json.loads((corpus / "corpus.json").read_text())
    logs = list((corpus / "copilot-home" / "session-state").glob("*/events.jsonl"))
    assert len(logs) == meta["sessions"] >= 3
    assert sum(p.stat().st_size for p in logs) >= 1024 * 1024
    assert (corpus / "copilot-home" / "session-store.db").is_file()
    assert list((corpus / "vscode-user").rglob("*.json"))
    sizes = {p: p.stat().st_size for p in logs}
    rows = bench.bench(corpus, tmp_path / "run")
    assert [r["step"][:3] for r in rows] == ["(a)", "(b)", "(c)", "(d)", "(e)", "(f)"]
    assert all(r["ok"] and r["seconds"] > 0 and r["rss_mb"] > 0 for r in rows)
    assert {p: p.stat().st_size for p in logs} == sizes  # the grown logs were cut back
    bench.print_table(1, rows)
    out = capsys.readouterr().out
    assert "full <= 2x floor" in out and "full/floor" in out
    assert "| events, " in bench.markdown({("events", 1): rows})
