"""Secret redaction measured against detect-secrets (Yelp's scanner, its default plugins and filters) on the
labelled corpus of tests/secrets_corpus.py: recall on the planted secrets, precision on the look-alikes
from the real samples.

    python -m tools.secrets_compare

detect-secrets scans files: each text of the corpus is written to a file of its own and scanned with the
default settings (every plugin, the entropy limits, the heuristic filters), and what it reports is replaced
by a marker, as the pipeline's redaction does. Parsed JSON is scanned as its JSON text. Development only:
detect-secrets is a dev dependency, not the pipeline's.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))


def detect_secrets_redactor():
    """A text -> redacted text function backed by detect-secrets' default settings."""
    from detect_secrets import SecretsCollection
    from detect_secrets.settings import default_settings

    folder = Path(tempfile.mkdtemp(prefix="secrets-compare-"))
    counter = iter(range(10**9))

    def redact(text: str) -> str:
        path = folder / f"t{next(counter)}.txt"
        path.write_text(text, encoding="utf-8")
        collection = SecretsCollection()
        with default_settings():
            collection.scan_file(str(path))
        found = sorted({s.secret_value for _f, s in collection if s.secret_value}, key=len, reverse=True)
        path.unlink()
        for value in found:
            text = text.replace(value, "[REDACTED]")
        return text
    return redact


def main() -> int:
    from pipeline.redact import Redactor
    from tests.secrets_corpus import measure

    rows = [("this pipeline (pipeline/redact.py)", measure(lambda t: Redactor()(t), lambda v: Redactor().structure(v))),
            ("detect-secrets 1.5.0, default settings", measure(detect_secrets_redactor()))]
    print("| redactor | recall | precision | planted secrets missed | look-alikes changed |")
    print("|---|---|---|---|---|")
    for name, score in rows:
        print(f"| {name} | {score.recall:.1%} | {score.precision:.1%} | {len(score.missed)} of {score.n_planted} | "
              f"{len(score.changed)} of {score.n_lookalikes} |")
    for name, score in rows[1:]:
        kinds = sorted({c.kind if c.kind != "secret_value" else c.place for c in score.missed})
        print(f"\n{name} misses: {', '.join(kinds)}")
        print(f"{name} changes, e.g.: " + "; ".join(repr(t[:60]) for t in score.changed[:5]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
