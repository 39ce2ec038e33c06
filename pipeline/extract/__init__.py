"""Extract: one reader per source format, registered in ``base.READERS`` by source kind."""

from . import cli_home, events, store, vscode  # noqa: F401  (importing registers the readers)
