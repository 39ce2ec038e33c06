"""Extract: one reader per source kind (declared in ``pipeline/sources.py``), registered in
``base.READERS`` by ``@reader(kind)``; discovery of the files of each kind; reading on every core."""

from collections.abc import Iterable
from pathlib import Path

from ..sources import KINDS
from . import cli_home, events, store, vscode  # noqa: F401  (importing registers the readers)
from .base import READERS, Finder, Source, stat_fingerprint

__all__ = ["READERS", "discover", "fingerprint"]


def discover(copilot_homes: Iterable[Path], vscode_users: Iterable[Path] = (),
             finder: Finder | None = None) -> list[Source]:
    """Every source under the roots; what cannot be listed or examined goes to ``finder.problems``."""
    finder = finder or Finder()
    out: list[Source] = []
    for home in copilot_homes:
        out.extend(cli_home.discover_copilot_home(Path(home), finder))
    for user in vscode_users:
        out.extend(vscode.discover_vscode_user(Path(user), finder))
    return out

_FINGERPRINTS = {"stat": stat_fingerprint, "sqlite": store.store_fingerprint}


def fingerprint(src: Source) -> tuple[str, int]:
    """(fingerprint, size) of a source, as its kind declares: what tells a changed source from an unchanged one."""
    return _FINGERPRINTS[KINDS[src.kind].fingerprint](src.path)
