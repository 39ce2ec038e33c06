"""Extract: one reader per source format, registered in ``base.READERS`` by source kind."""

from . import cli_home, events, store  # noqa: F401  (importing registers the readers)
