"""Errors a user can act on, told in one line with exit status 2 (the CLI catches them)."""

from __future__ import annotations


class LakeError(Exception):
    """The lake cannot be attached, or a push failed for good."""


class OutputError(Exception):
    """An output folder or file the report may not write: a file it did not write, a link out of the folder."""


class ServeError(Exception):
    """`serve` cannot listen where it was asked to."""


class SourceError(Exception):
    """A named source folder does not exist or is not a folder."""
